// Linear quantisation, as the ONNX specification defines QuantizeLinear and DequantizeLinear
// (opsets 10-18), with the scale and zero point already shaped to broadcast into x (a scalar
// per tensor; per axis, a vector viewed as [1, .., C, .., 1]):
//   quantize_linear(x, scale, zero_point)   = saturate(round(x / scale) + zero_point)
//   dequantize_linear(x, scale, zero_point) = (x - zero_point) * scale
// Both are composites whose decompositions are the formulas step by step, each step exactly
// defined, so the evaluator and compiled code agree to the bit:
//  - x / scale is one division in the scale's dtype (f32 for ONNX), rounded once, as numpy
//    divides two float32 arrays; an i32 x divides in f64, as numpy divides int32 by float32;
//  - round is nearbyint: to nearest, halves to even (2.5 -> 2, -2.5 -> -2, 3.5 -> 4);
//  - adding the zero point to that integer is exact wherever the result is in range;
//  - the cast to the zero point's dtype (u8 or i8) saturates (300 -> 255, -300 -> -128 for
//    i8) and takes NaN to 0 (core/Tensor.cpp); the spec leaves NaN undefined;
//  - x - zero_point is exact in the scale's dtype for u8 and i8; an i32 x is first rounded to
//    it, as numpy's x.astype(float32) does.
// A pass that fuses a dequantize -> contraction -> quantize chain into integer kernels matches
// these ops before `decompose` expands them.
#include "ir/ops/DecomposeHelpers.h"

namespace kiln::ir {

using namespace ops;

namespace {

/// The scale must be f32 or f64, and it and the zero point must broadcast into x without
/// enlarging it.
void requireScaleAndZeroPoint(const std::vector<TensorType> &in) {
  const TensorType &x = in[0], &scale = in[1], &zeroPoint = in[2];
  if (scale.dtype != DType::F32 && scale.dtype != DType::F64)
    fail("the scale must be f32 or f64, got {}", dtypeName(scale.dtype));
  Shape shape = broadcastShapes(broadcastShapes(x.shape, scale.shape), zeroPoint.shape);
  if (shape != x.shape)
    fail("the scale {} and zero point {} must broadcast into x {}", shapeToString(scale.shape),
         shapeToString(zeroPoint.shape), shapeToString(x.shape));
}

Value *castTo(Builder &b, Value *v, DType dtype) {
  return v->dtype() == dtype ? v : b.create(OpKind::Cast, {v}, {{"to", dtype}});
}

std::vector<Value *> decomposeQuantizeLinear(Builder &b, const std::vector<Value *> &in, const AttrMap &) {
  Value *x = in[0], *scale = in[1], *zeroPoint = in[2];
  DType compute = isFloat(x->dtype()) ? x->dtype() : DType::F64;
  Value *quotient = binary(b, OpKind::Div, castTo(b, x, compute), castTo(b, scale, compute));
  Value *shifted = binary(b, OpKind::Add, unary(b, OpKind::Round, quotient), castTo(b, zeroPoint, compute));
  return {castTo(b, shifted, zeroPoint->dtype())};
}

std::vector<Value *> decomposeDequantizeLinear(Builder &b, const std::vector<Value *> &in, const AttrMap &) {
  Value *x = in[0], *scale = in[1], *zeroPoint = in[2];
  DType dtype = scale->dtype();
  Value *centred = binary(b, OpKind::Sub, castTo(b, x, dtype), castTo(b, zeroPoint, dtype));
  return {binary(b, OpKind::Mul, centred, scale)};
}

} // namespace

OpDef defineQuantizeLinear() {
  OpDef def;
  def.infer = [](const std::vector<TensorType> &in, const AttrMap &) {
    const TensorType &x = in[0], &scale = in[1], &zeroPoint = in[2];
    requireScaleAndZeroPoint(in);
    if (x.dtype != scale.dtype && x.dtype != DType::I32)
      fail("x must have the scale's dtype {} or be i32, got {}", dtypeName(scale.dtype), dtypeName(x.dtype));
    if (zeroPoint.dtype != DType::U8 && zeroPoint.dtype != DType::I8)
      fail("the zero point must be u8 or i8, got {}", dtypeName(zeroPoint.dtype));
    return std::vector<TensorType>{{zeroPoint.dtype, x.shape}};
  };
  def.decompose = decomposeQuantizeLinear;
  return def;
}

OpDef defineDequantizeLinear() {
  OpDef def;
  def.infer = [](const std::vector<TensorType> &in, const AttrMap &) {
    const TensorType &x = in[0], &scale = in[1], &zeroPoint = in[2];
    requireScaleAndZeroPoint(in);
    if (x.dtype != DType::U8 && x.dtype != DType::I8 && x.dtype != DType::I32)
      fail("x must be u8, i8 or i32, got {}", dtypeName(x.dtype));
    if (zeroPoint.dtype != x.dtype)
      fail("the zero point must have x's dtype {}, got {}", dtypeName(x.dtype), dtypeName(zeroPoint.dtype));
    return std::vector<TensorType>{{scale.dtype, x.shape}};
  };
  def.decompose = decomposeDequantizeLinear;
  return def;
}

} // namespace kiln::ir
