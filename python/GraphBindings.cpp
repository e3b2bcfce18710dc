// kiln.GraphBuilder, kiln.Value and kiln.Graph: the graph API's builder, values and finished
// graphs (frontend/GraphBuilder.h), their views (.kir text, DOT, JSON), kiln.parse and the
// reference evaluator. Only conversions live here; python/OpBindings.cpp binds the ops.
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <unordered_map>

#include <pybind11/stl.h>

#include "core/SymbolicDim.h"
#include "frontend/Movement.h"
#include "frontend/onnx/OnnxImporter.h"
#include "ir/Evaluator.h"
#include "ir/Export.h"
#include "ir/Parser.h"
#include "ir/Printer.h"
#include "python/GraphValue.h"
#include "python/NumpyArrays.h"
#include "python/Session.h"

namespace kiln::python {

using namespace pybind11::literals;
using frontend::GraphBuilder;
using frontend::Var;

namespace {

/// The builders alive, so that a Var returned by a frontend function finds the builder its
/// Python Value must hold. Touched only with the GIL held.
std::unordered_map<const GraphBuilder *, std::weak_ptr<GraphBuilder>> &liveBuilders() {
  static auto *builders = new std::unordered_map<const GraphBuilder *, std::weak_ptr<GraphBuilder>>();
  return *builders;
}

std::vector<runtime::TensorSpec> specsOf(const std::vector<ir::Value *> &values,
                                         const std::function<std::string(size_t)> &nameOf) {
  std::vector<runtime::TensorSpec> specs;
  for (size_t i = 0; i < values.size(); ++i)
    specs.push_back({nameOf(i), values[i]->type()});
  return specs;
}

std::vector<runtime::TensorSpec> inputSpecs(const ir::Graph &graph) {
  return specsOf(graph.inputs(), [&](size_t i) { return graph.inputs()[i]->name(); });
}

/// Output names as a compiled model gives them (codegen/EmitModel.cpp): "output<i>" for an
/// output without one.
std::vector<runtime::TensorSpec> outputSpecs(const ir::Graph &graph) {
  return specsOf(graph.outputs(), [&](size_t i) {
    return graph.outputName(i).empty() ? "output" + std::to_string(i) : graph.outputName(i);
  });
}

py::list infoList(const std::vector<runtime::TensorSpec> &specs) {
  py::list infos;
  for (const runtime::TensorSpec &spec : specs)
    infos.append(std::make_shared<runtime::TensorSpec>(spec));
  return infos;
}

PyGraph finish(const std::shared_ptr<GraphBuilder> &builder, const py::object &outputs) {
  std::vector<Var> vars;
  if (py::isinstance<py::dict>(outputs)) {
    std::vector<std::pair<std::string, Var>> named;
    for (auto [name, value] : py::reinterpret_borrow<py::dict>(outputs))
      named.emplace_back(py::cast<std::string>(name), py::cast<Var>(value));
    std::shared_ptr<const ir::Graph> graph = builder->finish(named);
    return {graph, builder->bufferWrites()};
  }
  if (py::isinstance<PyValue>(outputs))
    vars.push_back(py::cast<Var>(outputs));
  else
    vars = py::cast<std::vector<Var>>(outputs);
  std::shared_ptr<const ir::Graph> graph = builder->finish(vars);
  return {graph, builder->bufferWrites()};
}

py::dict evaluateGraph(const PyGraph &self, const py::dict &feeds, bool copy) {
  const ir::Graph &graph = *self.graph;
  std::vector<runtime::TensorSpec> specs = inputSpecs(graph);
  std::vector<Tensor> inputs(specs.size());
  std::vector<py::object> keepAlive;
  for (auto [key, value] : feeds) {
    std::string name = py::cast<std::string>(key);
    auto spec = std::find_if(specs.begin(), specs.end(), [&](const auto &s) { return s.name == name; });
    if (spec == specs.end())
      failArgument(ArgumentError::Kind::Value, "unknown input '{}' of graph '{}'", name, graph.name());
    inputs[spec - specs.begin()] = borrowInput(*spec, value, copy, keepAlive);
  }
  for (size_t i = 0; i < specs.size(); ++i)
    if (!inputs[i].defined())
      failArgument(ArgumentError::Kind::Value, "missing input '{}' ({})", specs[i].name, specs[i].type.toString());
  std::vector<Tensor> outputs;
  {
    py::gil_scoped_release release;
    outputs = ir::evaluate(graph, inputs);
  }
  std::vector<runtime::TensorSpec> outSpecs = outputSpecs(graph);
  py::dict result;
  for (size_t i = 0; i < outputs.size(); ++i)
    result[py::str(outSpecs[i].name)] = toNumpy(std::move(outputs[i]));
  return result;
}

} // namespace

std::shared_ptr<GraphBuilder> makeBuilder(const std::string &name) {
  std::shared_ptr<GraphBuilder> builder(new GraphBuilder(name), [](GraphBuilder *dying) {
    liveBuilders().erase(dying);
    delete dying;
  });
  liveBuilders()[builder.get()] = builder;
  return builder;
}

std::shared_ptr<GraphBuilder> builderOf(const Var &var) {
  auto found = liveBuilders().find(&var.builder());
  std::shared_ptr<GraphBuilder> builder = found == liveBuilders().end() ? nullptr : found->second.lock();
  if (!builder)
    fail("a value of graph '{}' whose builder Python does not hold", var.builder().graphName());
  return builder;
}

DType dtypeOf(py::handle object) {
  if (py::isinstance<py::str>(object))
    if (std::optional<DType> dtype = parseDType(py::cast<std::string>(object)))
      return *dtype;
  py::object numpy = py::module_::import("numpy");
  py::object asNumpy;
  try {
    asNumpy = numpy.attr("dtype")(object);
  } catch (const py::error_already_set &) {
    throw py::type_error("not a dtype: " + std::string(py::repr(object)) +
                         " (kiln's names: f32, f64, f16, bf16, i64, i32, i8, u8, bool; or a numpy dtype)");
  }
  for (DType dtype : {DType::F32, DType::F64, DType::F16, DType::BF16, DType::I64, DType::I32, DType::I8, DType::U8,
                      DType::Bool})
    if (asNumpy.equal(numpyDType(dtype)))
      return dtype;
  throw py::type_error("kiln has no dtype for numpy's " + std::string(py::str(asNumpy)));
}

std::vector<int64_t> intsOf(py::handle object, const char *what) {
  if (PyIndex_Check(object.ptr())) // an int, or a numpy integer
    return {py::cast<int64_t>(py::int_(py::reinterpret_borrow<py::object>(object)))};
  try {
    return py::cast<std::vector<int64_t>>(object);
  } catch (const py::cast_error &) {
    throw py::type_error(std::string(what) + " must be an int or a sequence of ints, got " +
                         std::string(py::repr(object)));
  }
}

/// An input's shape: ints, and names for symbolic dims (("N", 3): a batch of any size), as
/// kiln.Session shows them.
Shape dimsOf(py::handle object, const char *what) {
  if (py::isinstance<py::str>(object) || !py::isinstance<py::sequence>(object))
    return intsOf(object, what);
  Shape dims;
  for (py::handle entry : py::reinterpret_borrow<py::sequence>(object)) {
    if (!py::isinstance<py::str>(entry)) {
      dims.push_back(intsOf(entry, what).at(0));
      continue;
    }
    std::string name = py::cast<std::string>(entry);
    if (!isValidSymbolName(name))
      throw py::value_error(std::string(what) + ": '" + name + "' is not a symbol name (a letter, then letters, " +
                            "digits or '_')");
    dims.push_back(symbolDim(name));
  }
  return dims;
}

Tensor tensorOf(py::handle object, const char *what) {
  // asarray rather than ascontiguousarray, which makes a 0-d array 1-d.
  auto array = py::reinterpret_borrow<py::array>(py::module_::import("numpy").attr("asarray")(object, "order"_a = "C"));
  DType dtype;
  try {
    dtype = dtypeOf(array.dtype());
  } catch (const py::type_error &) {
    throw py::type_error(std::string(what) + ": kiln has no dtype for numpy's " + std::string(py::str(array.dtype())));
  }
  Tensor tensor(dtype, Shape(array.shape(), array.shape() + array.ndim()));
  std::memcpy(tensor.data(), array.data(), tensor.byteSize());
  return tensor;
}

std::optional<ModelSource> graphModelSource(py::handle object) {
  if (!py::isinstance<PyGraph>(object))
    return std::nullopt;
  std::shared_ptr<const ir::Graph> graph = py::cast<const PyGraph &>(object).graph;
  return ModelSource::graph("graph '" + graph->name() + "'", [graph] { return graph->clone(); });
}

void bindGraph(py::module_ &m) {
  py::class_<PyValue>(m, "Value", "A symbolic tensor of a graph under construction (a frontend Var).")
      .def_property_readonly("shape", [](const PyValue &v) { return py::tuple(py::cast(v.var.shape())); })
      .def_property_readonly("dtype", [](const PyValue &v) { return std::string(dtypeName(v.var.dtype())); },
                             "kiln's name of the dtype: f32, i64, bool, ...")
      .def_property_readonly("rank", [](const PyValue &v) { return v.var.rank(); })
      .def_property_readonly("name", [](const PyValue &v) { return v.var.name(); })
      .def(
          "set_name",
          [](PyValue &v, const std::string &name) {
            v.var.setName(name);
            return v;
          },
          "name"_a, "Names the value (outputs keep their names); returns it.")
      .def("__repr__", [](const PyValue &v) {
        return "<kiln.Value " + (v.var.name().empty() ? std::string() : "'" + v.var.name() + "' ") +
               v.var.type().toString() + ">";
      });

  py::class_<GraphBuilder, std::shared_ptr<GraphBuilder>>(m, "GraphBuilder", R"(Builds a graph op by op.

g = GraphBuilder("name"); x = g.input("x", "f32", [2, 3]); w = g.param("w", array);
graph = g.finish([y]) (or {"y": y}). Every op is checked as it is created: a shape or dtype
mistake raises kiln.Error at the call that made it.)")
      .def(py::init(&makeBuilder), "name"_a = "main")
      .def_property_readonly("name", &GraphBuilder::graphName)
      .def(
          "input",
          [](GraphBuilder &self, const std::string &name, const py::object &dtype, const py::object &shape) {
            return self.input(name, dtypeOf(dtype), dimsOf(shape, "shape"));
          },
          "name"_a, "dtype"_a, "shape"_a,
          "A graph input; inputs are fed in the order they are declared. A name in `shape` is a symbolic dim: "
          "g.input('x', 'f32', ['N', 8]) takes a batch of any size.")
      .def(
          "param",
          [](GraphBuilder &self, const std::string &name, const py::object &value) {
            return self.param(name, tensorOf(value, "param"));
          },
          "name"_a, "value"_a, "A parameter carrying a copy of `value` (a numpy array) as its value.")
      .def(
          "constant", [](GraphBuilder &self, const py::object &value) { return self.constant(tensorOf(value, "constant")); },
          "value"_a, "A constant: a copy of `value` (a numpy array or number).")
      .def(
          "scalar",
          [](GraphBuilder &self, double value, const py::object &dtype) { return self.scalar(value, dtypeOf(dtype)); },
          "value"_a, "dtype"_a = "f32")
      .def(
          "iota",
          [](GraphBuilder &self, const py::object &shape, int64_t axis, const py::object &dtype) {
            return self.iota(intsOf(shape, "shape"), axis, dtypeOf(dtype));
          },
          "shape"_a, "axis"_a, "dtype"_a = "i64", "Elements that are their index along `axis`.")
      .def(
          "random_uniform",
          [](GraphBuilder &self, const py::object &shape, int64_t seed, const py::object &dtype) {
            return self.randomUniform(intsOf(shape, "shape"), seed, dtypeOf(dtype));
          },
          "shape"_a, "seed"_a, "dtype"_a = "f32", "Numbers uniform in [0, 1) from a counter-based stream.")
      .def("finish", &finish, "outputs"_a,
           "Ends construction: `outputs` is a Value, a list of Values or a dict {name: Value}; returns the Graph.")
      .def("__repr__", [](const GraphBuilder &self) {
        return "<kiln.GraphBuilder '" + self.graphName() + "'" + (self.finished() ? " (finished)>" : ">");
      });

  py::class_<PyGraph>(m, "Graph", "A finished graph: kiln.Session(graph) compiles it, kiln.evaluate runs it on "
                                  "the reference evaluator.")
      .def_property_readonly("name", [](const PyGraph &g) { return g.graph->name(); })
      .def_property_readonly("inputs", [](const PyGraph &g) { return infoList(inputSpecs(*g.graph)); })
      .def_property_readonly("outputs", [](const PyGraph &g) { return infoList(outputSpecs(*g.graph)); })
      .def(
          "print",
          [](const PyGraph &g, bool full) {
            ir::PrintOptions options;
            options.keepLargeTensors = full;
            return ir::printGraph(*g.graph, options);
          },
          py::kw_only(), "full"_a = false,
          "The graph's text form (.kir), which kiln.parse reads back. Tensors of more than 16 elements print "
          "as `elided` unless full=True (only then does the text carry every value).")
      .def("__str__", [](const PyGraph &g) { return ir::printGraph(*g.graph); })
      .def("dot", [](const PyGraph &g) { return ir::toDot(*g.graph); }, "The graph as Graphviz DOT.")
      .def("json", [](const PyGraph &g) { return ir::toJson(*g.graph); }, "The graph as a JSON document.")
      .def("__repr__", [](const PyGraph &g) {
        return "<kiln.Graph '" + g.graph->name() + "', " + std::to_string(g.graph->inputs().size()) + " inputs, " +
               std::to_string(g.graph->outputs().size()) + " outputs>";
      });

  m.def(
      "import_onnx",
      [](const py::object &model, const py::object &inputShapes) {
        frontend::OnnxImportOptions options;
        if (!inputShapes.is_none())
          for (auto [name, shape] : py::cast<py::dict>(inputShapes))
            options.inputShapes[py::cast<std::string>(name)] = intsOf(shape, "input_shapes");
        if (py::isinstance<py::bytes>(model)) {
          std::string bytes = py::cast<std::string>(model);
          py::gil_scoped_release release;
          return PyGraph{frontend::importOnnxBytes(bytes, options), {}};
        }
        if (!py::isinstance<py::str>(model) && !py::hasattr(model, "__fspath__"))
          throw py::type_error("import_onnx takes the path (str or os.PathLike) or the bytes of an ONNX model, got " +
                               std::string(py::str(py::type::handle_of(model).attr("__name__"))));
        std::string path = py::str(py::module_::import("os").attr("fspath")(model));
        if (!std::filesystem::is_regular_file(path))
          failArgument(ArgumentError::Kind::FileNotFound, "no such file: '{}'", path);
        py::gil_scoped_release release;
        return PyGraph{frontend::importOnnxFile(path, options), {}};
      },
      "model"_a, "input_shapes"_a = py::none(),
      "An ONNX model (a path or its bytes) as a kiln.Graph, its initializers as parameters named as they are: what "
      "kiln.compile_training_step trains. `input_shapes` ({input name: shape}) fixes symbolic dims.");
  m.def(
      "parse", [](const std::string &text) { return PyGraph{ir::parseGraph(text, "<kiln.parse>"), {}}; }, "text"_a,
      "A graph from its text form (.kir), verified.");
  m.def("evaluate", &evaluateGraph, "graph"_a, "feeds"_a, py::kw_only(), "copy"_a = false,
        "Runs `graph` on the reference evaluator (slow and exact: the oracle of kiln's tests) on `feeds` "
        "({input name: numpy array}); returns {output name: numpy array}.");
}

} // namespace kiln::python
