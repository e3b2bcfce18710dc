#pragma once
// Named pipelines: ordered lists of registered passes, written as code in passes/Pipelines.cpp
// with one comment per step saying why it is there. Every pipeline codegen runs is one of them,
// run as listed (codegen::lowerGraph, codegen::lowerTrainingGraph).
#include <string_view>
#include <vector>

namespace kiln::passes {

struct PipelineInfo {
  std::string_view name;
  std::string_view description;
  /// Registered pass names, in the order they run.
  std::vector<std::string_view> passes;
};

/// Every pipeline, sorted by name.
const std::vector<PipelineInfo> &registeredPipelines();
/// The pipeline called `name`; kiln::Error listing the known pipelines if there is none.
const PipelineInfo &findPipeline(std::string_view name);

} // namespace kiln::passes
