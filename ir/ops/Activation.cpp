// Activation composites from the ONNX operator set: elu, selu, leaky_relu, prelu, hard_sigmoid,
// hard_swish, softplus, softsign, celu, thresholded_relu, mish, shrink and hardmax. Each is
// defined by a decomposition into primitives built with the core Builder; scalars are
// constants of the input dtype, so no op promotes. Piecewise definitions select with `where`
// rather than multiplying by a 0/1 mask: a mask times an unused branch that overflowed to inf
// would give NaN (0 * inf), where a select just ignores it.
#include <cmath>
#include <limits>

#include "ir/ops/DecomposeHelpers.h"

namespace kiln::ir {

using namespace ops;

namespace {

// ONNX's float defaults for selu (the constants of Klambauer et al., rounded to f32).
constexpr double kSeluAlpha = 1.67326319217681884765625;
constexpr double kSeluGamma = 1.05070102214813232421875;
constexpr double kInf = std::numeric_limits<double>::infinity();

std::vector<TensorType> inferFloatActivation(const std::vector<TensorType> &in, const AttrMap &) {
  requireFloat(in[0], "input");
  return {in[0]};
}

// The definitions below all have one float input and no attribute checks beyond the schema.
OpDef floatActivation(std::vector<AttrSpec> attrs, DecomposeFn decompose) {
  OpDef def;
  def.attrs = std::move(attrs);
  def.infer = inferFloatActivation;
  def.decompose = decompose;
  return def;
}

// ---- exponential-linear family ----------------------------------------------------------------

// elu: x for x >= 0, alpha * (exp(x) - 1) below. expm1 keeps precision for x near 0.
std::vector<Value *> decomposeElu(Builder &b, const std::vector<Value *> &in, const AttrMap &attrs) {
  Value *x = in[0];
  Value *negative =
      binary(b, OpKind::Mul, unary(b, OpKind::Expm1, x), constantLike(b, x, attrFloat(attrs, "alpha")));
  return {select(b, binary(b, OpKind::Lt, x, constantLike(b, x, 0)), negative, x)};
}

// selu: gamma * (x for x > 0, alpha * (exp(x) - 1) for x <= 0).
std::vector<Value *> decomposeSelu(Builder &b, const std::vector<Value *> &in, const AttrMap &attrs) {
  Value *x = in[0];
  Value *negative =
      binary(b, OpKind::Mul, unary(b, OpKind::Expm1, x), constantLike(b, x, attrFloat(attrs, "alpha")));
  Value *piecewise = select(b, binary(b, OpKind::Gt, x, constantLike(b, x, 0)), x, negative);
  return {binary(b, OpKind::Mul, piecewise, constantLike(b, x, attrFloat(attrs, "gamma")))};
}

// celu: max(0, x) + min(0, alpha * (exp(x / alpha) - 1)). Where exp overflows (large x) the
// second term is min(0, inf) = 0, so no select is needed.
std::vector<TensorType> inferCelu(const std::vector<TensorType> &in, const AttrMap &attrs) {
  if (attrFloat(attrs, "alpha") == 0)
    fail("attribute 'alpha' must be non-zero (it divides the input)");
  return inferFloatActivation(in, attrs);
}

std::vector<Value *> decomposeCelu(Builder &b, const std::vector<Value *> &in, const AttrMap &attrs) {
  Value *x = in[0];
  Value *alpha = constantLike(b, x, attrFloat(attrs, "alpha"));
  Value *curve = binary(b, OpKind::Mul, unary(b, OpKind::Expm1, binary(b, OpKind::Div, x, alpha)), alpha);
  return {binary(b, OpKind::Add, unary(b, OpKind::Relu, x),
                 binary(b, OpKind::Min, curve, constantLike(b, x, 0)))};
}

// ---- rectifier family -------------------------------------------------------------------------

// leaky_relu: x for x >= 0, alpha * x below.
std::vector<Value *> decomposeLeakyRelu(Builder &b, const std::vector<Value *> &in, const AttrMap &attrs) {
  Value *x = in[0];
  Value *scaled = binary(b, OpKind::Mul, x, constantLike(b, x, attrFloat(attrs, "alpha")));
  return {select(b, binary(b, OpKind::Lt, x, constantLike(b, x, 0)), scaled, x)};
}

// prelu: leaky_relu with a learned slope tensor. ONNX broadcasts the slope to x in one
// direction only: the result always has x's shape.
std::vector<TensorType> inferPRelu(const std::vector<TensorType> &in, const AttrMap &) {
  DType dtype = commonDType(in);
  requireFloat(in[0], "input");
  const Shape &x = in[0].shape, &slope = in[1].shape;
  bool broadcasts = slope.size() <= x.size();
  for (size_t i = 0; broadcasts && i < slope.size(); ++i) {
    int64_t slopeDim = slope[slope.size() - 1 - i], xDim = x[x.size() - 1 - i];
    broadcasts = slopeDim == 1 || slopeDim == xDim;
  }
  if (!broadcasts)
    fail("slope {} does not broadcast to input {} (the result must keep the input's shape)",
         shapeToString(slope), shapeToString(x));
  return {TensorType{dtype, x}};
}

std::vector<Value *> decomposePRelu(Builder &b, const std::vector<Value *> &in, const AttrMap &) {
  Value *x = in[0];
  Value *scaled = binary(b, OpKind::Mul, x, in[1]);
  return {select(b, binary(b, OpKind::Lt, x, constantLike(b, x, 0)), scaled, x)};
}

// thresholded_relu: x where x > alpha, else 0.
std::vector<Value *> decomposeThresholdedRelu(Builder &b, const std::vector<Value *> &in,
                                              const AttrMap &attrs) {
  Value *x = in[0];
  Value *above = binary(b, OpKind::Gt, x, constantLike(b, x, attrFloat(attrs, "alpha")));
  return {select(b, above, x, constantLike(b, x, 0))};
}

// ---- hard (piecewise-linear) family -----------------------------------------------------------

// hard_sigmoid: max(0, min(1, alpha * x + beta)); clip propagates NaN like the min/max form.
std::vector<Value *> decomposeHardSigmoid(Builder &b, const std::vector<Value *> &in, const AttrMap &attrs) {
  Value *x = in[0];
  Value *line =
      binary(b, OpKind::Add, binary(b, OpKind::Mul, x, constantLike(b, x, attrFloat(attrs, "alpha"))),
             constantLike(b, x, attrFloat(attrs, "beta")));
  return {b.create(OpKind::Clip, {line}, {{"min", 0.0}, {"max", 1.0}})};
}

// hard_swish: x * hard_sigmoid(x) with ONNX's fixed alpha = 1/6, beta = 0.5. Where the gate is
// 0 (x <= -3) the result is 0, selected rather than multiplied so that x = -inf gives 0, not
// -inf * 0 = NaN. A NaN gate fails the test and the product keeps the NaN.
std::vector<Value *> decomposeHardSwish(Builder &b, const std::vector<Value *> &in, const AttrMap &) {
  Value *x = in[0];
  Value *gate = b.create(OpKind::HardSigmoid, {x}, {{"alpha", 1.0 / 6.0}, {"beta", 0.5}});
  Value *zero = constantLike(b, x, 0);
  return {select(b, binary(b, OpKind::Eq, gate, zero), zero, binary(b, OpKind::Mul, x, gate))};
}

// ---- smooth family ----------------------------------------------------------------------------

// softplus: log(1 + exp(x)) written as max(x, 0) + log1p(exp(-|x|)), so exp never overflows
// (softplus(1000) = 1000, not inf) and small results keep their precision.
std::vector<Value *> decomposeSoftplus(Builder &b, const std::vector<Value *> &in, const AttrMap &) {
  Value *x = in[0];
  Value *tail =
      unary(b, OpKind::Log1p, unary(b, OpKind::Exp, unary(b, OpKind::Neg, unary(b, OpKind::Abs, x))));
  return {binary(b, OpKind::Add, unary(b, OpKind::Relu, x), tail)};
}

// softsign: x / (1 + |x|). At +-inf that quotient is inf / inf = NaN, while the limit is +-1,
// which sign(x) gives there.
std::vector<Value *> decomposeSoftsign(Builder &b, const std::vector<Value *> &in, const AttrMap &) {
  Value *x = in[0];
  Value *ratio =
      binary(b, OpKind::Div, x, binary(b, OpKind::Add, unary(b, OpKind::Abs, x), constantLike(b, x, 1)));
  return {select(b, unary(b, OpKind::IsInf, x), unary(b, OpKind::Sign, x), ratio)};
}

// mish: x * tanh(softplus(x)). At x = -inf the product is -inf * 0 = NaN while the limit is 0
// (the factor decays like exp(x)), so that point is selected explicitly.
std::vector<Value *> decomposeMish(Builder &b, const std::vector<Value *> &in, const AttrMap &) {
  Value *x = in[0];
  Value *product = binary(b, OpKind::Mul, x, unary(b, OpKind::Tanh, b.create(OpKind::Softplus, {x})));
  Value *minusInf = binary(b, OpKind::Eq, x, constantLike(b, x, -kInf));
  return {select(b, minusInf, constantLike(b, x, 0), product)};
}

// ---- shrink -----------------------------------------------------------------------------------

// shrink: x + bias for x < -lambd, x - bias for x > lambd, 0 between. ONNX also allows integer
// inputs. A negative lambd would make the two branches overlap (and has no meaning), so it is
// rejected; for integers the bias must be a value of the dtype, or x +- bias could not be exact.
std::vector<TensorType> inferShrink(const std::vector<TensorType> &in, const AttrMap &attrs) {
  DType dtype = in[0].dtype;
  if (dtype == DType::Bool)
    fail("input must be numeric, got bool");
  double lambd = attrFloat(attrs, "lambd"), bias = attrFloat(attrs, "bias");
  if (!(lambd >= 0))
    fail("attribute 'lambd' must be >= 0, got {}", lambd);
  if (std::isnan(bias))
    fail("attribute 'bias' must not be NaN");
  if (!isFloat(dtype)) {
    // Converting to the dtype saturates, so a round trip that changes the value means "not
    // representable"; 2^63 saturates to INT64_MAX, which reads back as 2^63, hence the bound.
    bool representable = std::floor(bias) == bias && std::fabs(bias) < 9223372036854775808.0 &&
                         Tensor::scalar(dtype, bias).getDouble(0) == bias;
    if (!representable)
      fail("attribute 'bias' {} is not a value of the integer input dtype {}", bias, dtypeName(dtype));
  }
  return {in[0]};
}

std::vector<Value *> decomposeShrink(Builder &b, const std::vector<Value *> &in, const AttrMap &attrs) {
  Value *x = in[0];
  double lambd = attrFloat(attrs, "lambd");
  // For integer x, x < -lambd iff x < ceil(-lambd) and x > lambd iff x > floor(lambd), so the
  // thresholds are exact integers. When they lie outside the dtype's range the conversion
  // saturates to the range's end, which keeps each comparison's answer (always false) because
  // lambd >= 0.
  double lower = isFloat(x->dtype()) ? -lambd : std::ceil(-lambd);
  double upper = isFloat(x->dtype()) ? lambd : std::floor(lambd);
  Value *bias = constantLike(b, x, attrFloat(attrs, "bias"));
  Value *isBelow = binary(b, OpKind::Lt, x, constantLike(b, x, lower));
  Value *isAbove = binary(b, OpKind::Gt, x, constantLike(b, x, upper));
  Value *aboveOrZero = select(b, isAbove, binary(b, OpKind::Sub, x, bias), constantLike(b, x, 0));
  return {select(b, isBelow, binary(b, OpKind::Add, x, bias), aboveOrZero)};
}

// ---- hardmax ----------------------------------------------------------------------------------

// hardmax: 1 at the first maximum along `axis`, 0 elsewhere. argmax (keepdims) gives the
// position of the first maximum (or of the first NaN); comparing it with the position of every
// element along the axis (iota) marks exactly one element per slice.
std::vector<TensorType> inferHardmax(const std::vector<TensorType> &in, const AttrMap &attrs) {
  requireFloat(in[0], "input");
  normalizeAxis(attrInt(attrs, "axis"), in[0].rank(), "axis");
  return {in[0]};
}

std::vector<Value *> decomposeHardmax(Builder &b, const std::vector<Value *> &in, const AttrMap &attrs) {
  Value *x = in[0];
  // Nothing to mark in an empty tensor, and argmax rejects an empty axis: x is its own result.
  if (numElements(x->shape()) == 0)
    return {x};
  int64_t axis = normalizeAxis(attrInt(attrs, "axis"), x->rank(), "axis");
  Value *winner = b.create(OpKind::ArgMax, {x}, {{"axis", axis}, {"keepdims", int64_t(1)}});
  Value *position =
      b.create(OpKind::Iota, {}, {{"shape", x->shape()}, {"axis", axis}, {"dtype", DType::I64}});
  return {b.create(OpKind::Cast, {binary(b, OpKind::Eq, position, winner)}, {{"to", x->dtype()}})};
}

} // namespace

OpDef defineElu() { return floatActivation({floatAttr("alpha", 1.0)}, decomposeElu); }
OpDef defineSelu() {
  return floatActivation({floatAttr("alpha", kSeluAlpha), floatAttr("gamma", kSeluGamma)}, decomposeSelu);
}
OpDef defineLeakyRelu() { return floatActivation({floatAttr("alpha", 0.01)}, decomposeLeakyRelu); }
OpDef defineHardSigmoid() {
  return floatActivation({floatAttr("alpha", 0.2), floatAttr("beta", 0.5)}, decomposeHardSigmoid);
}
OpDef defineHardSwish() { return floatActivation({}, decomposeHardSwish); }
OpDef defineSoftplus() { return floatActivation({}, decomposeSoftplus); }
OpDef defineSoftsign() { return floatActivation({}, decomposeSoftsign); }
OpDef defineThresholdedRelu() { return floatActivation({floatAttr("alpha", 1.0)}, decomposeThresholdedRelu); }
OpDef defineMish() { return floatActivation({}, decomposeMish); }

OpDef defineCelu() {
  OpDef def = floatActivation({floatAttr("alpha", 1.0)}, decomposeCelu);
  def.infer = inferCelu;
  return def;
}

OpDef definePRelu() {
  OpDef def;
  def.infer = inferPRelu;
  def.decompose = decomposePRelu;
  return def;
}

OpDef defineShrink() {
  OpDef def;
  def.attrs = {floatAttr("bias", 0.0), floatAttr("lambd", 0.5)};
  def.infer = inferShrink;
  def.decompose = decomposeShrink;
  return def;
}

OpDef defineHardmax() {
  OpDef def;
  def.attrs = {intAttr("axis", -1)};
  def.infer = inferHardmax;
  def.decompose = decomposeHardmax;
  return def;
}

} // namespace kiln::ir
