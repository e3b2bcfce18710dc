// Pooling: max_pool and avg_pool over the spatial dims of [N, C, spatial...] (ONNX MaxPool and
// AveragePool without auto_pad). Their Ops.def lines sit with the contractions: codegen backs both
// with library kernels; the semantics live here.
//
// Window geometry, per spatial dim: output o covers the input positions
//   o*stride - padBegin + j*dilation, j = 0..kernel-1.
// Positions outside [0, in) are padding: they never win a max and are not counted by an average
// unless count_include_pad, in which case positions inside the padded extent
// [-padBegin, in + padEnd) count (as in PyTorch and ONNX). With ceil_mode the last window may
// reach past the padded extent; a window that would start inside the right padding is dropped.
// A window that covers no input element at all (possible only with large pads) gives the
// dtype's lowest value for max_pool and NaN (an empty mean) for avg_pool without
// count_include_pad.
#include <algorithm>
#include <cmath>
#include <limits>

#include "ir/ops/Window.h"

namespace kiln::ir {

using namespace ops;

namespace {

struct PoolGeometry {
  int64_t batch = 0, channels = 0;
  // Per spatial dim, lifted to kMaxWindowSpatial dims like conv (leading dims are the added size-1 ones).
  int64_t in[kMaxWindowSpatial], out[kMaxWindowSpatial], kernel[kMaxWindowSpatial];
  int64_t stride[kMaxWindowSpatial], dilation[kMaxWindowSpatial];
  int64_t padBegin[kMaxWindowSpatial], padEnd[kMaxWindowSpatial];
  Shape outShape;
};

PoolGeometry poolGeometry(const TensorType &x, const AttrMap &attrs, bool hasDilations) {
  if (x.rank() < 3 || x.rank() > 2 + kMaxWindowSpatial)
    fail("input must be [N, C, spatial...] with 1 to 3 spatial dims, got {}", shapeToString(x.shape));
  int64_t spatialRank = x.rank() - 2;
  if (attrInts(attrs, "kernel").empty())
    fail("'kernel' is required: one size per spatial dim");
  std::vector<int64_t> kernel = perSpatialDim(attrs, "kernel", spatialRank, 1, 1);
  std::vector<int64_t> strides = perSpatialDim(attrs, "strides", spatialRank, 1, 1);
  std::vector<int64_t> dilations(static_cast<size_t>(spatialRank), 1);
  if (hasDilations)
    dilations = perSpatialDim(attrs, "dilations", spatialRank, 1, 1);
  std::vector<int64_t> pads = spatialPads(attrs, spatialRank);
  bool ceilMode = attrInt(attrs, "ceil_mode") != 0;

  PoolGeometry g;
  g.batch = x.shape[0];
  g.channels = x.shape[1];
  g.outShape = {g.batch, g.channels};
  for (int d = 0; d < kMaxWindowSpatial; ++d) {
    g.in[d] = g.out[d] = g.kernel[d] = g.stride[d] = g.dilation[d] = 1;
    g.padBegin[d] = g.padEnd[d] = 0;
  }
  int64_t lifted = kMaxWindowSpatial - spatialRank;
  for (int64_t d = 0; d < spatialRank; ++d) {
    // The batch and channels may be symbolic; a window's output size needs the extent.
    int64_t in = requireStaticDim(x.shape, static_cast<size_t>(2 + d), "pooling's input");
    int64_t padBegin = pads[d], padEnd = pads[spatialRank + d];
    int64_t span = dilatedSpan(kernel[d], dilations[d]);
    int64_t excess = checkedAdd(checkedAdd(in, padBegin, "padded input size"), padEnd, "padded input size") - span;
    if (excess < 0)
      fail("spatial dim {}: output size would be < 1 (input {} with pads {}+{}, dilated kernel {})", d, in,
           padBegin, padEnd, span);
    int64_t out = (ceilMode ? ceilDiv(excess, strides[d]) : excess / strides[d]) + 1;
    // The last window starts at (out - 1) * stride in padded coordinates; drop it if that is
    // inside the right padding. (Compared by division, so nothing can overflow.)
    if (ceilMode && out - 1 >= ceilDiv(in + padBegin, strides[d]))
      --out;
    if (out < 1)
      fail("spatial dim {}: output size would be < 1 (input {} with pads {}+{}, dilated kernel {})", d, in,
           padBegin, padEnd, span);
    int64_t l = lifted + d;
    g.in[l] = in;
    g.out[l] = out;
    g.kernel[l] = kernel[d];
    g.stride[l] = strides[d];
    g.padBegin[l] = padBegin;
    g.padEnd[l] = padEnd;
    g.dilation[l] = dilations[d];
    g.outShape.push_back(out);
  }
  return g;
}

// The window is separable: along one spatial dim, an output position reads the input positions
// firstInput + i*dilation for i < inputCount, and paddedCount of its kernel taps lie inside the
// padded extent (the count_include_pad divisor). Computed arithmetically, so the cost does not
// depend on how large a kernel or padding the attributes ask for.
struct DimWindow {
  int64_t firstInput = 0, inputCount = 0, paddedCount = 0;
};

// Kernel taps j in [0, kernel) whose position base + j*dilation lies in [lo, hi).
std::pair<int64_t, int64_t> tapRange(int64_t base, int64_t dilation, int64_t kernel, int64_t lo, int64_t hi) {
  int64_t first = base >= lo ? 0 : ceilDiv(lo - base, dilation);
  int64_t last = base >= hi ? 0 : std::min(kernel, ceilDiv(hi - base, dilation));
  return {std::min(first, last), last};
}

std::vector<DimWindow> dimWindows(const PoolGeometry &g, int d) {
  std::vector<DimWindow> windows(static_cast<size_t>(g.out[d]));
  for (int64_t o = 0; o < g.out[d]; ++o) {
    // No overflow: inference keeps every window start inside the padded extent.
    int64_t base = o * g.stride[d] - g.padBegin[d];
    auto [r0, r1] = tapRange(base, g.dilation[d], g.kernel[d], 0, g.in[d]);
    auto [p0, p1] = tapRange(base, g.dilation[d], g.kernel[d], -g.padBegin[d], g.in[d] + g.padEnd[d]);
    windows[o] = {base + r0 * g.dilation[d], r1 - r0, p1 - p0};
  }
  return windows;
}

// Calls reduce(flat input indices of the window within its plane, padded-extent count, output
// index within the plane) for every output element of one spatial plane.
template <typename Fn> void forEachWindow(const PoolGeometry &g, Fn &&reduce) {
  std::vector<DimWindow> wd = dimWindows(g, 0), wh = dimWindows(g, 1), ww = dimWindows(g, 2);
  std::vector<int64_t> positions;
  int64_t outIndex = 0;
  for (const DimWindow &d : wd)
    for (const DimWindow &h : wh)
      for (const DimWindow &w : ww) {
        positions.clear();
        for (int64_t i = 0; i < d.inputCount; ++i) {
          int64_t pd = d.firstInput + i * g.dilation[0];
          for (int64_t j = 0; j < h.inputCount; ++j) {
            int64_t ph = h.firstInput + j * g.dilation[1];
            for (int64_t k = 0; k < w.inputCount; ++k)
              positions.push_back((pd * g.in[1] + ph) * g.in[2] + w.firstInput + k * g.dilation[2]);
          }
        }
        // In double: the product of three kernel-sized counts could exceed int64.
        double paddedCount = double(d.paddedCount) * double(h.paddedCount) * double(w.paddedCount);
        reduce(positions, paddedCount, outIndex++);
      }
}

std::vector<TensorType> inferMaxPool(const std::vector<TensorType> &in, const AttrMap &attrs) {
  if (in[0].dtype == DType::Bool)
    fail("needs a float or integer input, got bool");
  return {TensorType{in[0].dtype, poolGeometry(in[0], attrs, true).outShape}};
}

std::vector<TensorType> inferAvgPool(const std::vector<TensorType> &in, const AttrMap &attrs) {
  if (!isFloat(in[0].dtype))
    fail("needs a floating-point input, got {}", dtypeName(in[0].dtype));
  return {TensorType{in[0].dtype, poolGeometry(in[0], attrs, false).outShape}};
}

std::vector<Tensor> evalMaxPool(const std::vector<Tensor> &in, const AttrMap &attrs,
                                const std::vector<TensorType> &outTypes) {
  PoolGeometry g = poolGeometry(in[0].type(), attrs, true);
  const Tensor &x = in[0];
  Tensor out(outTypes[0]);
  bool floats = isFloat(x.dtype());
  int64_t inPlane = g.in[0] * g.in[1] * g.in[2], outPlane = g.out[0] * g.out[1] * g.out[2];
  for (int64_t plane = 0; plane < g.batch * g.channels; ++plane) {
    int64_t inBase = plane * inPlane, outBase = plane * outPlane;
    forEachWindow(g, [&](const std::vector<int64_t> &positions, double, int64_t outIndex) {
      if (positions.empty()) {
        // setDouble saturates -inf to the lowest value of integer dtypes.
        out.setDouble(outBase + outIndex, -std::numeric_limits<double>::infinity());
      } else if (floats) {
        double best = x.getDouble(inBase + positions[0]);
        for (int64_t p : positions) {
          double v = x.getDouble(inBase + p);
          if (v > best || std::isnan(v)) // NaN propagates, as in PyTorch
            best = v;
          if (std::isnan(best))
            break;
        }
        out.setDouble(outBase + outIndex, best);
      } else {
        int64_t best = x.getInt(inBase + positions[0]);
        for (int64_t p : positions)
          best = std::max(best, x.getInt(inBase + p));
        out.setInt(outBase + outIndex, best);
      }
    });
  }
  return {out};
}

std::vector<Tensor> evalAvgPool(const std::vector<Tensor> &in, const AttrMap &attrs,
                                const std::vector<TensorType> &outTypes) {
  PoolGeometry g = poolGeometry(in[0].type(), attrs, false);
  bool countIncludePad = attrInt(attrs, "count_include_pad") != 0;
  const Tensor &x = in[0];
  Tensor out(outTypes[0]);
  int64_t inPlane = g.in[0] * g.in[1] * g.in[2], outPlane = g.out[0] * g.out[1] * g.out[2];
  for (int64_t plane = 0; plane < g.batch * g.channels; ++plane) {
    int64_t inBase = plane * inPlane, outBase = plane * outPlane;
    forEachWindow(g, [&](const std::vector<int64_t> &positions, double paddedCount, int64_t outIndex) {
      double sum = 0;
      for (int64_t p : positions)
        sum += x.getDouble(inBase + p);
      double count = countIncludePad ? paddedCount : static_cast<double>(positions.size());
      out.setDouble(outBase + outIndex, count > 0 ? sum / count : std::numeric_limits<double>::quiet_NaN());
    });
  }
  return {out};
}

std::vector<AttrSpec> commonPoolAttrs() {
  return {intsAttr("kernel"), intsAttr("strides", std::vector<int64_t>{}),
          intsAttr("pads", std::vector<int64_t>{}), intAttr("ceil_mode", 0)};
}

} // namespace

OpDef defineMaxPool() {
  OpDef def;
  def.attrs = commonPoolAttrs();
  def.attrs.push_back(intsAttr("dilations", std::vector<int64_t>{}));
  def.infer = inferMaxPool;
  def.eval = evalMaxPool;
  return def;
}

OpDef defineAvgPool() {
  OpDef def;
  def.attrs = commonPoolAttrs();
  def.attrs.push_back(intAttr("count_include_pad", 0));
  def.infer = inferAvgPool;
  def.eval = evalAvgPool;
  return def;
}

} // namespace kiln::ir
