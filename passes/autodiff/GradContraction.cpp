// Gradient rules of the contractions and windows: matmul, conv, conv_transpose, max_pool and
// avg_pool.
//
// matmul: dA = g @ B^T and dB = A^T @ g on the operands promoted to rank >= 2 (numpy's 1-D
// rules), summed over broadcast batch dims; an operand broadcast over the whole batch (a weight
// times batched activations) has the batch folded into its gradient's contraction instead.
// conv: the input gradient is conv_transpose of g with the same weight and attributes (the
// evaluator documents <conv(x, w), g> == <x, conv_transpose(g, w)>), with output_padding chosen
// to give back the input's size; a 2-D stride-1 conv's input gradient is instead the forward
// conv of g with the weight transposed and flipped (inputGradientAsConv), which runs on the
// forward path's faster kernels. The weight gradient is the conv_weight_grad primitive
// (ir/ops/ConvGrad.cpp), which codegen lowers to im2col + GEMM like the forward conv.
// conv_transpose: conv's adjoint, so x's gradient is conv(g, w), and w's is conv's weight
// gradient with the roles of x and g swapped, here still written as a convolution in which the
// batch plays the channel role: x viewed as [Cin/G, G*N, spatial] convolved, G groups, with g
// viewed as [G*Cout/G, N, out spatial] as the kernel, stride and dilation swapped; its spatial
// extent may exceed the kernel's by the rows a strided conv never reaches, which are sliced off.
// max_pool: the max_pool_grad primitive (ir/ops/PoolGrad.cpp) with the forward node's
// attributes, reading x, the pooled y and g: in each window the elements equal to the maximum
// share g evenly. Codegen runs it as one pass per (n, c) plane; the former composite (a host
// window table, a gather of the K-fold window tensor, eq, reduce_sum, div, mul, scatter_add)
// took about 40% of a LeNet-5 training step.
// avg_pool: the window table (for every output position and kernel tap, the input position it
// reads, or a spare slot for padding) is computed on the host, and g / count is scattered back.
#include <algorithm>
#include <limits>

#include "core/ShapeMath.h"
#include "ir/ops/DecomposeHelpers.h"
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

bool allOnes(const Shape &shape) {
  return std::all_of(shape.begin(), shape.end(), [](int64_t d) { return d == 1; });
}

/// dB for a B ([K, N] after its batch dims of 1) broadcast over every batch dim of g
/// ([batch..., M, N]), where A carries the whole batch: the batch folds into the contraction,
/// dB = A viewed as [batch*M, K], transposed, times g viewed as [batch*M, N]. One GEMM, with no
/// batched [batch, K, N] product to sum afterwards.
Value *foldedRightGradient(Builder &b, Value *ap, Value *g) {
  const Shape &as = ap->shape(), &gs = g->shape();
  int64_t rows = ops::productOf(gs, 0, gs.size() - 1);
  Value *a2 = reshape(b, ap, {rows, as.back()});
  Value *g2 = reshape(b, g, {rows, gs.back()});
  return binary(b, OpKind::MatMul, transposeLastTwo(b, a2), g2);
}

/// dA for an A ([M, K] after its batch dims of 1) broadcast over every batch dim, B carrying the
/// whole batch: dA = sum over the batch of g_i @ B_i^T = [g_1 .. g_n] @ [B_1 .. B_n]^T, g
/// viewed as [M, batch*N] and B as [K, batch*N].
Value *foldedLeftGradient(Builder &b, Value *bp, Value *g) {
  const Shape &bs = bp->shape(), &gs = g->shape();
  int64_t batch = ops::productOf(gs, 0, gs.size() - 2), m = gs[gs.size() - 2], n = gs.back(), k = bs[bs.size() - 2];
  Value *gm = reshape(b, permute(b, reshape(b, g, {batch, m, n}), {1, 0, 2}), {m, batch * n});
  Value *bk = reshape(b, permute(b, reshape(b, bp, {batch, k, n}), {1, 0, 2}), {k, batch * n});
  return binary(b, OpKind::MatMul, gm, transposeLastTwo(b, bk));
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
  // An operand broadcast over the whole batch (a weight times batched activations) gets its
  // gradient from one folded GEMM rather than a batched product summed over the batch.
  bool foldB = allOnes(batchB) && !allOnes(batchA), foldA = allOnes(batchA) && !allOnes(batchB);
  Value *ga = foldA ? foldedLeftGradient(b, bp, g)
                    : sumToShape(b, binary(b, OpKind::MatMul, g, transposeLastTwo(b, bp)), ap->shape());
  Value *gb = foldB ? foldedRightGradient(b, ap, g)
                    : sumToShape(b, binary(b, OpKind::MatMul, transposeLastTwo(b, ap), g), bp->shape());
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

/// The input gradient of a 2-D, stride-1, undilated, ungrouped conv whose pads are below the
/// kernel, as a forward conv: dx = conv(g, w'), w'[ci][co][r][s] = w[co][ci][R-1-r][S-1-s],
/// padded by kernel - 1 - pad on each side. The same sums as conv_transpose, but on the forward
/// path's kernels (Winograd for 3x3): ResNet-18's conv_transpose took a third of its training
/// step at twice the forward convolutions' time. nullptr when the conv is not of that kind.
Value *inputGradientAsConv(Builder &b, Value *g, Value *w, const ConvAttrs &a, int64_t spatial) {
  if (spatial != 2 || a.groups != 1)
    return nullptr;
  const Shape &ws = w->shape();
  std::vector<int64_t> pads(4);
  for (int64_t d = 0; d < 2; ++d) {
    int64_t kernel = ws[2 + d];
    if (a.strides[d] != 1 || a.dilations[d] != 1 || a.pads[d] > kernel - 1 || a.pads[2 + d] > kernel - 1)
      return nullptr;
    pads[d] = kernel - 1 - a.pads[d];
    pads[2 + d] = kernel - 1 - a.pads[2 + d];
  }
  Value *swapped = permute(b, w, {1, 0, 2, 3});
  Value *flipped = b.create(OpKind::Slice, {swapped},
                            {{"starts", std::vector<int64_t>{ws[2] - 1, ws[3] - 1}},
                             {"ends", std::vector<int64_t>{-ws[2] - 1, -ws[3] - 1}},
                             {"axes", std::vector<int64_t>{2, 3}},
                             {"steps", std::vector<int64_t>{-1, -1}}});
  return b.create(OpKind::Conv, {g, flipped},
                  {{"strides", std::vector<int64_t>{1, 1}}, {"pads", pads}, {"dilations", std::vector<int64_t>{1, 1}},
                   {"groups", int64_t{1}}});
}

std::vector<Value *> gradConv(Builder &b, const Node &node, const std::vector<Value *> &gradOutputs) {
  Value *x = node.input(0), *w = node.input(1), *g = gradOutputs[0];
  const Shape &xs = x->shape(), &ws = w->shape(), &gs = g->shape();
  int64_t spatial = x->rank() - 2;
  ConvAttrs a = readConvAttrs(node, spatial);
  // Weight gradient: its own primitive (ir/ops/ConvGrad.cpp), lowered to im2col + GEMM.
  Value *gw = b.create(OpKind::ConvWeightGrad, {x, g},
                       {{"strides", a.strides}, {"pads", a.pads}, {"dilations", a.dilations}, {"groups", a.groups},
                        {"weight_shape", ws}});
  if (Value *gx = inputGradientAsConv(b, g, w, a, spatial))
    return {gx, gw};
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
  return {gx, gw};
}

std::vector<Value *> gradConvTranspose(Builder &b, const Node &node, const std::vector<Value *> &gradOutputs) {
  // conv_transpose is conv's adjoint: <conv_transpose(x, w), g> = <x, conv(g, w)>. So x's
  // gradient is conv(g, w), and w's is conv's weight gradient with g as the input and x as the
  // upstream gradient.
  Value *x = node.input(0), *w = node.input(1), *g = gradOutputs[0];
  ConvAttrs a = readConvAttrs(node, x->rank() - 2);
  Value *gx = b.create(OpKind::Conv, {g, w},
                       {{"strides", a.strides}, {"pads", a.pads}, {"dilations", a.dilations}, {"groups", a.groups}});
  // An output_padding of at least the stride (allowed up to the dilation) adds output rows that
  // no input element reaches; the conv of g then has floor(output_padding / stride) positions
  // more than x along that dim, which belong to no element of x: slice them off.
  if (gx->shape() != x->shape()) {
    std::vector<int64_t> starts, ends, axes;
    for (int64_t d = 2; d < x->rank(); ++d) {
      starts.push_back(0);
      ends.push_back(x->shape()[static_cast<size_t>(d)]);
      axes.push_back(d);
    }
    gx = b.create(OpKind::Slice, {gx}, {{"starts", starts}, {"ends", ends}, {"axes", axes}});
  }
  return {gx, convWeightGradient(b, g, x, w->shape(), a)};
}

namespace {

struct WindowTable {
  int64_t planeSize = 0; // input elements per (n, c) plane; the spare slot's index
  int64_t windows = 0, taps = 0;
  Tensor positions;            // i32/i64 [windows * taps]: input position within the plane, or planeSize
  std::vector<double> divisor; // avg_pool: per window, the count it divides by
};

WindowTable windowTable(const Node &node) {
  const Shape &xs = node.input(0)->shape(), &ys = node.output()->shape();
  int64_t spatial = static_cast<int64_t>(xs.size()) - 2;
  const AttrMap &attrs = node.attrs();
  std::vector<int64_t> kernel = ops::perSpatialDim(attrs, "kernel", spatial, 1, 1);
  std::vector<int64_t> strides = ops::perSpatialDim(attrs, "strides", spatial, 1, 1);
  std::vector<int64_t> dilations(static_cast<size_t>(spatial), 1); // avg_pool has none
  std::vector<int64_t> pads = ops::spatialPads(attrs, spatial);
  bool includePad = node.attrInt("count_include_pad") != 0;

  WindowTable t;
  Shape inPlane(xs.begin() + 2, xs.end()), outPlane(ys.begin() + 2, ys.end());
  t.planeSize = ops::productOf(inPlane, 0, inPlane.size());
  t.windows = ops::productOf(outPlane, 0, outPlane.size());
  t.taps = ops::productOf(kernel, 0, kernel.size());
  // i32 when it can hold the spare slot: half the bytes for the broadcast index table the
  // scatter reads (the same indices either way).
  bool narrow = t.planeSize < std::numeric_limits<int32_t>::max();
  t.positions = Tensor(narrow ? DType::I32 : DType::I64, {checkedMul(t.windows, t.taps, "avg_pool window table")});
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
  if (node.op() == OpKind::MaxPool) // max_pool_grad takes max_pool's attributes as they are
    return {b.create(OpKind::MaxPoolGrad, {x, node.output(), gradOutputs[0]}, node.attrs())};

  // avg_pool: each real tap of window l receives g / divisor(l); padding taps land in the spare
  // slot, which is sliced off.
  DType dtype = x->dtype();
  const Shape &xs = x->shape();
  WindowTable t = windowTable(node);
  int64_t planes = ops::productOf(xs, 0, 2), spread = t.windows * t.taps; // windowTable checked the product
  Value *g = reshape(b, gradOutputs[0], {planes, t.windows, 1});
  Value *positions = b.constant(t.positions);
  Tensor weights(dtype, {t.windows, t.taps});
  for (int64_t l = 0; l < t.windows; ++l)
    for (int64_t k = 0; k < t.taps; ++k)
      weights.setDouble(l * t.taps + k, t.divisor[l] > 0 ? 1.0 / t.divisor[l] : 0.0);
  Value *contributions = binary(b, OpKind::Mul, g, b.constant(weights)); // [planes, windows, taps]
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
