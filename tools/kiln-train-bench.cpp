// kiln-train-bench: the time of one compiled training step (forward, loss = mean of the
// output, backward, SGD update in place), as bench/bench.py compares it with PyTorch eager's
// (../shared/peers/torch_bench.py: SGD, loss = out.mean()).
//
//   kiln-train-bench resnet18 [--batch B] [--size S] [options]
//       torchvision's ResNet-18 built with kiln's nn modules (frontend/models/ResNet.h) in training
//       mode: BatchNorm normalises with the batch's statistics, as torch's model.train() does.
//       (The ONNX export of ResNet-18 folds BatchNorm into the convolutions, so training it
//       through kiln-run --train would time a different, cheaper network.)
//   kiln-train-bench MODEL.onnx|MODEL.kir [options]
//       a graph file, its parameters trained as kiln-run --train does
//
// options: --threads N (default: one per core), --bench N timed steps (default 5), --lr LR
// (default 1e-3), --seed S (random inputs and parameters), --profile TRACE.json (time every
// kernel launch of the timed steps: writes a Chrome trace and prints the top kernels).
// One untimed warm-up step runs first. Prints "median_ms X" last.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "codegen/CompileTraining.h"
#include "core/Error.h"
#include "frontend/models/ResNet.h"
#include "runtime/Profiler.h"
#include "runtime/ThreadPool.h"
#include "tools/GraphLoading.h"
#include "tools/ToolCommon.h"

using namespace kiln;

namespace {

const char *const kUsage = R"(usage: kiln-train-bench resnet18|MODEL.onnx|MODEL.kir [options]

Times one compiled training step: forward, loss = mean of the first output, backward, SGD.

  resnet18            torchvision's ResNet-18 built with kiln's nn API, BatchNorm in training mode
  --batch B           resnet18: batch size (default 8)
  --size S            resnet18: image height and width (default 224)
  --threads N         threads of the compiled step (default: one per core)
  --bench N           timed steps after one warm-up step (default 5)
  --lr LR             SGD learning rate (default 1e-3)
  --seed S            seed of the random inputs and parameters (default 0)
  --profile FILE      time every kernel launch of the timed steps: a Chrome trace and the top kernels
)";

struct BenchOptions {
  std::string model;
  int batch = 8, size = 224, threads = 0, bench = 5;
  double lr = 1e-3;
  uint64_t seed = 0;
  std::string profile;
  bool help = false;
};

BenchOptions parseOptions(int argc, char **argv) {
  BenchOptions options;
  tools::FlagParser parser;
  parser.addSwitch("--help", [&] { options.help = true; });
  parser.addSwitch("-h", [&] { options.help = true; });
  // Out of range is an error rather than clamped: a clamped batch would time another workload.
  auto count = [](int &target, int low, int high) {
    return [&target, low, high](const std::string &flag, const std::string &value) {
      uint64_t number = tools::parseCount(flag, value, "a positive integer");
      if (number < static_cast<uint64_t>(low) || number > static_cast<uint64_t>(high))
        fail("{} expects an integer in [{}, {}], got {}", flag, low, high, value);
      target = static_cast<int>(number);
    };
  };
  parser.addOption("--batch", count(options.batch, 1, 4096));
  parser.addOption("--size", count(options.size, 32, 4096));
  parser.addOption("--threads", count(options.threads, 1, 1024));
  parser.addOption("--bench", count(options.bench, 1, 1000000));
  parser.addOption("--lr", [&](const std::string &flag, const std::string &value) {
    options.lr = tools::parseTolerance(flag, value);
  });
  parser.addOption("--seed", [&](const std::string &flag, const std::string &value) {
    options.seed = tools::parseCount(flag, value, "a non-negative integer");
  });
  parser.addOption("--profile", [&](const std::string &flag, const std::string &value) {
    options.profile = tools::nonEmpty(flag, value);
  });
  std::vector<std::string> paths = parser.parse(argc, argv);
  if (options.help)
    return options;
  if (paths.size() != 1)
    fail("expected one model (resnet18, FILE.onnx or FILE.kir), got {} (see --help)", paths.size());
  options.model = paths[0];
  return options;
}

double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

double medianOf(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  size_t n = values.size();
  return n == 0 ? 0.0 : (values[(n - 1) / 2] + values[n / 2]) / 2;
}

/// The forward graph and its inputs: ResNet-18 from the nn API, or a graph file with random
/// inputs (seed S + i, as kiln-run draws them) and its parameters' own or random values.
struct Workload {
  std::shared_ptr<frontend::nn::Module> model; // kept alive beside the graph traced from it
  std::unique_ptr<ir::Graph> graph;
  std::vector<Tensor> inputs;
  ir::ParamValues params;
  /// BatchNorm's running statistics, written every step as torch's train() does.
  std::vector<passes::autodiff::BufferWrite> buffers;
};

Workload buildWorkload(const BenchOptions &options) {
  Workload workload;
  if (options.model == "resnet18") {
    auto model = std::make_shared<frontend::models::ResNet18>();
    model->train(); // BatchNorm on the batch's statistics, like torch's model.train()
    workload.model = model;
    TensorType type{DType::F32, Shape{options.batch, 3, options.size, options.size}};
    frontend::GraphBuilder builder("resnet18_train");
    frontend::Var x = builder.input("x", type.dtype, type.shape);
    workload.graph = builder.finish({{"logits", (*model)(x)}});
    workload.buffers = builder.bufferWrites();
    workload.inputs.push_back(randomTensor(type, options.seed));
    return workload;
  }
  std::map<std::string, Tensor> given;
  workload.graph = tools::loadGraph({options.model, {}, {}}, given);
  std::vector<runtime::TensorSpec> specs = tools::inputSpecs(*workload.graph);
  for (size_t i = 0; i < specs.size(); ++i) {
    tools::checkFitsInMemory(specs[i].type, "input '" + specs[i].name + "'");
    workload.inputs.push_back(randomTensor(specs[i].type, options.seed + i));
  }
  workload.params = tools::bindParams(*workload.graph, {}, options.seed, true);
  return workload;
}

int runBench(const BenchOptions &options) {
  Workload workload = buildWorkload(options);
  TrainingOptions training;
  training.compile.params = std::move(workload.params);
  training.buffers = workload.buffers;
  training.compile.runtime.profile = !options.profile.empty();
  if (options.threads > 0)
    training.compile.runtime.pool = std::make_shared<runtime::ThreadPool>(options.threads);
  codegen::LossSpec loss;
  loss.kind = codegen::LossKind::Mean;

  auto start = std::chrono::steady_clock::now();
  TrainingStep step = compile_training_step(*workload.graph, loss, codegen::OptimizerSpec::sgd(options.lr), training);
  std::cout << fmt::format("training @{}: {} trained tensors, {} threads, {} kernels ({:.2f} s to compile or load)\n",
                           workload.graph->name(), step.manifest().updates.size(), step.executable().numThreads(),
                           step.executable().numLaunches(), secondsSince(start))
            << std::flush;

  bool finite = std::isfinite(step.run(workload.inputs)); // warm-up: the arena and the thread pool
  runtime::Profiler &profiler = step.executable().profiler();
  profiler.clear();
  std::vector<double> milliseconds;
  for (int i = 0; i < options.bench; ++i) {
    start = std::chrono::steady_clock::now();
    finite &= std::isfinite(step.run(workload.inputs));
    milliseconds.push_back(secondsSince(start) * 1e3);
  }
  if (!options.profile.empty()) {
    profiler.writeChromeTrace(options.profile);
    std::cout << fmt::format("profile: {} launches over {} steps, trace written to {}\n", profiler.events().size(),
                             options.bench, options.profile);
    std::cout << profiler.formatTopKernels(15);
  }
  std::cout << fmt::format("min_ms {:.4f}\n", *std::min_element(milliseconds.begin(), milliseconds.end()));
  std::cout << fmt::format("median_ms {:.4f}\n", medianOf(milliseconds));
  if (!finite) {
    std::cerr << "kiln-train-bench: the loss is not finite (NaN or infinite)\n";
    return 1;
  }
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  return tools::runTool("kiln-train-bench", [&] {
    BenchOptions options = parseOptions(argc, argv);
    if (options.help) {
      std::cout << kUsage;
      return 0;
    }
    return runBench(options);
  });
}
