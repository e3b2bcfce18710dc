// Gradient rules of the elementwise ops: the rows of ir/ElementwiseOps.def (their Gradient
// column, built by GradientFormula.h, with broadcasting undone by sumToShape), mod, where, cast
// and clip. Each rule is the textbook derivative; where a rule can reuse the forward output
// (exp, sqrt, tanh, sigmoid, ...) it does, as PyTorch's derivatives.yaml does, so the backward
// graph recomputes nothing.
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
Value *sub(Builder &b, Value *l, Value *r) { return binary(b, OpKind::Sub, l, r); }

} // namespace

std::vector<Value *> gradTableRow(Builder &b, const Node &node, const std::vector<Value *> &gradOutputs) {
  std::string_view gradient;
  if (const UnaryOpRow *row = unaryOpRow(node.op()))
    gradient = row->gradient;
  else if (const BinaryOpRow *row = binaryOpRow(node.op()))
    gradient = row->gradient;
  if (gradient.empty())
    fail("autodiff: internal error, '{}' is no differentiable row of ir/ElementwiseOps.def", node.opName());
  std::vector<Value *> grads =
      buildGradientFormula(b, node.op(), gradient, {gradOutputs[0], node.inputs(), node.output()});
  for (size_t i = 0; i < grads.size(); ++i)
    grads[i] = sumToShape(b, grads[i], node.input(i)->shape());
  return grads;
}

// y = a - b*q with q = (a - y)/b piecewise constant: dy/da = 1, dy/db = -q.
std::vector<Value *> gradMod(Builder &b, const Node &node, const std::vector<Value *> &gradOutputs) {
  Value *g = gradOutputs[0], *lhs = node.input(0), *rhs = node.input(1), *y = node.output();
  Value *gr = unary(b, OpKind::Neg, mul(b, g, div(b, sub(b, lhs, y), rhs)));
  return {sumToShape(b, g, lhs->shape()), sumToShape(b, gr, rhs->shape())};
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
