// kiln-ddp-bench: samples/s of ResNet-18 training (kiln's nn model, BatchNorm in training mode,
// loss = mean of the output, SGD) on one global batch, either data parallel over the ranks
// mpirun started or in one process, for `make bench-ddp` (bench/results.md, "Data-parallel
// training").
//
//   mpirun -np R kiln-ddp-bench --data-parallel [--batch B] [--threads T] ...
//       each rank a split step on B / R samples; each gradient is weighted 1/R and handed to the
//       data-parallel group as soon as the backward pass has finished it (the bucketed
//       allreduce overlapping the rest of the pass, distributed/DataParallel.h), as
//       runtime::Trainer does; rank 0 prints the step time and the allreduce figures.
//   kiln-ddp-bench [--batch B] [--threads T] ...
//       one process, the whole (unsplit) step on B samples: the baseline.
//
// options: --batch B (global, default 32), --size S (image side, default 224), --threads T
// (per process; default one per core), --bench N timed updates after one warm-up (default 3).
// Prints "samples_per_s X" last.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "codegen/CompileTraining.h"
#include "core/Error.h"
#include "distributed/DataParallel.h"
#include "frontend/models/ResNet.h"
#include "runtime/ThreadPool.h"
#include "tools/ToolCommon.h"

using namespace kiln;

namespace {

const char *const kUsage = R"(usage: [mpirun -np R] kiln-ddp-bench [--data-parallel] [options]

Times ResNet-18 training updates (nn model, BatchNorm in training mode, loss = mean, SGD) on one
global batch: data parallel over mpirun's ranks, or in one process.

  --data-parallel     R ranks (mpirun), each a split step on B / R samples, gradients summed
                      by the overlapped bucketed allreduce; rank 0 prints
  --batch B           global batch (default 32)
  --size S            image height and width (default 224)
  --threads T         threads of each process's step (default: one per core)
  --bench N           timed updates after one warm-up update (default 3)
)";

struct Options {
  bool dataParallel = false, help = false;
  int64_t batch = 32, size = 224;
  int threads = 0, bench = 3;
};

Options parseOptions(int argc, char **argv) {
  Options options;
  tools::FlagParser parser;
  parser.addSwitch("--data-parallel", [&] { options.dataParallel = true; });
  parser.addSwitch("--help", [&] { options.help = true; });
  auto count = [](const std::string &flag, const std::string &value) {
    uint64_t n = tools::parseCount(flag, value, "a positive integer");
    if (n < 1 || n > (uint64_t(1) << 20))
      fail("{} expects a positive integer, got {}", flag, value);
    return static_cast<int64_t>(n);
  };
  parser.addOption("--batch",
                   [&](const std::string &flag, const std::string &value) { options.batch = count(flag, value); });
  parser.addOption("--size",
                   [&](const std::string &flag, const std::string &value) { options.size = count(flag, value); });
  parser.addOption("--threads", [&](const std::string &flag, const std::string &value) {
    options.threads = static_cast<int>(count(flag, value));
  });
  parser.addOption("--bench", [&](const std::string &flag, const std::string &value) {
    options.bench = static_cast<int>(count(flag, value));
  });
  std::vector<std::string> positional = parser.parse(argc, argv);
  if (!positional.empty())
    fail("kiln-ddp-bench takes no model (it trains ResNet-18), got '{}'", positional[0]);
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

int runBench(const Options &options) {
  std::unique_ptr<distributed::DataParallelGroup> group;
  if (options.dataParallel)
    group = std::make_unique<distributed::DataParallelGroup>();
  const int ranks = group ? group->size() : 1;
  const bool speaks = !group || group->rank() == 0;
  if (options.batch % ranks != 0)
    fail("--batch {} does not split over {} ranks", options.batch, ranks);
  const int64_t batch = options.batch / ranks;

  frontend::models::ResNet18 model;
  model.train();
  TensorType type{DType::F32, Shape{batch, 3, options.size, options.size}};
  frontend::GraphBuilder builder("resnet18_train");
  frontend::Var x = builder.input("x", type.dtype, type.shape);
  std::unique_ptr<ir::Graph> graph = builder.finish({{"logits", model(x)}});
  TrainingOptions training;
  training.buffers = builder.bufferWrites();
  training.split = group != nullptr;
  if (options.threads > 0)
    training.compile.runtime.pool = std::make_shared<runtime::ThreadPool>(options.threads);
  codegen::LossSpec loss;
  loss.kind = codegen::LossKind::Mean;

  auto start = std::chrono::steady_clock::now();
  std::vector<double> barrier{0};
  std::optional<TrainingStep> step;
  for (int turn = 0; turn < 2; ++turn) { // rank 0 compiles, then the others load from the cache
    if (speaks == (turn == 0))
      step.emplace(compile_training_step(*graph, loss, codegen::OptimizerSpec::sgd(1e-3), training));
    if (group)
      group->sum(barrier);
  }
  if (speaks)
    std::cout << fmt::format("resnet18 {}x{}: {} rank{} x {} thread{}, {} samples each, {} kernels for the {} "
                             "({:.1f} s to compile or load)\n",
                             options.size, options.size, ranks, ranks == 1 ? "" : "s",
                             step->executable().numThreads(), step->executable().numThreads() == 1 ? "" : "s", batch,
                             step->executable().numLaunches(), group ? "gradients" : "whole step", secondsSince(start))
              << std::flush;

  std::vector<Tensor> inputs{randomTensor(type, 1 + static_cast<uint64_t>(group ? group->rank() : 0))};
  auto update = [&] {
    if (!group) {
      step->run(inputs);
      return;
    }
    TrainingStep::GradientListener listener;
    const double weight = 1.0 / ranks;
    listener.ready = [&](size_t g, Tensor &gradient) {
      auto *values = static_cast<float *>(gradient.data());
      for (int64_t i = 0; i < gradient.numElements(); ++i)
        values[i] = static_cast<float>(values[i] * weight);
      group->gradientReady(g, gradient);
    };
    listener.betweenKernels = [&] { group->progress(); };
    step->computeGradients(inputs, listener);
    std::vector<Tensor> gradients = step->gradients();
    group->sumGradients(gradients);
    group->broadcastBuffers(*step);
    step->applyGradients();
  };
  if (group) {
    group->broadcastFromRank0(*step);
    group->planGradients(*step);
  }
  update(); // warm-up: arenas, thread pool, MPI's shared-memory segments
  distributed::AllreduceStats before = group ? group->allreduceStats() : distributed::AllreduceStats{};
  std::vector<double> milliseconds;
  for (int i = 0; i < options.bench; ++i) {
    start = std::chrono::steady_clock::now();
    update();
    milliseconds.push_back(secondsSince(start) * 1e3);
  }
  if (!speaks)
    return 0;
  double ms = medianOf(milliseconds);
  if (group) {
    const distributed::AllreduceStats &after = group->allreduceStats();
    double updates = static_cast<double>(after.updates - before.updates);
    double inFlight = (after.seconds - before.seconds) / updates;
    double exposed = (after.exposedSeconds - before.exposedSeconds) / updates;
    std::cout << fmt::format("allreduce: {:.1f} MB in {} buckets; {:.1f} ms in flight per update, {:.0f}% of it "
                             "overlapped the backward pass ({:.1f} ms exposed, {:.1f} ms in MPI calls during it)\n",
                             static_cast<double>(after.bytes) / 1e6, after.buckets, inFlight * 1e3,
                             inFlight > 0 ? 100 * (inFlight - exposed) / inFlight : 0.0, exposed * 1e3,
                             (after.mpiSeconds - before.mpiSeconds) / updates * 1e3);
  }
  std::cout << fmt::format("median_ms {:.1f}\n", ms);
  std::cout << fmt::format("samples_per_s {:.2f}\n", static_cast<double>(options.batch) / (ms / 1e3));
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  return tools::runTool("kiln-ddp-bench", [&] {
    Options options = parseOptions(argc, argv);
    if (options.help) {
      std::cout << kUsage;
      return 0;
    }
    return runBench(options);
  });
}
