// passes::accumulatedOperand on hand-written kernel bodies: residual blocks whose pointwise
// convolution may accumulate into the residual, and the near misses that must not (the sum
// not linear in the convolution, a residual read twice or broadcast, a 3x3 convolution, a
// second anchor); then the memory plan placing the result over the residual only where the
// residual dies at the kernel.
#include <gtest/gtest.h>

#include "core/Error.h"
#include "passes/fusion/AccumulatedOperand.h"
#include "passes/memory/PlanMemory.h"
#include "tests/passes/PassTestUtil.h"

namespace kiln::passes {
namespace {

/// A graph whose kernel %k has the given body statements over operands x (f32[1,8,4,4]),
/// w (f32[16,8,KH,KW]), b (f32[16,1,1]) and r (f32[1,16,4,4]), r made by an exp so that it is
/// an intermediate; `after` lines follow the kernel.
std::unique_ptr<ir::Graph> residualGraph(const std::string &body, const std::string &weights = "f32[16,8,1,1]",
                                         const std::string &after = "", const std::string &result = "%k") {
  return test::parseKir(R"(
graph @g(%x: f32[1,8,4,4], %s: f32[1,16,4,4]) -> (f32[1,16,4,4]) {
  %w = param "w" : )" + weights + R"(
  %b = param "b" : f32[16,1,1]
  %r = exp(%s) : f32[1,16,4,4]
  %k = kernel(%x, %w, %b, %r) {rule = "contraction+epilogue"} : f32[1,16,4,4] {
    ^(%x: f32[1,8,4,4], %w: )" + weights + R"(, %b: f32[16,1,1], %r: f32[1,16,4,4]):
)" + body + R"(
  }
)" + after + R"(
  %out = neg()" + result + R"() : f32[1,16,4,4]
  return %out
}
)");
}

const ir::Node *kernelOf(const ir::Graph &graph) {
  for (const ir::Node *node : graph.nodes())
    if (node->op() == ir::OpKind::Kernel)
      return node;
  return nullptr;
}

constexpr const char *kConv = "    %c = conv(%x, %w) {dilations = [1, 1], pads = [0, 0, 0, 0], strides = [1, 1]} : f32[1,16,4,4]\n";

TEST(AccumulatedOperand, ResidualBlocksAccumulateIntoTheResidual) {
  for (const char *tail : {
           "    %a = add(%c, %b) : f32[1,16,4,4]\n    %s2 = add(%a, %r) : f32[1,16,4,4]\n"
           "    %y = relu(%s2) : f32[1,16,4,4]\n    return %y",
           "    %a = add(%b, %c) : f32[1,16,4,4]\n    %y = add(%r, %a) : f32[1,16,4,4]\n    return %y",
           "    %y = add(%c, %r) : f32[1,16,4,4]\n    return %y"}) {
    auto graph = residualGraph(std::string(kConv) + tail);
    const ir::Node *kernel = kernelOf(*graph);
    EXPECT_EQ(accumulatedOperand(*kernel), 3) << tail;
    const AccumulatedAdd sum = accumulatedAdd(*kernel->body(), 3);
    ASSERT_NE(sum.add, nullptr);
    EXPECT_NE(sum.rest, kernel->body()->inputs()[3]);
  }
}

TEST(AccumulatedOperand, OtherBodiesDoNot) {
  const std::string relu = "    %a = add(%c, %b) : f32[1,16,4,4]\n    %p = relu(%a) : f32[1,16,4,4]\n"
                           "    %y = add(%p, %r) : f32[1,16,4,4]\n    return %y";
  EXPECT_EQ(accumulatedOperand(*kernelOf(*residualGraph(kConv + relu))), -1) << "relu(conv + b) + r";
  const std::string twice = "    %a = add(%c, %r) : f32[1,16,4,4]\n    %y = add(%a, %r) : f32[1,16,4,4]\n    return %y";
  EXPECT_EQ(accumulatedOperand(*kernelOf(*residualGraph(kConv + twice))), -1) << "r read twice";
  const std::string scaled = "    %d = add(%c, %c) : f32[1,16,4,4]\n    %y = add(%d, %r) : f32[1,16,4,4]\n    return %y";
  EXPECT_EQ(accumulatedOperand(*kernelOf(*residualGraph(kConv + scaled))), -1) << "2 conv + r";
  const std::string nonlinear = "    %e = exp(%c) : f32[1,16,4,4]\n    %d = add(%c, %e) : f32[1,16,4,4]\n"
                                "    %y = add(%d, %r) : f32[1,16,4,4]\n    return %y";
  EXPECT_EQ(accumulatedOperand(*kernelOf(*residualGraph(kConv + nonlinear))), -1) << "conv + exp(conv) + r";
  const std::string broadcast = "    %y = add(%c, %b) : f32[1,16,4,4]\n    return %y";
  EXPECT_EQ(accumulatedOperand(*kernelOf(*residualGraph(kConv + broadcast))), -1) << "a broadcast operand";
  const std::string conv3 =
      "    %c = conv(%x, %w) {dilations = [1, 1], pads = [1, 1, 1, 1], strides = [1, 1]} : f32[1,16,4,4]\n"
      "    %y = add(%c, %r) : f32[1,16,4,4]\n    return %y";
  EXPECT_EQ(accumulatedOperand(*kernelOf(*residualGraph(conv3, "f32[16,8,3,3]"))), -1) << "a 3x3 convolution";
}

TEST(AccumulatedOperand, NotWhenTheConvolutionBroadcastsOverTheResidual) {
  // conv(x) is 1x1 pixels, broadcast over r's 4x4: r cannot be its accumulator.
  auto graph = test::parseKir(R"(
graph @g(%x: f32[1,8,1,1], %s: f32[1,16,4,4]) -> (f32[1,16,4,4]) {
  %w = param "w" : f32[16,8,1,1]
  %r = exp(%s) : f32[1,16,4,4]
  %k = kernel(%x, %w, %r) {rule = "contraction+epilogue"} : f32[1,16,4,4] {
    ^(%x: f32[1,8,1,1], %w: f32[16,8,1,1], %r: f32[1,16,4,4]):
    %c = conv(%x, %w) {dilations = [1, 1], pads = [0, 0, 0, 0], strides = [1, 1]} : f32[1,16,1,1]
    %y = add(%c, %r) : f32[1,16,4,4]
    return %y
  }
  %out = neg(%k) : f32[1,16,4,4]
  return %out
}
)");
  EXPECT_EQ(accumulatedOperand(*kernelOf(*graph)), -1);
}

TEST(AccumulatedOperand, PlanPutsTheResultOverADyingResidual) {
  const std::string tail = "    %a = add(%c, %b) : f32[1,16,4,4]\n    %s2 = add(%a, %r) : f32[1,16,4,4]\n"
                           "    %y = relu(%s2) : f32[1,16,4,4]\n    return %y";
  auto graph = residualGraph(kConv + tail);
  const ir::Node *kernel = kernelOf(*graph);
  MemoryPlan plan = planMemory(*graph);
  ASSERT_EQ(plan.reuses.size(), 1u); // k over r (the graph's result is outside the arena)
  EXPECT_EQ(plan.reuses[0].output, kernel->output());
  EXPECT_EQ(plan.reuses[0].operand, kernel->input(3));
  EXPECT_EQ(plan.reuses[0].kind, ReuseKind::InPlace);
  EXPECT_EQ(plan.offsetOf(kernel->output()), plan.offsetOf(kernel->input(3)));
  EXPECT_NO_THROW(verifyPlan(*graph, plan));
  // Without in-place reuse, or with r still read after the kernel, the result gets a buffer
  // of its own.
  EXPECT_TRUE(planMemory(*graph, PlanOptions{false, true}).reuses.empty());
  auto later = residualGraph(kConv + tail, "f32[16,8,1,1]", "  %m = mul(%k, %r) : f32[1,16,4,4]", "%m");
  const ir::Node *laterKernel = kernelOf(*later);
  for (const BufferReuse &reuse : planMemory(*later).reuses)
    EXPECT_NE(reuse.output, laterKernel->output());
}

TEST(AccumulatedOperand, VerifyPlanRejectsAResultOverAnotherOperand) {
  // A plan that puts the kernel's result over x's producer instead: not a reuse the kernel
  // allows.
  auto graph = test::parseKir(R"(
graph @g(%s: f32[1,16,4,4]) -> (f32[1,16,4,4]) {
  %w = param "w" : f32[16,16,1,1]
  %x = exp(%s) : f32[1,16,4,4]
  %r = neg(%s) : f32[1,16,4,4]
  %k = kernel(%x, %w, %r) {rule = "contraction+epilogue"} : f32[1,16,4,4] {
    ^(%x: f32[1,16,4,4], %w: f32[16,16,1,1], %r: f32[1,16,4,4]):
    %c = conv(%x, %w) {dilations = [1, 1], pads = [0, 0, 0, 0], strides = [1, 1]} : f32[1,16,4,4]
    %y = add(%c, %r) : f32[1,16,4,4]
    return %y
  }
  %out = neg(%k) : f32[1,16,4,4]
  return %out
}
)");
  const ir::Node *kernel = kernelOf(*graph);
  MemoryPlan plan = planMemory(*graph);
  ASSERT_FALSE(plan.reuses.empty());
  EXPECT_EQ(plan.reuses[0].operand, kernel->input(2));
  EXPECT_NO_THROW(verifyPlan(*graph, plan));
  MemoryPlan wrong = plan;
  wrong.reuses[0].operand = kernel->input(0);
  EXPECT_THROW(verifyPlan(*graph, wrong), Error);
}

} // namespace
} // namespace kiln::passes
