#pragma once
// runtime::TrainingArtifact: a whole training step compiled ahead of time (kiln-compile
// --train; codegen/TrainingAot.h) - forward, loss, backward and optimizer update, with the
// parameters, the optimizer state and the step count it starts from - loaded with no compiler
// and no graph, and trained on: it runs like codegen::TrainingStep, and its checkpoints are
// TrainingStep's (runtime/TrainingCheckpoint.h), so training moves freely between the two.
//
// Loading copies the weights the shared object carries (read-only memory) into tensors the
// artifact owns, loads the model over those, and binds every update output to the tensor of
// the weight it overwrites (Executable::runInto): each run() updates them in place, as
// TrainingStep does. The launch order that makes the in-place update sound was checked when
// the step was compiled (codegen::checkInPlaceUpdates). Loading also checks the manifest
// (TrainingManifest.h) against the model: inputs, outputs and weights it names exist with the
// types they need; a compiled model that is not a training step is a kiln::Error saying so.
//
// Like TrainingStep, an artifact updates its tensors on every run(): one thread at a time.
#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "runtime/Executable.h"
#include "runtime/TrainingManifest.h"

namespace kiln::runtime {

class TrainingArtifact {
public:
  /// Loads the training step `soPath` (see above). kiln::Error as Executable::load, or when
  /// the model is not a training step or its manifest does not fit it.
  static TrainingArtifact load(const std::string &soPath, ExecutableOptions options = {});

  TrainingArtifact(TrainingArtifact &&) noexcept;
  TrainingArtifact &operator=(TrainingArtifact &&) noexcept;
  ~TrainingArtifact();

  /// Runs one step on the forward inputs, then the target or labels if the loss takes one, in
  /// order, and returns the loss (before the update). The tensors are updated in place and the
  /// step count advances.
  float run(const std::vector<Tensor> &inputs);
  float run(std::initializer_list<Tensor> inputs) { return run(std::vector<Tensor>(inputs)); }

  /// The inputs run() takes, in order (the model's, without the learning rate and step count).
  const std::vector<TensorSpec> &inputs() const;
  std::vector<std::string> inputNames() const;
  /// The position in inputs() of the target or labels; -1 when the loss takes none.
  int64_t targetInput() const;

  double learningRate() const;
  void setLearningRate(double lr);
  int64_t stepCount() const;
  void setStepCount(int64_t steps);

  /// Every parameter and optimizer state by name: the tensors each run() updates in place.
  const std::map<std::string, Tensor> &parameters() const;
  const Tensor &parameter(const std::string &name) const;
  const TrainingManifest &manifest() const;
  const Executable &executable() const;

  /// As TrainingStep::saveParameters / loadParameters (runtime/TrainingCheckpoint.h).
  void saveParameters(const std::string &path) const;
  void loadParameters(const std::string &path);

private:
  struct Impl;
  explicit TrainingArtifact(std::unique_ptr<Impl> impl);
  Impl &state() const; // kiln::Error for a moved-from artifact
  std::unique_ptr<Impl> impl_;
};

/// Whether the compiled model `soPath` is a training step (exports KILN_TRAINING_SYMBOL).
/// Call it on a file Executable::load accepted (it maps the file with dlopen).
bool isTrainingArtifact(const std::string &soPath);

} // namespace kiln::runtime
