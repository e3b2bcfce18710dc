// Loss ONNX ops: NegativeLogLikelihoodLoss maps onto kiln's nll_loss, and
// SoftmaxCrossEntropyLoss is, as ONNX defines it, nll_loss of log_softmax over the class axis
// (1), with that log_softmax as its optional second output (log_prob).
#include "frontend/onnx/OnnxOpTable.h"

namespace kiln::frontend {

using ir::OpKind;

namespace {

/// The reduction and ignore_index attributes shared by both losses. ONNX has no "no index"
/// value for ignore_index; when it is absent kiln's default (which ignores nothing) stays.
ir::AttrMap lossAttrs(const onnx::NodeProto &node) {
  OnnxAttrs attrs(node);
  ir::AttrMap result{{"reduction", attrs.getString("reduction", "mean")}};
  if (std::optional<int64_t> ignore = attrs.optInt("ignore_index"))
    result["ignore_index"] = *ignore;
  return result;
}

std::vector<ir::Value *> lossOperands(ImportContext &ctx, const onnx::NodeProto &node, ir::Value *input) {
  std::vector<ir::Value *> operands{input, ctx.input(node, 1)};
  if (ctx.hasInput(node, 2))
    operands.push_back(ctx.input(node, 2));
  return operands;
}

} // namespace

std::vector<ir::Value *> mapNegativeLogLikelihoodLoss(ImportContext &ctx, const onnx::NodeProto &node) {
  return {ctx.op(OpKind::NllLoss, lossOperands(ctx, node, ctx.input(node, 0)), lossAttrs(node))};
}

std::vector<ir::Value *> mapSoftmaxCrossEntropyLoss(ImportContext &ctx, const onnx::NodeProto &node) {
  ir::Value *scores = ctx.input(node, 0);
  if (scores->rank() < 2)
    fail("scores must be [N, C] or [N, C, d1, ...], got {}", shapeToString(scores->shape()));
  ir::Value *logProb = ctx.op(OpKind::LogSoftmax, {scores}, {{"axis", int64_t{1}}});
  ir::Value *loss = ctx.op(OpKind::NllLoss, lossOperands(ctx, node, logProb), lossAttrs(node));
  return {loss, logProb};
}

} // namespace kiln::frontend
