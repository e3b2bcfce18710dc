// Kernels made by hand (ir::outlineKernel) whose bodies the fused strategies cannot express
// fall back to per-op lowering and still compute the right values; large shapes take the
// parallel_for path of every stage kind.
#include <gtest/gtest.h>

#include "frontend/Frontend.h"
#include "ir/KernelOutline.h"
#include "tests/codegen/CodegenTestUtil.h"

namespace kiln::codegen::test {
namespace {

using frontend::GraphBuilder;
using frontend::Var;

// Only dce (and plan-memory, whose plan codegen emits): the test's own kernels reach codegen
// as they are.
CompileOptions handMadeKernels() {
  CompileOptions options = testOptions();
  options.passes = {"dce", "plan-memory"};
  return options;
}

TEST(CodegenStrategy, ReductionReadAtAnotherRowFallsBackToPerOp) {
  GraphBuilder gb("transposed_row");
  Var x = gb.input("x", DType::F32, {5, 5});
  Var sums = frontend::sum(x, {1}, true);                    // [5,1]: one value per row i
  Var y = x + frontend::permute(sums, {1, 0});               // element (i,j) reads row j's sum
  auto graph = gb.finish({y});
  std::vector<ir::Node *> group{sums.value()->producer(), y.value()->producer()->input(1)->producer(),
                                y.value()->producer()};
  ir::outlineKernel(*graph, group, "reduction");
  expectMatchesReference(*graph, randomInputs(*graph, 61), handMadeKernels());
  EXPECT_EQ(launchStrategies(*graph, handMadeKernels()), std::vector<std::string>{"per-op"});
}

TEST(CodegenStrategy, EpilogueReadingTheProductTransposedFallsBackToPerOp) {
  GraphBuilder gb("transposed_epilogue");
  Var a = gb.input("a", DType::F32, {6, 4});
  Var b = gb.input("b", DType::F32, {4, 6});
  Var product = frontend::matmul(a, b);
  Var y = product + frontend::permute(product, {1, 0});
  auto graph = gb.finish({y});
  std::vector<ir::Node *> group{product.value()->producer(), y.value()->producer()->input(1)->producer(),
                                y.value()->producer()};
  ir::outlineKernel(*graph, group, "contraction+epilogue");
  expectMatchesReference(*graph, randomInputs(*graph, 62), handMadeKernels());
  EXPECT_EQ(launchStrategies(*graph, handMadeKernels()), std::vector<std::string>{"per-op"});
}

TEST(CodegenStrategy, ContractionOperandComputedInTheKernelIsMaterialised) {
  GraphBuilder gb("prologue");
  Var a = gb.input("a", DType::F32, {7, 5});
  Var w = gb.input("w", DType::F32, {5, 3});
  Var scaled = frontend::tanh(a) * 2.0;
  Var y = frontend::relu(frontend::matmul(scaled, w));
  auto graph = gb.finish({y});
  std::vector<ir::Node *> group;
  for (ir::Node *node : graph->nodes())
    if (node->op() != ir::OpKind::Constant)
      group.push_back(node);
  ir::outlineKernel(*graph, group, "contraction+epilogue");
  expectMatchesReference(*graph, randomInputs(*graph, 63), handMadeKernels());
  EXPECT_EQ(launchStrategies(*graph, handMadeKernels()), std::vector<std::string>{"contraction"});
}

TEST(CodegenStrategy, LargeShapesRunInParallel) {
  GraphBuilder gb("parallel");
  Var x = gb.input("x", DType::F32, {256, 300});
  Var w = gb.input("w", DType::F32, {300, 200});
  Var b = gb.input("b", DType::F32, {200});
  Var h = frontend::gelu(frontend::matmul(x, w) + b);
  Var s = frontend::softmax(h, -1);
  Var t = frontend::sum(frontend::transpose(x, 0, 1) * 2.0, {1});
  auto graph = gb.finish({s, t, frontend::argmax(h, 0)});
  expectMatchesReference(*graph, randomInputs(*graph, 64), testOptions(), 1e-4, 1e-5);
}

TEST(CodegenStrategy, MathCallsCountTowardsTheParallelThreshold) {
  // 256 rows of 64 (16384 elements, under kMinParallelElements): an add runs on the calling
  // thread, while a softmax, whose exp costs kMathCallCost elements' worth each, is enough work
  // to wake the pool (an attention softmax of this size took 36 us on one thread).
  GraphBuilder plain("small_add");
  Var x = plain.input("x", DType::F32, {4, 64, 64});
  auto add = plain.finish({x + 1.0});
  EXPECT_EQ(countInSource(*add, "rt->parallel_for("), 0);
  GraphBuilder math("small_softmax");
  Var s = math.input("s", DType::F32, {4, 64, 64});
  auto softmax = math.finish({frontend::softmax(s)});
  EXPECT_EQ(countInSource(*softmax, "rt->parallel_for("), 1);
  expectMatchesReference(*softmax, randomInputs(*softmax, 65), withThreads(2));
}

} // namespace
} // namespace kiln::codegen::test
