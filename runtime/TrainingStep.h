#pragma once
// runtime::TrainingStep: one training step - forward, loss, backward and optimizer update - with
// the parameters, optimizer state, learning rate and step count it trains, updated in place on
// every run(). It is made two ways, and is the same object either way:
//   - just in time: codegen::compileTrainingStep (codegen/CompileTraining.h) compiles a
//     forward graph and hands its executable, manifest and initial tensors to the constructor;
//   - ahead of time: TrainingStep::load opens a shared object that kiln-compile --train wrote
//     (codegen/TrainingAot.h), with no compiler and no graph: the tensors it starts from are
//     copies of the weights the file carries.
// Checkpoints (saveParameters, loadParameters: runtime/TrainingCheckpoint.h) are one format, so
// training moves freely between the two.
//
// In place: each output of the executable that holds a new parameter or state value is bound
// (Executable::runInto) to the very tensor the executable reads that parameter from, so a step
// writes no new parameter buffers and copies nothing. That is sound only for a launch order
// codegen checked when it compiled the step (codegen::checkInPlaceUpdates). What the runtime
// checks is the manifest (runtime/TrainingManifest.h) against the executable: the inputs,
// outputs and parameters it names exist with the types they need.
//
// A step may also run without compiled kernels, on a StepInterpreter (codegen's reference
// backend: the reference evaluator on the training graph, for tests); the API is the same.
//
// Split: a step may be compiled in two parts (codegen::TrainingOptions::split), so that its
// caller sees the gradients between them: computeGradients() runs the forward pass, the loss and
// the backward pass, gradients() are then the gradients of the loss (a mean over the batch),
// which the caller may change in place (sum micro-batches for gradient accumulation, average
// them across processes), and applyGradients() runs the optimizer update on them. run() is
// the two in turn. The parts' layout follows the manifest's updates, which list the trained
// parameters (P), then the optimizer states (S, each owned by a parameter of another name),
// then the buffers (B, owned by themselves):
//   gradient part: the inputs of a whole step; outputs [loss, gradient of each trained
//                  parameter (P), new value of each buffer (B, written in place)]
//   update part:   inputs [gradient of each trained parameter (P), lr, step]; outputs [new
//                  value of each trained parameter (P), of each state (S)], written in place
// Both parts read the same parameter tensors as weights.
//
// Gradients as they become final: computeGradients may take a GradientListener, which hears of
// each gradient as soon as the kernel that last touches it has run (Executable::
// lastLaunchOfOutput), while the rest of the backward pass still runs, and is called between
// every two kernels; a data-parallel caller starts each bucket's allreduce from there and
// progresses the transfers in flight (distributed/DataParallel.h).
//
// Batch tiles: a step over a symbolic batch (manifest.batchTile > 0; codegen compiles it split,
// for tiles of T rows, with each sample's loss weighted by an extra f32[T] input) takes inputs
// of any N rows (inputs() shows the batch's symbol). computeGradients runs the gradient part on
// each tile of T rows (a whole tile read where the caller's rows lie; the last one copied and
// padded with repeats of its first row), with weights 1/N per sample (1 for a sum loss; 0 for
// an ignored label and the padding, the mean then over the others), and sums the tiles'
// gradients and losses: the whole batch's, within rounding, for a model whose samples do not
// meet. Buffers (a random offset) advance once per tile.
//
// A TrainingStep owns its tensors and updates them on every run(): unlike an Executable, it
// must not run on several threads at once.
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "runtime/Executable.h"
#include "runtime/TrainingManifest.h"

namespace kiln::runtime {

/// Computes a training step's outputs without compiled kernels. The runtime knows codegen's
/// reference backend only through this interface, so it needs no compiler library.
class StepInterpreter {
public:
  virtual ~StepInterpreter() = default;
  /// The step's model inputs and outputs, as an Executable would declare them (the learning
  /// rate and step count inputs included).
  virtual const std::vector<TensorSpec> &inputs() const = 0;
  virtual const std::vector<TensorSpec> &outputs() const = 0;
  /// Computes every output from `inputs` and the current values of `params`, then writes them
  /// into `outputs` (one allocated tensor of the declared type each). An update's output is its
  /// parameter's own tensor: nothing may be written before everything is computed.
  virtual void runInto(const std::vector<Tensor> &inputs, const std::map<std::string, Tensor> &params,
                       std::vector<Tensor> &outputs) const = 0;
};

class TrainingStep {
public:
  /// Loads the training step that kiln-compile --train wrote to `soPath`. kiln::Error as
  /// Executable::load, or when the model is not a training step or its manifest does not fit it.
  static TrainingStep load(const std::string &soPath, ExecutableOptions options = {});

  /// A step running `executable`, which reads the tensors of `params` as its weights (they
  /// share storage), as `manifest` describes it; the learning rate and step count start at the
  /// manifest's. `params` holds every parameter and state the step saves and loads: exactly
  /// those manifest.params names. `name` names the step in errors ("training step @mlp").
  /// kiln::Error naming what does not fit when the manifest does not describe the executable.
  TrainingStep(Executable executable, TrainingManifest manifest, std::map<std::string, Tensor> params,
               std::string name);
  /// The same on an interpreter instead of an executable.
  TrainingStep(std::unique_ptr<StepInterpreter> interpreter, TrainingManifest manifest,
               std::map<std::string, Tensor> params, std::string name);
  /// A split step (see above): `gradients` and `update` both read the tensors of `params` as
  /// their weights, and are laid out as the manifest says. kiln::Error naming what does not
  /// fit otherwise.
  TrainingStep(Executable gradients, Executable update, TrainingManifest manifest,
               std::map<std::string, Tensor> params, std::string name);
  /// The same on interpreters.
  TrainingStep(std::unique_ptr<StepInterpreter> gradients, std::unique_ptr<StepInterpreter> update,
               TrainingManifest manifest, std::map<std::string, Tensor> params, std::string name);

  TrainingStep(TrainingStep &&) noexcept;
  TrainingStep &operator=(TrainingStep &&) noexcept;
  ~TrainingStep();

  /// Runs one step on the forward inputs, then the target or labels if the loss takes one, in
  /// order (inputNames()), and returns the loss (before the update). Parameters and state are
  /// updated in place; the step count advances. kiln::Error for a wrong count or type of inputs, or
  /// a step count that cannot advance (2^63 - 1, from a manifest or a checkpoint).
  float run(const std::vector<Tensor> &inputs);
  /// So that `run({x, labels})` means positional inputs, not a map built from two "iterators".
  float run(std::initializer_list<Tensor> inputs) { return run(std::vector<Tensor>(inputs)); }
  /// The same with inputs by name; every input must be given, and no other.
  float run(const std::map<std::string, Tensor> &inputs);

  /// Whether the step is split (see above): computeGradients, gradients and applyGradients
  /// apply; on a step that is not, they are a kiln::Error.
  bool isSplit() const;
  /// The first part of run(): the loss (returned) and the gradients of the trained parameters,
  /// nothing updated but the buffers (BatchNorm's running statistics), the step count unchanged.
  float computeGradients(const std::vector<Tensor> &inputs);
  float computeGradients(std::initializer_list<Tensor> inputs) {
    return computeGradients(std::vector<Tensor>(inputs));
  }
  /// What computeGradients tells a caller while it runs, on its own thread, between kernels
  /// (no kernel runs meanwhile). Either may be empty.
  struct GradientListener {
    /// Gradient `index` (of trainedParameters()) holds its final value: no later kernel of this
    /// pass reads or writes it, so the caller may read it, change it in place or send it while
    /// the rest runs. Once per gradient per computeGradients, in gradientReadyOrder().
    std::function<void(size_t index, Tensor &gradient)> ready;
    /// After every kernel of the gradient part: for progressing communication in flight.
    std::function<void()> betweenKernels;
  };
  /// computeGradients, telling `listener` of each gradient as soon as it is final. On the
  /// reference backend (no kernels) every gradient is final at the end.
  float computeGradients(const std::vector<Tensor> &inputs, const GradientListener &listener);
  /// The order in which computeGradients finalises the gradients (indices into
  /// trainedParameters()): by the kernel that last touches each, ties in reverse parameter
  /// order; on the reference backend, reverse parameter order. The same for every step
  /// compiled from the same model with the same options. kiln::Error on a step that is not split.
  std::vector<size_t> gradientReadyOrder() const;
  /// The gradients computeGradients left, one per trainedParameters() name in that order: the
  /// very tensors applyGradients reads (copies of Tensor share storage), so that writing into
  /// them changes the update. kiln::Error before computeGradients.
  std::vector<Tensor> gradients() const;
  /// The second part of run(): the optimizer update from gradients(), in place; the step count
  /// advances. kiln::Error when no computeGradients came since the last update.
  void applyGradients();

  /// The inputs run() takes, in order: the model's without the learning rate and step count
  /// (and the sample weights of batch tiles, whose batch inputs show the batch's symbol).
  const std::vector<TensorSpec> &inputs() const;
  std::vector<std::string> inputNames() const;
  /// The position in inputs() of the target or labels; -1 when the loss takes none.
  int64_t targetInput() const;

  double learningRate() const;
  /// Takes effect on the next run; no recompile. kiln::Error when negative.
  void setLearningRate(double lr);
  /// Steps taken so far (Adam's bias corrections and SGD's first-step momentum use it).
  int64_t stepCount() const;
  void setStepCount(int64_t steps);

  /// Every parameter (trained and frozen) and optimizer state by name: the tensors each run()
  /// updates in place. Their storage never changes.
  const std::map<std::string, Tensor> &parameters() const;
  /// One of them; kiln::Error naming the known parameters when there is none.
  const Tensor &parameter(const std::string &name) const;
  /// The names of the parameters the optimizer trains (not its states, not buffers), in the
  /// order of the manifest's updates.
  std::vector<std::string> trainedParameters() const;

  /// Writes every parameter and state, and the step count, as a checkpoint
  /// (runtime/TrainingCheckpoint.h): one .safetensors file when `path` ends in ".safetensors",
  /// else a folder of .npy files (created if missing).
  void saveParameters(const std::string &path) const;
  /// Reads what saveParameters wrote and copies it into the existing tensors (in place), and the
  /// step count. Every tensor of the file must be a parameter of the step with its exact type;
  /// parameters the file lacks keep their values; a bad file changes nothing. kiln::Error naming
  /// the file and the tensor otherwise.
  void loadParameters(const std::string &path);

  /// What the step is: inputs, updates, loss and optimizer (runtime/TrainingManifest.h). Its lr
  /// and steps are where the step started, not where it is.
  const TrainingManifest &manifest() const;
  /// Whether the step runs on a StepInterpreter (codegen's reference backend).
  bool isReference() const;
  /// The executable (of a split step: its gradient part); kiln::Error on an interpreter.
  const Executable &executable() const;
  /// A split step's update part; kiln::Error on an interpreter or a step that is not split.
  const Executable &updateExecutable() const;

private:
  struct Impl;
  Impl &state() const; // kiln::Error for a moved-from step
  std::unique_ptr<Impl> impl_;
};

/// Whether the compiled model `soPath` is a training step (exports KILN_TRAINING_SYMBOL).
/// Call it on a file Executable::load accepted (it maps the file with dlopen).
bool isTrainingStep(const std::string &soPath);

} // namespace kiln::runtime

namespace kiln {

using runtime::TrainingStep;

} // namespace kiln
