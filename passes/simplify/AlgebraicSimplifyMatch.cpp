// Matching and building helpers of simplify-algebra (AlgebraicSimplifyMatch.h).
#include "passes/simplify/AlgebraicSimplifyMatch.h"

#include <cmath>

namespace kiln::passes::simplify {

using ir::Builder;
using ir::Node;
using ir::OpKind;
using ir::Value;

// ---- matching ------------------------------------------------------------------------------

const Tensor *constantOf(const Value *value) {
  const Node *producer = value->producer();
  return producer && producer->op() == OpKind::Constant ? &producer->attrTensor("value") : nullptr;
}

std::optional<double> splatValue(const Value *value) {
  const Tensor *t = constantOf(value);
  if (!t || t->numElements() == 0)
    return std::nullopt;
  if (isFloat(t->dtype())) {
    double first = t->getDouble(0);
    for (int64_t i = 0; i < t->numElements(); ++i) {
      double element = t->getDouble(i);
      if (!(element == first) || std::signbit(element) != std::signbit(first)) // NaN fails at i = 0
        return std::nullopt;
    }
    return first;
  }
  int64_t first = t->getInt(0);
  for (int64_t i = 1; i < t->numElements(); ++i)
    if (t->getInt(i) != first)
      return std::nullopt;
  return static_cast<double>(first);
}

bool isAll(const Value *value, double x) {
  const Tensor *t = constantOf(value);
  if (!t || t->numElements() == 0)
    return false;
  for (int64_t i = 0; i < t->numElements(); ++i) {
    bool equal = isFloat(t->dtype()) ? t->getDouble(i) == x : static_cast<double>(t->getInt(i)) == x;
    if (!equal)
      return false;
  }
  return true;
}

Node *producerIf(const Value *value, OpKind op) {
  Node *producer = value->producer();
  return producer && producer->op() == op ? producer : nullptr;
}

std::optional<Shape> broadcastAll(const std::vector<Shape> &shapes) {
  Shape out;
  for (const Shape &shape : shapes) {
    if (shape.size() > out.size())
      out.insert(out.begin(), shape.size() - out.size(), 1);
    size_t offset = out.size() - shape.size();
    for (size_t d = 0; d < shape.size(); ++d) {
      int64_t &dim = out[offset + d];
      if (dim == 1)
        dim = shape[d];
      else if (shape[d] != 1 && shape[d] != dim)
        return std::nullopt;
    }
  }
  return out;
}

bool broadcastsTo(const Shape &from, const Shape &to) {
  if (from.size() > to.size())
    return false;
  size_t offset = to.size() - from.size();
  for (size_t d = 0; d < from.size(); ++d)
    if (from[d] != 1 && from[d] != to[offset + d])
      return false;
  return true;
}

// ---- building ------------------------------------------------------------------------------

Value *keepType(Builder &b, Value *replacement, const Node *root) {
  const TensorType &want = root->output()->type();
  if (replacement->type() == want)
    return replacement;
  if (replacement->dtype() != want.dtype || !broadcastsTo(replacement->shape(), want.shape))
    return nullptr;
  return b.create(OpKind::Broadcast, {replacement}, {{"shape", want.shape}});
}

Value *scalarFrom(Builder &b, const Tensor &t) {
  Tensor scalar(t.dtype(), Shape{});
  if (isFloat(t.dtype()))
    scalar.setDouble(0, t.getDouble(0));
  else
    scalar.setInt(0, t.getInt(0));
  return b.constant(scalar);
}

std::vector<int64_t> normalizedPerm(const Node *permute) {
  std::vector<int64_t> perm = permute->attrInts("perm");
  for (int64_t &axis : perm)
    if (axis < 0)
      axis += static_cast<int64_t>(perm.size());
  return perm;
}

bool isIdentityPerm(const std::vector<int64_t> &perm) {
  for (size_t d = 0; d < perm.size(); ++d)
    if (perm[d] != static_cast<int64_t>(d))
      return false;
  return true;
}


} // namespace kiln::passes::simplify
