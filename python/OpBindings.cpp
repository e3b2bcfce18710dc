// The graph API's functions as the functions of kiln._kiln.ops (python/kiln/ops.py re-exports
// them). Three sources, none of them a per-op binding:
//   - the rows of ir/ElementwiseOps.def, by X-macro: a new row is a new Python function named
//     by its ApiName column in snake_case (logicalNot -> logical_not);
//   - the other frontend functions (frontend/Math.h, Movement.h, Functional.h), bound here by
//     name with torch's keyword arguments, since they are no table;
//   - every op of ir/Ops.def through `op(mnemonic, *inputs, **attrs)`, its attributes
//     converted by the op's declared kinds; _op_table() lists the ops and their attributes,
//     from which kiln/ops.py defines a function per op that has no frontend spelling.
#include <algorithm>
#include <optional>
#include <string>
#include <tuple>

#include <pybind11/stl.h>

#include "frontend/Functional.h"
#include "frontend/Math.h"
#include "frontend/Movement.h"
#include "ir/Op.h"
#include "python/GraphValue.h"

namespace kiln::python {

using namespace pybind11::literals;
namespace fe = frontend;
using fe::Scalar;
using fe::Var;

namespace {

/// The graph API's camelCase name in Python's snake_case: logicalNot -> logical_not.
std::string snakeCase(std::string_view camel) {
  std::string snake;
  for (char c : camel) {
    if (c >= 'A' && c <= 'Z') {
      snake += '_';
      snake += static_cast<char>(c - 'A' + 'a');
    } else {
      snake += c;
    }
  }
  return snake;
}

/// A binary function with a Value or a Python number on either side (not both numbers).
template <typename VarVar, typename VarScalar, typename ScalarVar>
void bindBinary(py::module_ &m, const std::string &name, const std::string &doc, VarVar both, VarScalar right,
                ScalarVar left) {
  m.def(name.c_str(), both, "a"_a, "b"_a, doc.c_str());
  m.def(name.c_str(), right, "a"_a, "b"_a);
  m.def(name.c_str(), left, "a"_a, "b"_a);
}
#define KILN_BIND_BINARY(fn, name, doc)                                                                       \
  bindBinary(                                                                                                 \
      m, name, doc, [](const Var &a, const Var &b) { return fe::fn(a, b); },                                  \
      [](const Var &a, Scalar b) { return fe::fn(a, b); }, [](Scalar a, const Var &b) { return fe::fn(a, b); })

std::vector<int64_t> axesOf(const py::object &axes) { return axes.is_none() ? std::vector<int64_t>{} : intsOf(axes, "axes"); }

/// A Python value as an attribute of the kind `spec` declares; TypeError naming op and attribute.
ir::Attribute attributeOf(ir::OpKind op, const ir::AttrSpec &spec, py::handle value) {
  auto wrongType = [&](const char *expected) {
    return py::type_error(fmt::format("{}: attribute '{}' takes {}, got {}", ir::opName(op), spec.name, expected,
                                      std::string(py::repr(value))));
  };
  PyObject *object = value.ptr();
  switch (spec.kind) {
  case ir::AttrKind::Int:
    if (!PyLong_Check(object) && !PyBool_Check(object))
      throw wrongType("an int");
    return py::cast<int64_t>(value);
  case ir::AttrKind::Float:
    if (!PyLong_Check(object) && !PyFloat_Check(object))
      throw wrongType("a float");
    return py::cast<double>(value);
  case ir::AttrKind::Ints: return intsOf(value, ("attribute " + spec.name).c_str());
  case ir::AttrKind::Floats:
    try {
      return py::cast<std::vector<double>>(value);
    } catch (const py::cast_error &) {
      throw wrongType("a sequence of floats");
    }
  case ir::AttrKind::String:
    if (!py::isinstance<py::str>(value))
      throw wrongType("a str");
    return py::cast<std::string>(value);
  case ir::AttrKind::DType: return dtypeOf(value);
  case ir::AttrKind::Tensor: return tensorOf(value, ("attribute " + spec.name).c_str());
  }
  throw wrongType("a value of a kind kiln does not know");
}

/// Any op of ir/Ops.def on Values: one Value back, or a list for an op with several results.
py::object genericOp(const std::string &mnemonic, const std::vector<Var> &inputs, const py::kwargs &attrs) {
  std::optional<ir::OpKind> op = ir::parseOpName(mnemonic);
  if (!op || *op == ir::OpKind::Kernel)
    throw py::value_error("no op '" + mnemonic + "' (kiln.ops lists them)");
  if (inputs.empty())
    throw py::type_error(mnemonic + " needs at least one input Value (sources are GraphBuilder methods)");
  const ir::OpDef &def = ir::opDef(*op);
  ir::AttrMap converted;
  for (auto [key, value] : attrs) {
    std::string name = py::cast<std::string>(key);
    auto spec = std::find_if(def.attrs.begin(), def.attrs.end(), [&](const ir::AttrSpec &s) { return s.name == name; });
    if (spec == def.attrs.end()) {
      std::string known;
      for (const ir::AttrSpec &s : def.attrs)
        known += (known.empty() ? "" : ", ") + s.name;
      throw py::type_error(fmt::format("{}: unknown attribute '{}'; its attributes are {}", mnemonic, name,
                                       known.empty() ? "none" : known));
    }
    converted[name] = attributeOf(*op, *spec, value);
  }
  std::vector<Var> results = inputs.front().builder().opMulti(*op, inputs, std::move(converted));
  if (results.size() == 1)
    return py::cast(results.front());
  return py::cast(results);
}

/// Every op as (mnemonic, min inputs, max inputs (-1: any), [(attribute, kind, required)]).
py::list opTable() {
  py::list table;
#define OP(Enum, ...) ir::OpKind::Enum,
  static constexpr ir::OpKind kOps[] = {
#include "ir/Ops.def"
  };
  for (ir::OpKind op : kOps) {
    const ir::OpTraits &traits = ir::opTraits(op);
    py::list attrs;
    for (const ir::AttrSpec &spec : ir::opDef(op).attrs)
      attrs.append(py::make_tuple(spec.name, std::string(ir::attrKindName(spec.kind)), !spec.defaultValue));
    table.append(py::make_tuple(std::string(traits.name), traits.minInputs, traits.maxInputs, attrs));
  }
  return table;
}

void bindElementwise(py::module_ &m, py::dict &spellings) {
#define UNARY_OP(Enum, mnemonic, apiName, ...)                                                                \
  m.def(snakeCase(#apiName).c_str(), [](const Var &x) { return fe::apiName(x); }, "x"_a,                     \
        "The elementwise op " mnemonic " (ir/ElementwiseOps.def).");                                          \
  spellings[mnemonic] = snakeCase(#apiName);
#define BINARY_OP(Enum, mnemonic, apiName, ...)                                                               \
  KILN_BIND_BINARY(apiName, snakeCase(#apiName),                                                              \
                   "The elementwise op " mnemonic " (ir/ElementwiseOps.def), with numpy broadcasting and "    \
                   "torch's promotion; either operand may be a Python number.");                              \
  spellings[mnemonic] = snakeCase(#apiName);
#include "ir/ElementwiseOps.def"
  KILN_BIND_BINARY(mod, "mod", "Python's %: the remainder takes the divisor's sign.");
  spellings["mod"] = "mod";
  KILN_BIND_BINARY(logicalAnd, "logical_and", "Both operands converted to bool first.");
  KILN_BIND_BINARY(logicalOr, "logical_or", "Both operands converted to bool first.");
  KILN_BIND_BINARY(logicalXor, "logical_xor", "Both operands converted to bool first.");

  m.def("cast", [](const Var &x, const py::object &dtype) { return fe::cast(x, dtypeOf(dtype)); }, "x"_a, "dtype"_a);
  m.def("where", py::overload_cast<const Var &, const Var &, const Var &>(&fe::where), "cond"_a, "x"_a, "y"_a,
        "Elementwise select; `x` or `y` may be a Python number.");
  m.def("where", py::overload_cast<const Var &, const Var &, Scalar>(&fe::where), "cond"_a, "x"_a, "y"_a);
  m.def("where", py::overload_cast<const Var &, Scalar, const Var &>(&fe::where), "cond"_a, "x"_a, "y"_a);
  m.def("clamp", &fe::clamp, "x"_a, "min"_a = py::none(), "max"_a = py::none());
  spellings["where"] = "where";
  spellings["cast"] = "cast";
  spellings["clip"] = "clamp";
}

void bindReductions(py::module_ &m, py::dict &spellings) {
  using Reduction = Var (*)(const Var &, std::vector<int64_t>, bool);
  for (auto [name, mnemonic, fn] : {std::tuple<const char *, const char *, Reduction>{"sum", "reduce_sum", &fe::sum},
                                    {"mean", "reduce_mean", &fe::mean},
                                    {"prod", "reduce_prod", &fe::prod},
                                    {"max", "reduce_max", &fe::max},
                                    {"min", "reduce_min", &fe::min}}) {
    m.def(
        name, [fn = fn](const Var &x, const py::object &axes, bool keepdims) { return fn(x, axesOf(axes), keepdims); },
        "x"_a, "axes"_a = py::none(), "keepdims"_a = false,
        "Reduces over `axes` (an int or a sequence; None: every axis), with torch's dtypes.");
    spellings[mnemonic] = name;
  }
  m.def("argmax", &fe::argmax, "x"_a, "axis"_a, "keepdims"_a = false);
  m.def("argmin", &fe::argmin, "x"_a, "axis"_a, "keepdims"_a = false);
}

void bindMovement(py::module_ &m) {
  m.def("reshape", &fe::reshape, "x"_a, "shape"_a, "One entry of `shape` may be -1.");
  m.def("permute", &fe::permute, "x"_a, "perm"_a);
  m.def("transpose", &fe::transpose, "x"_a, "axis0"_a, "axis1"_a);
  m.def("broadcast_to", &fe::broadcastTo, "x"_a, "shape"_a);
  m.def("slice", &fe::slice, "x"_a, "starts"_a, "ends"_a, "axes"_a = std::vector<int64_t>{},
        "steps"_a = std::vector<int64_t>{});
  m.def("narrow", &fe::narrow, "x"_a, "axis"_a, "start"_a, "length"_a);
  m.def("pad", &fe::pad, "x"_a, "pads"_a, "mode"_a = "constant", "value"_a = 0.0,
        "pads: [begin of each axis..., end of each axis...]; mode constant, reflect or edge.");
  m.def("concat", &fe::concat, "xs"_a, "axis"_a);
  m.def("split", &fe::split, "x"_a, "sizes"_a, "axis"_a = 0);
  m.def("chunk", &fe::chunk, "x"_a, "chunks"_a, "axis"_a = 0);
  m.def("squeeze", [](const Var &x, const py::object &axes) { return fe::squeeze(x, axesOf(axes)); }, "x"_a,
        "axes"_a = py::none());
  m.def("unsqueeze", [](const Var &x, const py::object &axes) { return fe::unsqueeze(x, intsOf(axes, "axes")); },
        "x"_a, "axes"_a);
  m.def("flatten", &fe::flatten, "x"_a, "start"_a = 0, "end"_a = -1);
  m.def("gather", &fe::gather, "x"_a, "indices"_a, "axis"_a);
  m.def("scatter_add", &fe::scatterAdd, "x"_a, "indices"_a, "updates"_a, "axis"_a);
}

void bindFunctional(py::module_ &m, py::dict &spellings) {
  m.def("matmul", &fe::matmul, "a"_a, "b"_a);
  m.def("linear", &fe::linear, "x"_a, "weight"_a, "bias"_a = py::none());
  m.def("conv", &fe::conv, "x"_a, "weight"_a, "bias"_a = py::none(), "strides"_a = std::vector<int64_t>{},
        "pads"_a = std::vector<int64_t>{}, "dilations"_a = std::vector<int64_t>{}, "groups"_a = 1);
  m.def("conv1d", &fe::conv1d, "x"_a, "weight"_a, "bias"_a = py::none(), "stride"_a = 1, "padding"_a = 0,
        "dilation"_a = 1, "groups"_a = 1);
  m.def(
      "conv2d",
      [](const Var &x, const Var &weight, const Var &bias, const py::object &stride, const py::object &padding,
         const py::object &dilation, int64_t groups) {
        return fe::conv2d(x, weight, bias, intsOf(stride, "stride"), intsOf(padding, "padding"),
                          intsOf(dilation, "dilation"), groups);
      },
      "x"_a, "weight"_a, "bias"_a = py::none(), "stride"_a = 1, "padding"_a = 0, "dilation"_a = 1, "groups"_a = 1);
  m.def(
      "max_pool2d",
      [](const Var &x, const py::object &kernel, const py::object &stride, const py::object &padding,
         const py::object &dilation, bool ceilMode) {
        return fe::maxPool2d(x, intsOf(kernel, "kernel_size"), axesOf(stride), intsOf(padding, "padding"),
                             intsOf(dilation, "dilation"), ceilMode);
      },
      "x"_a, "kernel_size"_a, "stride"_a = py::none(), "padding"_a = 0, "dilation"_a = 1, "ceil_mode"_a = false);
  m.def(
      "avg_pool2d",
      [](const Var &x, const py::object &kernel, const py::object &stride, const py::object &padding, bool ceilMode,
         bool countIncludePad) {
        return fe::avgPool2d(x, intsOf(kernel, "kernel_size"), axesOf(stride), intsOf(padding, "padding"), ceilMode,
                             countIncludePad);
      },
      "x"_a, "kernel_size"_a, "stride"_a = py::none(), "padding"_a = 0, "ceil_mode"_a = false,
      "count_include_pad"_a = true);
  m.def("batch_norm", &fe::batchNorm, "x"_a, "scale"_a, "bias"_a, "mean"_a, "var"_a, "epsilon"_a = 1e-5);
  m.def("layer_norm", &fe::layerNorm, "x"_a, "axis"_a = -1, "weight"_a = py::none(), "bias"_a = py::none(),
        "epsilon"_a = 1e-5);
  m.def("softmax", &fe::softmax, "x"_a, "axis"_a = -1);
  m.def("log_softmax", &fe::logSoftmax, "x"_a, "axis"_a = -1);
  m.def("gelu", &fe::gelu, "x"_a, "approximate"_a = "none");
  m.def("silu", &fe::silu, "x"_a);
  m.def("mse_loss", &fe::mseLoss, "prediction"_a, "target"_a, "reduction"_a = "mean");
  m.def("cross_entropy", &fe::crossEntropy, "logits"_a, "labels"_a, "reduction"_a = "mean");
  spellings["max_pool"] = "max_pool2d";
  spellings["avg_pool"] = "avg_pool2d";
}

} // namespace

void bindOps(py::module_ &parent) {
  py::module_ m = parent.def_submodule("ops", "The graph API's functions (kiln.ops re-exports them).");
  // {mnemonic: Python name} where the two differ or the function is the frontend's.
  py::dict spellings;
  bindElementwise(m, spellings);
  bindReductions(m, spellings);
  bindMovement(m);
  bindFunctional(m, spellings);
  m.attr("_op_spellings") = spellings;
  m.def("_op_table", &opTable);
  m.def("op", &genericOp, "op"_a, "inputs"_a,
        "Any op of kiln's op table by mnemonic on a list of input Values, its attributes as keywords; "
        "one Value back, or a list for an op with several results.");
}

} // namespace kiln::python
