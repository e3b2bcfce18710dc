// The compiled training step (see TrainingStep.h), in stages:
//  1. lowerTrainingGraph: the `training` pipeline (its isolate-parameter-writes and
//     order-parameter-writes passes see the updates as outputs named after their parameters),
//     then C++ for the lowered graph with the plan its plan-memory pass made.
//  2. checkInPlaceUpdates on the lowered model: the launch writing each parameter comes after
//     every launch reading it, reads it only elementwise and has no stage that could park
//     another value in the parameter's buffer first.
//  3. compileTrainingStep: parameter and state tensors (copies of the initial values, owned
//     by the step) become the executable's weights and, through runInto, its update outputs.
//  4. Saving and loading: runtime/TrainingCheckpoint.h (.safetensors or a directory of .npy).
#include "codegen/TrainingStep.h"

#include <algorithm>
#include <cstring>
#include <unordered_map>

#include "core/Error.h"
#include "ir/Evaluator.h"
#include "passes/memory/ParameterWrites.h"
#include "runtime/TrainingCheckpoint.h"

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
  lowered.model = emitModel(*lowered.graph, lowered.plan, options.symbolPrefix, outputsOverParams);
  return lowered;
}

// ---- TrainingStep ---------------------------------------------------------------------------

struct TrainingStep::Impl {
  passes::autodiff::TrainingGraph training;
  bool reference = false;
  double lr = 0.0;
  int64_t steps = 0;
  std::vector<std::string> inputNames; // run()'s inputs: the graph's, without lr and step
  std::map<std::string, Tensor> params; // every parameter and state; updated in place
  std::unique_ptr<LoweredModel> lowered;
  std::unique_ptr<runtime::Executable> executable;
  std::vector<Tensor> outputs; // bound outputs: the loss, then the params' own tensors

  /// The graph's inputs: `inputs` with lr and step put in their places.
  std::vector<Tensor> bindInputs(const std::vector<Tensor> &inputs) const;
};

TrainingStep::TrainingStep(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
TrainingStep::TrainingStep(TrainingStep &&) noexcept = default;
TrainingStep &TrainingStep::operator=(TrainingStep &&) noexcept = default;
TrainingStep::~TrainingStep() = default;

TrainingStep::Impl &TrainingStep::state() const {
  if (!impl_)
    fail("use of a moved-from TrainingStep");
  return *impl_;
}

TrainingStep compileTrainingStep(const ir::Graph &forward, const LossSpec &loss, const OptimizerSpec &optimizer,
                                 const TrainingOptions &options) {
  auto impl = std::make_unique<TrainingStep::Impl>();
  impl->training = passes::autodiff::buildTrainingGraph(forward, loss, optimizer, options.params, options.buffers);
  impl->reference = options.reference;
  impl->lr = optimizer.lr;
  const ir::Graph &graph = *impl->training.graph;
  for (ir::Node *param : graph.params()) {
    const std::string &name = param->attrString("name");
    auto given = options.compile.params.find(name);
    Tensor value = given != options.compile.params.end() ? given->second : param->attrTensor("value");
    if (!value.defined())
      fail("training step: parameter '{}' has no value (give one in TrainingOptions::compile.params)", name);
    if (value.type() != param->output()->type())
      fail("training step: the value of parameter '{}' has type {}, the graph declares {}", name,
           value.type().toString(), param->output()->type().toString());
    impl->params[name] = value.clone(); // owned: the step writes it in place
  }
  for (size_t i = 0; i < graph.inputs().size(); ++i)
    if (i != impl->training.lrInput && i != impl->training.stepInput)
      impl->inputNames.push_back(graph.inputs()[i]->name());
  if (impl->reference)
    return TrainingStep(std::move(impl));

  impl->lowered = std::make_unique<LoweredModel>(lowerTrainingGraph(graph, impl->training.updates, options.compile));
  checkInPlaceUpdates(*impl->lowered, impl->training.updates);
  std::vector<Tensor> weights = collectWeights(*impl->lowered, impl->params);
  CompiledObject object = compileSource(impl->lowered->model.source, options.compile.compiler);
  impl->executable = std::make_unique<runtime::Executable>(
      runtime::Executable::load(object.soPath, std::move(weights), options.compile.runtime));
  // The checked launch list must be the one that runs.
  const std::vector<LaunchInfo> &launches = impl->lowered->model.launches;
  if (impl->executable->numLaunches() != static_cast<int64_t>(launches.size()))
    fail("training step: the executable has {} launches, the lowered model {}", impl->executable->numLaunches(),
         launches.size());
  for (size_t l = 0; l < launches.size(); ++l)
    if (impl->executable->launchName(static_cast<int64_t>(l)) != launches[l].name)
      fail("training step: launch {} is '{}' in the executable, '{}' in the lowered model", l,
           impl->executable->launchName(static_cast<int64_t>(l)), launches[l].name);
  // Outputs: the loss into a tensor of its own, every update into its parameter's tensor.
  const std::vector<runtime::TensorSpec> &outputs = impl->executable->outputs();
  impl->outputs.resize(outputs.size());
  impl->outputs[0] = Tensor(outputs[0].type);
  for (const ParamUpdate &update : impl->training.updates)
    impl->outputs.at(update.output) = impl->params.at(update.name);
  return TrainingStep(std::move(impl));
}

std::vector<Tensor> TrainingStep::Impl::bindInputs(const std::vector<Tensor> &inputs) const {
  if (inputs.size() != inputNames.size())
    fail("training step: expected {} inputs ({}), got {}", inputNames.size(), fmt::join(inputNames, ", "),
         inputs.size());
  const ir::Graph &graph = *training.graph;
  std::vector<Tensor> all(graph.inputs().size());
  size_t next = 0;
  for (size_t i = 0; i < all.size(); ++i) {
    if (i == training.lrInput)
      all[i] = Tensor::scalar(DType::F32, lr);
    else if (i == training.stepInput)
      all[i] = Tensor::scalar(DType::F32, static_cast<double>(steps + 1));
    else
      all[i] = inputs[next++];
  }
  return all;
}

float TrainingStep::run(const std::vector<Tensor> &inputs) {
  Impl &im = state();
  std::vector<Tensor> all = im.bindInputs(inputs);
  double loss = 0.0;
  if (im.reference) {
    std::vector<Tensor> results = ir::evaluate(*im.training.graph, all, im.params);
    for (const ParamUpdate &update : im.training.updates) {
      Tensor &target = im.params.at(update.name);
      if (target.byteSize() > 0)
        std::memcpy(target.data(), results.at(update.output).data(), target.byteSize());
    }
    loss = results[0].getDouble(0);
  } else {
    im.executable->runInto(all, im.outputs);
    loss = im.outputs[0].getDouble(0);
  }
  ++im.steps;
  return static_cast<float>(loss);
}

float TrainingStep::run(const std::map<std::string, Tensor> &inputs) {
  std::vector<Tensor> ordered;
  for (const std::string &name : state().inputNames) {
    auto found = inputs.find(name);
    if (found == inputs.end())
      fail("training step: missing input '{}' (inputs: {})", name, fmt::join(state().inputNames, ", "));
    ordered.push_back(found->second);
  }
  if (inputs.size() != ordered.size())
    for (const auto &entry : inputs)
      if (std::find(state().inputNames.begin(), state().inputNames.end(), entry.first) == state().inputNames.end())
        fail("training step: unknown input '{}' (inputs: {})", entry.first, fmt::join(state().inputNames, ", "));
  return run(ordered);
}

std::vector<std::string> TrainingStep::inputNames() const { return state().inputNames; }
double TrainingStep::learningRate() const { return state().lr; }
void TrainingStep::setLearningRate(double lr) {
  if (!(lr >= 0.0))
    fail("training step: the learning rate must be >= 0, got {}", lr);
  state().lr = lr;
}
int64_t TrainingStep::stepCount() const { return state().steps; }
void TrainingStep::setStepCount(int64_t steps) {
  if (steps < 0)
    fail("training step: the step count must be >= 0, got {}", steps);
  state().steps = steps;
}
const std::map<std::string, Tensor> &TrainingStep::parameters() const { return state().params; }
const Tensor &TrainingStep::parameter(const std::string &name) const {
  auto found = state().params.find(name);
  if (found == state().params.end()) {
    std::vector<std::string> names;
    for (const auto &entry : state().params)
      names.push_back(entry.first);
    fail("training step: no parameter '{}' (parameters: {})", name, fmt::join(names, ", "));
  }
  return found->second;
}
const std::vector<ParamUpdate> &TrainingStep::updates() const { return state().training.updates; }
bool TrainingStep::isReference() const { return state().reference; }
const passes::autodiff::TrainingGraph &TrainingStep::trainingGraph() const { return state().training; }
const runtime::Executable &TrainingStep::executable() const {
  if (!state().executable)
    fail("training step: the reference backend has no executable");
  return *state().executable;
}
const LoweredModel &TrainingStep::lowered() const {
  if (!state().lowered)
    fail("training step: the reference backend has no lowered model");
  return *state().lowered;
}

// ---- saving and loading: runtime/TrainingCheckpoint.h, shared with runtime::TrainingArtifact ----

void TrainingStep::saveParameters(const std::string &path) const {
  runtime::saveCheckpoint(path, state().params, state().steps);
}

void TrainingStep::loadParameters(const std::string &path) { runtime::loadCheckpoint(path, state().params, state().steps); }

} // namespace kiln::codegen
