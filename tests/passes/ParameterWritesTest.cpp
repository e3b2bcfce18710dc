// The in-place parameter write passes (isolate-parameter-writes, order-parameter-writes) and
// what they share: the writes are the outputs named like a parameter, and nothing else; both
// passes keep the graph's values (the numerics check); a reader of a parameter that needs the
// parameter's new value makes ordering impossible, a kiln::Error naming the parameter; a
// training graph names its updates so.
#include <gtest/gtest.h>

#include "tests/ErrorMatchers.h"

#include <algorithm>

#include "passes/PassManager.h"
#include "passes/autodiff/TrainingGraph.h"
#include "passes/memory/IsolateParameterWrites.h"
#include "passes/memory/OrderParameterWrites.h"
#include "passes/memory/ParameterWrites.h"
#include "tests/passes/PassTestUtil.h"

namespace kiln::passes {
namespace {

// p's update comes before a reader of the old p; q's does not need to move; %y is an output
// named like no parameter.
constexpr const char *kUpdateFirst = R"(
graph @order(%x: f32[4,4], %g: f32[4,4], %lr: f32[]) -> (f32[], f32[4,4], f32[4,4]) {
  %p = param "p" : f32[4,4]
  %q = param "q" : f32[4,4]
  %newp = sgd_update(%p, %g, %lr) : f32[4,4]
  %h = matmul(%x, %p) : f32[4,4]
  %y = reduce_sum(%h) {axes = [], keepdims = 0} : f32[]
  %newq = sgd_update(%q, %g, %lr) : f32[4,4]
  return %y, %newq as "q", %newp as "p"
}
)";

TEST(ParameterWrites, AreTheOutputsNamedLikeAParameter) {
  auto graph = test::parseKir(kUpdateFirst);
  std::vector<ParameterWrite> writes = parameterWrites(*graph);
  ASSERT_EQ(writes.size(), 2u);
  EXPECT_EQ(writes[0].param, "q");
  EXPECT_EQ(writes[0].output, 1u);
  EXPECT_EQ(writes[1].param, "p");
  EXPECT_EQ(writes[1].output, 2u);
}

TEST(ParameterWrites, OrderingMovesTheWriterPastTheLastReaderAndKeepsTheValues) {
  auto pass = createOrderParameterWritesPass();
  test::PassRun run = test::runPass(kUpdateFirst, *pass);
  EXPECT_TRUE(run.changed);
  EXPECT_EQ(run.stat("nodes moved"), 1);
  const ir::Node *writer = run.after->outputs()[2]->producer();
  std::vector<ir::Node *> nodes = run.after->nodes();
  auto position = [&](const ir::Node *node) { return std::find(nodes.begin(), nodes.end(), node) - nodes.begin(); };
  for (const ir::Node *reader : readersOf(findParam(*run.after, "p"))) {
    if (reader != writer) {
      EXPECT_LT(position(reader), position(writer));
    }
  }
  test::expectSameNumerics(*run.before, *run.after);
}

TEST(ParameterWrites, AReaderNeedingTheNewValueCannotBeOrdered) {
  auto graph = test::parseKir(R"(
graph @cycle(%g: f32[4], %lr: f32[]) -> (f32[4], f32[4]) {
  %p = param "p" : f32[4]
  %new = sgd_update(%p, %g, %lr) : f32[4]
  %both = add(%new, %p) : f32[4]
  return %both, %new as "p"
}
)");
  PassManager manager;
  manager.addPass("order-parameter-writes");
  PassContext context;
  kiln::test::expectErrorContaining([&] { manager.run(*graph, context); },
                                    "the update of parameter 'p' cannot be done in place: a reader of the "
                                    "parameter depends on its new value");
}

TEST(ParameterWrites, IsolationKeepsTheValues) {
  auto graph = test::parseKir(R"(
graph @isolate(%x: f32[4,3], %dy: f32[4,2], %lr: f32[]) -> (f32[3,2]) {
  %w = param "w" : f32[3,2]
  %xt = permute(%x) {perm = [1, 0]} : f32[3,4]
  %grad = matmul(%xt, %dy) : f32[3,2]
  %new = sgd_update(%w, %grad, %lr) : f32[3,2]
  return %new as "w"
}
)");
  PassManager manager;
  manager.addPasses({"decompose", "fuse"});
  PassContext context;
  manager.run(*graph, context);
  auto before = graph->clone();
  auto pass = createIsolateParameterWritesPass();
  EXPECT_TRUE(pass->run(*graph, context));
  for (const ir::Node *node : graph->nodes()) {
    if (node->op() == ir::OpKind::Kernel && node->attrString("rule") == "in-place-update") {
      EXPECT_FALSE(hasStagedOps(*node));
    }
  }
  EXPECT_FALSE(hasStagedOps(*graph->outputs()[0]->producer()));
  test::expectSameNumerics(*before, *graph);
}

TEST(ParameterWrites, ATrainingGraphNamesItsUpdates) {
  auto forward = test::parseKir(R"(
graph @linear(%x: f32[4,3]) -> (f32[4,2]) {
  %w = param "fc.weight" : f32[3,2]
  %h = matmul(%x, %w) : f32[4,2]
  return %h
}
)");
  auto training =
      autodiff::buildTrainingGraph(*forward, {autodiff::LossKind::Mean}, autodiff::OptimizerSpec::adam(0.1));
  std::vector<ParameterWrite> writes = parameterWrites(*training.graph);
  ASSERT_EQ(writes.size(), training.updates.size());
  for (size_t i = 0; i < writes.size(); ++i) {
    EXPECT_EQ(writes[i].param, training.updates[i].name);
    EXPECT_EQ(writes[i].output, training.updates[i].output);
  }
}

} // namespace
} // namespace kiln::passes
