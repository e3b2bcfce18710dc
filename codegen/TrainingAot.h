#pragma once
// A whole training step compiled ahead of time: kiln-compile --train writes, as one shared
// object, what compileTrainingStep compiles just in time - forward, loss, backward and
// optimizer update, lowered and checked by the same lowerTrainingStep - with the parameters,
// optimizer state and step count it starts from embedded as its weights
// (compileLoweredPartsAheadOfTime), and a training manifest (runtime/TrainingManifest.h) saying which
// inputs take the learning rate, the step count and the target and which output overwrites
// which weight. runtime::TrainingStep::load (runtime/TrainingStep.h) loads it with no compiler
// and trains on.
#include <cstdint>
#include <string>

#include "codegen/CompileTraining.h"
#include "runtime/TrainingManifest.h"

namespace kiln::codegen {

/// What compileTrainingAheadOfTime wrote.
struct AotTrainingStep {
  AotModel model;
  runtime::TrainingManifest manifest;
};

/// Where the compiled step starts from, beyond TrainingOptions::compile.params.
struct AotTrainingStart {
  int64_t steps = 0; // steps already taken (Adam's bias corrections count from it)
  /// A checkpoint (runtime/TrainingCheckpoint.h: runtime::TrainingStep::saveParameters, kiln-run
  /// --save) whose tensors and step count override the given ones; "" for none.
  std::string checkpoint;
};

/// Builds the training graph of `forward`, lowers and checks it as compileTrainingStep does
/// and writes it to `outputPath`; a forward graph over a symbolic batch as its split step in
/// tiles of TrainingOptions::batchTile rows, both parts in the file (see TrainingAot.cpp).
/// Initial values: the checkpoint's, else options.compile.params by name (parameters and,
/// optionally, optimizer states), else the parameters' own values (states: zeros).
/// options.reference is refused (there is nothing to compile). kiln::Error as
/// compileTrainingStep and compileLoweredPartsAheadOfTime, for a checkpoint tensor that is not
/// a parameter of the step with its type, or for a parameter the step overwrites but never
/// reads (it has no weight to embed).
AotTrainingStep compileTrainingAheadOfTime(const ir::Graph &forward, const LossSpec &loss,
                                           const OptimizerSpec &optimizer, const std::string &outputPath,
                                           const TrainingOptions &options = {}, const AotOptions &aot = {},
                                           const AotTrainingStart &start = {});

} // namespace kiln::codegen
