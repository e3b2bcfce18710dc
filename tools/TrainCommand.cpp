// kiln-run MODEL --train LOSS and kiln-run STEP.so --train (see TrainCommand.h), in stages:
//  1. the step: compiled from the graph (or the reference backend prepared), or loaded from the
//     file with its loss, optimizer and state (--lr overrides its learning rate);
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

#include "core/Error.h"
#include "runtime/ThreadPool.h"
#include "tools/GraphLoading.h"
#include "tools/RunOptions.h"
#include "tools/RunReport.h"

namespace kiln::tools {

namespace {

const char *const kTrainUsageHead = R"(training: kiln-run FILE.kir|FILE.onnx --train LOSS [options]
          kiln-run STEP.so --train [options]

Trains the model's float parameters (an ONNX model's initializers) with one compiled step
(forward, loss, backward and optimizer update in one executable, parameters updated in place)
and prints "step I loss L" per step, L being the loss before that step's update. STEP.so, a
step that `kiln-compile MODEL --train LOSS -o STEP.so` wrote, carries its loss, optimizer,
parameters, optimizer state and step count: it trains on from them with no compiler (the
flags that choose the loss and optimizer, --param and --reference do not apply; --lr does).

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
  parser.addOption("--steps", [&](const std::string &flag, const std::string &value) {
    options.steps = parseBoundedCount(flag, value, 0, 100000000);
  });
  parser.addOption("--bench", [&](const std::string &flag, const std::string &value) {
    options.bench = parseBoundedCount(flag, value, 1, 1000000);
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
  if (options.steps == 0 && options.bench == 0 && options.save.empty())
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
};

double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

/// Compiles the graph's training step, or prepares the reference backend.
PreparedStep compileStep(const TrainOptions &options) {
  std::map<std::string, Tensor> given;
  std::unique_ptr<ir::Graph> graph = loadGraph({options.path, options.inputs, {}}, given);
  lossOutput(*graph, options.loss()); // --loss-output names an output
  TrainingOptions training;
  training.reference = options.reference;
  training.compile.params = bindParams(*graph, options.params, options.seed, true);
  if (options.threads > 0)
    training.compile.runtime.pool = std::make_shared<runtime::ThreadPool>(options.threads);
  auto start = std::chrono::steady_clock::now();
  // Compiled in two halves, to report the memory plan of the lowered step.
  std::optional<codegen::LoweredTrainingStep> lowered;
  if (!options.reference)
    lowered = codegen::lowerTrainingStep(*graph, options.loss(), options.optimizer(), training);
  PreparedStep prepared(lowered ? codegen::compileLoweredTrainingStep(*lowered, training)
                                : codegen::compileTrainingStep(*graph, options.loss(), options.optimizer(), training));
  prepared.seconds = secondsSince(start);
  prepared.what = "graph @" + graph->name();
  prepared.given = std::move(given);
  prepared.graphName = graph->name();
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
    return fmt::format("training step {}: {}, {} parameters ({} elements), from step {}, compiled ahead of time, {} "
                       "threads, {} kernels, arena {} bytes ({:.2f} s to load)\n",
                       options.path, shown.describe(), trained.size(), elements, step.stepCount(),
                       step.executable().numThreads(), step.executable().numLaunches(), step.executable().arenaBytes(),
                       prepared.seconds);
  }
  std::string engine = "reference evaluator";
  if (prepared.arenaBytes) {
    double boundRatio = static_cast<double>(*prepared.arenaBytes) /
                        static_cast<double>(std::max<int64_t>(1, *prepared.arenaLowerBoundBytes));
    engine = fmt::format("compiled, {} threads, {} kernels, arena {} bytes = {:.3f} x its lower bound",
                         step.executable().numThreads(), step.executable().numLaunches(), *prepared.arenaBytes,
                         boundRatio);
  }
  return fmt::format("training @{}: {} parameters ({} elements), {} ({:.2f} s to prepare)\n", prepared.graphName,
                     trained.size(), elements, engine, prepared.seconds);
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

int runTrainCommand(const TrainOptions &options) {
  PreparedStep prepared = options.artifact ? loadCompiledStep(options) : compileStep(options);
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
