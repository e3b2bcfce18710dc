#pragma once
// kiln-run MODEL --train LOSS ...: training an imported model (a .kir graph or an ONNX export,
// whose parameters or initializers are what it trains) with one compiled training step
// (codegen/TrainingStep.h); kiln-run STEP.so --train ...: training on from a step that
// kiln-compile --train wrote (runtime/TrainingArtifact.h: loss, optimizer, parameters and
// state are in the file). It takes flags of its own (kTrainUsage), so it parses them itself:
// kiln-run hands it the whole command line when isTrainCommand says --train is on it.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "codegen/TrainingStep.h"
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

// ---- shared by the two training commands (TrainCommand.cpp, TrainArtifactCommand.cpp) ----

/// A training step as the report loop drives it: a TrainingStep or a TrainingArtifact.
struct StepDriver {
  std::function<float(const std::vector<Tensor> &)> run;
  std::function<int64_t()> stepCount;
  std::function<void(const std::string &)> save;
  std::function<void()> printBenchMemory; // after --bench's runs; may be empty
};

/// The steps, --bench and --save of runTrainCommand.
int runTrainingLoop(const StepDriver &step, const std::vector<Tensor> &inputs, const TrainOptions &options);

/// The --labels file, or random ones drawn with `seed`: class indices in [0, classes) for an
/// integer type, else a target of `type`.
Tensor bindLabels(const TrainOptions &options, const TensorType &type, int64_t classes, uint64_t seed);

/// kiln-run STEP.so --train (TrainArtifactCommand.cpp).
int runArtifactTrainCommand(const TrainOptions &options);

} // namespace kiln::tools
