#pragma once
// The flags that choose a loss and an optimizer, shared by `kiln-run MODEL --train LOSS` (which
// compiles the step just in time) and `kiln-compile MODEL --train LOSS -o STEP.so` (ahead of
// time), so that both take the same spellings, defaults (torch.optim's) and checks.
#include <string>

#include "codegen/CompileTraining.h"
#include "tools/ToolCommon.h"

namespace kiln::tools {

struct TrainingFlags {
  codegen::LossSpec loss;
  codegen::OptimizerSpec optimizer = defaultOptimizer();
  /// The flags among kTrainingFlagsUsage's that were given, in order (for "does not apply").
  std::vector<std::string> given;

  static codegen::OptimizerSpec defaultOptimizer();
};

/// Registers --loss-output, --optimizer, --lr, --momentum, --nesterov, --weight-decay, --betas
/// and --eps on `parser`, writing into `flags` (which must outlive the parse).
void addTrainingFlags(FlagParser &parser, TrainingFlags &flags);
/// After the parse: kiln::Error for flags that do not apply to the optimizer (--betas with
/// sgd, --momentum with adam); AdamW's weight decay defaults to torch's 0.01; the target input
/// of cross-entropy and nll is named "labels".
void finishTrainingFlags(TrainingFlags &flags);
/// Whether `flags` gave `flag`.
bool gaveFlag(const TrainingFlags &flags, const std::string &flag);

/// --batch-tile's check, for kiln-run --train and kiln-compile --train: kiln::Error unless
/// `graph`'s batch is symbolic (the graph was loaded keeping it).
void requireSymbolicBatch(const ir::Graph &graph);

/// --train's value: mean, sum, mse, cross-entropy or nll.
codegen::LossKind parseLossKind(const std::string &flag, const std::string &value);
/// A finite number; the training graph builder checks the ranges torch checks.
double parseNumber(const std::string &flag, const std::string &value);
/// mse, cross-entropy and nll compare the output with a target input.
bool isLabelLoss(codegen::LossKind kind);

/// The help lines of --train and the flags addTrainingFlags registers.
extern const char *const kTrainingFlagsUsage;

} // namespace kiln::tools
