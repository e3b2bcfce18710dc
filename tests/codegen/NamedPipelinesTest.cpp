// Codegen runs the named pipelines of passes/Pipelines.cpp exactly as listed, plan-memory
// included, so that `kiln-dump --pipeline=NAME` shows what is compiled: the passes a lowering
// ran (the pass manager's records) are the pipeline's, for a model and for a training step,
// with fusion and without; the plan codegen emits is the one plan-memory made of the final
// graph; a pass list that does not end with plan-memory is refused.
#include <gtest/gtest.h>

#include "tests/ErrorMatchers.h"

#include "codegen/CompileTraining.h"
#include "passes/Pipelines.h"
#include "tests/codegen/CodegenTestUtil.h"

namespace kiln::codegen::test {
namespace {

std::vector<std::string> passesRun(const LoweredModel &lowered) {
  std::vector<std::string> names;
  for (const passes::PassRecord &record : lowered.passRecords)
    names.push_back(record.name);
  return names;
}

std::vector<std::string> pipeline(const std::string &name) {
  const passes::PipelineInfo &info = passes::findPipeline(name);
  return std::vector<std::string>(info.passes.begin(), info.passes.end());
}

CompileOptions unfused() {
  CompileOptions options = testOptions();
  options.fuse = false;
  return options;
}

/// The plan codegen emits describes the graph it emits: it is the plan of that graph.
void expectPlanOfTheFinalGraph(const LoweredModel &lowered) {
  passes::verifyPlan(*lowered.graph, lowered.plan);
  passes::MemoryPlan replanned = passes::planMemory(*lowered.graph);
  EXPECT_EQ(lowered.plan.arenaBytes, replanned.arenaBytes);
  EXPECT_EQ(lowered.plan.offsets, replanned.offsets);
  EXPECT_EQ(lowered.model.arenaBytes, lowered.plan.arenaBytes);
}

TEST(NamedPipelines, AModelGoesThroughTheInferencePipeline) {
  auto graph = smallMlp(3);
  LoweredModel lowered = lowerGraph(*graph, testOptions());
  EXPECT_EQ(passesRun(lowered), pipeline("inference"));
  expectPlanOfTheFinalGraph(lowered);
  LoweredModel withoutFusion = lowerGraph(*graph, unfused());
  EXPECT_EQ(passesRun(withoutFusion), pipeline("inference-unfused"));
  expectPlanOfTheFinalGraph(withoutFusion);
  EXPECT_GT(withoutFusion.model.launches.size(), lowered.model.launches.size());
}

TEST(NamedPipelines, ATrainingStepGoesThroughTheTrainingPipeline) {
  auto forward = smallMlp(3);
  auto training = passes::autodiff::buildTrainingGraph(*forward, {LossKind::Mean}, OptimizerSpec::sgd(0.1, 0.9));
  LoweredModel lowered = lowerTrainingGraph(*training.graph, training.updates, testOptions());
  EXPECT_EQ(passesRun(lowered), pipeline("training"));
  expectPlanOfTheFinalGraph(lowered);
  LoweredModel withoutFusion = lowerTrainingGraph(*training.graph, training.updates, unfused());
  EXPECT_EQ(passesRun(withoutFusion), pipeline("training-unfused"));
  expectPlanOfTheFinalGraph(withoutFusion);
}

TEST(NamedPipelines, APassListMustEndWithPlanMemory) {
  auto graph = smallMlp(3);
  CompileOptions options = testOptions();
  options.passes = {"decompose", "fuse"};
  kiln::test::expectErrorContaining([&] { lowerGraph(*graph, options); },
                                    "the passes must end with plan-memory, whose memory plan codegen emits "
                                    "(passes: decompose, fuse)");
  options.passes.push_back("plan-memory");
  EXPECT_EQ(passesRun(lowerGraph(*graph, options)), options.passes);
}

} // namespace
} // namespace kiln::codegen::test
