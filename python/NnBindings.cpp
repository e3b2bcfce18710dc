// kiln.nn: the modules of frontend/Layers.h with torch's constructor arguments. Calling a module
// on a Value records its computation into that Value's graph; its parameters and buffers read
// as numpy arrays (by name: `linear.weight`, or `state_dict()`), and load_state_dict replaces
// them. Everything a module does is frontend/Module.h's; this file converts arguments.
#include <map>
#include <optional>
#include <string>

#include <pybind11/stl.h>

#include "frontend/Layers.h"
#include "python/GraphValue.h"
#include "python/NumpyArrays.h"

namespace kiln::python {

using namespace pybind11::literals;
namespace nn = frontend::nn;
using frontend::Var;
using ModuleRef = std::shared_ptr<nn::Module>;

namespace {

py::dict numpyDict(const nn::NamedTensors &tensors) {
  py::dict result;
  for (const auto &[name, tensor] : tensors)
    result[py::str(name)] = toNumpy(tensor); // shares the module's storage
  return result;
}

void loadStateDict(nn::Module &module, const py::dict &state, bool strict) {
  std::map<std::string, Tensor> tensors;
  for (auto [name, value] : state)
    tensors[py::cast<std::string>(name)] = tensorOf(value, "load_state_dict");
  module.loadStateDict(tensors, strict);
}

std::optional<int64_t> optionalInt(const py::object &object) {
  return object.is_none() ? std::nullopt : std::optional<int64_t>(py::cast<int64_t>(object));
}

} // namespace

void bindNn(py::module_ &parent) {
  py::module_ m = parent.def_submodule("nn", "kiln's nn modules, with torch's arguments and parameter names.");
  m.def("manual_seed", &nn::manualSeed, "seed"_a, "Reseeds the generator that initialises new modules' parameters.");

  py::class_<nn::Module, ModuleRef>(m, "Module", "A layer: call it on a Value to add its computation to the graph.")
      .def("__call__", [](nn::Module &self, const Var &input) { return self(input); }, "input"_a)
      .def("train", [](nn::Module &self, bool mode) { self.train(mode); }, "mode"_a = true)
      .def("eval", &nn::Module::eval)
      .def_property_readonly("training", &nn::Module::isTraining)
      .def_property_readonly("type_name", &nn::Module::typeName)
      .def(
          "named_parameters", [](const nn::Module &self) { return numpyDict(self.namedParameters()); },
          "{name: numpy array} of the trainable parameters, as torch names them; the arrays share the module's "
          "storage.")
      .def("named_buffers", [](const nn::Module &self) { return numpyDict(self.namedBuffers()); })
      .def("state_dict", [](const nn::Module &self) { return numpyDict(self.stateDict()); })
      .def("load_state_dict", &loadStateDict, "state"_a, "strict"_a = true,
           "Replaces values by name; each array must keep its tensor's dtype and shape.")
      .def_property_readonly("num_parameters", &nn::Module::numParameters)
      .def("__getattr__", [](const nn::Module &self, const std::string &name) -> py::object {
        if (self.hasTensor(name))
          return toNumpy(self.tensor(name));
        for (const auto &[childName, child] : self.namedChildren())
          if (childName == name)
            return py::cast(child);
        throw py::attribute_error("'" + self.typeName() + "' module has no parameter, buffer or child '" + name + "'");
      });

  py::class_<nn::Linear, nn::Module, std::shared_ptr<nn::Linear>>(m, "Linear")
      .def(py::init([](int64_t in, int64_t out, bool bias, const py::object &dtype) {
             return std::make_shared<nn::Linear>(in, out, bias, dtypeOf(dtype));
           }),
           "in_features"_a, "out_features"_a, "bias"_a = true, "dtype"_a = "f32");
  py::class_<nn::Conv2d, nn::Module, std::shared_ptr<nn::Conv2d>>(m, "Conv2d")
      .def(py::init([](int64_t in, int64_t out, const py::object &kernel, const py::object &stride,
                       const py::object &padding, const py::object &dilation, int64_t groups, bool bias,
                       const py::object &dtype) {
             return std::make_shared<nn::Conv2d>(in, out, intsOf(kernel, "kernel_size"), intsOf(stride, "stride"),
                                                 intsOf(padding, "padding"), intsOf(dilation, "dilation"), groups,
                                                 bias, dtypeOf(dtype));
           }),
           "in_channels"_a, "out_channels"_a, "kernel_size"_a, "stride"_a = 1, "padding"_a = 0, "dilation"_a = 1,
           "groups"_a = 1, "bias"_a = true, "dtype"_a = "f32");
  py::class_<nn::BatchNorm2d, nn::Module, std::shared_ptr<nn::BatchNorm2d>>(m, "BatchNorm2d")
      .def(py::init([](int64_t features, double eps, std::optional<double> momentum, bool affine, bool track,
                       const py::object &dtype) {
             return std::make_shared<nn::BatchNorm2d>(features, eps, momentum, affine, track, dtypeOf(dtype));
           }),
           "num_features"_a, "eps"_a = 1e-5, "momentum"_a = 0.1, "affine"_a = true, "track_running_stats"_a = true,
           "dtype"_a = "f32");
  py::class_<nn::LayerNorm, nn::Module, std::shared_ptr<nn::LayerNorm>>(m, "LayerNorm")
      .def(py::init([](const py::object &shape, double eps, bool affine, bool bias, const py::object &dtype) {
             return std::make_shared<nn::LayerNorm>(intsOf(shape, "normalized_shape"), eps, affine, bias,
                                                    dtypeOf(dtype));
           }),
           "normalized_shape"_a, "eps"_a = 1e-5, "elementwise_affine"_a = true, "bias"_a = true, "dtype"_a = "f32");
  py::class_<nn::ReLU, nn::Module, std::shared_ptr<nn::ReLU>>(m, "ReLU").def(py::init<>());
  py::class_<nn::GELU, nn::Module, std::shared_ptr<nn::GELU>>(m, "GELU")
      .def(py::init<std::string>(), "approximate"_a = "none");
  py::class_<nn::MaxPool2d, nn::Module, std::shared_ptr<nn::MaxPool2d>>(m, "MaxPool2d")
      .def(py::init([](const py::object &kernel, const py::object &stride, const py::object &padding,
                       const py::object &dilation, bool ceilMode) {
             return std::make_shared<nn::MaxPool2d>(
                 intsOf(kernel, "kernel_size"), stride.is_none() ? frontend::Ints{} : intsOf(stride, "stride"),
                 intsOf(padding, "padding"), intsOf(dilation, "dilation"), ceilMode);
           }),
           "kernel_size"_a, "stride"_a = py::none(), "padding"_a = 0, "dilation"_a = 1, "ceil_mode"_a = false);
  py::class_<nn::AvgPool2d, nn::Module, std::shared_ptr<nn::AvgPool2d>>(m, "AvgPool2d")
      .def(py::init([](const py::object &kernel, const py::object &stride, const py::object &padding, bool ceilMode,
                       bool countIncludePad) {
             return std::make_shared<nn::AvgPool2d>(
                 intsOf(kernel, "kernel_size"), stride.is_none() ? frontend::Ints{} : intsOf(stride, "stride"),
                 intsOf(padding, "padding"), ceilMode, countIncludePad);
           }),
           "kernel_size"_a, "stride"_a = py::none(), "padding"_a = 0, "ceil_mode"_a = false,
           "count_include_pad"_a = true);
  py::class_<nn::Dropout, nn::Module, std::shared_ptr<nn::Dropout>>(m, "Dropout")
      .def(py::init([](double p, const py::object &seed) {
             std::optional<int64_t> fixed = optionalInt(seed);
             return fixed ? std::make_shared<nn::Dropout>(p, *fixed) : std::make_shared<nn::Dropout>(p);
           }),
           "p"_a = 0.5, "seed"_a = py::none());
  py::class_<nn::Flatten, nn::Module, std::shared_ptr<nn::Flatten>>(m, "Flatten")
      .def(py::init<int64_t, int64_t>(), "start_dim"_a = 1, "end_dim"_a = -1);
  py::class_<nn::Sequential, nn::Module, std::shared_ptr<nn::Sequential>>(m, "Sequential")
      .def(py::init([](const py::args &modules) {
             auto sequential = std::make_shared<nn::Sequential>();
             for (py::handle module : modules)
               sequential->add(py::cast<ModuleRef>(module));
             return sequential;
           }),
           "Applies its modules in order; they are named '0', '1', ... as in torch.")
      .def(
          "append",
          [](nn::Sequential &self, const ModuleRef &module) { self.add(module); }, "module"_a)
      .def("__len__", &nn::Sequential::size)
      .def("__getitem__", [](const nn::Sequential &self, size_t index) {
        if (index >= self.size())
          throw py::index_error("Sequential has " + std::to_string(self.size()) + " modules");
        return self[index];
      });
}

} // namespace kiln::python
