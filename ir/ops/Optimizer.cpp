// Optimizer update composites: one training step's update of one parameter tensor, with exactly
// torch.optim.SGD's and torch.optim.Adam / AdamW's semantics (single-tensor, non-amsgrad,
// non-maximize). Each decomposes into elementwise primitives over the parameter's shape plus a
// few ops on scalars, so fusion makes one update one kernel.
//
// The learning rate and the step count are rank-0 inputs of the parameter's dtype rather than
// attributes, so a schedule or a resumed run needs no recompile. The step is 1-based: the
// value torch's `state['step']` holds after its increment.
//
//   sgd_update(param, grad, lr)                        -> (param')          momentum == 0
//   sgd_update(param, grad, lr, momentum_buffer, step) -> (param', buffer')  momentum != 0
//     d = grad + weight_decay * param
//     buffer' = d on the first step (torch clones d into the new buffer), else
//               momentum * buffer + (1 - dampening) * d
//     d = d + momentum * buffer' (nesterov) or buffer'
//     param' = param - lr * d
//   The first step is step <= 1; its buffer input is ignored (scaled by zero), so a fresh
//   buffer may hold anything finite (zeros, by convention).
//
//   adam_update(param, grad, exp_avg, exp_avg_sq, lr, step) -> (param', exp_avg', exp_avg_sq')
//     decoupled (AdamW): param = param * (1 - lr * weight_decay)
//     otherwise:         grad = grad + weight_decay * param
//     exp_avg' = exp_avg + (1 - beta1) * (grad - exp_avg)       (torch's lerp_)
//     exp_avg_sq' = beta2 * exp_avg_sq + (1 - beta2) * grad * grad
//     param' = param - lr / (1 - beta1^step) * exp_avg' / (sqrt(exp_avg_sq') / sqrt(1 - beta2^step) + eps)
//   beta1 = 0 (log 0) is allowed: -expm1(step * -inf) = 1, torch's 1 - 0^step for step >= 1.
#include <cmath>

#include "ir/ops/DecomposeHelpers.h"

namespace kiln::ir {

using namespace ops;

namespace {

// ---- checks shared by both ops ----------------------------------------------------------------

void requireLike(const TensorType &param, const TensorType &other, std::string_view what) {
  if (other != param)
    fail("{} must have the parameter's type {}, got {}", what, param.toString(), other.toString());
}

void requireScalarOf(const TensorType &param, const TensorType &scalar, std::string_view what) {
  if (scalar.rank() != 0 || scalar.dtype != param.dtype)
    fail("{} must be a {} scalar (rank 0, the parameter's dtype), got {}", what, dtypeName(param.dtype),
         scalar.toString());
}

void requireNonNegative(const AttrMap &attrs, const char *name) {
  double value = attrFloat(attrs, name);
  if (!(value >= 0.0) || std::isinf(value))
    fail("attribute '{}' must be a finite value >= 0, got {}", name, value);
}

void requireUnitInterval(const AttrMap &attrs, const char *name) {
  double value = attrFloat(attrs, name);
  if (!(value >= 0.0 && value < 1.0))
    fail("attribute '{}' must be in [0, 1), got {}", name, value);
}

void requireFlag(const AttrMap &attrs, const char *name) {
  int64_t value = attrInt(attrs, name);
  if (value != 0 && value != 1)
    fail("attribute '{}' must be 0 or 1, got {}", name, value);
}

/// grad + weight_decay * param, or grad itself without weight decay.
Value *withWeightDecay(Builder &b, Value *grad, Value *param, double weightDecay) {
  if (weightDecay == 0.0)
    return grad;
  return binary(b, OpKind::Add, grad, binary(b, OpKind::Mul, constantLike(b, param, weightDecay), param));
}

// ---- sgd_update -------------------------------------------------------------------------------

std::vector<TensorType> inferSgdUpdate(const std::vector<TensorType> &in, const AttrMap &attrs) {
  requireNonNegative(attrs, "momentum");
  requireNonNegative(attrs, "dampening");
  requireNonNegative(attrs, "weight_decay");
  requireFlag(attrs, "nesterov");
  double momentum = attrFloat(attrs, "momentum");
  bool nesterov = attrInt(attrs, "nesterov") != 0;
  if (nesterov && (momentum <= 0.0 || attrFloat(attrs, "dampening") != 0.0))
    fail("nesterov momentum requires momentum > 0 and dampening 0 (as torch.optim.SGD), got momentum {} and "
         "dampening {}",
         momentum, attrFloat(attrs, "dampening"));
  const TensorType &param = in[0];
  requireFloat(param, "param");
  requireLike(param, in[1], "grad");
  requireScalarOf(param, in[2], "lr");
  if (momentum == 0.0) {
    if (in.size() != 3)
      fail("without momentum sgd_update takes (param, grad, lr), got {} operands", in.size());
    return {param};
  }
  if (in.size() != 5)
    fail("with momentum {} sgd_update takes (param, grad, lr, momentum_buffer, step), got {} operands", momentum,
         in.size());
  requireLike(param, in[3], "momentum_buffer");
  requireScalarOf(param, in[4], "step");
  return {param, param};
}

std::vector<Value *> decomposeSgdUpdate(Builder &b, const std::vector<Value *> &in, const AttrMap &attrs) {
  Value *param = in[0], *lr = in[2];
  double momentum = attrFloat(attrs, "momentum");
  Value *direction = withWeightDecay(b, in[1], param, attrFloat(attrs, "weight_decay"));
  Value *buffer = nullptr;
  if (momentum != 0.0) {
    // Scalars chosen by the step, so the same kernel serves the first step and the rest.
    Value *first = binary(b, OpKind::Le, in[4], constantLike(b, param, 1.0));
    Value *bufferScale = select(b, first, constantLike(b, param, 0.0), constantLike(b, param, momentum));
    Value *directionScale =
        select(b, first, constantLike(b, param, 1.0), constantLike(b, param, 1.0 - attrFloat(attrs, "dampening")));
    buffer = binary(b, OpKind::Add, binary(b, OpKind::Mul, bufferScale, in[3]),
                    binary(b, OpKind::Mul, directionScale, direction));
    direction = attrInt(attrs, "nesterov") != 0
                    ? binary(b, OpKind::Add, direction, binary(b, OpKind::Mul, constantLike(b, param, momentum), buffer))
                    : buffer;
  }
  Value *updated = binary(b, OpKind::Sub, param, binary(b, OpKind::Mul, lr, direction));
  if (buffer == nullptr)
    return {updated};
  return {updated, buffer};
}

// ---- adam_update ------------------------------------------------------------------------------

std::vector<TensorType> inferAdamUpdate(const std::vector<TensorType> &in, const AttrMap &attrs) {
  requireUnitInterval(attrs, "beta1");
  requireUnitInterval(attrs, "beta2");
  requireNonNegative(attrs, "eps");
  requireNonNegative(attrs, "weight_decay");
  requireFlag(attrs, "decoupled");
  const TensorType &param = in[0];
  requireFloat(param, "param");
  requireLike(param, in[1], "grad");
  requireLike(param, in[2], "exp_avg");
  requireLike(param, in[3], "exp_avg_sq");
  requireScalarOf(param, in[4], "lr");
  requireScalarOf(param, in[5], "step");
  return {param, param, param};
}

std::vector<Value *> decomposeAdamUpdate(Builder &b, const std::vector<Value *> &in, const AttrMap &attrs) {
  Value *param = in[0], *grad = in[1], *expAvg = in[2], *expAvgSq = in[3], *lr = in[4], *step = in[5];
  double beta1 = attrFloat(attrs, "beta1"), beta2 = attrFloat(attrs, "beta2");
  double weightDecay = attrFloat(attrs, "weight_decay");
  auto scalar = [&](double value) { return constantLike(b, param, value); };
  auto mul = [&](Value *x, Value *y) { return binary(b, OpKind::Mul, x, y); };
  auto add = [&](Value *x, Value *y) { return binary(b, OpKind::Add, x, y); };
  auto sub = [&](Value *x, Value *y) { return binary(b, OpKind::Sub, x, y); };

  if (attrInt(attrs, "decoupled") != 0) {
    if (weightDecay != 0.0)
      param = mul(param, sub(scalar(1.0), mul(lr, scalar(weightDecay))));
  } else {
    grad = withWeightDecay(b, grad, param, weightDecay);
  }
  Value *newExpAvg = add(expAvg, mul(scalar(1.0 - beta1), sub(grad, expAvg)));
  Value *newExpAvgSq = add(mul(scalar(beta2), expAvgSq), mul(scalar(1.0 - beta2), mul(grad, grad)));
  // Bias corrections on scalars, 1 - beta^step, as -expm1(step * log(beta)) with log(beta) taken
  // in double: in f32, 1 - pow(0.999f, 1) is off by 1.3e-5 relative (0.999 is not an f32), while
  // torch computes the corrections in double.
  auto correction = [&](double beta) {
    return unary(b, OpKind::Neg, unary(b, OpKind::Expm1, mul(step, scalar(std::log(beta)))));
  };
  Value *correction1 = correction(beta1), *correction2 = correction(beta2);
  Value *stepSize = binary(b, OpKind::Div, lr, correction1);
  Value *denominator = add(binary(b, OpKind::Div, unary(b, OpKind::Sqrt, newExpAvgSq), unary(b, OpKind::Sqrt, correction2)),
                           scalar(attrFloat(attrs, "eps")));
  Value *updated = sub(param, mul(stepSize, binary(b, OpKind::Div, newExpAvg, denominator)));
  return {updated, newExpAvg, newExpAvgSq};
}

} // namespace

OpDef defineSgdUpdate() {
  OpDef def;
  def.attrs = {floatAttr("momentum", 0.0), floatAttr("dampening", 0.0), intAttr("nesterov", 0),
               floatAttr("weight_decay", 0.0)};
  def.infer = inferSgdUpdate;
  def.decompose = decomposeSgdUpdate;
  return def;
}

OpDef defineAdamUpdate() {
  OpDef def;
  def.attrs = {floatAttr("beta1", 0.9), floatAttr("beta2", 0.999), floatAttr("eps", 1e-8),
               floatAttr("weight_decay", 0.0), intAttr("decoupled", 0)};
  def.infer = inferAdamUpdate;
  def.decompose = decomposeAdamUpdate;
  return def;
}

} // namespace kiln::ir
