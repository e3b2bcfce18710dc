// Pooling ONNX ops: MaxPool (with its optional Indices output), AveragePool, LpPool and the
// global pools. The values come from kiln's max_pool / avg_pool and reductions; MaxPool's
// Indices output, which no kiln op computes, is built from a gather over the pooling windows.
#include "frontend/onnx/OnnxWindow.h"

#include <cmath>
#include <limits>

namespace kiln::frontend {

using ir::OpKind;

namespace {

/// The most window taps MaxPool's Indices tables may hold: each tap costs 32 bytes while the
/// tables are built. 4M taps cover a 1024 x 1024 map pooled 3 x 3; 2^26 took gigabytes.
constexpr int64_t kMaxIndexTaps = int64_t{1} << 22;

std::vector<ir::Value *> globalPool(ImportContext &ctx, const onnx::NodeProto &node, OpKind reduce) {
  ir::Value *x = ctx.input(node, 0);
  if (x->rank() < 3)
    fail("input must be [N, C, spatial...], got {}", shapeToString(x->shape()));
  std::vector<int64_t> axes;
  for (int64_t d = 2; d < x->rank(); ++d)
    axes.push_back(d);
  return {ctx.op(reduce, {x}, {{"axes", axes}, {"keepdims", int64_t{1}}})};
}

Tensor i64Tensor(const Shape &shape, const std::vector<int64_t> &values) {
  Tensor t(DType::I64, shape);
  for (size_t i = 0; i < values.size(); ++i)
    t.setInt(static_cast<int64_t>(i), values[i]);
  return t;
}

// MaxPool's Indices: the flat position in x of each window's first maximum, counting the
// spatial dims row-major (storage_order 0) or column-major (1). With O output positions and K
// taps per window, two tables are built at import time: `taps[o, k]`, the row-major spatial
// position each tap reads (S, one past the end, where it falls in the padding), and
// `positions[o, k]`, that position in the requested storage order. Then
//   values  = gather(concat(x as [N, C, S], -inf), taps)    [N, C, O, K]
//   winner  = argmax(values, axis 3)                         [N, C, O]
//   indices = gather(positions as [O*K], o * K + winner) + (n * C + c) * S.
// A window's taps are in row-major kernel order, so ties go to the first one, as the
// reference implementations take them.
ir::Value *maxPoolIndices(ImportContext &ctx, ir::Value *x, const OnnxWindow &w, const Shape &outShape,
                          bool columnMajor) {
  size_t rank = w.kernel.size();
  Shape in(x->shape().begin() + 2, x->shape().end()), out(outShape.begin() + 2, outShape.end());
  int64_t batch = x->shape()[0], channels = x->shape()[1];
  int64_t spatial = numElements(in), windows = numElements(out), taps = numElements(w.kernel);
  if (taps != 0 && windows > kMaxIndexTaps / taps)
    fail("the Indices output needs {} windows of {} taps, more than the {} kiln builds at import time", windows, taps,
         kMaxIndexTaps);
  int64_t tableSize = windows * taps; // at most kMaxIndexTaps
  std::vector<int64_t> tapTable, positionTable;
  tapTable.reserve(static_cast<size_t>(tableSize));
  positionTable.reserve(static_cast<size_t>(tableSize));
  std::vector<int64_t> o(rank, 0), k(rank, 0);
  for (int64_t oi = 0; oi < windows; ++oi) {
    std::fill(k.begin(), k.end(), 0);
    for (int64_t ki = 0; ki < taps; ++ki) {
      int64_t rowMajor = 0, colMajor = 0, colStride = 1;
      bool inside = true;
      for (size_t d = 0; d < rank && inside; ++d) {
        // In 128 bits: a tap deep in the padding of extreme attributes lies outside int64.
        // Positions are combined only while inside, where they stay below `spatial`.
        __int128 p = __int128{o[d]} * w.strides[d] - w.pads[d] + __int128{k[d]} * w.dilations[d];
        inside = p >= 0 && p < in[d];
        if (!inside)
          break;
        rowMajor = rowMajor * in[d] + static_cast<int64_t>(p);
        colMajor += static_cast<int64_t>(p) * colStride;
        colStride *= in[d];
      }
      tapTable.push_back(inside ? rowMajor : spatial);
      positionTable.push_back(inside ? (columnMajor ? colMajor : rowMajor) : 0);
      for (size_t d = rank; d-- > 0;) // next tap, row-major over the kernel
        if (++k[d] < w.kernel[d])
          break;
        else
          k[d] = 0;
    }
    for (size_t d = rank; d-- > 0;) // next window
      if (++o[d] < out[d])
        break;
      else
        o[d] = 0;
  }
  ir::Value *flat = reshapeTo(ctx, x, {batch, channels, spatial});
  Tensor lowest = Tensor::scalar(x->dtype(), -std::numeric_limits<double>::infinity());
  ir::Value *padding = broadcastTo(ctx, ctx.constant(lowest), {batch, channels, 1});
  ir::Value *extended = ctx.op(OpKind::Concat, {flat, padding}, {{"axis", int64_t{2}}});
  ir::Value *gathered =
      ctx.op(OpKind::Gather, {extended, ctx.constant(i64Tensor({windows, taps}, tapTable))}, {{"axis", int64_t{2}}});
  ir::Value *winner = ctx.op(OpKind::ArgMax, {gathered}, {{"axis", int64_t{3}}, {"keepdims", int64_t{0}}});
  ir::Value *windowStart = ctx.op(OpKind::Iota, {}, {{"shape", Shape{windows}}, {"axis", int64_t{0}}});
  windowStart = ctx.op(OpKind::Mul, {windowStart, ctx.constant(Tensor::scalar(DType::I64, static_cast<double>(taps)))});
  ir::Value *tap = ctx.op(OpKind::Add, {winner, windowStart});
  ir::Value *position =
      ctx.op(OpKind::Gather, {ctx.constant(i64Tensor({windows * taps}, positionTable)), tap}, {{"axis", int64_t{0}}});
  ir::Value *plane = ctx.op(OpKind::Iota, {}, {{"shape", Shape{batch * channels}}, {"axis", int64_t{0}}});
  plane = ctx.op(OpKind::Mul, {plane, ctx.constant(Tensor::scalar(DType::I64, static_cast<double>(spatial)))});
  ir::Value *indices = ctx.op(OpKind::Add, {position, reshapeTo(ctx, plane, {batch, channels, 1})});
  return reshapeTo(ctx, indices, outShape);
}

} // namespace

void checkPool(const onnx::NodeProto &node, int64_t, std::vector<std::string> &problems) {
  checkAutoPad(node, problems);
  if (node.op_type() == "MaxPool") {
    int64_t order = OnnxAttrs(node).getInt("storage_order", 0);
    if (order != 0 && order != 1)
      problems.push_back(fmt::format("storage_order={} is not 0 (row-major) or 1 (column-major)", order));
  }
}

std::vector<ir::Value *> mapMaxPool(ImportContext &ctx, const onnx::NodeProto &node) {
  ir::Value *x = ctx.input(node, 0);
  OnnxAttrs attrs(node);
  OnnxWindow window = readWindow(node, x, attrs.getInts("kernel_shape"), true);
  ir::Value *y = ctx.op(OpKind::MaxPool, {x},
                        {{"kernel", window.kernel},
                         {"strides", window.strides},
                         {"pads", window.pads},
                         {"dilations", window.dilations},
                         {"ceil_mode", attrs.getInt("ceil_mode", 0)}});
  if (!hasOutput(node, 1))
    return {y};
  return {y, maxPoolIndices(ctx, x, window, y->shape(), attrs.getInt("storage_order", 0) == 1)};
}

std::vector<ir::Value *> mapAveragePool(ImportContext &ctx, const onnx::NodeProto &node) {
  ir::Value *x = ctx.input(node, 0);
  OnnxAttrs attrs(node);
  OnnxWindow window = readWindow(node, x, attrs.getInts("kernel_shape"), false);
  return {ctx.op(OpKind::AvgPool, {x},
                 {{"kernel", window.kernel},
                  {"strides", window.strides},
                  {"pads", window.pads},
                  {"ceil_mode", attrs.getInt("ceil_mode", 0)},
                  {"count_include_pad", attrs.getInt("count_include_pad", 0)}})};
}

std::vector<ir::Value *> mapGlobalAveragePool(ImportContext &ctx, const onnx::NodeProto &node) {
  return globalPool(ctx, node, OpKind::ReduceMean);
}

std::vector<ir::Value *> mapGlobalMaxPool(ImportContext &ctx, const onnx::NodeProto &node) {
  return globalPool(ctx, node, OpKind::ReduceMax);
}

// The Lp pools: (sum of |x|^p over the window)^(1/p). kiln has no such pool; the window sum
// is an average pool that counts the (zero) padding, times the window size.
namespace {

ir::Value *lpPower(ImportContext &ctx, ir::Value *x, double p) {
  ir::Value *magnitude = ctx.op(OpKind::Abs, {x});
  return p == 1 ? magnitude : ctx.op(OpKind::Pow, {magnitude, ctx.scalarLike(x, p)});
}

ir::Value *lpRoot(ImportContext &ctx, ir::Value *sum, double p) {
  return p == 1 ? sum : ctx.op(OpKind::Pow, {sum, ctx.scalarLike(sum, 1 / p)});
}

double lpOrder(const onnx::NodeProto &node, int64_t opset) {
  OnnxAttrs attrs(node);
  // p is a float before opset 2 and an int from then on.
  double p = opset < 2 ? attrs.getFloat("p", 2.0) : static_cast<double>(attrs.getInt("p", 2));
  if (!(p > 0) || !std::isfinite(p))
    fail("p must be positive, got {}", p);
  return p;
}

} // namespace

std::vector<ir::Value *> mapLpPool(ImportContext &ctx, const onnx::NodeProto &node) {
  ir::Value *x = ctx.input(node, 0);
  OnnxAttrs attrs(node);
  OnnxWindow window = readWindow(node, x, attrs.getInts("kernel_shape"), true);
  for (int64_t dilation : window.dilations)
    if (dilation != 1)
      fail("dilations {} are not supported (kiln's average pool has none)", shapeToString(window.dilations));
  double p = lpOrder(node, ctx.opset());
  ir::Value *mean = ctx.op(OpKind::AvgPool, {lpPower(ctx, x, p)},
                           {{"kernel", window.kernel},
                            {"strides", window.strides},
                            {"pads", window.pads},
                            {"ceil_mode", attrs.getInt("ceil_mode", 0)},
                            {"count_include_pad", int64_t{1}}});
  ir::Value *sum = ctx.op(OpKind::Mul, {mean, ctx.scalarLike(mean, static_cast<double>(numElements(window.kernel)))});
  return {lpRoot(ctx, sum, p)};
}

std::vector<ir::Value *> mapGlobalLpPool(ImportContext &ctx, const onnx::NodeProto &node) {
  ir::Value *x = ctx.input(node, 0);
  double p = lpOrder(node, ctx.opset());
  if (x->rank() < 3)
    fail("input must be [N, C, spatial...], got {}", shapeToString(x->shape()));
  std::vector<int64_t> axes;
  for (int64_t d = 2; d < x->rank(); ++d)
    axes.push_back(d);
  ir::AttrMap reduce{{"axes", axes}, {"keepdims", int64_t{1}}};
  if (p == 1)
    return {ctx.op(OpKind::ReduceL1, {x}, reduce)};
  if (p == 2)
    return {ctx.op(OpKind::ReduceL2, {x}, reduce)};
  return {lpRoot(ctx, ctx.op(OpKind::ReduceSum, {lpPower(ctx, x, p)}, reduce), p)};
}

} // namespace kiln::frontend
