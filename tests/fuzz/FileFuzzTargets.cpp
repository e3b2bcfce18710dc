// The file fuzzers' steps for one input (see FileFuzzTargets.h).
#include "tests/fuzz/FileFuzzTargets.h"

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include <fmt/format.h>

#include "core/Error.h"
#include "runtime/MappedNpy.h"
#include "runtime/Npy.h"
#include "runtime/SafeTensors.h"
#include "runtime/TrainingCheckpoint.h"
#include "runtime/TrainingManifest.h"
#include "runtime/TrainingStep.h"

namespace kiln::fuzz {

namespace fs = std::filesystem;

void writeFile(const std::string &path, const std::string &bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out.flush())
    throw FuzzFinding("cannot write " + path);
}

void expectNamed(const std::exception &error, const std::string &source) {
  if (std::string(error.what()).find(source) == std::string::npos)
    throw FuzzFinding(fmt::format("an error that does not name '{}': {}", source, error.what()));
}

namespace {

bool sameTensors(const runtime::NamedTensors &a, const runtime::NamedTensors &b) {
  if (a.size() != b.size())
    return false;
  for (auto left = a.begin(), right = b.begin(); left != a.end(); ++left, ++right)
    if (left->first != right->first || !left->second.identical(right->second))
      return false;
  return true;
}

/// Whether the bytes read as a .npy file.
bool fuzzNpy(const std::string &bytes) {
  Tensor tensor;
  try {
    tensor = runtime::parseNpy(bytes, "fuzz.npy");
  } catch (const Error &error) {
    expectNamed(error, "fuzz.npy");
    return false;
  }
  Tensor again;
  try {
    again = runtime::parseNpy(runtime::serializeNpy(tensor), "rewritten.npy");
  } catch (const Error &error) {
    throw FuzzFinding(fmt::format("a .npy tensor ({}) does not survive writing and reading: {}",
                                  tensor.type().toString(), error.what()));
  }
  if (!again.identical(tensor))
    throw FuzzFinding(fmt::format("a .npy tensor ({}) reads back as {} with other values", tensor.type().toString(),
                                  again.type().toString()));
  return true;
}

/// The bytes as a file that datasets memory-map (runtime/MappedNpy.h): refused with a message
/// naming it, or mapped as the same tensor parseNpy reads (the mapped reader may refuse what
/// parseNpy converts, never accept what it refuses or read it differently).
void fuzzMappedNpy(const std::string &bytes, const std::string &scratchDir) {
  std::string path = scratchDir + "/mapped.npy";
  writeFile(path, bytes);
  std::optional<runtime::MappedNpy> mapped;
  try {
    mapped = runtime::MappedNpy::open(path);
  } catch (const Error &error) {
    expectNamed(error, path);
    return;
  }
  Tensor parsed;
  try {
    parsed = runtime::parseNpy(bytes, "fuzz.npy");
  } catch (const Error &error) {
    throw FuzzFinding(fmt::format("a .npy file maps as {} but does not parse: {}", mapped->type().toString(),
                                  error.what()));
  }
  if (!(parsed.type() == mapped->type()))
    throw FuzzFinding(fmt::format("a .npy file maps as {} but parses as {}", mapped->type().toString(),
                                  parsed.type().toString()));
  // The mapping holds the file's bytes: a bool is any byte, true when non-zero, until a
  // reader copies it out (Dataset normalises batches as parseNpy normalises the tensor).
  std::string mappedBytes(reinterpret_cast<const char *>(mapped->data()), parsed.byteSize());
  if (parsed.dtype() == DType::Bool)
    runtime::normalizeBools(reinterpret_cast<unsigned char *>(mappedBytes.data()), parsed.numElements());
  if (!mappedBytes.empty() && std::memcmp(parsed.data(), mappedBytes.data(), mappedBytes.size()) != 0)
    throw FuzzFinding(fmt::format("a .npy file ({}) maps to other bytes than it parses to", parsed.type().toString()));
}

/// Whether the bytes read as a .safetensors file.
bool fuzzSafeTensors(const std::string &bytes) {
  runtime::NamedTensors tensors;
  std::map<std::string, std::string> metadata;
  try {
    tensors = runtime::parseSafeTensors(bytes, "fuzz.safetensors", &metadata);
  } catch (const Error &error) {
    expectNamed(error, "fuzz.safetensors");
    return false;
  }
  runtime::NamedTensors again;
  std::map<std::string, std::string> metadataAgain;
  try {
    again = runtime::parseSafeTensors(runtime::serializeSafeTensors(tensors, metadata), "rewritten.safetensors",
                                      &metadataAgain);
  } catch (const Error &error) {
    throw FuzzFinding(fmt::format("{} .safetensors tensors do not survive writing and reading: {}", tensors.size(),
                                  error.what()));
  }
  if (!sameTensors(again, tensors) || metadataAgain != metadata)
    throw FuzzFinding(fmt::format("{} .safetensors tensors read back different", tensors.size()));
  return true;
}

/// Parameter names and shapes of tests/fuzz/artifacts/step.kir, in its order.
const std::vector<std::pair<std::string, Shape>> kStepParams{
    {"fc1.weight", {6, 8}}, {"fc1.bias", {8}}, {"fc2.weight", {8, 3}}, {"fc2.bias", {3}}};
const char *const kAdamStates[] = {".exp_avg", ".exp_avg_sq"};

/// Parameters a checkpoint of the training step in tests/fuzz/artifacts/step.kir fits (Adam's
/// states included, as `kiln-run step.so --train --save` writes them), each a distinct value.
std::map<std::string, Tensor> stepParameters() {
  std::map<std::string, Tensor> params;
  uint64_t seed = 1;
  for (const auto &[name, shape] : kStepParams) {
    params[name] = randomTensor({DType::F32, shape}, seed++);
    for (const char *state : kAdamStates)
      params[name + state] = randomTensor({DType::F32, shape}, seed++);
  }
  return params;
}

std::map<std::string, Tensor> deepCopy(const std::map<std::string, Tensor> &tensors) {
  std::map<std::string, Tensor> copy;
  for (const auto &[name, tensor] : tensors)
    copy[name] = tensor.clone();
  return copy;
}

/// Loads the checkpoint at `path` twice: into parameters of its own names and types (it must
/// load, unless its step count is bad, and give its exact tensors), and into stepParameters()
/// (where it fails unless it fits; failing, it must change nothing).
void fuzzCheckpointAt(const std::string &path) {
  std::map<std::string, Tensor> file;
  try {
    file = runtime::readCheckpoint(path);
  } catch (const Error &error) {
    expectNamed(error, path);
    return;
  }
  std::map<std::string, Tensor> own;
  for (const auto &[name, tensor] : file)
    if (name != runtime::kCheckpointStepName)
      own[name] = Tensor(tensor.type());
  int64_t steps = 7;
  try {
    runtime::loadCheckpoint(path, own, steps);
    for (const auto &[name, tensor] : own)
      if (!tensor.identical(file.at(name)))
        throw FuzzFinding(fmt::format("checkpoint tensor '{}' loads with other values", name));
    auto step = file.find(runtime::kCheckpointStepName);
    if (step != file.end() && steps != runtime::checkpointSteps(step->second, path))
      throw FuzzFinding("the checkpoint's step count loads as another");
  } catch (const Error &error) {
    expectNamed(error, path);
    if (!file.count(runtime::kCheckpointStepName))
      throw FuzzFinding(fmt::format("a checkpoint fails to load into tensors of its own types: {}", error.what()));
  }

  std::map<std::string, Tensor> params = stepParameters(), before = deepCopy(params);
  steps = 7;
  try {
    runtime::loadCheckpoint(path, params, steps);
  } catch (const Error &error) {
    expectNamed(error, path);
    for (const auto &[name, tensor] : params)
      if (!tensor.identical(before.at(name)))
        throw FuzzFinding(fmt::format("a checkpoint that failed to load changed parameter '{}'", name));
    if (steps != 7)
      throw FuzzFinding("a checkpoint that failed to load changed the step count");
  }
}

/// The checkpoint forms the bytes can be: a .safetensors file when they read as one, a folder
/// of .npy files holding them as a parameter or as the step count when they read as .npy. (Bytes
/// that read as neither fail the same parsers as checkpoints; writing them costs time.)
void fuzzCheckpoint(const std::string &bytes, bool isSafeTensors, bool isNpy, const std::string &scratchDir) {
  if (isSafeTensors) {
    std::string file = scratchDir + "/checkpoint.safetensors";
    writeFile(file, bytes);
    fuzzCheckpointAt(file);
  }
  if (!isNpy)
    return;
  for (const char *name : {"fc1.bias", runtime::kCheckpointStepName}) {
    std::string folder = scratchDir + "/checkpoint-" + name;
    fs::create_directories(folder);
    writeFile(folder + "/" + name + ".npy", bytes);
    fuzzCheckpointAt(folder);
  }
}

// ---- the training manifest ----

/// Stands in for the step compiled from tests/fuzz/artifacts/step.kir (see standInStepSpecs):
/// what manifests are bound against. It checks that the step hands it the inputs and outputs it
/// declares, the learning rate in its place.
class StandInStep : public runtime::StepInterpreter {
public:
  explicit StandInStep(const runtime::TrainingManifest &manifest)
      : manifest_(manifest), specs_(standInStepSpecs()) {}

  const std::vector<runtime::TensorSpec> &inputs() const override { return specs_.first; }
  const std::vector<runtime::TensorSpec> &outputs() const override { return specs_.second; }

  void runInto(const std::vector<Tensor> &inputs, const std::map<std::string, Tensor> &,
               std::vector<Tensor> &outputs) const override {
    if (inputs.size() != specs_.first.size() || outputs.size() != specs_.second.size())
      throw FuzzFinding("the training step runs its model with another number of inputs or outputs");
    for (size_t i = 0; i < inputs.size(); ++i)
      if (inputs[i].type() != specs_.first[i].type)
        throw FuzzFinding(fmt::format("the training step passes {} as input {} ('{}', {})", inputs[i].type().toString(),
                                      i, specs_.first[i].name, specs_.first[i].type.toString()));
    const Tensor &lr = inputs[static_cast<size_t>(manifest_.lrInput)];
    if (lr.getDouble(0) != Tensor::scalar(DType::F32, manifest_.lr).getDouble(0))
      throw FuzzFinding("the learning rate input does not hold the manifest's learning rate");
    for (size_t i = 0; i < outputs.size(); ++i)
      if (outputs[i].type() != specs_.second[i].type)
        throw FuzzFinding(fmt::format("the training step binds {} as output {} ({})", outputs[i].type().toString(), i,
                                      specs_.second[i].type.toString()));
    outputs[0].setDouble(0, 0.5);
  }

private:
  const runtime::TrainingManifest &manifest_;
  std::pair<std::vector<runtime::TensorSpec>, std::vector<runtime::TensorSpec>> specs_;
};

std::string bindToStandIn(const runtime::TrainingManifest &manifest) {
  auto model = std::make_unique<StandInStep>(manifest);
  // Each parameter gets the type of the first output that updates it, so that a manifest that
  // fits the stand-in binds; any other name gets one that fits no output.
  std::map<std::string, Tensor> params;
  for (const std::string &name : manifest.params) {
    TensorType type{DType::F32, {3}};
    for (const runtime::TrainingManifestUpdate &update : manifest.updates)
      if (update.name == name && update.output >= 0 && static_cast<size_t>(update.output) < model->outputs().size()) {
        type = model->outputs()[static_cast<size_t>(update.output)].type;
        break;
      }
    params[name] = Tensor(type);
  }
  std::unique_ptr<runtime::TrainingStep> step;
  try {
    step = std::make_unique<runtime::TrainingStep>(std::move(model), manifest, params, "training step 'fuzz'");
  } catch (const Error &error) {
    expectNamed(error, "training step 'fuzz'");
    return error.what();
  }
  if ((manifest.targetInput >= 0) != (step->targetInput() >= 0))
    throw FuzzFinding(fmt::format("the manifest's target input is {}, the step's is {}", manifest.targetInput,
                                  step->targetInput()));
  std::vector<Tensor> inputs;
  for (const runtime::TensorSpec &input : step->inputs())
    inputs.emplace_back(input.type);
  try {
    (void)step->run(inputs);
  } catch (const Error &error) {
    expectNamed(error, "training step 'fuzz'");
    return error.what();
  }
  if (step->stepCount() != manifest.steps + 1)
    throw FuzzFinding("a step that ran did not advance the step count by one");
  return "";
}

} // namespace

std::pair<std::vector<runtime::TensorSpec>, std::vector<runtime::TensorSpec>> standInStepSpecs() {
  std::vector<runtime::TensorSpec> inputs{{"x", {DType::F32, {4, 6}}},
                                          {"labels", {DType::I64, {4}}},
                                          {"lr", {DType::F32, {}}},
                                          {"step", {DType::F32, {}}}};
  std::vector<runtime::TensorSpec> outputs{{"output0", {DType::F32, {}}}}; // the loss
  for (const auto &[name, shape] : kStepParams)
    outputs.push_back({name, {DType::F32, shape}});
  for (const auto &[name, shape] : kStepParams)
    for (const char *state : kAdamStates)
      outputs.push_back({name + state, {DType::F32, shape}});
  return {inputs, outputs};
}

void fuzzTensorFile(const std::string &bytes, const std::string &scratchDir) {
  bool isNpy = fuzzNpy(bytes);
  fuzzMappedNpy(bytes, scratchDir);
  bool isSafeTensors = fuzzSafeTensors(bytes);
  fuzzCheckpoint(bytes, isSafeTensors, isNpy, scratchDir);
}

std::string fuzzTrainingManifest(const std::string &bytes) {
  runtime::TrainingManifest manifest;
  try {
    manifest = runtime::TrainingManifest::parse(bytes, "fuzz manifest");
  } catch (const Error &error) {
    expectNamed(error, "fuzz manifest");
    return error.what();
  }
  std::string text;
  try {
    text = manifest.toText();
    if (runtime::TrainingManifest::parse(text, "rewritten manifest").toText() != text)
      throw FuzzFinding("a manifest's text changes when it is parsed and written again:\n" + text);
  } catch (const Error &error) {
    throw FuzzFinding(fmt::format("a manifest that parses does not survive writing and reading: {}", error.what()));
  }
  (void)manifest.describe();
  return bindToStandIn(manifest);
}

void writeTensorFileSeeds(const std::string &dir) {
  fs::create_directories(dir);
  std::vector<std::pair<std::string, Tensor>> tensors;
  uint64_t seed = 1;
  for (DType dtype : {DType::F32, DType::F64, DType::F16, DType::I64, DType::I32, DType::I8, DType::U8, DType::Bool})
    tensors.emplace_back(dtypeName(dtype), randomTensor({dtype, {2, 3}}, seed++));
  tensors.emplace_back("scalar", Tensor::scalar(DType::I64, 5));
  tensors.emplace_back("empty", Tensor(DType::F32, {0, 4}));
  runtime::NamedTensors named;
  for (const auto &[name, tensor] : tensors) {
    writeFile(dir + "/" + name + ".npy", runtime::serializeNpy(tensor));
    named[name] = tensor;
  }
  named["bf16"] = randomTensor({DType::BF16, {4}}, seed++); // .safetensors only
  writeFile(dir + "/all.safetensors", runtime::serializeSafeTensors(named, {{"format", "pt"}, {"kiln", "seed"}}));
}

} // namespace kiln::fuzz
