// Movement ONNX ops that cut or assemble regions, and Gather: Slice, Pad, Concat, Split.
// Their static operands moved from attributes to inputs over the opsets (Slice at 10, Pad at
// 11 and again at 18 with `axes`, Split at 13 and at 18 with `num_outputs`); each mapping
// reads whichever form the model's opset has and hands kiln one attribute form.
#include <algorithm>

#include "core/SymbolicDim.h"
#include "frontend/onnx/OnnxOpTable.h"

namespace kiln::frontend {

using ir::OpKind;

std::vector<ir::Value *> mapSlice(ImportContext &ctx, const onnx::NodeProto &node) {
  ir::Value *x = ctx.input(node, 0);
  std::vector<int64_t> starts, ends, axes, steps;
  if (ctx.opset() < 10) {
    OnnxAttrs attrs(node);
    starts = attrs.getInts("starts");
    ends = attrs.getInts("ends");
    axes = attrs.getInts("axes");
  } else {
    starts = ctx.staticInts(node, 1, "starts");
    ends = ctx.staticInts(node, 2, "ends");
    if (ctx.hasInput(node, 3))
      axes = ctx.staticInts(node, 3, "axes");
    if (ctx.hasInput(node, 4))
      steps = ctx.staticInts(node, 4, "steps");
  }
  // kiln's slice has ONNX's semantics (clamping, negative steps) already.
  return {ctx.op(OpKind::Slice, {x}, {{"starts", starts}, {"ends", ends}, {"axes", axes}, {"steps", steps}})};
}

void checkPad(const onnx::NodeProto &node, int64_t, std::vector<std::string> &problems) {
  std::string mode = OnnxAttrs(node).getString("mode", "constant");
  if (mode != "constant" && mode != "reflect" && mode != "edge")
    problems.push_back(fmt::format("mode '{}' is not supported (constant, reflect or edge)", mode));
}

std::vector<ir::Value *> mapPad(ImportContext &ctx, const onnx::NodeProto &node) {
  ir::Value *x = ctx.input(node, 0);
  OnnxAttrs attrs(node);
  std::vector<int64_t> pads;
  double value = 0;
  if (ctx.opset() < 11) {
    pads = attrs.getInts(ctx.opset() < 2 ? "paddings" : "pads"); // renamed at opset 2
    value = attrs.getFloat("value", 0.0);
  } else {
    pads = ctx.staticInts(node, 1, "pads");
    if (ctx.hasInput(node, 2))
      value = ctx.staticScalar(node, 2, "constant_value");
  }
  int64_t rank = x->rank();
  if (ctx.opset() >= 18 && ctx.hasInput(node, 3)) {
    // pads then hold [begins..., ends...] for the listed axes only; the rest get 0.
    std::vector<int64_t> axes = ctx.staticInts(node, 3, "axes");
    if (pads.size() != 2 * axes.size())
      fail("pads {} need 2 entries per axis in {}", shapeToString(pads), shapeToString(axes));
    std::vector<int64_t> full(static_cast<size_t>(2 * rank), 0);
    size_t n = axes.size();
    for (size_t k = 0; k < n; ++k) {
      int64_t axis = normalizeAxis(axes[k], rank, "axes");
      full[axis] = pads[k];
      full[rank + axis] = pads[n + k];
    }
    pads = full;
  }
  if (std::all_of(pads.begin(), pads.end(), [](int64_t p) { return p == 0; }) &&
      static_cast<int64_t>(pads.size()) == 2 * rank)
    return {x};
  return {ctx.op(OpKind::Pad, {x}, {{"pads", pads}, {"mode", attrs.getString("mode", "constant")}, {"value", value}})};
}

std::vector<ir::Value *> mapConcat(ImportContext &ctx, const onnx::NodeProto &node) {
  std::optional<int64_t> axis = OnnxAttrs(node).optInt("axis");
  if (!axis && ctx.opset() < 4) // optional, default 1, before opset 4
    axis = 1;
  if (!axis)
    fail("attribute 'axis' is required");
  std::vector<ir::Value *> inputs;
  for (int i = 0; i < ctx.numInputs(node); ++i)
    inputs.push_back(ctx.input(node, i));
  if (inputs.empty())
    fail("needs at least one input");
  return {ctx.op(OpKind::Concat, inputs, {{"axis", *axis}})};
}

std::vector<ir::Value *> mapSplit(ImportContext &ctx, const onnx::NodeProto &node) {
  ir::Value *x = ctx.input(node, 0);
  OnnxAttrs attrs(node);
  int64_t axis = normalizeAxis(attrs.getInt("axis", 0), x->rank(), "axis");
  int64_t dim = requireStaticDim(x->shape(), static_cast<size_t>(axis), "Split");
  auto outputs = static_cast<int64_t>(node.output_size());
  std::vector<int64_t> sizes;
  if (ctx.opset() < 2 && ctx.hasInput(node, 1)) // opset 1 also took the sizes as an input
    sizes = ctx.staticInts(node, 1, "split sizes");
  else if (ctx.opset() < 13)
    sizes = attrs.getInts("split");
  else if (ctx.hasInput(node, 1))
    sizes = ctx.staticInts(node, 1, "split sizes");
  std::optional<int64_t> numOutputs = ctx.opset() >= 18 ? attrs.optInt("num_outputs") : std::nullopt;
  if (!sizes.empty() && numOutputs)
    fail("give either the split sizes or num_outputs, not both");
  if (sizes.empty() && numOutputs) {
    // Opset 18: chunks of ceil(dim / n); the last one holds what is left and may be smaller.
    int64_t n = *numOutputs;
    if (n < 1 || n != outputs)
      fail("num_outputs {} must be >= 1 and equal the node's {} outputs", n, outputs);
    int64_t chunk = dim / n + (dim % n != 0 ? 1 : 0); // not (dim + n - 1) / n: dim may be near 2^63
    if (chunk * (n - 1) > dim)
      fail("cannot split a dim of {} into {} chunks of {}", dim, n, chunk);
    sizes.assign(static_cast<size_t>(n - 1), chunk);
    sizes.push_back(dim - chunk * (n - 1));
  } else if (sizes.empty()) {
    // Before opset 18 the outputs split the dim evenly.
    if (outputs < 1 || dim % outputs != 0)
      fail("axis {} of size {} does not split evenly into {} outputs", axis, dim, outputs);
    sizes.assign(static_cast<size_t>(outputs), dim / outputs);
  }
  if (static_cast<int64_t>(sizes.size()) != outputs)
    fail("{} split sizes {} for {} outputs", sizes.size(), shapeToString(sizes), outputs);
  return ctx.opMulti(OpKind::Split, {x}, {{"axis", axis}, {"sizes", sizes}});
}

std::vector<ir::Value *> mapGather(ImportContext &ctx, const onnx::NodeProto &node) {
  ir::Value *data = ctx.input(node, 0);
  int64_t axis = normalizeAxis(OnnxAttrs(node).getInt("axis", 0), data->rank(), "axis");
  // Constant indices are checked now, so a bad model fails at import rather than at run time.
  // (Against a static axis: a symbolic one's extent is known only when the graph is bound.)
  std::optional<Tensor> indices = isSymbolicDim(data->shape()[axis]) ? std::nullopt : ctx.knownInput(node, 1);
  if (indices) {
    int64_t dim = data->shape()[axis];
    if (isFloat(indices->dtype()) || indices->dtype() == DType::Bool)
      fail("indices must be integers, got {}", dtypeName(indices->dtype()));
    for (int64_t k = 0; k < indices->numElements(); ++k) {
      int64_t index = indices->getInt(k);
      if (index < -dim || index >= dim)
        fail("index {} (element {} of the indices) is out of range [{}, {}) for axis {} of data {}", index, k, -dim,
             dim, axis, shapeToString(data->shape()));
    }
  }
  return {ctx.op(OpKind::Gather, {data, ctx.input(node, 1)}, {{"axis", axis}})};
}

} // namespace kiln::frontend
