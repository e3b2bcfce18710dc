// constant-fold: chains of constant computations fold in one run to hand-computed values,
// sourceless nodes (iota) and composites fold, anything reading an input or a parameter does
// not, the size rule keeps a large result from small operands unfolded but folds one no larger
// than an operand, a node whose evaluation fails is left alone, and names survive.
#include <gtest/gtest.h>

#include "ir/Builder.h"
#include "ir/Verifier.h"
#include "passes/simplify/ConstantFolding.h"
#include "tests/passes/PassTestUtil.h"

namespace kiln {
namespace {

using test::PassRun;

using ir::OpKind;

/// The value of output i of the folded graph, which must be a constant.
Tensor constantOutput(const PassRun &run, size_t i) {
  const ir::Node *producer = run.after->outputs().at(i)->producer();
  EXPECT_TRUE(producer && producer->op() == OpKind::Constant) << "output " << i << " is not a constant";
  return producer && producer->op() == OpKind::Constant ? producer->attrTensor("value") : Tensor();
}

PassRun fold(std::string_view text) {
  PassRun run = test::runPass(text, *passes::createConstantFoldingPass());
  test::expectSameNumerics(*run.before, *run.after);
  return run;
}

std::vector<double> values(const Tensor &tensor) { return tensor.defined() ? tensor.toDoubles() : std::vector<double>{}; }

TEST(ConstantFolding, FoldsAChainOfConstantComputationsInOneRun) {
  PassRun run = fold(R"(graph @g(%x: f32[2]) -> (f32[2], f32[2]) {
    %a = constant tensor<f32[2]>[1.0, 2.0] : f32[2]
    %b = constant tensor<f32[]>[3.0] : f32[]
    %s = add(%a, %b) : f32[2]
    %p = mul(%s, %s) : f32[2]
    %n = neg(%p) : f32[2]
    %y = add(%x, %n) : f32[2]
    return %n, %y
  })");
  EXPECT_TRUE(run.changed);
  EXPECT_EQ(run.stat("nodes folded"), 3);
  EXPECT_EQ(values(constantOutput(run, 0)), (std::vector<double>{-16.0, -25.0})); // -(1+3)^2, -(2+3)^2
  EXPECT_EQ(run.count(OpKind::Add), 1);                                          // %y reads %x
  EXPECT_EQ(run.after->outputs()[0]->name(), "n");
}

TEST(ConstantFolding, InputsAndParamsAreNotConstants) {
  PassRun run = fold(R"(graph @g(%x: f32[3]) -> (f32[3], f32[3], f32[3]) {
    %w = param "w" {value = tensor<f32[3]>[1.0, 2.0, 3.0]} : f32[3]
    %v = param "v" : f32[3]
    %c = constant tensor<f32[3]>[4.0, 5.0, 6.0] : f32[3]
    %a = add(%w, %c) : f32[3]
    %b = mul(%v, %c) : f32[3]
    %d = sub(%x, %c) : f32[3]
    return %a, %b, %d
  })");
  EXPECT_FALSE(run.changed);
  EXPECT_EQ(run.stat("nodes folded"), 0);
}

TEST(ConstantFolding, FoldsIotaBroadcastsOfScalarsAndIntegerOps) {
  PassRun run = fold(R"(graph @g(%x: f32[1]) -> (i64[2,3], f32[2,2], i32[3], bool[3]) {
    %i = iota() {axis = 1, dtype = i64, shape = [2, 3]} : i64[2,3]
    %s = constant tensor<f32[]>[0.25] : f32[]
    %b = broadcast(%s) {shape = [2, 2]} : f32[2,2]
    %k = constant tensor<i32[3]>[7, -7, 9] : i32[3]
    %two = constant tensor<i32[]>[2] : i32[]
    %q = div(%k, %two) : i32[3]
    %m = gt(%q, %two) : bool[3]
    return %i, %b, %q, %m
  })");
  EXPECT_EQ(run.stat("nodes folded"), 4);
  EXPECT_EQ(values(constantOutput(run, 0)), (std::vector<double>{0, 1, 2, 0, 1, 2}));
  EXPECT_EQ(values(constantOutput(run, 1)), (std::vector<double>{0.25, 0.25, 0.25, 0.25}));
  EXPECT_EQ(constantOutput(run, 2).dtype(), DType::I32);
  EXPECT_EQ(constantOutput(run, 3).dtype(), DType::Bool);
  EXPECT_EQ(values(constantOutput(run, 3)), (std::vector<double>{1, 0, 1})); // 3 > 2, -3 or -4 > 2, 4 > 2
}

TEST(ConstantFolding, FoldsCompositesMultiOutputNodesScalarsAndEmptyTensors) {
  PassRun run = fold(R"(graph @g(%x: f32[1]) -> (f32[2], f32[1], f32[2], f32[], f32[0,2]) {
    %c = constant tensor<f32[3]>[0.0, 0.0, 0.0] : f32[3]
    %sm = softmax(%c) : f32[3]
    %left, %right = split(%sm) {axis = 0, sizes = [2, 1]} : f32[2], f32[1]
    %t = constant tensor<f32[2]>[1.0, 4.0] : f32[2]
    %r = sqrt(%t) : f32[2]
    %sc = constant tensor<f32[]>[-2.5] : f32[]
    %ab = abs(%sc) : f32[]
    %e = constant tensor<f32[0,2]>[] : f32[0,2]
    %en = neg(%e) : f32[0,2]
    return %left, %right, %r, %ab, %en
  })");
  EXPECT_EQ(run.stat("nodes folded"), 5);
  std::vector<double> left = values(constantOutput(run, 0));
  ASSERT_EQ(left.size(), 2u);
  EXPECT_NEAR(left[0], 1.0 / 3.0, 1e-7);
  EXPECT_NEAR(values(constantOutput(run, 1)).at(0), 1.0 / 3.0, 1e-7);
  EXPECT_EQ(run.after->outputs()[1]->name(), "right");
  EXPECT_EQ(values(constantOutput(run, 2)), (std::vector<double>{1.0, 2.0}));
  EXPECT_EQ(values(constantOutput(run, 3)), (std::vector<double>{2.5}));
  EXPECT_EQ(constantOutput(run, 4).numElements(), 0);
}

TEST(ConstantFolding, FoldsAKernelThroughItsBody) {
  PassRun run = fold(R"(graph @g(%x: f32[2]) -> (f32[2], f32[2]) {
    %c = constant tensor<f32[2]>[1.0, 4.0] : f32[2]
    %k = kernel(%c) {rule = "elementwise"} : f32[2] {
      ^(%in: f32[2]):
      %0 = sqrt(%in) : f32[2]
      %1 = neg(%0) : f32[2]
      return %1
    }
    %l = kernel(%c, %x) {rule = "elementwise"} : f32[2] {
      ^(%a: f32[2], %b: f32[2]):
      %0 = add(%a, %b) : f32[2]
      return %0
    }
    return %k, %l
  })");
  EXPECT_EQ(run.stat("nodes folded"), 1);
  EXPECT_EQ(values(constantOutput(run, 0)), (std::vector<double>{-1.0, -2.0}));
  EXPECT_EQ(run.after->outputs()[1]->producer()->op(), OpKind::Kernel);
}

TEST(ConstantFolding, ALargeResultFromSmallOperandsStaysAComputation) {
  // 1025 x 1024 elements is just over kMaxFoldedElements, from one scalar.
  PassRun run = fold(R"(graph @g(%x: f32[1]) -> (f32[1025,1024], f32[1024,1024]) {
    %s = constant tensor<f32[]>[1.0] : f32[]
    %big = broadcast(%s) {shape = [1025, 1024]} : f32[1025,1024]
    %limit = broadcast(%s) {shape = [1024, 1024]} : f32[1024,1024]
    return %big, %limit
  })");
  EXPECT_EQ(run.context.stats.get("nodes too large to fold"), 1);
  EXPECT_EQ(run.stat("nodes folded"), 1); // exactly kMaxFoldedElements still folds
  EXPECT_EQ(run.after->outputs()[0]->producer()->op(), OpKind::Broadcast);
}

TEST(ConstantFolding, ALargeResultNoLargerThanAnOperandFolds) {
  ir::Graph graph;
  ir::Builder builder(graph);
  int64_t n = passes::kMaxFoldedElements + 2;
  Tensor big(DType::F32, {n});
  for (int64_t i = 0; i < n; ++i)
    big.setDouble(i, static_cast<double>(i % 7));
  ir::Value *c = builder.constant(big);
  ir::Value *reshaped = builder.create(OpKind::Reshape, {c}, {{"shape", std::vector<int64_t>{2, n / 2}}});
  graph.setOutputs({reshaped});
  passes::PassContext context;
  EXPECT_TRUE(passes::createConstantFoldingPass()->run(graph, context));
  EXPECT_EQ(context.stats.get("nodes folded"), 1);
  const ir::Node *producer = graph.outputs()[0]->producer();
  ASSERT_EQ(producer->op(), OpKind::Constant);
  const Tensor &value = producer->attrTensor("value");
  EXPECT_EQ(value.shape(), (Shape{2, n / 2}));
  EXPECT_EQ(value.getDouble(n - 1), static_cast<double>((n - 1) % 7));
}

TEST(ConstantFolding, ANodeWhoseEvaluationFailsIsLeftAlone) {
  // Evaluating %g fails (index 7 into 3 elements), so the graph cannot run before or after the
  // pass and there is no numerics check: the pass must leave %g for the run to report.
  auto graph = test::parseKir(R"(graph @g(%x: f32[1]) -> (f32[2], f32[2]) {
    %data = constant tensor<f32[3]>[1.0, 2.0, 3.0] : f32[3]
    %bad = constant tensor<i64[2]>[0, 7] : i64[2]
    %ok = constant tensor<i64[2]>[2, 0] : i64[2]
    %g = gather(%data, %bad) : f32[2]
    %h = gather(%data, %ok) : f32[2]
    return %g, %h
  })");
  passes::PassContext context;
  EXPECT_TRUE(passes::createConstantFoldingPass()->run(*graph, context));
  ir::verify(*graph);
  EXPECT_EQ(context.stats.get("nodes whose evaluation failed"), 1);
  EXPECT_EQ(context.stats.get("nodes folded"), 1);
  EXPECT_EQ(graph->outputs()[0]->producer()->op(), OpKind::Gather);
  const ir::Node *folded = graph->outputs()[1]->producer();
  ASSERT_EQ(folded->op(), OpKind::Constant);
  EXPECT_EQ(folded->attrTensor("value").toDoubles(), (std::vector<double>{3.0, 1.0}));
}

TEST(ConstantFolding, NothingToFoldIsNoChange) {
  PassRun run = fold(R"(graph @g(%x: f32[2]) -> (f32[2]) {
    %c = constant tensor<f32[2]>[1.0, 2.0] : f32[2]
    %y = add(%x, %c) : f32[2]
    return %y
  })");
  EXPECT_FALSE(run.changed);
  EXPECT_EQ(run.after->numNodes(), 2u);
}

} // namespace
} // namespace kiln
