// Training on a dataset from the command line (see DatasetTraining.h), in stages:
//  1. flags: parsed into TrainOptions, checked against the mode and the loss;
//  2. the data: the --data arrays and the labels (under the name of the step's target input)
//     mapped as one dataset, the --val ones as another; the batch checked against the step's;
//  3. the run: runtime::Trainer with a progress bar and a line per epoch; --save at the end.
#include "tools/DatasetTraining.h"

#include <unistd.h>

#include <chrono>
#include <iostream>

#include "codegen/CompileTraining.h"
#include "core/Error.h"
#include "runtime/MappedNpy.h"
#include "tools/TrainingFlags.h"

namespace kiln::tools {

namespace {

/// A count >= 1 (and at most 2^40, beyond any dataset or run kiln takes).
int64_t parsePositive(const std::string &flag, const std::string &value) {
  uint64_t count = parseCount(flag, value, "a positive integer");
  if (count < 1 || count > (uint64_t(1) << 40))
    fail("{} expects a positive integer, got {}", flag, value);
  return static_cast<int64_t>(count);
}

/// "1:05", "1:02:03".
std::string clockTime(double seconds) {
  auto total = static_cast<int64_t>(seconds + 0.5);
  if (total >= 3600)
    return fmt::format("{}:{:02}:{:02}", total / 3600, total / 60 % 60, total % 60);
  return fmt::format("{}:{:02}", total / 60, total % 60);
}

/// Progress within an epoch: a bar redrawn in place on a terminal; elsewhere (a log) a plain
/// line at most every 30 seconds, so that a long epoch still shows it is alive.
class ProgressDisplay {
public:
  /// `shown`: false on a data-parallel rank other than 0, which shows nothing.
  explicit ProgressDisplay(bool shown) : shown_(shown), terminal_(isatty(STDOUT_FILENO) != 0) {}

  void update(const runtime::TrainerProgress &progress) {
    if (!shown_)
      return;
    double rate = static_cast<double>(progress.samples) / std::max(progress.seconds, 1e-9);
    double eta = static_cast<double>(progress.epochSamples - progress.samples) / std::max(rate, 1e-9);
    auto now = std::chrono::steady_clock::now();
    if (terminal_) {
      // Redrawn at most 10 times a second: a terminal that draws every step of a small model
      // costs more than the step.
      if (now - lastDraw_ < std::chrono::milliseconds(100) && progress.samples < progress.epochSamples)
        return;
      lastDraw_ = now;
      constexpr int64_t kWidth = 24;
      int64_t filled = kWidth * progress.samples / std::max<int64_t>(1, progress.epochSamples);
      std::cout << fmt::format("\r\033[Kepoch {}/{} [{}{}] {}/{} loss {:.4f} {:.0f} samples/s ETA {}",
                               progress.epoch + 1, progress.epochs, std::string(static_cast<size_t>(filled), '#'),
                               std::string(static_cast<size_t>(kWidth - filled), '.'), progress.samples,
                               progress.epochSamples, progress.meanLoss, rate, clockTime(eta))
                << std::flush;
      drawn_ = true;
      return;
    }
    if (now - lastLine_ < std::chrono::seconds(30))
      return;
    if (lastLine_.time_since_epoch().count() != 0)
      std::cout << fmt::format("epoch {}/{}: {}/{} samples, loss {:.6g}, {:.0f} samples/s, ETA {}\n",
                               progress.epoch + 1, progress.epochs, progress.samples, progress.epochSamples,
                               progress.meanLoss, rate, clockTime(eta))
                << std::flush;
    lastLine_ = now;
  }

  /// Clears the bar before a line of text.
  void clear() {
    if (drawn_)
      std::cout << "\r\033[K";
    drawn_ = false;
  }

  void startEpoch() { lastLine_ = std::chrono::steady_clock::now(); }

private:
  bool shown_;
  bool terminal_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point lastLine_{}, lastDraw_{};
};

std::string epochLine(const runtime::EpochReport &report, int64_t epochs) {
  std::string line = fmt::format("epoch {}/{}", report.epoch + 1, epochs);
  if (report.firstUpdate > 0)
    line += fmt::format(" (resumed at update {})", report.firstUpdate + 1);
  line += fmt::format(": loss {:.6f}", report.meanLoss);
  if (report.valLoss)
    line += fmt::format(", val loss {:.6f}", *report.valLoss);
  if (report.valAccuracy)
    line += fmt::format(", val accuracy {:.2f}%", 100 * *report.valAccuracy);
  double rate = static_cast<double>(report.samples) / std::max(report.seconds, 1e-9);
  return line + fmt::format(" ({} samples in {:.2f} s, {:.0f} samples/s)\n", report.samples, report.seconds, rate);
}

/// The dataset of `arrays` and, under the step's target input's name, `labels`.
runtime::Dataset openDataset(const runtime::TrainingStep &step, const std::vector<Binding> &arrays,
                             const std::string &labels) {
  std::vector<std::pair<std::string, std::string>> named;
  for (const Binding &array : arrays)
    named.emplace_back(array.name, array.path);
  if (!labels.empty())
    named.emplace_back(step.inputs().at(static_cast<size_t>(step.targetInput())).name, labels);
  return runtime::Dataset::open(named);
}

} // namespace

void addDatasetFlags(FlagParser &parser, TrainOptions &options, std::vector<std::string> &given) {
  auto option = [&](const char *name, std::function<void(const std::string &, const std::string &)> handler) {
    parser.addOption(name, [&given, handler](const std::string &flag, const std::string &value) {
      given.push_back(flag);
      handler(flag, value);
    });
  };
  option("--data", [&](const std::string &flag, const std::string &value) {
    options.data.push_back(parseBinding(flag, value));
  });
  option("--val", [&](const std::string &flag, const std::string &value) {
    options.val.push_back(parseBinding(flag, value));
  });
  option("--val-labels", [&](const std::string &flag, const std::string &value) {
    options.valLabels = nonEmpty(flag, value);
  });
  // Flags whose value is a positive count, each into its field.
  auto countOption = [&](const char *name, int64_t &field) {
    option(name, [&field](const std::string &flag, const std::string &value) { field = parsePositive(flag, value); });
  };
  countOption("--batch-size", options.batchSize);
  countOption("--batch-tile", options.batchTile);
  countOption("--epochs", options.epochs);
  countOption("--accumulate", options.accumulate);
  countOption("--save-every", options.saveEvery);
  countOption("--stop-after", options.stopAfter);
  countOption("--log-every", options.logEvery);
  option("--mpi-timeout", [&](const std::string &flag, const std::string &value) {
    options.mpiTimeout = static_cast<double>(parsePositive(flag, value));
  });
  parser.addSwitch("--check-identical", [&] {
    given.push_back("--check-identical");
    options.checkIdentical = true;
  });
  parser.addSwitch("--data-parallel", [&] {
    given.push_back("--data-parallel");
    options.dataParallel = true;
  });
  option("--lr-schedule", [&](const std::string &flag, const std::string &value) {
    runtime::LearningRateSchedule::parse(nonEmpty(flag, value)); // refused now, not after compiling
    options.lrSchedule = value;
  });
  parser.addSwitch("--shuffle", [&] {
    given.push_back("--shuffle");
    options.shuffle = true;
  });
  parser.addSwitch("--drop-last", [&] {
    given.push_back("--drop-last");
    options.dropLast = true;
  });
}

void checkDatasetFlags(const TrainOptions &options, bool stepsGiven, bool benchGiven) {
  if (stepsGiven)
    fail("--steps applies to training on one batch; with --data, training runs for --epochs");
  if (benchGiven)
    fail("--bench applies to training on one batch, not with --data");
  if (!options.inputs.empty())
    fail("--input applies to training on one batch; with --data, the data gives the inputs");
  if (!options.valLabels.empty() && options.val.empty())
    fail("--val-labels needs the held-out inputs: --val NAME=FILE.npy");
  if (options.saveEvery > 0 && options.save.empty())
    fail("--save-every needs --save PATH to write the checkpoints to");
  if (options.dataParallel && options.artifact)
    fail("--data-parallel does not apply to '{}': it needs a step compiled in two parts, gradients and update "
         "(train the model's graph instead)",
         options.path);
  if (options.batchTile > 0 && options.artifact)
    fail("--batch-tile applies to a model compiled here; '{}' is a compiled training step", options.path);
  if (options.mpiTimeout > 0 && !options.dataParallel)
    fail("--mpi-timeout applies to --data-parallel");
  if (options.checkIdentical && !options.dataParallel)
    fail("--check-identical applies to --data-parallel");
  if (options.dataParallel && options.reference)
    fail("--data-parallel applies to compiled steps, not --reference");
  if (options.artifact)
    return; // the loss is in the file: checked when it is loaded
  const char *loss = codegen::lossKindName(options.loss().kind);
  bool takesTarget = isLabelLoss(options.loss().kind);
  if (takesTarget && options.labels.empty())
    fail("--labels FILE.npy is needed: the {} loss compares the output with a label per sample", loss);
  if (!options.val.empty() && takesTarget && options.valLabels.empty())
    fail("--val needs --val-labels FILE.npy: the {} loss compares the output with a label per sample", loss);
}

std::map<std::string, Shape> datasetInputShapes(const TrainOptions &options) {
  std::map<std::string, Shape> shapes;
  if (!options.dataset() || options.batchSize == 0 || options.batchTile > 0 || !endsWith(options.path, ".onnx"))
    return shapes;
  int64_t accumulate = std::max<int64_t>(1, options.accumulate), parts = accumulate * options.ranks;
  if (options.batchSize % parts != 0)
    fail("--batch-size {} does not split into --accumulate {} micro-batches on each of {} rank{}", options.batchSize,
         accumulate, options.ranks, options.ranks == 1 ? "" : "s");
  for (const Binding &array : options.data) {
    Shape shape = runtime::MappedNpy::open(array.path).type().shape;
    if (shape.empty())
      fail("{}: holds a scalar, not samples along a first dimension", array.path);
    shape[0] = options.batchSize / parts;
    shapes[array.name] = shape;
  }
  return shapes;
}

int runDatasetTraining(runtime::TrainingStep &step, const runtime::EvaluateFn &evaluate, const TrainOptions &options,
                       distributed::DataParallelGroup *group) {
  // Data parallel: every rank trains and reduces, rank 0 alone speaks and saves.
  const bool speaks = group == nullptr || group->rank() == 0;
  std::ostream silenced(nullptr); // writes nothing
  std::ostream &out = speaks ? std::cout : silenced;
  const runtime::TrainingManifest &manifest = step.manifest();
  bool takesTarget = step.targetInput() >= 0;
  if (options.artifact) {
    if (takesTarget && options.labels.empty())
      fail("--labels FILE.npy is needed: '{}' was compiled with the {} loss, which compares the output with a label "
           "per sample",
           options.path, manifest.loss);
    if (!options.val.empty() && takesTarget && options.valLabels.empty())
      fail("--val needs --val-labels FILE.npy: the {} loss compares the output with a label per sample",
           manifest.loss);
  }
  if (!takesTarget && !options.valLabels.empty())
    fail("--val-labels: the {} loss takes no labels", manifest.loss);

  runtime::TrainerOptions trainer;
  trainer.epochs = options.epochs;
  trainer.accumulate = std::max<int64_t>(1, options.accumulate);
  trainer.shuffle = options.shuffle;
  trainer.seed = options.seed;
  trainer.dropLast = options.dropLast;
  trainer.schedule = runtime::LearningRateSchedule::parse(options.lrSchedule);
  trainer.saveEvery = speaks ? options.saveEvery : 0;
  trainer.savePath = speaks ? options.save : "";
  trainer.stopAfter = options.stopAfter;
  if (manifest.batchTile > 0) { // a step over any batch: --batch-size is the update's
    if (options.batchSize == 0)
      fail("--batch-size B is needed: the step takes batches of any size (tiles of {})", manifest.batchTile);
    trainer.batchSize = options.batchSize;
  }
  // --log-every's lines replace the bar (under mpirun a rank's stdout is a terminal even when
  // mpirun's output goes to a file).
  ProgressDisplay display(speaks && options.logEvery == 0);
  runtime::TrainerHooks hooks;
  hooks.onProgress = [&](const runtime::TrainerProgress &progress) {
    if (options.logEvery > 0 && progress.step % options.logEvery == 0 && speaks) {
      display.clear();
      std::string allreduce;
      if (group != nullptr) {
        const distributed::AllreduceStats &last = group->lastAllreduce();
        allreduce = fmt::format(" allreduce {:.3f} ms, {:.0f}% overlapped", last.seconds * 1e3,
                                100 * last.overlappedFraction());
      }
      std::cout << fmt::format("update {} loss {:.9g} lr {:.9g}{}\n", progress.step, progress.loss, progress.lr,
                               allreduce)
                << std::flush;
    }
    display.update(progress);
  };
  hooks.onEpoch = [&](const runtime::EpochReport &report) {
    display.clear();
    out << epochLine(report, options.epochs) << std::flush;
    display.startEpoch();
  };
  if (group != nullptr)
    group->attach(step, trainer, hooks);

  runtime::Trainer training(step, openDataset(step, options.data, options.labels), trainer, hooks);
  int64_t batch = training.microBatch(), perAccumulation = batch * trainer.ranks;
  std::string ranks = trainer.ranks > 1 ? fmt::format(" x {} ranks", trainer.ranks) : "";
  if (manifest.batchTile == 0 && options.batchSize != 0 && options.batchSize != training.batchSize())
    fail("--batch-size {}: the model takes batches of {} (its input '{}' is {}); {}", options.batchSize, batch,
         step.inputs()[0].name, step.inputs()[0].type.toString(),
         options.batchSize % perAccumulation == 0 && options.accumulate == 0
             ? fmt::format("train on {} per update with --accumulate {}", options.batchSize,
                           options.batchSize / perAccumulation)
             : fmt::format("an update holds {} x --accumulate{} samples", batch, ranks));
  if (!options.val.empty())
    training.setValidation(openDataset(step, options.val, options.valLabels), evaluate);

  std::string accumulation =
      trainer.accumulate > 1 ? fmt::format(" ({} micro-batches of {})", trainer.accumulate, batch) : "";
  std::string validation =
      options.val.empty() ? "" : fmt::format("; validation on {} samples", training.validationData()->size());
  ranks = trainer.ranks > 1 ? fmt::format(" over {} ranks", trainer.ranks) : "";
  out << fmt::format("data: {} samples, batches of {}{}{}, {} updates per epoch, {} epoch{}{}; lr {} {}{}\n",
                           training.data().size(), training.batchSize(), ranks, accumulation, training.updatesPerEpoch(),
                           options.epochs, options.epochs == 1 ? "" : "s", options.shuffle ? fmt::format(", shuffled (seed {})", options.seed) : "",
                           step.learningRate(), trainer.schedule.toString(), validation);
  if (int64_t dropped = training.droppedPerEpoch(); dropped > 0)
    out << fmt::format("note: each epoch leaves out its last {} samples, a short batch {}\n", dropped,
                             options.dropLast ? "(--drop-last)"
                                              : fmt::format("the {} loss cannot pad (it has no label to ignore)",
                                                            manifest.loss));
  if (step.stepCount() > 0 && step.stepCount() <= training.totalUpdates()) {
    int64_t perEpoch = training.updatesPerEpoch();
    out << fmt::format("resuming after update {} of {} (epoch {}, update {} of {})\n", step.stepCount(),
                             training.totalUpdates(), step.stepCount() / perEpoch + 1, step.stepCount() % perEpoch + 1,
                             perEpoch);
  }
  out << std::flush;
  display.startEpoch();
  training.run();
  if (group != nullptr) {
    uint64_t checksum = group->checkIdentical(step);
    out << fmt::format("data parallel: the parameters are bitwise identical on all {} rank{} (checksum {:016x})\n",
                       group->size(), group->size() == 1 ? "" : "s", checksum);
    if (options.checkIdentical) // the final check is one more than the updates'
      out << fmt::format("data parallel: the parameters were bitwise identical on all {} ranks after each of the {} "
                         "updates (--check-identical)\n",
                         group->size(), group->identicalChecks() - 1);
    const distributed::AllreduceStats &stats = group->allreduceStats();
    if (stats.updates > 0) {
      double updates = static_cast<double>(stats.updates);
      out << fmt::format("data parallel: allreduce of {:.1f} MB in {} bucket{} per update: {:.3f} ms in flight, "
                         "{:.0f}% of it overlapped the backward pass ({:.3f} ms exposed, {:.3f} ms in MPI calls "
                         "during it), rank 0's mean over {} updates\n",
                         static_cast<double>(stats.bytes) / 1e6, stats.buckets, stats.buckets == 1 ? "" : "s",
                         stats.seconds / updates * 1e3, 100 * stats.overlappedFraction(),
                         stats.exposedSeconds / updates * 1e3, stats.mpiSeconds / updates * 1e3, stats.updates);
    }
  }
  if (options.stopAfter > 0 && step.stepCount() == options.stopAfter) {
    display.clear();
    out << fmt::format("stopped after update {} of {} (--stop-after){}\n", step.stepCount(),
                             training.totalUpdates(), options.save.empty() ? "" : "; resume with --load " + options.save);
  }
  if (!options.save.empty() && speaks)
    std::cerr << fmt::format("kiln-run: saved the parameters, optimizer state and step count ({}) to {}\n",
                             step.stepCount(), options.save);
  return 0;
}

} // namespace kiln::tools
