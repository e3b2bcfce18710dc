// cse: equal computations merge (commutative operands in either order, constants by value, bit
// for bit), different ones do not (attributes, operand order of a non-commutative op, dtypes,
// -0.0 against 0.0), parameters never merge, merges cascade through chains in one run, and the
// pass stays linear on large graphs. Every rewritten graph computes what the original did.
#include <gtest/gtest.h>

#include "ir/Builder.h"
#include "ir/Printer.h"
#include "ir/Verifier.h"
#include "passes/simplify/CommonSubexpressionElimination.h"
#include "tests/passes/PassTestUtil.h"

namespace kiln {
namespace {

using test::PassRun;

using ir::OpKind;

PassRun merge(std::string_view text) {
  PassRun run = test::runPass(text, *passes::createCommonSubexpressionEliminationPass());
  test::expectSameNumerics(*run.before, *run.after);
  return run;
}

TEST(CommonSubexpressionElimination, MergesTheSameOpOnTheSameOperands) {
  PassRun run = merge(R"(graph @g(%x: f32[2,3], %y: f32[2,3]) -> (f32[2,3], f32[2,3]) {
    %a = sub(%x, %y) : f32[2,3]
    %b = sub(%x, %y) : f32[2,3]
    %c = exp(%a) : f32[2,3]
    %d = exp(%b) : f32[2,3]
    return %c, %d
  })");
  EXPECT_TRUE(run.changed);
  EXPECT_EQ(run.stat("nodes merged"), 2); // %b into %a, then %d (now exp(%a)) into %c
  EXPECT_EQ(run.after->numNodes(), 2u);
  EXPECT_EQ(run.after->outputs()[0], run.after->outputs()[1]);
}

TEST(CommonSubexpressionElimination, CommutativeOpsMergeWithOperandsInEitherOrder) {
  PassRun run = merge(R"(graph @g(%x: f32[2,3], %y: f32[3]) -> (f32[2,3], f32[2,3], f32[2,3], f32[2,3]) {
    %a = add(%x, %y) : f32[2,3]
    %b = add(%y, %x) : f32[2,3]
    %c = mul(%y, %x) : f32[2,3]
    %d = mul(%x, %y) : f32[2,3]
    return %a, %b, %c, %d
  })");
  EXPECT_EQ(run.stat("nodes merged"), 2);
  EXPECT_EQ(run.count(OpKind::Add), 1);
  EXPECT_EQ(run.count(OpKind::Mul), 1);
}

TEST(CommonSubexpressionElimination, NonCommutativeOperandOrderMatters) {
  PassRun run = merge(R"(graph @g(%x: f32[3], %y: f32[3]) -> (f32[3], f32[3], bool[3], bool[3]) {
    %a = sub(%x, %y) : f32[3]
    %b = sub(%y, %x) : f32[3]
    %c = lt(%x, %y) : bool[3]
    %d = lt(%y, %x) : bool[3]
    return %a, %b, %c, %d
  })");
  EXPECT_FALSE(run.changed);
  EXPECT_EQ(run.stat("nodes merged"), 0);
}

TEST(CommonSubexpressionElimination, DifferentAttributesDoNotMerge) {
  PassRun run = merge(R"(graph @g(%x: f32[2,3]) -> (f32[1,3], f32[2,1], f32[1,3], f32[3]) {
    %a = reduce_sum(%x) {axes = [0], keepdims = 1} : f32[1,3]
    %b = reduce_sum(%x) {axes = [1], keepdims = 1} : f32[2,1]
    %c = reduce_sum(%x) {axes = [0], keepdims = 1} : f32[1,3]
    %d = reduce_sum(%x) {axes = [0]} : f32[3]
    return %a, %b, %c, %d
  })");
  EXPECT_EQ(run.stat("nodes merged"), 1); // only %c into %a
  EXPECT_EQ(run.count(OpKind::ReduceSum), 3);
}

TEST(CommonSubexpressionElimination, ConstantsMergeByValueBitForBit) {
  PassRun run = merge(R"(graph @g(%x: f32[2]) -> (f32[2], f32[2], f32[2], f32[2], f32[2], f32[2]) {
    %c1 = constant tensor<f32[2]>[1.5, 2.0] : f32[2]
    %c2 = constant tensor<f32[2]>[1.5, 2.0] : f32[2]
    %c3 = constant tensor<f32[2]>[1.5, 3.0] : f32[2]
    %z1 = constant tensor<f32[2]>[0.0, 1.0] : f32[2]
    %z2 = constant tensor<f32[2]>[-0.0, 1.0] : f32[2]
    %n1 = constant tensor<f32[2]>[nan, 1.0] : f32[2]
    %n2 = constant tensor<f32[2]>[nan, 1.0] : f32[2]
    %a = add(%x, %c1) : f32[2]
    %b = add(%c2, %x) : f32[2]
    %c = add(%x, %c3) : f32[2]
    %d = add(%x, %z1) : f32[2]
    %e = add(%x, %z2) : f32[2]
    %f = add(%n1, %n2) : f32[2]
    return %a, %b, %c, %d, %e, %f
  })");
  // %c2 into %c1, %b into %a, %n2 into %n1; 0.0 and -0.0 differ, and so do %c1 and %c3.
  EXPECT_EQ(run.stat("nodes merged"), 3);
  EXPECT_EQ(run.count(OpKind::Constant), 5);
  EXPECT_EQ(run.after->outputs()[0], run.after->outputs()[1]);
  EXPECT_NE(run.after->outputs()[3], run.after->outputs()[4]);
}

TEST(CommonSubexpressionElimination, EqualValuesOfDifferentTypesDoNotMerge) {
  PassRun run = merge(R"(graph @g(%x: f32[2]) -> (f32[], f64[], i64[], f32[1], f32[]) {
    %a = constant tensor<f32[]>[1.0] : f32[]
    %b = constant tensor<f64[]>[1.0] : f64[]
    %c = constant tensor<i64[]>[1] : i64[]
    %d = constant tensor<f32[1]>[1.0] : f32[1]
    %e = constant tensor<f32[]>[1.0] : f32[]
    return %a, %b, %c, %d, %e
  })");
  EXPECT_EQ(run.stat("nodes merged"), 1); // %e into %a
  EXPECT_EQ(run.count(OpKind::Constant), 4);
}

TEST(CommonSubexpressionElimination, ParamsNeverMerge) {
  PassRun run = merge(R"(graph @g(%x: f32[3]) -> (f32[3], f32[3]) {
    %w1 = param "w1" : f32[3]
    %w2 = param "w2" : f32[3]
    %v1 = param "v1" {value = tensor<f32[3]>[1.0, 2.0, 3.0]} : f32[3]
    %v2 = param "v2" {value = tensor<f32[3]>[1.0, 2.0, 3.0]} : f32[3]
    %a = mul(%x, %w1) : f32[3]
    %b = mul(%x, %w2) : f32[3]
    %c = add(%a, %v1) : f32[3]
    %d = add(%b, %v2) : f32[3]
    return %c, %d
  })");
  EXPECT_FALSE(run.changed);
  EXPECT_EQ(run.after->params().size(), 4u);
}

TEST(CommonSubexpressionElimination, MergesMultiOutputNodesAndSourcelessNodes) {
  PassRun run = merge(R"(graph @g(%x: f32[2,3]) -> (f32[2,1], f32[2,2], f32[2,1], f32[2,2], i64[2,3], i64[2,3]) {
    %l1, %r1 = split(%x) {axis = 1, sizes = [1, 2]} : f32[2,1], f32[2,2]
    %l2, %r2 = split(%x) {axis = 1, sizes = [1, 2]} : f32[2,1], f32[2,2]
    %i1 = iota() {axis = 1, dtype = i64, shape = [2, 3]} : i64[2,3]
    %i2 = iota() {axis = 1, dtype = i64, shape = [2, 3]} : i64[2,3]
    return %l1, %r1, %l2, %r2, %i1, %i2
  })");
  EXPECT_EQ(run.stat("nodes merged"), 2);
  EXPECT_EQ(run.after->outputs()[0], run.after->outputs()[2]);
  EXPECT_EQ(run.after->outputs()[1], run.after->outputs()[3]);
  EXPECT_EQ(run.after->outputs()[4], run.after->outputs()[5]);
}

TEST(CommonSubexpressionElimination, TheSurvivorTakesAReturnedDuplicatesName) {
  PassRun run = merge(R"(graph @g(%x: f32[2], %s: f32[], %e: f32[0]) -> (f32[2], f32[], f32[0]) {
    %0 = exp(%x) : f32[2]
    %logits = exp(%x) : f32[2]
    %1 = neg(%s) : f32[]
    %2 = neg(%s) : f32[]
    %3 = abs(%e) : f32[0]
    %4 = abs(%e) : f32[0]
    %y = add(%3, %4) : f32[0]
    return %logits, %2, %y
  })");
  EXPECT_EQ(run.stat("nodes merged"), 3);
  EXPECT_EQ(run.after->outputs()[0]->name(), "logits");
  EXPECT_NE(ir::printGraph(*run.after).find("return %logits"), std::string::npos);
}

TEST(CommonSubexpressionElimination, KernelsMergeOnlyWithEqualBodies) {
  // The three kernels have the same operand and attributes; %b's body is %a's under other
  // names, %c's computes something else.
  PassRun run = merge(R"(graph @g(%x: f32[2,3]) -> (f32[2,3], f32[2,3], f32[2,3]) {
    %a = kernel(%x) {rule = "elementwise"} : f32[2,3] {
      ^(%in: f32[2,3]):
      %0 = exp(%in) : f32[2,3]
      %1 = neg(%0) : f32[2,3]
      return %1
    }
    %b = kernel(%x) {rule = "elementwise"} : f32[2,3] {
      ^(%v: f32[2,3]):
      %e = exp(%v) : f32[2,3]
      %n = neg(%e) : f32[2,3]
      return %n
    }
    %c = kernel(%x) {rule = "elementwise"} : f32[2,3] {
      ^(%in: f32[2,3]):
      %0 = log(%in) : f32[2,3]
      %1 = neg(%0) : f32[2,3]
      return %1
    }
    return %a, %b, %c
  })");
  EXPECT_EQ(run.stat("nodes merged"), 1);
  EXPECT_EQ(run.after->outputs()[0], run.after->outputs()[1]);
  EXPECT_NE(run.after->outputs()[0], run.after->outputs()[2]);
}

TEST(CommonSubexpressionElimination, IsLinearOnALargeGraph) {
  // 10,000 pairs of equal nodes over a long chain: comparing every pair of nodes would take
  // seconds; hashing takes milliseconds.
  ir::Graph graph;
  ir::Value *x = graph.addInput({DType::F32, {2}}, "x");
  ir::Builder builder(graph);
  ir::Value *chain = x;
  for (int i = 0; i < 10000; ++i) {
    ir::Value *a = builder.create(OpKind::Neg, {chain});
    ir::Value *b = builder.create(OpKind::Neg, {chain});
    chain = builder.create(OpKind::Add, {a, b});
  }
  graph.setOutputs({chain});
  passes::PassContext context;
  EXPECT_TRUE(passes::createCommonSubexpressionEliminationPass()->run(graph, context));
  EXPECT_EQ(context.stats.get("nodes merged"), 10000);
  EXPECT_EQ(graph.numNodes(), 20000u);
  ir::verify(graph);
}

} // namespace
} // namespace kiln
