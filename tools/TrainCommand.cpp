// kiln-run MODEL --train LOSS: load the graph, bind inputs (files or seeded random ones, the
// target or labels too), compile one training step (or prepare the reference backend), load
// a checkpoint, run and report the steps, time more with --bench, save (see TrainCommand.h).
#include "tools/TrainCommand.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <iostream>

#include "ir/Error.h"
#include "runtime/ThreadPool.h"
#include "tools/GraphLoading.h"
#include "tools/RunReport.h"

namespace kiln::tools {

const char *const kTrainUsage = R"(training: kiln-run FILE.kir|FILE.onnx --train LOSS [options]

Trains the model's float parameters (an ONNX model's initializers) with one compiled step
(forward, loss, backward and optimizer update in one executable, parameters updated in place)
and prints "step I loss L" per step, L being the loss before that step's update.

  --train LOSS            mean | sum (of the first output's elements), mse (against --labels),
                          cross-entropy (logits [N, C] against class indices [N] in --labels),
                          nll (log-probabilities [N, C] against class indices)
  --loss-output NAME      the output the loss is taken of (default: the first)
  --labels FILE.npy       the target (mse: like the output) or i64 class indices (cross-entropy,
                          nll); default: random, drawn with seed S + number of inputs (classes
                          in [0, C))
  --optimizer KIND        sgd (default) | adam | adamw, with torch.optim's defaults
  --lr LR                 learning rate (default 0.01)
  --momentum M            SGD momentum (default 0)
  --nesterov              SGD Nesterov momentum (needs --momentum)
  --weight-decay WD       SGD and Adam: L2 penalty; AdamW: decoupled decay (default 0; AdamW 0.01)
  --betas B1,B2           Adam and AdamW (default 0.9,0.999)
  --eps E                 Adam and AdamW (default 1e-8)
  --steps N               training steps (default 1)
  --input NAME=FILE       bind an input as kiln-run does; inputs not given are random (seed S + i)
  --param NAME=FILE       initial value of a parameter (default: its value in the model)
  --seed S                seed of the random inputs and labels (default 0)
  --load PATH             start from parameters, optimizer state and step count that --save wrote
  --save PATH             after the steps, write them: PATH.safetensors, or a folder of .npy files
  --reference             run the training graph on the reference evaluator
  --threads N             run compiled kernels on N threads (default: one per core)
  --bench N               after the steps, time N more (they train too) and print arena_bytes,
                          arena_lower_bound_bytes and, last, median_ms of one step
)";

namespace {

codegen::LossKind parseLossKind(const std::string &flag, const std::string &value) {
  static const std::vector<std::pair<std::string, codegen::LossKind>> kinds = {
      {"mean", codegen::LossKind::Mean},
      {"sum", codegen::LossKind::Sum},
      {"mse", codegen::LossKind::Mse},
      {"cross-entropy", codegen::LossKind::CrossEntropy},
      {"nll", codegen::LossKind::Nll},
  };
  for (const auto &[name, kind] : kinds)
    if (name == value)
      return kind;
  fail("{}: unknown loss '{}' (expected mean, sum, mse, cross-entropy or nll)", flag, value);
}

codegen::OptimizerKind parseOptimizerKind(const std::string &flag, const std::string &value) {
  if (value == "sgd")
    return codegen::OptimizerKind::Sgd;
  if (value == "adam")
    return codegen::OptimizerKind::Adam;
  if (value == "adamw")
    return codegen::OptimizerKind::AdamW;
  fail("{}: unknown optimizer '{}' (expected sgd, adam or adamw)", flag, value);
}

/// A finite number; the training graph builder checks the ranges torch checks.
double parseNumber(const std::string &flag, const std::string &value) {
  size_t used = 0;
  double number = 0;
  try {
    number = std::stod(value, &used);
  } catch (const std::exception &) {
    used = 0;
  }
  if (value.empty() || used != value.size() || !std::isfinite(number))
    fail("{} expects a number, got '{}'", flag, value);
  return number;
}

bool isLabelLoss(codegen::LossKind kind) {
  return kind == codegen::LossKind::Mse || kind == codegen::LossKind::CrossEntropy ||
         kind == codegen::LossKind::Nll;
}

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

/// The --labels file, or random ones: class indices in [0, C) where C is the output's dim 1,
/// or a target like the output.
Tensor bindLabels(const TrainOptions &options, const TensorType &type, const ir::Value *output, uint64_t seed) {
  if (!options.labels.empty()) {
    Tensor labels = readTensorFile(options.labels);
    if (labels.type() != type)
      fail("--labels: the loss expects {}, but {} holds {}", type.toString(), options.labels,
           labels.type().toString());
    if (!isFloat(type.dtype)) {
      int64_t classes = output->type().shape.at(1);
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
    int64_t classes = std::max<int64_t>(1, output->type().shape.at(1));
    for (int64_t i = 0; i < labels.numElements(); ++i)
      labels.setInt(i, labels.getInt(i) % classes);
  }
  return labels;
}

double medianOf(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  size_t n = values.size();
  return n == 0 ? 0.0 : (values[(n - 1) / 2] + values[n / 2]) / 2;
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
  options.optimizer.lr = 0.01;
  bool trainGiven = false, weightDecayGiven = false, adamFlagGiven = false, sgdFlagGiven = false;
  FlagParser parser;
  parser.addSwitch("--help", [&] { options.help = true; });
  parser.addSwitch("-h", [&] { options.help = true; });
  parser.addSwitch("--reference", [&] { options.reference = true; });
  parser.addSwitch("--nesterov", [&] {
    options.optimizer.nesterov = true;
    sgdFlagGiven = true;
  });
  parser.addOption("--train", [&](const std::string &flag, const std::string &value) {
    options.loss.kind = parseLossKind(flag, value);
    trainGiven = true;
  });
  parser.addOption("--loss-output", [&](const std::string &flag, const std::string &value) {
    options.loss.outputName = nonEmpty(flag, value);
  });
  parser.addOption("--labels", [&](const std::string &flag, const std::string &value) {
    options.labels = nonEmpty(flag, value);
  });
  parser.addOption("--optimizer", [&](const std::string &flag, const std::string &value) {
    options.optimizer.kind = parseOptimizerKind(flag, value);
  });
  parser.addOption("--lr", [&](const std::string &flag, const std::string &value) {
    options.optimizer.lr = parseNumber(flag, value);
  });
  parser.addOption("--momentum", [&](const std::string &flag, const std::string &value) {
    options.optimizer.momentum = parseNumber(flag, value);
    sgdFlagGiven = true;
  });
  parser.addOption("--weight-decay", [&](const std::string &flag, const std::string &value) {
    options.optimizer.weightDecay = parseNumber(flag, value);
    weightDecayGiven = true;
  });
  parser.addOption("--betas", [&](const std::string &flag, const std::string &value) {
    size_t comma = value.find(',');
    if (comma == std::string::npos)
      fail("{} expects B1,B2, got '{}'", flag, value);
    options.optimizer.beta1 = parseNumber(flag, value.substr(0, comma));
    options.optimizer.beta2 = parseNumber(flag, value.substr(comma + 1));
    adamFlagGiven = true;
  });
  parser.addOption("--eps", [&](const std::string &flag, const std::string &value) {
    options.optimizer.eps = parseNumber(flag, value);
    adamFlagGiven = true;
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
  std::vector<std::string> paths = parser.parse(argc, argv);
  if (options.help)
    return options;
  if (!trainGiven)
    fail("training needs --train LOSS (see --help)");
  if (paths.empty())
    fail("no model to train (usage: kiln-run FILE.onnx|FILE.kir --train LOSS [options]; see --help)");
  if (paths.size() > 1)
    fail("more than one model file: '{}' and '{}'", paths[0], paths[1]);
  if (endsWith(paths[0], ".so"))
    fail("--train needs a graph (.kir or .onnx); '{}' is a compiled model", paths[0]);
  options.path = paths[0];
  if (!options.labels.empty() && !isLabelLoss(options.loss.kind))
    fail("--labels applies to the mse, cross-entropy and nll losses, which compare the output with a target");
  if (options.loss.kind == codegen::LossKind::CrossEntropy || options.loss.kind == codegen::LossKind::Nll)
    options.loss.targetName = "labels";
  bool sgd = options.optimizer.kind == codegen::OptimizerKind::Sgd;
  if (sgd && adamFlagGiven)
    fail("--betas and --eps apply to adam and adamw, not to sgd");
  if (!sgd && sgdFlagGiven)
    fail("--momentum and --nesterov apply to sgd, not to {}",
         options.optimizer.kind == codegen::OptimizerKind::Adam ? "adam" : "adamw");
  if (options.optimizer.kind == codegen::OptimizerKind::AdamW && !weightDecayGiven)
    options.optimizer.weightDecay = 1e-2; // torch.optim.AdamW's default
  if (options.reference && options.threads > 0)
    fail("--threads applies to compiled steps; the reference evaluator runs on one thread");
  if (options.steps == 0 && options.bench == 0 && options.save.empty())
    fail("--steps 0 without --bench or --save does nothing");
  return options;
}

int runTrainCommand(const TrainOptions &options) {
  std::map<std::string, Tensor> given;
  std::unique_ptr<ir::Graph> graph = loadGraph({options.path, options.inputs, {}}, given);
  const ir::Value *output = lossOutput(*graph, options.loss);

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
  TrainingStep step = compile_training_step(*graph, options.loss, options.optimizer, training);
  double compileSeconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - compileStart).count();

  const passes::autodiff::TrainingGraph &trainingGraph = step.trainingGraph();
  if (trainingGraph.targetInput >= 0) {
    const TensorType &type = trainingGraph.graph->inputs()[static_cast<size_t>(trainingGraph.targetInput)]->type();
    inputs.push_back(bindLabels(options, type, output, options.seed + graph->inputs().size()));
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
    if (!step.isReference())
      std::cout << fmt::format("arena_bytes {}\narena_lower_bound_bytes {}\n", step.executable().arenaBytes(),
                               step.lowered().plan.lowerBoundBytes);
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

int runTrainCommand(int argc, char **argv) {
  TrainOptions options = parseTrainOptions(argc, argv);
  if (options.help) {
    std::cout << kTrainUsage;
    return 0;
  }
  return runTrainCommand(options);
}

} // namespace kiln::tools
