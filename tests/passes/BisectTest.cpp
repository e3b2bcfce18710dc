// bisectPasses: correct passes all agree; a pass that changes the numbers is the first failure
// and the passes after it fail too; the tolerance decides; a graph that no longer evaluates is
// a failed check, one that never did is an error.
#include <gtest/gtest.h>

#include "core/Error.h"
#include "ir/Builder.h"
#include "passes/Bisect.h"
#include "tests/passes/PassTestUtil.h"

namespace kiln {
namespace {

using passes::PassCheck;
using passes::PassContext;

/// Multiplies the first output by a constant factor: a pass that changes the numbers.
class ScaleOutputPass : public passes::Pass {
public:
  explicit ScaleOutputPass(double factor) : factor_(factor) {}
  std::string_view name() const override { return "scale-output"; }
  bool run(ir::Graph &graph, PassContext &) override {
    ir::Builder builder(graph);
    ir::Value *output = graph.outputs()[0];
    ir::Value *scaled = builder.create(ir::OpKind::Mul, {output, builder.scalar(output->dtype(), factor_)});
    graph.setOutput(0, scaled);
    return true;
  }

private:
  double factor_;
};

/// Renames the first parameter and drops its value: the graph no longer evaluates.
class RenameParamPass : public passes::Pass {
public:
  std::string_view name() const override { return "rename-param"; }
  bool run(ir::Graph &graph, PassContext &) override {
    ir::Node *param = graph.params().front();
    param->setAttr("name", std::string("ghost"));
    param->setAttr("value", Tensor());
    return true;
  }
};

constexpr const char *kGraph = R"(graph @g(%x: f32[2,3]) -> (f32[2,3], f32[3]) {
  %w = param "w" {value = tensor<f32[3]>[0.5, 1.5, -2.0]} : f32[3]
  %a = mul(%x, %w) : f32[2,3]
  %b = mul(%w, %x) : f32[2,3]
  %dead = exp(%x) : f32[2,3]
  %y = add(%a, %b) : f32[2,3]
  %s = reduce_sum(%y) {axes = [0]} : f32[3]
  return %y, %s
})";

struct Bisection {
  std::vector<PassCheck> checks;
  std::vector<std::string> seen; // "index pass" as onCheck saw them
};

Bisection bisect(passes::PassManager &manager, double rtol = 1e-4, double atol = 1e-5) {
  auto graph = test::parseKir(kGraph);
  std::vector<Tensor> inputs = {randomTensor(graph->inputs()[0]->type(), 1)};
  Bisection result;
  result.checks = passes::bisectPasses(*graph, manager, inputs, {}, rtol, atol, [&](const PassCheck &check) {
    result.seen.push_back(std::to_string(check.index) + " " + check.pass);
  });
  return result;
}

TEST(Bisect, CorrectPassesAllAgree) {
  passes::PassManager manager;
  manager.addPasses({"constant-fold", "cse", "dce", "decompose"});
  Bisection result = bisect(manager);
  ASSERT_EQ(result.checks.size(), 4u);
  for (const PassCheck &check : result.checks) {
    EXPECT_TRUE(check.ok) << check.pass << ": " << check.problem;
    EXPECT_EQ(check.maxRelError, 0.0) << check.pass;
  }
  EXPECT_EQ(passes::firstFailure(result.checks), nullptr);
  EXPECT_EQ(result.seen, (std::vector<std::string>{"1 constant-fold", "2 cse", "3 dce", "4 decompose"}));
}

TEST(Bisect, NamesTheFirstPassThatChangesTheNumbers) {
  passes::PassManager manager;
  manager.addPass("cse");
  manager.addPass(std::make_unique<ScaleOutputPass>(2.0));
  manager.addPass("dce");
  Bisection result = bisect(manager);
  ASSERT_EQ(result.checks.size(), 3u);
  EXPECT_TRUE(result.checks[0].ok);
  EXPECT_FALSE(result.checks[1].ok);
  EXPECT_EQ(result.checks[1].failedOutput, 0);
  EXPECT_NE(result.checks[1].problem.find("worst element"), std::string::npos) << result.checks[1].problem;
  EXPECT_NEAR(result.checks[1].maxRelError, 1.0, 1e-12); // 2y against y
  EXPECT_FALSE(result.checks[2].ok);                     // dce keeps the wrong numbers
  const PassCheck *first = passes::firstFailure(result.checks);
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(first->index, 2u);
  EXPECT_EQ(first->pass, "scale-output");
}

TEST(Bisect, TheToleranceDecides) {
  // f32(1.001) is 1.00100004673; the product rounds to f32 once more.
  passes::PassManager loose;
  loose.addPass(std::make_unique<ScaleOutputPass>(1.001));
  Bisection within = bisect(loose, 1e-2, 0);
  ASSERT_EQ(within.checks.size(), 1u);
  EXPECT_TRUE(within.checks[0].ok);
  EXPECT_NEAR(within.checks[0].maxRelError, 1e-3, 1e-6);

  passes::PassManager strict;
  strict.addPass(std::make_unique<ScaleOutputPass>(1.001));
  Bisection outside = bisect(strict, 1e-4, 0);
  EXPECT_FALSE(outside.checks[0].ok);
}

TEST(Bisect, AGraphThatNoLongerEvaluatesIsAFailedCheck) {
  passes::PassManager manager;
  manager.addPass(std::make_unique<RenameParamPass>());
  manager.addPass("dce");
  Bisection result = bisect(manager);
  ASSERT_EQ(result.checks.size(), 2u);
  EXPECT_FALSE(result.checks[0].ok);
  EXPECT_EQ(result.checks[0].failedOutput, -1);
  EXPECT_NE(result.checks[0].problem.find("evaluation failed"), std::string::npos) << result.checks[0].problem;
  EXPECT_NE(result.checks[0].problem.find("ghost"), std::string::npos) << result.checks[0].problem;
}

TEST(Bisect, AGraphThatDoesNotEvaluateBeforeAnyPassIsAnError) {
  auto graph = test::parseKir(kGraph);
  passes::PassManager manager;
  manager.addPass("dce");
  std::vector<Tensor> wrongInputs = {randomTensor({DType::F32, {3, 2}}, 1)};
  EXPECT_THROW(passes::bisectPasses(*graph, manager, wrongInputs, {}, 1e-4, 1e-5), Error);
}

TEST(Bisect, LeavesTheManagerWithoutItsCallback) {
  passes::PassManager manager;
  manager.addPass("cse");
  bisect(manager);
  // The callback referred to bisectPasses' frame; running again must not call it.
  auto graph = test::parseKir(kGraph);
  PassContext context;
  EXPECT_TRUE(manager.run(*graph, context));
}

} // namespace
} // namespace kiln
