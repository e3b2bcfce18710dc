// Quantisation ONNX ops, following the ONNX definitions (opsets 10-18):
//   DequantizeLinear      y = (x - zero_point) * scale            kiln's dequantize_linear
//   QuantizeLinear        y = saturate(round(x / scale) + zero_point), halves to even:
//                                                                  kiln's quantize_linear
//   DynamicQuantizeLinear the uint8 scale and zero point that cover [min(x, 0), max(x, 0)],
//                         then quantize_linear
//   MatMulInteger, ConvInteger   int32 products of (a - a_zero_point) and (b - b_zero_point)
//   QLinearMatMul, QLinearConv   those products rescaled by a_scale * b_scale / y_scale and
//                                quantised to y_zero_point's type
// Scales and zero points are scalars or, per axis, 1-D along `axis` (DequantizeLinear,
// QuantizeLinear), per row of A / column of B (MatMulInteger) or per output channel (the
// convolutions' weights). Integer sums are exact: matmul accumulates integers exactly and
// ConvInteger's conv runs in f64, where sums of 8-bit products are exact. The QLinear ops
// rescale the exact sum in f64 (the f32 factor widened, as numpy multiplies int32 by float32),
// so a sum above 2^24 is not rounded before it is scaled.
#include <algorithm>

#include "frontend/onnx/OnnxWindow.h"

namespace kiln::frontend {

using ir::OpKind;

namespace {

ir::Value *castTo(ImportContext &ctx, ir::Value *v, DType dtype) {
  return v->dtype() == dtype ? v : ctx.op(OpKind::Cast, {v}, {{"to", dtype}});
}

/// A scale or zero point shaped to broadcast against a rank-`rank` value: a 1-D tensor of
/// more than one element lines up with dim `axis`, one of one element is a scalar, anything
/// else broadcasts as it is.
ir::Value *alongAxis(ImportContext &ctx, ir::Value *v, int64_t rank, int64_t axis) {
  if (v->rank() != 1)
    return v;
  if (v->shape()[0] == 1)
    return reshapeTo(ctx, v, {});
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

/// Input `input` of `node`, a zero point, lined up with `axis` of a rank-`rank` value; a
/// `dtype` zero when the node has none.
ir::Value *zeroPointOrZero(ImportContext &ctx, const onnx::NodeProto &node, int input, DType dtype, int64_t rank,
                           int64_t axis) {
  if (!ctx.hasInput(node, input))
    return ctx.constant(Tensor::scalar(dtype, 0));
  return alongAxis(ctx, ctx.input(node, input), rank, axis);
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

/// saturate(round(acc * (a_scale * b_scale / y_scale)) + y_zero_point), in y_zero_point's type
/// (uint8 without one): the factor in f32 as ONNX's scales are, the product with `acc` (an exact
/// integer sum in i32 or f64) in f64; the scales and the zero point line up with `axis`.
ir::Value *requantize(ImportContext &ctx, const onnx::NodeProto &node, ir::Value *acc, int aScale, int bScale,
                      int yScale, int64_t axis) {
  constexpr int kYZeroPoint = 7; // QLinearMatMul's and QLinearConv's
  int64_t rank = acc->rank();
  ir::Value *product = ctx.op(OpKind::Mul, {ctx.input(node, aScale), ctx.input(node, bScale)});
  ir::Value *factor = alongAxis(ctx, ctx.op(OpKind::Div, {product, ctx.input(node, yScale)}), rank, axis);
  ir::Value *value = ctx.op(OpKind::Mul, {castTo(ctx, acc, DType::F64), castTo(ctx, factor, DType::F64)});
  DType dtype = quantizedType(ctx, node, kYZeroPoint);
  ir::Value *zeroPoint = zeroPointOrZero(ctx, node, kYZeroPoint, dtype, rank, axis);
  return ctx.op(OpKind::QuantizeLinear, {value, ctx.scalarLike(value, 1), zeroPoint});
}

} // namespace

// Opset 21's blocked quantisation (a scale per block of `block_size` along the axis) is not
// expressed; any other attribute value is. `saturate` (opset 19) only concerns float8.
void checkQuantizeLinear(const onnx::NodeProto &node, int64_t, std::vector<std::string> &problems) {
  int64_t blockSize = OnnxAttrs(node).getInt("block_size", 0);
  if (blockSize != 0)
    problems.push_back(fmt::format("block_size {} (blocked quantization) is not supported", blockSize));
}

std::vector<ir::Value *> mapDequantizeLinear(ImportContext &ctx, const onnx::NodeProto &node) {
  ir::Value *x = ctx.input(node, 0), *scale = ctx.input(node, 1);
  int64_t axis = OnnxAttrs(node).getInt("axis", 1);
  ir::Value *zeroPoint = zeroPointOrZero(ctx, node, 2, x->dtype(), x->rank(), axis);
  return {ctx.op(OpKind::DequantizeLinear, {x, alongAxis(ctx, scale, x->rank(), axis), zeroPoint})};
}

std::vector<ir::Value *> mapQuantizeLinear(ImportContext &ctx, const onnx::NodeProto &node) {
  ir::Value *x = ctx.input(node, 0), *scale = ctx.input(node, 1);
  int64_t axis = OnnxAttrs(node).getInt("axis", 1);
  ir::Value *zeroPoint = zeroPointOrZero(ctx, node, 2, quantizedType(ctx, node, 2), x->rank(), axis);
  return {ctx.op(OpKind::QuantizeLinear, {x, alongAxis(ctx, scale, x->rank(), axis), zeroPoint})};
}

// The zero point saturate(round(0 - min / scale)) is quantize_linear(-min, scale, 0): negation
// is exact, so -min / scale is -(min / scale) to the bit.
std::vector<ir::Value *> mapDynamicQuantizeLinear(ImportContext &ctx, const onnx::NodeProto &node) {
  ir::Value *x = ctx.input(node, 0);
  ir::AttrMap all{{"axes", std::vector<int64_t>{}}, {"keepdims", int64_t{0}}};
  ir::Value *zero = ctx.scalarLike(x, 0);
  ir::Value *lo = ctx.op(OpKind::Min, {ctx.op(OpKind::ReduceMin, {x}, all), zero});
  ir::Value *hi = ctx.op(OpKind::Max, {ctx.op(OpKind::ReduceMax, {x}, all), zero});
  ir::Value *scale = ctx.op(OpKind::Div, {ctx.op(OpKind::Sub, {hi, lo}), ctx.scalarLike(x, 255)});
  ir::Value *u8Zero = ctx.constant(Tensor::scalar(DType::U8, 0));
  ir::Value *zeroPoint = ctx.op(OpKind::QuantizeLinear, {ctx.op(OpKind::Neg, {lo}), scale, u8Zero});
  return {ctx.op(OpKind::QuantizeLinear, {x, scale, zeroPoint}), scale, zeroPoint};
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
  ir::Value *acc = ctx.op(OpKind::MatMul, {ca, cb});
  return {requantize(ctx, node, acc, 1, 4, 6, acc->rank() - 1)};
}

std::vector<ir::Value *> mapQLinearConv(ImportContext &ctx, const onnx::NodeProto &node) {
  ir::Value *acc = integerConv(ctx, node, ctx.input(node, 0), ctx.input(node, 3), 2, 5);
  if (ctx.hasInput(node, 8))
    acc = ctx.op(OpKind::Add, {acc, perChannel(ctx, castTo(ctx, ctx.input(node, 8), DType::F64), acc->rank())});
  return {requantize(ctx, node, acc, 1, 4, 6, 1)};
}

} // namespace kiln::frontend
