// The training step (see TrainingStep.h), in stages:
//  1. Binding, for every way a step is made: the manifest checked against the model's inputs
//     (Impl::bindInputs: the inputs run() takes) and outputs, which are bound to the parameters
//     they overwrite (bindWholeStep; bindSplitStep for both parts of a split step).
//  2. Running (StepPart::run): the learning rate and step count put in their inputs' places, the
//     outputs no parameter backs allocated (first run only), the executable (or the
//     interpreter) run into the bound outputs, the step count advanced. A split step runs its
//     gradient part, then its update part on the gradient part's gradient outputs.
//  3. Loading a file kiln-compile --train wrote: Executable::load with the weights it carries
//     first (every check of a compiled model: ELF segments, ABI version, description, the
//     carried weights' byte ranges inside the file, which copyWeights relies on), then the
//     manifest and the weights' bytes read through dlopen / dlsym, writable copies of the
//     weights, and the model loaded again over those. A split step's file (a symbolic batch's
//     tiles) holds its update part too (KILN_TRAINING_UPDATE_SYMBOL), with weights of its own:
//     both parts are loaded over one copy of each parameter and state, the update part's
//     states from its own carried bytes.
#include "runtime/TrainingStep.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <optional>
#include <set>

#include <dlfcn.h>

#include "core/Error.h"
#include "core/ShapeMath.h"
#include "core/SymbolicDim.h"
#include "runtime/BatchTiles.h"
#include "runtime/LoadedObject.h"
#include "runtime/TensorSums.h"
#include "runtime/TrainingCheckpoint.h"

namespace kiln::runtime {

namespace {

bool isFloatScalar(const TensorType &type) { return isFloat(type.dtype) && type.numElements() == 1; }
bool isF32Scalar(const TensorType &type) { return type.dtype == DType::F32 && type.numElements() == 1; }

} // namespace

/// One executable (or interpreter) of a step, and the tensors it writes its outputs into.
struct StepPart {
  std::unique_ptr<Executable> executable; // one of these two runs it
  std::unique_ptr<StepInterpreter> interpreter;
  std::vector<Tensor> outputs; // parameters' own tensors where it updates one; the rest allocated by run()

  const std::vector<TensorSpec> &inputSpecs() const {
    return executable ? executable->inputs() : interpreter->inputs();
  }
  const std::vector<TensorSpec> &outputSpecs() const {
    return executable ? executable->outputs() : interpreter->outputs();
  }
  void run(const std::vector<Tensor> &inputs, const std::map<std::string, Tensor> &params,
           const std::function<void(int64_t)> &afterLaunch = {}) {
    // Allocated here, not when bound: loading a step allocates in proportion to its file, and a
    // damaged file may declare any output size.
    const std::vector<TensorSpec> &specs = outputSpecs();
    for (size_t i = 0; i < outputs.size(); ++i)
      if (!outputs[i].defined())
        outputs[i] = Tensor(specs[i].type);
    if (executable)
      executable->runInto(inputs, outputs, afterLaunch);
    else
      interpreter->runInto(inputs, params, outputs);
  }
};

struct TrainingStep::Impl {
  std::string name; // "training step @mlp", "training step 'step.so'": the start of every error
  TrainingManifest manifest;
  StepPart main;                  // the whole step, or the gradient part of a split step
  std::optional<StepPart> update; // the update part of a split step
  double lr = 0.0;
  int64_t steps = 0;
  std::vector<TensorSpec> inputs;       // run()'s: the model's without lr and step
  int64_t targetInput = -1;             // in `inputs`
  std::map<std::string, Tensor> params; // updated in place
  bool haveGradients = false;           // split: computeGradients ran since the last update
  // Split, compiled: the gradients final after each launch of the gradient part (in
  // gradientReadyOrder), and before any (touched by none); filled at the first use.
  std::vector<std::vector<size_t>> readyAfterLaunch;
  std::vector<size_t> readyBeforeLaunches;
  std::vector<size_t> readyOrder; // empty until planned (or with no gradients)
  bool readinessPlanned = false;
  // Batch tiles (manifest.batchTile > 0): a short tile's rows, per model input (batch inputs
  // only), the sample weights, and the gradients' sums over the tiles before the last.
  BatchTiles tiles;
  std::vector<Tensor> tileRows;
  Tensor tileWeights;
  std::vector<Tensor> gradientSums;
  size_t gradientCount() const { return update->inputSpecs().size() - 2; }
  bool isModelOnlyInput(size_t i) const {
    auto index = static_cast<int64_t>(i);
    return index == manifest.lrInput || index == manifest.stepInput || index == manifest.weightInput;
  }
  /// Checks the manifest's batch tiles against the main part's inputs.
  void bindBatchTiles();
  /// computeGradients over batch tiles: the main part run on each tile of `all` (modelInputs'),
  /// its gradients summed; the loss, summed. `betweenKernels` may be empty.
  float computeTiledGradients(std::vector<Tensor> all, const std::function<void()> &betweenKernels);
  /// Each sample's weight in the loss of a batch of `rows` (its labels in `all`): 1 / rows for
  /// a mean, 1 for a sum; a sample with an ignored label 0, and the others 1 / their count.
  std::vector<float> sampleWeights(const std::vector<Tensor> &all, int64_t rows) const;
  /// Fills readyOrder, readyAfterLaunch and readyBeforeLaunches, once.
  void planReadiness();

  void fault(const std::string &message) const {
    fail("{}: its manifest does not fit the model: {}", name, message);
  }
  /// Checks the manifest against the main part's inputs and `params`, and sets `inputs`.
  void bindInputs();
  /// Binds the main part's outputs (a whole step) to the parameters they overwrite.
  void bindWholeStep();
  /// Binds both parts of a split step (see TrainingStep.h for their layout).
  void bindSplitStep();
  /// `inputs` with lr and step put in the places of the main part's inputs.
  std::vector<Tensor> modelInputs(const std::vector<Tensor> &inputs) const;
  /// The update part's inputs: the gradients, lr, step.
  std::vector<Tensor> updateInputs() const;
  void checkCanAdvance() const;
  const Tensor &paramTensor(const std::string &param) {
    auto found = params.find(param);
    if (found == params.end())
      fault(fmt::format("the update of '{}' names no parameter", param));
    return found->second;
  }
};

void TrainingStep::Impl::bindInputs() {
  const std::vector<TensorSpec> &modelInputs = main.inputSpecs();
  auto checkInput = [&](int64_t index, const char *role) {
    if (index < 0 || static_cast<size_t>(index) >= modelInputs.size())
      fault(fmt::format("the {} input is {}, the model has {} inputs", role, index, modelInputs.size()));
  };
  checkInput(manifest.lrInput, "learning rate");
  checkInput(manifest.stepInput, "step count");
  if (manifest.lrInput == manifest.stepInput)
    fault("the learning rate and the step count are one input");
  for (int64_t index : {manifest.lrInput, manifest.stepInput})
    if (!isF32Scalar(modelInputs[static_cast<size_t>(index)].type))
      fault(fmt::format("input '{}' is {}, not an f32 scalar", modelInputs[static_cast<size_t>(index)].name,
                        modelInputs[static_cast<size_t>(index)].type.toString()));
  if (manifest.targetInput >= 0) {
    checkInput(manifest.targetInput, "target");
    // Else run() would fill it with the learning rate or step count and targetInput() say -1.
    if (manifest.targetInput == manifest.lrInput || manifest.targetInput == manifest.stepInput)
      fault(fmt::format("the target input {} is also the learning rate or step count input", manifest.targetInput));
  }
  if (manifest.batchTile > 0)
    bindBatchTiles();
  for (size_t i = 0; i < modelInputs.size(); ++i) {
    if (isModelOnlyInput(i))
      continue;
    if (static_cast<int64_t>(i) == manifest.targetInput)
      targetInput = static_cast<int64_t>(inputs.size());
    TensorSpec input = modelInputs[i];
    if (std::count(manifest.batchInputs.begin(), manifest.batchInputs.end(), static_cast<int64_t>(i)))
      input.type.shape[0] = symbolDim(manifest.batchSymbol); // run() takes any batch
    inputs.push_back(input);
  }

  std::set<std::string> listed(manifest.params.begin(), manifest.params.end());
  for (const std::string &param : manifest.params)
    if (!params.count(param))
      fault(fmt::format("parameter '{}' has no tensor", param));
  for (const auto &entry : params)
    if (!listed.count(entry.first))
      fault(fmt::format("tensor '{}' is not one of its parameters", entry.first));

  const std::vector<TensorSpec> &outputs = main.outputSpecs();
  if (outputs.empty() || !isFloatScalar(outputs[0].type))
    fault("output 0, the loss, is not a float scalar");
  lr = manifest.lr;
  steps = manifest.steps;
}

void TrainingStep::Impl::bindBatchTiles() {
  const std::vector<TensorSpec> &modelInputs = main.inputSpecs();
  if (!update)
    fault("a step over batch tiles must be split (its gradients are summed over the tiles)");
  if (!isValidSymbolName(manifest.batchSymbol))
    fault(fmt::format("the batch '{}' is not a symbol name", manifest.batchSymbol));
  const int64_t weights = manifest.weightInput;
  if (weights < 0 || static_cast<size_t>(weights) >= modelInputs.size() || weights == manifest.lrInput ||
      weights == manifest.stepInput || weights == manifest.targetInput)
    fault(fmt::format("the sample weights input is {}, of {} inputs", weights, modelInputs.size()));
  const TensorType &weightType = modelInputs[static_cast<size_t>(weights)].type;
  if (weightType != TensorType{DType::F32, {manifest.batchTile}})
    fault(fmt::format("the sample weights input is {}, not f32[{}]", weightType.toString(), manifest.batchTile));
  std::set<int64_t> seen;
  for (int64_t index : manifest.batchInputs) {
    if (index < 0 || static_cast<size_t>(index) >= modelInputs.size() || isModelOnlyInput(static_cast<size_t>(index)))
      fault(fmt::format("batch input {} is not one of the model's data inputs", index));
    if (!seen.insert(index).second)
      fault(fmt::format("batch input {} is listed twice", index));
    const TensorSpec &spec = modelInputs[static_cast<size_t>(index)];
    if (spec.type.rank() == 0 || spec.type.shape[0] != manifest.batchTile)
      fault(fmt::format("batch input '{}' is {}, not a tile of {} rows", spec.name, spec.type.toString(),
                        manifest.batchTile));
  }
  if (manifest.targetInput >= 0 && !seen.count(manifest.targetInput))
    fault("the target does not hold the batch");
  tiles.tile = manifest.batchTile;
  tiles.symbol = manifest.batchSymbol;
  tiles.padsLastTile = true;
  tiles.batched.assign(modelInputs.size(), false);
  for (int64_t index : manifest.batchInputs)
    tiles.batched[static_cast<size_t>(index)] = true;
  tileRows.resize(modelInputs.size());
  tileWeights = Tensor(weightType);
}

void TrainingStep::Impl::bindWholeStep() {
  const std::vector<TensorSpec> &modelOutputs = main.outputSpecs();
  main.outputs.resize(modelOutputs.size());
  std::set<int64_t> written;
  for (const TrainingManifestUpdate &update : manifest.updates) {
    if (update.output <= 0 || static_cast<size_t>(update.output) >= modelOutputs.size())
      fault(fmt::format("the update of '{}' is output {}, the model has {} outputs", update.name, update.output,
                        modelOutputs.size()));
    if (!written.insert(update.output).second)
      fault(fmt::format("output {} updates two tensors", update.output));
    const Tensor &param = paramTensor(update.name);
    if (param.type() != modelOutputs[static_cast<size_t>(update.output)].type)
      fault(fmt::format("output {} is {}, but parameter '{}' is {}", update.output,
                        modelOutputs[static_cast<size_t>(update.output)].type.toString(), update.name,
                        param.type().toString()));
    main.outputs[static_cast<size_t>(update.output)] = param;
  }
}

void TrainingStep::Impl::bindSplitStep() {
  // The manifest lists trained parameters, then optimizer states (owned by a parameter of
  // another name), then buffers (owned by themselves); each part's layout follows that order.
  std::vector<const TrainingManifestUpdate *> trained, states, buffers;
  for (const TrainingManifestUpdate &update : manifest.updates)
    (!update.isState ? trained : update.param != update.name ? states : buffers).push_back(&update);
  auto expectType = [&](const TensorSpec &spec, const Tensor &param, const std::string &what) {
    if (spec.type != param.type())
      fault(fmt::format("{} '{}' is {}, its parameter is {}", what, spec.name, spec.type.toString(),
                        param.type().toString()));
  };
  // The gradient part: [loss, gradient of each trained parameter, new value of each buffer].
  const std::vector<TensorSpec> &gradientOutputs = main.outputSpecs();
  if (gradientOutputs.size() != 1 + trained.size() + buffers.size())
    fault(fmt::format("the gradient part has {} outputs, expected 1 + {} gradients + {} buffers",
                      gradientOutputs.size(), trained.size(), buffers.size()));
  main.outputs.resize(gradientOutputs.size());
  for (size_t i = 0; i < trained.size(); ++i)
    expectType(gradientOutputs[1 + i], paramTensor(trained[i]->name), "gradient output");
  for (size_t i = 0; i < buffers.size(); ++i) {
    const Tensor &buffer = paramTensor(buffers[i]->name);
    expectType(gradientOutputs[1 + trained.size() + i], buffer, "buffer output");
    main.outputs[1 + trained.size() + i] = buffer;
  }
  // The update part: inputs [gradients..., lr, step], outputs [new parameters..., new states...].
  const std::vector<TensorSpec> &updateIns = update->inputSpecs();
  const std::vector<TensorSpec> &updateOuts = update->outputSpecs();
  if (updateIns.size() != trained.size() + 2)
    fault(fmt::format("the update part has {} inputs, expected {} gradients, lr and step", updateIns.size(),
                      trained.size()));
  for (size_t i = 0; i < trained.size(); ++i)
    expectType(updateIns[i], paramTensor(trained[i]->name), "gradient input");
  for (size_t i = trained.size(); i < updateIns.size(); ++i)
    if (!isF32Scalar(updateIns[i].type))
      fault(fmt::format("update input '{}' is {}, not an f32 scalar", updateIns[i].name, updateIns[i].type.toString()));
  if (updateOuts.size() != trained.size() + states.size())
    fault(fmt::format("the update part has {} outputs, expected {} parameters and {} states", updateOuts.size(),
                      trained.size(), states.size()));
  update->outputs.resize(updateOuts.size());
  std::vector<const TrainingManifestUpdate *> written = trained;
  written.insert(written.end(), states.begin(), states.end());
  for (size_t i = 0; i < written.size(); ++i) {
    const Tensor &param = paramTensor(written[i]->name);
    expectType(updateOuts[i], param, "update output");
    update->outputs[i] = param;
  }
}

std::vector<Tensor> TrainingStep::Impl::modelInputs(const std::vector<Tensor> &given) const {
  if (given.size() != inputs.size()) {
    std::vector<std::string> names;
    for (const TensorSpec &input : inputs)
      names.push_back(input.name);
    fail("{}: expected {} inputs ({}), got {}", name, inputs.size(), fmt::join(names, ", "), given.size());
  }
  const size_t count = main.inputSpecs().size();
  std::vector<Tensor> all;
  all.reserve(count);
  size_t next = 0;
  for (size_t i = 0; i < count; ++i) {
    if (static_cast<int64_t>(i) == manifest.lrInput)
      all.push_back(Tensor::scalar(DType::F32, lr));
    else if (static_cast<int64_t>(i) == manifest.stepInput)
      all.push_back(Tensor::scalar(DType::F32, static_cast<double>(steps + 1)));
    else if (static_cast<int64_t>(i) == manifest.weightInput)
      all.emplace_back(); // per tile
    else
      all.push_back(given[next++]);
  }
  return all;
}

std::vector<float> TrainingStep::Impl::sampleWeights(const std::vector<Tensor> &all, int64_t rows) const {
  std::vector<float> weights(static_cast<size_t>(rows));
  int64_t counted = rows;
  std::vector<bool> ignored(static_cast<size_t>(rows), false);
  if (manifest.ignoreIndex && manifest.targetInput >= 0) {
    const Tensor &labels = all[static_cast<size_t>(manifest.targetInput)];
    if (labels.numElements() == rows) // one label per sample (cross-entropy, nll)
      for (int64_t r = 0; r < rows; ++r)
        if (labels.getInt(r) == *manifest.ignoreIndex) {
          ignored[static_cast<size_t>(r)] = true;
          --counted;
        }
  }
  // A sum weighs every sample 1; the means divide by the samples they count. A batch whose
  // every label is ignored adds nothing (where torch's mean would be 0 / 0).
  double share = manifest.loss == "sum" ? 1.0 : counted > 0 ? 1.0 / static_cast<double>(counted) : 0.0;
  for (int64_t r = 0; r < rows; ++r)
    weights[static_cast<size_t>(r)] = ignored[static_cast<size_t>(r)] ? 0.0f : static_cast<float>(share);
  return weights;
}

float TrainingStep::Impl::computeTiledGradients(std::vector<Tensor> all, const std::function<void()> &betweenKernels) {
  const int64_t tile = manifest.batchTile;
  all[static_cast<size_t>(manifest.weightInput)] = tileWeights; // each tile's, below
  int64_t rows = 0;
  try {
    rows = tiles.rowsOf(main.inputSpecs(), all);
  } catch (const Error &error) {
    fail("{}: {}", name, error.what());
  }
  if (rows < 1)
    fail("{}: a batch of {} samples ({} = 0) has no loss to train on", name, rows, manifest.batchSymbol);
  std::vector<float> weights = sampleWeights(all, rows);
  const size_t gradients = gradientCount();
  gradientSums.resize(gradients);
  const std::vector<Tensor> batch = all;
  const int64_t tileCount = (rows + tile - 1) / tile;
  double loss = 0;
  for (int64_t t = 0; t < tileCount; ++t) {
    const int64_t begin = t * tile, count = std::min(tile, rows - begin);
    for (int64_t index : manifest.batchInputs) {
      auto i = static_cast<size_t>(index);
      if (count == tile) { // a whole tile of the caller's rows, read where they are
        all[i] = BatchTiles::rowsView(batch[i], begin, tile);
        continue;
      }
      // A short tile, padded with repeats of its first row (valid samples, weighted 0).
      if (!tileRows[i].defined())
        tileRows[i] = Tensor(main.inputSpecs()[i].type);
      BatchTiles::copyTileRows(batch[i], begin, tileRows[i]);
      all[i] = tileRows[i];
    }
    float *w = tileWeights.dataAs<float>();
    for (int64_t r = 0; r < tile; ++r)
      w[r] = r < count ? weights[static_cast<size_t>(begin + r)] : 0.0f;
    std::function<void(int64_t)> afterLaunch;
    if (betweenKernels)
      afterLaunch = [&](int64_t) { betweenKernels(); };
    main.run(all, params, afterLaunch);
    loss += main.outputs[0].getDouble(0);
    // Tile 0's gradients move to the sums (the next tile writes fresh ones); the middle tiles'
    // add to them; the last tile's gradients take the sums, where the update reads them.
    for (size_t g = 0; g < gradients && tileCount > 1; ++g) {
      Tensor &out = main.outputs[1 + g];
      if (t == 0)
        std::swap(out, gradientSums[g]);
      else if (t + 1 < tileCount)
        scaleAndAdd(gradientSums[g], 1.0, out);
      else
        scaleAndAdd(out, 1.0, gradientSums[g]);
    }
  }
  return static_cast<float>(loss);
}

std::vector<Tensor> TrainingStep::Impl::updateInputs() const {
  size_t gradients = update->inputSpecs().size() - 2;
  std::vector<Tensor> all(main.outputs.begin() + 1, main.outputs.begin() + 1 + static_cast<std::ptrdiff_t>(gradients));
  all.push_back(Tensor::scalar(DType::F32, lr));
  all.push_back(Tensor::scalar(DType::F32, static_cast<double>(steps + 1)));
  return all;
}

void TrainingStep::Impl::checkCanAdvance() const {
  // A manifest or a checkpoint may hold any step count >= 0; the next one must exist.
  if (steps == std::numeric_limits<int64_t>::max())
    fail("{}: the step count {} cannot advance", name, steps);
}

TrainingStep::TrainingStep(Executable executable, TrainingManifest manifest, std::map<std::string, Tensor> params,
                           std::string name)
    : impl_(std::make_unique<Impl>()) {
  impl_->name = std::move(name);
  impl_->manifest = std::move(manifest);
  impl_->params = std::move(params);
  impl_->main.executable = std::make_unique<Executable>(std::move(executable));
  impl_->bindInputs();
  impl_->bindWholeStep();
}

TrainingStep::TrainingStep(std::unique_ptr<StepInterpreter> interpreter, TrainingManifest manifest,
                           std::map<std::string, Tensor> params, std::string name)
    : impl_(std::make_unique<Impl>()) {
  if (!interpreter)
    fail("{}: the interpreter is null", name);
  impl_->name = std::move(name);
  impl_->manifest = std::move(manifest);
  impl_->params = std::move(params);
  impl_->main.interpreter = std::move(interpreter);
  impl_->bindInputs();
  impl_->bindWholeStep();
}

TrainingStep::TrainingStep(Executable gradients, Executable update, TrainingManifest manifest,
                           std::map<std::string, Tensor> params, std::string name)
    : impl_(std::make_unique<Impl>()) {
  impl_->name = std::move(name);
  impl_->manifest = std::move(manifest);
  impl_->params = std::move(params);
  impl_->main.executable = std::make_unique<Executable>(std::move(gradients));
  impl_->update.emplace();
  impl_->update->executable = std::make_unique<Executable>(std::move(update));
  impl_->bindInputs();
  impl_->bindSplitStep();
}

TrainingStep::TrainingStep(std::unique_ptr<StepInterpreter> gradients, std::unique_ptr<StepInterpreter> update,
                           TrainingManifest manifest, std::map<std::string, Tensor> params, std::string name)
    : impl_(std::make_unique<Impl>()) {
  if (!gradients || !update)
    fail("{}: an interpreter is null", name);
  impl_->name = std::move(name);
  impl_->manifest = std::move(manifest);
  impl_->params = std::move(params);
  impl_->main.interpreter = std::move(gradients);
  impl_->update.emplace();
  impl_->update->interpreter = std::move(update);
  impl_->bindInputs();
  impl_->bindSplitStep();
}

TrainingStep::TrainingStep(TrainingStep &&) noexcept = default;
TrainingStep &TrainingStep::operator=(TrainingStep &&) noexcept = default;
TrainingStep::~TrainingStep() = default;

TrainingStep::Impl &TrainingStep::state() const {
  if (!impl_)
    fail("use of a moved-from TrainingStep");
  return *impl_;
}

float TrainingStep::run(const std::vector<Tensor> &inputs) {
  Impl &im = state();
  if (im.update) {
    float loss = computeGradients(inputs);
    applyGradients();
    return loss;
  }
  im.checkCanAdvance();
  std::vector<Tensor> all = im.modelInputs(inputs);
  im.main.run(all, im.params);
  ++im.steps;
  return static_cast<float>(im.main.outputs[0].getDouble(0));
}

bool TrainingStep::isSplit() const { return state().update.has_value(); }

float TrainingStep::computeGradients(const std::vector<Tensor> &inputs) {
  Impl &im = state();
  if (!im.update)
    fail("{}: computes its gradients and updates in one run (compile it split to see its gradients)", im.name);
  return computeGradients(inputs, GradientListener{});
}

void TrainingStep::Impl::planReadiness() {
  if (readinessPlanned)
    return;
  readinessPlanned = true;
  const size_t count = gradientCount();
  // (last launch, reverse index): sorted, the order in which the gradients become final.
  std::vector<std::pair<int64_t, size_t>> lastTouch;
  for (size_t g = 0; g < count; ++g)
    lastTouch.emplace_back(main.executable ? main.executable->lastLaunchOfOutput(static_cast<int64_t>(1 + g)) : 0,
                           count - 1 - g);
  std::sort(lastTouch.begin(), lastTouch.end());
  readyOrder.clear();
  readyAfterLaunch.assign(main.executable ? static_cast<size_t>(main.executable->numLaunches()) : 0, {});
  readyBeforeLaunches.clear();
  for (const auto &[launch, reversed] : lastTouch) {
    size_t g = count - 1 - reversed;
    readyOrder.push_back(g);
    if (main.executable)
      (launch < 0 ? readyBeforeLaunches : readyAfterLaunch[static_cast<size_t>(launch)]).push_back(g);
  }
}

std::vector<size_t> TrainingStep::gradientReadyOrder() const {
  Impl &im = state();
  if (!im.update)
    fail("{}: computes its gradients and updates in one run (compile it split to see its gradients)", im.name);
  im.planReadiness();
  return im.readyOrder;
}

float TrainingStep::computeGradients(const std::vector<Tensor> &inputs, const GradientListener &listener) {
  Impl &im = state();
  if (!im.update)
    fail("{}: computes its gradients and updates in one run (compile it split to see its gradients)", im.name);
  std::vector<Tensor> all = im.modelInputs(inputs);
  im.planReadiness();
  auto tell = [&](const std::vector<size_t> &ready) {
    if (listener.ready)
      for (size_t g : ready)
        listener.ready(g, im.main.outputs[1 + g]);
  };
  if (im.manifest.batchTile > 0) { // every gradient is final once the last tile's is summed
    float loss = im.computeTiledGradients(std::move(all), listener.betweenKernels);
    tell(im.readyOrder);
    im.haveGradients = true;
    return loss;
  }
  if (im.main.executable && (listener.ready || listener.betweenKernels)) {
    // The outputs are allocated inside run(), before the first launch; the gradients no launch
    // touches are as final then as they will ever be. (Without a listener the executable runs
    // unwatched: its launch loop's fast path.)
    bool toldBefore = false;
    im.main.run(all, im.params, [&](int64_t launch) {
      if (!toldBefore) {
        tell(im.readyBeforeLaunches);
        toldBefore = true;
      }
      tell(im.readyAfterLaunch[static_cast<size_t>(launch)]);
      if (listener.betweenKernels)
        listener.betweenKernels();
    });
    if (!toldBefore) // a gradient part with no launches
      tell(im.readyBeforeLaunches);
  } else {
    im.main.run(all, im.params);
    tell(im.readyOrder);
  }
  im.haveGradients = true;
  return static_cast<float>(im.main.outputs[0].getDouble(0));
}

std::vector<Tensor> TrainingStep::gradients() const {
  const Impl &im = state();
  if (!im.update)
    fail("{}: computes its gradients and updates in one run (compile it split to see its gradients)", im.name);
  if (!im.haveGradients)
    fail("{}: no gradients yet (computeGradients first)", im.name);
  size_t count = im.update->inputSpecs().size() - 2;
  return std::vector<Tensor>(im.main.outputs.begin() + 1, im.main.outputs.begin() + 1 + static_cast<std::ptrdiff_t>(count));
}

void TrainingStep::applyGradients() {
  Impl &im = state();
  if (!im.update)
    fail("{}: computes its gradients and updates in one run (compile it split to see its gradients)", im.name);
  if (!im.haveGradients)
    fail("{}: no gradients to apply (computeGradients first)", im.name);
  im.checkCanAdvance();
  im.update->run(im.updateInputs(), im.params);
  ++im.steps;
  im.haveGradients = false;
}

float TrainingStep::run(const std::map<std::string, Tensor> &inputs) {
  std::vector<std::string> names = inputNames();
  std::vector<Tensor> ordered;
  for (const std::string &name : names) {
    auto found = inputs.find(name);
    if (found == inputs.end())
      fail("{}: missing input '{}' (inputs: {})", state().name, name, fmt::join(names, ", "));
    ordered.push_back(found->second);
  }
  for (const auto &entry : inputs)
    if (std::find(names.begin(), names.end(), entry.first) == names.end())
      fail("{}: unknown input '{}' (inputs: {})", state().name, entry.first, fmt::join(names, ", "));
  return run(ordered);
}

const std::vector<TensorSpec> &TrainingStep::inputs() const { return state().inputs; }

std::vector<std::string> TrainingStep::inputNames() const {
  std::vector<std::string> names;
  for (const TensorSpec &input : state().inputs)
    names.push_back(input.name);
  return names;
}

int64_t TrainingStep::targetInput() const { return state().targetInput; }
double TrainingStep::learningRate() const { return state().lr; }

void TrainingStep::setLearningRate(double lr) {
  if (!(lr >= 0.0))
    fail("{}: the learning rate must be >= 0, got {}", state().name, lr);
  state().lr = lr;
}

int64_t TrainingStep::stepCount() const { return state().steps; }

void TrainingStep::setStepCount(int64_t steps) {
  if (steps < 0)
    fail("{}: the step count must be >= 0, got {}", state().name, steps);
  state().steps = steps;
}

const std::map<std::string, Tensor> &TrainingStep::parameters() const { return state().params; }

const Tensor &TrainingStep::parameter(const std::string &name) const {
  auto found = state().params.find(name);
  if (found == state().params.end()) {
    std::vector<std::string> names;
    for (const auto &entry : state().params)
      names.push_back(entry.first);
    fail("{}: no parameter '{}' (parameters: {})", state().name, name, fmt::join(names, ", "));
  }
  return found->second;
}

std::vector<std::string> TrainingStep::trainedParameters() const {
  std::vector<std::string> names;
  for (const TrainingManifestUpdate &update : state().manifest.updates)
    if (!update.isState)
      names.push_back(update.name);
  return names;
}

void TrainingStep::saveParameters(const std::string &path) const {
  saveCheckpoint(path, state().params, state().steps);
}

void TrainingStep::loadParameters(const std::string &path) { loadCheckpoint(path, state().params, state().steps); }

const TrainingManifest &TrainingStep::manifest() const { return state().manifest; }
bool TrainingStep::isReference() const { return !state().main.executable; }

const Executable &TrainingStep::executable() const {
  if (!state().main.executable)
    fail("{}: the reference backend has no executable", state().name);
  return *state().main.executable;
}

const Executable &TrainingStep::updateExecutable() const {
  if (!state().update)
    fail("{}: is not split: executable() runs the whole step", state().name);
  if (!state().update->executable)
    fail("{}: the reference backend has no executable", state().name);
  return *state().update->executable;
}

// ---- loading a step compiled ahead of time ----

namespace {

// kiln_model_desc::weight_data: each weight starts on a 64-byte boundary (runtime/KernelAbi.h).
constexpr int64_t kWeightAlignment = 64;

/// The shared object mapped by dlopen, closed when it goes out of scope.
struct Library {
  void *handle = nullptr;
  explicit Library(const std::string &soPath) {
    // Without a slash dlopen searches the library path instead of opening the file meant.
    std::string path = soPath.find('/') == std::string::npos ? "./" + soPath : soPath;
    handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      const char *reason = dlerror();
      fail("cannot load model '{}': {}", soPath, reason ? reason : "unknown error");
    }
  }
  ~Library() { dlclose(handle); }
  Library(const Library &) = delete;
  Library &operator=(const Library &) = delete;
  void *symbol(const char *name) const {
    dlerror();
    return dlsym(handle, name);
  }
};

/// Copies of the weights the model exported as `symbol` carries, in weight order.
std::vector<Tensor> copyWeights(const Library &library, const Executable &model, const std::string &soPath,
                                const char *symbol = KILN_MODEL_SYMBOL) {
  auto entry = reinterpret_cast<kiln_model_fn>(library.symbol(symbol));
  const kiln_model_desc *desc = entry ? entry() : nullptr;
  if (!desc || (!desc->weight_data && !model.weights().empty()))
    fail("training step '{}' carries no weights", soPath);
  const auto *base = static_cast<const unsigned char *>(desc->weight_data);
  std::vector<Tensor> copies;
  int64_t offset = 0;
  for (const TensorSpec &spec : model.weights()) {
    Tensor copy(spec.type);
    if (copy.byteSize() > 0)
      std::memcpy(copy.data(), base + offset, copy.byteSize());
    copies.push_back(copy);
    int64_t end = checkedAdd(offset, static_cast<int64_t>(spec.type.byteSize()), soPath);
    offset = checkedAdd(end, kWeightAlignment - 1, soPath) / kWeightAlignment * kWeightAlignment;
  }
  return copies;
}

} // namespace

TrainingStep TrainingStep::load(const std::string &soPath, ExecutableOptions options) {
  std::string name = "training step '" + soPath + "'";
  TrainingManifest manifest;
  std::vector<Tensor> weights, updateWeights;
  std::map<std::string, Tensor> params;
  bool split = false;
  {
    Executable carried = Executable::load(soPath, options);
    Library library(soPath);
    split = library.symbol(KILN_TRAINING_UPDATE_SYMBOL) != nullptr;
    auto entry = reinterpret_cast<kiln_training_fn>(library.symbol(KILN_TRAINING_SYMBOL));
    if (!entry)
      fail("'{}' is a compiled model, not a training step (compile one with kiln-compile --train)", soPath);
    const char *text = entry();
    // The text is data in the file (runtime/LoadedObject.h): a damaged one may have lost its end.
    if (text && !LoadedObject::of(library.handle, name).containsString(text))
      fail("{}: its manifest does not end inside the file; is it corrupted?", name);
    manifest = TrainingManifest::parse(text ? text : "", name);
    weights = copyWeights(library, carried, soPath);
    // The manifest's parameters are weights: the step trains the copies.
    std::map<std::string, size_t> weightIndex;
    for (size_t i = 0; i < carried.weights().size(); ++i)
      weightIndex[carried.weights()[i].name] = i;
    // A split step's update part reads the same parameters (shared, from the gradient part's
    // copies) and the optimizer states only it carries; its other weights (constants) are its own.
    std::map<std::string, Tensor> updateOnly;
    if (split) {
      const std::set<std::string> manifestParams(manifest.params.begin(), manifest.params.end());
      Executable update = Executable::load(soPath, {}, options, KILN_TRAINING_UPDATE_SYMBOL);
      std::vector<Tensor> carriedUpdate = copyWeights(library, update, soPath, KILN_TRAINING_UPDATE_SYMBOL);
      for (size_t i = 0; i < update.weights().size(); ++i) {
        const std::string &weight = update.weights()[i].name;
        auto shared = manifestParams.count(weight) ? weightIndex.find(weight) : weightIndex.end();
        updateWeights.push_back(shared != weightIndex.end() ? weights[shared->second] : carriedUpdate[i]);
        if (shared == weightIndex.end() && manifestParams.count(weight))
          updateOnly[weight] = carriedUpdate[i];
      }
    }
    for (const std::string &param : manifest.params) {
      auto found = weightIndex.find(param);
      if (found != weightIndex.end())
        params[param] = weights[found->second];
      else if (updateOnly.count(param))
        params[param] = updateOnly[param];
      else
        fail("{}: its manifest does not fit the model: parameter '{}' is not a weight of the model", name, param);
    }
  }
  if (split)
    return TrainingStep(Executable::load(soPath, std::move(weights), options),
                        Executable::load(soPath, std::move(updateWeights), options, KILN_TRAINING_UPDATE_SYMBOL),
                        std::move(manifest), std::move(params), std::move(name));
  return TrainingStep(Executable::load(soPath, std::move(weights), std::move(options)), std::move(manifest),
                      std::move(params), std::move(name));
}

bool isTrainingStep(const std::string &soPath) {
  Library library(soPath);
  return library.symbol(KILN_TRAINING_SYMBOL) != nullptr;
}

} // namespace kiln::runtime
