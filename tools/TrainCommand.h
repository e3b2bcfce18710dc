#pragma once
// kiln-run MODEL --train LOSS ...: training an imported model (a .kir graph or an ONNX export,
// whose parameters or initializers are what it trains) with one training step compiled just in
// time (codegen/CompileTraining.h); kiln-run STEP.so --train ...: training on from a step that
// kiln-compile --train wrote (loss, optimizer, parameters and state are in the file). Both are
// one runtime::TrainingStep (runtime/TrainingStep.h), trained either on one batch for --steps
// (its inputs bound as kiln-run binds a graph's) or, with --data, on a dataset for --epochs by
// runtime::Trainer (tools/DatasetTraining.h). It takes flags of its own (kTrainUsage), so it
// parses them itself: kiln-run hands it the whole command line when isTrainCommand says
// --train is on it.
#include <cstdint>
#include <string>
#include <vector>

#include "codegen/CompileTraining.h"
#include "tools/ToolCommon.h"
#include "tools/TrainingFlags.h"

namespace kiln::tools {

struct TrainOptions {
  std::string path;      // FILE.kir, FILE.onnx, or STEP.so
  bool artifact = false; // the path is a compiled training step
  bool lossGiven = false; // --train LOSS, not a bare --train
  TrainingFlags training; // --train's loss, the optimizer
  const codegen::LossSpec &loss() const { return training.loss; }
  const codegen::OptimizerSpec &optimizer() const { return training.optimizer; }
  std::string labels;     // --labels FILE: the target (mse) or class indices (cross-entropy, nll)
  std::vector<Binding> inputs, params;
  int64_t steps = 1;
  int bench = 0;          // timed steps after the reported ones
  std::string save, load; // .safetensors file or .npy directory
  /// --freeze, --train-only: globs over parameter names.
  std::vector<std::string> freeze, trainOnly;
  /// Dataset training (with --data): the arrays, the held-out ones, and how to read them.
  std::vector<Binding> data, val;
  std::string valLabels;
  int64_t batchSize = 0;  // 0: the model's batch times accumulate
  /// --batch-tile T: a model whose batch is symbolic compiles once, for tiles of T rows, and
  /// trains batches of any size (0: specialised to the batch).
  int64_t batchTile = 0;
  int64_t epochs = 1;
  int64_t accumulate = 0; // 0: not given (1)
  bool shuffle = false, dropLast = false;
  std::string lrSchedule = "constant";
  int64_t saveEvery = 0;
  int64_t stopAfter = 0;
  int64_t logEvery = 0;   // --log-every: a line per N updates (0: none)
  /// --data-parallel: one of the processes mpirun started; --batch-size is over all of them.
  bool dataParallel = false;
  double mpiTimeout = 0;   // --mpi-timeout, seconds (0: not given, 300)
  bool checkIdentical = false; // --check-identical: compare the ranks' parameters after every update
  int64_t ranks = 1;       // set when MPI is up: the processes sharing each update
  bool dataset() const { return !data.empty(); }
  bool reference = false;
  int threads = 0;        // 0: the runtime's default pool
  uint64_t seed = 0;
  bool help = false;
};

/// Whether kiln-run's command line selects training (it holds --train or --train=...).
bool isTrainCommand(int argc, char **argv);
/// Parses the training flags (argv[0] is the program); kiln::Error for an unknown flag, a bad
/// value, or a combination that does not apply (--labels without a loss that takes a target,
/// an optimizer flag with a compiled step, whose optimizer is fixed).
TrainOptions parseTrainOptions(int argc, char **argv);
/// Trains: prints "step I loss L" per step (I counts from the loaded step count + 1), with
/// --bench the arena's size (and lower bound) and, last, median_ms; saves with --save. Returns
/// the exit status: 1 when a loss is not finite.
int runTrainCommand(const TrainOptions &options);
/// Both, for kiln-run's dispatcher: prints kTrainUsage for --help.
int runTrainCommand(int argc, char **argv);

/// kiln-run --train's part of --help.
extern const char *const kTrainUsage;

} // namespace kiln::tools
