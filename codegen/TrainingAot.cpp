// compileTrainingAheadOfTime (see TrainingAot.h), in stages:
//  1. buildTrainingGraph, lowerTrainingGraph and checkInPlaceUpdates: compileTrainingStep's
//     path, with the inner symbol prefix an ahead-of-time model needs.
//  2. The weights: the initial values of parameters and states (a checkpoint's, the given
//     ones, the graph's), by collectWeights.
//  3. The manifest: input positions, the weights that are parameters, the updates.
//  4. compileLoweredAheadOfTime with the manifest exported as KILN_TRAINING_SYMBOL.
#include "codegen/TrainingAot.h"

#include <set>

#include "core/Error.h"
#include "runtime/TrainingCheckpoint.h"

namespace kiln::codegen {

const char *lossKindName(LossKind kind) {
  switch (kind) {
  case LossKind::Value:
    return "value";
  case LossKind::Mean:
    return "mean";
  case LossKind::Sum:
    return "sum";
  case LossKind::Mse:
    return "mse";
  case LossKind::CrossEntropy:
    return "cross-entropy";
  case LossKind::Nll:
    return "nll";
  }
  return "unknown";
}

const char *optimizerKindName(OptimizerKind kind) {
  switch (kind) {
  case OptimizerKind::Sgd:
    return "sgd";
  case OptimizerKind::Adam:
    return "adam";
  case OptimizerKind::AdamW:
    return "adamw";
  }
  return "unknown";
}

namespace {

/// The optimizer's hyper-parameters that apply to its kind (lr aside), for display.
std::vector<std::pair<std::string, double>> hyperParameters(const OptimizerSpec &optimizer) {
  if (optimizer.kind == OptimizerKind::Sgd)
    return {{"momentum", optimizer.momentum},
            {"dampening", optimizer.dampening},
            {"nesterov", optimizer.nesterov ? 1.0 : 0.0},
            {"weight_decay", optimizer.weightDecay}};
  return {{"beta1", optimizer.beta1},
          {"beta2", optimizer.beta2},
          {"eps", optimizer.eps},
          {"weight_decay", optimizer.weightDecay}};
}

/// The manifest of a lowered training graph; kiln::Error when an update has no weight.
runtime::TrainingManifest makeManifest(const ir::Graph &forward, const passes::autodiff::TrainingGraph &training,
                                       const LoweredModel &lowered, const LossSpec &loss,
                                       const OptimizerSpec &optimizer, int64_t steps) {
  runtime::TrainingManifest manifest;
  manifest.loss = lossKindName(loss.kind);
  manifest.optimizer = optimizerKindName(optimizer.kind);
  manifest.hyperParameters = hyperParameters(optimizer);
  manifest.lr = optimizer.lr;
  manifest.steps = steps;
  // The emitted model's inputs are the lowered graph's, which keeps the training graph's order.
  const ir::Graph &graph = *training.graph;
  const std::vector<ir::Value *> &loweredInputs = lowered.graph->inputs();
  if (loweredInputs.size() != graph.inputs().size())
    fail("training step: the lowered graph has {} inputs, the training graph {}", loweredInputs.size(),
         graph.inputs().size());
  for (size_t i = 0; i < loweredInputs.size(); ++i)
    if (loweredInputs[i]->name() != graph.inputs()[i]->name())
      fail("training step: input {} is '{}' in the lowered graph, '{}' in the training graph", i,
           loweredInputs[i]->name(), graph.inputs()[i]->name());
  manifest.lrInput = static_cast<int64_t>(training.lrInput);
  manifest.stepInput = static_cast<int64_t>(training.stepInput);
  manifest.targetInput = training.targetInput;
  if (loss.kind == LossKind::CrossEntropy || loss.kind == LossKind::Nll) {
    // The class count, for drawing labels: dim 1 of the loss output (logits [N, C]).
    const ir::Value *output = loss.output < forward.outputs().size() ? forward.outputs()[loss.output] : nullptr;
    if (!loss.outputName.empty())
      for (size_t i = 0; i < forward.outputs().size(); ++i)
        if (forward.outputName(i) == loss.outputName)
          output = forward.outputs()[i];
    if (output && output->type().rank() >= 2)
      manifest.classes = output->type().shape[1];
  }
  std::set<std::string> weightParams;
  for (const WeightInfo &weight : lowered.model.weights)
    if (weight.value->producer()->op() == ir::OpKind::Param) {
      manifest.params.push_back(weight.name);
      weightParams.insert(weight.name);
    }
  for (const passes::autodiff::ParamUpdate &update : training.updates) {
    if (!weightParams.count(update.name))
      fail("training step: '{}' is overwritten by every step but never read, so it has no weight to embed in "
           "the compiled step",
           update.name);
    manifest.updates.push_back({static_cast<int64_t>(update.output), update.isState, update.name, update.param});
  }
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
  passes::autodiff::TrainingGraph training =
      passes::autodiff::buildTrainingGraph(forward, loss, optimizer, options.params, options.buffers);
  ir::ParamValues values = options.compile.params;
  int64_t steps = start.steps;
  if (!start.checkpoint.empty())
    applyCheckpoint(*training.graph, start.checkpoint, values, steps);
  // The emitted description gets a private prefix; the exported one keeps the caller's.
  CompileOptions inner = options.compile;
  inner.symbolPrefix = options.compile.symbolPrefix + "aot_";
  LoweredModel lowered = lowerTrainingGraph(*training.graph, training.updates, inner);
  checkInPlaceUpdates(lowered, training.updates);
  std::vector<Tensor> weights = collectWeights(lowered, values);

  AotTrainingStep result;
  result.manifest = makeManifest(forward, training, lowered, loss, optimizer, steps);
  AotOptions withManifest = aot;
  withManifest.exportedStrings[options.compile.symbolPrefix + KILN_TRAINING_SYMBOL] = result.manifest.toText();
  result.model = compileLoweredAheadOfTime(lowered, weights, outputPath, options.compile, withManifest);
  return result;
}

} // namespace kiln::codegen
