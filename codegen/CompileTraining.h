#pragma once
// Compiling a training step just in time: forward, loss, backward and optimizer update in one
// executable that writes the parameters and optimizer state in place. The result is a
// runtime::TrainingStep (runtime/TrainingStep.h), the same type a step compiled ahead of time
// (codegen/TrainingAot.h) loads as.
//
//   forward graph -> buildTrainingGraph (loss, gradients, update ops)
//     -> `training` pipeline (passes/Pipelines.cpp, up to order-parameter-writes and
//        plan-memory) -> checkInPlaceUpdates -> C++              (lowerTrainingStep)
//     -> shared object (disk cache) -> Executable over the parameter and state tensors
//        -> runtime::TrainingStep                                (compileLoweredTrainingStep)
//
// In place: each output holding a new parameter or state value is bound to the very tensor the
// executable reads that parameter from. That is sound only when the launch writing it comes
// after every other launch reading it and reads it only at the element it writes; the training
// pipeline establishes that order, checkInPlaceUpdates verifies it on the lowered model, and
// compileLoweredTrainingStep checks that the executable's launch list is the lowered model's.
//
// The reference backend (TrainingOptions::reference) runs the training graph on the reference
// evaluator instead of compiled code and writes the new values into the same tensors: the same
// runtime::TrainingStep, for tests.
#include <string>
#include <vector>

#include "codegen/CompileModel.h"
#include "passes/autodiff/TrainingGraph.h"
#include "runtime/Trainer.h"
#include "runtime/TrainingManifest.h"
#include "runtime/TrainingStep.h"

namespace kiln::codegen {

using passes::autodiff::BufferWrite;
using passes::autodiff::LossKind;
using passes::autodiff::LossSpec;
using passes::autodiff::OptimizerKind;
using passes::autodiff::OptimizerSpec;

struct TrainingOptions {
  /// Parameters to train; empty: every float parameter the loss depends on but `frozen`.
  std::vector<std::string> params;
  /// Parameters not to train, with `params` empty: their backward is not built at all
  /// (passes::autodiff::buildTrainingGraph), and they keep their values bit for bit.
  std::vector<std::string> frozen;
  /// Forward outputs written back into (untrained) parameters every step, in place: BatchNorm
  /// running statistics in training mode (see buildTrainingGraph). A graph traced from nn
  /// modules lists its own in frontend::GraphBuilder::bufferWrites() (BatchNorm2d's running
  /// statistics, Dropout's random offset): pass those here.
  std::vector<passes::autodiff::BufferWrite> buffers;
  /// Run on the reference evaluator instead of compiled code.
  bool reference = false;
  /// Compile the step in two parts, its gradients apart from its update, so that the caller can
  /// act on the gradients between them (runtime/TrainingStep.h: gradient accumulation,
  /// averaging across processes). It costs the gradients a round trip through memory that a
  /// whole step's update, fused into the backward kernels, saves.
  bool split = false;
  /// A forward graph whose batch is a symbol (f32[N, ...], ir/BatchTiling.h's servesEveryBatch)
  /// compiles once, for tiles of this many rows, into a split step that runs a batch of any
  /// size: its tiles (the last padded with samples of weight 0) each weigh their samples' losses
  /// by 1 / N (LossSpec::sampleWeights), and their gradients are summed (runtime/
  /// TrainingStep.h). The whole batch's update within rounding, for a model whose samples do
  /// not meet in the forward pass (BatchNorm's batch statistics refuse it); a short batch costs
  /// a whole tile. Static graphs ignore it.
  int64_t batchTile = 32;
  /// Fusion, compiler and runtime options; `compile.params` gives initial values (by name)
  /// for parameters and, optionally, optimizer states. Training graphs go through the
  /// `training` pipeline (see lowerTrainingGraph).
  CompileOptions compile;
};

/// Builds the training graph of `forward` (a static graph, or one whose only symbol is its batch:
/// see TrainingOptions::batchTile) and compiles it into a step that starts from the
/// initial values of TrainingOptions::compile.params, else the parameters' own (optimizer
/// states: zeros), at step 0 and the optimizer's learning rate; or prepares the reference
/// backend when options.reference; split in two when options.split. kiln::Error as buildTrainingGraph, for a parameter without
/// a value or with a value of another type, or when the step cannot update in place.
runtime::TrainingStep compileTrainingStep(const ir::Graph &forward, const LossSpec &loss,
                                          const OptimizerSpec &optimizer, const TrainingOptions &options = {});

/// A training step lowered to C++ and checked, before the C++ compiler: what
/// compileTrainingStep compiles and loads, and what compileTrainingAheadOfTime writes. Tools
/// read it to report on the compile (the memory plan against its lower bound).
struct LoweredTrainingStep {
  /// The training graph, before the pipeline.
  passes::autodiff::TrainingGraph training;
  /// After the pipeline: kernels, memory plan, C++.
  LoweredModel lowered;
  /// Its inputs, updates, loss and optimizer; params lists every parameter of the training
  /// graph, steps is 0.
  runtime::TrainingManifest manifest;
};

/// A forward pass with the loss of each element (runtime/Trainer.h's EvaluateFn) of `forward`
/// (over a symbolic batch: of any count of rows, in tiles of `step`'s)
/// (passes::autodiff::buildEvaluationGraph) that reads `step`'s parameter tensors as they are
/// when it runs, for validation between epochs; compiled (the `training` pipeline: nothing
/// folds the parameters' values) or, with options.reference, on the reference evaluator. It
/// shares the step's tensors and must not run while the step does. kiln::Error as
/// buildEvaluationGraph.
runtime::EvaluateFn compileEvaluation(const ir::Graph &forward, const LossSpec &loss, const runtime::TrainingStep &step,
                                      const TrainingOptions &options = {});

/// compileTrainingStep's first half: builds the training graph, lowers it
/// (lowerTrainingGraph) and checks the in-place updates (checkInPlaceUpdates). options.reference
/// does not apply. kiln::Error as compileTrainingStep.
LoweredTrainingStep lowerTrainingStep(const ir::Graph &forward, const LossSpec &loss, const OptimizerSpec &optimizer,
                                      const TrainingOptions &options = {});

/// A split step lowered to C++ and checked, before the C++ compiler (compileTrainingStep's
/// path for a forward graph over a symbolic batch, and what compileTrainingAheadOfTime writes
/// for one): its training graphs, its two parts (symbol prefixes "gradients_" and "update_"
/// after CompileOptions::symbolPrefix) and its manifest (batchTile and the batch's inputs set).
struct LoweredSplitTrainingStep {
  passes::autodiff::SplitTrainingGraph split;
  LoweredModel gradients, update;
  runtime::TrainingManifest manifest;
};

/// A step over the symbolic batch of `forward` (TrainingOptions::batchTile), lowered.
/// options.reference does not apply. kiln::Error as compileTrainingStep.
LoweredSplitTrainingStep lowerBatchTiledTrainingStep(const ir::Graph &forward, const LossSpec &loss,
                                                     const OptimizerSpec &optimizer, const TrainingOptions &options = {});

/// compileTrainingStep's second half: compiles `step` (the disk cache applies) and loads it over
/// copies of the initial values. options must be the ones `step` was lowered with.
runtime::TrainingStep compileLoweredTrainingStep(const LoweredTrainingStep &step, const TrainingOptions &options = {});

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

/// The manifest of the training graph `training` of `forward`: input positions, the updates, the
/// loss, optimizer and class count; params lists every parameter of the training graph, steps
/// is 0.
runtime::TrainingManifest trainingManifest(const ir::Graph &forward, const passes::autodiff::TrainingGraph &training,
                                           const LossSpec &loss, const OptimizerSpec &optimizer);

/// The names the manifest and kiln-run --train use: "mean", "cross-entropy", ...; "sgd",
/// "adam", "adamw".
const char *lossKindName(LossKind kind);
const char *optimizerKindName(OptimizerKind kind);

} // namespace kiln::codegen

namespace kiln {

using codegen::TrainingOptions;

/// kiln::compile_training_step(graph, loss, optimizer, options): see codegen::compileTrainingStep.
inline TrainingStep compile_training_step(const ir::Graph &forward, const codegen::LossSpec &loss,
                                          const codegen::OptimizerSpec &optimizer,
                                          const TrainingOptions &options = {}) {
  return codegen::compileTrainingStep(forward, loss, optimizer, options);
}

} // namespace kiln
