// Quantisation ONNX ops, which kiln has no ops for: they are written with casts, arithmetic and
// the contractions, following the ONNX definitions.
//   DequantizeLinear      y = (x - zero_point) * scale
//   QuantizeLinear        y = saturate(round(x / scale) + zero_point), halves to even
//   DynamicQuantizeLinear the uint8 scale and zero point that cover [min(x, 0), max(x, 0)]
//   MatMulInteger, ConvInteger   int32 products of (a - a_zero_point) and (b - b_zero_point)
//   QLinearMatMul, QLinearConv   those products rescaled by a_scale * b_scale / y_scale and
//                                quantised to y_zero_point's type
// Scales and zero points are scalars or, per axis, 1-D along `axis` (DequantizeLinear,
// QuantizeLinear), per row of A / column of B (MatMulInteger) or per output channel (the
// convolutions' weights). Integer sums are exact: matmul accumulates integers exactly and
// ConvInteger's conv runs in f64, where sums of 8-bit products are exact.
#include <algorithm>
#include <limits>

#include "frontend/onnx/OnnxWindow.h"

namespace kiln::frontend {

using ir::OpKind;

namespace {

ir::Value *castTo(ImportContext &ctx, ir::Value *v, DType dtype) {
  return v->dtype() == dtype ? v : ctx.op(OpKind::Cast, {v}, {{"to", dtype}});
}

/// A scale or zero point shaped to broadcast against a rank-`rank` value: a 1-D tensor of
/// more than one element lines up with dim `axis`, anything else broadcasts as it is.
ir::Value *alongAxis(ImportContext &ctx, ir::Value *v, int64_t rank, int64_t axis) {
  if (v->rank() != 1 || v->shape()[0] == 1)
    return v;
  Shape shape(static_cast<size_t>(rank), 1);
  shape[static_cast<size_t>(normalizeAxis(axis, rank, "axis"))] = v->shape()[0];
  return reshapeTo(ctx, v, shape);
}

/// v - zero_point (when given) in `dtype`, the zero point lined up with `axis`.
ir::Value *centered(ImportContext &ctx, const onnx::NodeProto &node, ir::Value *v, int zeroPointInput, DType dtype,
                    int64_t axis) {
  ir::Value *result = castTo(ctx, v, dtype);
  if (!ctx.hasInput(node, zeroPointInput))
    return result;
  ir::Value *zero = alongAxis(ctx, castTo(ctx, ctx.input(node, zeroPointInput), dtype), v->rank(), axis);
  return ctx.op(OpKind::Sub, {result, zero});
}

/// saturate(round(value) + zeroPoint) as `dtype`; value and zeroPoint are floats.
ir::Value *saturateRound(ImportContext &ctx, ir::Value *value, ir::Value *zeroPoint, DType dtype) {
  ir::Value *y = ctx.op(OpKind::Round, {value});
  if (zeroPoint)
    y = ctx.op(OpKind::Add, {y, zeroPoint});
  double lo = dtype == DType::U8 ? 0 : dtype == DType::I8 ? -128 : std::numeric_limits<int32_t>::min();
  double hi = dtype == DType::U8 ? 255 : dtype == DType::I8 ? 127 : std::numeric_limits<int32_t>::max();
  return castTo(ctx, ctx.op(OpKind::Clip, {y}, {{"min", lo}, {"max", hi}}), dtype);
}

/// The output type of a quantising op: its zero point's, uint8 without one.
DType quantizedType(ImportContext &ctx, const onnx::NodeProto &node, int zeroPointInput) {
  DType dtype = ctx.hasInput(node, zeroPointInput) ? ctx.inputType(node, zeroPointInput).dtype : DType::U8;
  if (dtype != DType::U8 && dtype != DType::I8)
    fail("the zero point must be uint8 or int8, got {}", dtypeName(dtype));
  return dtype;
}

/// ONNX's integer convolution: conv of the centred operands (padding then reads zero, that is
/// the zero point), exact in f64, as int32.
ir::Value *integerConv(ImportContext &ctx, const onnx::NodeProto &node, ir::Value *x, ir::Value *w, int xZeroPoint,
                       int wZeroPoint) {
  ir::Value *cx = centered(ctx, node, x, xZeroPoint, DType::F64, 1);
  ir::Value *cw = centered(ctx, node, w, wZeroPoint, DType::F64, 0);
  std::vector<int64_t> kernel(w->shape().begin() + std::min<int64_t>(2, w->rank()), w->shape().end());
  OnnxWindow window = readWindow(node, x, kernel, true);
  return ctx.op(OpKind::Conv, {cx, cw},
                {{"strides", window.strides},
                 {"pads", window.pads},
                 {"dilations", window.dilations},
                 {"groups", OnnxAttrs(node).getInt("group", 1)}});
}

/// a_scale * b_scale / y_scale as f32, lined up with `axis` of a rank-`rank` result.
ir::Value *requantizeFactor(ImportContext &ctx, const onnx::NodeProto &node, int aScale, int bScale, int yScale,
                            int64_t rank, int64_t axis) {
  ir::Value *product = ctx.op(OpKind::Mul, {ctx.input(node, aScale), ctx.input(node, bScale)});
  return alongAxis(ctx, ctx.op(OpKind::Div, {product, ctx.input(node, yScale)}), rank, axis);
}

} // namespace

std::vector<ir::Value *> mapDequantizeLinear(ImportContext &ctx, const onnx::NodeProto &node) {
  ir::Value *x = ctx.input(node, 0), *scale = ctx.input(node, 1);
  int64_t axis = OnnxAttrs(node).getInt("axis", 1);
  ir::Value *shifted = centered(ctx, node, x, 2, scale->dtype(), axis);
  return {ctx.op(OpKind::Mul, {shifted, alongAxis(ctx, scale, x->rank(), axis)})};
}

std::vector<ir::Value *> mapQuantizeLinear(ImportContext &ctx, const onnx::NodeProto &node) {
  ir::Value *x = ctx.input(node, 0), *scale = ctx.input(node, 1);
  int64_t axis = OnnxAttrs(node).getInt("axis", 1);
  DType dtype = quantizedType(ctx, node, 2);
  ir::Value *value = ctx.op(OpKind::Div, {castTo(ctx, x, scale->dtype()), alongAxis(ctx, scale, x->rank(), axis)});
  ir::Value *zero = ctx.hasInput(node, 2)
                        ? alongAxis(ctx, castTo(ctx, ctx.input(node, 2), scale->dtype()), x->rank(), axis)
                        : nullptr;
  return {saturateRound(ctx, value, zero, dtype)};
}

std::vector<ir::Value *> mapDynamicQuantizeLinear(ImportContext &ctx, const onnx::NodeProto &node) {
  ir::Value *x = ctx.input(node, 0);
  ir::AttrMap all{{"axes", std::vector<int64_t>{}}, {"keepdims", int64_t{0}}};
  ir::Value *zero = ctx.scalarLike(x, 0);
  ir::Value *lo = ctx.op(OpKind::Min, {ctx.op(OpKind::ReduceMin, {x}, all), zero});
  ir::Value *hi = ctx.op(OpKind::Max, {ctx.op(OpKind::ReduceMax, {x}, all), zero});
  ir::Value *scale = ctx.op(OpKind::Div, {ctx.op(OpKind::Sub, {hi, lo}), ctx.scalarLike(x, 255)});
  ir::Value *zeroPoint =
      saturateRound(ctx, ctx.op(OpKind::Neg, {ctx.op(OpKind::Div, {lo, scale})}), nullptr, DType::U8);
  ir::Value *y = saturateRound(ctx, ctx.op(OpKind::Div, {x, scale}), castTo(ctx, zeroPoint, x->dtype()), DType::U8);
  return {y, scale, zeroPoint};
}

std::vector<ir::Value *> mapMatMulInteger(ImportContext &ctx, const onnx::NodeProto &node) {
  ir::Value *a = ctx.input(node, 0), *b = ctx.input(node, 1);
  // A's zero point is per row (the second-to-last dim), B's per column (the last).
  ir::Value *ca = centered(ctx, node, a, 2, DType::I32, std::max<int64_t>(a->rank() - 2, 0));
  ir::Value *cb = centered(ctx, node, b, 3, DType::I32, b->rank() - 1);
  return {ctx.op(OpKind::MatMul, {ca, cb})};
}

std::vector<ir::Value *> mapConvInteger(ImportContext &ctx, const onnx::NodeProto &node) {
  return {castTo(ctx, integerConv(ctx, node, ctx.input(node, 0), ctx.input(node, 1), 2, 3), DType::I32)};
}

std::vector<ir::Value *> mapQLinearMatMul(ImportContext &ctx, const onnx::NodeProto &node) {
  ir::Value *a = ctx.input(node, 0), *b = ctx.input(node, 3);
  ir::Value *ca = centered(ctx, node, a, 2, DType::I32, std::max<int64_t>(a->rank() - 2, 0));
  ir::Value *cb = centered(ctx, node, b, 5, DType::I32, b->rank() - 1);
  ir::Value *acc = castTo(ctx, ctx.op(OpKind::MatMul, {ca, cb}), DType::F32);
  ir::Value *factor = requantizeFactor(ctx, node, 1, 4, 6, acc->rank(), acc->rank() - 1);
  DType dtype = quantizedType(ctx, node, 7);
  return {saturateRound(ctx, ctx.op(OpKind::Mul, {acc, factor}), castTo(ctx, ctx.input(node, 7), DType::F32), dtype)};
}

std::vector<ir::Value *> mapQLinearConv(ImportContext &ctx, const onnx::NodeProto &node) {
  ir::Value *acc = integerConv(ctx, node, ctx.input(node, 0), ctx.input(node, 3), 2, 5);
  if (ctx.hasInput(node, 8))
    acc = ctx.op(OpKind::Add, {acc, perChannel(ctx, castTo(ctx, ctx.input(node, 8), DType::F64), acc->rank())});
  acc = castTo(ctx, acc, DType::F32);
  ir::Value *factor = requantizeFactor(ctx, node, 1, 4, 6, acc->rank(), 1);
  DType dtype = quantizedType(ctx, node, 7);
  return {saturateRound(ctx, ctx.op(OpKind::Mul, {acc, factor}), castTo(ctx, ctx.input(node, 7), DType::F32), dtype)};
}

} // namespace kiln::frontend
