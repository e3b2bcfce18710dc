// compileTrainingAheadOfTime (see TrainingAot.h), in stages:
//  1. lowerTrainingStep: compileTrainingStep's path, with the inner symbol prefix an
//     ahead-of-time model needs.
//  2. The weights: the initial values of parameters and states (a checkpoint's, the given
//     ones, the graph's), by collectWeights.
//  3. The manifest: lowerTrainingStep's, with the weights that are parameters and the start step.
//  4. compileLoweredPartsAheadOfTime with the manifest exported as KILN_TRAINING_SYMBOL.
// A forward graph over a symbolic batch lowers as compileTrainingStep's tiles do
// (lowerBatchTiledTrainingStep): a split step, whose gradient part is exported as
// KILN_MODEL_SYMBOL and update part as KILN_TRAINING_UPDATE_SYMBOL, each with the weights it
// reads (compileLoweredPartsAheadOfTime; runtime::TrainingStep::load shares the parameters).
#include "codegen/TrainingAot.h"

#include <optional>
#include <set>

#include "core/Error.h"
#include "ir/SymbolicShapes.h" // isStaticGraph
#include "runtime/TrainingCheckpoint.h"

namespace kiln::codegen {

namespace {

/// The manifest of a step compiled ahead of time: its parameters are the weights it embeds
/// (a parameter nothing reads has none), and it starts at step `steps`. kiln::Error when an
/// update has no weight to overwrite.
runtime::TrainingManifest aheadOfTimeManifest(runtime::TrainingManifest manifest,
                                              const std::vector<const LoweredModel *> &parts, int64_t steps) {
  manifest.steps = steps;
  manifest.params.clear();
  std::set<std::string> weightParams;
  for (const LoweredModel *part : parts)
    for (const WeightInfo &weight : part->model.weights)
      if (weight.value->producer()->op() == ir::OpKind::Param && weightParams.insert(weight.name).second)
        manifest.params.push_back(weight.name);
  for (const runtime::TrainingManifestUpdate &update : manifest.updates)
    if (!weightParams.count(update.name))
      fail("training step: '{}' is overwritten by every step but never read, so it has no weight to embed in "
           "the compiled step",
           update.name);
  return manifest;
}

/// The checkpoint's tensors into `values`, its step count into `steps`, all checked first.
void applyCheckpoint(const ir::Graph &graph, const std::string &path, ir::ParamValues &values, int64_t &steps) {
  std::map<std::string, const ir::Value *> params;
  for (const ir::Node *param : graph.params())
    params[param->attrString("name")] = param->output();
  std::map<std::string, Tensor> loaded = runtime::readCheckpoint(path);
  int64_t loadedSteps = steps;
  for (const auto &[name, tensor] : loaded) {
    if (name == runtime::kCheckpointStepName) {
      loadedSteps = runtime::checkpointSteps(tensor, path);
      continue;
    }
    auto found = params.find(name);
    if (found == params.end())
      fail("training step: '{}' holds '{}', which is not a parameter of this training step", path, name);
    if (found->second->type() != tensor.type())
      fail("training step: '{}' holds '{}' as {}, the step has {}", path, name, tensor.type().toString(),
           found->second->type().toString());
  }
  for (const auto &[name, tensor] : loaded)
    if (name != runtime::kCheckpointStepName)
      values[name] = tensor;
  steps = loadedSteps;
}

} // namespace

AotTrainingStep compileTrainingAheadOfTime(const ir::Graph &forward, const LossSpec &loss,
                                           const OptimizerSpec &optimizer, const std::string &outputPath,
                                           const TrainingOptions &options, const AotOptions &aot,
                                           const AotTrainingStart &start) {
  if (options.reference)
    fail("training step: a step compiled ahead of time cannot run on the reference evaluator");
  if (start.steps < 0)
    fail("training step: the step count must be >= 0, got {}", start.steps);
  // The emitted description gets a private prefix; the exported one keeps the caller's.
  TrainingOptions inner = options;
  inner.compile.symbolPrefix = options.compile.symbolPrefix + "aot_";
  // One step or a split one (a symbolic batch's tiles): its models, each exported under its
  // symbol, the graph its parameters belong to and its manifest.
  std::optional<LoweredTrainingStep> whole;
  std::optional<LoweredSplitTrainingStep> split;
  std::vector<std::pair<const LoweredModel *, const char *>> models;
  const ir::Graph *trainingGraph = nullptr;
  if (ir::isStaticGraph(forward)) {
    whole = lowerTrainingStep(forward, loss, optimizer, inner);
    models = {{&whole->lowered, KILN_MODEL_SYMBOL}};
    trainingGraph = whole->training.graph.get();
  } else {
    split = lowerBatchTiledTrainingStep(forward, loss, optimizer, inner);
    models = {{&split->gradients, KILN_MODEL_SYMBOL}, {&split->update, KILN_TRAINING_UPDATE_SYMBOL}};
    trainingGraph = split->split.whole.graph.get();
  }
  ir::ParamValues values = options.compile.params;
  int64_t steps = start.steps;
  if (!start.checkpoint.empty())
    applyCheckpoint(*trainingGraph, start.checkpoint, values, steps);

  std::vector<AotPart> parts;
  std::vector<const LoweredModel *> lowered;
  for (const auto &[model, symbol] : models) {
    parts.push_back({model, collectWeights(*model, values), options.compile.symbolPrefix + symbol});
    lowered.push_back(model);
  }
  AotTrainingStep result;
  result.manifest = aheadOfTimeManifest(whole ? whole->manifest : split->manifest, lowered, steps);
  AotOptions withManifest = aot;
  withManifest.exportedStrings[options.compile.symbolPrefix + KILN_TRAINING_SYMBOL] = result.manifest.toText();
  result.model = compileLoweredPartsAheadOfTime(parts, outputPath, options.compile, withManifest);
  return result;
}

} // namespace kiln::codegen
