#pragma once
// Window arithmetic shared by the windowed op families (conv, conv_transpose, pooling): reading
// per-spatial-dim attributes, sizes checked with core/ShapeMath.h (they come from user
// attributes: overflow is a user error, not undefined behaviour), and the strided index ranges that keep
// bounds checks out of the reference evaluator's innermost loops. Header-only: each helper is a
// few lines and sits on hot paths of the reference loops.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "ir/ops/Common.h"

namespace kiln::ir::ops {

/// The evaluator lifts 1-D and 2-D windows to 3-D by prepending spatial dims of size 1 (kernel 1,
/// stride 1, no padding), so one loop nest serves every rank.
inline constexpr int kMaxWindowSpatial = 3;

/// Rounds a / b up for b > 0, without forming a + b - 1.
inline int64_t ceilDiv(int64_t a, int64_t b) { return a / b + (a % b > 0 ? 1 : 0); }

/// The extent a kernel of `kernel` taps spans at `dilation`: (kernel - 1) * dilation + 1.
inline int64_t dilatedSpan(int64_t kernel, int64_t dilation) {
  return checkedAdd(checkedMul(dilation, kernel - 1, "dilated kernel span"), 1, "dilated kernel span");
}

/// Reads an ints attribute with one entry per spatial dim; empty means `fallback` everywhere.
/// Every value must be >= minValue.
inline std::vector<int64_t> perSpatialDim(const AttrMap &attrs, const std::string &name, int64_t spatialRank,
                                          int64_t fallback, int64_t minValue) {
  std::vector<int64_t> values = attrInts(attrs, name);
  if (values.empty())
    values.assign(static_cast<size_t>(spatialRank), fallback);
  if (static_cast<int64_t>(values.size()) != spatialRank)
    fail("'{}' needs {} values (one per spatial dim), got {}", name, spatialRank, values.size());
  for (int64_t v : values)
    if (v < minValue)
      fail("'{}' values must be >= {}, got {}", name, minValue, shapeToString(values));
  return values;
}

/// Reads `pads` as [begin..., end...] (2 * spatialRank non-negative values; empty means zeros).
inline std::vector<int64_t> spatialPads(const AttrMap &attrs, int64_t spatialRank) {
  std::vector<int64_t> pads = attrInts(attrs, "pads");
  if (pads.empty())
    pads.assign(static_cast<size_t>(2 * spatialRank), 0);
  if (static_cast<int64_t>(pads.size()) != 2 * spatialRank)
    fail("'pads' needs {} values ([begin..., end...]), got {}", 2 * spatialRank, pads.size());
  for (int64_t p : pads)
    if (p < 0)
      fail("'pads' values must be >= 0, got {}", shapeToString(pads));
  return pads;
}

/// Positions i in [first, last), i < count, whose target i*stride + offset lies in [0, size):
/// computing the range once keeps bounds checks out of the innermost loop. Conv reads input
/// `size` from output positions i (count = output size); conv_transpose scatters input
/// positions i (count = input size) into an output of `size`.
inline std::pair<int64_t, int64_t> stridedRange(int64_t offset, int64_t stride, int64_t size, int64_t count) {
  int64_t first = offset >= 0 ? 0 : (-offset + stride - 1) / stride;
  int64_t limit = size - 1 - offset; // i*stride <= limit
  int64_t last = limit < 0 ? 0 : std::min(count, limit / stride + 1);
  return {std::min(first, last), last};
}

} // namespace kiln::ir::ops
