// Activation ONNX ops. Each has a kiln op of the same meaning (ir/ops/Activation.cpp and NN.cpp
// define them), so a mapping only reads the ONNX attributes, with ONNX's defaults, and passes
// them on. (Relu, Sigmoid and Tanh are rows of ir/ElementwiseOps.def, mapped from its OnnxName
// column.) Softmax, LogSoftmax and Hardmax differ by opset: before 13 the
// input is coerced to 2-D at `axis` (default 1) and normalised over the whole second dim; from
// 13 on they normalise over the one dim `axis` (default -1).
#include "frontend/onnx/OnnxOpTable.h"

namespace kiln::frontend {

using ir::OpKind;

namespace {

/// One kiln op on operand 0 with float attributes read from the node (name, ONNX default).
std::vector<ir::Value *> floatAttrOp(ImportContext &ctx, const onnx::NodeProto &node, OpKind op,
                                     std::initializer_list<std::pair<const char *, double>> attrDefaults) {
  OnnxAttrs attrs(node);
  ir::AttrMap kilnAttrs;
  for (const auto &[name, fallback] : attrDefaults)
    kilnAttrs[name] = attrs.getFloat(name, fallback);
  return {ctx.op(op, {ctx.input(node, 0)}, std::move(kilnAttrs))};
}

/// The [outer, inner] view that opset < 13 softmax-like ops compute on.
Shape coercedTo2D(const Shape &shape, int64_t axisAttr) {
  int64_t rank = static_cast<int64_t>(shape.size());
  // axis may equal rank here (then everything is "outer"), unlike a normal axis.
  int64_t axis = axisAttr < 0 ? axisAttr + rank : axisAttr;
  if (axis < 0 || axis > rank)
    fail("axis {} is out of range for rank {}", axisAttr, rank);
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < rank; ++d)
    (d < axis ? outer : inner) *= shape[d];
  return {outer, inner};
}

/// `op` with its `axis` over the axis ONNX normalises: directly from opset 13, on the 2-D
/// coercion (then reshaped back) before it.
ir::Value *overSoftmaxAxis(ImportContext &ctx, const onnx::NodeProto &node, OpKind op) {
  ir::Value *x = ctx.input(node, 0);
  OnnxAttrs attrs(node);
  if (ctx.opset() >= 13)
    return ctx.op(op, {x}, {{"axis", attrs.getInt("axis", -1)}});
  Shape original = x->shape();
  ir::Value *flat = reshapeTo(ctx, x, coercedTo2D(original, attrs.getInt("axis", 1)));
  return reshapeTo(ctx, ctx.op(op, {flat}, {{"axis", int64_t{1}}}), original);
}

} // namespace

std::vector<ir::Value *> mapLeakyRelu(ImportContext &ctx, const onnx::NodeProto &node) {
  return floatAttrOp(ctx, node, OpKind::LeakyRelu, {{"alpha", 0.01}});
}

std::vector<ir::Value *> mapPRelu(ImportContext &ctx, const onnx::NodeProto &node) {
  return {ctx.op(OpKind::PRelu, {ctx.input(node, 0), ctx.input(node, 1)})};
}

std::vector<ir::Value *> mapElu(ImportContext &ctx, const onnx::NodeProto &node) {
  return floatAttrOp(ctx, node, OpKind::Elu, {{"alpha", 1.0}});
}

std::vector<ir::Value *> mapSelu(ImportContext &ctx, const onnx::NodeProto &node) {
  // The defaults are the float32 constants of the SELU paper as ONNX states them.
  return floatAttrOp(ctx, node, OpKind::Selu,
                     {{"alpha", 1.67326319217681884765625}, {"gamma", 1.05070102214813232421875}});
}

std::vector<ir::Value *> mapCelu(ImportContext &ctx, const onnx::NodeProto &node) {
  return floatAttrOp(ctx, node, OpKind::Celu, {{"alpha", 1.0}});
}

std::vector<ir::Value *> mapHardSigmoid(ImportContext &ctx, const onnx::NodeProto &node) {
  return floatAttrOp(ctx, node, OpKind::HardSigmoid, {{"alpha", 0.2}, {"beta", 0.5}});
}

std::vector<ir::Value *> mapHardSwish(ImportContext &ctx, const onnx::NodeProto &node) {
  return floatAttrOp(ctx, node, OpKind::HardSwish, {});
}

std::vector<ir::Value *> mapSoftplus(ImportContext &ctx, const onnx::NodeProto &node) {
  return floatAttrOp(ctx, node, OpKind::Softplus, {});
}

std::vector<ir::Value *> mapSoftsign(ImportContext &ctx, const onnx::NodeProto &node) {
  return floatAttrOp(ctx, node, OpKind::Softsign, {});
}

std::vector<ir::Value *> mapMish(ImportContext &ctx, const onnx::NodeProto &node) {
  return floatAttrOp(ctx, node, OpKind::Mish, {});
}

std::vector<ir::Value *> mapThresholdedRelu(ImportContext &ctx, const onnx::NodeProto &node) {
  return floatAttrOp(ctx, node, OpKind::ThresholdedRelu, {{"alpha", 1.0}});
}

std::vector<ir::Value *> mapShrink(ImportContext &ctx, const onnx::NodeProto &node) {
  return floatAttrOp(ctx, node, OpKind::Shrink, {{"bias", 0.0}, {"lambd", 0.5}});
}

std::vector<ir::Value *> mapSoftmax(ImportContext &ctx, const onnx::NodeProto &node) {
  return {overSoftmaxAxis(ctx, node, OpKind::Softmax)};
}

std::vector<ir::Value *> mapLogSoftmax(ImportContext &ctx, const onnx::NodeProto &node) {
  return {overSoftmaxAxis(ctx, node, OpKind::LogSoftmax)};
}

std::vector<ir::Value *> mapHardmax(ImportContext &ctx, const onnx::NodeProto &node) {
  return {overSoftmaxAxis(ctx, node, OpKind::Hardmax)};
}

} // namespace kiln::frontend
