// Gradient rules of the elementwise ops: unary math, binary arithmetic (with broadcasting undone
// by sumToShape), where, cast and clip. Each rule is the textbook derivative written with the
// builder; where a rule can reuse the forward output (exp, sqrt, tanh, sigmoid, ...) it does, as
// PyTorch's derivatives.yaml does, so the backward graph recomputes nothing.
#include <cmath>

#include "ir/ops/DecomposeHelpers.h"
#include "passes/autodiff/GradientRules.h"

namespace kiln::passes::autodiff {

using namespace ir;
using ops::binary;
using ops::constantLike;
using ops::unary;

namespace {

constexpr double kTwoOverSqrtPi = 1.12837916709551257390; // d/dx erf(x) = 2/sqrt(pi) * exp(-x^2)

Value *mul(Builder &b, Value *l, Value *r) { return binary(b, OpKind::Mul, l, r); }
Value *div(Builder &b, Value *l, Value *r) { return binary(b, OpKind::Div, l, r); }
Value *add(Builder &b, Value *l, Value *r) { return binary(b, OpKind::Add, l, r); }
Value *sub(Builder &b, Value *l, Value *r) { return binary(b, OpKind::Sub, l, r); }
Value *scaled(Builder &b, Value *x, double factor) { return mul(b, x, constantLike(b, x, factor)); }
Value *plus(Builder &b, Value *x, double c) { return add(b, x, constantLike(b, x, c)); }
Value *oneMinus(Builder &b, Value *x) { return sub(b, constantLike(b, x, 1.0), x); }

// The derivative dy/dx of a unary op, as a value of x's type.
Value *unaryDerivative(Builder &b, OpKind op, Value *x, Value *y) {
  switch (op) {
  case OpKind::Neg: return constantLike(b, x, -1.0);
  case OpKind::Abs: return unary(b, OpKind::Sign, x); // sign(0) = 0, as PyTorch
  case OpKind::Exp: return y;
  case OpKind::Expm1: return plus(b, y, 1.0);
  case OpKind::Log: return unary(b, OpKind::Reciprocal, x);
  case OpKind::Log1p: return unary(b, OpKind::Reciprocal, plus(b, x, 1.0));
  case OpKind::Sqrt: return div(b, constantLike(b, y, 0.5), y);
  case OpKind::Rsqrt: return div(b, scaled(b, y, -0.5), x); // -x^(-3/2) / 2 = -y / (2x)
  case OpKind::Reciprocal: return unary(b, OpKind::Neg, mul(b, y, y));
  case OpKind::Tanh: return oneMinus(b, mul(b, y, y));
  case OpKind::Sigmoid: return mul(b, y, oneMinus(b, y));
  case OpKind::Erf: return scaled(b, unary(b, OpKind::Exp, unary(b, OpKind::Neg, mul(b, x, x))), kTwoOverSqrtPi);
  case OpKind::Relu: // relu'(0) = 0, as PyTorch
    return maskAs(b, binary(b, OpKind::Gt, x, constantLike(b, x, 0.0)), x->dtype());
  case OpKind::Sin: return unary(b, OpKind::Cos, x);
  case OpKind::Cos: return unary(b, OpKind::Neg, unary(b, OpKind::Sin, x));
  case OpKind::Tan: return plus(b, mul(b, y, y), 1.0);
  case OpKind::Asin: return unary(b, OpKind::Rsqrt, oneMinus(b, mul(b, x, x)));
  case OpKind::Acos: return unary(b, OpKind::Neg, unary(b, OpKind::Rsqrt, oneMinus(b, mul(b, x, x))));
  case OpKind::Atan: return unary(b, OpKind::Reciprocal, plus(b, mul(b, x, x), 1.0));
  case OpKind::Sinh: return unary(b, OpKind::Cosh, x);
  case OpKind::Cosh: return unary(b, OpKind::Sinh, x);
  default:
    fail("autodiff: internal error, '{}' is not a differentiable unary op", opName(op));
  }
}

} // namespace

std::vector<Value *> gradUnary(Builder &b, const Node &node, const std::vector<Value *> &gradOutputs) {
  Value *g = gradOutputs[0];
  if (node.op() == OpKind::Neg)
    return {unary(b, OpKind::Neg, g)};
  return {mul(b, g, unaryDerivative(b, node.op(), node.input(0), node.output()))};
}

std::vector<Value *> gradBinary(Builder &b, const Node &node, const std::vector<Value *> &gradOutputs) {
  Value *g = gradOutputs[0], *lhs = node.input(0), *rhs = node.input(1), *y = node.output();
  Value *gl = nullptr, *gr = nullptr;
  switch (node.op()) {
  case OpKind::Add:
    gl = g, gr = g;
    break;
  case OpKind::Sub:
    gl = g, gr = unary(b, OpKind::Neg, g);
    break;
  case OpKind::Mul:
    gl = mul(b, g, rhs), gr = mul(b, g, lhs);
    break;
  case OpKind::Div: // d(l/r)/dr = -l/r^2 = -y/r
    gl = div(b, g, rhs), gr = unary(b, OpKind::Neg, div(b, mul(b, g, y), rhs));
    break;
  case OpKind::Pow: {
    // d/dl = r * l^(r-1); d/dr = y * log(l), taken as 0 where l <= 0 (where log has no real value
    // and PyTorch masks l == 0).
    gl = mul(b, g, mul(b, rhs, binary(b, OpKind::Pow, lhs, plus(b, rhs, -1.0))));
    Value *positive = binary(b, OpKind::Gt, lhs, constantLike(b, lhs, 0.0));
    Value *safeBase = ops::select(b, positive, lhs, constantLike(b, lhs, 1.0));
    gr = mul(b, g, mul(b, y, unary(b, OpKind::Log, safeBase)));
    break;
  }
  case OpKind::Max:
  case OpKind::Min: {
    // The winner takes the gradient; ties split it evenly (PyTorch's maximum/minimum).
    OpKind wins = node.op() == OpKind::Max ? OpKind::Gt : OpKind::Lt;
    Value *lhsShare = add(b, maskAs(b, binary(b, wins, lhs, rhs), g->dtype()),
                          scaled(b, maskAs(b, binary(b, OpKind::Eq, lhs, rhs), g->dtype()), 0.5));
    gl = mul(b, g, lhsShare), gr = mul(b, g, oneMinus(b, lhsShare));
    break;
  }
  case OpKind::Mod: // y = l - r*q with q = (l - y)/r piecewise constant: dy/dl = 1, dy/dr = -q
    gl = g, gr = unary(b, OpKind::Neg, mul(b, g, div(b, sub(b, lhs, y), rhs)));
    break;
  default:
    fail("autodiff: internal error, '{}' is not a differentiable binary op", node.opName());
  }
  return {sumToShape(b, gl, lhs->shape()), sumToShape(b, gr, rhs->shape())};
}

std::vector<Value *> gradWhere(Builder &b, const Node &node, const std::vector<Value *> &gradOutputs) {
  Value *g = gradOutputs[0], *cond = node.input(0);
  Value *zero = constantLike(b, g, 0.0);
  Value *ifTrue = ops::select(b, cond, g, zero), *ifFalse = ops::select(b, cond, zero, g);
  return {nullptr, sumToShape(b, ifTrue, node.input(1)->shape()), sumToShape(b, ifFalse, node.input(2)->shape())};
}

std::vector<Value *> gradCast(Builder &b, const Node &node, const std::vector<Value *> &gradOutputs) {
  Value *x = node.input(0);
  if (!isFloat(x->dtype())) // an integer source has no gradient to receive
    return {nullptr};
  return {b.create(OpKind::Cast, {gradOutputs[0]}, {{"to", x->dtype()}})};
}

std::vector<Value *> gradClip(Builder &b, const Node &node, const std::vector<Value *> &gradOutputs) {
  // Inside [min, max], bounds included, the gradient passes (PyTorch's clamp).
  Value *x = node.input(0);
  Value *aboveMin = binary(b, OpKind::Ge, x, constantLike(b, x, node.attrFloat("min")));
  Value *belowMax = binary(b, OpKind::Le, x, constantLike(b, x, node.attrFloat("max")));
  Value *inside = binary(b, OpKind::And, aboveMin, belowMax);
  return {mul(b, gradOutputs[0], maskAs(b, inside, x->dtype()))};
}

} // namespace kiln::passes::autodiff
