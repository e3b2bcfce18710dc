#include "frontend/onnx/OnnxSymbolic.h"

#include <set>
#include <string>

#include "core/Error.h"
#include "core/SymbolicDim.h"

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
      "Tanh",      "Transpose",     "Unsqueeze",    "Expand"};
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

void checkDimValuedOperands(const ImportContext &ctx, const onnx::NodeProto &node) {
  static const std::set<std::string_view> kMovesOrReadsDims = {
      "Gather", "Concat", "Unsqueeze", "Squeeze", "Slice", "Identity", "Reshape", "Cast", "Expand", "Shape"};
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
