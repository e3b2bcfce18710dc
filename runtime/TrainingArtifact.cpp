// Loading and running a training step compiled ahead of time (see TrainingArtifact.h), in
// stages:
//  1. Executable::load with the weights the file carries: every check of a compiled model
//     (ELF segments, ABI version, description), before this file maps it itself.
//  2. The manifest and the weights' bytes, read through dlopen / dlsym of the mapped object.
//  3. Writable copies of the weights, the model loaded again over them, the manifest checked
//     against the model, and the update outputs bound to the weights they overwrite.
#include "runtime/TrainingArtifact.h"

#include <algorithm>
#include <cstring>
#include <set>

#include <dlfcn.h>

#include "core/Error.h"
#include "core/ShapeMath.h"
#include "runtime/TrainingCheckpoint.h"

namespace kiln::runtime {

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

/// Copies of the weights the model carries, in weight order.
std::vector<Tensor> copyWeights(const Library &library, const Executable &model, const std::string &soPath) {
  auto entry = reinterpret_cast<kiln_model_fn>(library.symbol(KILN_MODEL_SYMBOL));
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

bool isF32Scalar(const TensorType &type) { return type.dtype == DType::F32 && type.numElements() == 1; }

} // namespace

struct TrainingArtifact::Impl {
  std::string path;
  TrainingManifest manifest;
  std::unique_ptr<Executable> executable;
  double lr = 0.0;
  int64_t steps = 0;
  std::vector<TensorSpec> inputs;       // run()'s: the model's without lr and step
  int64_t targetInput = -1;             // in `inputs`
  std::map<std::string, Tensor> params; // updated in place
  std::vector<Tensor> outputs;          // the loss, then the weights' own tensors

  /// Checks the manifest against the model and binds inputs, parameters and outputs.
  void bind(std::vector<Tensor> weights);
};

void TrainingArtifact::Impl::bind(std::vector<Tensor> weights) {
  const Executable &model = *executable;
  auto fault = [&](const std::string &message) {
    fail("training step '{}': its manifest does not fit the model: {}", path, message);
  };
  const std::vector<TensorSpec> &modelInputs = model.inputs();
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
  if (manifest.targetInput >= 0)
    checkInput(manifest.targetInput, "target");
  for (size_t i = 0; i < modelInputs.size(); ++i) {
    if (static_cast<int64_t>(i) == manifest.lrInput || static_cast<int64_t>(i) == manifest.stepInput)
      continue;
    if (static_cast<int64_t>(i) == manifest.targetInput)
      targetInput = static_cast<int64_t>(inputs.size());
    inputs.push_back(modelInputs[i]);
  }

  std::map<std::string, size_t> weightIndex;
  for (size_t i = 0; i < model.weights().size(); ++i)
    weightIndex[model.weights()[i].name] = i;
  for (const std::string &name : manifest.params) {
    auto found = weightIndex.find(name);
    if (found == weightIndex.end())
      fault(fmt::format("parameter '{}' is not a weight of the model", name));
    params[name] = weights[found->second];
  }

  const std::vector<TensorSpec> &modelOutputs = model.outputs();
  if (modelOutputs.empty() || !isF32Scalar(modelOutputs[0].type))
    fault("output 0, the loss, is not an f32 scalar");
  outputs.resize(modelOutputs.size());
  std::set<int64_t> written;
  for (const TrainingManifestUpdate &update : manifest.updates) {
    if (update.output <= 0 || static_cast<size_t>(update.output) >= modelOutputs.size())
      fault(fmt::format("the update of '{}' is output {}, the model has {} outputs", update.name, update.output,
                        modelOutputs.size()));
    if (!written.insert(update.output).second)
      fault(fmt::format("output {} updates two tensors", update.output));
    auto param = params.find(update.name);
    if (param == params.end())
      fault(fmt::format("the update of '{}' names no parameter", update.name));
    if (param->second.type() != modelOutputs[static_cast<size_t>(update.output)].type)
      fault(fmt::format("output {} is {}, but parameter '{}' is {}", update.output,
                        modelOutputs[static_cast<size_t>(update.output)].type.toString(), update.name,
                        param->second.type().toString()));
    outputs[static_cast<size_t>(update.output)] = param->second;
  }
  for (size_t i = 0; i < outputs.size(); ++i)
    if (!outputs[i].defined())
      outputs[i] = Tensor(modelOutputs[i].type);
}

TrainingArtifact::TrainingArtifact(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
TrainingArtifact::TrainingArtifact(TrainingArtifact &&) noexcept = default;
TrainingArtifact &TrainingArtifact::operator=(TrainingArtifact &&) noexcept = default;
TrainingArtifact::~TrainingArtifact() = default;

TrainingArtifact::Impl &TrainingArtifact::state() const {
  if (!impl_)
    fail("use of a moved-from TrainingArtifact");
  return *impl_;
}

TrainingArtifact TrainingArtifact::load(const std::string &soPath, ExecutableOptions options) {
  auto impl = std::make_unique<Impl>();
  impl->path = soPath;
  std::vector<Tensor> weights;
  {
    Executable carried = Executable::load(soPath, options);
    Library library(soPath);
    auto entry = reinterpret_cast<kiln_training_fn>(library.symbol(KILN_TRAINING_SYMBOL));
    if (!entry)
      fail("'{}' is a compiled model, not a training step (compile one with kiln-compile --train)", soPath);
    const char *text = entry();
    impl->manifest = TrainingManifest::parse(text ? text : "", "training step '" + soPath + "'");
    weights = copyWeights(library, carried, soPath);
  }
  impl->executable = std::make_unique<Executable>(Executable::load(soPath, weights, std::move(options)));
  impl->lr = impl->manifest.lr;
  impl->steps = impl->manifest.steps;
  impl->bind(std::move(weights));
  return TrainingArtifact(std::move(impl));
}

float TrainingArtifact::run(const std::vector<Tensor> &inputs) {
  Impl &im = state();
  if (inputs.size() != im.inputs.size())
    fail("training step '{}': expected {} inputs ({}), got {}", im.path, im.inputs.size(),
         fmt::join(inputNames(), ", "), inputs.size());
  std::vector<Tensor> all;
  all.reserve(im.inputs.size() + 2);
  size_t next = 0;
  for (size_t i = 0; i < im.inputs.size() + 2; ++i) {
    if (static_cast<int64_t>(i) == im.manifest.lrInput)
      all.push_back(Tensor::scalar(DType::F32, im.lr));
    else if (static_cast<int64_t>(i) == im.manifest.stepInput)
      all.push_back(Tensor::scalar(DType::F32, static_cast<double>(im.steps + 1)));
    else
      all.push_back(inputs[next++]);
  }
  im.executable->runInto(all, im.outputs);
  ++im.steps;
  return static_cast<float>(im.outputs[0].getDouble(0));
}

const std::vector<TensorSpec> &TrainingArtifact::inputs() const { return state().inputs; }
std::vector<std::string> TrainingArtifact::inputNames() const {
  std::vector<std::string> names;
  for (const TensorSpec &input : state().inputs)
    names.push_back(input.name);
  return names;
}
int64_t TrainingArtifact::targetInput() const { return state().targetInput; }
double TrainingArtifact::learningRate() const { return state().lr; }
void TrainingArtifact::setLearningRate(double lr) {
  if (!(lr >= 0.0))
    fail("training step: the learning rate must be >= 0, got {}", lr);
  state().lr = lr;
}
int64_t TrainingArtifact::stepCount() const { return state().steps; }
void TrainingArtifact::setStepCount(int64_t steps) {
  if (steps < 0)
    fail("training step: the step count must be >= 0, got {}", steps);
  state().steps = steps;
}
const std::map<std::string, Tensor> &TrainingArtifact::parameters() const { return state().params; }
const Tensor &TrainingArtifact::parameter(const std::string &name) const {
  auto found = state().params.find(name);
  if (found == state().params.end()) {
    std::vector<std::string> names;
    for (const auto &entry : state().params)
      names.push_back(entry.first);
    fail("training step '{}': no parameter '{}' (parameters: {})", state().path, name, fmt::join(names, ", "));
  }
  return found->second;
}
const TrainingManifest &TrainingArtifact::manifest() const { return state().manifest; }
const Executable &TrainingArtifact::executable() const { return *state().executable; }

void TrainingArtifact::saveParameters(const std::string &path) const {
  saveCheckpoint(path, state().params, state().steps);
}

void TrainingArtifact::loadParameters(const std::string &path) {
  loadCheckpoint(path, state().params, state().steps);
}

bool isTrainingArtifact(const std::string &soPath) {
  Library library(soPath);
  return library.symbol(KILN_TRAINING_SYMBOL) != nullptr;
}

} // namespace kiln::runtime
