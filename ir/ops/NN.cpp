// Neural-network composites: linear, batch_norm (inference), layer_norm, softmax, log_softmax,
// gelu and silu. Each is defined by its decomposition into primitives (and reduce_mean), built
// with the core Builder; they exist as ops so that dumps stay readable and pattern passes (BN
// folding, attention and softmax fusion) can see them whole.
#include "ir/ops/DecomposeHelpers.h"

namespace kiln::ir {

using namespace ops;

namespace {

// 1/sqrt(2) and sqrt(2/pi), written out: M_SQRT1_2 and M_PI are POSIX, not standard C++.
constexpr double kSqrtHalf = 0.70710678118654752440;
constexpr double kSqrtTwoOverPi = 0.79788456080286535588;

Value *reduce(Builder &b, OpKind op, Value *x, std::vector<int64_t> axes) {
  return b.create(op, {x}, {{"axes", std::move(axes)}, {"keepdims", int64_t(1)}});
}

// ---- linear -----------------------------------------------------------------------------------

std::vector<TensorType> inferLinear(const std::vector<TensorType> &in, const AttrMap &) {
  DType dtype = commonDType(in);
  if (dtype == DType::Bool)
    fail("needs float or integer operands, got bool");
  const TensorType &x = in[0], &weight = in[1];
  if (x.rank() < 1)
    fail("input must have rank >= 1 ([..., in_features]), got a scalar");
  if (weight.rank() != 2)
    fail("weight must be [out_features, in_features], got {}", shapeToString(weight.shape));
  if (x.shape.back() != weight.shape[1])
    fail("input {} has {} features but weight {} expects {} ([out, in] layout)", shapeToString(x.shape),
         x.shape.back(), shapeToString(weight.shape), weight.shape[1]);
  if (in.size() == 3 && in[2].shape != Shape{weight.shape[0]})
    fail("bias must be [{}] (one per output feature), got {}", weight.shape[0], shapeToString(in[2].shape));
  Shape out(x.shape.begin(), x.shape.end() - 1);
  out.push_back(weight.shape[0]);
  return {TensorType{dtype, out}};
}

std::vector<Value *> decomposeLinear(Builder &b, const std::vector<Value *> &in, const AttrMap &) {
  Value *weightT = b.create(OpKind::Permute, {in[1]}, {{"perm", std::vector<int64_t>{1, 0}}});
  Value *y = binary(b, OpKind::MatMul, in[0], weightT);
  if (in.size() == 3)
    y = binary(b, OpKind::Add, y, in[2]);
  return {y};
}

// ---- batch_norm -------------------------------------------------------------------------------

std::vector<TensorType> inferBatchNorm(const std::vector<TensorType> &in, const AttrMap &attrs) {
  DType dtype = commonDType(in);
  requireFloat(in[0], "input");
  const TensorType &x = in[0];
  if (x.rank() < 2)
    fail("input must be [N, C, ...], got {}", shapeToString(x.shape));
  requirePerChannelInputs(in, {"scale", "bias", "mean", "var"});
  requireEpsilon(attrs);
  return {TensorType{dtype, x.shape}};
}

std::vector<Value *> decomposeBatchNorm(Builder &b, const std::vector<Value *> &in, const AttrMap &attrs) {
  Value *x = in[0];
  // The per-channel factor scale / sqrt(var + eps) is computed on [C] once, not per element.
  Value *invStd =
      unary(b, OpKind::Rsqrt, binary(b, OpKind::Add, in[4], constantLike(b, x, attrFloat(attrs, "epsilon"))));
  Value *factor = binary(b, OpKind::Mul, in[1], invStd);
  Value *centered = binary(b, OpKind::Sub, x, perChannel(b, in[3], x));
  Value *y = binary(b, OpKind::Add, binary(b, OpKind::Mul, centered, perChannel(b, factor, x)),
                    perChannel(b, in[2], x));
  return {y};
}

// ---- layer_norm -------------------------------------------------------------------------------

std::vector<TensorType> inferLayerNorm(const std::vector<TensorType> &in, const AttrMap &attrs) {
  DType dtype = commonDType(in);
  requireFloat(in[0], "input");
  const TensorType &x = in[0];
  int64_t axis = normalizeAxis(attrInt(attrs, "axis"), x.rank(), "axis");
  Shape normalized(x.shape.begin() + axis, x.shape.end());
  for (size_t i = 1; i < in.size(); ++i)
    if (in[i].shape != normalized)
      fail("{} must have the normalized shape {} (input {} from axis {}), got {}", i == 1 ? "weight" : "bias",
           shapeToString(normalized), shapeToString(x.shape), axis, shapeToString(in[i].shape));
  requireEpsilon(attrs);
  return {TensorType{dtype, x.shape}};
}

std::vector<Value *> decomposeLayerNorm(Builder &b, const std::vector<Value *> &in, const AttrMap &attrs) {
  Value *x = in[0];
  std::vector<int64_t> axes;
  for (int64_t d = normalizeAxis(attrInt(attrs, "axis"), x->rank(), "axis"); d < x->rank(); ++d)
    axes.push_back(d);
  Value *centered = binary(b, OpKind::Sub, x, reduce(b, OpKind::ReduceMean, x, axes));
  // Biased variance (divide by the count), as PyTorch's layer_norm.
  Value *var = reduce(b, OpKind::ReduceMean, binary(b, OpKind::Mul, centered, centered), axes);
  Value *invStd =
      unary(b, OpKind::Rsqrt, binary(b, OpKind::Add, var, constantLike(b, x, attrFloat(attrs, "epsilon"))));
  Value *y = binary(b, OpKind::Mul, centered, invStd);
  // weight and bias have the trailing (normalized) shape, so numpy broadcasting aligns them.
  if (in.size() >= 2)
    y = binary(b, OpKind::Mul, y, in[1]);
  if (in.size() == 3)
    y = binary(b, OpKind::Add, y, in[2]);
  return {y};
}

// ---- softmax, log_softmax ---------------------------------------------------------------------

std::vector<TensorType> inferSoftmax(const std::vector<TensorType> &in, const AttrMap &attrs) {
  requireFloat(in[0], "input");
  normalizeAxis(attrInt(attrs, "axis"), in[0].rank(), "axis");
  return {in[0]};
}

// Stable forms: subtracting the row max makes every exponent <= 0, so exp cannot overflow.
// An empty input has nothing to normalise and reduce_max rejects an empty axis, so it is its
// own result.
template <bool logarithm>
std::vector<Value *> decomposeSoftmax(Builder &b, const std::vector<Value *> &in, const AttrMap &attrs) {
  Value *x = in[0];
  if (numElements(x->shape()) == 0)
    return {x};
  std::vector<int64_t> axes{normalizeAxis(attrInt(attrs, "axis"), x->rank(), "axis")};
  Value *shifted = binary(b, OpKind::Sub, x, reduce(b, OpKind::ReduceMax, x, axes));
  Value *exps = unary(b, OpKind::Exp, shifted);
  Value *sum = reduce(b, OpKind::ReduceSum, exps, axes);
  if (logarithm)
    return {binary(b, OpKind::Sub, shifted, unary(b, OpKind::Log, sum))};
  return {binary(b, OpKind::Div, exps, sum)};
}

// ---- gelu, silu -------------------------------------------------------------------------------

std::vector<TensorType> inferActivation(const std::vector<TensorType> &in, const AttrMap &) {
  requireFloat(in[0], "input");
  return {in[0]};
}

std::vector<TensorType> inferGelu(const std::vector<TensorType> &in, const AttrMap &attrs) {
  const std::string &approximate = attrString(attrs, "approximate");
  if (approximate != "none" && approximate != "tanh")
    fail("attribute 'approximate' must be \"none\" or \"tanh\", got \"{}\"", approximate);
  return inferActivation(in, attrs);
}

std::vector<Value *> decomposeGelu(Builder &b, const std::vector<Value *> &in, const AttrMap &attrs) {
  Value *x = in[0];
  Value *halfX = binary(b, OpKind::Mul, x, constantLike(b, x, 0.5));
  Value *inner;
  if (attrString(attrs, "approximate") == "tanh") {
    // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
    Value *cube = binary(b, OpKind::Mul, binary(b, OpKind::Mul, x, x), x);
    Value *poly = binary(b, OpKind::Add, x, binary(b, OpKind::Mul, cube, constantLike(b, x, 0.044715)));
    inner = unary(b, OpKind::Tanh, binary(b, OpKind::Mul, poly, constantLike(b, x, kSqrtTwoOverPi)));
  } else {
    // 0.5 x (1 + erf(x / sqrt 2))
    inner = unary(b, OpKind::Erf, binary(b, OpKind::Mul, x, constantLike(b, x, kSqrtHalf)));
  }
  return {binary(b, OpKind::Mul, halfX, binary(b, OpKind::Add, inner, constantLike(b, x, 1.0)))};
}

std::vector<Value *> decomposeSilu(Builder &b, const std::vector<Value *> &in, const AttrMap &) {
  return {binary(b, OpKind::Mul, in[0], unary(b, OpKind::Sigmoid, in[0]))};
}

} // namespace

OpDef defineLinear() {
  OpDef def;
  def.infer = inferLinear;
  def.decompose = decomposeLinear;
  return def;
}

OpDef defineBatchNorm() {
  OpDef def;
  def.attrs = {floatAttr("epsilon", 1e-5)};
  def.infer = inferBatchNorm;
  def.decompose = decomposeBatchNorm;
  return def;
}

OpDef defineLayerNorm() {
  OpDef def;
  def.attrs = {intAttr("axis", -1), floatAttr("epsilon", 1e-5)};
  def.infer = inferLayerNorm;
  def.decompose = decomposeLayerNorm;
  return def;
}

OpDef defineSoftmax() {
  OpDef def;
  def.attrs = {intAttr("axis", -1)};
  def.infer = inferSoftmax;
  def.decompose = decomposeSoftmax<false>;
  return def;
}

OpDef defineLogSoftmax() {
  OpDef def;
  def.attrs = {intAttr("axis", -1)};
  def.infer = inferSoftmax;
  def.decompose = decomposeSoftmax<true>;
  return def;
}

OpDef defineGelu() {
  OpDef def;
  def.attrs = {stringAttr("approximate", "none")};
  def.infer = inferGelu;
  def.decompose = decomposeGelu;
  return def;
}

OpDef defineSilu() {
  OpDef def;
  def.infer = inferActivation;
  def.decompose = decomposeSilu;
  return def;
}

} // namespace kiln::ir
