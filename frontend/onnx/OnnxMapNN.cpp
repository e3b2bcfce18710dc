// Neural-network ONNX ops: MatMul, Gemm, Einsum, Det, the normalisations (BatchNormalization,
// LayerNormalization, InstanceNormalization, LRN, MeanVarianceNormalization, LpNormalization)
// and Dropout (an identity at inference, a seeded random mask in training mode). Each
// normalisation with a kiln op maps onto it; what ONNX adds on top (BatchNormalization's
// training statistics, LayerNormalization's Mean and InvStdDev outputs) is computed beside it
// from reductions; MeanVarianceNormalization, LpNormalization and Det, which have no kiln op,
// are written with existing ops.
#include "frontend/onnx/OnnxWindow.h"

namespace kiln::frontend {

using ir::OpKind;

namespace {

/// Det unrolls one elimination step (about 25 nodes) per row, so the matrix size (a dim that
/// needs no data behind it) is bounded before unrolling.
constexpr int64_t kMaxDetSize = 1024;

ir::Value *castTo(ImportContext &ctx, ir::Value *v, DType dtype) {
  return v->dtype() == dtype ? v : ctx.op(OpKind::Cast, {v}, {{"to", dtype}});
}

ir::Value *meanOver(ImportContext &ctx, ir::Value *x, const std::vector<int64_t> &axes, bool keepdims) {
  return ctx.op(OpKind::ReduceMean, {x}, {{"axes", axes}, {"keepdims", int64_t{keepdims ? 1 : 0}}});
}

/// Every axis of a rank-`rank` tensor except 1 (the channels).
std::vector<int64_t> allButChannels(int64_t rank) {
  std::vector<int64_t> axes{0};
  for (int64_t d = 2; d < rank; ++d)
    axes.push_back(d);
  return axes;
}

} // namespace

std::vector<ir::Value *> mapMatMul(ImportContext &ctx, const onnx::NodeProto &node) {
  return {ctx.op(OpKind::MatMul, {ctx.input(node, 0), ctx.input(node, 1)})};
}

std::vector<ir::Value *> mapGemm(ImportContext &ctx, const onnx::NodeProto &node) {
  OnnxAttrs attrs(node);
  ir::Value *a = ctx.input(node, 0), *b = ctx.input(node, 1);
  if (a->rank() != 2 || b->rank() != 2)
    fail("A and B must be 2-D, got {} and {}", shapeToString(a->shape()), shapeToString(b->shape()));
  if (attrs.getInt("transA", 0))
    a = permute(ctx, a, {1, 0});
  if (attrs.getInt("transB", 0))
    b = permute(ctx, b, {1, 0});
  ir::Value *y = ctx.op(OpKind::MatMul, {a, b});
  double alpha = attrs.getFloat("alpha", 1.0), beta = attrs.getFloat("beta", 1.0);
  if (alpha != 1.0)
    y = ctx.op(OpKind::Mul, {y, ctx.scalarLike(y, alpha)});
  if (ctx.hasInput(node, 2) && beta != 0.0) {
    ir::Value *c = ctx.input(node, 2);
    if (beta != 1.0)
      c = ctx.op(OpKind::Mul, {c, ctx.scalarLike(c, beta)});
    y = ctx.op(OpKind::Add, {y, c});
  }
  return {y};
}

std::vector<ir::Value *> mapEinsum(ImportContext &ctx, const onnx::NodeProto &node) {
  std::vector<ir::Value *> inputs;
  for (int i = 0; i < ctx.numInputs(node); ++i)
    inputs.push_back(ctx.input(node, i));
  OnnxAttrs attrs(node);
  if (!attrs.has("equation"))
    fail("attribute 'equation' is required");
  return {ctx.op(OpKind::Einsum, inputs, {{"equation", attrs.getString("equation", "")}})};
}

// Det has no kiln op: Gaussian elimination with partial pivoting, unrolled over the static
// matrix size n. Step k picks the row with the largest |a[i][k]| among i >= k (argmax over a
// masked column), swaps it to row k (a gather of rows; a real swap flips the sign), and
// subtracts multiples of row k from the rows below. The determinant is the sign times the
// product of the pivots. A zero pivot (a singular matrix) divides by 1 instead, and the zero
// on the diagonal makes the product 0.
std::vector<ir::Value *> mapDet(ImportContext &ctx, const onnx::NodeProto &node) {
  ir::Value *a = ctx.input(node, 0);
  int64_t rank = a->rank();
  if (rank < 2 || a->shape()[rank - 1] != a->shape()[rank - 2])
    fail("input must be [..., n, n], got {}", shapeToString(a->shape()));
  int64_t n = a->shape()[rank - 1];
  if (n > kMaxDetSize)
    fail("a {} x {} matrix is larger than kiln unrolls elimination for ({})", n, n, kMaxDetSize);
  Shape batch(a->shape().begin(), a->shape().end() - 2), column = batch;
  column.push_back(n);
  Shape columnView = column;
  columnView.push_back(1); // [..., n, 1]
  auto slice = [&](ir::Value *v, int64_t axis, int64_t begin) {
    return ctx.op(OpKind::Slice, {v},
                  {{"starts", std::vector<int64_t>{begin}},
                   {"ends", std::vector<int64_t>{begin + 1}},
                   {"axes", std::vector<int64_t>{axis}},
                   {"steps", std::vector<int64_t>{1}}});
  };
  ir::Value *rows = ctx.op(OpKind::Iota, {}, {{"shape", column}, {"axis", rank - 2}});
  ir::Value *sign = broadcastTo(ctx, ctx.scalarLike(a, 1), batch);
  ir::Value *pivots = sign;
  for (int64_t k = 0; k < n; ++k) {
    ir::Value *k64 = ctx.constant(Tensor::scalar(DType::I64, static_cast<double>(k)));
    ir::Value *col = reshapeTo(ctx, slice(a, rank - 1, k), column);
    ir::Value *candidates =
        ctx.op(OpKind::Where, {ctx.op(OpKind::Ge, {rows, k64}), ctx.op(OpKind::Abs, {col}), ctx.scalarLike(a, -1)});
    ir::Value *best = ctx.op(OpKind::ArgMax, {candidates}, {{"axis", rank - 2}, {"keepdims", int64_t{1}}});
    ir::Value *order = ctx.op(OpKind::Where, {ctx.op(OpKind::Eq, {rows, k64}), best,
                                              ctx.op(OpKind::Where, {ctx.op(OpKind::Eq, {rows, best}), k64, rows})});
    a = ctx.op(OpKind::GatherElements, {a, broadcastTo(ctx, reshapeTo(ctx, order, columnView), a->shape())},
               {{"axis", rank - 2}});
    ir::Value *swapped = reshapeTo(ctx, ctx.op(OpKind::Ne, {best, k64}), batch);
    sign = ctx.op(OpKind::Where, {swapped, ctx.op(OpKind::Neg, {sign}), sign});
    ir::Value *pivotRow = slice(a, rank - 2, k);     // [..., 1, n]
    ir::Value *pivot = slice(pivotRow, rank - 1, k); // [..., 1, 1]
    pivots = ctx.op(OpKind::Mul, {pivots, reshapeTo(ctx, pivot, batch)});
    ir::Value *safe =
        ctx.op(OpKind::Where, {ctx.op(OpKind::Eq, {pivot, ctx.scalarLike(a, 0)}), ctx.scalarLike(a, 1), pivot});
    ir::Value *below = reshapeTo(ctx, ctx.op(OpKind::Gt, {rows, k64}), columnView);
    ir::Value *factors =
        ctx.op(OpKind::Where, {below, ctx.op(OpKind::Div, {slice(a, rank - 1, k), safe}), ctx.scalarLike(a, 0)});
    a = ctx.op(OpKind::Sub, {a, ctx.op(OpKind::Mul, {factors, pivotRow})});
  }
  return {ctx.op(OpKind::Mul, {sign, pivots})};
}

void checkBatchNormalization(const onnx::NodeProto &node, int64_t opset, std::vector<std::string> &problems) {
  OnnxAttrs attrs(node);
  if (opset < 9 && attrs.getInt("spatial", 1) != 1)
    problems.push_back("spatial=0 (per-element statistics) is not supported");
  bool training = opset >= 14 && attrs.getInt("training_mode", 0) != 0;
  for (int i = 1; i < node.output_size(); ++i)
    if (hasOutput(node, i) && !(training && i <= 2))
      problems.push_back(fmt::format("output {} (training statistics) is not supported{}", i,
                                     opset >= 14 ? " without training_mode" : " before opset 14"));
}

// In training mode (opset 14+) the statistics are the batch's own (the mean and the biased
// variance over every axis but the channels), and the running_mean / running_var outputs blend
// them into the given ones: input * momentum + batch * (1 - momentum).
std::vector<ir::Value *> mapBatchNormalization(ImportContext &ctx, const onnx::NodeProto &node) {
  ir::Value *x = ctx.input(node, 0);
  OnnxAttrs attrs(node);
  // Opset 15 lets scale/bias and mean/var have their own float types; kiln wants one.
  std::vector<ir::Value *> inputs{x};
  for (int i = 1; i < 5; ++i)
    inputs.push_back(castTo(ctx, ctx.input(node, i), x->dtype()));
  double epsilon = attrs.getFloat("epsilon", 1e-5);
  bool training = ctx.opset() >= 14 && attrs.getInt("training_mode", 0) != 0;
  if (!training)
    return {ctx.op(OpKind::BatchNorm, inputs, {{"epsilon", epsilon}})};
  if (x->rank() < 2)
    fail("input must be [N, C, ...], got {}", shapeToString(x->shape()));
  std::vector<int64_t> axes = allButChannels(x->rank());
  ir::Value *batchMean = meanOver(ctx, x, axes, false);
  ir::Value *centered = ctx.op(OpKind::Sub, {x, perChannel(ctx, batchMean, x->rank())});
  ir::Value *batchVar = meanOver(ctx, ctx.op(OpKind::Mul, {centered, centered}), axes, false);
  ir::Value *y = ctx.op(OpKind::BatchNorm, {x, inputs[1], inputs[2], batchMean, batchVar}, {{"epsilon", epsilon}});
  double momentum = attrs.getFloat("momentum", 0.9);
  auto blend = [&](ir::Value *running, ir::Value *batch) {
    ir::Value *kept = ctx.op(OpKind::Mul, {running, ctx.scalarLike(running, momentum)});
    return ctx.op(OpKind::Add, {kept, ctx.op(OpKind::Mul, {batch, ctx.scalarLike(batch, 1 - momentum)})});
  };
  return {y, blend(inputs[3], batchMean), blend(inputs[4], batchVar)};
}

std::vector<ir::Value *> mapLayerNormalization(ImportContext &ctx, const onnx::NodeProto &node) {
  ir::Value *x = ctx.input(node, 0);
  OnnxAttrs attrs(node);
  int64_t axis = normalizeAxis(attrs.getInt("axis", -1), x->rank(), "axis");
  double epsilon = attrs.getFloat("epsilon", 1e-5);
  // ONNX lets scale and bias broadcast to the normalized shape; kiln wants them exact.
  Shape normalized(x->shape().begin() + axis, x->shape().end());
  std::vector<ir::Value *> inputs{x, broadcastTo(ctx, ctx.input(node, 1), normalized)};
  if (ctx.hasInput(node, 2))
    inputs.push_back(broadcastTo(ctx, ctx.input(node, 2), normalized));
  std::vector<ir::Value *> outputs{ctx.op(OpKind::LayerNorm, inputs, {{"axis", axis}, {"epsilon", epsilon}})};
  if (!hasOutput(node, 1) && !hasOutput(node, 2))
    return outputs;
  // Mean and InvStdDev keep the normalised dims as size 1, as the ONNX specification states.
  std::vector<int64_t> axes;
  for (int64_t d = axis; d < x->rank(); ++d)
    axes.push_back(d);
  ir::Value *mean = meanOver(ctx, x, axes, true);
  ir::Value *centered = ctx.op(OpKind::Sub, {x, mean});
  ir::Value *var = meanOver(ctx, ctx.op(OpKind::Mul, {centered, centered}), axes, true);
  outputs.push_back(mean);
  outputs.push_back(ctx.op(OpKind::Rsqrt, {ctx.op(OpKind::Add, {var, ctx.scalarLike(var, epsilon)})}));
  return outputs;
}

std::vector<ir::Value *> mapInstanceNormalization(ImportContext &ctx, const onnx::NodeProto &node) {
  return {ctx.op(OpKind::InstanceNorm, {ctx.input(node, 0), ctx.input(node, 1), ctx.input(node, 2)},
                 {{"epsilon", OnnxAttrs(node).getFloat("epsilon", 1e-5)}})};
}

std::vector<ir::Value *> mapLRN(ImportContext &ctx, const onnx::NodeProto &node) {
  OnnxAttrs attrs(node);
  std::optional<int64_t> size = attrs.optInt("size");
  if (!size)
    fail("attribute 'size' is required");
  return {ctx.op(OpKind::Lrn, {ctx.input(node, 0)},
                 {{"size", *size},
                  {"alpha", attrs.getFloat("alpha", 1e-4)},
                  {"beta", attrs.getFloat("beta", 0.75)},
                  {"bias", attrs.getFloat("bias", 1.0)}})};
}

// ONNX's function body: (x - E[x]) / (sqrt(E[x^2] - E[x]^2) + 1e-9) over `axes`.
std::vector<ir::Value *> mapMeanVarianceNormalization(ImportContext &ctx, const onnx::NodeProto &node) {
  ir::Value *x = ctx.input(node, 0);
  std::vector<int64_t> axes = OnnxAttrs(node).getInts("axes", {0, 2, 3});
  ir::Value *mean = meanOver(ctx, x, axes, true);
  ir::Value *meanOfSquares = meanOver(ctx, ctx.op(OpKind::Mul, {x, x}), axes, true);
  ir::Value *variance = ctx.op(OpKind::Sub, {meanOfSquares, ctx.op(OpKind::Mul, {mean, mean})});
  ir::Value *std = ctx.op(OpKind::Add, {ctx.op(OpKind::Sqrt, {variance}), ctx.scalarLike(x, 1e-9)});
  return {ctx.op(OpKind::Div, {ctx.op(OpKind::Sub, {x, mean}), std})};
}

// LpNormalization: x / norm_p(x) along `axis`, p 1 or 2 (the only values ONNX allows).
std::vector<ir::Value *> mapLpNormalization(ImportContext &ctx, const onnx::NodeProto &node) {
  ir::Value *x = ctx.input(node, 0);
  OnnxAttrs attrs(node);
  int64_t p = attrs.getInt("p", 2);
  if (p != 1 && p != 2)
    fail("p must be 1 or 2, got {}", p);
  ir::Value *norm = ctx.op(p == 1 ? OpKind::ReduceL1 : OpKind::ReduceL2, {x},
                           {{"axes", std::vector<int64_t>{attrs.getInt("axis", -1)}}, {"keepdims", int64_t{1}}});
  return {ctx.op(OpKind::Div, {x, norm})};
}

namespace {

/// Dropout that drops nothing: x, and when asked a mask that keeps every element (bool from
/// opset 10).
std::vector<ir::Value *> keepEverything(ImportContext &ctx, const onnx::NodeProto &node, ir::Value *x) {
  std::vector<ir::Value *> outputs{x};
  if (hasOutput(node, 1)) {
    DType maskType = ctx.opset() >= 10 ? DType::Bool : x->dtype();
    outputs.push_back(broadcastTo(ctx, ctx.constant(Tensor::scalar(maskType, 1)), x->shape()));
  }
  return outputs;
}

/// Dropout in training mode: each element is kept with probability 1 - ratio and scaled by
/// 1 / (1 - ratio), as nn::Dropout does. The mask comes from a random_uniform stream seeded
/// by the node's `seed` (0 when absent) and read at the graph's random offset, which a
/// training step advances, so every step draws a fresh mask; evaluating the graph itself
/// draws the same one each time.
std::vector<ir::Value *> trainingDropout(ImportContext &ctx, const onnx::NodeProto &node, ir::Value *x) {
  if (!isFloat(x->dtype()))
    fail("training_mode: the data must be a float tensor, got {}", x->type().toString());
  double ratio = ctx.hasInput(node, 1) ? ctx.staticScalar(node, 1, "ratio") : 0.5;
  if (!(ratio >= 0.0 && ratio <= 1.0))
    fail("ratio {} is not in [0, 1]", ratio);
  int64_t seed = ctx.nextStreamSeed(OnnxAttrs(node).getInt("seed", 0));
  // A ratio of 0 keeps every draw (each is >= 0) and scales by 1: the node is an identity, as
  // torchvision 0.14's Swin exports its attention dropouts (F.dropout without training=).
  // The stream's seed is still taken, so that the other dropouts' streams do not move.
  if (ratio == 0.0)
    return keepEverything(ctx, node, x);
  DType uniformType = x->dtype() == DType::F64 ? DType::F64 : DType::F32;
  ir::Value *uniform = ctx.op(OpKind::RandomUniform, {ctx.randomOffset()},
                              {{"shape", x->shape()}, {"dtype", uniformType}, {"seed", seed}});
  ir::Value *keep = ctx.op(OpKind::Ge, {uniform, ctx.scalarLike(uniform, ratio)});
  ir::Value *y = ratio == 1.0 ? ctx.op(OpKind::Mul, {x, ctx.scalarLike(x, 0.0)})
                              : ctx.op(OpKind::Where, {keep, ctx.op(OpKind::Mul, {x, ctx.scalarLike(x, 1.0 / (1.0 - ratio))}),
                                                       ctx.scalarLike(x, 0.0)});
  return {y, keep};
}

} // namespace

std::vector<ir::Value *> mapDropout(ImportContext &ctx, const onnx::NodeProto &node) {
  ir::Value *x = ctx.input(node, 0);
  if (isTrainingDropout(ctx, node))
    return trainingDropout(ctx, node, x);
  return keepEverything(ctx, node, x); // at inference nothing is dropped
}

bool isTrainingDropout(const ImportContext &ctx, const onnx::NodeProto &node) {
  return node.op_type() == "Dropout" && ctx.opset() >= 12 && ctx.hasInput(node, 2) &&
         ctx.staticScalar(node, 2, "training_mode") != 0;
}

} // namespace kiln::frontend
