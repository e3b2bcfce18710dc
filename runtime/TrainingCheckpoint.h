#pragma once
// A training checkpoint: every parameter and optimizer state of a training step, and its step
// count ("optimizer.step", an i64 scalar), as one .safetensors file (a path ending in
// ".safetensors") or as a folder of .npy files ("<name>.npy"). runtime::TrainingStep writes and
// reads it, whether compiled just in time or ahead of time, so that either resumes from the
// other's checkpoint; kiln-compile --train --load starts a compiled step from one.
#include <cstdint>
#include <map>
#include <string>

#include "core/Tensor.h"

namespace kiln::runtime {

/// The checkpoint's name for the step count.
constexpr const char *kCheckpointStepName = "optimizer.step";

/// Writes `params` and `steps` to `path` (a folder is created if missing). kiln::Error naming
/// the path when it cannot be written, or a parameter whose name cannot be a file name.
void saveCheckpoint(const std::string &path, const std::map<std::string, Tensor> &params, int64_t steps);

/// Reads what saveCheckpoint wrote, as it is (the step count under kCheckpointStepName).
std::map<std::string, Tensor> readCheckpoint(const std::string &path);

/// The step count of a checkpoint's kCheckpointStepName tensor; kiln::Error naming `path`
/// unless it is one integer >= 0.
int64_t checkpointSteps(const Tensor &steps, const std::string &path);

/// Reads what saveCheckpoint wrote and copies it into the tensors of `params` in place, and the
/// step count, when the file has one, into `steps`. Every tensor of the file must be one of
/// `params` with its exact type; parameters the file lacks keep their values. Everything is
/// checked before anything is copied, so a bad file changes nothing. kiln::Error naming the
/// file and the tensor otherwise.
void loadCheckpoint(const std::string &path, std::map<std::string, Tensor> &params, int64_t &steps);

} // namespace kiln::runtime
