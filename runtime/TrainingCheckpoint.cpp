// Training checkpoints (see TrainingCheckpoint.h): .safetensors or a folder of .npy files.
#include "runtime/TrainingCheckpoint.h"

#include <cstring>
#include <filesystem>

#include "core/Error.h"
#include "runtime/Npy.h"
#include "runtime/SafeTensors.h"

namespace kiln::runtime {

namespace {

bool endsWith(const std::string &text, const std::string &suffix) {
  return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

} // namespace

void saveCheckpoint(const std::string &path, const std::map<std::string, Tensor> &params, int64_t steps) {
  NamedTensors tensors(params.begin(), params.end());
  Tensor step(DType::I64, {});
  step.setInt(0, steps);
  tensors[kCheckpointStepName] = step;
  if (endsWith(path, ".safetensors")) {
    writeSafeTensors(path, tensors);
    return;
  }
  std::error_code error;
  std::filesystem::create_directories(path, error);
  if (error || !std::filesystem::is_directory(path))
    fail("training step: cannot create directory '{}' for the parameters: {}", path, error.message());
  for (const auto &[name, tensor] : tensors) {
    if (name.find('/') != std::string::npos || name.empty() || name[0] == '.')
      fail("training step: parameter name '{}' cannot be a file name in '{}'", name, path);
    writeNpy((std::filesystem::path(path) / (name + ".npy")).string(), tensor);
  }
}

std::map<std::string, Tensor> readCheckpoint(const std::string &path) {
  if (endsWith(path, ".safetensors"))
    return readSafeTensors(path);
  if (!std::filesystem::is_directory(path))
    fail("training step: '{}' is neither a .safetensors file nor a directory of .npy files", path);
  NamedTensors loaded;
  for (const auto &entry : std::filesystem::directory_iterator(path)) {
    std::string file = entry.path().filename().string();
    if (entry.is_regular_file() && endsWith(file, ".npy"))
      loaded[file.substr(0, file.size() - 4)] = readNpy(entry.path().string());
  }
  return loaded;
}

int64_t checkpointSteps(const Tensor &steps, const std::string &path) {
  if (steps.numElements() != 1 || isFloat(steps.dtype()) || steps.getInt(0) < 0)
    fail("training step: '{}' in '{}' must be one integer >= 0, got {}", kCheckpointStepName, path,
         steps.type().toString());
  return steps.getInt(0);
}

void loadCheckpoint(const std::string &path, std::map<std::string, Tensor> &params, int64_t &steps) {
  NamedTensors loaded = readCheckpoint(path);
  int64_t loadedSteps = steps;
  for (const auto &[name, tensor] : loaded) {
    if (name == kCheckpointStepName) {
      loadedSteps = checkpointSteps(tensor, path);
      continue;
    }
    auto found = params.find(name);
    if (found == params.end())
      fail("training step: '{}' holds '{}', which is not a parameter of this training step", path, name);
    if (found->second.type() != tensor.type())
      fail("training step: '{}' holds '{}' as {}, the step has {}", path, name, tensor.type().toString(),
           found->second.type().toString());
  }
  for (const auto &[name, tensor] : loaded)
    if (name != kCheckpointStepName) {
      Tensor &target = params.at(name);
      if (target.byteSize() > 0)
        std::memcpy(target.data(), tensor.data(), target.byteSize());
    }
  steps = loadedSteps;
}

} // namespace kiln::runtime
