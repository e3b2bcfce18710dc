// Indexing and sequence ONNX ops: GatherElements, GatherND, Scatter, ScatterElements,
// ScatterND, Compress, OneHot, TopK, CumSum and Trilu map onto the kiln op of the same meaning
// (ir/ops/GatherScatter.cpp, ir/ops/Sequence.cpp); ReverseSequence and MaxUnpool, which have
// none, are a gather and a scatter. What ONNX passes as small operands (TopK's K, CumSum's
// axis, Trilu's k, OneHot's depth, Compress's condition, the sequence lengths) must be known
// at import time and becomes an attribute or a constant.
#include <cmath>
#include <limits>

#include "core/ShapeMath.h"
#include "frontend/onnx/OnnxWindow.h"

namespace kiln::frontend {

using ir::OpKind;

namespace {

/// The most elements of ReverseSequence's index table, built at import time over the time and
/// batch dims (which need no data behind them).
constexpr int64_t kMaxSequenceTable = int64_t{1} << 24;

/// A one-element integer operand (CumSum's axis, Trilu's k), read exactly.
int64_t staticInt(ImportContext &ctx, const onnx::NodeProto &node, int i, const std::string &what) {
  std::vector<int64_t> values = ctx.staticInts(node, i, what);
  if (values.size() != 1)
    fail("the {} (input {}) must hold one integer, got {}", what, i, shapeToString(values));
  return values[0];
}

ir::Value *scatterWith(ImportContext &ctx, const onnx::NodeProto &node, OpKind op, ir::AttrMap attrs) {
  // The reduction attribute arrived with opset 16; before it every scatter overwrites.
  attrs["reduction"] = ctx.opset() >= 16 ? OnnxAttrs(node).getString("reduction", "none") : std::string("none");
  return ctx.op(op, {ctx.input(node, 0), ctx.input(node, 1), ctx.input(node, 2)}, std::move(attrs));
}

ir::Value *castTo(ImportContext &ctx, ir::Value *v, DType dtype) {
  return v->dtype() == dtype ? v : ctx.op(OpKind::Cast, {v}, {{"to", dtype}});
}

ir::Value *i64Vector(ImportContext &ctx, const std::vector<int64_t> &values) {
  Tensor t(DType::I64, {static_cast<int64_t>(values.size())});
  for (size_t i = 0; i < values.size(); ++i)
    t.setInt(static_cast<int64_t>(i), values[i]);
  return ctx.constant(t);
}

} // namespace

std::vector<ir::Value *> mapGatherElements(ImportContext &ctx, const onnx::NodeProto &node) {
  return {ctx.op(OpKind::GatherElements, {ctx.input(node, 0), ctx.input(node, 1)},
                 {{"axis", OnnxAttrs(node).getInt("axis", 0)}})};
}

std::vector<ir::Value *> mapGatherND(ImportContext &ctx, const onnx::NodeProto &node) {
  return {ctx.op(OpKind::GatherNd, {ctx.input(node, 0), ctx.input(node, 1)},
                 {{"batch_dims", OnnxAttrs(node).getInt("batch_dims", 0)}})};
}

// Scatter (opsets 9-10, deprecated at 11) is ScatterElements under its first name.
std::vector<ir::Value *> mapScatter(ImportContext &ctx, const onnx::NodeProto &node) {
  return {scatterWith(ctx, node, OpKind::ScatterElements, {{"axis", OnnxAttrs(node).getInt("axis", 0)}})};
}

std::vector<ir::Value *> mapScatterElements(ImportContext &ctx, const onnx::NodeProto &node) {
  return {scatterWith(ctx, node, OpKind::ScatterElements, {{"axis", OnnxAttrs(node).getInt("axis", 0)}})};
}

std::vector<ir::Value *> mapScatterND(ImportContext &ctx, const onnx::NodeProto &node) {
  return {scatterWith(ctx, node, OpKind::ScatterNd, {})};
}

// Compress keeps the slices along `axis` (of the flattened input when there is no axis) whose
// condition is true: with the condition known, that is a gather of constant positions.
std::vector<ir::Value *> mapCompress(ImportContext &ctx, const onnx::NodeProto &node) {
  ir::Value *x = ctx.input(node, 0);
  Tensor condition = ctx.staticInput(node, 1, "condition");
  if (condition.rank() != 1)
    fail("the condition must be 1-D, got {}", condition.type().toString());
  std::optional<int64_t> axisAttr = OnnxAttrs(node).optInt("axis");
  if (!axisAttr)
    x = reshapeTo(ctx, x, {x->type().numElements()});
  int64_t axis = normalizeAxis(axisAttr.value_or(0), x->rank(), "axis");
  int64_t dim = x->shape()[axis];
  std::vector<int64_t> kept;
  for (int64_t i = 0; i < condition.numElements(); ++i) {
    if (condition.getDouble(i) == 0)
      continue;
    if (i >= dim)
      fail("condition element {} is true, but axis {} of input {} has only {} entries", i, axis,
           shapeToString(x->shape()), dim);
    kept.push_back(i);
  }
  return {ctx.op(OpKind::Gather, {x, i64Vector(ctx, kept)}, {{"axis", axis}})};
}

std::vector<ir::Value *> mapOneHot(ImportContext &ctx, const onnx::NodeProto &node) {
  ir::Value *indices = ctx.input(node, 0), *values = ctx.input(node, 2);
  // ONNX casts non-integer indices and depth to int64 (toward zero) before use.
  if (!isInteger(indices->dtype()))
    indices = ctx.op(OpKind::Cast, {indices}, {{"to", DType::I64}});
  double depth = ctx.staticScalar(node, 1, "depth");
  if (!std::isfinite(depth) || std::fabs(depth) > static_cast<double>(std::numeric_limits<int32_t>::max()))
    fail("depth {} is not a usable size", depth);
  if (values->rank() != 1 || values->shape()[0] != 2)
    fail("values must hold [off_value, on_value], got {}", values->type().toString());
  return {ctx.op(OpKind::OneHot, {indices, values},
                 {{"depth", static_cast<int64_t>(depth)}, {"axis", OnnxAttrs(node).getInt("axis", -1)}})};
}

std::vector<ir::Value *> mapTopK(ImportContext &ctx, const onnx::NodeProto &node) {
  OnnxAttrs attrs(node);
  // K is an attribute before opset 10 and an input after; largest and sorted arrived at 11.
  int64_t k = 0;
  if (ctx.opset() >= 10)
    k = staticInt(ctx, node, 1, "K");
  else if (std::optional<int64_t> attr = attrs.optInt("k"))
    k = *attr;
  else
    fail("attribute 'k' is required");
  ir::AttrMap kilnAttrs{{"k", k}, {"axis", attrs.getInt("axis", -1)}};
  if (ctx.opset() >= 11) {
    kilnAttrs["largest"] = attrs.getInt("largest", 1);
    kilnAttrs["sorted"] = attrs.getInt("sorted", 1);
  }
  return ctx.opMulti(OpKind::TopK, {ctx.input(node, 0)}, std::move(kilnAttrs));
}

std::vector<ir::Value *> mapCumSum(ImportContext &ctx, const onnx::NodeProto &node) {
  OnnxAttrs attrs(node);
  return {ctx.op(OpKind::CumSum, {ctx.input(node, 0)},
                 {{"axis", staticInt(ctx, node, 1, "axis")},
                  {"exclusive", attrs.getInt("exclusive", 0)},
                  {"reverse", attrs.getInt("reverse", 0)}})};
}

std::vector<ir::Value *> mapTrilu(ImportContext &ctx, const onnx::NodeProto &node) {
  int64_t k = ctx.hasInput(node, 1) ? staticInt(ctx, node, 1, "diagonal offset k") : 0;
  return {ctx.op(OpKind::Trilu, {ctx.input(node, 0)}, {{"upper", OnnxAttrs(node).getInt("upper", 1)}, {"k", k}})};
}

// ReverseSequence reverses the first seq_len[b] steps along the time axis of each batch entry
// b: a gather along the time axis whose index is seq_len[b] - 1 - t for t < seq_len[b], else t,
// built from a [time, batch] table broadcast over the other dims.
std::vector<ir::Value *> mapReverseSequence(ImportContext &ctx, const onnx::NodeProto &node) {
  ir::Value *x = ctx.input(node, 0);
  OnnxAttrs attrs(node);
  int64_t timeAxis = normalizeAxis(attrs.getInt("time_axis", 0), x->rank(), "time_axis");
  int64_t batchAxis = normalizeAxis(attrs.getInt("batch_axis", 1), x->rank(), "batch_axis");
  if (timeAxis == batchAxis || x->rank() < 2)
    fail("time_axis and batch_axis must be two different axes of input {}", shapeToString(x->shape()));
  std::vector<int64_t> lengths = ctx.staticInts(node, 1, "sequence_lens");
  int64_t steps = x->shape()[timeAxis], batch = x->shape()[batchAxis];
  if (static_cast<int64_t>(lengths.size()) != batch)
    fail("sequence_lens has {} entries for a batch of {}", lengths.size(), batch);
  if (batch != 0 && steps > kMaxSequenceTable / batch)
    fail("{} steps of a batch of {} need an index table larger than the {} elements kiln builds at import time",
         steps, batch, kMaxSequenceTable);
  Shape tableShape(static_cast<size_t>(x->rank()), 1);
  tableShape[timeAxis] = steps;
  tableShape[batchAxis] = batch;
  Tensor table(DType::I64, tableShape);
  for (int64_t t = 0; t < steps; ++t)
    for (int64_t b = 0; b < batch; ++b) {
      int64_t length = lengths[b];
      if (length < 0 || length > steps)
        fail("sequence_lens[{}] = {} is outside [0, {}]", b, length, steps);
      // The table's flat position: time and batch are its only non-1 dims, in axis order.
      int64_t flat = timeAxis < batchAxis ? t * batch + b : b * steps + t;
      table.setInt(flat, t < length ? length - 1 - t : t);
    }
  ir::Value *indices = broadcastTo(ctx, ctx.constant(table), x->shape());
  return {ctx.op(OpKind::GatherElements, {x, indices}, {{"axis", timeAxis}})};
}

// MaxUnpool scatters each value to the flat position its index names in the unpooled tensor
// [N, C, (in - 1) * stride + kernel - pads...]; a larger output_shape pads that at the end,
// as ONNX's reference places the values.
std::vector<ir::Value *> mapMaxUnpool(ImportContext &ctx, const onnx::NodeProto &node) {
  ir::Value *x = ctx.input(node, 0), *indices = ctx.input(node, 1);
  if (x->rank() < 3 || indices->shape() != x->shape())
    fail("X must be [N, C, spatial...] and I of the same shape, got {} and {}", shapeToString(x->shape()),
         shapeToString(indices->shape()));
  OnnxAttrs attrs(node);
  size_t rank = static_cast<size_t>(x->rank() - 2);
  std::vector<int64_t> kernel = attrs.getInts("kernel_shape");
  std::vector<int64_t> strides = perSpatialDim(attrs, "strides", rank);
  std::vector<int64_t> pads = attrs.getInts("pads", std::vector<int64_t>(2 * rank, 0));
  if (kernel.size() != rank || pads.size() != 2 * rank)
    fail("kernel_shape {} and pads {} need {} and {} entries", shapeToString(kernel), shapeToString(pads), rank,
         2 * rank);
  Shape unpooled(x->shape().begin(), x->shape().begin() + 2);
  for (size_t d = 0; d < rank; ++d) {
    if (kernel[d] < 1 || pads[d] < 0 || pads[rank + d] < 0)
      fail("kernel_shape {} must be >= 1 and pads {} >= 0", shapeToString(kernel), shapeToString(pads));
    // Checked: the attributes are any int64.
    std::string what = fmt::format("the unpooled size of spatial dim {} (kernel_shape {}, strides {}, pads {})", d,
                                   shapeToString(kernel), shapeToString(strides), shapeToString(pads));
    int64_t size = checkedAdd(checkedMul(x->shape()[2 + d] - 1, strides[d], what), kernel[d], what);
    size = checkedSub(checkedSub(size, pads[d], what), pads[rank + d], what);
    unpooled.push_back(checkedDim(size, what));
  }
  int64_t total = numElements(unpooled);
  ir::Value *zeros = broadcastTo(ctx, ctx.constant(Tensor::scalar(x->dtype(), 0)), {total});
  ir::Value *flatIndices = reshapeTo(ctx, castTo(ctx, indices, DType::I64), {x->type().numElements()});
  ir::Value *y = ctx.op(OpKind::ScatterElements, {zeros, flatIndices, reshapeTo(ctx, x, {x->type().numElements()})},
                        {{"axis", int64_t{0}}, {"reduction", std::string("none")}});
  y = reshapeTo(ctx, y, unpooled);
  if (!ctx.hasInput(node, 2))
    return {y};
  std::vector<int64_t> target = ctx.staticInts(node, 2, "output_shape");
  if (target.size() != unpooled.size())
    fail("output_shape {} needs {} entries", shapeToString(target), unpooled.size());
  std::vector<int64_t> padAll(2 * unpooled.size(), 0);
  for (size_t d = 0; d < unpooled.size(); ++d) {
    if (target[d] < unpooled[d])
      fail("output_shape {} is smaller than the unpooled shape {}", shapeToString(target), shapeToString(unpooled));
    padAll[unpooled.size() + d] = target[d] - unpooled[d];
  }
  return {ctx.op(OpKind::Pad, {y}, {{"pads", padAll}, {"mode", std::string("constant")}, {"value", 0.0}})};
}

} // namespace kiln::frontend
