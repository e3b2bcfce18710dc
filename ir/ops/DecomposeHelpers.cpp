#include "ir/ops/DecomposeHelpers.h"

namespace kiln::ir::ops {

Value *unary(Builder &b, OpKind op, Value *x) { return b.create(op, {x}); }
Value *binary(Builder &b, OpKind op, Value *lhs, Value *rhs) { return b.create(op, {lhs, rhs}); }
Value *constantLike(Builder &b, Value *like, double value) { return b.scalar(like->dtype(), value); }
Value *select(Builder &b, Value *cond, Value *ifTrue, Value *ifFalse) {
  return b.create(OpKind::Where, {cond, ifTrue, ifFalse});
}
Value *reshape(Builder &b, Value *x, Shape shape) {
  return b.create(OpKind::Reshape, {x}, {{"shape", std::move(shape)}});
}

Value *perChannel(Builder &b, Value *vector, Value *x) {
  Shape channelShape(static_cast<size_t>(x->rank() - 1), 1);
  channelShape[0] = x->shape()[1];
  return channelShape.size() == 1 ? vector : reshape(b, vector, std::move(channelShape));
}

void requireFloat(const TensorType &type, std::string_view what) {
  if (!isFloat(type.dtype))
    fail("{} must be floating-point, got {}", what, dtypeName(type.dtype));
}

void requirePerChannelInputs(const std::vector<TensorType> &in, const std::vector<const char *> &names) {
  const TensorType &x = in[0];
  for (size_t i = 0; i < names.size(); ++i)
    if (in[i + 1].shape != Shape{x.shape[1]})
      fail("{} must be [{}] (one per channel of input {}), got {}", names[i], x.shape[1],
           shapeToString(x.shape), shapeToString(in[i + 1].shape));
}

void requireEpsilon(const AttrMap &attrs) {
  if (!(attrFloat(attrs, "epsilon") >= 0))
    fail("epsilon must be >= 0, got {}", attrFloat(attrs, "epsilon"));
}

LossReduction readLossReduction(const AttrMap &attrs) {
  const std::string &reduction = attrString(attrs, "reduction");
  if (reduction == "mean")
    return LossReduction::Mean;
  if (reduction == "sum")
    return LossReduction::Sum;
  if (reduction == "none")
    return LossReduction::None;
  fail("attribute 'reduction' must be \"mean\", \"sum\" or \"none\", got \"{}\"", reduction);
}

TensorType reducedLossType(const TensorType &perElement, LossReduction reduction) {
  return reduction == LossReduction::None ? perElement : TensorType{perElement.dtype, {}};
}

Value *applyLossReduction(Builder &b, Value *losses, LossReduction reduction) {
  switch (reduction) {
  case LossReduction::Mean: return b.create(OpKind::ReduceMean, {losses}, {{"axes", std::vector<int64_t>{}}});
  case LossReduction::Sum: return b.create(OpKind::ReduceSum, {losses}, {{"axes", std::vector<int64_t>{}}});
  case LossReduction::None: return losses;
  }
  return losses;
}

} // namespace kiln::ir::ops
