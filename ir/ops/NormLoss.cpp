// Normalisation and loss composites: instance_norm (ONNX InstanceNormalization), mse_loss and
// cross_entropy (PyTorch's), nll_loss (ONNX NegativeLogLikelihoodLoss) and lrn (ONNX LRN). Each
// is defined by its decomposition into primitives, built with the core Builder. A loss's
// `reduction` is "mean" (a scalar), "sum" (a scalar) or "none" (per element for mse_loss, per
// sample for cross_entropy and nll_loss), as in PyTorch.
#include <limits>

#include "ir/ops/DecomposeHelpers.h"

namespace kiln::ir {

using namespace ops;

namespace {

Value *reduceAll(Builder &b, OpKind op, Value *x) {
  return b.create(op, {x}, {{"axes", std::vector<int64_t>{}}, {"keepdims", int64_t(0)}});
}

// ---- instance_norm ------------------------------------------------------------------------------
// y[n, c, ...] = (x - mean) / sqrt(var + epsilon) * scale[c] + bias[c], with the mean and the
// biased variance taken per (n, c) over the spatial dims.

std::vector<TensorType> inferInstanceNorm(const std::vector<TensorType> &in, const AttrMap &attrs) {
  DType dtype = commonDType(in);
  requireFloat(in[0], "input");
  const TensorType &x = in[0];
  if (x.rank() < 3)
    fail("input must be [N, C, D1, ...] with at least one spatial dim, got {}", shapeToString(x.shape));
  requirePerChannelInputs(in, {"scale", "bias"});
  requireEpsilon(attrs);
  return {TensorType{dtype, x.shape}};
}

std::vector<Value *> decomposeInstanceNorm(Builder &b, const std::vector<Value *> &in, const AttrMap &attrs) {
  Value *x = in[0];
  std::vector<int64_t> spatial;
  for (int64_t d = 2; d < x->rank(); ++d)
    spatial.push_back(d);
  auto mean = [&](Value *v) {
    return b.create(OpKind::ReduceMean, {v}, {{"axes", spatial}, {"keepdims", int64_t(1)}});
  };
  Value *centered = binary(b, OpKind::Sub, x, mean(x));
  Value *var = mean(binary(b, OpKind::Mul, centered, centered));
  Value *epsilon = constantLike(b, x, attrFloat(attrs, "epsilon"));
  Value *invStd = b.create(OpKind::Rsqrt, {binary(b, OpKind::Add, var, epsilon)});
  // The scale folds into the [N, C, 1, ...] factor so the full-size tensor is multiplied once.
  Value *factor = binary(b, OpKind::Mul, invStd, perChannel(b, in[1], x));
  return {binary(b, OpKind::Add, binary(b, OpKind::Mul, centered, factor), perChannel(b, in[2], x))};
}

// ---- mse_loss -----------------------------------------------------------------------------------

std::vector<TensorType> inferMseLoss(const std::vector<TensorType> &in, const AttrMap &attrs) {
  LossReduction reduction = readLossReduction(attrs);
  DType dtype = commonDType(in);
  if (!isFloat(dtype))
    fail("needs floating-point operands, got {}", dtypeName(dtype));
  if (in[0].shape != in[1].shape)
    fail("prediction {} and target {} must have the same shape", shapeToString(in[0].shape),
         shapeToString(in[1].shape));
  return {reducedLossType(in[0], reduction)};
}

std::vector<Value *> decomposeMseLoss(Builder &b, const std::vector<Value *> &in, const AttrMap &attrs) {
  Value *diff = b.create(OpKind::Sub, {in[0], in[1]});
  Value *squared = b.create(OpKind::Mul, {diff, diff});
  return {applyLossReduction(b, squared, readLossReduction(attrs))};
}

// ---- cross_entropy ------------------------------------------------------------------------------

std::vector<TensorType> inferCrossEntropy(const std::vector<TensorType> &in, const AttrMap &attrs) {
  LossReduction reduction = readLossReduction(attrs);
  const TensorType &logits = in[0], &labels = in[1];
  if (!isFloat(logits.dtype))
    fail("logits must be floating-point, got {}", dtypeName(logits.dtype));
  if (logits.rank() != 2)
    fail("logits must be [N, C], got {}", shapeToString(logits.shape));
  if (logits.shape[1] == 0)
    fail("logits {} have no classes", shapeToString(logits.shape));
  if (labels.dtype != DType::I64 && labels.dtype != DType::I32)
    fail("labels must be i64 or i32 class indices, got {}", dtypeName(labels.dtype));
  if (labels.shape != Shape{logits.shape[0]})
    fail("labels must be [{}] (one class index per row of logits {}), got {}", logits.shape[0],
         shapeToString(logits.shape), shapeToString(labels.shape));
  return {reducedLossType(TensorType{logits.dtype, {logits.shape[0]}}, reduction)};
}

// loss[n] = -log_softmax(logits)[n, labels[n]]. The pick is a one-hot mask (iota along the
// class axis == label) selecting through `where` and summed over classes: a select rather than
// a multiply by the mask, so a -inf log-probability of another class cannot turn into NaN.
std::vector<Value *> decomposeCrossEntropy(Builder &b, const std::vector<Value *> &in, const AttrMap &attrs) {
  Value *logits = in[0], *labels = in[1];
  int64_t rows = logits->shape()[0], classes = logits->shape()[1];
  Value *logProbs = b.create(OpKind::LogSoftmax, {logits}, {{"axis", int64_t(1)}});
  Value *classIds = b.create(
      OpKind::Iota, {}, {{"shape", Shape{rows, classes}}, {"axis", int64_t(1)}, {"dtype", labels->dtype()}});
  Value *column = b.create(OpKind::Reshape, {labels}, {{"shape", Shape{rows, 1}}});
  Value *oneHot = b.create(OpKind::Eq, {classIds, column});
  Value *picked = b.create(OpKind::Where, {oneHot, logProbs, b.scalar(logits->dtype(), 0.0)});
  Value *logProb = b.create(OpKind::ReduceSum, {picked}, {{"axes", std::vector<int64_t>{1}}});
  Value *losses = b.create(OpKind::Neg, {logProb});
  return {applyLossReduction(b, losses, readLossReduction(attrs))};
}

// ---- nll_loss -----------------------------------------------------------------------------------
// loss[n, d...] = -input[n, target[n, d...], d...] * weight[target] (weight 1 when absent), and 0
// where target == ignore_index. "mean" divides the sum by the sum of the weights taken (the
// count of non-ignored elements without weights); an all-ignored mean is 0/0 = NaN, as in the
// ONNX reference. Negative targets count from the end, as numpy indexing (and the ONNX
// reference's pick) does; a target outside [-C, C) is an evaluation error from the gather of the
// weights. ignore_index's default, INT64_MIN, means no index is ignored.

std::vector<TensorType> inferNllLoss(const std::vector<TensorType> &in, const AttrMap &attrs) {
  LossReduction reduction = readLossReduction(attrs);
  const TensorType &input = in[0], &target = in[1];
  requireFloat(input, "input");
  if (input.rank() < 2)
    fail("input must be [N, C] or [N, C, d1, ...] log-probabilities, got {}", shapeToString(input.shape));
  if (input.shape[1] == 0)
    fail("input {} has no classes", shapeToString(input.shape));
  if (target.dtype != DType::I64 && target.dtype != DType::I32)
    fail("target must be i64 or i32 class indices, got {}", dtypeName(target.dtype));
  Shape perElement = input.shape;
  perElement.erase(perElement.begin() + 1);
  if (target.shape != perElement)
    fail("target must be {} (input {} without its class dim), got {}", shapeToString(perElement),
         shapeToString(input.shape), shapeToString(target.shape));
  if (in.size() == 3) {
    if (in[2].dtype != input.dtype)
      fail("weight has dtype {}, input has {}", dtypeName(in[2].dtype), dtypeName(input.dtype));
    if (in[2].shape != Shape{input.shape[1]})
      fail("weight must be [{}] (one per class of input {}), got {}", input.shape[1],
           shapeToString(input.shape), shapeToString(in[2].shape));
  }
  return {reducedLossType(TensorType{input.dtype, perElement}, reduction)};
}

Value *integerScalar(Builder &b, DType dtype, int64_t value) {
  Tensor t(dtype, {});
  t.setInt(0, value);
  return b.constant(t);
}

std::vector<Value *> decomposeNllLoss(Builder &b, const std::vector<Value *> &in, const AttrMap &attrs) {
  Value *input = in[0], *target = in[1];
  DType indexType = target->dtype();
  int64_t classes = input->shape()[1];
  int64_t ignoreIndex = attrInt(attrs, "ignore_index");
  // An ignore_index the target dtype cannot hold matches no target.
  bool ignores = ignoreIndex != std::numeric_limits<int64_t>::min() &&
                 (indexType == DType::I64 || (ignoreIndex >= std::numeric_limits<int32_t>::min() &&
                                              ignoreIndex <= std::numeric_limits<int32_t>::max()));
  Value *ignored = nullptr;
  if (ignores) {
    ignored = binary(b, OpKind::Eq, target, integerScalar(b, indexType, ignoreIndex));
    target = b.create(OpKind::Where, {ignored, integerScalar(b, indexType, 0), target});
  }

  // Weight per element: gathering also checks every (non-ignored) target against [-C, C).
  Value *weights = in.size() == 3
                       ? in[2]
                       : b.constant(Tensor::fromDoubles(input->dtype(), {classes},
                                                        std::vector<double>(size_t(classes), 1.0)));
  Value *taken = b.create(OpKind::Gather, {weights, target}, {{"axis", int64_t(0)}});
  if (ignored)
    taken = b.create(OpKind::Where, {ignored, constantLike(b, input, 0.0), taken});

  // The picked log-probability: a one-hot select along the class axis, summed over it.
  Value *wrapped =
      b.create(OpKind::Where, {binary(b, OpKind::Lt, target, integerScalar(b, indexType, 0)),
                               binary(b, OpKind::Add, target, integerScalar(b, indexType, classes)), target});
  Shape columnShape = input->shape();
  columnShape[1] = 1;
  Value *classIds =
      b.create(OpKind::Iota, {}, {{"shape", input->shape()}, {"axis", int64_t(1)}, {"dtype", indexType}});
  Value *oneHot = binary(b, OpKind::Eq, classIds, reshape(b, wrapped, columnShape));
  Value *picked = b.create(OpKind::Where, {oneHot, input, constantLike(b, input, 0.0)});
  Value *logProb = b.create(OpKind::ReduceSum, {picked}, {{"axes", std::vector<int64_t>{1}}});
  Value *losses = binary(b, OpKind::Mul, b.create(OpKind::Neg, {logProb}), taken);
  // Selected rather than multiplied by 0: an ignored element may sit on a -inf log-probability.
  if (ignored)
    losses = b.create(OpKind::Where, {ignored, constantLike(b, input, 0.0), losses});

  LossReduction reduction = readLossReduction(attrs);
  if (reduction == LossReduction::Mean) // weighted: divided by the weights taken, not the count
    return {binary(b, OpKind::Div, reduceAll(b, OpKind::ReduceSum, losses),
                   reduceAll(b, OpKind::ReduceSum, taken))};
  return {applyLossReduction(b, losses, reduction)};
}

// ---- lrn ----------------------------------------------------------------------------------------
// y = x / (bias + alpha / size * square_sum)^beta, where square_sum sums x^2 over the channels
// c - floor((size-1)/2) .. c + ceil((size-1)/2) that exist. The window sum is an avg_pool over
// the channel axis of x^2 viewed as [N, 1, C, rest] with zero padding counted (every window
// then divides by `size`), so alpha / size * square_sum = alpha * average.

std::vector<TensorType> inferLrn(const std::vector<TensorType> &in, const AttrMap &attrs) {
  requireFloat(in[0], "input");
  if (in[0].rank() < 2)
    fail("input must be [N, C, ...], got {}", shapeToString(in[0].shape));
  if (attrInt(attrs, "size") < 1)
    fail("attribute 'size' must be >= 1, got {}", attrInt(attrs, "size"));
  return {in[0]};
}

std::vector<Value *> decomposeLrn(Builder &b, const std::vector<Value *> &in, const AttrMap &attrs) {
  Value *x = in[0];
  // Nothing to normalise; avg_pool would also reject an empty channel or spatial extent.
  if (numElements(x->shape()) == 0)
    return {x};
  int64_t size = attrInt(attrs, "size");
  int64_t batch = x->shape()[0], channels = x->shape()[1];
  int64_t rest = numElements(Shape(x->shape().begin() + 2, x->shape().end()));
  int64_t before = (size - 1) / 2, after = size - 1 - before;
  Value *squares = reshape(b, binary(b, OpKind::Mul, x, x), {batch, 1, channels, rest});
  Value *average = b.create(OpKind::AvgPool, {squares},
                            {{"kernel", std::vector<int64_t>{size, 1}},
                             {"pads", std::vector<int64_t>{before, 0, after, 0}},
                             {"count_include_pad", int64_t(1)}});
  Value *alpha = constantLike(b, x, attrFloat(attrs, "alpha"));
  Value *scaled = binary(b, OpKind::Mul, reshape(b, average, x->shape()), alpha);
  Value *base = binary(b, OpKind::Add, scaled, constantLike(b, x, attrFloat(attrs, "bias")));
  Value *denominator = binary(b, OpKind::Pow, base, constantLike(b, x, attrFloat(attrs, "beta")));
  return {binary(b, OpKind::Div, x, denominator)};
}

} // namespace

OpDef defineInstanceNorm() {
  OpDef def;
  def.attrs = {floatAttr("epsilon", 1e-5)};
  def.infer = inferInstanceNorm;
  def.decompose = decomposeInstanceNorm;
  return def;
}

OpDef defineMseLoss() {
  OpDef def;
  def.attrs = {stringAttr("reduction", "mean")};
  def.infer = inferMseLoss;
  def.decompose = decomposeMseLoss;
  return def;
}

OpDef defineCrossEntropy() {
  OpDef def;
  def.attrs = {stringAttr("reduction", "mean")};
  def.infer = inferCrossEntropy;
  def.decompose = decomposeCrossEntropy;
  return def;
}

OpDef defineNllLoss() {
  OpDef def;
  def.attrs = {stringAttr("reduction", "mean"), intAttr("ignore_index", std::numeric_limits<int64_t>::min())};
  def.infer = inferNllLoss;
  def.decompose = decomposeNllLoss;
  return def;
}

OpDef defineLrn() {
  OpDef def;
  def.attrs = {intAttr("size"), floatAttr("alpha", 1e-4), floatAttr("beta", 0.75), floatAttr("bias", 1.0)};
  def.infer = inferLrn;
  def.decompose = decomposeLrn;
  return def;
}

} // namespace kiln::ir
