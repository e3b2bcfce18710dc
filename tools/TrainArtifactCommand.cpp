// kiln-run STEP.so --train: training on from a step that kiln-compile --train wrote
// (runtime::TrainingArtifact): inputs and labels bound as for the graph the step was compiled
// from (the same seeds give the same random ones), a checkpoint loaded with --load, the
// learning rate overridden with --lr, then runTrainingLoop's steps, --bench and --save.
#include <chrono>
#include <iostream>

#include "codegen/TrainingAot.h"
#include "core/Error.h"
#include "runtime/ThreadPool.h"
#include "runtime/TrainingArtifact.h"
#include "tools/RunReport.h"
#include "tools/TrainCommand.h"

namespace kiln::tools {

int runArtifactTrainCommand(const TrainOptions &options) {
  runtime::ExecutableOptions loadOptions;
  if (options.threads > 0)
    loadOptions.pool = std::make_shared<runtime::ThreadPool>(options.threads);
  auto loadStart = std::chrono::steady_clock::now();
  runtime::TrainingArtifact step = runtime::TrainingArtifact::load(options.path, loadOptions);
  double loadSeconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - loadStart).count();
  const runtime::TrainingManifest &manifest = step.manifest();

  if (options.lossGiven && manifest.loss != codegen::lossKindName(options.loss().kind))
    fail("--train {}: '{}' was compiled with the {} loss (give --train alone)", codegen::lossKindName(options.loss().kind),
         options.path, manifest.loss);
  if (!options.labels.empty() && step.targetInput() < 0)
    fail("--labels: '{}' was compiled with the {} loss, which takes no target", options.path, manifest.loss);
  if (gaveFlag(options.training, "--lr"))
    step.setLearningRate(options.optimizer().lr);

  // The forward inputs as kiln-run binds them (seed S + i), then the labels (seed S + their
  // count): what `kiln-run MODEL --train` draws for the graph the step was compiled from.
  std::vector<runtime::TensorSpec> forwardSpecs = step.inputs();
  std::optional<runtime::TensorSpec> targetSpec;
  if (step.targetInput() >= 0) {
    targetSpec = forwardSpecs.at(static_cast<size_t>(step.targetInput()));
    forwardSpecs.erase(forwardSpecs.begin() + step.targetInput());
  }
  RunOptions inputOptions;
  inputOptions.inputs = options.inputs;
  inputOptions.seed = options.seed;
  std::vector<Tensor> inputs = bindInputs(forwardSpecs, inputOptions, {}, "training step '" + options.path + "'");
  if (targetSpec)
    inputs.insert(inputs.begin() + step.targetInput(),
                  bindLabels(options, targetSpec->type, manifest.classes, options.seed + forwardSpecs.size()));
  if (!options.load.empty())
    step.loadParameters(options.load);

  runtime::TrainingManifest shown = manifest; // what this run trains with: --lr included
  shown.lr = step.learningRate();
  int64_t trained = 0, elements = 0;
  for (const runtime::TrainingManifestUpdate &update : manifest.updates)
    if (!update.isState) {
      ++trained;
      elements += step.parameter(update.name).numElements();
    }
  std::cout << fmt::format("training step {}: {}, {} parameters ({} elements), from step {}, compiled ahead of "
                           "time, {} threads, {} kernels, arena {} bytes ({:.2f} s to load)\n",
                           options.path, shown.describe(), trained, elements, step.stepCount(),
                           step.executable().numThreads(), step.executable().numLaunches(),
                           step.executable().arenaBytes(), loadSeconds)
            << std::flush;

  StepDriver driver;
  driver.run = [&](const std::vector<Tensor> &stepInputs) { return step.run(stepInputs); };
  driver.stepCount = [&] { return step.stepCount(); };
  driver.save = [&](const std::string &path) { step.saveParameters(path); };
  driver.printBenchMemory = [&] { std::cout << fmt::format("arena_bytes {}\n", step.executable().arenaBytes()); };
  return runTrainingLoop(driver, inputs, options);
}

} // namespace kiln::tools
