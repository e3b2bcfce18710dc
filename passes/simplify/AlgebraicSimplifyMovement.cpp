// Rules of simplify-algebra about movement (permute, views, broadcast, cast, slice) and the
// broadcast operands of elementwise ops (AlgebraicSimplifyMovement.h).
#include "passes/simplify/AlgebraicSimplifyMovement.h"

#include "passes/simplify/AlgebraicSimplifyMatch.h"

namespace kiln::passes::simplify {

using ir::Builder;
using ir::Node;
using ir::OpKind;
using ir::Value;

// ---- movement -----------------------------------------------------------------------------------

Value *permutePermute(Builder &b, Node *n) {
  Node *inner = producerIf(n->input(0), OpKind::Permute);
  if (!inner)
    return nullptr;
  std::vector<int64_t> innerPerm = normalizedPerm(inner), outerPerm = normalizedPerm(n), composed;
  for (int64_t axis : outerPerm)
    composed.push_back(innerPerm[axis]);
  if (isIdentityPerm(composed))
    return inner->input(0);
  return b.create(OpKind::Permute, {inner->input(0)}, {{"perm", composed}});
}

Value *permuteOfMatMul(Builder &b, Node *n) {
  Node *product = producerIf(n->input(0), OpKind::MatMul);
  if (!product || product->output()->uses().size() != 1 || n->graph()->isOutput(product->output()))
    return nullptr;
  Value *a = product->input(0), *c = product->input(1);
  std::vector<int64_t> perm = normalizedPerm(n);
  const int64_t rank = static_cast<int64_t>(perm.size());
  if (rank < 2 || a->rank() < 2 || c->rank() < 2 || perm[rank - 1] != rank - 2)
    return nullptr;
  auto swapLastTwo = [](int64_t axis, int64_t r) { return axis == r - 1 ? r - 2 : axis == r - 2 ? r - 1 : axis; };
  auto transpose = [&](Value *x) {
    std::vector<int64_t> swap;
    for (int64_t d = 0; d < x->rank(); ++d)
      swap.push_back(swapLastTwo(d, x->rank()));
    return b.create(OpKind::Permute, {x}, {{"perm", swap}});
  };
  Value *swapped = b.create(OpKind::MatMul, {transpose(c), transpose(a)});
  std::vector<int64_t> rest;
  for (int64_t axis : perm)
    rest.push_back(swapLastTwo(axis, rank));
  return isIdentityPerm(rest) ? swapped : b.create(OpKind::Permute, {swapped}, {{"perm", rest}});
}

Value *permuteIdentity(Builder &, Node *n) { return isIdentityPerm(normalizedPerm(n)) ? n->input(0) : nullptr; }

static bool isView(OpKind op) {
  return op == OpKind::Reshape || op == OpKind::Squeeze || op == OpKind::Unsqueeze || op == OpKind::Flatten;
}

Value *viewSameShape(Builder &, Node *n) {
  return n->input(0)->shape() == n->output()->shape() ? n->input(0) : nullptr;
}

Value *viewChain(Builder &b, Node *n) {
  Node *inner = n->input(0)->producer();
  if (!inner || !isView(inner->op()))
    return nullptr;
  Value *source = inner->input(0);
  if (source->shape() == n->output()->shape())
    return source;
  return b.create(OpKind::Reshape, {source}, {{"shape", n->output()->shape()}});
}

Value *broadcastSameShape(Builder &, Node *n) {
  return n->input(0)->shape() == n->output()->shape() ? n->input(0) : nullptr;
}

Value *broadcastBroadcast(Builder &b, Node *n) {
  Node *inner = producerIf(n->input(0), OpKind::Broadcast);
  if (!inner)
    return nullptr;
  return keepType(b, inner->input(0), n);
}

Value *castSameDtype(Builder &, Node *n) {
  return ir::attrDType(n->attrs(), "to") == n->input(0)->dtype() ? n->input(0) : nullptr;
}

Value *sliceEverything(Builder &, Node *n) {
  Value *x = n->input(0);
  if (x->shape() != n->output()->shape())
    return nullptr;
  const std::vector<int64_t> &axes = n->attrInts("axes"), &steps = n->attrInts("steps");
  for (size_t i = 0; i < n->attrInts("starts").size(); ++i) {
    int64_t axis = axes.empty() ? static_cast<int64_t>(i) : axes[i];
    if (axis < 0)
      axis += x->rank();
    if ((steps.empty() ? 1 : steps[i]) < 0 && x->shape()[axis] > 1)
      return nullptr;
  }
  return x;
}

// ---- operands of ops that broadcast numpy-style -------------------------------------------------

/// What an operand could shrink to: `source` itself, or (toScalar) a rank-0 copy of the splat
/// constant `source`.
struct Shrunk {
  Value *source = nullptr;
  bool toScalar = false;
};

/// Rebuilds `n` with each operand replaced by what `shrink` offers for it, where doing so keeps
/// the output shape (checked operand by operand); nullptr when no operand changes. Reading an
/// operand through numpy broadcasting gives the element an explicit broadcast would have
/// given, because both align shapes from the right.
template <typename ShrinkFn> static Value *shrinkOperands(Builder &b, Node *n, ShrinkFn shrink) {
  std::vector<Value *> inputs = n->inputs();
  std::vector<Shape> shapes;
  for (Value *input : inputs)
    shapes.push_back(input->shape());
  std::vector<std::pair<size_t, Shrunk>> chosen;
  for (size_t i = 0; i < inputs.size(); ++i) {
    std::optional<Shrunk> candidate = shrink(inputs[i]);
    if (!candidate)
      continue;
    Shape kept = shapes[i];
    shapes[i] = candidate->toScalar ? Shape{} : candidate->source->shape();
    std::optional<Shape> out = broadcastAll(shapes);
    if (out && *out == n->output()->shape())
      chosen.emplace_back(i, *candidate);
    else
      shapes[i] = kept;
  }
  if (chosen.empty())
    return nullptr;
  for (auto &[i, shrunk] : chosen)
    inputs[i] = shrunk.toScalar ? scalarFrom(b, *constantOf(shrunk.source)) : shrunk.source;
  return b.create(n->op(), inputs, n->attrs());
}

Value *broadcastIntoConsumer(Builder &b, Node *n) {
  return shrinkOperands(b, n, [](Value *operand) -> std::optional<Shrunk> {
    Node *broadcast = producerIf(operand, OpKind::Broadcast);
    if (!broadcast)
      return std::nullopt;
    Value *source = broadcast->input(0);
    return Shrunk{source, source->rank() > 0 && splatValue(source).has_value()};
  });
}

Value *splatOperandToScalar(Builder &b, Node *n) {
  return shrinkOperands(b, n, [](Value *operand) -> std::optional<Shrunk> {
    if (operand->type().numElements() <= 1 || !splatValue(operand))
      return std::nullopt;
    return Shrunk{operand, true};
  });
}

} // namespace kiln::passes::simplify
