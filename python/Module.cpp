// The extension module kiln._kiln: the Python face of python/Session.h. Only conversions live
// here (paths, bytes, dicts of numpy arrays, exceptions); python/kiln/__init__.py re-exports
// what users see. The GIL is released while a model compiles, runs or is written, and every
// kiln::Error reaches Python as kiln.Error (a RuntimeError), or as the ValueError, TypeError or
// FileNotFoundError its ArgumentError kind names.
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "core/SymbolicDim.h"
#include "python/GraphValue.h"
#include "python/NumpyArrays.h"
#include "python/Session.h"

namespace py = pybind11;
using namespace pybind11::literals;
using kiln::python::ArgumentError;
using kiln::python::Session;
using kiln::python::SessionOptions;
using kiln::python::sessionOptions;
/// How every binding takes its session: through the holder, which pybind11 checks was
/// constructed, so that a Session made with __new__ and never initialised raises instead of
/// handing C++ an object that does not exist.
using SessionRef = std::shared_ptr<Session>;
/// The same for TensorInfo, which is a copy of the spec (a view into the session would need
/// a holder pybind11 cannot check).
using InfoRef = std::shared_ptr<kiln::runtime::TensorSpec>;

namespace {

/// A path given as str or os.PathLike; TypeError for anything else.
std::optional<std::string> pathOf(const py::handle &object) {
  if (py::isinstance<py::str>(object) || py::hasattr(object, "__fspath__"))
    return py::str(py::module_::import("os").attr("fspath")(object)).cast<std::string>();
  return std::nullopt;
}

std::map<std::string, kiln::Shape> inputShapesOf(const py::object &shapes) {
  std::map<std::string, kiln::Shape> result;
  if (shapes.is_none())
    return result;
  if (!py::isinstance<py::dict>(shapes))
    throw py::type_error("input_shapes must be a dict of input name to shape, e.g. {\"x\": (1, 3, 224, 224)}");
  for (auto [name, shape] : py::reinterpret_borrow<py::dict>(shapes))
    result[py::cast<std::string>(name)] = py::cast<kiln::Shape>(shape);
  return result;
}

std::shared_ptr<Session> openSession(const py::object &model, std::optional<int> threads, const py::object &cacheDir,
                                     const py::object &inputShapes, const std::string &precision,
                                     int64_t maxSpecializations) {
  SessionOptions options = sessionOptions(threads, cacheDir);
  options.maxSpecializations = maxSpecializations;
  try {
    options.precision = kiln::codegen::parseContractionPrecision(precision);
  } catch (const kiln::Error &e) {
    kiln::python::failArgument(ArgumentError::Kind::Value, "precision: {}", e.what());
  }
  std::map<std::string, kiln::Shape> shapes = inputShapesOf(inputShapes);
  if (std::optional<kiln::python::ModelSource> graph = kiln::python::graphModelSource(model)) {
    if (!shapes.empty())
      kiln::python::failArgument(ArgumentError::Kind::Value, "input_shapes apply to ONNX models; a kiln.Graph has "
                                                             "static shapes");
    py::gil_scoped_release release;
    return std::make_shared<Session>(*graph, options);
  }
  if (std::optional<std::string> path = pathOf(model)) {
    py::gil_scoped_release release;
    return std::make_shared<Session>(Session::open(*path, options, std::move(shapes)));
  }
  if (py::isinstance<py::bytes>(model) || py::isinstance<py::bytearray>(model) ||
      py::isinstance<py::memoryview>(model)) {
    // bytes as they are; bytearray and memoryview through the buffer protocol.
    auto asBytes = py::reinterpret_steal<py::bytes>(PyBytes_FromObject(model.ptr()));
    if (!asBytes)
      throw py::error_already_set();
    std::string bytes = asBytes;
    py::gil_scoped_release release;
    return std::make_shared<Session>(kiln::python::ModelSource::onnxBytes(std::move(bytes), std::move(shapes)),
                                     options);
  }
  throw py::type_error("kiln.Session takes a model path (str or os.PathLike), the bytes of an ONNX model or a "
                       "kiln.Graph, got " +
                       std::string(py::str(py::type::handle_of(model).attr("__name__"))));
}

/// The feeds dict as tensors in the model's input order; the arrays they borrow go to `keepAlive`.
std::vector<kiln::Tensor> bindInputs(const Session &session, const py::dict &feeds, bool copy,
                                     std::vector<py::object> &keepAlive) {
  const auto &specs = session.inputs();
  std::vector<kiln::Tensor> tensors(specs.size());
  for (auto [key, value] : feeds) {
    if (!py::isinstance<py::str>(key))
      throw py::type_error("input names are str, got " + std::string(py::str(py::repr(key))));
    size_t index = session.inputIndex(py::cast<std::string>(key));
    tensors[index] = kiln::python::borrowInput(specs[index], value, copy, keepAlive);
  }
  for (size_t i = 0; i < specs.size(); ++i)
    if (!tensors[i].defined())
      kiln::python::failArgument(ArgumentError::Kind::Value, "missing input '{}' ({})", specs[i].name,
                                 specs[i].type.toString());
  return tensors;
}

py::dict run(const SessionRef &self, const py::dict &feeds, bool copy) {
  const Session &session = *self;
  std::vector<py::object> keepAlive;
  std::vector<kiln::Tensor> inputs = bindInputs(session, feeds, copy, keepAlive);
  std::vector<kiln::Tensor> outputs;
  {
    py::gil_scoped_release release;
    outputs = session.run(inputs);
  }
  py::dict result;
  for (size_t i = 0; i < outputs.size(); ++i)
    result[py::str(session.outputs()[i].name)] = kiln::python::toNumpy(std::move(outputs[i]));
  return result;
}

void runInto(const SessionRef &self, const py::dict &feeds, const py::dict &outputArrays, bool copy) {
  const Session &session = *self;
  std::vector<py::object> keepAlive;
  std::vector<kiln::Tensor> inputs = bindInputs(session, feeds, copy, keepAlive);
  const auto &specs = session.outputs();
  std::vector<kiln::Tensor> outputs(specs.size());
  for (auto [key, value] : outputArrays) {
    if (!py::isinstance<py::str>(key))
      throw py::type_error("output names are str, got " + std::string(py::str(py::repr(key))));
    size_t index = session.outputIndex(py::cast<std::string>(key));
    outputs[index] = kiln::python::borrowOutput(specs[index], value);
  }
  for (size_t i = 0; i < specs.size(); ++i)
    if (!outputs[i].defined())
      kiln::python::failArgument(ArgumentError::Kind::Value, "missing output '{}' ({}): run_into writes every output",
                                 specs[i].name, specs[i].type.toString());
  py::gil_scoped_release release;
  session.runInto(inputs, outputs);
}

std::vector<InfoRef> infos(const std::vector<kiln::runtime::TensorSpec> &specs) {
  std::vector<InfoRef> result;
  for (const kiln::runtime::TensorSpec &spec : specs)
    result.push_back(std::make_shared<kiln::runtime::TensorSpec>(spec));
  return result;
}

/// `with session.profile("trace.json"):` times the runs inside and writes their trace at the end.
struct ProfileScope {
  std::shared_ptr<Session> session;
  std::string tracePath;
};

} // namespace

SessionOptions kiln::python::sessionOptions(std::optional<int> threads, const py::object &cacheDir) {
  SessionOptions options;
  if (threads) {
    if (*threads <= 0)
      kiln::python::failArgument(ArgumentError::Kind::Value,
                                 "threads must be a positive count (or None for one per core), got {}", *threads);
    options.threads = *threads;
  }
  if (!cacheDir.is_none())
    options.cacheDir = py::str(py::module_::import("os").attr("fspath")(cacheDir));
  return options;
}

PYBIND11_MODULE(_kiln, m) {
  m.doc() = "kiln's compiled models from Python (the extension behind the kiln package)";

  static py::exception<kiln::Error> error(m, "Error", PyExc_RuntimeError);
  // Translators run newest first: ArgumentError, a kiln::Error, is tried before kiln.Error.
  py::register_exception_translator([](std::exception_ptr thrown) {
    try {
      if (thrown)
        std::rethrow_exception(thrown);
    } catch (const kiln::python::ArgumentError &e) {
      switch (e.kind()) {
      case ArgumentError::Kind::Value: PyErr_SetString(PyExc_ValueError, e.what()); return;
      case ArgumentError::Kind::Type: PyErr_SetString(PyExc_TypeError, e.what()); return;
      case ArgumentError::Kind::FileNotFound: PyErr_SetString(PyExc_FileNotFoundError, e.what()); return;
      }
    } catch (const kiln::Error &e) {
      error(e.what());
    }
  });

  py::class_<kiln::runtime::TensorSpec, InfoRef>(m, "TensorInfo", "A model's input or output: name, shape and dtype.")
      .def_property_readonly("name", [](const InfoRef &info) { return info->name; })
      .def_property_readonly("shape",
                             [](const InfoRef &info) {
                               // A symbolic dim is its name, as onnxruntime shows a dim_param.
                               py::list dims;
                               for (int64_t dim : info->type.shape)
                                 dims.append(kiln::isSymbolicDim(dim) ? py::object(py::str(kiln::dimToString(dim)))
                                                                      : py::object(py::int_(dim)));
                               return py::tuple(dims);
                             })
      .def_property_readonly(
          "dtype", [](const InfoRef &info) { return kiln::python::numpyDType(info->type.dtype); },
          "the numpy dtype of the arrays it takes or gives (bf16 as uint16 holding the bits)")
      .def_property_readonly(
          "kiln_dtype", [](const InfoRef &info) { return std::string(kiln::dtypeName(info->type.dtype)); },
          "kiln's name of the dtype: f32, bf16, i64, ...")
      .def("__repr__", [](const InfoRef &info) {
        return "TensorInfo(name='" + info->name + "', shape=" + kiln::python::shapeAsTuple(info->type.shape) +
               ", dtype=" + kiln::python::numpyDTypeName(info->type.dtype) + ")";
      });

  py::class_<ProfileScope, std::shared_ptr<ProfileScope>>(m, "_ProfileScope")
      .def("__enter__", [](const std::shared_ptr<ProfileScope> &scope) { return scope->session; })
      .def("__exit__", [](const std::shared_ptr<ProfileScope> &scope, const py::args &) {
        scope->session->stopProfiling(scope->tracePath);
        return false;
      });

  py::class_<Session, std::shared_ptr<Session>>(m, "Session", R"(A compiled model, ready to run.

Session(model, threads=None, cache_dir=None, input_shapes=None, precision="f32"): `model` is the path of an ONNX
model, a .kir graph or a shared object kiln-compile (or Session.save) wrote, the bytes of an
ONNX model, or a kiln.Graph built with kiln.GraphBuilder. It is compiled once here (the compile cache makes a second time a load); `threads`
is how many threads run its kernels (None: one per core), `cache_dir` where compiled kernels are
cached, `input_shapes` static shapes for an ONNX model's inputs by name (fixing symbolic dims),
`precision` "bf16" to multiply in GEMMs and GEMM-computed convolutions with bf16 operands and
f32 sums (about twice the f32 rate; kiln-run --compare-precision reports the error), "f32" otherwise.
A model whose symbolic dims go beyond a batch that one compile serves (a sequence length) is
compiled for each size on its first run instead, and the last `max_specializations` sizes are
kept (`specializations` counts compiles, hits and evictions).
run() may be called from several threads at once.)")
      .def(py::init(&openSession), "model"_a, "threads"_a = py::none(), "cache_dir"_a = py::none(),
           "input_shapes"_a = py::none(), "precision"_a = "f32", "max_specializations"_a = 8)
      .def_property_readonly(
          "inputs", [](const SessionRef &session) { return infos(session->inputs()); },
          "the model's inputs (TensorInfo), in order")
      .def_property_readonly(
          "outputs", [](const SessionRef &session) { return infos(session->outputs()); },
          "the model's outputs (TensorInfo), in order")
      .def_property_readonly("threads", [](const SessionRef &session) { return session->threads(); })
      .def_property_readonly(
          "arena_bytes", [](const SessionRef &session) { return session->arenaBytes(); },
          "scratch bytes each concurrent run uses")
      .def_property_readonly(
          "specializations",
          [](const SessionRef &session) -> py::object {
            std::optional<kiln::python::SpecializationStats> stats = session->specializations();
            if (!stats)
              return py::none();
            py::list held;
            for (const kiln::DimBindings &sizes : stats->held)
              held.append(py::dict(py::cast(sizes)));
            return py::dict("compiles"_a = stats->compiles, "hits"_a = stats->hits,
                            "evictions"_a = stats->evictions, "held"_a = held);
          },
          "for a model compiled per size: {'compiles', 'hits', 'evictions', 'held': the sizes held ({symbol: "
          "extent}), most recent first}; None for a model compiled once")
      .def("run", &run, "feeds"_a, py::kw_only(), "copy"_a = false,
           R"(Runs the model on `feeds` ({input name: numpy array}, every input) and returns
{output name: numpy array}. Arrays of the input's dtype and shape that are C-contiguous are read
in place, without a copy; anything else raises TypeError (dtype) or ValueError (shape, layout),
unless copy=True, which converts what needs converting.)")
      .def("run_into", &runInto, "feeds"_a, "outputs"_a, py::kw_only(), "copy"_a = false,
           R"(Runs the model and writes every output into the caller's array in `outputs`
({output name: numpy array}, writeable, C-contiguous, of the output's dtype and shape, sharing
no memory with an input or another output). `copy` applies to the inputs, as in run().)")
      .def(
          "save",
          [](const SessionRef &session, const py::object &path) {
            std::optional<std::string> target = pathOf(path);
            if (!target)
              throw py::type_error("save takes a path (str or os.PathLike)");
            py::gil_scoped_release release;
            session->save(*target);
          },
          "path"_a, "Writes the model ahead of time as a shared object, as kiln-compile does; kiln.load(path) runs it.")
      .def(
          "profile",
          [](const SessionRef &session, const py::object &path) {
            std::optional<std::string> trace = pathOf(path);
            if (!trace)
              throw py::type_error("profile takes a path (str or os.PathLike) for the trace");
            session->startProfiling();
            return std::make_shared<ProfileScope>(ProfileScope{session, *trace});
          },
          "path"_a,
          "`with session.profile('trace.json'):` times every kernel launch of the runs inside and writes them as a "
          "Chrome trace (chrome://tracing, Perfetto) when the block ends.")
      .def("_bound_input_addresses",
           [](const SessionRef &session, const py::dict &feeds, bool copy) {
             // For the tests: the addresses run() would hand the kernels, to show that they
             // are the arrays' own buffers.
             std::vector<py::object> keepAlive;
             std::vector<uintptr_t> addresses;
             for (const kiln::Tensor &tensor : bindInputs(*session, feeds, copy, keepAlive))
               addresses.push_back(reinterpret_cast<uintptr_t>(tensor.data()));
             return addresses;
           },
           "feeds"_a, py::kw_only(), "copy"_a = false)
      .def("__repr__", [](const SessionRef &session) {
        return "<kiln.Session '" + session->what() + "', " + std::to_string(session->inputs().size()) + " inputs, " +
               std::to_string(session->outputs().size()) + " outputs, " + std::to_string(session->threads()) +
               " threads>";
      });

  kiln::python::bindGraph(m);
  kiln::python::bindOps(m);
  kiln::python::bindNn(m);
  kiln::python::bindTraining(m);

  m.def(
      "load",
      [](const py::object &path, std::optional<int> threads) {
        std::optional<std::string> file = pathOf(path);
        if (!file)
          throw py::type_error("kiln.load takes the path (str or os.PathLike) of a compiled model");
        SessionOptions options = sessionOptions(threads, py::none());
        py::gil_scoped_release release;
        return std::make_shared<Session>(Session::loadCompiled(*file, options));
      },
      "path"_a, "threads"_a = py::none(),
      "Loads a model that Session.save or kiln-compile wrote: no compiler runs.");
}
