// kiln-run MODEL --train LOSS and kiln-run STEP.so --train (see TrainCommand.h), in stages:
//  1. the step: compiled from the graph (or the reference backend prepared; without the
//     parameters --freeze and --train-only leave out; in two parts with --accumulate), or loaded
//     from the file with its loss, optimizer and state (--lr overrides its learning rate);
//     with --data, the rest is tools/DatasetTraining.cpp's;
//  2. its inputs bound as kiln-run binds a graph's (files, else random with seed S + i), then the
//     target or labels (seed S + the number of forward inputs), so that a step loaded from a file
//     draws what the graph it was compiled from draws;
//  3. a checkpoint loaded (--load), one line on the step, the steps run and reported, --bench
//     timed, --save written.
#include "tools/TrainCommand.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <iostream>
#include <optional>

#include <fnmatch.h>

#include "core/Error.h"
#include "ir/SymbolicShapes.h"
#include "runtime/ThreadPool.h"
#include "tools/DatasetTraining.h"
#include "tools/GraphLoading.h"
#include "tools/RunOptions.h"
#include "tools/RunReport.h"

namespace kiln::tools {

namespace {

const char *const kTrainUsageHead = R"(training: kiln-run FILE.kir|FILE.onnx --train LOSS [options]
          kiln-run FILE.kir|FILE.onnx --train LOSS --data NAME=FILE.npy ... --labels FILE.npy
                   --epochs E [dataset options]
          kiln-run STEP.so --train [options]

Trains the model's float parameters (an ONNX model's initializers) with one compiled step
(forward, loss, backward and optimizer update in one executable, parameters updated in place).
Without --data it trains on one batch for --steps and prints "step I loss L" per step, L being
the loss before that step's update. With --data it trains on a dataset (below). STEP.so, a
step that `kiln-compile MODEL --train LOSS -o STEP.so` wrote, carries its loss, optimizer,
parameters, optimizer state and step count: it trains on from them with no compiler (the
flags that choose the loss, the optimizer and the trained parameters, --param and --reference
do not apply; --lr does).

)";

const char *const kTrainUsageTail = R"(  --labels FILE.npy       the target (mse: like the output) or i64 class indices (cross-entropy,
                          nll); default: random, drawn with seed S + number of inputs (classes
                          in [0, C))
  --steps N               training steps (default 1)
  --input NAME=FILE       bind an input as kiln-run does; inputs not given are random (seed S + i)
  --param NAME=FILE       initial value of a parameter (default: its value in the model)
  --seed S                seed of the random inputs and labels (default 0)
  --load PATH             start from parameters, optimizer state and step count that --save wrote
  --save PATH             after the steps, write them: PATH.safetensors, or a folder of .npy files
  --reference             run the training graph on the reference evaluator
  --threads N             run compiled kernels on N threads (default: one per core)
  --bench N               after the steps, time N more (they train too) and print arena_bytes,
                          arena_lower_bound_bytes (not for STEP.so) and, last, median_ms of one step
  --freeze GLOB           do not train the parameters whose names match (repeatable; * and ?
                          match any characters, dots included: --freeze 'layer1.*'); their
                          backward is not compiled at all, and they keep their values bit for bit
  --train-only GLOB       train only the parameters whose names match (repeatable); with --freeze,
                          the matching ones less the frozen ones

dataset training (with --data):
  --data NAME=FILE.npy    the samples of model input NAME: an array whose first dimension is the
                          sample dimension and whose other dimensions are the input's without its
                          batch (repeatable, one per input); files are memory-mapped, so a
                          dataset larger than memory streams from disk
  --labels FILE.npy       the labels (cross-entropy, nll: i64 class indices [N]) or targets (mse:
                          [N, ...] like the output), one per sample
  --batch-size B          samples per update (default: the model's batch times --accumulate); the
                          model is compiled for a static batch, which must be B / --accumulate
                          (an ONNX model with a symbolic batch is specialised to it)
  --batch-tile T          an ONNX model whose batch is symbolic (and whose samples never meet: no
                          BatchNorm over the batch) compiles once, for tiles of T rows, and trains
                          batches of any size: the short last batch trains as it is, every loss
  --epochs E              passes over the data (default 1)
  --shuffle               a new order every epoch, drawn from --seed and the epoch alone
  --drop-last             drop the last batch of an epoch when it is short. Otherwise it is used
                          when the loss can ignore padding (cross-entropy and nll: it is padded
                          with repeats of its samples whose labels the loss ignores, so the
                          update is the short batch's own, except that BatchNorm's batch
                          statistics see the repeats); with mse, mean and sum it is dropped, and
                          a note says how many samples that leaves out
  --accumulate K          sum the gradients of K micro-batches of B / K (each weighted by its
                          share of the batch) before one update: the update of a batch of B
                          with the memory of B / K (the step is compiled in two parts,
                          gradients and update)
  --lr-schedule S         the learning rate of update t of T (from --lr): constant (default);
                          step:K:G, times G every K updates; cosine[:W], W updates of linear
                          warm-up then a cosine decay towards 0 at the end of the run
  --val NAME=FILE.npy     held-out samples of input NAME (repeatable), evaluated after every
  --val-labels FILE.npy   epoch: the mean loss and, for cross-entropy and nll, the accuracy
                          (arg-max of the output against the label)
  --save PATH             write a checkpoint at the end (and with --save-every K, after every K
  --save-every K          updates): PATH.safetensors (replaced whole, never half-written) or a
                          folder of .npy files
  --load PATH             resume from a checkpoint: training continues at its step count, in the
                          epoch, batch order, learning rate and optimizer state an uninterrupted
                          run would have there (the same flags and data), bit for bit; a
                          checkpoint without a step count (initial parameters) starts a run
  --stop-after N          stop after update N of the run (saving with --save, as at the end): a
                          time-boxed job that a later one resumes with --load; the run's length,
                          and so its schedule, stays --epochs's
  --seed S                also seeds the order of --shuffle
  --log-every N           print 'update I loss L lr R' after every N-th update (the update's loss,
                          a mean over its samples, before it) instead of the progress bar

data-parallel training (with --data, under mpirun; kiln built with MPI):
  mpirun -np R kiln-run MODEL --train LOSS --data ... --batch-size B --data-parallel
  --data-parallel         R processes share every update: each compiles the same step for a batch
                          of B / R (/ --accumulate), rank 0's initial parameters (or --load's)
                          are copied to all, each takes its share of every batch of the same
                          (shuffled) order, the gradients are summed across the ranks with MPI
                          all-reduces (in buckets, nonblocking), and every rank applies the same
                          update, so the parameters stay bitwise identical (checked at the end).
                          A bucket's all-reduce starts as soon as the backward pass has finished
                          its gradients and overlaps the rest of the pass; with --log-every each
                          update's line adds the time the all-reduces were in flight and how much
                          of it the backward pass covered, and the run ends with their mean.
                          BatchNorm normalizes with each rank's local batch statistics, as
                          PyTorch's DistributedDataParallel does, and its running statistics are
                          rank 0's after every update. Validation is split over the ranks and
                          summed. Only rank 0 prints and writes checkpoints. Give each rank
                          --threads so that ranks x threads fits the cores
  --mpi-timeout SECONDS   a rank waiting longer than this for the others (one that died or hangs)
                          aborts the whole job with a one-line message (default 300)
  --check-identical       compare the ranks' parameters (a checksum) after every update, not only
                          at the end; a difference stops the job, naming the update
Per epoch it prints one line, 'epoch E/N: loss L, val loss V, val accuracy A% (S samples in
T s, R samples/s)' (the mean training loss over the epoch's samples; the validation figures
with --val), and on a terminal a progress bar (samples/s, ETA) in between.
)";

const std::string &trainUsageText() {
  static const std::string text = std::string(kTrainUsageHead) + kTrainingFlagsUsage + kTrainUsageTail;
  return text;
}

} // namespace

const char *const kTrainUsage = trainUsageText().c_str();

namespace {

/// The forward output the loss is taken of.
const ir::Value *lossOutput(const ir::Graph &graph, const codegen::LossSpec &loss) {
  if (graph.outputs().empty())
    fail("graph @{} has no outputs to train on", graph.name());
  if (loss.outputName.empty())
    return graph.outputs()[0];
  std::vector<std::string> names = outputNames(graph);
  auto found = std::find(names.begin(), names.end(), loss.outputName);
  if (found == names.end())
    fail("--loss-output: unknown output '{}'; graph @{} has outputs: {}", loss.outputName, graph.name(),
         joinNames(names));
  return graph.outputs()[static_cast<size_t>(found - names.begin())];
}

double medianOf(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  size_t n = values.size();
  return n == 0 ? 0.0 : (values[(n - 1) / 2] + values[n / 2]) / 2;
}

/// argv with a bare --train (last, or followed by a flag or a compiled model) written
/// "--train=", so that the flag parser does not take the next argument as its loss.
std::vector<std::string> markBareTrain(int argc, char **argv) {
  std::vector<std::string> args(argv, argv + argc);
  for (size_t i = 1; i < args.size(); ++i)
    if (args[i] == "--train" &&
        (i + 1 == args.size() || (!args[i + 1].empty() && args[i + 1][0] == '-') || isSharedObject(args[i + 1])))
      args[i] = "--train=";
  return args;
}

/// A compiled step fixed its loss, optimizer and parameters: refuses the flags that set them.
void checkArtifactFlags(const TrainOptions &options) {
  for (const std::string &flag : options.training.given)
    if (flag != "--lr")
      fail("{} does not apply to '{}': a compiled training step carries its loss and optimizer (compile another "
           "with kiln-compile --train)",
           flag, options.path);
  if (!options.params.empty())
    fail("--param does not apply to '{}': a compiled training step carries its parameters (start from a checkpoint "
         "with --load)",
         options.path);
  if (options.reference)
    fail("--reference does not apply to '{}': a compiled training step runs its own kernels", options.path);
  if (!options.freeze.empty() || !options.trainOnly.empty())
    fail("{} does not apply to '{}': a compiled training step carries the parameters it trains (compile another "
         "with kiln-compile --train)",
         options.freeze.empty() ? "--train-only" : "--freeze", options.path);
  if (options.accumulate > 1)
    fail("--accumulate does not apply to '{}': it needs a step compiled in two parts, gradients and update "
         "(train the model's graph instead)",
         options.path);
  if (!options.val.empty())
    fail("--val does not apply to '{}': validation compiles the model's forward pass (train the model's graph "
         "instead)",
         options.path);
}

/// The --labels file, or random ones drawn with `seed`: class indices in [0, classes) for an
/// integer type, else a target of `type`.
Tensor bindLabels(const TrainOptions &options, const TensorType &type, int64_t classes, uint64_t seed) {
  if (!options.labels.empty()) {
    Tensor labels = readTensorFile(options.labels);
    if (labels.type() != type)
      fail("--labels: the loss expects {}, but {} holds {}", type.toString(), options.labels,
           labels.type().toString());
    if (!isFloat(type.dtype)) {
      for (int64_t i = 0; i < labels.numElements(); ++i)
        if (labels.getInt(i) < 0 || labels.getInt(i) >= classes)
          fail("--labels: {} holds class {} at element {}, outside [0, {})", options.labels, labels.getInt(i), i,
               classes);
    }
    return labels;
  }
  checkFitsInMemory(type, "the labels");
  Tensor labels = randomTensor(type, seed);
  if (!isFloat(type.dtype)) {
    int64_t count = std::max<int64_t>(1, classes);
    for (int64_t i = 0; i < labels.numElements(); ++i)
      labels.setInt(i, labels.getInt(i) % count);
  }
  return labels;
}

} // namespace

bool isTrainCommand(int argc, char **argv) {
  for (int i = 1; i < argc; ++i)
    if (std::strcmp(argv[i], "--train") == 0 || std::strncmp(argv[i], "--train=", 8) == 0)
      return true;
  return false;
}

TrainOptions parseTrainOptions(int argc, char **argv) {
  TrainOptions options;
  bool trainGiven = false;
  std::vector<std::string> datasetFlags; // the dataset flags given, in order
  FlagParser parser;
  parser.addSwitch("--help", [&] { options.help = true; });
  parser.addSwitch("-h", [&] { options.help = true; });
  parser.addSwitch("--reference", [&] { options.reference = true; });
  parser.addOption("--train", [&](const std::string &flag, const std::string &value) {
    trainGiven = true;
    options.lossGiven = !value.empty();
    if (options.lossGiven)
      options.training.loss.kind = parseLossKind(flag, value);
  });
  addTrainingFlags(parser, options.training);
  parser.addOption("--labels", [&](const std::string &flag, const std::string &value) {
    options.labels = nonEmpty(flag, value);
  });
  bool stepsGiven = false, benchGiven = false;
  parser.addOption("--steps", [&](const std::string &flag, const std::string &value) {
    options.steps = parseBoundedCount(flag, value, 0, 100000000);
    stepsGiven = true;
  });
  parser.addOption("--bench", [&](const std::string &flag, const std::string &value) {
    options.bench = parseBoundedCount(flag, value, 1, 1000000);
    benchGiven = true;
  });
  parser.addOption("--threads", [&](const std::string &flag, const std::string &value) {
    options.threads = parseBoundedCount(flag, value, 1, 1024);
  });
  parser.addOption("--seed", [&](const std::string &flag, const std::string &value) {
    options.seed = parseCount(flag, value, "a non-negative integer");
  });
  parser.addOption("--input", [&](const std::string &flag, const std::string &value) {
    options.inputs.push_back(parseBinding(flag, value));
  });
  parser.addOption("--param", [&](const std::string &flag, const std::string &value) {
    options.params.push_back(parseBinding(flag, value));
  });
  parser.addOption("--save", [&](const std::string &flag, const std::string &value) {
    options.save = nonEmpty(flag, value);
  });
  parser.addOption("--load", [&](const std::string &flag, const std::string &value) {
    options.load = nonEmpty(flag, value);
  });
  parser.addOption("--freeze", [&](const std::string &flag, const std::string &value) {
    options.freeze.push_back(nonEmpty(flag, value));
  });
  parser.addOption("--train-only", [&](const std::string &flag, const std::string &value) {
    options.trainOnly.push_back(nonEmpty(flag, value));
  });
  addDatasetFlags(parser, options, datasetFlags);
  std::vector<std::string> args = markBareTrain(argc, argv);
  std::vector<char *> pointers;
  for (std::string &arg : args)
    pointers.push_back(arg.data());
  std::vector<std::string> paths = parser.parse(static_cast<int>(pointers.size()), pointers.data());
  if (options.help)
    return options;
  if (!trainGiven)
    fail("training needs --train LOSS (see --help)");
  if (paths.empty())
    fail("no model to train (usage: kiln-run FILE.onnx|FILE.kir --train LOSS [options]; see --help)");
  if (paths.size() > 1)
    fail("more than one model file: '{}' and '{}'", paths[0], paths[1]);
  options.path = paths[0];
  options.artifact = isSharedObject(options.path);
  if (options.artifact) {
    checkArtifactFlags(options);
  } else {
    if (!options.lossGiven)
      fail("training graph '{}' needs a loss: --train LOSS (mean, sum, mse, cross-entropy or nll)", options.path);
    finishTrainingFlags(options.training);
    if (!options.labels.empty() && !isLabelLoss(options.loss().kind))
      fail("--labels applies to the mse, cross-entropy and nll losses, which compare the output with a target");
  }
  if (options.reference && options.threads > 0)
    fail("--threads applies to compiled steps; the reference evaluator runs on one thread");
  if (options.dataset())
    checkDatasetFlags(options, stepsGiven, benchGiven);
  else if (!datasetFlags.empty())
    fail("{} applies to training on a dataset: add --data NAME=FILE.npy (see --help)", datasetFlags[0]);
  else if (options.steps == 0 && options.bench == 0 && options.save.empty())
    fail("--steps 0 without --bench or --save does nothing");
  return options;
}

namespace {

/// A step ready to train, with what its report line says about how it was made.
struct PreparedStep {
  explicit PreparedStep(runtime::TrainingStep step) : step(std::move(step)) {}

  runtime::TrainingStep step;
  std::string what;                    // names the step in errors about its inputs
  std::map<std::string, Tensor> given; // input values the graph file holds
  std::string graphName;               // compiled here: the graph's name
  /// Compiled here (not on the reference backend): the memory plan's arena and its lower bound.
  std::optional<int64_t> arenaBytes, arenaLowerBoundBytes;
  double seconds = 0; // to compile or load
  size_t frozen = 0;  // parameters --freeze and --train-only left out
  runtime::EvaluateFn evaluate; // with --val
};

double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

/// The parameters --freeze and --train-only leave out of training: the float parameters that
/// match a --freeze glob or, with --train-only, match none of its globs. kiln::Error for a glob
/// that matches no parameter, or when no parameter is left to train.
std::vector<std::string> frozenParameters(const ir::Graph &graph, const TrainOptions &options) {
  std::vector<std::string> names, floats;
  for (const ir::Node *param : graph.params()) {
    names.push_back(param->attrString("name"));
    if (isFloat(param->output()->dtype()))
      floats.push_back(names.back());
  }
  auto matchesAny = [](const std::vector<std::string> &globs, const std::string &name) {
    for (const std::string &glob : globs)
      if (fnmatch(glob.c_str(), name.c_str(), 0) == 0)
        return true;
    return false;
  };
  for (const auto &[flag, globs] : {std::pair{"--freeze", &options.freeze}, std::pair{"--train-only", &options.trainOnly}})
    for (const std::string &glob : *globs)
      if (std::none_of(names.begin(), names.end(), [&](const std::string &name) { return matchesAny({glob}, name); }))
        fail("{} '{}' matches no parameter of graph @{} (parameters: {})", flag, glob, graph.name(), joinNames(names));
  std::vector<std::string> frozen;
  for (const std::string &name : floats)
    if (matchesAny(options.freeze, name) || (!options.trainOnly.empty() && !matchesAny(options.trainOnly, name)))
      frozen.push_back(name);
  if (!frozen.empty() && frozen.size() == floats.size())
    fail("--freeze and --train-only leave no parameter of graph @{} to train (parameters: {})", graph.name(),
         joinNames(floats));
  return frozen;
}

/// Compiles the graph's training step (split in two with --accumulate), or prepares the
/// reference backend; for dataset training with --val, the evaluation of the forward pass too.
PreparedStep compileStep(const TrainOptions &options) {
  std::map<std::string, Tensor> given;
  GraphSource source;
  source.path = options.path;
  source.inputs = options.inputs;
  source.inputShapes = datasetInputShapes(options);
  source.keepBatchSymbol = options.batchTile > 0; // one compile over any batch
  std::unique_ptr<ir::Graph> graph = loadGraph(source, given);
  if (options.batchTile > 0)
    requireSymbolicBatch(*graph);
  lossOutput(*graph, options.loss()); // --loss-output names an output
  TrainingOptions training;
  training.reference = options.reference;
  training.compile.params = bindParams(*graph, options.params, options.seed, true);
  training.frozen = frozenParameters(*graph, options);
  training.split = options.accumulate > 1 || options.dataParallel; // the gradients between the parts
  training.batchTile = options.batchTile;
  if (options.threads > 0)
    training.compile.runtime.pool = std::make_shared<runtime::ThreadPool>(options.threads);
  codegen::LossSpec loss = options.loss();
  // On a dataset, a short last batch is padded with samples whose labels the loss ignores.
  if (options.dataset() && (loss.kind == codegen::LossKind::CrossEntropy || loss.kind == codegen::LossKind::Nll))
    loss.ignoreIndex = kPaddingLabel;
  auto start = std::chrono::steady_clock::now();
  // A whole step is compiled in two halves, to report the memory plan of the lowered step.
  std::optional<codegen::LoweredTrainingStep> lowered;
  if (!options.reference && !training.split && ir::isStaticGraph(*graph))
    lowered = codegen::lowerTrainingStep(*graph, loss, options.optimizer(), training);
  PreparedStep prepared(lowered ? codegen::compileLoweredTrainingStep(*lowered, training)
                                : codegen::compileTrainingStep(*graph, loss, options.optimizer(), training));
  if (!options.val.empty())
    prepared.evaluate = codegen::compileEvaluation(*graph, options.loss(), prepared.step, training);
  prepared.seconds = secondsSince(start);
  prepared.what = "graph @" + graph->name();
  prepared.given = std::move(given);
  prepared.graphName = graph->name();
  prepared.frozen = training.frozen.size();
  if (lowered) {
    prepared.arenaBytes = lowered->lowered.plan.arenaBytes;
    prepared.arenaLowerBoundBytes = lowered->lowered.plan.lowerBoundBytes;
  }
  return prepared;
}

/// Loads a step kiln-compile --train wrote, and checks the flags against what it carries.
PreparedStep loadCompiledStep(const TrainOptions &options) {
  runtime::ExecutableOptions loadOptions;
  if (options.threads > 0)
    loadOptions.pool = std::make_shared<runtime::ThreadPool>(options.threads);
  auto start = std::chrono::steady_clock::now();
  runtime::TrainingStep step = runtime::TrainingStep::load(options.path, loadOptions);
  double seconds = secondsSince(start);
  const runtime::TrainingManifest &manifest = step.manifest();
  if (options.lossGiven && manifest.loss != codegen::lossKindName(options.loss().kind))
    fail("--train {}: '{}' was compiled with the {} loss (give --train alone)",
         codegen::lossKindName(options.loss().kind), options.path, manifest.loss);
  if (!options.labels.empty() && step.targetInput() < 0)
    fail("--labels: '{}' was compiled with the {} loss, which takes no target", options.path, manifest.loss);
  if (gaveFlag(options.training, "--lr"))
    step.setLearningRate(options.optimizer().lr);
  PreparedStep prepared(std::move(step));
  prepared.what = "training step '" + options.path + "'";
  prepared.seconds = seconds;
  return prepared;
}

/// run()'s inputs: the forward inputs as kiln-run binds them (seed S + i), then the labels
/// (seed S + their count) at the target's place.
std::vector<Tensor> bindStepInputs(const PreparedStep &prepared, const TrainOptions &options) {
  const runtime::TrainingStep &step = prepared.step;
  std::vector<runtime::TensorSpec> forward = step.inputs();
  std::optional<runtime::TensorSpec> target;
  if (step.targetInput() >= 0) {
    target = forward.at(static_cast<size_t>(step.targetInput()));
    forward.erase(forward.begin() + step.targetInput());
  }
  RunOptions inputOptions;
  inputOptions.inputs = options.inputs;
  inputOptions.seed = options.seed;
  std::vector<Tensor> inputs = bindInputs(forward, inputOptions, prepared.given, prepared.what);
  if (target)
    inputs.insert(inputs.begin() + step.targetInput(),
                  bindLabels(options, target->type, step.manifest().classes, options.seed + forward.size()));
  return inputs;
}

/// The line saying what trains: the parameters, and how the step runs.
std::string describeStep(const PreparedStep &prepared, const TrainOptions &options) {
  const runtime::TrainingStep &step = prepared.step;
  std::vector<std::string> trained = step.trainedParameters();
  int64_t elements = 0;
  for (const std::string &name : trained)
    elements += step.parameter(name).numElements();
  if (options.artifact) {
    runtime::TrainingManifest shown = step.manifest(); // what this run trains with: --lr included
    shown.lr = step.learningRate();
    std::string kernels = fmt::format("{} kernels", step.executable().numLaunches());
    if (step.isSplit())
      kernels = fmt::format("in two parts, {} kernels for the gradients, {} for the update",
                            step.executable().numLaunches(), step.updateExecutable().numLaunches());
    if (int64_t tile = step.manifest().batchTile; tile > 0)
      kernels += fmt::format(", any batch {} in tiles of {}", step.manifest().batchSymbol, tile);
    return fmt::format("training step {}: {}, {} parameters ({} elements), from step {}, compiled ahead of time, {} "
                       "threads, {}, arena {} bytes ({:.2f} s to load)\n",
                       options.path, shown.describe(), trained.size(), elements, step.stepCount(),
                       step.executable().numThreads(), kernels, step.executable().arenaBytes(), prepared.seconds);
  }
  std::string engine = "reference evaluator";
  if (prepared.arenaBytes) {
    double boundRatio = static_cast<double>(*prepared.arenaBytes) /
                        static_cast<double>(std::max<int64_t>(1, *prepared.arenaLowerBoundBytes));
    engine = fmt::format("compiled, {} threads, {} kernels, arena {} bytes = {:.3f} x its lower bound",
                         step.executable().numThreads(), step.executable().numLaunches(), *prepared.arenaBytes,
                         boundRatio);
  } else if (!step.isReference()) {
    engine = fmt::format("compiled in two parts, {} threads, {} kernels for the gradients, {} for the update",
                         step.executable().numThreads(), step.executable().numLaunches(),
                         step.updateExecutable().numLaunches());
  }
  if (int64_t tile = step.manifest().batchTile; tile > 0)
    engine += fmt::format(", any batch {} in tiles of {}", step.manifest().batchSymbol, tile);
  std::string frozen = prepared.frozen > 0 ? fmt::format(", {} frozen", prepared.frozen) : "";
  return fmt::format("training @{}: {} parameters ({} elements){}, {} ({:.2f} s to prepare)\n", prepared.graphName,
                     trained.size(), elements, frozen, engine, prepared.seconds);
}

/// The steps, --bench and --save.
int runTrainingLoop(PreparedStep &prepared, const std::vector<Tensor> &inputs, const TrainOptions &options) {
  runtime::TrainingStep &step = prepared.step;
  bool finite = true;
  for (int64_t i = 0; i < options.steps; ++i) {
    int64_t number = step.stepCount() + 1;
    float loss = step.run(inputs);
    finite &= std::isfinite(loss);
    std::cout << fmt::format("step {} loss {:.9g}\n", number, loss) << std::flush;
  }
  if (options.bench > 0) {
    if (options.steps == 0)
      step.run(inputs); // warm-up: the arena and the thread pool
    std::vector<double> milliseconds;
    for (int i = 0; i < options.bench; ++i) {
      auto start = std::chrono::steady_clock::now();
      finite &= std::isfinite(step.run(inputs));
      milliseconds.push_back(secondsSince(start) * 1e3);
    }
    if (!step.isReference())
      std::cout << fmt::format("arena_bytes {}\n", step.executable().arenaBytes());
    if (prepared.arenaLowerBoundBytes)
      std::cout << fmt::format("arena_lower_bound_bytes {}\n", *prepared.arenaLowerBoundBytes);
    std::cout << fmt::format("median_ms {:.4f}\n", medianOf(milliseconds));
  }
  if (!options.save.empty()) {
    step.saveParameters(options.save);
    std::cerr << fmt::format("kiln-run: saved the parameters, optimizer state and step count ({}) to {}\n",
                             step.stepCount(), options.save);
  }
  if (!finite) {
    std::cerr << "kiln-run: the loss is not finite (NaN or infinite): lower --lr?\n";
    return 1;
  }
  return 0;
}

} // namespace

int runTrainCommand(const TrainOptions &given) {
  // Data parallel: MPI is up before the step is compiled, for the batch of each rank.
  std::unique_ptr<distributed::DataParallelGroup> group;
  TrainOptions options = given;
  if (options.dataParallel) {
    distributed::DataParallelOptions groupOptions;
    if (options.mpiTimeout > 0)
      groupOptions.timeoutSeconds = options.mpiTimeout;
    groupOptions.checkEveryUpdate = options.checkIdentical;
    group = std::make_unique<distributed::DataParallelGroup>(groupOptions);
    options.ranks = group->size();
  }
  PreparedStep prepared = options.artifact ? loadCompiledStep(options) : compileStep(options);
  if (options.dataset()) {
    if (!options.load.empty())
      prepared.step.loadParameters(options.load);
    if (group != nullptr)
      group->broadcastFromRank0(prepared.step);
    if (group == nullptr || group->rank() == 0)
      std::cout << describeStep(prepared, options) << std::flush;
    return runDatasetTraining(prepared.step, prepared.evaluate, options, group.get());
  }
  if (int64_t tile = prepared.step.manifest().batchTile; tile > 0)
    fail("'{}' trains batches of any size, in tiles of {}: train it on a dataset (add --data NAME=FILE.npy, "
         "see --help)",
         options.path, tile);
  std::vector<Tensor> inputs = bindStepInputs(prepared, options);
  if (!options.load.empty())
    prepared.step.loadParameters(options.load);
  std::cout << describeStep(prepared, options) << std::flush;
  return runTrainingLoop(prepared, inputs, options);
}

int runTrainCommand(int argc, char **argv) {
  TrainOptions options = parseTrainOptions(argc, argv);
  if (options.help) {
    std::cout << kTrainUsage;
    return 0;
  }
  return runTrainCommand(options);
}

} // namespace kiln::tools
