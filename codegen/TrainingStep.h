#pragma once
// One compiled training step: forward, backward and optimizer update in one executable, with
// parameters and optimizer state updated in place.
//
//   forward graph -> buildTrainingGraph (loss, gradients, update ops)
//     -> `training` pipeline (passes/Pipelines.cpp, up to order-parameter-writes and
//     plan-memory) -> C++ -> Executable, loaded with the parameter and state tensors as its weights
//
// In place: the executable's outputs that hold new parameter and state values are bound
// (Executable::runInto) to the very tensors it reads those parameters from, so a step writes
// no new parameter buffers and copies nothing. That is sound only when each such tensor's
// writing kernel launches after every other kernel that reads it, and reads it only at the
// element it writes (elementwise); the training pipeline establishes the order and
// checkInPlaceUpdates verifies both on the lowered model, whose launch list is the executable's
// (compileTrainingStep also checks the launch names match).
//
// The reference backend (TrainingOptions::reference) runs the same training graph on the
// reference evaluator and copies the new values into the same tensors: same API, for tests.
//
// A TrainingStep owns its parameters and updates them on every run(): unlike an Executable,
// it must not run on several threads at once.
#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "codegen/CompileModel.h"
#include "passes/autodiff/TrainingGraph.h"

namespace kiln::codegen {

using passes::autodiff::BufferWrite;
using passes::autodiff::LossKind;
using passes::autodiff::LossSpec;
using passes::autodiff::OptimizerKind;
using passes::autodiff::OptimizerSpec;

struct TrainingOptions {
  /// Parameters to train; empty: every float parameter the loss depends on.
  std::vector<std::string> params;
  /// Forward outputs written back into (untrained) parameters every step, in place: BatchNorm
  /// running statistics in training mode (see buildTrainingGraph). A graph traced from nn
  /// modules lists its own in frontend::GraphBuilder::bufferWrites() (BatchNorm2d's running
  /// statistics, Dropout's random offset): pass those here.
  std::vector<passes::autodiff::BufferWrite> buffers;
  /// Run on the reference evaluator instead of compiled code.
  bool reference = false;
  /// Fusion, compiler and runtime options; `compile.params` gives initial values (by name)
  /// for parameters and, optionally, optimizer states. Training graphs go through the
  /// `training` pipeline (see lowerTrainingGraph).
  CompileOptions compile;
};

class TrainingStep {
public:
  TrainingStep(TrainingStep &&) noexcept;
  TrainingStep &operator=(TrainingStep &&) noexcept;
  ~TrainingStep();

  /// Runs one step on the forward graph's inputs (then the target or labels, if the loss
  /// takes one), in order, and returns the loss (before the update). Parameters and state are
  /// updated in place; the step count advances.
  float run(const std::vector<Tensor> &inputs);
  /// So that `run({x, labels})` means positional inputs, not a map built from two "iterators".
  float run(std::initializer_list<Tensor> inputs) { return run(std::vector<Tensor>(inputs)); }
  /// The same with inputs by name (the forward inputs and LossSpec::targetName).
  float run(const std::map<std::string, Tensor> &inputs);

  /// The names of the inputs run() takes, in order.
  std::vector<std::string> inputNames() const;

  double learningRate() const;
  /// Takes effect on the next run; no recompile.
  void setLearningRate(double lr);
  /// Steps taken so far (Adam's bias corrections and SGD's first-step momentum use it).
  int64_t stepCount() const;
  void setStepCount(int64_t steps);

  /// Every parameter of the training graph (trained, frozen, and optimizer states) by name.
  /// The tensors are the ones the step updates in place: their storage never changes.
  const std::map<std::string, Tensor> &parameters() const;
  /// One of them; kiln::Error naming the known parameters when there is none.
  const Tensor &parameter(const std::string &name) const;
  /// What each step overwrites: trained parameters, optimizer states, buffers, in output order.
  const std::vector<passes::autodiff::ParamUpdate> &updates() const;

  /// Writes every parameter and state, and the step count ("optimizer.step", i64 scalar):
  /// to one .safetensors file when `path` ends in ".safetensors", else as one .npy file per
  /// tensor (named "<name>.npy") in the directory `path` (created if missing).
  void saveParameters(const std::string &path) const;
  /// Reads what saveParameters wrote and copies it into the existing tensors (in place). Every
  /// tensor of the file must be a parameter of the step with its exact type; parameters the
  /// file lacks keep their values. kiln::Error naming the file and the tensor otherwise.
  void loadParameters(const std::string &path);

  bool isReference() const;
  /// The training graph (before the pipeline).
  const passes::autodiff::TrainingGraph &trainingGraph() const;
  /// The compiled executable; kiln::Error on the reference backend.
  const runtime::Executable &executable() const;
  /// The lowered model the executable was built from; kiln::Error on the reference backend.
  const LoweredModel &lowered() const;

private:
  struct Impl;
  explicit TrainingStep(std::unique_ptr<Impl> impl);
  Impl &state() const; // kiln::Error for a moved-from step
  friend TrainingStep compileTrainingStep(const ir::Graph &, const LossSpec &, const OptimizerSpec &,
                                          const TrainingOptions &);
  std::unique_ptr<Impl> impl_;
};

/// Builds the training graph of `forward` and compiles it (or prepares the reference backend).
TrainingStep compileTrainingStep(const ir::Graph &forward, const LossSpec &loss, const OptimizerSpec &optimizer,
                                 const TrainingOptions &options = {});

/// Names each update's output after its parameter in a copy of `graph` (as buildTrainingGraph
/// does: the pipeline's in-place passes find the updates so), runs the `training` pipeline on it
/// (`training-unfused` without options.fuse; options.passes instead, for tests that show what
/// goes wrong without one of its passes) and emits C++ with the plan of its plan-memory pass.
/// kiln::Error when another output is named like a parameter.
LoweredModel lowerTrainingGraph(const ir::Graph &graph, const std::vector<passes::autodiff::ParamUpdate> &updates,
                                const CompileOptions &options = {});

/// Checks, on a lowered model, that each update output is written by a launch that comes after
/// every other launch reading its parameter, that reads the parameter only elementwise (at the
/// element it writes) and that has no staged op (contraction, reduction, opaque op). kiln::Error
/// naming the parameter and the launches otherwise.
void checkInPlaceUpdates(const LoweredModel &lowered, const std::vector<passes::autodiff::ParamUpdate> &updates);

} // namespace kiln::codegen

namespace kiln {

using codegen::TrainingOptions;
using codegen::TrainingStep;

/// kiln::compile_training_step(graph, loss, optimizer, options): see codegen::compileTrainingStep.
inline TrainingStep compile_training_step(const ir::Graph &forward, const codegen::LossSpec &loss,
                                          const codegen::OptimizerSpec &optimizer,
                                          const TrainingOptions &options = {}) {
  return codegen::compileTrainingStep(forward, loss, optimizer, options);
}

} // namespace kiln
