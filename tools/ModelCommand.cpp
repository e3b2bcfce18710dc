// kiln-run MODEL.so: a model kiln-compile wrote carries its kernels, its weights and its
// description (inputs, outputs, launch list), so it runs with no compiler and no graph. A
// training step (kiln-compile --train) updates its weights in place: it runs with --train only.
#include "core/Error.h"
#include "runtime/ThreadPool.h"
#include "runtime/TrainingStep.h"
#include "tools/RunCommands.h"
#include "tools/RunReport.h"

namespace kiln::tools {

int runModelCommand(const RunOptions &options) {
  const std::string &path = options.paths[0];
  runtime::ExecutableOptions loadOptions;
  if (options.threads > 0)
    loadOptions.pool = std::make_shared<runtime::ThreadPool>(options.threads);
  runtime::Executable model = runtime::Executable::load(path, loadOptions);
  if (runtime::isTrainingStep(path))
    fail("'{}' is a training step (kiln-compile --train): run it with --train, as kiln-run {} --train", path, path);
  std::vector<std::string> names;
  for (const runtime::TensorSpec &output : model.outputs())
    names.push_back(output.name);
  OutputRequests requests(names, options, "the model's");
  std::vector<Tensor> inputs = bindInputs(model.inputs(), options, {}, "model '" + path + "'");

  RunTarget target;
  target.description = fmt::format("compiled model {} ({} threads)", path, model.numThreads());
  target.arenaBytes = model.arenaBytes();
  target.inputTypes = inputTypesOf(model.inputs(), inputs);
  target.weightBytes = weightBytesOf(model);
  target.executable = &model;
  target.run = [&](std::vector<Tensor> &outputs) {
    if (outputs.empty())
      outputs = model.run(inputs);
    else
      model.runInto(inputs, outputs);
  };
  return runAndReport(target, requests, options);
}

} // namespace kiln::tools
