// Reduction ONNX ops. Their axes moved from an attribute to an optional input in two steps:
// ReduceSum at opset 13, every other Reduce* at opset 18 (which also added
// noop_with_empty_axes to them). keepdims defaults to 1 in ONNX (kiln's default is 0, so it is
// always passed). No axes means every axis, as in kiln, unless noop_with_empty_axes makes
// the op an identity. Every Reduce* has a kiln op of the same meaning.
#include "frontend/onnx/OnnxOpTable.h"

namespace kiln::frontend {

using ir::OpKind;

namespace {

struct ReduceSpec {
  std::vector<int64_t> axes; // empty: every axis
  bool keepdims = true;
  bool identity = false; // noop_with_empty_axes with no axes
};

ReduceSpec readReduce(ImportContext &ctx, const onnx::NodeProto &node, int64_t axesInputSince) {
  OnnxAttrs attrs(node);
  ReduceSpec spec;
  int64_t keepdims = attrs.getInt("keepdims", 1);
  if (keepdims != 0 && keepdims != 1)
    fail("keepdims must be 0 or 1, got {}", keepdims);
  spec.keepdims = keepdims == 1;
  if (ctx.opset() >= axesInputSince) {
    if (ctx.hasInput(node, 1))
      spec.axes = ctx.staticInts(node, 1, "axes");
    spec.identity = spec.axes.empty() && attrs.getInt("noop_with_empty_axes", 0) != 0;
  } else {
    spec.axes = attrs.getInts("axes");
  }
  return spec;
}

/// The common shape of every Reduce* mapping: read the axes, short-cut the identity case,
/// otherwise one kiln reduction with the same axes and keepdims.
std::vector<ir::Value *> simpleReduce(ImportContext &ctx, const onnx::NodeProto &node, OpKind op,
                                      int64_t axesInputSince) {
  ReduceSpec spec = readReduce(ctx, node, axesInputSince);
  ir::Value *x = ctx.input(node, 0);
  if (spec.identity)
    return {x};
  return {ctx.op(op, {x}, {{"axes", spec.axes}, {"keepdims", int64_t{spec.keepdims ? 1 : 0}}})};
}

std::vector<ir::Value *> argReduce(ImportContext &ctx, const onnx::NodeProto &node, OpKind op) {
  OnnxAttrs attrs(node);
  return {ctx.op(op, {ctx.input(node, 0)},
                 {{"axis", attrs.getInt("axis", 0)},
                  {"keepdims", attrs.getInt("keepdims", 1)},
                  {"select_last_index", attrs.getInt("select_last_index", 0)}})};
}

} // namespace

std::vector<ir::Value *> mapReduceSum(ImportContext &ctx, const onnx::NodeProto &node) {
  return simpleReduce(ctx, node, OpKind::ReduceSum, 13);
}

std::vector<ir::Value *> mapReduceMean(ImportContext &ctx, const onnx::NodeProto &node) {
  return simpleReduce(ctx, node, OpKind::ReduceMean, 18);
}

std::vector<ir::Value *> mapReduceMax(ImportContext &ctx, const onnx::NodeProto &node) {
  return simpleReduce(ctx, node, OpKind::ReduceMax, 18);
}

std::vector<ir::Value *> mapReduceMin(ImportContext &ctx, const onnx::NodeProto &node) {
  return simpleReduce(ctx, node, OpKind::ReduceMin, 18);
}

std::vector<ir::Value *> mapReduceProd(ImportContext &ctx, const onnx::NodeProto &node) {
  return simpleReduce(ctx, node, OpKind::ReduceProd, 18);
}

std::vector<ir::Value *> mapReduceL1(ImportContext &ctx, const onnx::NodeProto &node) {
  return simpleReduce(ctx, node, OpKind::ReduceL1, 18);
}

std::vector<ir::Value *> mapReduceL2(ImportContext &ctx, const onnx::NodeProto &node) {
  return simpleReduce(ctx, node, OpKind::ReduceL2, 18);
}

std::vector<ir::Value *> mapReduceSumSquare(ImportContext &ctx, const onnx::NodeProto &node) {
  return simpleReduce(ctx, node, OpKind::ReduceSumSquare, 18);
}

std::vector<ir::Value *> mapReduceLogSum(ImportContext &ctx, const onnx::NodeProto &node) {
  return simpleReduce(ctx, node, OpKind::ReduceLogSum, 18);
}

std::vector<ir::Value *> mapReduceLogSumExp(ImportContext &ctx, const onnx::NodeProto &node) {
  return simpleReduce(ctx, node, OpKind::ReduceLogSumExp, 18);
}

std::vector<ir::Value *> mapArgMax(ImportContext &ctx, const onnx::NodeProto &node) {
  return argReduce(ctx, node, OpKind::ArgMax);
}

std::vector<ir::Value *> mapArgMin(ImportContext &ctx, const onnx::NodeProto &node) {
  return argReduce(ctx, node, OpKind::ArgMin);
}

} // namespace kiln::frontend
