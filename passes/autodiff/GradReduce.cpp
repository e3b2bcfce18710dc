// Gradient rules of the reductions and the sequence ops (cumsum, topk). A reduction's upstream
// gradient is first viewed with the reduced axes kept as size 1, so it broadcasts back over them.
#include "ir/ops/DecomposeHelpers.h"
#include "passes/autodiff/GradientRules.h"

namespace kiln::passes::autodiff {

using namespace ir;
using ops::binary;

namespace {

/// The reduction's axes, normalised; empty `axes` means every axis.
std::vector<int64_t> reducedAxes(const Node &node) {
  int64_t rank = node.input(0)->rank();
  std::vector<int64_t> axes = ops::normalizeAxes(node.attrInts("axes"), rank, "axes");
  if (axes.empty())
    for (int64_t d = 0; d < rank; ++d)
      axes.push_back(d);
  return axes;
}

/// `v` (a reduction's output or its gradient) with the reduced axes present as size 1.
Value *withKeptAxes(Builder &b, Value *v, const Shape &inputShape, const std::vector<int64_t> &axes) {
  Shape kept = inputShape;
  for (int64_t axis : axes)
    kept[axis] = 1;
  return v->shape() == kept ? v : ops::reshape(b, v, kept);
}

} // namespace

std::vector<Value *> gradReduce(Builder &b, const Node &node, const std::vector<Value *> &gradOutputs) {
  Value *x = node.input(0);
  std::vector<int64_t> axes = reducedAxes(node);
  Value *g = withKeptAxes(b, gradOutputs[0], x->shape(), axes);
  switch (node.op()) {
  case OpKind::ReduceSum:
    return {b.create(OpKind::Broadcast, {g}, {{"shape", x->shape()}})};
  case OpKind::ReduceMax:
  case OpKind::ReduceMin: {
    // Every element equal to the extremum shares the gradient evenly (PyTorch's amax/amin).
    Value *y = withKeptAxes(b, node.output(), x->shape(), axes);
    Value *mask = maskAs(b, binary(b, OpKind::Eq, x, y), x->dtype());
    Value *ties = b.create(OpKind::ReduceSum, {mask}, {{"axes", axes}, {"keepdims", int64_t(1)}});
    return {binary(b, OpKind::Mul, mask, binary(b, OpKind::Div, g, ties))};
  }
  case OpKind::ReduceProd: {
    // d(prod)/dx_i = prod / x_i: exact for non-zero inputs; a zero input gives inf/NaN here,
    // a known limitation (PyTorch special-cases zeros).
    Value *y = withKeptAxes(b, node.output(), x->shape(), axes);
    return {binary(b, OpKind::Div, binary(b, OpKind::Mul, g, y), x)};
  }
  default:
    fail("autodiff: internal error, '{}' is not a differentiable reduction", node.opName());
  }
}

std::vector<Value *> gradCumSum(Builder &b, const Node &node, const std::vector<Value *> &gradOutputs) {
  // Each input element feeds every later (earlier, when reversed) output: the transpose is a
  // cumulative sum in the opposite direction, with the same exclusivity.
  AttrMap attrs = node.attrs();
  attrs["reverse"] = int64_t(node.attrInt("reverse") != 0 ? 0 : 1);
  return {b.create(OpKind::CumSum, {gradOutputs[0]}, attrs)};
}

std::vector<Value *> gradTopK(Builder &b, const Node &node, const std::vector<Value *> &gradOutputs) {
  // The values are x gathered at the indices output: scatter their gradient back there.
  Value *x = node.input(0);
  Value *sums = zerosOf(b, x->type());
  int64_t axis = node.attrInt("axis");
  return {b.create(OpKind::ScatterAdd, {sums, node.output(1), gradOutputs[0]}, {{"axis", axis}})};
}

} // namespace kiln::passes::autodiff
