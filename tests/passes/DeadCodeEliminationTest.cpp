// dce: dead chains go in one run, unused parameters and constants go, graph inputs and
// returned values stay, a multi-output node stays while any output is used, and every
// rewritten graph computes what the original did.
#include <gtest/gtest.h>

#include "ir/Builder.h"
#include "ir/Printer.h"
#include "ir/Verifier.h"
#include "passes/simplify/DeadCodeElimination.h"
#include "tests/passes/PassTestUtil.h"

namespace kiln {
namespace {

using test::PassRun;

PassRun eliminate(std::string_view text) {
  PassRun run = test::runPass(text, *passes::createDeadCodeEliminationPass());
  return run;
}

std::vector<std::string> opNames(const ir::Graph &graph) {
  std::vector<std::string> names;
  for (const ir::Node *node : graph.nodes())
    names.emplace_back(node->opName());
  return names;
}

TEST(DeadCodeElimination, RemovesADeadChainInOneRun) {
  PassRun run = eliminate(R"(graph @g(%x: f32[2,3]) -> (f32[2,3]) {
    %a = exp(%x) : f32[2,3]
    %b = neg(%a) : f32[2,3]
    %c = add(%b, %a) : f32[2,3]
    %y = relu(%x) : f32[2,3]
    return %y
  })");
  EXPECT_TRUE(run.changed);
  EXPECT_EQ(run.stat("nodes removed"), 3);
  EXPECT_EQ(opNames(*run.after), (std::vector<std::string>{"relu"}));
  test::expectSameNumerics(*run.before, *run.after);
}

TEST(DeadCodeElimination, RemovesUnusedParamsAndConstantsButKeepsGraphInputs) {
  PassRun run = eliminate(R"(graph @g(%x: f32[3], %unused: i64[2]) -> (f32[3]) {
    %w = param "w" : f32[3]
    %v = param "v" {value = tensor<f32[3]>[1.0, 2.0, 3.0]} : f32[3]
    %orphan = param "orphan" : f32[4,4]
    %c = constant tensor<f32[3]>[1.0, 2.0, 3.0] : f32[3]
    %y = mul(%x, %w) : f32[3]
    return %y
  })");
  EXPECT_EQ(run.stat("nodes removed"), 3);
  EXPECT_EQ(opNames(*run.after), (std::vector<std::string>{"param", "mul"}));
  EXPECT_EQ(run.after->params().front()->attrString("name"), "w");
  ASSERT_EQ(run.after->inputs().size(), 2u);
  EXPECT_EQ(run.after->inputs()[1]->name(), "unused");
  test::expectSameNumerics(*run.before, *run.after);
}

TEST(DeadCodeElimination, KeepsAMultiOutputNodeWhileAnyOutputIsUsed) {
  PassRun run = eliminate(R"(graph @g(%x: f32[2,3]) -> (f32[2,2]) {
    %l, %r = split(%x) {axis = 1, sizes = [1, 2]} : f32[2,1], f32[2,2]
    %v, %i = topk(%x) {k = 2} : f32[2,2], i64[2,2]
    %e = exp(%r) : f32[2,2]
    return %e
  })");
  EXPECT_EQ(run.stat("nodes removed"), 1); // topk: neither output used
  EXPECT_EQ(opNames(*run.after), (std::vector<std::string>{"split", "exp"}));
  test::expectSameNumerics(*run.before, *run.after);
}

TEST(DeadCodeElimination, KeepsReturnedValuesWithoutOtherUses) {
  PassRun run = eliminate(R"(graph @g(%x: f32[2]) -> (f32[2], f32[2], f32[2]) {
    %c = constant tensor<f32[2]>[4.0, 5.0] : f32[2]
    %a = neg(%x) : f32[2]
    return %a, %c, %x
  })");
  EXPECT_FALSE(run.changed);
  EXPECT_EQ(run.stat("nodes removed"), 0);
  EXPECT_EQ(ir::printGraph(*run.after), ir::printGraph(*run.before));
}

TEST(DeadCodeElimination, ScalarsEmptyTensorsAndIntegersAreNothingSpecial) {
  PassRun run = eliminate(R"(graph @g(%x: f32[], %e: f32[0,3], %i: i32[4]) -> (f32[0,3], i32[4]) {
    %s = exp(%x) : f32[]
    %t = neg(%e) : f32[0,3]
    %u = relu(%e) : f32[0,3]
    %j = abs(%i) : i32[4]
    %k = neg(%i) : i32[4]
    return %t, %j
  })");
  EXPECT_EQ(run.stat("nodes removed"), 3);
  EXPECT_EQ(opNames(*run.after), (std::vector<std::string>{"neg", "abs"}));
  test::expectSameNumerics(*run.before, *run.after);
}

TEST(DeadCodeElimination, RemovesAnUnusedKernelWithItsBody) {
  PassRun run = eliminate(R"(graph @g(%x: f32[2]) -> (f32[2]) {
    %k = kernel(%x) {rule = "elementwise"} : f32[2] {
      ^(%in: f32[2]):
      %0 = exp(%in) : f32[2]
      return %0
    }
    %used = kernel(%x) {rule = "elementwise"} : f32[2] {
      ^(%in: f32[2]):
      %0 = neg(%in) : f32[2]
      %1 = exp(%in) : f32[2]
      return %0
    }
    return %used
  })");
  EXPECT_EQ(run.stat("nodes removed"), 1);
  ASSERT_EQ(run.after->numNodes(), 1u);
  // A kernel's body is its own graph: dce works on the graph it is given, not inside bodies.
  EXPECT_EQ(run.after->firstNode()->body()->numNodes(), 2u);
  test::expectSameNumerics(*run.before, *run.after);
}

TEST(DeadCodeElimination, AnEmptyGraphIsUnchanged) {
  PassRun run = eliminate("graph @g(%x: f32[1]) -> (f32[1]) {\n  return %x\n}");
  EXPECT_FALSE(run.changed);
  EXPECT_EQ(run.after->numNodes(), 0u);
}

TEST(DeadCodeElimination, IsLinearOnALongDeadChain) {
  // 20,000 dead nodes, each the only user of the one before: a quadratic sweep would take
  // seconds; this one takes milliseconds.
  ir::Graph graph;
  ir::Value *x = graph.addInput({DType::F32, {2}}, "x");
  ir::Builder builder(graph);
  ir::Value *live = builder.create(ir::OpKind::Relu, {x});
  ir::Value *dead = x;
  for (int i = 0; i < 20000; ++i)
    dead = builder.create(ir::OpKind::Neg, {dead});
  graph.setOutputs({live});
  passes::PassContext context;
  EXPECT_TRUE(passes::createDeadCodeEliminationPass()->run(graph, context));
  EXPECT_EQ(context.stats.get("nodes removed"), 20000);
  EXPECT_EQ(graph.numNodes(), 1u);
  ir::verify(graph);
}

} // namespace
} // namespace kiln
