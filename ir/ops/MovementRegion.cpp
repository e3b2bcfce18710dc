// Movement ops that cut or assemble rectangular regions: slice, pad, concat and split.
// (Reshape, permute, broadcast and the reshape composites live in Movement.cpp.)
//
// Slice and pad are both "per-axis index maps": output coordinate o on axis d reads input
// coordinate sourceOf[d][o], or a fill value. Building those small tables once keeps the
// element loop trivial. Concat and split copy contiguous blocks. Element bytes are copied,
// never converted, so every dtype moves exactly.
#include <algorithm>

#include "ir/ops/Common.h"

namespace kiln::ir {

using namespace ops;

namespace {

constexpr int64_t kFill = -1; // a sourceOf entry that reads the fill value

/// Builds a tensor of `outType` whose element at index o is the input element at
/// (sourceOf[0][o[0]], sourceOf[1][o[1]], ...), or `fill` where any coordinate is kFill.
Tensor remapAxes(const Tensor &in, const TensorType &outType,
                 const std::vector<std::vector<int64_t>> &sourceOf, double fill) {
  Tensor out(outType);
  std::vector<int64_t> strides = contiguousStrides(in.shape());
  forEachIndex(outType.shape, [&](const std::vector<int64_t> &index, int64_t flat) {
    int64_t source = 0;
    for (size_t d = 0; d < index.size(); ++d) {
      int64_t coordinate = sourceOf[d][index[d]];
      if (coordinate == kFill) {
        out.setDouble(flat, fill);
        return;
      }
      source += coordinate * strides[d];
    }
    copyElements(in, source, out, flat, 1);
  });
  return out;
}

/// Identity maps for every axis of `shape`, for the axes an op leaves alone.
std::vector<std::vector<int64_t>> identityMaps(const Shape &shape) {
  std::vector<std::vector<int64_t>> maps(shape.size());
  for (size_t d = 0; d < shape.size(); ++d)
    for (int64_t i = 0; i < shape[d]; ++i)
      maps[d].push_back(i);
  return maps;
}

// ---- slice: ONNX Slice semantics ---------------------------------------------------------

struct AxisSlice {
  int64_t axis, start, step, count;
};

// Negative bounds count from the end; then clamp to [0, dim] going forward or to [-1, dim-1]
// going backward (-1 meaning "before the first element"). Adding dim to a negative int64
// cannot overflow, so INT64_MIN and INT64_MAX simply clamp.
int64_t clampSliceBound(int64_t bound, int64_t dim, int64_t step) {
  if (bound < 0)
    bound += dim;
  return step > 0 ? std::clamp<int64_t>(bound, 0, dim) : std::clamp<int64_t>(bound, -1, dim - 1);
}

std::vector<AxisSlice> resolveSlice(const Shape &shape, const AttrMap &attrs) {
  const auto &starts = attrInts(attrs, "starts");
  const auto &ends = attrInts(attrs, "ends");
  const auto &axesAttr = attrInts(attrs, "axes");
  const auto &steps = attrInts(attrs, "steps");
  size_t n = starts.size();
  if (ends.size() != n)
    fail("'starts' has {} entries but 'ends' has {}", n, ends.size());
  if (!axesAttr.empty() && axesAttr.size() != n)
    fail("'starts' has {} entries but 'axes' has {}", n, axesAttr.size());
  if (!steps.empty() && steps.size() != n)
    fail("'starts' has {} entries but 'steps' has {}", n, steps.size());
  std::vector<int64_t> axes = axesAttr;
  if (axes.empty())
    for (size_t i = 0; i < n; ++i)
      axes.push_back(static_cast<int64_t>(i));
  axes = normalizeAxes(axes, static_cast<int64_t>(shape.size()), "axes");

  std::vector<AxisSlice> slices;
  for (size_t i = 0; i < n; ++i) {
    int64_t step = steps.empty() ? 1 : steps[i];
    if (step == 0)
      fail("step 0 on axis {}: steps must be non-zero", axes[i]);
    // Clamping the bounds needs the extent: a symbolic axis is sliced only after binding.
    int64_t dim = requireStaticDim(shape, static_cast<size_t>(axes[i]), "slice");
    int64_t start = clampSliceBound(starts[i], dim, step);
    int64_t end = clampSliceBound(ends[i], dim, step);
    // Count = ceil(span / |step|); unsigned arithmetic because -INT64_MIN does not fit.
    uint64_t magnitude = step > 0 ? static_cast<uint64_t>(step) : 0 - static_cast<uint64_t>(step);
    int64_t span = step > 0 ? end - start : start - end;
    int64_t count = span > 0 ? static_cast<int64_t>(1 + static_cast<uint64_t>(span - 1) / magnitude) : 0;
    slices.push_back({axes[i], start, step, count});
  }
  return slices;
}

// ---- pad ---------------------------------------------------------------------------------

enum class PadMode { Constant, Reflect, Edge };

PadMode parsePadMode(const std::string &mode) {
  if (mode == "constant")
    return PadMode::Constant;
  if (mode == "reflect")
    return PadMode::Reflect;
  if (mode == "edge")
    return PadMode::Edge;
  fail("unknown pad mode '{}' (expected constant, reflect or edge)", mode);
}

// Checks `pads` against `shape` and returns the padded shape. Negative pads crop; padding
// and cropping are relative to the original dim, so a result equals "pad, then crop".
Shape paddedShape(const Shape &shape, const AttrMap &attrs) {
  const auto &pads = attrInts(attrs, "pads");
  size_t rank = shape.size();
  if (pads.size() != 2 * rank)
    fail("'pads' has {} entries; rank {} needs {} (all begins, then all ends)", pads.size(), rank, 2 * rank);
  PadMode mode = parsePadMode(attrString(attrs, "mode"));
  Shape out(rank);
  for (size_t d = 0; d < rank; ++d) {
    int64_t dim = shape[d], begin = pads[d], end = pads[d + rank];
    // numpy's reflect mirrors around the edge element without repeating it, so one
    // reflection reaches at most dim-1 elements; more would need repeated reflection.
    if (mode == PadMode::Reflect && ((begin > 0 && begin >= dim) || (end > 0 && end >= dim)))
      fail("reflect padding of {} and {} on axis {} needs pads smaller than its size {}", begin, end, d, dim);
    if (mode == PadMode::Edge && dim == 0 && (begin > 0 || end > 0))
      fail("edge padding on axis {} of size 0: there is no edge element to repeat", d);
    std::string what = fmt::format("pads {} and {} on axis {}", begin, end, d);
    out[d] = checkedAdd(checkedAdd(dim, begin, what), end, what);
    if (out[d] < 0)
      fail("pads {} and {} on axis {} crop more than its {} elements", begin, end, d, dim);
  }
  return out;
}

// Where output coordinate `o` on an axis padded by `begin` reads from, by mode.
int64_t padSource(int64_t o, int64_t begin, int64_t dim, PadMode mode) {
  int64_t s;
  if (__builtin_sub_overflow(o, begin, &s))
    s = INT64_MAX; // only when begin is near INT64_MIN: far past the end
  if (s >= 0 && s < dim)
    return s;
  switch (mode) {
  case PadMode::Constant: return kFill;
  case PadMode::Edge: return s < 0 ? 0 : dim - 1;
  case PadMode::Reflect: s = s < 0 ? -s : 2 * (dim - 1) - s; break;
  }
  if (s < 0 || s >= dim) // unreachable: paddedShape bounds reflect pads by dim-1
    fail("pad: internal error, reflect source {} outside an axis of size {}", s, dim);
  return s;
}

} // namespace

OpDef defineSlice() {
  OpDef def;
  def.attrs = {intsAttr("starts"), intsAttr("ends"), intsAttr("axes", std::vector<int64_t>{}),
               intsAttr("steps", std::vector<int64_t>{})};
  def.infer = [](const std::vector<TensorType> &in, const AttrMap &attrs) {
    Shape shape = in[0].shape;
    for (const AxisSlice &slice : resolveSlice(shape, attrs))
      shape[slice.axis] = slice.count;
    return std::vector<TensorType>{{in[0].dtype, shape}};
  };
  def.eval = [](const std::vector<Tensor> &in, const AttrMap &attrs, const std::vector<TensorType> &out) {
    std::vector<std::vector<int64_t>> sourceOf = identityMaps(in[0].shape());
    for (const AxisSlice &slice : resolveSlice(in[0].shape(), attrs)) {
      auto &map = sourceOf[slice.axis];
      map.clear();
      // |i * step| < span for every i < count, so this cannot overflow.
      for (int64_t i = 0; i < slice.count; ++i)
        map.push_back(slice.start + i * slice.step);
    }
    return std::vector<Tensor>{remapAxes(in[0], out[0], sourceOf, 0.0)};
  };
  return def;
}

OpDef definePad() {
  OpDef def;
  def.attrs = {intsAttr("pads"), stringAttr("mode", "constant"), floatAttr("value", 0.0)};
  def.infer = [](const std::vector<TensorType> &in, const AttrMap &attrs) {
    return std::vector<TensorType>{{in[0].dtype, paddedShape(in[0].shape, attrs)}};
  };
  def.eval = [](const std::vector<Tensor> &in, const AttrMap &attrs, const std::vector<TensorType> &out) {
    const Shape &shape = in[0].shape();
    const auto &pads = attrInts(attrs, "pads");
    PadMode mode = parsePadMode(attrString(attrs, "mode"));
    std::vector<std::vector<int64_t>> sourceOf(shape.size());
    for (size_t d = 0; d < shape.size(); ++d)
      for (int64_t o = 0; o < out[0].shape[d]; ++o)
        sourceOf[d].push_back(padSource(o, pads[d], shape[d], mode));
    return std::vector<Tensor>{remapAxes(in[0], out[0], sourceOf, attrFloat(attrs, "value"))};
  };
  return def;
}

OpDef defineConcat() {
  OpDef def;
  def.attrs = {intAttr("axis")};
  def.infer = [](const std::vector<TensorType> &in, const AttrMap &attrs) {
    DType dtype = commonDType(in);
    const Shape &first = in[0].shape;
    if (first.empty())
      fail("cannot concatenate rank-0 operands");
    int64_t axis = normalizeAxis(attrInt(attrs, "axis"), in[0].rank(), "axis");
    Shape out = first;
    out[axis] = 0;
    for (size_t k = 0; k < in.size(); ++k) {
      const Shape &shape = in[k].shape;
      bool matches = shape.size() == first.size();
      for (size_t d = 0; matches && d < shape.size(); ++d)
        matches = static_cast<int64_t>(d) == axis || shape[d] == first[d];
      if (!matches)
        fail("operand {} has shape {}, which differs from operand 0's {} outside axis {}", k,
             shapeToString(shape), shapeToString(first), axis);
      out[axis] = dimAdd(out[axis], shape[axis], fmt::format("the concatenated size of axis {}", axis));
    }
    return std::vector<TensorType>{{dtype, out}};
  };
  def.eval = [](const std::vector<Tensor> &in, const AttrMap &attrs, const std::vector<TensorType> &out) {
    Tensor y(out[0]);
    size_t axis = static_cast<size_t>(normalizeAxis(attrInt(attrs, "axis"), y.rank(), "axis"));
    int64_t outer = productOf(y.shape(), 0, axis), inner = productOf(y.shape(), axis + 1, y.shape().size());
    // Output row o (over the dims before axis) is the operands' rows o, one after another.
    int64_t next = 0;
    for (int64_t o = 0; o < outer; ++o) {
      for (const Tensor &x : in) {
        int64_t block = x.shape()[axis] * inner;
        copyElements(x, o * block, y, next, block);
        next += block;
      }
    }
    return std::vector<Tensor>{y};
  };
  return def;
}

OpDef defineSplit() {
  OpDef def;
  def.attrs = {intAttr("axis", 0), intsAttr("sizes")};
  def.infer = [](const std::vector<TensorType> &in, const AttrMap &attrs) {
    int64_t axis = normalizeAxis(attrInt(attrs, "axis"), in[0].rank(), "axis");
    const auto &sizes = attrInts(attrs, "sizes");
    if (sizes.empty())
      fail("'sizes' is empty: split needs at least one output");
    // The other dims are copied, so they may be symbolic; the split one is cut by extents.
    int64_t dim = requireStaticDim(in[0].shape, static_cast<size_t>(axis), "split"), total = 0;
    std::vector<TensorType> outs;
    for (int64_t size : sizes) {
      if (size < 0 || size > dim)
        fail("sizes {}: size {} is outside [0, {}] for axis {}", shapeToString(sizes), size, dim, axis);
      total += size; // each size <= dim, so this cannot overflow before the check below
      if (total > dim)
        break;
      outs.push_back(in[0]);
      outs.back().shape[axis] = size;
    }
    if (total != dim)
      fail("sizes {} must sum to {}, the size of axis {}", shapeToString(sizes), dim, axis);
    return outs;
  };
  def.eval = [](const std::vector<Tensor> &in, const AttrMap &attrs, const std::vector<TensorType> &out) {
    const Tensor &x = in[0];
    size_t axis = static_cast<size_t>(normalizeAxis(attrInt(attrs, "axis"), x.rank(), "axis"));
    int64_t outer = productOf(x.shape(), 0, axis), inner = productOf(x.shape(), axis + 1, x.shape().size());
    std::vector<Tensor> ys;
    for (const TensorType &type : out)
      ys.emplace_back(type);
    // The inverse of concat: input row o is the outputs' rows o, one after another.
    int64_t next = 0;
    for (int64_t o = 0; o < outer; ++o) {
      for (Tensor &y : ys) {
        int64_t block = y.shape()[axis] * inner;
        copyElements(x, next, y, o * block, block);
        next += block;
      }
    }
    return ys;
  };
  return def;
}

} // namespace kiln::ir
