// kiln-run MODEL --train LOSS: load the graph, bind inputs (files or seeded random ones, the
// target or labels too), compile one training step (or prepare the reference backend), load
// a checkpoint, run and report the steps, time more with --bench, save (see TrainCommand.h).
// A compiled step (STEP.so) goes to TrainArtifactCommand.cpp after the same parse.
#include "tools/TrainCommand.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <iostream>

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

} // namespace

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

int runTrainingLoop(const StepDriver &step, const std::vector<Tensor> &inputs, const TrainOptions &options) {
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
      auto elapsed = std::chrono::steady_clock::now() - start;
      milliseconds.push_back(std::chrono::duration<double, std::milli>(elapsed).count());
    }
    if (step.printBenchMemory)
      step.printBenchMemory();
    std::cout << fmt::format("median_ms {:.4f}\n", medianOf(milliseconds));
  }
  if (!options.save.empty()) {
    step.save(options.save);
    std::cerr << fmt::format("kiln-run: saved the parameters, optimizer state and step count ({}) to {}\n",
                             step.stepCount(), options.save);
  }
  if (!finite) {
    std::cerr << "kiln-run: the loss is not finite (NaN or infinite): lower --lr?\n";
    return 1;
  }
  return 0;
}

int runTrainCommand(const TrainOptions &options) {
  if (options.artifact)
    return runArtifactTrainCommand(options);
  std::map<std::string, Tensor> given;
  std::unique_ptr<ir::Graph> graph = loadGraph({options.path, options.inputs, {}}, given);
  const ir::Value *output = lossOutput(*graph, options.loss());

  // Inputs as kiln-run binds them: files, else random with seed S + i.
  RunOptions inputOptions;
  inputOptions.inputs = options.inputs;
  inputOptions.seed = options.seed;
  std::vector<Tensor> inputs = bindInputs(inputSpecs(*graph), inputOptions, given, "graph @" + graph->name());

  TrainingOptions training;
  training.reference = options.reference;
  training.compile.params = bindParams(*graph, options.params, options.seed, true);
  if (options.threads > 0)
    training.compile.runtime.pool = std::make_shared<runtime::ThreadPool>(options.threads);
  auto compileStart = std::chrono::steady_clock::now();
  TrainingStep step = compile_training_step(*graph, options.loss(), options.optimizer(), training);
  double compileSeconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - compileStart).count();

  const passes::autodiff::TrainingGraph &trainingGraph = step.trainingGraph();
  if (trainingGraph.targetInput >= 0) {
    const TensorType &type = trainingGraph.graph->inputs()[static_cast<size_t>(trainingGraph.targetInput)]->type();
    int64_t classes = output->type().rank() >= 2 ? output->type().shape[1] : 0;
    inputs.push_back(bindLabels(options, type, classes, options.seed + graph->inputs().size()));
  }
  if (!options.load.empty())
    step.loadParameters(options.load);

  int64_t trained = 0, elements = 0;
  for (const passes::autodiff::ParamUpdate &update : step.updates())
    if (!update.isState) {
      ++trained;
      elements += step.parameter(update.name).numElements();
    }
  std::string engine = "reference evaluator";
  if (!step.isReference()) {
    const passes::MemoryPlan &plan = step.lowered().plan;
    double boundRatio =
        static_cast<double>(plan.arenaBytes) / static_cast<double>(std::max<int64_t>(1, plan.lowerBoundBytes));
    engine = fmt::format("compiled, {} threads, {} kernels, arena {} bytes = {:.3f} x its lower bound",
                         step.executable().numThreads(), step.executable().numLaunches(), plan.arenaBytes, boundRatio);
  }
  std::cout << fmt::format("training @{}: {} parameters ({} elements), {} ({:.2f} s to prepare)\n", graph->name(),
                           trained, elements, engine, compileSeconds)
            << std::flush;

  StepDriver driver;
  driver.run = [&](const std::vector<Tensor> &stepInputs) { return step.run(stepInputs); };
  driver.stepCount = [&] { return step.stepCount(); };
  driver.save = [&](const std::string &path) { step.saveParameters(path); };
  if (!step.isReference())
    driver.printBenchMemory = [&] {
      std::cout << fmt::format("arena_bytes {}\narena_lower_bound_bytes {}\n", step.executable().arenaBytes(),
                               step.lowered().plan.lowerBoundBytes);
    };
  return runTrainingLoop(driver, inputs, options);
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
