#pragma once
// runtime::Trainer: the training loop over a compiled training step (runtime/TrainingStep.h)
// and a dataset (runtime/Dataset.h): epochs of mini-batches in a seeded order, a learning rate
// per update from a schedule (runtime/LearningRateSchedule.h), the mean training loss of each
// epoch, the loss and accuracy on held-out data after it, and checkpoints.
//
// Batches. The step was compiled for a static batch of b samples (its inputs' dim 0), or over a
// symbolic batch (batch tiles: runtime/TrainingStep.h), which takes b = TrainerOptions::
// batchSize / (accumulate * ranks) and a short last batch as it is, for every loss. An update
// takes B = b * K samples: K = 1 runs the step once; K > 1 (gradient accumulation) needs a split
// step, whose gradients over K micro-batches of b are summed, each weighted by its share of the
// update's samples, before one optimizer update: the update of the whole batch (the mean of
// the loss over B samples), within rounding, without the memory of a batch of B.
//
// The last batch of an epoch may hold fewer samples than B. It is used when the step's loss
// ignores a label value (TrainingManifest::ignoreIndex: cross-entropy and nll compiled so): the
// batch is padded with repeats of its own samples labelled with that value, which add nothing
// to the loss or the gradients, so the update is the short batch's own (exactly for a model
// whose samples do not meet in the forward pass; BatchNorm's batch statistics would see the
// repeats). Otherwise it is dropped, and droppedPerEpoch() says how many samples that leaves
// out. TrainerOptions::dropLast drops it always.
//
// Where a run is. The step count (updates so far, saved in every checkpoint) fixes the epoch,
// the update within it and the learning rate; every epoch's order depends on (seed, epoch)
// alone. So a Trainer on a step loaded from a checkpoint that an earlier run saved continues
// that run exactly: same batches, same rates, same parameters as if it had never stopped.
//
// Data parallel (TrainerOptions::ranks > 1, a split step): R processes share every update of B
// samples. All of them walk the same order of updates (the same seed), and rank r trains on
// its share of each update's indices (batchOf, then shardOf: B / R samples of a full batch, in
// micro-batches of b = B / (R * accumulate)). Each weights its gradients and loss by its
// share of the whole update's samples, so that the sums over ranks, which the hooks take
// (onGradients: the gradients; sumOverRanks: the loss, the validation figures), are the mean
// over the whole update, as one process would have it. A rank whose share of a short last
// batch is empty trains on one sample with weight 0. Validation is split too: rank r
// evaluates every R-th batch, and the sums are reduced. distributed/DataParallel.h provides
// the hooks over MPI.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "runtime/Dataset.h"
#include "runtime/LearningRateSchedule.h"
#include "runtime/TrainingStep.h"

namespace kiln::runtime {

struct TrainerOptions {
  int64_t epochs = 1;
  /// Samples per update B, over all micro-batches and ranks: needed by a step over a symbolic
  /// batch; a static step's is its batch times accumulate and ranks (0, or that).
  int64_t batchSize = 0;
  /// Micro-batches per update (gradient accumulation); > 1 needs a split step.
  int64_t accumulate = 1;
  bool shuffle = false;
  uint64_t seed = 0; // of the shuffled order
  bool dropLast = false;
  LearningRateSchedule schedule;
  /// Write a checkpoint to savePath after every saveEvery updates (0: never) and at the end
  /// (when savePath is set). A .safetensors checkpoint is written beside and renamed over the
  /// last, so a run killed while saving keeps the previous one.
  int64_t saveEvery = 0;
  std::string savePath;
  /// Stop after update `stopAfter` of the run (counting from its start; 0: run to the end), and
  /// save as at the end: a time-boxed job that a later one resumes from the checkpoint. The
  /// run's length, and so its schedule, stays the epochs'.
  int64_t stopAfter = 0;
  /// Data parallel: this process is rank `rank` of `ranks` sharing each update (see above).
  /// ranks > 1 needs a split step and the onGradients and sumOverRanks hooks.
  int64_t ranks = 1;
  int64_t rank = 0;
};

/// Where a run is, after each update.
struct TrainerProgress {
  int64_t epoch = 0, epochs = 0;     // epoch from 0
  int64_t update = 0, updates = 0;   // updates done in this epoch (from 1), of the epoch's
  int64_t samples = 0, epochSamples = 0; // samples trained on in this epoch, of the epoch's
  double meanLoss = 0;               // over this epoch's samples so far
  double seconds = 0;                // since the epoch (or the resumed part of it) started
  double lr = 0;                     // of the last update
  double loss = 0;                   // of the last update (a mean over its samples)
  int64_t step = 0;                  // the step count after the last update
};

/// One epoch's figures.
struct EpochReport {
  int64_t epoch = 0;                 // from 0
  int64_t firstUpdate = 0;           // > 0 when a resumed run started inside the epoch
  int64_t samples = 0;               // trained on by this run in this epoch
  double meanLoss = 0;               // the training loss, weighted by samples
  double seconds = 0;
  std::optional<double> valLoss;     // with validation data
  std::optional<double> valAccuracy; // with validation data and a classification loss
};

/// The loss and accuracy on held-out data.
struct ValidationResult {
  double loss = 0;
  std::optional<double> accuracy; // cross-entropy and nll: the fraction of arg-max hits
  int64_t samples = 0;
};

/// A forward pass with the loss per element, over the step's parameters as they are: it takes
/// the step's inputs (forward inputs and target, in inputNames() order) and returns [the loss of
/// each element, unreduced ([b] for cross-entropy and nll, the output's shape for mse; the
/// output itself for mean and sum), the loss's output (logits)]. codegen::compileEvaluation
/// makes one.
using EvaluateFn = std::function<std::vector<Tensor>(const std::vector<Tensor> &inputs)>;

struct TrainerHooks {
  /// After every update.
  std::function<void(const TrainerProgress &)> onProgress;
  /// After every epoch (and its validation).
  std::function<void(const EpochReport &)> onEpoch;
  /// Split steps: the update's gradients (the mean over its samples), one per trained
  /// parameter, before the optimizer reads them; changes made in place are what it applies.
  std::function<void(std::vector<Tensor> &gradients)> onGradients;
  /// Split steps, optional: gradient `index` of the update, final as onGradients will see it,
  /// as soon as the backward pass of the update's last micro-batch has finished it, while the
  /// rest of that pass still runs (TrainingStep::GradientListener); onGradients follows once
  /// the pass is done. Data parallel: starts each bucket's allreduce early.
  std::function<void(size_t index, Tensor &gradient)> onGradientReady;
  /// With onGradientReady: between every two kernels of that backward pass (progress for the
  /// communication in flight).
  std::function<void()> betweenKernels;
  /// Data parallel: replaces each value by its sum over the ranks (every rank gets the same).
  std::function<void(std::vector<double> &values)> sumOverRanks;
};

class Trainer {
public:
  /// Checks `train` against the step: each of the step's inputs (the labels' one too) has an
  /// array of that name whose samples have the input's type without its dim 0, no other array
  /// is there, class labels lie in [0, classes); and the options: epochs >= 1, accumulate >= 1
  /// (> 1 on a split step), the dataset holds at least one update's samples (or one sample,
  /// when a short batch can be used), a schedule the run's length allows. kiln::Error naming
  /// the file and the input otherwise. The step must outlive the Trainer.
  Trainer(TrainingStep &step, Dataset train, TrainerOptions options, TrainerHooks hooks = {});

  /// Validation after every epoch on `data`, checked as the training data is, with `evaluate`.
  /// kiln::Error for a loss that is one value for the whole batch (`value`).
  void setValidation(Dataset data, EvaluateFn evaluate);

  const Dataset &data() const { return train_; }
  /// The validation data; null without.
  const Dataset *validationData() const { return validation_ ? &*validation_ : nullptr; }
  /// The step's batch b, the samples of one update B = b * accumulate * ranks (over all ranks).
  int64_t microBatch() const { return microBatch_; }
  int64_t batchSize() const { return microBatch_ * options_.accumulate * options_.ranks; }
  int64_t updatesPerEpoch() const { return updatesPerEpoch_; }
  int64_t totalUpdates() const { return updatesPerEpoch_ * options_.epochs; }
  /// Samples each epoch leaves out (a short last batch the loss cannot pad or the step cannot
  /// take, or dropLast).
  int64_t droppedPerEpoch() const;

  /// Trains from the step's step count to the end of the last epoch (or to stopAfter); returns
  /// the reports of the epochs it finished.
  /// kiln::Error when the step count is past the run's end (a checkpoint of a longer run), or
  /// when a loss is not finite (naming the epoch and update; the parameters are then those of
  /// the update before).
  std::vector<EpochReport> run();
  /// The loss and accuracy on the validation data now. kiln::Error without validation data.
  ValidationResult validate();

private:
  /// This rank's share of an update's indices (all of them on one process); `standIn` when the
  /// share is empty and one sample of weight 0 stands in for it.
  std::vector<int64_t> shardOf(const std::vector<int64_t> &indices, bool &standIn) const;
  /// Runs one update on `indices` (1..B samples); returns its loss (a mean over them).
  double update(const std::vector<int64_t> &indices);
  /// Gathers `indices` (1..b samples) of `data` into `inputs`; with `maskPadding`, the labels
  /// of the padding rows say "ignore" (TrainingManifest::ignoreIndex).
  void gatherBatch(const Dataset &data, const std::vector<int64_t> &indices, bool maskPadding,
                   std::vector<Tensor> &inputs) const;
  /// The indices of update `u` of an epoch with sample order `order`.
  std::vector<int64_t> batchOf(const std::vector<int64_t> &order, int64_t u) const;
  void checkDataset(const Dataset &data, const char *what) const;
  void save() const;

  TrainingStep &step_;
  Dataset train_;
  TrainerOptions options_;
  TrainerHooks hooks_;
  std::optional<Dataset> validation_;
  EvaluateFn evaluate_;
  int64_t microBatch_ = 0;
  bool anyBatch_ = false;        // the step takes a batch of any size (batch tiles)
  bool useShortBatches_ = false; // an epoch's short last batch trains (padded, or as it is)
  int64_t updatesPerEpoch_ = 0;
  double baseLr_ = 0;
  std::vector<Tensor> inputs_;      // one micro-batch, reused
  std::vector<Tensor> accumulated_; // accumulation: the gradients summed so far
};

} // namespace kiln::runtime
