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
//
// qmatmul(a, b, a_scale, a_zero, b_scale) is such a fused product: a u8 or i8 [.., M, K], b i8
// [K, N], a_scale f32 [], a_zero a's dtype [], b_scale f32 [N] (per column) or []; for each
// output element
//   acc = sum over k of (a[.., m, k] - a_zero) * b[k, n]   (exact: int32 holds it for K < 2^16)
//   y[.., m, n] = f32(acc) * (a_scale * b_scale[n])
// two f32 roundings, as the runtime's qgemm computes it, bit for bit. (dequantize_linear ->
// matmul rounds every product and partial sum instead: the two agree to f32 roundings.)
//
// qconv(x, w, x_scale, x_zero, w_scale) is the same for conv (attributes as conv's): x u8 or
// i8 [N, C, H, W], w i8 [K, C/groups, R, S], w_scale f32 [K] (per output channel) or []:
//   acc = sum over the taps of (x - x_zero) * w   (a tap reading padding adds 0)
//   y[n, k, oh, ow] = f32(acc) * (x_scale * w_scale[k])
// as the runtime's qconv2d computes it.
#include "ir/ops/Convolve.h"
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

/// The scale and zero point of the activations and the weights' scales, as qmatmul and qconv
/// take them: `x` u8 or i8, its scale f32 [] and zero point its dtype [], and the weights' f32
/// [] or [`channels`].
void requireQuantization(const TensorType &x, const TensorType &xScale, const TensorType &xZero,
                         const TensorType &wScale, int64_t channels) {
  if (x.dtype != DType::U8 && x.dtype != DType::I8)
    fail("the activations must be u8 or i8, got {}", dtypeName(x.dtype));
  if (xScale.dtype != DType::F32 || xScale.rank() != 0 || xZero.dtype != x.dtype || xZero.rank() != 0)
    fail("the activations' scale must be f32 [] and zero point {} [], got {} and {}", dtypeName(x.dtype),
         xScale.toString(), xZero.toString());
  if (wScale.dtype != DType::F32 || !(wScale.rank() == 0 || (wScale.rank() == 1 && wScale.shape[0] == channels)))
    fail("the weights' scale must be f32 [] or [{}], got {}", channels, wScale.toString());
}

/// f32(acc) * (scale * weightScale), qmatmul's and qconv's two roundings.
float dequantizeSum(int64_t acc, float scale, const Tensor &weightScales, int64_t channel) {
  const float weightScale = static_cast<float>(weightScales.getDouble(weightScales.numElements() == 1 ? 0 : channel));
  return static_cast<float>(static_cast<int32_t>(acc)) * (scale * weightScale);
}

/// qmatmul's output: f32 [.., M, N].
std::vector<TensorType> inferQMatMul(const std::vector<TensorType> &in) {
  const TensorType &a = in[0], &b = in[1];
  requireQuantization(a, in[2], in[3], in[4], b.rank() == 2 ? b.shape[1] : 0);
  if (b.dtype != DType::I8 || b.rank() != 2)
    fail("b must be i8 [K, N], got {}", b.toString());
  if (a.rank() < 2 || a.shape.back() != b.shape[0])
    fail("a {} must be [.., M, K] with K = b's {}", a.toString(), b.shape[0]);
  if (a.shape.back() >= (int64_t{1} << 16))
    fail("K = {} is too deep for exact int32 sums (at most 65535)", a.shape.back());
  Shape out = a.shape;
  out.back() = b.shape[1];
  return {{DType::F32, out}};
}

Tensor evaluateQMatMul(const std::vector<Tensor> &in, const TensorType &outType) {
  const Tensor &a = in[0], &b = in[1];
  const int64_t k = b.shape()[0], n = b.shape()[1], rows = a.numElements() / std::max<int64_t>(k, 1);
  const float aScale = static_cast<float>(in[2].getDouble(0));
  const int64_t aZero = in[3].getInt(0);
  Tensor out(outType);
  auto *y = static_cast<float *>(out.data());
  for (int64_t m = 0; m < (k ? rows : out.numElements() / n); ++m)
    for (int64_t j = 0; j < n; ++j) {
      int64_t sum = 0;
      for (int64_t p = 0; p < k; ++p)
        sum += (a.getInt(m * k + p) - aZero) * b.getInt(p * n + j);
      y[m * n + j] = dequantizeSum(sum, aScale, in[4], j);
    }
  return out;
}

/// qconv's output: conv's shape, f32. Two-dimensional only, as the runtime's qconv2d.
std::vector<TensorType> inferQConv(const std::vector<TensorType> &in, const AttrMap &attrs) {
  const TensorType &x = in[0], &w = in[1];
  requireQuantization(x, in[2], in[3], in[4], w.rank() == 4 ? w.shape[0] : 0);
  if (x.rank() != 4 || w.dtype != DType::I8 || w.rank() != 4)
    fail("x must be [N, C, H, W] and w i8 [K, C/groups, R, S], got {} and {}", x.toString(), w.toString());
  if (w.shape[1] * w.shape[2] * w.shape[3] >= (int64_t{1} << 16))
    fail("{} taps per output are too many for exact int32 sums (at most 65535)", w.shape[1] * w.shape[2] * w.shape[3]);
  return {{DType::F32, convOutputShape(x, w, attrs)}};
}

Tensor evaluateQConv(const std::vector<Tensor> &in, const AttrMap &attrs, const TensorType &outType) {
  // The centred integers convolve exactly in double (|sums| < 2^31).
  std::vector<double> x = in[0].toDoubles();
  const double zero = static_cast<double>(in[3].getInt(0));
  for (double &v : x)
    v -= zero;
  const std::vector<double> sums = convolve(in[0].type(), x, in[1].type(), in[1].toDoubles(), attrs);
  const float scale = static_cast<float>(in[2].getDouble(0));
  const int64_t channels = outType.shape[1], plane = outType.shape[2] * outType.shape[3];
  Tensor out(outType);
  auto *y = static_cast<float *>(out.data());
  for (size_t i = 0; i < sums.size(); ++i)
    y[i] = dequantizeSum(static_cast<int64_t>(sums[i]), scale, in[4], static_cast<int64_t>(i) / plane % channels);
  return out;
}

} // namespace

OpDef defineQMatMul() {
  OpDef def;
  def.infer = [](const std::vector<TensorType> &in, const AttrMap &) { return inferQMatMul(in); };
  def.eval = [](const std::vector<Tensor> &in, const AttrMap &, const std::vector<TensorType> &out) {
    return std::vector<Tensor>{evaluateQMatMul(in, out[0])};
  };
  return def;
}

OpDef defineQConv() {
  OpDef def;
  def.attrs = {intsAttr("strides", std::vector<int64_t>{}), intsAttr("pads", std::vector<int64_t>{}),
               intsAttr("dilations", std::vector<int64_t>{}), intAttr("groups", 1)};
  def.infer = inferQConv;
  def.eval = [](const std::vector<Tensor> &in, const AttrMap &attrs, const std::vector<TensorType> &out) {
    return std::vector<Tensor>{evaluateQConv(in, attrs, out[0])};
  };
  return def;
}

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
