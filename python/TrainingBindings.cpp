// kiln.compile_training_step and kiln.TrainingStep: a compiled training step
// (runtime/TrainingStep.h, codegen/CompileTraining.h) from Python, and kiln._kiln._train, the
// C++ Trainer's loop (runtime/Trainer.h) over numpy arrays or .npy files. Only conversions live
// here: python/kiln/training.py spells the losses and optimizers as Python users expect and
// draws the progress bar.
//
// A step updates its tensors in place on every run, so it must not run on two threads at once:
// each step holds a mutex that step(), the loop and every read or write of its tensors take, so
// that Python threads sharing a step wait for each other rather than race.
#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <pybind11/functional.h>
#include <pybind11/stl.h>

#include "codegen/CompileTraining.h"
#include "distributed/DataParallel.h"
#include "python/GraphValue.h"
#include "python/NumpyArrays.h"
#include "python/Session.h"
#include "runtime/Trainer.h"

namespace kiln::python {

using namespace pybind11::literals;

namespace {

/// kiln.TrainingStep: the step and what it was compiled from (the forward graph and loss, for
/// the evaluation pass the loop validates with).
struct PyTrainingStep {
  std::unique_ptr<runtime::TrainingStep> step;
  std::shared_ptr<const ir::Graph> forward;
  codegen::LossSpec loss;
  codegen::TrainingOptions options;
  runtime::EvaluateFn evaluate; // compiled on first use
  std::mutex mutex;
};
using StepRef = std::shared_ptr<PyTrainingStep>;

/// The loss kinds by the names kiln-run --train and Python's both use ("cross_entropy" too).
codegen::LossKind lossKindOf(std::string name) {
  for (char &c : name)
    if (c == '_')
      c = '-';
  for (codegen::LossKind kind : {codegen::LossKind::Value, codegen::LossKind::Mean, codegen::LossKind::Sum,
                                 codegen::LossKind::Mse, codegen::LossKind::CrossEntropy, codegen::LossKind::Nll})
    if (name == codegen::lossKindName(kind))
      return kind;
  failArgument(ArgumentError::Kind::Value,
               "unknown loss '{}': one of 'mean', 'sum', 'mse', 'cross_entropy', 'nll', 'value'", name);
}

/// kiln.optim.SGD / Adam / AdamW (python/kiln/optim.py) as the compiler's spec: read by
/// attribute, so that any object with those fields works.
codegen::OptimizerSpec optimizerOf(const py::object &optimizer) {
  if (!py::hasattr(optimizer, "kind"))
    throw py::type_error("optimizer must be kiln.optim.SGD, Adam or AdamW, got " +
                         std::string(py::str(py::type::handle_of(optimizer).attr("__name__"))));
  std::string kind = py::cast<std::string>(optimizer.attr("kind"));
  codegen::OptimizerSpec spec;
  auto number = [&](const char *name, double fallback) {
    return py::hasattr(optimizer, name) ? py::cast<double>(optimizer.attr(name)) : fallback;
  };
  if (kind == "sgd")
    spec = codegen::OptimizerSpec::sgd(number("lr", 1e-3), number("momentum", 0), number("nesterov", 0) != 0,
                                       number("weight_decay", 0), number("dampening", 0));
  else if (kind == "adam" || kind == "adamw")
    spec = (kind == "adam" ? codegen::OptimizerSpec::adam : codegen::OptimizerSpec::adamw)(
        number("lr", 1e-3), number("beta1", 0.9), number("beta2", 0.999), number("eps", 1e-8),
        number("weight_decay", kind == "adam" ? 0.0 : 1e-2));
  else
    failArgument(ArgumentError::Kind::Value, "unknown optimizer kind '{}': 'sgd', 'adam' or 'adamw'", kind);
  return spec;
}

std::vector<std::string> namesOf(const py::object &names, const char *what) {
  if (names.is_none())
    return {};
  if (py::isinstance<py::str>(names))
    failArgument(ArgumentError::Kind::Type, "{} is a list of parameter names, got one str", what);
  return py::cast<std::vector<std::string>>(names);
}

StepRef compileStep(const PyGraph &graph, const std::string &loss, const py::object &optimizer,
                    const py::object &output, const std::string &targetName, std::optional<int64_t> ignoreIndex,
                    const py::object &params, const py::object &frozen, const py::object &buffers, bool split,
                    bool reference, int64_t batchTile, std::optional<int> threads, const py::object &cacheDir) {
  auto result = std::make_shared<PyTrainingStep>();
  result->forward = graph.graph;
  result->loss = codegen::LossSpec(lossKindOf(loss));
  if (py::isinstance<py::str>(output))
    result->loss.outputName = py::cast<std::string>(output);
  else if (!output.is_none())
    result->loss.output = py::cast<size_t>(output);
  result->loss.targetName = targetName;
  result->loss.ignoreIndex = ignoreIndex;
  codegen::OptimizerSpec spec = optimizerOf(optimizer);

  codegen::TrainingOptions &options = result->options;
  options.compile = compileOptions(sessionOptions(threads, cacheDir));
  options.params = namesOf(params, "params");
  options.frozen = namesOf(frozen, "frozen");
  options.buffers = graph.bufferWrites;
  if (!buffers.is_none())
    for (auto [outputName, param] : py::cast<std::vector<std::pair<std::string, std::string>>>(buffers))
      options.buffers.push_back({outputName, param});
  options.split = split;
  options.reference = reference;
  options.batchTile = batchTile;
  py::gil_scoped_release release;
  result->step = std::make_unique<runtime::TrainingStep>(
      codegen::compileTrainingStep(*result->forward, result->loss, spec, options));
  return result;
}

/// The step's inputs from {name: array}: every input, each borrowed as Session.run borrows.
std::vector<Tensor> stepInputs(const runtime::TrainingStep &step, const py::dict &feeds, bool copy,
                               std::vector<py::object> &keepAlive) {
  const std::vector<runtime::TensorSpec> &specs = step.inputs();
  std::vector<Tensor> inputs(specs.size());
  for (auto [key, value] : feeds) {
    std::string name = py::cast<std::string>(key);
    size_t index = 0;
    while (index < specs.size() && specs[index].name != name)
      ++index;
    if (index == specs.size()) {
      std::string known;
      for (const runtime::TensorSpec &spec : specs)
        known += (known.empty() ? "'" : ", '") + spec.name + "'";
      failArgument(ArgumentError::Kind::Value, "unknown input '{}'; the training step's inputs are {}", name, known);
    }
    inputs[index] = borrowInput(specs[index], value, copy, keepAlive);
  }
  for (size_t i = 0; i < specs.size(); ++i)
    if (!inputs[i].defined())
      failArgument(ArgumentError::Kind::Value, "missing input '{}' ({})", specs[i].name, specs[i].type.toString());
  return inputs;
}

float runStep(const StepRef &self, const py::dict &feeds, bool copy) {
  std::vector<py::object> keepAlive;
  std::vector<Tensor> inputs = stepInputs(*self->step, feeds, copy, keepAlive);
  py::gil_scoped_release release;
  std::lock_guard<std::mutex> lock(self->mutex);
  return self->step->run(inputs);
}

/// The tensor of parameter `name`; a ValueError (an unknown name is the caller's mistake) with
/// the step's message, which names the parameters there are.
const Tensor &parameterOf(const PyTrainingStep &self, const std::string &name) {
  try {
    return self.step->parameter(name);
  } catch (const Error &e) {
    throw ArgumentError(ArgumentError::Kind::Value, e.what());
  }
}

/// {name: numpy view} of the tensors `select` picks (views share the step's storage: a step
/// updates them in place, and writing into one changes what the next step reads).
py::dict tensorsWhere(const StepRef &self, const std::function<bool(const std::string &)> &select) {
  py::dict result;
  for (const auto &[name, tensor] : self->step->parameters())
    if (select(name))
      result[py::str(name)] = toNumpy(tensor);
  return result;
}

/// The manifest's updates of one kind: optimizer states (owned by another parameter) or
/// buffers (owned by themselves, not trained).
std::vector<std::string> updatesWhere(const PyTrainingStep &self, bool states) {
  std::vector<std::string> names;
  for (const runtime::TrainingManifestUpdate &update : self.step->manifest().updates)
    if (update.isState && (update.name != update.param) == states)
      names.push_back(update.name);
  return names;
}

void setParameter(const StepRef &self, const std::string &name, const py::object &value) {
  const Tensor &target = parameterOf(*self, name);
  std::vector<py::object> keepAlive;
  Tensor source = borrowInput({name, target.type()}, value, /*copy=*/true, keepAlive);
  std::lock_guard<std::mutex> lock(self->mutex);
  std::memcpy(const_cast<void *>(target.data()), source.data(), target.byteSize());
}

/// A dataset from {name: numpy array or .npy path}: arrays are copied (the loop gathers
/// batches from them while Python may change the originals), paths memory-mapped.
runtime::Dataset datasetOf(const py::dict &data, const char *what) {
  std::vector<std::pair<std::string, std::string>> paths;
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (auto [key, value] : data) {
    std::string name = py::cast<std::string>(key);
    if (py::isinstance<py::str>(value) || py::hasattr(value, "__fspath__"))
      paths.emplace_back(name, py::str(py::module_::import("os").attr("fspath")(value)));
    else
      tensors.emplace_back(name, tensorOf(value, what));
  }
  if (!paths.empty() && !tensors.empty())
    failArgument(ArgumentError::Kind::Type, "{}: give every array as a numpy array or every one as a .npy path, "
                                            "not both",
                 what);
  py::gil_scoped_release release;
  return paths.empty() ? runtime::Dataset::fromTensors(tensors) : runtime::Dataset::open(paths);
}

py::dict progressDict(const runtime::TrainerProgress &p) {
  return py::dict("epoch"_a = p.epoch, "epochs"_a = p.epochs, "update"_a = p.update, "updates"_a = p.updates,
                  "samples"_a = p.samples, "epoch_samples"_a = p.epochSamples, "mean_loss"_a = p.meanLoss,
                  "seconds"_a = p.seconds, "lr"_a = p.lr, "loss"_a = p.loss, "step"_a = p.step);
}

py::dict epochDict(const runtime::EpochReport &r) {
  py::dict result("epoch"_a = r.epoch, "samples"_a = r.samples, "loss"_a = r.meanLoss, "seconds"_a = r.seconds);
  result["val_loss"] = r.valLoss ? py::object(py::float_(*r.valLoss)) : py::object(py::none());
  result["val_accuracy"] = r.valAccuracy ? py::object(py::float_(*r.valAccuracy)) : py::object(py::none());
  return result;
}

py::list train(const StepRef &self, const py::dict &data, int64_t epochs, bool shuffle, uint64_t seed,
               int64_t accumulate, int64_t batchSize, bool dropLast, const std::string &schedule, int64_t saveEvery,
               const py::object &savePath, int64_t stopAfter, const py::object &validation,
               const py::object &onProgress, const py::object &onEpoch, distributed::DataParallelGroup *group) {
  runtime::TrainerOptions options;
  options.epochs = epochs;
  options.shuffle = shuffle;
  options.seed = seed;
  options.accumulate = accumulate;
  options.batchSize = batchSize;
  options.dropLast = dropLast;
  options.schedule = runtime::LearningRateSchedule::parse(schedule);
  options.saveEvery = saveEvery;
  if (!savePath.is_none())
    options.savePath = py::str(py::module_::import("os").attr("fspath")(savePath));
  options.stopAfter = stopAfter;

  // The hooks run on the thread that runs the loop, with the GIL released: they take it back.
  // Ctrl-C reaches Python at the next update (the loop stops there, the step's tensors as
  // that update left them).
  runtime::TrainerHooks hooks;
  if (!onProgress.is_none())
    hooks.onProgress = [&onProgress](const runtime::TrainerProgress &progress) {
      py::gil_scoped_acquire acquire;
      if (PyErr_CheckSignals() != 0)
        throw py::error_already_set();
      onProgress(progressDict(progress));
    };
  if (!onEpoch.is_none())
    hooks.onEpoch = [&onEpoch](const runtime::EpochReport &report) {
      py::gil_scoped_acquire acquire;
      onEpoch(epochDict(report));
    };

  runtime::Dataset trainData = datasetOf(data, "training data");
  std::optional<runtime::Dataset> validationData;
  if (!validation.is_none())
    validationData = datasetOf(py::cast<py::dict>(validation), "validation data");

  std::vector<runtime::EpochReport> reports;
  {
    py::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(self->mutex);
    // Data parallel, as kiln-run --data-parallel: rank 0's state everywhere, then the hooks that
    // sum the gradients over the ranks as the backward pass finalises them.
    if (group != nullptr) {
      group->broadcastFromRank0(*self->step);
      group->attach(*self->step, options, hooks);
    }
    runtime::Trainer trainer(*self->step, std::move(trainData), options, hooks);
    if (validationData) {
      if (!self->evaluate)
        self->evaluate = codegen::compileEvaluation(*self->forward, self->loss, *self->step, self->options);
      trainer.setValidation(std::move(*validationData), self->evaluate);
    }
    reports = trainer.run();
  }
  py::list result;
  for (const runtime::EpochReport &report : reports)
    result.append(epochDict(report));
  return result;
}

} // namespace

void bindTraining(py::module_ &m) {
  m.def("_compile_training_step", &compileStep, "graph"_a, "loss"_a, "optimizer"_a, py::kw_only(),
        "output"_a = py::none(), "target_name"_a = "target", "ignore_index"_a = py::none(), "params"_a = py::none(),
        "frozen"_a = py::none(), "buffers"_a = py::none(), "split"_a = false, "reference"_a = false,
        "batch_tile"_a = 32, "threads"_a = py::none(), "cache_dir"_a = py::none());
  m.def("_train", &train, "step"_a, "data"_a, py::kw_only(), "epochs"_a = 1, "shuffle"_a = false, "seed"_a = 0,
        "accumulate"_a = 1, "batch_size"_a = 0, "drop_last"_a = false, "lr_schedule"_a = "constant", "save_every"_a = 0,
        "save_path"_a = py::none(), "stop_after"_a = 0, "validation"_a = py::none(), "on_progress"_a = py::none(),
        "on_epoch"_a = py::none(), "data_parallel"_a = nullptr);

  py::class_<distributed::DataParallelGroup>(m, "DataParallel", R"(The processes mpirun started, training one
model data parallel (kiln.train(..., data_parallel=group)): MPI is initialised when the group is
made (one per process) and finalised when it goes. Each rank trains a split step
(compile_training_step(..., split=True)) on its share of every update; the gradients are summed
over the ranks in buckets that overlap the backward pass, and every rank applies the same update.
BatchNorm uses each rank's own batch statistics, as PyTorch's DistributedDataParallel does.
kiln.Error in a kiln built without MPI.)")
      .def(py::init([](double timeout, bool checkIdentical) {
             distributed::DataParallelOptions options;
             options.timeoutSeconds = timeout;
             options.checkEveryUpdate = checkIdentical;
             return std::make_unique<distributed::DataParallelGroup>(options);
           }),
           py::kw_only(), "timeout"_a = 300.0, "check_identical"_a = false)
      .def_property_readonly("rank", &distributed::DataParallelGroup::rank)
      .def_property_readonly("size", &distributed::DataParallelGroup::size)
      .def_property_readonly("identical_checks", &distributed::DataParallelGroup::identicalChecks);

  py::class_<PyTrainingStep, StepRef>(m, "TrainingStep", R"(A compiled training step: forward, loss, backward and
optimizer update, on parameters and optimizer state it owns and updates in place.

kiln.compile_training_step(graph, loss=..., optimizer=...) makes one. step(feeds) runs one
update and returns the loss before it; parameters, optimizer_state and buffers are numpy views
of the step's own tensors (writing into them changes the next step), step["name"] reads one,
step["name"] = array copies into it; save/load write and read a checkpoint.)")
      .def("step", &runStep, "feeds"_a, py::kw_only(), "copy"_a = false,
           R"(Runs one training step on `feeds` ({input name: numpy array}: the forward inputs and, for
mse, cross_entropy and nll, the target) and returns the loss before the update. Arrays are read
in place as Session.run reads them (copy=True converts what needs converting).)")
      .def_property_readonly("inputs",
                             [](const StepRef &self) {
                               py::list infos;
                               for (const runtime::TensorSpec &spec : self->step->inputs())
                                 infos.append(std::make_shared<runtime::TensorSpec>(spec));
                               return infos;
                             },
                             "the inputs step() takes (TensorInfo), in order")
      .def_property_readonly(
          "parameters", [](const StepRef &self) { return tensorsWhere(self, [](const std::string &) { return true; }); },
          "{name: numpy array} of every parameter, optimizer state and buffer, sharing the step's storage")
      .def_property_readonly("trained_parameters",
                             [](const StepRef &self) { return self->step->trainedParameters(); },
                             "the names of the parameters the optimizer trains, in order")
      .def_property_readonly(
          "optimizer_state",
          [](const StepRef &self) {
            std::vector<std::string> names = updatesWhere(*self, true);
            return tensorsWhere(self, [&](const std::string &name) {
              return std::find(names.begin(), names.end(), name) != names.end();
            });
          },
          "{name: numpy array} of the optimizer's state ('fc.weight.exp_avg', 'fc.weight.momentum_buffer')")
      .def_property_readonly(
          "buffers",
          [](const StepRef &self) {
            std::vector<std::string> names = updatesWhere(*self, false);
            return tensorsWhere(self, [&](const std::string &name) {
              return std::find(names.begin(), names.end(), name) != names.end();
            });
          },
          "{name: numpy array} of the buffers each step writes back (BatchNorm's running statistics)")
      .def("__getitem__", [](const StepRef &self, const std::string &name) { return toNumpy(parameterOf(*self, name)); })
      .def("__setitem__", &setParameter, "name"_a, "value"_a)
      .def("__contains__", [](const StepRef &self, const std::string &name) {
        return self->step->parameters().count(name) != 0;
      })
      .def_property(
          "lr", [](const StepRef &self) { return self->step->learningRate(); },
          [](const StepRef &self, double lr) {
            std::lock_guard<std::mutex> lock(self->mutex);
            self->step->setLearningRate(lr);
          },
          "the learning rate of the next step (changing it recompiles nothing)")
      .def_property(
          "step_count", [](const StepRef &self) { return self->step->stepCount(); },
          [](const StepRef &self, int64_t steps) {
            std::lock_guard<std::mutex> lock(self->mutex);
            self->step->setStepCount(steps);
          },
          "steps taken so far (Adam's bias correction reads it)")
      .def_property_readonly("description", [](const StepRef &self) { return self->step->manifest().describe(); })
      .def(
          "save",
          [](const StepRef &self, const py::object &path) {
            std::string file = py::str(py::module_::import("os").attr("fspath")(path));
            py::gil_scoped_release release;
            std::lock_guard<std::mutex> lock(self->mutex);
            self->step->saveParameters(file);
          },
          "path"_a,
          "Writes every parameter, optimizer state and buffer and the step count: one .safetensors file when the "
          "path ends so, else a folder of .npy files.")
      .def(
          "load",
          [](const StepRef &self, const py::object &path) {
            std::string file = py::str(py::module_::import("os").attr("fspath")(path));
            py::gil_scoped_release release;
            std::lock_guard<std::mutex> lock(self->mutex);
            self->step->loadParameters(file);
          },
          "path"_a, "Reads what save() wrote into the step's tensors, in place, and the step count.")
      .def("__repr__", [](const StepRef &self) {
        return "<kiln.TrainingStep '" + self->forward->name() + "': " + self->step->manifest().describe() + ", step " +
               std::to_string(self->step->stepCount()) + ">";
      });
}

} // namespace kiln::python
