#pragma once
// The graph API's values as Python sees them (kiln.GraphBuilder, kiln.Value), shared by the
// binding files python/GraphBindings.cpp, OpBindings.cpp and NnBindings.cpp.
//
// A frontend::Var refers to its GraphBuilder by a plain pointer and must not outlive it; in
// Python nothing orders lifetimes, so a kiln.Value holds the builder too (PyValue). With the
// type casters below, the bindings take and return frontend::Var and frontend::Scalar as they
// are, so a frontend function is bound by naming it: a Python Value arrives as its Var, a Var
// returned goes back as a Value holding its builder, and a Python bool, int or float arrives as
// a Scalar of that kind (which decides dtype promotion, as in C++).
#include <memory>
#include <optional>
#include <string>

#include <pybind11/pybind11.h>

#include "frontend/GraphBuilder.h"
#include "frontend/Math.h"
#include "ir/BufferWrite.h"
#include "ir/Graph.h"
#include "python/Session.h"

namespace kiln::python {

namespace py = pybind11;

/// kiln.Value: a Var and the builder that must outlive it.
struct PyValue {
  std::shared_ptr<frontend::GraphBuilder> builder;
  frontend::Var var;
};

/// kiln.Graph: a finished graph; never mutated, so sessions and evaluations may share it.
/// `bufferWrites` are the outputs its builder appended for buffers that training overwrites
/// (BatchNorm's running statistics in training mode): what a training step compiled from it
/// writes back (python/TrainingBindings.cpp).
struct PyGraph {
  std::shared_ptr<const ir::Graph> graph;
  std::vector<ir::BufferWrite> bufferWrites;
};

/// A new builder that Vars can find again (by builderOf) while it lives.
std::shared_ptr<frontend::GraphBuilder> makeBuilder(const std::string &name);
/// The builder a Var of a makeBuilder builder belongs to; kiln::Error for any other.
std::shared_ptr<frontend::GraphBuilder> builderOf(const frontend::Var &var);

/// The dtype a Python object names: kiln's name ("f32", "bf16"), or anything numpy.dtype()
/// takes (np.float32, "float64"); uint16 is bf16, which numpy holds as its bits. TypeError
/// for anything else.
DType dtypeOf(py::handle object);
/// A shape or list of ints given as an int (one entry) or any sequence of ints.
std::vector<int64_t> intsOf(py::handle object, const char *what);

/// A numpy array (or anything numpy.asarray takes) as a tensor of its own dtype and shape,
/// copied (parameters and constants own their values).
Tensor tensorOf(py::handle object, const char *what);

/// The model source of a kiln.Graph (a copy of the graph for each build), or nullopt for
/// any other object: how kiln.Session(graph) compiles a graph built in Python.
std::optional<ModelSource> graphModelSource(py::handle object);

/// The options of `threads=` and `cache_dir=` (None: the defaults), as every compiling binding
/// takes them; ValueError for a thread count below 1.
SessionOptions sessionOptions(std::optional<int> threads, const py::object &cacheDir);

/// The bindings of each file, called by the module (python/Module.cpp).
void bindGraph(py::module_ &m);
void bindOps(py::module_ &m);
void bindNn(py::module_ &m);
void bindTraining(py::module_ &m);

} // namespace kiln::python

namespace pybind11::detail {

template <> struct type_caster<kiln::frontend::Var> {
  PYBIND11_TYPE_CASTER(kiln::frontend::Var, const_name("Value"));
  bool load(handle source, bool) {
    if (source.is_none()) { // an optional operand left out (a bias): frontend's undefined Var
      value = kiln::frontend::Var();
      return true;
    }
    if (!isinstance<kiln::python::PyValue>(source))
      return false;
    value = source.cast<const kiln::python::PyValue &>().var;
    return true;
  }
  static handle cast(const kiln::frontend::Var &var, return_value_policy, handle) {
    return pybind11::cast(kiln::python::PyValue{kiln::python::builderOf(var), var}).release();
  }
};

/// A Python bool, int or float (or a numpy scalar of those kinds) as a Scalar of that kind; a
/// Value is no Scalar, so overloads on (Var, Var) and (Var, Scalar) pick by the operand.
template <> struct type_caster<kiln::frontend::Scalar> {
  PYBIND11_TYPE_CASTER(kiln::frontend::Scalar, const_name("float"));
  type_caster() : value(0.0) {}
  bool load(handle source, bool) {
    PyObject *object = source.ptr();
    if (PyBool_Check(object) || isNumpyScalarOf(source, "bool_")) {
      value = kiln::frontend::Scalar(PyObject_IsTrue(object) == 1);
    } else if (PyLong_Check(object) || isNumpyScalarOf(source, "integer")) {
      value = kiln::frontend::Scalar(static_cast<int64_t>(pybind11::cast<int64_t>(source)));
    } else if (PyFloat_Check(object) || isNumpyScalarOf(source, "floating")) {
      value = kiln::frontend::Scalar(pybind11::cast<double>(source));
    } else {
      return false;
    }
    return true;
  }
  static handle cast(const kiln::frontend::Scalar &scalar, return_value_policy, handle) {
    return PyFloat_FromDouble(scalar.value);
  }

private:
  static bool isNumpyScalarOf(handle source, const char *kind) {
    if (!hasattr(source, "dtype"))
      return false;
    object numpy = module_::import("numpy");
    return isinstance(source, numpy.attr("generic")) &&
           isinstance(source, numpy.attr(kind));
  }
};

} // namespace pybind11::detail
