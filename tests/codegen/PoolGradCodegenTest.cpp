// max_pool_grad compiled (a Direct stage, codegen/EmitPoolGrad.cpp) against the reference
// evaluator, bit for bit, on inputs drawn from a few values so that windows hold ties: LeNet's
// disjoint 2x2 stride 2, ResNet's overlapping 3x3 stride 2 pad 1 (the double scratch, counted a
// row of windows at a time), NaN and infinities, ceil_mode,
// dilation, uneven pads, 1-D and 3-D, f64, planes large enough to run in parallel, at one and two
// threads; and max_pool's gradient rule, which now emits the op, compiled end to end.
#include <cmath>
#include <memory>

#include <gtest/gtest.h>

#include "frontend/Frontend.h"
#include "ir/Builder.h"
#include "passes/autodiff/Autodiff.h"
#include "runtime/ThreadPool.h"
#include "tests/codegen/CodegenTestUtil.h"

namespace kiln::codegen::test {
namespace {

using frontend::GraphBuilder;
using frontend::Var;
using Ints = std::vector<int64_t>;

// Values in {-1, -0.5, 0, 0.5}: most windows hold ties.
Tensor fewValues(const TensorType &type, uint64_t seed) {
  Tensor t = randomTensor(type, seed);
  for (int64_t i = 0; i < t.numElements(); ++i)
    t.setDouble(i, std::floor(t.getDouble(i) * 2.0) / 2.0);
  return t;
}

// Compiles dx = max_pool_grad(x, max_pool(x), g) and expects the reference's result exactly, at
// one and two threads. Returns the generated source.
std::string check(const Shape &xs, const ir::AttrMap &attrs, uint64_t seed, DType dtype = DType::F32) {
  SCOPED_TRACE(::testing::Message() << "x " << shapeToString(xs) << " seed " << seed);
  GraphBuilder gb("max_pool_grad");
  Var x = gb.input("x", dtype, xs);
  Var y = gb.op(ir::OpKind::MaxPool, {x}, attrs);
  Var g = gb.input("g", dtype, y.shape());
  Var dx = gb.op(ir::OpKind::MaxPoolGrad, {x, y, g}, attrs);
  auto graph = gb.finish({dx});
  std::vector<Tensor> inputs{fewValues({dtype, xs}, seed), randomTensor({dtype, y.shape()}, seed + 1)};
  for (int threads : {1, 2}) {
    SCOPED_TRACE(::testing::Message() << threads << " threads");
    expectMatchesReference(*graph, inputs, withThreads(threads), 0.0, 0.0);
  }
  return lowerGraph(*graph, testOptions()).model.source;
}

TEST(CodegenMaxPoolGrad, LeNetDisjointWindowsWriteDirectly) {
  std::string source = check({4, 6, 28, 28}, {{"kernel", Ints{2, 2}}, {"strides", Ints{2, 2}}}, 1);
  EXPECT_NE(source.find("// max_pool_grad: 24 planes of 784 inputs, 196 windows of 4 taps (disjoint windows)"),
            std::string::npos);
  // No padding and no window past the end: no bounds test.
  EXPECT_EQ(source.find(">= 28) continue;"), std::string::npos);
  check({64, 16, 10, 10}, {{"kernel", Ints{2, 2}}, {"strides", Ints{2, 2}}}, 3); // parallel rows
}

TEST(CodegenMaxPoolGrad, ResNetOverlappingWindowsUseADoubleScratch) {
  ir::AttrMap stem{{"kernel", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}};
  std::string source = check({2, 8, 32, 32}, stem, 5);
  EXPECT_NE(source.find("(double scratch)"), std::string::npos);
  // A 2-D one counts ties a row of windows at a time, from a NaN-padded copy of the input row.
  EXPECT_NE(source.find("float row[33];"), std::string::npos);
  check({1, 3, 9, 9}, stem, 7);
  check({2, 3, 9, 8}, stem, 9, DType::F64); // f64 accumulates in place
}

TEST(CodegenMaxPoolGrad, NaNAndInfinitiesInOverlappingWindows) {
  // A NaN max ties nothing (its window adds nothing), padding never ties, not even with a -inf
  // max, and +inf ties like any value: the row-at-a-time count must agree with the reference.
  ir::AttrMap stem{{"kernel", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}};
  const Shape xs{2, 3, 11, 10};
  GraphBuilder gb("max_pool_grad_specials");
  Var x = gb.input("x", DType::F32, xs);
  Var y = gb.op(ir::OpKind::MaxPool, {x}, stem);
  Var g = gb.input("g", DType::F32, y.shape());
  auto graph = gb.finish({gb.op(ir::OpKind::MaxPoolGrad, {x, y, g}, stem)});
  Tensor xv = fewValues({DType::F32, xs}, 29);
  const double specials[] = {std::nan(""), -INFINITY, INFINITY};
  for (int64_t i = 0; i < xv.numElements(); i += 7)
    xv.setDouble(i, specials[i % 3]);
  for (int64_t i = 0; i < 10; ++i) // one whole row -inf: windows whose real taps are all -inf
    xv.setDouble(3 * 10 + i, -INFINITY);
  for (int threads : {1, 2})
    expectMatchesReference(*graph, {xv, randomTensor({DType::F32, y.shape()}, 31)}, withThreads(threads), 0.0, 0.0);
}

TEST(CodegenMaxPoolGrad, VeryWideRowsKeepTheWindowByWindowForm) {
  // 5000 windows in a row: their counts would not fit the row form's stack arrays.
  ir::AttrMap stem{{"kernel", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}};
  std::string source = check({1, 1, 3, 10000}, stem, 33);
  EXPECT_EQ(source.find("float row["), std::string::npos);
}

TEST(CodegenMaxPoolGrad, CeilModeDilationAndUnevenPads) {
  check({2, 3, 7, 7}, {{"kernel", Ints{2, 2}}, {"strides", Ints{2, 2}}, {"ceil_mode", int64_t{1}}}, 11);
  check({1, 4, 9, 8}, {{"kernel", Ints{3, 2}}, {"strides", Ints{2, 1}}, {"pads", Ints{1, 0, 2, 1}}, {"dilations", Ints{2, 2}}},
        13);
  check({2, 2, 10, 10}, {{"kernel", Ints{3, 3}}, {"strides", Ints{3, 3}}, {"pads", Ints{2, 2, 2, 2}}, {"ceil_mode", int64_t{1}}},
        15);
}

TEST(CodegenMaxPoolGrad, OneDThreeDAndEmpty) {
  check({3, 4, 17}, {{"kernel", Ints{3}}, {"strides", Ints{1}}}, 17);
  check({2, 3, 12}, {{"kernel", Ints{2}}, {"strides", Ints{3}}, {"pads", Ints{1, 2}}, {"ceil_mode", int64_t{1}}}, 19);
  check({1, 2, 5, 6, 7}, {{"kernel", Ints{2, 3, 2}}, {"strides", Ints{2, 1, 2}}, {"pads", Ints{1, 1, 0, 0, 1, 1}}}, 21);
  check({0, 3, 6, 6}, {{"kernel", Ints{2, 2}}}, 23);
  // An all-padding window (in 1, pads 2+2) hands nothing on.
  check({2, 2, 1}, {{"kernel", Ints{1}}, {"pads", Ints{2, 2}}}, 25);
}

// max_pool's gradient rule emits max_pool_grad (and none of the former composite's gather and
// scatter), and the gradient compiles to the reference's values.
TEST(CodegenMaxPoolGrad, GradientRuleEmitsTheOp) {
  for (bool overlapping : {false, true}) {
    SCOPED_TRACE(overlapping ? "3x3 stride 2 pad 1" : "2x2 stride 2");
    ir::AttrMap attrs = overlapping ? ir::AttrMap{{"kernel", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}}
                                    : ir::AttrMap{{"kernel", Ints{2, 2}}, {"strides", Ints{2, 2}}};
    ir::Graph graph("pool_gradient");
    ir::Value *x = graph.addInput({DType::F32, {2, 3, 8, 8}}, "x");
    ir::Value *r = graph.addInput({DType::F32, {2, 3, 4, 4}}, "r");
    ir::Builder b(graph);
    ir::Value *y = b.create(ir::OpKind::MaxPool, {x}, attrs);
    ir::Value *loss = b.create(ir::OpKind::ReduceSum, {b.create(ir::OpKind::Mul, {y, r})}, {});
    std::vector<ir::Value *> grads = passes::autodiff::appendGradients(graph, loss, {x});
    graph.setOutputs(grads);
    int poolGrads = 0;
    for (const ir::Node *node : graph.nodes()) {
      poolGrads += node->op() == ir::OpKind::MaxPoolGrad;
      EXPECT_NE(node->op(), ir::OpKind::Gather);
      EXPECT_NE(node->op(), ir::OpKind::ScatterAdd);
      if (node->op() == ir::OpKind::MaxPoolGrad) {
        EXPECT_EQ(node->input(0), x);
        EXPECT_EQ(node->input(1), y);
        EXPECT_EQ(node->attrInts("strides"), (Ints{2, 2}));
        EXPECT_EQ(node->attrInts("pads"), overlapping ? (Ints{1, 1, 1, 1}) : Ints{});
      }
    }
    EXPECT_EQ(poolGrads, 1);
    std::vector<Tensor> inputs{fewValues({DType::F32, {2, 3, 8, 8}}, 31), randomTensor({DType::F32, {2, 3, 4, 4}}, 32)};
    expectMatchesReference(graph, inputs, withThreads(2), 1e-6, 1e-7);
  }
}

} // namespace
} // namespace kiln::codegen::test
