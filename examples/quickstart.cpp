// kiln quickstart: the first program to read.
//
// It builds two models with kiln's nn modules, exactly as in PyTorch: the seed MLP
// 1024 -> 512 -> 256 -> 10 with ReLU (batch 1024) and torchvision's ResNet-18 (batch 1,
// 3x224x224, frontend/models/ResNet.h), both in eval mode. Each is traced into an IR graph (the MLP's
// is printed, large weights elided), compiled to native code (codegen::compile: passes, fused
// kernels, one memory arena, the system C++ compiler, a disk cache), checked against the
// reference evaluator on the same random input, and timed. `make run` builds and runs it.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "codegen/CompileModel.h"
#include "codegen/CxxCompiler.h"
#include "core/Error.h"
#include "frontend/models/ResNet.h"
#include "frontend/Frontend.h"
#include "ir/Evaluator.h"
#include "ir/Printer.h"

using namespace kiln;
using namespace kiln::frontend;

namespace {

constexpr double kRelTolerance = 1e-4, kAbsTolerance = 1e-5;
constexpr int kTimedRuns = 20;

double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

std::string formatBytes(int64_t bytes) {
  if (bytes >= (int64_t(1) << 20))
    return fmt::format("{:.1f} MiB", double(bytes) / double(int64_t(1) << 20));
  if (bytes >= 1024)
    return fmt::format("{:.1f} KiB", double(bytes) / 1024.0);
  return fmt::format("{} B", bytes);
}

/// Compiles `graph`, checks it against the reference evaluator on `input` and times it.
/// Returns whether the compiled output matched.
bool compileCheckAndTime(const std::string &name, const ir::Graph &graph, const Tensor &input) {
  std::cout << fmt::format("== {} ==\n", name);

  auto start = std::chrono::steady_clock::now();
  Tensor want = ir::evaluate(graph, {input})[0];
  double referenceSeconds = secondsSince(start);

  // The compiler counters tell whether this compile ran the C++ compiler or found the shared
  // object in the disk cache (a later `make run` only loads it).
  codegen::CompilerCounters before = codegen::compilerCounters();
  start = std::chrono::steady_clock::now();
  runtime::Executable executable = codegen::compile(graph);
  double compileSeconds = secondsSince(start);
  codegen::CompilerCounters after = codegen::compilerCounters();
  bool cached = after.compiles == before.compiles && after.cacheHits > before.cacheHits;

  Tensor got = executable.run({input})[0];
  Comparison comparison = compareTensors(got, want, kRelTolerance, kAbsTolerance);

  // One untimed run warms the arena and the thread pool; then the median of kTimedRuns.
  executable.run({input});
  std::vector<double> runSeconds;
  for (int run = 0; run < kTimedRuns; ++run) {
    start = std::chrono::steady_clock::now();
    executable.run({input});
    runSeconds.push_back(secondsSince(start));
  }
  std::sort(runSeconds.begin(), runSeconds.end());
  double median = (runSeconds[(kTimedRuns - 1) / 2] + runSeconds[kTimedRuns / 2]) / 2;

  int64_t weightBytes = 0;
  for (const runtime::TensorSpec &weight : executable.weights())
    weightBytes += static_cast<int64_t>(weight.type.byteSize());

  double sumAbs = 0;
  for (int64_t i = 0; i < want.numElements(); ++i)
    sumAbs += std::fabs(want.getDouble(i));
  std::cout << fmt::format("  output             {}, mean |logit| {:.4g}\n", got.type().toString(),
                           sumAbs / double(std::max<int64_t>(1, want.numElements())));
  std::cout << fmt::format("  kernels            {}\n", executable.numLaunches());
  std::cout << fmt::format("  arena              {}\n", formatBytes(executable.arenaBytes()));
  std::cout << fmt::format("  weights            {} in {} tensors\n", formatBytes(weightBytes),
                           executable.weights().size());
  std::cout << fmt::format("  compile            {:.2f} s ({})\n", compileSeconds,
                           cached ? "cached: loaded from the disk cache" : "cold: ran the C++ compiler");
  std::cout << fmt::format("  reference eval     {:.3f} s\n", referenceSeconds);
  std::cout << fmt::format("  compiled run       {:.3f} ms median of {} runs on {} threads ({:.1f}x the reference)\n",
                           median * 1e3, kTimedRuns, executable.numThreads(), referenceSeconds / median);
  std::cout << fmt::format("  vs reference       {} (|compiled - reference| <= {:g} + {:g} * |reference|): "
                           "max abs error {:.3g}, max rel error {:.3g}\n",
                           comparison.ok ? "match" : "MISMATCH", kAbsTolerance, kRelTolerance,
                           comparison.maxAbsError, comparison.maxRelError);
  if (comparison.worstIndex >= 0)
    std::cout << fmt::format("  worst element      #{}: compiled {:.8g}, reference {:.8g}\n", comparison.worstIndex,
                             comparison.worstGot, comparison.worstWant);
  if (!comparison.ok)
    std::cout << "  " << comparison.message << "\n";
  std::cout << "\n";
  return comparison.ok;
}

/// Fresh batch-norm layers normalise with mean 0 and variance 1, which makes them the identity;
/// random running statistics and affine parameters make the check exercise eval-mode batch norm.
/// Scales around 2 offset the shrinking of PyTorch's default conv init (std 1/sqrt(3 fanIn))
/// and ReLU, so activations - and the logits the check compares - stay near unit size.
void randomizeBatchNorms(nn::Module &model) {
  std::map<std::string, Tensor> state;
  for (auto &[name, value] : model.stateDict()) {
    auto endsWith = [&name = name](const std::string &suffix) {
      return name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
    };
    bool isBatchNorm = name.find(".bn") != std::string::npos || name.rfind("bn", 0) == 0 ||
                       name.find("downsample.1.") != std::string::npos;
    if (!isBatchNorm)
      continue;
    if (endsWith("running_mean") || endsWith("bias"))
      state[name] = nn::uniformTensor(value.type(), -0.1, 0.1);
    else if (endsWith("running_var"))
      state[name] = nn::uniformTensor(value.type(), 0.5, 1.5);
    else if (endsWith("weight"))
      state[name] = nn::uniformTensor(value.type(), 1.5, 2.5);
  }
  model.loadStateDict(state, /*strict=*/false);
}

} // namespace

int main() {
  try {
    bool allMatch = true;

    // 1. The seed MLP, as torch.nn.Sequential(Linear, ReLU, ...). Weights get PyTorch's default
    //    initialisation from a seeded generator, so every run prints the same numbers.
    {
      constexpr int64_t kBatch = 1024;
      nn::manualSeed(0);
      nn::Sequential model{std::make_shared<nn::Linear>(1024, 512), std::make_shared<nn::ReLU>(),
                           std::make_shared<nn::Linear>(512, 256), std::make_shared<nn::ReLU>(),
                           std::make_shared<nn::Linear>(256, 10)};
      model.eval();

      // Tracing: calling the model on a symbolic input records its ops; parameters become
      // named `param` nodes ("0.weight", ...) carrying their values.
      GraphBuilder builder("mlp");
      Var x = builder.input("x", DType::F32, {kBatch, 1024});
      std::unique_ptr<ir::Graph> graph = builder.finish({{"logits", model(x)}});

      // The IR, as text (.kir; kiln-run and kiln-dump read it back).
      std::cout << ir::printGraph(*graph) << "\n";
      std::cout << fmt::format("MLP parameters: {}\n\n", model.numParameters());
      allMatch &= compileCheckAndTime(fmt::format("MLP 1024-512-256-10, batch {}", kBatch), *graph,
                                      randomTensor(x.type(), /*seed=*/0));
    }

    // 2. ResNet-18, torchvision's architecture, in eval mode (batch norm uses running stats).
    {
      nn::manualSeed(0);
      frontend::models::ResNet18 model;
      randomizeBatchNorms(model);
      model.eval();
      GraphBuilder builder("resnet18");
      Var x = builder.input("x", DType::F32, {1, 3, 224, 224});
      std::unique_ptr<ir::Graph> graph = builder.finish({{"logits", model(x)}});
      std::cout << fmt::format("ResNet-18 parameters: {} ({} graph nodes)\n\n", model.numParameters(),
                               graph->numNodes());
      allMatch &= compileCheckAndTime("ResNet-18, batch 1, 3x224x224", *graph, randomTensor(x.type(), /*seed=*/0));
    }

    if (!allMatch) {
      std::cerr << "quickstart: a compiled model differs from the reference evaluator\n";
      return 1;
    }
    return 0;
  } catch (const std::exception &e) {
    std::cerr << "quickstart: " << e.what() << "\n";
    return 1;
  }
}
