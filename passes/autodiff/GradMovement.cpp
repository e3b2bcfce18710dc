// Gradient rules of the movement ops (reshape, permute, broadcast, slice, pad, concat, split) and
// the indexing ops (gather, gather_elements, scatter_add). Movement ops are linear maps that copy
// elements, so each gradient is the transposed copy: the inverse reshape or permutation, a sum
// over broadcast axes, zero padding for a slice, a slice for a zero pad. Slices with steps and
// reflect/edge pads, where one input element may feed several outputs, use the generic
// transpose: the forward op applied to the input's flat indices gives each output's source
// (an index map, computed now on the host), and the gradient is summed back with scatter_add.
#include <algorithm>

#include "ir/Evaluator.h"
#include "ir/ops/DecomposeHelpers.h"
#include "passes/autodiff/GradientRules.h"

namespace kiln::passes::autodiff {

using namespace ir;

namespace {

/// Where each output element of the movement node comes from, as flat input indices; fill
/// elements (constant padding) get the input's element count.
Tensor movementIndexMap(const Node &node) {
  const TensorType &in = node.input(0)->type();
  int64_t count = in.numElements();
  Tensor flatIndices(DType::I64, in.shape);
  for (int64_t i = 0; i < count; ++i)
    flatIndices.setInt(i, i);
  AttrMap attrs = node.attrs();
  if (node.op() == OpKind::Pad)
    attrs["value"] = static_cast<double>(count);
  return evaluateOp(node.op(), {flatIndices}, attrs, {TensorType{DType::I64, node.output()->shape()}})[0];
}

Value *gradSlice(Builder &b, const Node &node, Value *g) {
  const auto &steps = node.attrInts("steps");
  bool unitSteps = std::all_of(steps.begin(), steps.end(), [](int64_t s) { return s == 1; });
  const TensorType &in = node.input(0)->type();
  if (!unitSteps)
    return scatterByIndexMap(b, g, movementIndexMap(node), in);
  // A unit-step slice keeps [start, start + count) of each axis: pad the gradient back with zeros.
  int64_t rank = in.rank();
  std::vector<int64_t> pads(static_cast<size_t>(2 * rank), 0);
  std::vector<int64_t> axes = node.attrInts("axes");
  const auto &starts = node.attrInts("starts");
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i)
      axes.push_back(static_cast<int64_t>(i));
  axes = ops::normalizeAxes(axes, rank, "axes");
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t axis = axes[i], dim = in.shape[axis];
    int64_t start = starts[i] < 0 ? starts[i] + dim : starts[i]; // as the slice's own clamping
    start = std::clamp<int64_t>(start, 0, dim);
    int64_t count = node.output()->shape()[axis];
    pads[axis] = start;
    pads[rank + axis] = dim - start - count;
  }
  return b.create(OpKind::Pad, {g}, {{"pads", pads}});
}

Value *gradPad(Builder &b, const Node &node, Value *g) {
  const auto &pads = node.attrInts("pads");
  const TensorType &in = node.input(0)->type();
  bool cropsNothing = std::all_of(pads.begin(), pads.end(), [](int64_t p) { return p >= 0; });
  if (node.attrString("mode") != "constant" || !cropsNothing)
    return scatterByIndexMap(b, g, movementIndexMap(node), in);
  // Constant padding added fill elements around the input: the input's gradient is the middle.
  int64_t rank = in.rank();
  std::vector<int64_t> starts, ends;
  for (int64_t d = 0; d < rank; ++d) {
    starts.push_back(pads[d]);
    ends.push_back(pads[d] + in.shape[d]);
  }
  return b.create(OpKind::Slice, {g}, {{"starts", starts}, {"ends", ends}});
}

std::vector<int64_t> inversePermutation(const std::vector<int64_t> &perm) {
  std::vector<int64_t> inverse(perm.size());
  for (size_t i = 0; i < perm.size(); ++i)
    inverse[perm[i]] = static_cast<int64_t>(i);
  return inverse;
}

} // namespace

std::vector<Value *> gradMovement(Builder &b, const Node &node, const std::vector<Value *> &gradOutputs) {
  Value *g = gradOutputs[0], *x = node.input(0);
  switch (node.op()) {
  case OpKind::Reshape:
    return {ops::reshape(b, g, x->shape())};
  case OpKind::Permute: {
    auto perm = ops::normalizeAxes(node.attrInts("perm"), x->rank(), "perm");
    return {b.create(OpKind::Permute, {g}, {{"perm", inversePermutation(perm)}})};
  }
  case OpKind::Broadcast:
    return {sumToShape(b, g, x->shape())};
  case OpKind::Slice:
    return {gradSlice(b, node, g)};
  case OpKind::Pad:
    return {gradPad(b, node, g)};
  case OpKind::Concat: {
    int64_t axis = ops::normalizeAxes({node.attrInt("axis")}, x->rank(), "axis")[0];
    std::vector<Value *> grads;
    int64_t offset = 0;
    for (Value *operand : node.inputs()) {
      int64_t size = operand->shape()[axis];
      grads.push_back(b.create(OpKind::Slice, {g},
                               {{"starts", std::vector<int64_t>{offset}},
                                {"ends", std::vector<int64_t>{offset + size}},
                                {"axes", std::vector<int64_t>{axis}}}));
      offset += size;
    }
    return grads;
  }
  case OpKind::Split: // the outputs tile the input along the axis (their sizes sum to its size)
    return {b.create(OpKind::Concat, gradOutputs, {{"axis", node.attrInt("axis")}})};
  default:
    fail("autodiff: internal error, '{}' is not a movement op", node.opName());
  }
}

std::vector<Value *> gradIndexing(Builder &b, const Node &node, const std::vector<Value *> &gradOutputs) {
  Value *g = gradOutputs[0], *data = node.input(0), *indices = node.input(1);
  switch (node.op()) {
  case OpKind::Gather: {
    // View data as [outer, dim, inner] and the gradient as [outer, K, inner] (K = index count):
    // gradient block (o, j) adds into data block (o, indices[j]).
    auto axis = static_cast<size_t>(ops::normalizeAxes({node.attrInt("axis")}, data->rank(), "axis")[0]);
    const Shape &shape = data->shape();
    int64_t outer = ops::productOf(shape, 0, axis), inner = ops::productOf(shape, axis + 1, shape.size());
    int64_t count = indices->type().numElements();
    Shape blocks{outer, count, inner};
    Value *rows = ops::reshape(b, indices, {1, count, 1});
    rows = b.create(OpKind::Broadcast, {rows}, {{"shape", blocks}});
    Value *sums = zerosOf(b, TensorType{data->dtype(), {outer, shape[axis], inner}});
    sums = b.create(OpKind::ScatterAdd, {sums, rows, ops::reshape(b, g, blocks)}, {{"axis", int64_t(1)}});
    return {ops::reshape(b, sums, shape), nullptr};
  }
  case OpKind::GatherElements: {
    Value *sums = zerosOf(b, data->type());
    return {b.create(OpKind::ScatterAdd, {sums, indices, g}, {{"axis", node.attrInt("axis")}}), nullptr};
  }
  case OpKind::ScatterAdd:
    return {g, nullptr, b.create(OpKind::GatherElements, {g, indices}, {{"axis", node.attrInt("axis")}})};
  default:
    fail("autodiff: internal error, '{}' is not a differentiable indexing op", node.opName());
  }
}

} // namespace kiln::passes::autodiff
