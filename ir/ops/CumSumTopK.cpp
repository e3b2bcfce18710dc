// Scans and selections along one axis: cumsum (ONNX CumSum) and topk (ONNX TopK). Both are
// primitives, because a scan or a selection written with existing ops would be quadratic.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <type_traits>

#include "ir/ops/Common.h"

namespace kiln::ir {

using namespace ops;

namespace {

void requireNumeric(const TensorType &type, std::string_view what) {
  if (type.dtype == DType::Bool)
    fail("{} must be numeric, got bool", what);
}

/// A tensor viewed as [outer, extent, inner] around `axis`: element (o, j, i) is at flat
/// index (o * extent + j) * inner + i.
struct AxisView {
  int64_t outer = 1, extent = 1, inner = 1;
  AxisView(const Shape &shape, int64_t axis) {
    for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) {
      if (d < axis)
        outer *= shape[d];
      else if (d > axis)
        inner *= shape[d];
    }
    extent = shape[axis];
  }
  int64_t at(int64_t o, int64_t j, int64_t i) const { return (o * extent + j) * inner + i; }
};

// ---- cumsum ------------------------------------------------------------------------------------

/// Running sum along one line of the view, in the scan order that `reverse` picks; with
/// `exclusive` each output holds the sum of the elements strictly before it in that order.
template <typename Acc, typename Read, typename Write>
void scanLine(const AxisView &view, int64_t o, int64_t i, bool exclusive, bool reverse, Read read,
              Write write) {
  Acc running = 0;
  for (int64_t step = 0; step < view.extent; ++step) {
    int64_t flat = view.at(o, reverse ? view.extent - 1 - step : step, i);
    Acc value = read(flat);
    if (exclusive)
      write(flat, running);
    running += value; // uint64 (integers) wraps like two's-complement int64, instead of UB
    if (!exclusive)
      write(flat, running);
  }
}

// ---- topk --------------------------------------------------------------------------------------

/// Orders positions 0..n-1 of one line so that the first k are the top k: by value (largest
/// or smallest first), NaN counting as larger than every number, ties by smaller position.
/// That is a strict total order, so partial_sort gives one deterministic answer.
template <typename T>
void topPositions(const std::vector<T> &line, int64_t k, bool largest, std::vector<int64_t> &order) {
  order.resize(line.size());
  std::iota(order.begin(), order.end(), int64_t{0});
  auto before = [&](int64_t a, int64_t b) {
    T va = line[a], vb = line[b];
    bool nanA = false, nanB = false;
    if constexpr (std::is_floating_point_v<T>) {
      nanA = std::isnan(va);
      nanB = std::isnan(vb);
    }
    if (nanA || nanB) {
      if (nanA && nanB)
        return a < b;
      return largest ? nanA : nanB; // NaN first when largest, last when smallest
    }
    if (va != vb)
      return largest ? va > vb : va < vb;
    return a < b;
  };
  std::partial_sort(order.begin(), order.begin() + k, order.end(), before);
}

template <typename T>
void evalTopK(const Tensor &x, const AxisView &view, int64_t k, bool largest, Tensor &values,
              Tensor &indices) {
  AxisView outView = view;
  outView.extent = k;
  std::vector<T> line(static_cast<size_t>(view.extent));
  std::vector<int64_t> order;
  for (int64_t o = 0; o < view.outer; ++o)
    for (int64_t i = 0; i < view.inner; ++i) {
      for (int64_t j = 0; j < view.extent; ++j) {
        int64_t flat = view.at(o, j, i);
        // Integers compare as exact int64 (an i64 above 2^53 keeps its order), floats as double.
        if constexpr (std::is_floating_point_v<T>)
          line[j] = x.getDouble(flat);
        else
          line[j] = x.getInt(flat);
      }
      topPositions(line, k, largest, order);
      for (int64_t r = 0; r < k; ++r) {
        int64_t from = view.at(o, order[r], i), to = outView.at(o, r, i);
        copyElements(x, from, values, to, 1); // values move bit for bit
        indices.setInt(to, order[r]);
      }
    }
}

} // namespace

OpDef defineCumSum() {
  OpDef def;
  def.attrs = {intAttr("axis"), intAttr("exclusive", 0), intAttr("reverse", 0)};
  def.infer = [](const std::vector<TensorType> &in, const AttrMap &attrs) {
    requireNumeric(in[0], "input");
    normalizeAxis(attrInt(attrs, "axis"), in[0].rank(), "axis");
    attrFlag(attrs, "exclusive");
    attrFlag(attrs, "reverse");
    return std::vector<TensorType>{in[0]};
  };
  // Floats accumulate in double and round once per output; integers accumulate exactly.
  def.eval = [](const std::vector<Tensor> &in, const AttrMap &attrs, const std::vector<TensorType> &out) {
    const Tensor &x = in[0];
    AxisView view(x.shape(), normalizeAxis(attrInt(attrs, "axis"), x.rank(), "axis"));
    bool exclusive = attrFlag(attrs, "exclusive"), reverse = attrFlag(attrs, "reverse");
    Tensor y(out[0]);
    for (int64_t o = 0; o < view.outer; ++o)
      for (int64_t i = 0; i < view.inner; ++i) {
        if (isFloat(x.dtype()))
          scanLine<double>(
              view, o, i, exclusive, reverse, [&](int64_t f) { return x.getDouble(f); },
              [&](int64_t f, double v) { y.setDouble(f, v); });
        else
          scanLine<uint64_t>(
              view, o, i, exclusive, reverse, [&](int64_t f) { return static_cast<uint64_t>(x.getInt(f)); },
              [&](int64_t f, uint64_t v) { y.setInt(f, static_cast<int64_t>(v)); });
      }
    return std::vector<Tensor>{y};
  };
  return def;
}

// sorted=0 lets ONNX return the top k in any order; kiln always returns them sorted, which
// is one of the permitted answers and keeps the evaluator deterministic.
OpDef defineTopK() {
  OpDef def;
  def.attrs = {intAttr("k"), intAttr("axis", -1), intAttr("largest", 1), intAttr("sorted", 1)};
  def.infer = [](const std::vector<TensorType> &in, const AttrMap &attrs) {
    const TensorType &x = in[0];
    requireNumeric(x, "input");
    int64_t axis = normalizeAxis(attrInt(attrs, "axis"), x.rank(), "axis");
    attrFlag(attrs, "largest");
    attrFlag(attrs, "sorted");
    int64_t k = attrInt(attrs, "k");
    if (k < 0 || k > x.shape[axis])
      fail("k {} is out of range [0, {}] for axis {} of shape {}", k, x.shape[axis], axis,
           shapeToString(x.shape));
    Shape shape = x.shape;
    shape[axis] = k;
    return std::vector<TensorType>{{x.dtype, shape}, {DType::I64, shape}};
  };
  def.eval = [](const std::vector<Tensor> &in, const AttrMap &attrs, const std::vector<TensorType> &out) {
    const Tensor &x = in[0];
    AxisView view(x.shape(), normalizeAxis(attrInt(attrs, "axis"), x.rank(), "axis"));
    int64_t k = attrInt(attrs, "k");
    bool largest = attrFlag(attrs, "largest");
    Tensor values(out[0]), indices(out[1]);
    if (isFloat(x.dtype()))
      evalTopK<double>(x, view, k, largest, values, indices);
    else
      evalTopK<int64_t>(x, view, k, largest, values, indices);
    return std::vector<Tensor>{values, indices};
  };
  return def;
}

} // namespace kiln::ir
