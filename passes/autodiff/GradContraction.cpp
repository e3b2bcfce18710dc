// Gradient rules of the contractions and windows: matmul, conv, conv_transpose, max_pool and
// avg_pool.
//
// matmul: dA = g @ B^T and dB = A^T @ g on the operands promoted to rank >= 2 (numpy's 1-D
// rules), summed over broadcast batch dims.
// conv: the input gradient is conv_transpose of g with the same weight and attributes (the
// evaluator documents <conv(x, w), g> == <x, conv_transpose(g, w)>), with output_padding chosen
// to give back the input's size. The weight gradient is itself a convolution in which the batch
// plays the channel role: x viewed as [Cin/G, G*N, spatial] convolved, G groups, with g viewed as
// [G*Cout/G, N, out spatial] as the kernel, stride and dilation swapped; its spatial extent may
// exceed the kernel's by the rows a strided conv never reaches, which are sliced off.
// conv_transpose: conv's adjoint, so the same two convolutions with the roles of x and g swapped.
// max_pool / avg_pool: the window table (for every output position and kernel tap, the input
// position it reads, or a spare slot for padding) is computed on the host; max_pool gathers the
// windows, marks the elements equal to the maximum (ties share evenly) and scatters the
// gradient back; avg_pool scatters g / count. A dedicated pooling-gradient primitive would
// avoid the K-fold window tensor; this is the simple, exact form.
#include <algorithm>
#include <limits>

#include "ir/ops/Composite.h"
#include "ir/ops/Window.h"
#include "passes/autodiff/GradientRules.h"

namespace kiln::passes::autodiff {

using namespace ir;
using ops::binary;
using ops::reshape;

namespace {

Value *transposeLastTwo(Builder &b, Value *x) {
  std::vector<int64_t> perm;
  for (int64_t d = 0; d < x->rank(); ++d)
    perm.push_back(d);
  std::swap(perm[perm.size() - 1], perm[perm.size() - 2]);
  return b.create(OpKind::Permute, {x}, {{"perm", perm}});
}

Value *permute(Builder &b, Value *x, std::vector<int64_t> perm) {
  return b.create(OpKind::Permute, {x}, {{"perm", std::move(perm)}});
}

} // namespace

std::vector<Value *> gradMatMul(Builder &b, const Node &node, const std::vector<Value *> &gradOutputs) {
  Value *a = node.input(0), *bm = node.input(1);
  Value *ap = a->rank() == 1 ? reshape(b, a, {1, a->shape()[0]}) : a;
  Value *bp = bm->rank() == 1 ? reshape(b, bm, {bm->shape()[0], 1}) : bm;
  Shape batchA(ap->shape().begin(), ap->shape().end() - 2), batchB(bp->shape().begin(), bp->shape().end() - 2);
  Shape outShape = ops::broadcastShapes(batchA, batchB);
  outShape.push_back(ap->shape()[ap->rank() - 2]);
  outShape.push_back(bp->shape().back());
  Value *g = reshape(b, gradOutputs[0], outShape);
  Value *ga = sumToShape(b, binary(b, OpKind::MatMul, g, transposeLastTwo(b, bp)), ap->shape());
  Value *gb = sumToShape(b, binary(b, OpKind::MatMul, transposeLastTwo(b, ap), g), bp->shape());
  return {reshape(b, ga, a->shape()), reshape(b, gb, bm->shape())};
}

namespace {

struct ConvAttrs {
  std::vector<int64_t> strides, pads, dilations;
  int64_t groups = 1;
};

ConvAttrs readConvAttrs(const Node &node, int64_t spatial) {
  return {ops::perSpatialDim(node.attrs(), "strides", spatial, 1, 1), ops::spatialPads(node.attrs(), spatial),
          ops::perSpatialDim(node.attrs(), "dilations", spatial, 1, 1), node.attrInt("groups")};
}

/// The gradient, for a weight of `weightShape`, of <conv(x, w), g>: as described at the top.
Value *convWeightGradient(Builder &b, Value *x, Value *g, const Shape &weightShape, const ConvAttrs &a) {
  const Shape &xs = x->shape();
  int64_t spatial = x->rank() - 2, n = xs[0], cinGroup = weightShape[1];
  Shape xGrouped{n, a.groups, cinGroup};
  Shape xBatched{cinGroup, a.groups * n};
  std::vector<int64_t> perm{2, 1, 0}, swapFirstTwo{1, 0};
  for (int64_t d = 0; d < spatial; ++d) {
    xGrouped.push_back(xs[2 + d]);
    xBatched.push_back(xs[2 + d]);
    perm.push_back(3 + d);
    swapFirstTwo.push_back(2 + d);
  }
  Value *xv = reshape(b, permute(b, reshape(b, x, xGrouped), perm), xBatched); // [Cin/G, G*N, ...]
  Value *gv = permute(b, g, swapFirstTwo);                                       // [Cout, N, out...]
  Value *full = b.create(OpKind::Conv, {xv, gv},
                         {{"strides", a.dilations}, {"pads", a.pads}, {"dilations", a.strides}, {"groups", a.groups}});
  // full: [Cin/G, Cout, >= kernel...]; keep the kernel's extent and put Cout first.
  if (!std::equal(weightShape.begin() + 2, weightShape.end(), full->shape().begin() + 2)) {
    std::vector<int64_t> starts, ends, axes;
    for (int64_t d = 0; d < spatial; ++d) {
      starts.push_back(0);
      ends.push_back(weightShape[2 + d]);
      axes.push_back(2 + d);
    }
    full = b.create(OpKind::Slice, {full}, {{"starts", starts}, {"ends", ends}, {"axes", axes}});
  }
  return permute(b, full, swapFirstTwo);
}

} // namespace

std::vector<Value *> gradConv(Builder &b, const Node &node, const std::vector<Value *> &gradOutputs) {
  Value *x = node.input(0), *w = node.input(1), *g = gradOutputs[0];
  const Shape &xs = x->shape(), &ws = w->shape(), &gs = g->shape();
  int64_t spatial = x->rank() - 2;
  ConvAttrs a = readConvAttrs(node, spatial);
  // Input gradient: conv_transpose's output is stride*(out-1) + output_padding + span - pads.
  std::vector<int64_t> outputPadding;
  for (int64_t d = 0; d < spatial; ++d) {
    int64_t reached = a.strides[d] * (gs[2 + d] - 1) + ops::dilatedSpan(ws[2 + d], a.dilations[d]) - a.pads[d] -
                      a.pads[spatial + d];
    outputPadding.push_back(xs[2 + d] - reached);
  }
  Value *gx = b.create(OpKind::ConvTranspose, {g, w},
                       {{"strides", a.strides}, {"pads", a.pads}, {"dilations", a.dilations},
                        {"output_padding", outputPadding}, {"groups", a.groups}});
  return {gx, convWeightGradient(b, x, g, ws, a)};
}

std::vector<Value *> gradConvTranspose(Builder &b, const Node &node, const std::vector<Value *> &gradOutputs) {
  // conv_transpose is conv's adjoint: <conv_transpose(x, w), g> = <x, conv(g, w)>. So x's
  // gradient is conv(g, w), and w's is conv's weight gradient with g as the input and x as the
  // upstream gradient.
  Value *x = node.input(0), *w = node.input(1), *g = gradOutputs[0];
  ConvAttrs a = readConvAttrs(node, x->rank() - 2);
  Value *gx = b.create(OpKind::Conv, {g, w},
                       {{"strides", a.strides}, {"pads", a.pads}, {"dilations", a.dilations}, {"groups", a.groups}});
  return {gx, convWeightGradient(b, g, x, w->shape(), a)};
}

namespace {

struct WindowTable {
  int64_t planeSize = 0; // input elements per (n, c) plane; the spare slot's index
  int64_t windows = 0, taps = 0;
  Tensor positions;            // i64 [windows * taps]: input position within the plane, or planeSize
  std::vector<double> divisor; // avg_pool: per window, the count it divides by
};

WindowTable windowTable(const Node &node) {
  const Shape &xs = node.input(0)->shape(), &ys = node.output()->shape();
  int64_t spatial = static_cast<int64_t>(xs.size()) - 2;
  const AttrMap &attrs = node.attrs();
  std::vector<int64_t> kernel = ops::perSpatialDim(attrs, "kernel", spatial, 1, 1);
  std::vector<int64_t> strides = ops::perSpatialDim(attrs, "strides", spatial, 1, 1);
  std::vector<int64_t> dilations(static_cast<size_t>(spatial), 1);
  if (node.op() == OpKind::MaxPool)
    dilations = ops::perSpatialDim(attrs, "dilations", spatial, 1, 1);
  std::vector<int64_t> pads = ops::spatialPads(attrs, spatial);
  bool includePad = node.op() == OpKind::AvgPool && node.attrInt("count_include_pad") != 0;

  WindowTable t;
  Shape inPlane(xs.begin() + 2, xs.end()), outPlane(ys.begin() + 2, ys.end());
  t.planeSize = ops::productOf(inPlane, 0, inPlane.size());
  t.windows = ops::productOf(outPlane, 0, outPlane.size());
  t.taps = ops::productOf(kernel, 0, kernel.size());
  t.positions = Tensor(DType::I64, {t.windows * t.taps});
  int64_t slot = 0;
  ops::forEachIndex(outPlane, [&](const std::vector<int64_t> &out, int64_t) {
    int64_t valid = 0, padded = 0;
    ops::forEachIndex(kernel, [&](const std::vector<int64_t> &tap, int64_t) {
      int64_t flat = 0;
      bool inside = true, inPaddedExtent = true;
      for (int64_t d = 0; d < spatial; ++d) {
        int64_t p = out[d] * strides[d] - pads[d] + tap[d] * dilations[d];
        inside = inside && p >= 0 && p < inPlane[d];
        inPaddedExtent = inPaddedExtent && p >= -pads[d] && p < inPlane[d] + pads[spatial + d];
        flat = flat * inPlane[d] + p;
      }
      valid += inside;
      padded += inPaddedExtent;
      t.positions.setInt(slot++, inside ? flat : t.planeSize);
    });
    t.divisor.push_back(static_cast<double>(includePad ? padded : valid));
  });
  return t;
}

} // namespace

std::vector<Value *> gradPool(Builder &b, const Node &node, const std::vector<Value *> &gradOutputs) {
  Value *x = node.input(0);
  DType dtype = x->dtype();
  const Shape &xs = x->shape();
  WindowTable t = windowTable(node);
  int64_t planes = xs[0] * xs[1], spread = t.windows * t.taps;
  Value *g = reshape(b, gradOutputs[0], {planes, t.windows, 1});
  Value *positions = b.constant(t.positions);

  Value *contributions; // [planes, windows, taps]: what each tap adds to its input position
  if (node.op() == OpKind::MaxPool) {
    // Windows with the spare slot holding -inf, which never equals a maximum of real elements.
    Value *lowest = b.create(OpKind::Broadcast, {b.scalar(dtype, -std::numeric_limits<double>::infinity())},
                             {{"shape", Shape{planes, 1}}});
    Value *extended = b.create(OpKind::Concat, {reshape(b, x, {planes, t.planeSize}), lowest}, {{"axis", int64_t(1)}});
    Value *windows = reshape(b, b.create(OpKind::Gather, {extended, positions}, {{"axis", int64_t(1)}}),
                             {planes, t.windows, t.taps});
    Value *y = reshape(b, node.output(), {planes, t.windows, 1});
    Value *mask = maskAs(b, binary(b, OpKind::Eq, windows, y), dtype);
    Value *ties = b.create(OpKind::ReduceSum, {mask}, {{"axes", std::vector<int64_t>{2}}, {"keepdims", int64_t(1)}});
    ties = binary(b, OpKind::Max, ties, b.scalar(dtype, 1.0)); // an all-padding window has none
    contributions = binary(b, OpKind::Mul, mask, binary(b, OpKind::Div, g, ties));
  } else {
    // Each real tap of window l receives g / divisor(l); padding taps land in the spare slot.
    Tensor weights(dtype, {t.windows, t.taps});
    for (int64_t l = 0; l < t.windows; ++l)
      for (int64_t k = 0; k < t.taps; ++k)
        weights.setDouble(l * t.taps + k, t.divisor[l] > 0 ? 1.0 / t.divisor[l] : 0.0);
    contributions = binary(b, OpKind::Mul, g, b.constant(weights));
  }
  Value *targets = b.create(OpKind::Broadcast, {reshape(b, positions, {1, spread})}, {{"shape", Shape{planes, spread}}});
  Value *sums = zerosOf(b, TensorType{dtype, {planes, t.planeSize + 1}});
  sums = b.create(OpKind::ScatterAdd, {sums, targets, reshape(b, contributions, {planes, spread})},
                  {{"axis", int64_t(1)}});
  sums = b.create(OpKind::Slice, {sums},
                  {{"starts", std::vector<int64_t>{0}}, {"ends", std::vector<int64_t>{t.planeSize}},
                   {"axes", std::vector<int64_t>{1}}});
  return {reshape(b, sums, xs)};
}

} // namespace kiln::passes::autodiff
