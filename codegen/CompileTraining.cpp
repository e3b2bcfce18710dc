// Compiling a training step just in time (see CompileTraining.h), in stages:
//  1. lowerTrainingGraph: the `training` pipeline (its isolate-parameter-writes and
//     order-parameter-writes passes see the updates as outputs named after their parameters),
//     then C++ for the lowered graph with the plan its plan-memory pass made.
//  2. checkInPlaceUpdates on the lowered model: the launch writing each parameter comes after
//     every launch reading it, reads it only elementwise and has no stage that could park
//     another value in the parameter's buffer first.
//  3. trainingManifest: what runtime::TrainingStep needs to know about the step beyond its
//     executable (which inputs take lr, step and the target; which output overwrites what).
//  4. compileLoweredTrainingStep: copies of the initial values become the executable's weights
//     and, in runtime::TrainingStep, its update outputs. The reference backend instead hands
//     the training graph to the reference evaluator (ReferenceBackend).
//  5. Split steps (compileSplitTrainingStep): the gradient and update graphs each lowered and
//     checked as in 1-2, compiled in one translation unit, both loaded over the same tensors.
//  6. compileEvaluation: the forward graph with its loss per element, lowered by the training
//     pipeline with no updates, over the step's own parameter tensors.
#include "codegen/CompileTraining.h"

#include <algorithm>
#include <cstring>
#include <unordered_map>

#include "core/Error.h"
#include "core/SymbolicDim.h"
#include "ir/BatchTiling.h"
#include "ir/SymbolicShapes.h"
#include "ir/Evaluator.h"
#include "passes/memory/ParameterWrites.h"
#include "runtime/BatchTiles.h"

namespace kiln::codegen {

using passes::autodiff::ParamUpdate;

void checkInPlaceUpdates(const LoweredModel &lowered, const std::vector<ParamUpdate> &updates) {
  const ir::Graph &graph = *lowered.graph;
  std::unordered_map<const ir::Node *, size_t> launchOf; // lookup only
  for (size_t l = 0; l < lowered.model.launches.size(); ++l)
    if (lowered.model.launches[l].node)
      launchOf[lowered.model.launches[l].node] = l;
  auto launchName = [&](size_t l) { return lowered.model.launches[l].name; };
  for (const ParamUpdate &update : updates) {
    ir::Value *param = passes::findParam(graph, update.name);
    if (update.output >= graph.outputs().size())
      fail("training step: update of '{}' names output {}, but the graph has {}", update.name, update.output,
           graph.outputs().size());
    const ir::Value *output = graph.outputs()[update.output];
    const ir::Node *writer = output->producer();
    if (!param)
      continue; // the step reads nothing from the tensor it writes
    if (!writer)
      fail("training step: the new value of '{}' is a graph input", update.name);
    if (writer->op() == ir::OpKind::Param) {
      if (writer->output() != param)
        fail("training step: the new value of '{}' is parameter '{}', copied over it in place", update.name,
             writer->attrString("name"));
      continue; // a copy of the parameter onto itself
    }
    if (writer->op() == ir::OpKind::Constant)
      continue; // copy launches run after every node's launch
    auto found = launchOf.find(writer);
    if (found == launchOf.end())
      fail("training step: no launch writes the new value of '{}'", update.name);
    size_t writeLaunch = found->second;
    if (writer->op() == ir::OpKind::Kernel && writer->body() && passes::hasStagedOps(*writer))
      fail("training step: launch {} ('{}') writes parameter '{}' in place but computes in stages, which may "
           "use the parameter's buffer as scratch before reading it",
           writeLaunch, launchName(writeLaunch), update.name);
    for (ir::Node *reader : passes::readersOf(param)) {
      if (reader == writer) {
        if (!passes::readsOnlyElementwise(*writer, param))
          fail("training step: launch {} ('{}') writes parameter '{}' in place but also reads it at other "
               "elements",
               writeLaunch, launchName(writeLaunch), update.name);
        continue;
      }
      auto readLaunch = launchOf.find(reader);
      if (readLaunch != launchOf.end() && readLaunch->second > writeLaunch)
        fail("training step: launch {} ('{}') reads parameter '{}' after launch {} ('{}') overwrote it in place",
             readLaunch->second, launchName(readLaunch->second), update.name, writeLaunch, launchName(writeLaunch));
    }
  }
}

LoweredModel lowerTrainingGraph(const ir::Graph &graph, const std::vector<ParamUpdate> &updates,
                                const CompileOptions &options) {
  if (options.precision != ContractionPrecision::F32)
    fail("training step: precision {} is for inference; training steps compute in f32",
         contractionPrecisionName(options.precision));
  LoweredModel lowered;
  lowered.graph = graph.clone();
  // The pipeline's in-place passes know the updates by their outputs' names.
  for (const ParamUpdate &update : updates) {
    if (update.output >= graph.outputs().size())
      fail("training step: update of '{}' names output {}, but the graph has {}", update.name, update.output,
           graph.outputs().size());
    lowered.graph->setOutputName(update.output, update.name);
  }
  // An output named like a parameter it does not update (or an update of no parameter) would
  // make the passes order other writes than the ones the step makes.
  std::vector<std::string> named, updated;
  for (const passes::ParameterWrite &write : passes::parameterWrites(*lowered.graph))
    named.push_back(fmt::format("output {} over '{}'", write.output, write.param));
  std::vector<ParamUpdate> byOutput = updates;
  std::sort(byOutput.begin(), byOutput.end(),
            [](const ParamUpdate &a, const ParamUpdate &b) { return a.output < b.output; });
  for (const ParamUpdate &update : byOutput)
    updated.push_back(fmt::format("output {} over '{}'", update.output, update.name));
  if (named != updated)
    fail("training step: the outputs named like parameters ({}) are not the updates ({})", fmt::join(named, ", "),
         fmt::join(updated, ", "));
  runLoweringPasses(lowered, loweringPasses(options, "training"));
  // The step binds each update output to its parameter's own tensor: say so, so that the
  // kernels touching both do not promise the compiler two disjoint buffers.
  std::vector<std::pair<size_t, std::string>> outputsOverParams;
  for (const ParamUpdate &update : updates)
    outputsOverParams.emplace_back(update.output, update.name);
  // The parameters change between runs, in their own storage: none may be repacked at load.
  // Convolutions are exact sums: Winograd's rounding skews gradients (EmitOptions).
  EmitOptions emit;
  emit.paramsChange = true;
  emit.exactConvolutions = true;
  lowered.model = emitModel(*lowered.graph, lowered.plan, options.symbolPrefix, outputsOverParams, emit);
  return lowered;
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

/// The training graph's inputs and outputs as an executable of it would declare them.
std::vector<runtime::TensorSpec> inputSpecs(const ir::Graph &graph) {
  std::vector<runtime::TensorSpec> specs;
  for (const ir::Value *input : graph.inputs())
    specs.push_back({input->name(), input->type()});
  return specs;
}

std::vector<runtime::TensorSpec> outputSpecs(const ir::Graph &graph) {
  std::vector<runtime::TensorSpec> specs;
  for (size_t i = 0; i < graph.outputs().size(); ++i)
    specs.push_back({graph.outputName(i), graph.outputs()[i]->type()});
  return specs;
}

/// The reference backend: the training graph on the reference evaluator.
class ReferenceBackend final : public runtime::StepInterpreter {
public:
  explicit ReferenceBackend(std::unique_ptr<ir::Graph> graph)
      : graph_(std::move(graph)), inputs_(inputSpecs(*graph_)), outputs_(outputSpecs(*graph_)) {}

  const std::vector<runtime::TensorSpec> &inputs() const override { return inputs_; }
  const std::vector<runtime::TensorSpec> &outputs() const override { return outputs_; }

  void runInto(const std::vector<Tensor> &inputs, const std::map<std::string, Tensor> &params,
               std::vector<Tensor> &outputs) const override {
    std::vector<Tensor> results = ir::evaluate(*graph_, inputs, params);
    for (size_t i = 0; i < outputs.size(); ++i)
      if (outputs[i].byteSize() > 0)
        std::memcpy(outputs[i].data(), results.at(i).data(), outputs[i].byteSize());
  }

private:
  std::unique_ptr<ir::Graph> graph_;
  std::vector<runtime::TensorSpec> inputs_, outputs_;
};

/// Copies of the initial value of every parameter of the training graph (the step writes them
/// in place): options.compile.params by name, else the parameter's own.
std::map<std::string, Tensor> initialParameters(const ir::Graph &graph, const TrainingOptions &options) {
  std::map<std::string, Tensor> params;
  for (const ir::Node *param : graph.params()) {
    const std::string &name = param->attrString("name");
    auto given = options.compile.params.find(name);
    Tensor value = given != options.compile.params.end() ? given->second : param->attrTensor("value");
    if (!value.defined())
      fail("training step: parameter '{}' has no value (give one in TrainingOptions::compile.params)", name);
    if (value.type() != param->output()->type())
      fail("training step: the value of parameter '{}' has type {}, the graph declares {}", name,
           value.type().toString(), param->output()->type().toString());
    params[name] = value.clone();
  }
  return params;
}

std::string stepName(const ir::Graph &forward) {
  return forward.name().empty() ? "training step" : "training step @" + forward.name();
}

/// Checks that `executable` runs the launch list of `lowered`, the one checkInPlaceUpdates checked.
void checkLaunches(const runtime::Executable &executable, const LoweredModel &lowered) {
  const std::vector<LaunchInfo> &launches = lowered.model.launches;
  if (executable.numLaunches() != static_cast<int64_t>(launches.size()))
    fail("training step: the executable has {} launches, the lowered model {}", executable.numLaunches(),
         launches.size());
  for (size_t l = 0; l < launches.size(); ++l)
    if (executable.launchName(static_cast<int64_t>(l)) != launches[l].name)
      fail("training step: launch {} is '{}' in the executable, '{}' in the lowered model", l,
           executable.launchName(static_cast<int64_t>(l)), launches[l].name);
}

/// Per input of `forward` (whose batch is axis 0 of its first input): whether it holds the batch
/// on axis 0.
std::vector<bool> inputsHoldingTheBatch(const ir::Graph &forward) {
  const int64_t batch = forward.inputs()[0]->shape()[0];
  std::vector<bool> holding;
  for (const ir::Value *input : forward.inputs())
    holding.push_back(input->rank() > 0 && input->shape()[0] == batch);
  return holding;
}

/// For a step over batch tiles: the batch's symbol, the tile, and the forward inputs that hold
/// the batch.
struct BatchTileManifest {
  std::string symbol;
  int64_t tile = 0;
  std::vector<int64_t> forwardInputs;
};

/// The split step's training graphs and manifest (runtime/TrainingStep.h). With `tiles`,
/// `forward` is the graph of one tile and `loss` weighs its samples.
std::pair<passes::autodiff::SplitTrainingGraph, runtime::TrainingManifest>
buildSplitStep(const ir::Graph &forward, const LossSpec &loss, const OptimizerSpec &optimizer,
               const TrainingOptions &options, const BatchTileManifest *tiles) {
  passes::autodiff::SplitTrainingGraph split =
      passes::autodiff::buildSplitTrainingGraph(forward, loss, optimizer, options.params, options.buffers,
                                                options.frozen);
  runtime::TrainingManifest manifest = trainingManifest(forward, split.whole, loss, optimizer);
  if (tiles) {
    manifest.batchTile = tiles->tile;
    manifest.batchSymbol = tiles->symbol;
    manifest.weightInput = split.whole.weightInput;
    manifest.batchInputs = tiles->forwardInputs;
    if (split.whole.targetInput >= 0)
      manifest.batchInputs.push_back(split.whole.targetInput);
  }
  return {std::move(split), std::move(manifest)};
}

/// The two parts of a split step lowered and checked, each with its own symbol prefix.
LoweredSplitTrainingStep lowerSplitStep(passes::autodiff::SplitTrainingGraph split, runtime::TrainingManifest manifest,
                                        const TrainingOptions &options) {
  CompileOptions gradientOptions = options.compile, updateOptions = options.compile;
  gradientOptions.symbolPrefix += "gradients_";
  updateOptions.symbolPrefix += "update_";
  LoweredSplitTrainingStep step;
  step.gradients = lowerTrainingGraph(*split.gradients, split.gradientWrites, gradientOptions);
  checkInPlaceUpdates(step.gradients, split.gradientWrites);
  step.update = lowerTrainingGraph(*split.update, split.updateWrites, updateOptions);
  checkInPlaceUpdates(step.update, split.updateWrites);
  step.split = std::move(split);
  step.manifest = std::move(manifest);
  return step;
}

/// A split step (runtime/TrainingStep.h): its two graphs lowered, checked and compiled in one
/// translation unit, or on the reference backend. With `tiles`, `forward` is the graph of one
/// tile and `loss` weighs its samples.
runtime::TrainingStep compileSplitTrainingStep(const ir::Graph &forward, const LossSpec &loss,
                                               const OptimizerSpec &optimizer, const TrainingOptions &options,
                                               const BatchTileManifest *tiles = nullptr) {
  auto [split, manifest] = buildSplitStep(forward, loss, optimizer, options, tiles);
  std::map<std::string, Tensor> params = initialParameters(*split.whole.graph, options);
  if (options.reference)
    return runtime::TrainingStep(std::make_unique<ReferenceBackend>(std::move(split.gradients)),
                                 std::make_unique<ReferenceBackend>(std::move(split.update)), std::move(manifest),
                                 std::move(params), stepName(forward));
  LoweredSplitTrainingStep step = lowerSplitStep(std::move(split), std::move(manifest), options);
  CompiledObject object = compileLoweredBatch({&step.gradients, &step.update}, options.compile.compiler);
  auto load = [&](const LoweredModel &lowered) {
    runtime::Executable executable = runtime::Executable::load(object.soPath, collectWeights(lowered, params),
                                                               options.compile.runtime, lowered.model.modelSymbol);
    checkLaunches(executable, lowered);
    return executable;
  };
  runtime::Executable gradientPart = load(step.gradients);
  runtime::Executable updatePart = load(step.update);
  return runtime::TrainingStep(std::move(gradientPart), std::move(updatePart), std::move(step.manifest),
                               std::move(params), stepName(forward));
}

} // namespace

runtime::TrainingManifest trainingManifest(const ir::Graph &forward, const passes::autodiff::TrainingGraph &training,
                                           const LossSpec &loss, const OptimizerSpec &optimizer) {
  runtime::TrainingManifest manifest;
  manifest.loss = lossKindName(loss.kind);
  manifest.optimizer = optimizerKindName(optimizer.kind);
  manifest.hyperParameters = hyperParameters(optimizer);
  manifest.lr = optimizer.lr;
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
    manifest.ignoreIndex = loss.ignoreIndex;
  }
  for (const ir::Node *param : training.graph->params())
    manifest.params.push_back(param->attrString("name"));
  for (const ParamUpdate &update : training.updates)
    manifest.updates.push_back({static_cast<int64_t>(update.output), update.isState, update.name, update.param});
  return manifest;
}

LoweredTrainingStep lowerTrainingStep(const ir::Graph &forward, const LossSpec &loss, const OptimizerSpec &optimizer,
                                      const TrainingOptions &options) {
  if (!ir::isStaticGraph(forward))
    fail("{}: a whole step is compiled for one static batch, and graph @{} has symbolic dims: bind them first",
         stepName(forward), forward.name());
  LoweredTrainingStep step;
  step.training = passes::autodiff::buildTrainingGraph(forward, loss, optimizer, options.params, options.buffers,
                                                       options.frozen);
  step.lowered = lowerTrainingGraph(*step.training.graph, step.training.updates, options.compile);
  checkInPlaceUpdates(step.lowered, step.training.updates);
  // The manifest's input positions are the training graph's; the executable's inputs are the
  // lowered graph's, which the pipeline keeps in order.
  const std::vector<ir::Value *> &trained = step.training.graph->inputs();
  const std::vector<ir::Value *> &lowered = step.lowered.graph->inputs();
  if (lowered.size() != trained.size())
    fail("training step: the lowered graph has {} inputs, the training graph {}", lowered.size(), trained.size());
  for (size_t i = 0; i < lowered.size(); ++i)
    if (lowered[i]->name() != trained[i]->name())
      fail("training step: input {} is '{}' in the lowered graph, '{}' in the training graph", i, lowered[i]->name(),
           trained[i]->name());
  step.manifest = trainingManifest(forward, step.training, loss, optimizer);
  return step;
}

runtime::TrainingStep compileLoweredTrainingStep(const LoweredTrainingStep &step, const TrainingOptions &options) {
  std::map<std::string, Tensor> params = initialParameters(*step.training.graph, options);
  std::vector<Tensor> weights = collectWeights(step.lowered, params);
  CompiledObject object = compileSource(step.lowered.model.source, options.compile.compiler);
  runtime::Executable executable =
      runtime::Executable::load(object.soPath, std::move(weights), options.compile.runtime);
  checkLaunches(executable, step.lowered); // the checked launch list must be the one that runs
  return runtime::TrainingStep(std::move(executable), step.manifest, std::move(params), stepName(*step.training.graph));
}

namespace {

/// What a step over a symbolic batch compiles: the forward graph retiled to options.batchTile
/// rows, its loss weighted per sample, split (see TrainingOptions::batchTile).
struct TiledForward {
  std::unique_ptr<ir::Graph> tile;
  LossSpec loss;
  TrainingOptions options;
  BatchTileManifest tiles;
};

TiledForward tiledForward(const ir::Graph &forward, const LossSpec &loss, const TrainingOptions &options) {
  const std::string name = stepName(forward);
  if (!ir::servesEveryBatch(forward)) {
    ir::BatchAxes axes = ir::findBatchAxes(forward);
    fail("{}: a graph with symbolic dims trains only when its one symbol is its batch and its samples do not "
         "meet ({}); bind the symbols to train at one size",
         name, axes.separable ? "a symbol other than the batch, or the batch off axis 0" : axes.reason);
  }
  if (options.batchTile < 1)
    fail("{}: the batch tile must be at least 1 row, got {}", name, options.batchTile);
  BatchTileManifest tiles;
  tiles.tile = options.batchTile;
  tiles.symbol = dimSymbolName(forward.inputs()[0]->shape()[0]).value_or("");
  std::vector<bool> holding = inputsHoldingTheBatch(forward);
  for (size_t i = 0; i < holding.size(); ++i)
    if (holding[i])
      tiles.forwardInputs.push_back(static_cast<int64_t>(i));
  TiledForward tiled{ir::retileBatch(forward, options.batchTile), loss, options, tiles};
  tiled.tile->setName(forward.name());
  tiled.loss.sampleWeights = true;
  tiled.options.split = true;
  return tiled;
}

runtime::TrainingStep compileBatchTiledTrainingStep(const ir::Graph &forward, const LossSpec &loss,
                                                    const OptimizerSpec &optimizer, const TrainingOptions &options) {
  TiledForward tiled = tiledForward(forward, loss, options);
  return compileSplitTrainingStep(*tiled.tile, tiled.loss, optimizer, tiled.options, &tiled.tiles);
}

} // namespace

LoweredSplitTrainingStep lowerBatchTiledTrainingStep(const ir::Graph &forward, const LossSpec &loss,
                                                     const OptimizerSpec &optimizer, const TrainingOptions &options) {
  TiledForward tiled = tiledForward(forward, loss, options);
  auto [split, manifest] = buildSplitStep(*tiled.tile, tiled.loss, optimizer, tiled.options, &tiled.tiles);
  return lowerSplitStep(std::move(split), std::move(manifest), tiled.options);
}

runtime::TrainingStep compileTrainingStep(const ir::Graph &forward, const LossSpec &loss,
                                          const OptimizerSpec &optimizer, const TrainingOptions &options) {
  if (!ir::isStaticGraph(forward))
    return compileBatchTiledTrainingStep(forward, loss, optimizer, options);
  if (options.split)
    return compileSplitTrainingStep(forward, loss, optimizer, options);
  if (!options.reference)
    return compileLoweredTrainingStep(lowerTrainingStep(forward, loss, optimizer, options), options);
  passes::autodiff::TrainingGraph training =
      passes::autodiff::buildTrainingGraph(forward, loss, optimizer, options.params, options.buffers,
                                           options.frozen);
  std::map<std::string, Tensor> params = initialParameters(*training.graph, options);
  runtime::TrainingManifest manifest = trainingManifest(forward, training, loss, optimizer);
  return runtime::TrainingStep(std::make_unique<ReferenceBackend>(std::move(training.graph)), std::move(manifest),
                               std::move(params), stepName(forward));
}

namespace {

/// compileEvaluation of a forward graph over a symbolic batch: the evaluation of a tile of the
/// step's rows, run on each tile of a batch of any size (the last padded, its padding's rows
/// dropped from the results).
runtime::EvaluateFn compileTiledEvaluation(const ir::Graph &forward, const LossSpec &loss,
                                           const runtime::TrainingStep &step, const TrainingOptions &options) {
  const int64_t tile = step.manifest().batchTile;
  if (tile < 1)
    fail("{}: graph @{} has symbolic dims, but the step was compiled for a static batch", stepName(forward),
         forward.name());
  runtime::EvaluateFn perTile = compileEvaluation(*ir::retileBatch(forward, tile), loss, step, options);
  // The evaluation's inputs: the forward's, then the target, which holds the batch.
  std::vector<bool> batched = inputsHoldingTheBatch(forward);
  batched.push_back(true);
  return [perTile, tile, batched](const std::vector<Tensor> &inputs) {
    const int64_t rows = inputs.at(0).shape().at(0);
    std::vector<Tensor> tileInputs = inputs, results;
    for (size_t i = 0; i < inputs.size() && i < batched.size(); ++i)
      if (batched[i]) {
        TensorType type = inputs[i].type();
        type.shape[0] = tile;
        tileInputs[i] = Tensor(type);
      }
    for (int64_t begin = 0; begin < rows; begin += tile) {
      int64_t count = 0;
      for (size_t i = 0; i < inputs.size() && i < batched.size(); ++i)
        if (batched[i])
          count = runtime::BatchTiles::copyTileRows(inputs[i], begin, tileInputs[i]);
      std::vector<Tensor> outputs = perTile(tileInputs);
      if (results.empty())
        for (const Tensor &output : outputs) {
          TensorType type = output.type();
          type.shape[0] = rows;
          results.emplace_back(type);
        }
      for (size_t o = 0; o < outputs.size(); ++o) {
        Tensor target = runtime::BatchTiles::rowsView(results[o], begin, count);
        std::memcpy(target.data(), outputs[o].data(), target.byteSize());
      }
    }
    return results;
  };
}

} // namespace

runtime::EvaluateFn compileEvaluation(const ir::Graph &forward, const LossSpec &loss, const runtime::TrainingStep &step,
                                      const TrainingOptions &options) {
  if (!ir::isStaticGraph(forward))
    return compileTiledEvaluation(forward, loss, step, options);
  std::shared_ptr<const ir::Graph> graph = passes::autodiff::buildEvaluationGraph(forward, loss);
  std::map<std::string, Tensor> params = step.parameters(); // the step's own tensors (copies share storage)
  if (options.reference)
    return [graph, params](const std::vector<Tensor> &inputs) { return ir::evaluate(*graph, inputs, params); };
  // The training pipeline (no BatchNorm folding: the parameters change), no updates.
  LoweredModel lowered = lowerTrainingGraph(*graph, {}, options.compile);
  CompiledObject object = compileSource(lowered.model.source, options.compile.compiler);
  auto executable = std::make_shared<runtime::Executable>(
      runtime::Executable::load(object.soPath, collectWeights(lowered, params), options.compile.runtime));
  return [executable](const std::vector<Tensor> &inputs) { return executable->run(inputs); };
}

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

} // namespace kiln::codegen
