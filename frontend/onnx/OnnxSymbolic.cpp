#include "frontend/onnx/OnnxSymbolic.h"

#include <functional>
#include <set>
#include <string>

#include "core/Error.h"
#include "core/SymbolicDim.h"
#include "ir/ops/Common.h"

namespace kiln::frontend {

bool mappingHandlesSymbols(std::string_view opType) {
  // Mappings that copy dims or map one to one onto ops of ir::inferenceHandlesSymbols (Clip's
  // bounds and the activations' attributes are constants; Max and Min chain broadcasting
  // binary ops; Shape gives a symbolic dim as its value (holdsSymbolicDims); Reshape's 0 copies the symbol, Flatten multiplies with dimMul, Gather checks constant
  // indices only against a static axis). Shape and Size are absent: their results would be
  // values of symbols, which kiln does not fold yet.
  static const std::set<std::string_view> kOps = {
      "Abs",       "Add",           "AveragePool",  "BatchNormalization", "Cast",       "Clip",
      "Concat",    "Conv",          "Div",          "Elu",                "Erf",        "Exp",
      "Flatten",   "Gather",        "Gemm",         "GlobalAveragePool",  "GlobalMaxPool",
      "HardSigmoid", "HardSwish",   "Identity",     "LayerNormalization", "LeakyRelu",  "Log",
      "LogSoftmax", "MatMul",       "Max",          "MaxPool",            "Min",        "Mul",
      "Neg",       "Pow",           "ReduceMax",    "ReduceMean",         "ReduceMin",  "ReduceSum",
      "Relu",      "Reshape",       "Selu",         "Sigmoid",            "Softmax",    "Softplus",
      "Shape",     "Slice",         "Split",        "Sqrt",               "Squeeze",    "Sub",
      "Tanh",      "Transpose",     "Unsqueeze",    "Expand",             "Where",      "Equal"};
  return kOps.count(opType) != 0;
}

void checkSymbolicOperands(const ImportContext &ctx, const onnx::NodeProto &node) {
  if (!node.domain().empty() && node.domain() != "ai.onnx")
    return; // other domains are refused elsewhere
  if (mappingHandlesSymbols(node.op_type()))
    return;
  for (int i = 0; i < node.input_size(); ++i) {
    const OnnxValue *value = node.input(i).empty() ? nullptr : ctx.lookup(node.input(i));
    if (!value) // absent, or undefined: the mapping reports that
      continue;
    const TensorType &type = value->type;
    if (!type.isStatic())
      fail("{} does not take symbolic dims yet (input {} '{}' is {}); fix the dims (kiln-run --dim, or "
           "input shapes) to import this model",
           node.op_type(), i, node.input(i), type.toString());
  }
}

bool holdsSymbolicDims(const Tensor &value) {
  if (!value.defined() || value.dtype() != DType::I64)
    return false;
  for (int64_t k = 0; k < value.numElements(); ++k)
    if (isSymbolicDim(value.getInt(k)))
      return true;
  return false;
}

namespace {

// The ops foldDimValues computes on dims.
const std::set<std::string_view> kDimArithmetic = {"Mul", "Add", "Sub", "Div", "Equal", "Where"};

/// Numpy broadcasting over small known tensors: each output element `combine`s the operands'
/// elements at its index (read as int64: dims keep their encodings).
Tensor broadcastCombine(const std::vector<Tensor> &operands, DType dtype,
                        const std::function<int64_t(const std::vector<int64_t> &)> &combine) {
  Shape shape = operands[0].shape();
  for (size_t i = 1; i < operands.size(); ++i)
    shape = ir::ops::broadcastShapes(shape, operands[i].shape());
  Tensor out(dtype, shape);
  std::vector<int64_t> values(operands.size());
  ir::ops::forEachIndex(shape, [&](const std::vector<int64_t> &index, int64_t flat) {
    for (size_t i = 0; i < operands.size(); ++i)
      values[i] = operands[i].getInt(ir::ops::broadcastSourceIndex(index, operands[i].shape()));
    out.setInt(flat, combine(values));
  });
  return out;
}

} // namespace

bool foldDimValues(ImportContext &ctx, const onnx::NodeProto &node) {
  const std::string &op = node.op_type();
  if (!kDimArithmetic.count(op) || node.output_size() != 1)
    return false;
  std::vector<Tensor> operands;
  bool holdsDims = false;
  for (int i = 0; i < node.input_size(); ++i) {
    const OnnxValue *value = node.input(i).empty() ? nullptr : ctx.lookup(node.input(i));
    if (!value || !value->known.defined())
      return false;
    holdsDims = holdsDims || holdsSymbolicDims(value->known);
    operands.push_back(value->known);
  }
  if (!holdsDims)
    return false;
  auto undecided = [&](int64_t a, int64_t b) -> int64_t {
    fail("{} of the symbolic dims {} and {} has no one value for every size; fix the dims (kiln-run --dim, or input "
         "shapes) to import this model",
         op, dimToString(a), dimToString(b));
  };
  bool where = op == "Where";
  if (operands.size() != (where ? 3u : 2u) || (where && operands[0].dtype() != DType::Bool) ||
      operands[where ? 1 : 0].dtype() != DType::I64 || operands[where ? 2 : 1].dtype() != DType::I64)
    fail("{} of a symbolic dim takes int64 dims{}", op, where ? " and a bool condition" : "");
  std::string what = op + " of a symbolic dim";
  Tensor result;
  if (where) {
    result = broadcastCombine(operands, DType::I64, [](const std::vector<int64_t> &v) { return v[0] ? v[1] : v[2]; });
  } else if (op == "Equal") {
    result = broadcastCombine(operands, DType::Bool, [&](const std::vector<int64_t> &v) -> int64_t {
      if (v[0] == v[1])
        return 1;
      if (!isSymbolicDim(v[0]) && !isSymbolicDim(v[1]))
        return 0;
      int64_t constant = isSymbolicDim(v[0]) ? v[1] : v[0];
      if (!isSymbolicDim(constant) && constant < 0)
        return 0; // a dim is never negative
      return undecided(v[0], v[1]);
    });
  } else {
    result = broadcastCombine(operands, DType::I64, [&](const std::vector<int64_t> &v) -> int64_t {
      if (op == "Mul")
        return dimMul(v[0], v[1], what);
      if (op == "Add")
        return dimAdd(v[0], v[1], what);
      if (op == "Sub")
        return dimAdd(v[0], dimMul(v[1], -1, what), what);
      if (!isSymbolicDim(v[0]) && !isSymbolicDim(v[1]) && v[1] != 0)
        return v[0] / v[1]; // ONNX's integer Div truncates, as C++ does
      std::optional<int64_t> quotient = dimDivExact(v[0], v[1]);
      return quotient ? *quotient : undecided(v[0], v[1]);
    });
  }
  ctx.defineKnown(node.output(0), result);
  return true;
}

void checkDimValuedOperands(const ImportContext &ctx, const onnx::NodeProto &node) {
  static const std::set<std::string_view> kMovesOrReadsDims = {
      "Gather", "Concat", "Unsqueeze", "Squeeze", "Slice", "Identity", "Reshape", "Cast", "Expand", "Shape"};
  if (kDimArithmetic.count(node.op_type()))
    return; // foldDimValues computes it, or says why it cannot
  bool moves = kMovesOrReadsDims.count(node.op_type()) != 0;
  for (int i = 0; i < node.input_size(); ++i) {
    const OnnxValue *value = node.input(i).empty() ? nullptr : ctx.lookup(node.input(i));
    if (!value || !holdsSymbolicDims(value->known))
      continue;
    // Cast moves a dim only to int64; Gather, Slice, Squeeze and Unsqueeze only as the data
    // they move (input 0: not as indices, bounds or axes); Concat, Reshape and Expand as data or
    // (the latter two) as the target shape they read as dims.
    const std::string &op = node.op_type();
    bool ok = moves && (op != "Cast" || OnnxAttrs(node).getInt("to", 0) == onnx::TensorProto::INT64) &&
              (i == 0 || op == "Concat" || op == "Reshape" || op == "Expand");
    if (!ok)
      fail("{} of a symbolic dim (input {} '{}' holds one, from a Shape of a symbolic input) is not supported yet; "
           "fix the dims (kiln-run --dim, or input shapes) to import this model",
           node.op_type(), i, node.input(i));
  }
}

} // namespace kiln::frontend
