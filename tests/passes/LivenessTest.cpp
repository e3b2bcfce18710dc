// Liveness intervals on hand-written graphs: steps count kernels only (not params or
// constants), intervals run from the producer's step to the last user's step, graph outputs and
// sources have none, and an unused value lives only where it is written.
#include <gtest/gtest.h>

#include "ir/KernelOutline.h"
#include "passes/memory/Liveness.h"
#include "tests/passes/PassTestUtil.h"

namespace kiln::passes {
namespace {

/// The node output called `name` (Value::name() as the parser stores it).
const ir::Value *valueNamed(const ir::Graph &graph, const std::string &name) {
  for (const ir::Node *node : graph.nodes())
    for (const ir::Value *value : node->outputs())
      if (value->name() == name)
        return value;
  ADD_FAILURE() << "no value named " << name;
  return nullptr;
}

void expectInterval(const Liveness &liveness, const ir::Value *value, int64_t def, int64_t lastUse) {
  const LiveInterval *interval = liveness.find(value);
  ASSERT_NE(interval, nullptr) << value->name() << " should be an intermediate";
  EXPECT_EQ(interval->def, def) << value->name();
  EXPECT_EQ(interval->lastUse, lastUse) << value->name();
}

TEST(Liveness, ChainWithSourcesOutputsAndDeadValue) {
  auto graph = test::parseKir(R"(
graph @g(%x: f32[4,8]) -> (f32[4,8]) {
  %w = param "w" : f32[8,8]
  %a = matmul(%x, %w) : f32[4,8]
  %b = relu(%a) : f32[4,8]
  %k = constant tensor<f32[8]>[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0] : f32[8]
  %c = exp(%a) : f32[4,8]
  %d = add(%b, %c) : f32[4,8]
  %e = add(%d, %k) : f32[4,8]
  return %d
}
)");
  Liveness liveness = computeLiveness(*graph);
  // Kernels: a=0, b=1, c=2, d=3, e=4; the param and the constant are not steps.
  ASSERT_EQ(liveness.steps().size(), 5u);
  EXPECT_EQ(liveness.steps()[2]->output()->name(), "c");
  EXPECT_EQ(liveness.stepOf(valueNamed(*graph, "w")->producer()), -1);
  EXPECT_EQ(liveness.stepOf(valueNamed(*graph, "e")->producer()), 4);

  // a: written at 0, last read by c at 2. b: 1 to d at 3. c: 2 to 3. e: unused, only step 4.
  ASSERT_EQ(liveness.intervals().size(), 4u);
  expectInterval(liveness, valueNamed(*graph, "a"), 0, 2);
  expectInterval(liveness, valueNamed(*graph, "b"), 1, 3);
  expectInterval(liveness, valueNamed(*graph, "c"), 2, 3);
  expectInterval(liveness, valueNamed(*graph, "e"), 4, 4);
  // d is a graph output; x an input; w and k sources: none is in the arena.
  EXPECT_FALSE(liveness.isIntermediate(valueNamed(*graph, "d")));
  EXPECT_FALSE(liveness.isIntermediate(graph->inputs()[0]));
  EXPECT_FALSE(liveness.isIntermediate(valueNamed(*graph, "w")));
  EXPECT_FALSE(liveness.isIntermediate(valueNamed(*graph, "k")));
  // Definition order.
  EXPECT_EQ(liveness.intervals()[0].value->name(), "a");
  EXPECT_EQ(liveness.intervals()[3].value->name(), "e");
}

TEST(Liveness, OutputThatIsAlsoUsedLaterIsNotAnIntermediate) {
  auto graph = test::parseKir(R"(
graph @g(%x: f32[3]) -> (f32[3], f32[3]) {
  %a = exp(%x) : f32[3]
  %b = neg(%a) : f32[3]
  %c = add(%a, %b) : f32[3]
  return %a, %c
}
)");
  Liveness liveness = computeLiveness(*graph);
  ASSERT_EQ(liveness.intervals().size(), 1u);
  expectInterval(liveness, valueNamed(*graph, "b"), 1, 2);
  EXPECT_EQ(liveness.find(valueNamed(*graph, "a")), nullptr);
}

TEST(Liveness, MultiOutputNodeAndRepeatedOperand) {
  auto graph = test::parseKir(R"(
graph @g(%x: f32[4,6]) -> (f32[1,6]) {
  %p, %q, %r = split(%x) {axis = 0, sizes = [1, 1, 2]} : f32[1,6], f32[1,6], f32[2,6]
  %s = add(%q, %q) : f32[1,6]
  %t = relu(%r) : f32[2,6]
  %u = mul(%p, %s) : f32[1,6]
  return %u
}
)");
  Liveness liveness = computeLiveness(*graph);
  ASSERT_EQ(liveness.steps().size(), 4u);
  // All three results of the split start at step 0; q is read twice by one node (step 1).
  expectInterval(liveness, valueNamed(*graph, "p"), 0, 3);
  expectInterval(liveness, valueNamed(*graph, "q"), 0, 1);
  expectInterval(liveness, valueNamed(*graph, "r"), 0, 2);
  expectInterval(liveness, valueNamed(*graph, "s"), 1, 3);
  expectInterval(liveness, valueNamed(*graph, "t"), 2, 2);
  EXPECT_EQ(liveness.intervals().size(), 5u);
  EXPECT_TRUE(liveness.find(valueNamed(*graph, "p"))->overlaps(*liveness.find(valueNamed(*graph, "t"))));
  EXPECT_FALSE(liveness.find(valueNamed(*graph, "q"))->overlaps(*liveness.find(valueNamed(*graph, "t"))));
  EXPECT_TRUE(liveness.find(valueNamed(*graph, "r"))->liveAt(1));
  EXPECT_FALSE(liveness.find(valueNamed(*graph, "r"))->liveAt(3));
}

TEST(Liveness, GraphWithoutKernels) {
  auto graph = test::parseKir(R"(
graph @g(%x: f32[2]) -> (f32[2], f32[2]) {
  %w = param "w" : f32[2]
  return %x, %w
}
)");
  Liveness liveness = computeLiveness(*graph);
  EXPECT_TRUE(liveness.steps().empty());
  EXPECT_TRUE(liveness.intervals().empty());
}

TEST(Liveness, KernelGroupIsOneStep) {
  auto graph = test::parseKir(R"(
graph @g(%x: f32[4]) -> (f32[4]) {
  %a = exp(%x) : f32[4]
  %b = relu(%a) : f32[4]
  %c = neg(%b) : f32[4]
  %d = add(%c, %a) : f32[4]
  return %d
}
)");
  // Fuse b and c: one kernel reading a, whose result c is read by d.
  std::vector<ir::Node *> group;
  for (ir::Node *node : graph->nodes())
    if (node->output()->name() == "b" || node->output()->name() == "c")
      group.push_back(node);
  ir::outlineKernel(*graph, group, "elementwise");

  Liveness liveness = computeLiveness(*graph);
  // Steps: a=0, kernel=1, d=2. b lives inside the kernel's body and is not planned here.
  ASSERT_EQ(liveness.steps().size(), 3u);
  EXPECT_EQ(liveness.steps()[1]->op(), ir::OpKind::Kernel);
  ASSERT_EQ(liveness.intervals().size(), 2u);
  expectInterval(liveness, valueNamed(*graph, "a"), 0, 2);
  expectInterval(liveness, liveness.steps()[1]->output(), 1, 2);
}

} // namespace
} // namespace kiln::passes
