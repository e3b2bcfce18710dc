// The training loop (see Trainer.h), in stages:
//  1. Construction: the step's batch, the dataset checked against the step's inputs, how many
//     updates an epoch holds and whether its short last batch can be padded.
//  2. run(): from the step count, epoch by epoch: the epoch's order, per update the learning
//     rate of its number and the update itself (one run of a whole step, or micro-batches'
//     gradients summed and applied), checkpoints, progress, then validation and the report.
//  3. validate(): the evaluation function over the held-out data in batches of b, the losses
//     of the padding rows left out.
#include "runtime/Trainer.h"

#include <chrono>
#include <cmath>
#include <filesystem>

#include "core/Error.h"
#include "core/ShapeMath.h"
#include "runtime/TensorSums.h"

namespace kiln::runtime {

namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

/// `type` (the step's input, its batch on axis 0 constant or symbolic) with `rows` there.
TensorType batchOfRows(TensorType type, int64_t rows) {
  type.shape[0] = rows;
  return type;
}

bool endsWith(const std::string &text, const std::string &suffix) {
  return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

/// Losses that are a mean over the batch's elements; `sum` sums them; `value` is one number.
bool isMeanLoss(const std::string &loss) {
  return loss == "mean" || loss == "mse" || loss == "cross-entropy" || loss == "nll";
}

bool isClassLoss(const std::string &loss) { return loss == "cross-entropy" || loss == "nll"; }

} // namespace

Trainer::Trainer(TrainingStep &step, Dataset train, TrainerOptions options, TrainerHooks hooks)
    : step_(step), train_(std::move(train)), options_(std::move(options)), hooks_(std::move(hooks)) {
  if (options_.epochs < 1)
    fail("trainer: the number of epochs must be >= 1, got {}", options_.epochs);
  if (options_.accumulate < 1)
    fail("trainer: the number of micro-batches to accumulate must be >= 1, got {}", options_.accumulate);
  if (options_.saveEvery < 0)
    fail("trainer: checkpoints every {} updates: expected a count >= 0", options_.saveEvery);
  if (options_.stopAfter < 0)
    fail("trainer: stop after update {}: expected a count >= 0", options_.stopAfter);
  if (options_.saveEvery > 0 && options_.savePath.empty())
    fail("trainer: checkpoints every {} updates need a path to save to", options_.saveEvery);
  if (!step_.isSplit() && options_.accumulate > 1)
    fail("trainer: accumulating the gradients of {} micro-batches needs a step compiled split (its gradients "
         "apart from its update)",
         options_.accumulate);
  if (!step_.isSplit() && hooks_.onGradients)
    fail("trainer: a gradient hook needs a step compiled split (its gradients apart from its update)");
  if (options_.ranks < 1 || options_.rank < 0 || options_.rank >= options_.ranks)
    fail("trainer: rank {} of {} ranks: expected 0 <= rank < ranks", options_.rank, options_.ranks);
  if (options_.ranks > 1 && (!step_.isSplit() || !hooks_.onGradients || !hooks_.sumOverRanks))
    fail("trainer: data parallel training on {} ranks needs a step compiled split and the hooks that sum the "
         "gradients and the losses over the ranks",
         options_.ranks);

  const TrainingManifest &manifest = step_.manifest();
  const int64_t parts = options_.accumulate * options_.ranks;
  anyBatch_ = manifest.batchTile > 0;
  if (anyBatch_) {
    if (options_.batchSize < 1 || options_.batchSize % parts != 0)
      fail("trainer: the step takes a batch of any size; give the samples per update (batchSize), a multiple of "
           "{} micro-batches times {} ranks, got {}",
           options_.accumulate, options_.ranks, options_.batchSize);
    microBatch_ = options_.batchSize / parts;
  }
  for (const TensorSpec &input : step_.inputs()) {
    if (input.type.rank() == 0)
      fail("trainer: the step's input '{}' is a scalar ({}): it has no batch dimension to put samples along",
           input.name, input.type.toString());
    if (anyBatch_) {
      inputs_.emplace_back(batchOfRows(input.type, microBatch_));
      continue;
    }
    int64_t rows = input.type.shape[0];
    if (microBatch_ != 0 && rows != microBatch_)
      fail("trainer: the step's inputs disagree on the batch: '{}' is {}, '{}' takes {} samples", input.name,
           input.type.toString(), step_.inputs()[0].name, microBatch_);
    microBatch_ = rows;
    inputs_.emplace_back(input.type);
  }
  if (microBatch_ < 1)
    fail("trainer: the step takes batches of {} samples", microBatch_);
  if (!anyBatch_ && options_.batchSize != 0 && options_.batchSize != batchSize())
    fail("trainer: the step was compiled for batches of {} samples, so an update takes {} ({} micro-batches, {} "
         "ranks), not {}",
         microBatch_, batchSize(), options_.accumulate, options_.ranks, options_.batchSize);
  // A step over any batch takes a short one as it is; else the loss must ignore its padding.
  bool padsShortBatches = manifest.ignoreIndex && step_.targetInput() >= 0;
  useShortBatches_ = !options_.dropLast && (anyBatch_ || padsShortBatches);
  checkDataset(train_, "training data");

  int64_t samples = train_.size(), batch = batchSize();
  updatesPerEpoch_ = samples / batch + (samples % batch != 0 && useShortBatches_ ? 1 : 0);
  if (updatesPerEpoch_ == 0)
    fail("training data: {} samples do not fill one batch of {}{}", samples, batch,
         options_.dropLast ? " (and the short batch is dropped)"
                           : " (and the loss cannot ignore padding, so the short batch is dropped)");
  options_.schedule.at(1.0, 0, totalUpdates()); // a warm-up the run cannot hold fails now
  baseLr_ = step_.learningRate();
}

void Trainer::checkDataset(const Dataset &data, const char *what) const {
  std::vector<std::string> names = step_.inputNames();
  for (const TensorSpec &input : step_.inputs()) {
    if (!data.has(input.name)) {
      std::vector<std::string> given;
      for (const DatasetArray &array : data.arrays())
        given.push_back(array.name);
      fail("{}: no array for the step's input '{}' ({}); arrays given: {}", what, input.name, input.type.toString(),
           fmt::join(given, ", "));
    }
    const DatasetArray &array = data.array(input.name);
    TensorType sample = Dataset::sampleType(array);
    Shape perSample(input.type.shape.begin() + 1, input.type.shape.end());
    if (sample.dtype != input.type.dtype || sample.shape != perSample)
      fail("{}: {} holds samples of {} (the file is {}), but the step's input '{}' takes {} per sample ({}: "
           "batches of {})",
           what, array.source, sample.toString(), array.type.toString(), input.name,
           TensorType{input.type.dtype, perSample}.toString(), input.type.toString(), microBatch_);
  }
  for (const DatasetArray &array : data.arrays())
    if (std::find(names.begin(), names.end(), array.name) == names.end())
      fail("{}: array '{}' ({}) feeds no input of the step (inputs: {})", what, array.name, array.source,
           fmt::join(names, ", "));

  int64_t classes = step_.manifest().classes;
  if (step_.targetInput() >= 0 && classes > 0 && !isFloat(step_.inputs()[step_.targetInput()].type.dtype)) {
    const DatasetArray &labels = data.array(step_.inputs()[static_cast<size_t>(step_.targetInput())].name);
    size_t bytes = dtypeSize(labels.type.dtype);
    int64_t count = labels.type.numElements();
    for (int64_t i = 0; i < count; ++i) {
      int64_t label = 0;
      if (bytes == 8)
        std::memcpy(&label, labels.data + i * 8, 8);
      else {
        int32_t narrow = 0;
        std::memcpy(&narrow, labels.data + i * 4, 4);
        label = narrow;
      }
      if (label < 0 || label >= classes)
        fail("{}: {} holds class {} at sample {}, outside [0, {})", what, labels.source, label, i, classes);
    }
  }
}

void Trainer::setValidation(Dataset data, EvaluateFn evaluate) {
  const std::string &loss = step_.manifest().loss;
  if (!isMeanLoss(loss) && loss != "sum")
    fail("trainer: validation needs a loss per sample; the {} loss is one value for the whole batch", loss);
  if (!evaluate)
    fail("trainer: validation needs an evaluation function");
  checkDataset(data, "validation data");
  if (data.size() == 0)
    fail("validation data: no samples");
  validation_ = std::move(data);
  evaluate_ = std::move(evaluate);
}

int64_t Trainer::droppedPerEpoch() const {
  return train_.size() - std::min(train_.size(), updatesPerEpoch_ * batchSize());
}

std::vector<int64_t> Trainer::batchOf(const std::vector<int64_t> &order, int64_t u) const {
  int64_t begin = u * batchSize(), end = std::min<int64_t>(begin + batchSize(), static_cast<int64_t>(order.size()));
  return std::vector<int64_t>(order.begin() + begin, order.begin() + end);
}

void Trainer::gatherBatch(const Dataset &data, const std::vector<int64_t> &indices, bool maskPadding,
                          std::vector<Tensor> &inputs) const {
  const std::vector<TensorSpec> &specs = step_.inputs();
  const auto rows = static_cast<int64_t>(indices.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    // A step over any batch takes a short batch as it is, in training; validation pads.
    if (anyBatch_ && maskPadding && inputs[i].shape()[0] != rows)
      inputs[i] = Tensor(batchOfRows(specs[i].type, rows));
    data.gather(specs[i].name, indices, inputs[i]);
  }
  if (!anyBatch_ && rows < microBatch_ && maskPadding) {
    // Only a loss that ignores the padding's labels lets a short batch through to training.
    Tensor &labels = inputs[static_cast<size_t>(step_.targetInput())];
    int64_t perRow = labels.numElements() / microBatch_;
    for (int64_t e = static_cast<int64_t>(indices.size()) * perRow; e < labels.numElements(); ++e)
      labels.setInt(e, *step_.manifest().ignoreIndex);
  }
}

std::vector<int64_t> Trainer::shardOf(const std::vector<int64_t> &indices, bool &standIn) const {
  standIn = false;
  if (options_.ranks == 1)
    return indices;
  // Contiguous and even: rank r of R takes [r n / R, (r + 1) n / R), B / R of a full batch.
  const auto n = static_cast<int64_t>(indices.size());
  int64_t begin = options_.rank * n / options_.ranks, end = (options_.rank + 1) * n / options_.ranks;
  if (begin == end) { // a short batch with fewer samples than ranks: one sample, weighted 0
    standIn = true;
    return {indices.front()};
  }
  return std::vector<int64_t>(indices.begin() + begin, indices.begin() + end);
}

double Trainer::update(const std::vector<int64_t> &all) {
  if (!step_.isSplit()) {
    gatherBatch(train_, all, true, inputs_);
    return step_.run(inputs_);
  }
  bool standIn = false;
  std::vector<int64_t> indices = shardOf(all, standIn);
  // Micro-batches of b; the last update of an epoch may hold fewer (and a short last one).
  // Each is weighted by its share of the whole update's samples (over all ranks).
  const double total = static_cast<double>(all.size());
  double loss = 0;
  std::vector<Tensor> gradients;
  if (accumulated_.empty() && options_.accumulate > 1) // a rank's share is one micro-batch otherwise
    for (const std::string &name : step_.trainedParameters())
      accumulated_.emplace_back(step_.parameter(name).type()); // a gradient has its parameter's type
  for (size_t begin = 0; begin < indices.size(); begin += static_cast<size_t>(microBatch_)) {
    size_t end = std::min(indices.size(), begin + static_cast<size_t>(microBatch_));
    std::vector<int64_t> micro(indices.begin() + static_cast<std::ptrdiff_t>(begin),
                               indices.begin() + static_cast<std::ptrdiff_t>(end));
    gatherBatch(train_, micro, true, inputs_);
    double weight = standIn ? 0.0 : static_cast<double>(micro.size()) / total; // its share of the mean
    bool first = begin == 0, last = end == indices.size();
    // Each gradient is weighted (and summed) as soon as the backward pass has finished it, so
    // that the last micro-batch's are final, and onGradientReady may send them, while the rest
    // of the pass runs.
    TrainingStep::GradientListener listener;
    listener.ready = [&](size_t g, Tensor &gradient) {
      if (last && first) {
        scaleInPlace(gradient, weight);
      } else if (last) { // the sum goes where the update reads it
        Tensor sum = accumulated_[g];
        scaleAndAdd(sum, weight, gradient);
        std::memcpy(gradient.data(), sum.data(), sum.byteSize());
      } else {
        if (first)
          std::memset(accumulated_[g].data(), 0, accumulated_[g].byteSize());
        scaleAndAdd(accumulated_[g], weight, gradient);
      }
      if (last && hooks_.onGradientReady)
        hooks_.onGradientReady(g, gradient);
    };
    if (last)
      listener.betweenKernels = hooks_.betweenKernels;
    loss += weight * step_.computeGradients(inputs_, listener);
    gradients = step_.gradients();
  }
  if (hooks_.onGradients)
    hooks_.onGradients(gradients);
  if (options_.ranks > 1) {
    std::vector<double> sums{loss};
    hooks_.sumOverRanks(sums);
    loss = sums[0];
  }
  step_.applyGradients();
  return loss;
}

std::vector<EpochReport> Trainer::run() {
  const int64_t total = totalUpdates(), perEpoch = updatesPerEpoch_, start = step_.stepCount();
  if (start > total)
    fail("trainer: the step has taken {} updates, past the end of this run: {} updates ({} per epoch)", start, total,
         perEpoch);
  if (options_.stopAfter > 0 && start >= options_.stopAfter)
    fail("trainer: the step has taken {} updates already, none left before the stop after update {}", start,
         options_.stopAfter);
  std::vector<EpochReport> reports;
  int64_t lastSaved = -1;
  for (int64_t epoch = start / perEpoch; epoch < options_.epochs; ++epoch) {
    std::vector<int64_t> order = epochOrder(train_.size(), options_.shuffle, options_.seed, epoch);
    EpochReport report;
    report.epoch = epoch;
    report.firstUpdate = epoch == start / perEpoch ? start % perEpoch : 0;
    double lossSum = 0;
    auto began = Clock::now();
    TrainerProgress progress;
    progress.epoch = epoch;
    progress.epochs = options_.epochs;
    progress.updates = perEpoch;
    progress.epochSamples = std::min(train_.size(), perEpoch * batchSize()) - report.firstUpdate * batchSize();
    for (int64_t u = report.firstUpdate; u < perEpoch; ++u) {
      double lr = options_.schedule.at(baseLr_, step_.stepCount(), total);
      step_.setLearningRate(lr);
      std::vector<int64_t> indices = batchOf(order, u);
      double loss = update(indices);
      if (!std::isfinite(loss))
        fail("trainer: the loss is not finite ({}) at epoch {}, update {} of {} (step {}); a lower learning rate?",
             loss, epoch + 1, u + 1, perEpoch, step_.stepCount());
      lossSum += loss * static_cast<double>(indices.size());
      report.samples += static_cast<int64_t>(indices.size());
      if (options_.saveEvery > 0 && step_.stepCount() % options_.saveEvery == 0) {
        save();
        lastSaved = step_.stepCount();
      }
      bool stop = step_.stepCount() == options_.stopAfter;
      if (hooks_.onProgress) {
        progress.update = u + 1;
        progress.samples = report.samples;
        progress.meanLoss = lossSum / static_cast<double>(report.samples);
        progress.seconds = secondsSince(began);
        progress.lr = lr;
        progress.loss = loss;
        progress.step = step_.stepCount();
        hooks_.onProgress(progress);
      }
      if (stop) {
        if (!options_.savePath.empty() && lastSaved != step_.stepCount())
          save();
        return reports;
      }
    }
    report.meanLoss = report.samples > 0 ? lossSum / static_cast<double>(report.samples) : 0.0;
    report.seconds = secondsSince(began);
    if (validation_) {
      ValidationResult result = validate();
      report.valLoss = result.loss;
      report.valAccuracy = result.accuracy;
    }
    if (hooks_.onEpoch)
      hooks_.onEpoch(report);
    reports.push_back(report);
  }
  if (!options_.savePath.empty() && lastSaved != step_.stepCount())
    save();
  return reports;
}

ValidationResult Trainer::validate() {
  if (!validation_)
    fail("trainer: no validation data");
  const Dataset &data = *validation_;
  const std::string &loss = step_.manifest().loss;
  std::vector<Tensor> inputs;
  for (const TensorSpec &input : step_.inputs())
    inputs.emplace_back(batchOfRows(input.type, microBatch_));
  const int64_t target = step_.targetInput();
  double lossSum = 0;
  int64_t hits = 0, elementsPerSample = 0;
  for (int64_t begin = 0, batch = 0; begin < data.size(); begin += microBatch_, ++batch) {
    if (batch % options_.ranks != options_.rank)
      continue; // another rank's
    int64_t end = std::min(data.size(), begin + microBatch_);
    std::vector<int64_t> indices(static_cast<size_t>(end - begin));
    for (int64_t i = begin; i < end; ++i)
      indices[static_cast<size_t>(i - begin)] = i;
    gatherBatch(data, indices, false, inputs); // padded with repeats, whose losses are left out below
    std::vector<Tensor> outputs = evaluate_(inputs);
    if (outputs.size() != 2 || outputs[0].numElements() % microBatch_ != 0)
      fail("trainer: the evaluation must return [losses per element over {} samples, output], got {} tensors",
           microBatch_, outputs.size());
    const Tensor &losses = outputs[0];
    elementsPerSample = losses.numElements() / microBatch_;
    for (int64_t e = 0; e < (end - begin) * elementsPerSample; ++e)
      lossSum += losses.getDouble(e);
    if (isClassLoss(loss)) {
      const Tensor &scores = outputs[1];
      int64_t classes = scores.rank() == 2 ? scores.shape()[1] : 0;
      for (int64_t row = 0; row < end - begin && classes > 0; ++row) {
        int64_t best = 0;
        for (int64_t c = 1; c < classes; ++c)
          if (scores.getDouble(row * classes + c) > scores.getDouble(row * classes + best))
            best = c;
        hits += best == inputs[static_cast<size_t>(target)].getInt(row);
      }
    }
  }
  if (options_.ranks > 1) {
    std::vector<double> sums{lossSum, static_cast<double>(hits), static_cast<double>(elementsPerSample),
                             elementsPerSample > 0 ? 1.0 : 0.0};
    hooks_.sumOverRanks(sums);
    lossSum = sums[0];
    hits = static_cast<int64_t>(sums[1]);
    elementsPerSample = sums[3] > 0 ? static_cast<int64_t>(sums[2] / sums[3]) : 0;
  }
  ValidationResult result;
  result.samples = data.size();
  double samples = static_cast<double>(data.size());
  // A mean loss: the mean over every element of every sample; a sum: the sum over one batch,
  // as the step reports it (the sum per sample, times the batch).
  result.loss = isMeanLoss(loss) ? lossSum / (samples * static_cast<double>(std::max<int64_t>(1, elementsPerSample)))
                                 : lossSum / samples * static_cast<double>(microBatch_);
  if (isClassLoss(loss))
    result.accuracy = static_cast<double>(hits) / samples;
  return result;
}

void Trainer::save() const {
  const std::string &path = options_.savePath;
  if (!endsWith(path, ".safetensors")) {
    step_.saveParameters(path);
    return;
  }
  // Written beside and renamed over the last: a run killed mid-write keeps the previous one.
  std::string partial = path + ".partial.safetensors";
  step_.saveParameters(partial);
  std::error_code error;
  std::filesystem::rename(partial, path, error);
  if (error)
    fail("trainer: cannot rename '{}' to '{}': {}", partial, path, error.message());
}

} // namespace kiln::runtime
