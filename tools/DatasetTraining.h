#pragma once
// kiln-run MODEL --train LOSS --data NAME=FILE.npy ... --epochs E: training on a dataset with
// runtime::Trainer (runtime/Trainer.h). TrainCommand parses the flags that choose the step and
// compiles or loads it; this file owns the dataset flags (their part of kTrainUsage is in
// TrainCommand.cpp, with the rest), checks them, and runs and reports the training: a line on
// the data, a progress bar on a terminal (plain progress lines at most every 30 s elsewhere),
// one line per epoch.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "distributed/DataParallel.h"
#include "runtime/Trainer.h"
#include "tools/TrainCommand.h"

namespace kiln::tools {

/// The label the loss ignores (torch's ignore_index default): a short last batch is padded with
/// samples labelled so.
constexpr int64_t kPaddingLabel = -100;

/// Registers --data, --val, --val-labels, --batch-size, --epochs, --accumulate, --shuffle,
/// --drop-last, --lr-schedule, --save-every, --stop-after, --log-every, --data-parallel,
/// --mpi-timeout and --check-identical, writing into `options`; each flag given is
/// appended to `given` (for "applies to training on a dataset").
void addDatasetFlags(FlagParser &parser, TrainOptions &options, std::vector<std::string> &given);

/// With --data: kiln::Error for the flags of training on one batch (--steps, --bench, --input),
/// --val-labels without --val, --save-every without --save, and, for a model's graph (its loss is
/// known), --labels missing or given where the loss takes none.
void checkDatasetFlags(const TrainOptions &options, bool stepsGiven, bool benchGiven);

/// For an ONNX model trained with --data and --batch-size: the shape of each --data input at the
/// step's batch (--batch-size / (--accumulate x ranks)), so that a symbolic batch dim is specialised to
/// it. Empty otherwise.
std::map<std::string, Shape> datasetInputShapes(const TrainOptions &options);

/// Trains `step` on the dataset; `evaluate` validates on --val (null without --val). With
/// `group` (--data-parallel), as one of its ranks: rank 0's parameters first, then each rank
/// on its share of every batch; only rank 0 prints and writes checkpoints, and at the end (and
/// with --check-identical after every update) the ranks check that their parameters are
/// bitwise identical; the allreduce figures go with --log-every's lines and a last line. Returns the exit status; every
/// error is a kiln::Error (a loss that is not finite too).
int runDatasetTraining(runtime::TrainingStep &step, const runtime::EvaluateFn &evaluate, const TrainOptions &options,
                       distributed::DataParallelGroup *group = nullptr);

} // namespace kiln::tools
