// Gradient rules of the elementwise ops: unary math (the Gradient column of
// ir/ElementwiseOps.def), binary arithmetic (with broadcasting undone by sumToShape), where, cast
// and clip. Each rule is the textbook derivative written with the builder; where a rule can reuse
// the forward output (exp, sqrt, tanh, sigmoid, ...) it does, as PyTorch's derivatives.yaml does,
// so the backward graph recomputes nothing.
#include "ir/ElementwiseOps.h"
#include "ir/ops/DecomposeHelpers.h"
#include "passes/autodiff/GradientFormula.h"
#include "passes/autodiff/GradientRules.h"

namespace kiln::passes::autodiff {

using namespace ir;
using ops::binary;
using ops::constantLike;
using ops::unary;

namespace {

Value *mul(Builder &b, Value *l, Value *r) { return binary(b, OpKind::Mul, l, r); }
Value *div(Builder &b, Value *l, Value *r) { return binary(b, OpKind::Div, l, r); }
Value *add(Builder &b, Value *l, Value *r) { return binary(b, OpKind::Add, l, r); }
Value *sub(Builder &b, Value *l, Value *r) { return binary(b, OpKind::Sub, l, r); }
Value *scaled(Builder &b, Value *x, double factor) { return mul(b, x, constantLike(b, x, factor)); }
Value *plus(Builder &b, Value *x, double c) { return add(b, x, constantLike(b, x, c)); }
Value *oneMinus(Builder &b, Value *x) { return sub(b, constantLike(b, x, 1.0), x); }

} // namespace

std::vector<Value *> gradUnary(Builder &b, const Node &node, const std::vector<Value *> &gradOutputs) {
  const UnaryOpRow *row = unaryOpRow(node.op());
  if (!row || row->gradient.empty())
    fail("autodiff: internal error, '{}' is not a differentiable unary op", node.opName());
  return {buildGradientFormula(b, node.op(), row->gradient, {gradOutputs[0], node.input(0), node.output()})};
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
