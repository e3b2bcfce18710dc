// ResNet-18 trained through kiln's nn API against PyTorch: torchvision's resnet18 with the
// initial weights tests/training/export_resnet18.py exported (a .safetensors state_dict), built
// with frontend/models/ResNet.h in training mode (BatchNorm on the batch's statistics), traced, and
// trained for as many compiled SGD steps (lr 0.01, loss = out.mean()) as PyTorch's loss file
// lists, on PyTorch's batch. Every step's loss must be within 1e-3 relative of PyTorch's. The
// BatchNorm running statistics are updated in place every step (GraphBuilder::bufferWrites);
// after the steps, every BatchNorm buffer must match PyTorch's (the export's
// WEIGHTS.buffers.safetensors, beside WEIGHTS) within 1e-3 relative (+1e-5 absolute).
//
// usage: kiln_resnet18_training_check WEIGHTS.safetensors INPUT.npy LOSSES [--reference]
// Prints one line per step ("step I loss L torch T rel E") and exits 1 on any mismatch.
#include <chrono>
#include <cmath>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "codegen/CompileTraining.h"
#include "core/Error.h"
#include "frontend/models/ResNet.h"
#include "runtime/Npy.h"
#include "runtime/SafeTensors.h"
#include "tests/LossFile.h"

using namespace kiln;

namespace {

constexpr double kRelTolerance = 1e-3;

using kiln::test::readLosses;

/// torchvision's state_dict names are kiln's (frontend/models/ResNet.h registers its modules under the
/// same names, in the same order), so the mapping is the identity; it is checked, not assumed:
/// loadStateDict with strict fails on any name missing from either side or any type mismatch.
void loadTorchWeights(frontend::nn::Module &model, const std::string &path) {
  runtime::NamedTensors weights = runtime::readSafeTensors(path);
  std::map<std::string, Tensor> state(weights.begin(), weights.end());
  model.loadStateDict(state, /*strict=*/true);
}

/// WEIGHTS.safetensors -> WEIGHTS.buffers.safetensors.
std::string buffersPath(const std::string &weights) {
  const std::string suffix = ".safetensors";
  if (weights.size() < suffix.size() || weights.compare(weights.size() - suffix.size(), suffix.size(), suffix))
    fail("the weights file '{}' does not end in {}", weights, suffix);
  return weights.substr(0, weights.size() - suffix.size()) + ".buffers" + suffix;
}

/// Compares every BatchNorm buffer of the step with PyTorch's after the same steps; prints the
/// worst relative error and returns whether all match.
bool buffersMatch(const TrainingStep &step, const std::string &path) {
  runtime::NamedTensors torchBuffers = runtime::readSafeTensors(path);
  bool ok = true;
  double worst = 0.0;
  std::string worstName;
  for (const auto &[name, want] : torchBuffers) {
    const Tensor &got = step.parameter(name);
    if (got.type() != want.type())
      fail("buffer '{}': kiln's is {}, PyTorch's {}", name, got.type().toString(), want.type().toString());
    for (int64_t i = 0; i < want.numElements(); ++i) {
      double err = std::fabs(got.getDouble(i) - want.getDouble(i));
      double rel = err / std::max(std::fabs(want.getDouble(i)), 1e-2);
      if (rel > worst) {
        worst = rel;
        worstName = fmt::format("{}[{}]", name, i);
      }
      if (err > 1e-5 + kRelTolerance * std::fabs(want.getDouble(i))) {
        if (ok)
          std::cout << fmt::format("buffer {}[{}]: {:.9g}, torch {:.9g} MISMATCH\n", name, i, got.getDouble(i),
                                   want.getDouble(i));
        ok = false;
      }
    }
  }
  std::cout << fmt::format("{} BatchNorm buffers {} PyTorch's (worst relative error {:.3g} at {})\n",
                           torchBuffers.size(), ok ? "match" : "differ from", worst, worstName);
  return ok;
}

double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

} // namespace

int main(int argc, char **argv) {
  try {
    if (argc < 4 || argc > 5 || (argc == 5 && std::string(argv[4]) != "--reference")) {
      std::cerr << "usage: kiln_resnet18_training_check WEIGHTS.safetensors INPUT.npy LOSSES [--reference]\n";
      return 2;
    }
    bool reference = argc == 5;
    std::vector<double> want = readLosses(argv[3]);
    Tensor input = runtime::readNpy(argv[2]);

    frontend::models::ResNet18 model;
    loadTorchWeights(model, argv[1]);
    model.train();
    frontend::GraphBuilder builder("resnet18_train");
    frontend::Var x = builder.input("x", input.dtype(), input.shape());
    std::unique_ptr<ir::Graph> graph = builder.finish({{"logits", model(x)}});

    auto start = std::chrono::steady_clock::now();
    TrainingOptions options;
    options.reference = reference;
    options.buffers = builder.bufferWrites(); // running statistics, written back every step
    codegen::LossSpec loss;
    loss.kind = codegen::LossKind::Mean;
    codegen::OptimizerSpec sgd = codegen::OptimizerSpec::sgd(0.01);
    // Compiled in two halves, to report the memory plan of the lowered step.
    std::optional<codegen::LoweredTrainingStep> lowered;
    if (!reference)
      lowered = codegen::lowerTrainingStep(*graph, loss, sgd, options);
    TrainingStep step = lowered ? codegen::compileLoweredTrainingStep(*lowered, options)
                                : compile_training_step(*graph, loss, sgd, options);
    size_t trained = step.trainedParameters().size();
    std::cout << fmt::format("resnet18 batch {}: {} trained tensors, {} buffers, {} in {:.1f} s\n",
                             input.shape()[0], trained, options.buffers.size(),
                             reference ? "reference backend prepared" : "compiled", secondsSince(start))
              << std::flush;
    if (lowered) {
      const passes::MemoryPlan &plan = lowered->lowered.plan;
      std::cout << fmt::format("{} kernels, arena {} bytes = {:.3f} x its lower bound ({} bytes)\n",
                               step.executable().numLaunches(), plan.arenaBytes,
                               static_cast<double>(plan.arenaBytes) / static_cast<double>(plan.lowerBoundBytes),
                               plan.lowerBoundBytes);
    }

    bool ok = true;
    for (size_t i = 0; i < want.size(); ++i) {
      start = std::chrono::steady_clock::now();
      double got = step.run({input});
      double rel = std::fabs(got - want[i]) / std::max(std::fabs(want[i]), 1e-30);
      bool match = rel <= kRelTolerance;
      ok &= match;
      std::cout << fmt::format("step {} loss {:.9g} torch {:.9g} rel {:.3g}{} ({:.2f} s)\n", i + 1, got, want[i], rel,
                               match ? "" : " MISMATCH", secondsSince(start))
                << std::flush;
    }
    std::cout << (ok ? "all steps match PyTorch within 1e-3 relative\n" : "some steps differ from PyTorch\n");
    ok &= buffersMatch(step, buffersPath(argv[1]));
    return ok ? 0 : 1;
  } catch (const std::exception &e) {
    std::cerr << "kiln_resnet18_training_check: " << e.what() << "\n";
    return 1;
  }
}
