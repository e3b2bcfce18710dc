// Sequence and tensor-construction ops from ONNX: cumsum (CumSum) and topk (TopK) are
// primitives, because a scan or a selection written with existing ops would be quadratic;
// trilu (Trilu), one_hot (OneHot) and tile (Tile) are composites over iota, comparisons,
// where and movement ops, so fusion and codegen see only ops they already know.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <type_traits>

#include "ir/Builder.h"
#include "ir/ops/Common.h"

namespace kiln::ir {

using namespace ops;

namespace {

/// An int attribute that ONNX uses as a boolean: only 0 and 1 are accepted.
bool readFlag(const AttrMap &attrs, const std::string &name) {
  int64_t value = attrInt(attrs, name);
  if (value != 0 && value != 1)
    fail("attribute '{}' must be 0 or 1, got {}", name, value);
  return value == 1;
}

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

Value *i64Constant(Builder &b, int64_t value) {
  Tensor t(DType::I64, {});
  t.setInt(0, value); // exact, where Builder::scalar would go through double
  return b.constant(t);
}

Value *iotaAlong(Builder &b, Shape shape, int64_t axis) {
  return b.create(OpKind::Iota, {}, {{"shape", std::move(shape)}, {"axis", axis}, {"dtype", DType::I64}});
}

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

// ---- trilu, one_hot, tile ----------------------------------------------------------------------

void checkTrilu(const TensorType &x) {
  if (x.rank() < 2)
    fail("input must have rank >= 2 (a batch of matrices), got {}", shapeToString(x.shape));
}

/// one_hot's output shape: the indices shape with `depth` inserted at `axis` in [-r-1, r].
Shape oneHotShape(const TensorType &indices, const TensorType &values, const AttrMap &attrs, int64_t &axis) {
  if (!isInteger(indices.dtype))
    fail("indices must be an integer dtype, got {}", dtypeName(indices.dtype));
  if (values.shape != Shape{2})
    fail("values must be [off, on] with shape [2], got {}", shapeToString(values.shape));
  int64_t depth = attrInt(attrs, "depth");
  if (depth < 1)
    fail("depth must be >= 1, got {}", depth);
  int64_t rank = indices.rank();
  axis = attrInt(attrs, "axis");
  if (axis < -rank - 1 || axis > rank)
    fail("axis {} is out of range [{}, {}] for indices of rank {}", axis, -rank - 1, rank, rank);
  if (axis < 0)
    axis += rank + 1;
  Shape shape = indices.shape;
  shape.insert(shape.begin() + axis, depth);
  numElements(shape); // rejects counts that do not fit
  return shape;
}

/// tile's output shape, dim d repeated repeats[d] times.
Shape tiledShape(const TensorType &x, const std::vector<int64_t> &repeats) {
  if (static_cast<int64_t>(repeats.size()) != x.rank())
    fail("repeats {} has {} entries, but the input has rank {}", shapeToString(repeats), repeats.size(),
         x.rank());
  Shape shape(x.shape.size());
  for (size_t d = 0; d < shape.size(); ++d) {
    if (repeats[d] < 0)
      fail("repeats {} has a negative entry {}", shapeToString(repeats), repeats[d]);
    shape[d] = checkedMul(x.shape[d], repeats[d], "tiled dim");
  }
  numElements(shape); // rejects counts that do not fit
  return shape;
}

} // namespace

OpDef defineCumSum() {
  OpDef def;
  def.attrs = {intAttr("axis"), intAttr("exclusive", 0), intAttr("reverse", 0)};
  def.infer = [](const std::vector<TensorType> &in, const AttrMap &attrs) {
    requireNumeric(in[0], "input");
    normalizeAxis(attrInt(attrs, "axis"), in[0].rank(), "axis");
    readFlag(attrs, "exclusive");
    readFlag(attrs, "reverse");
    return std::vector<TensorType>{in[0]};
  };
  // Floats accumulate in double and round once per output; integers accumulate exactly.
  def.eval = [](const std::vector<Tensor> &in, const AttrMap &attrs, const std::vector<TensorType> &out) {
    const Tensor &x = in[0];
    AxisView view(x.shape(), normalizeAxis(attrInt(attrs, "axis"), x.rank(), "axis"));
    bool exclusive = readFlag(attrs, "exclusive"), reverse = readFlag(attrs, "reverse");
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
    readFlag(attrs, "largest");
    readFlag(attrs, "sorted");
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
    bool largest = readFlag(attrs, "largest");
    Tensor values(out[0]), indices(out[1]);
    if (isFloat(x.dtype()))
      evalTopK<double>(x, view, k, largest, values, indices);
    else
      evalTopK<int64_t>(x, view, k, largest, values, indices);
    return std::vector<Tensor>{values, indices};
  };
  return def;
}

// trilu keeps x[..., r, c] where c - r >= k (upper) or c - r <= k (lower) and zeros the rest:
// the mask is built once on the [rows, cols] matrix and broadcast over the batch dims.
OpDef defineTrilu() {
  OpDef def;
  def.attrs = {intAttr("upper", 1), intAttr("k", 0)};
  def.infer = [](const std::vector<TensorType> &in, const AttrMap &attrs) {
    checkTrilu(in[0]);
    readFlag(attrs, "upper");
    return std::vector<TensorType>{in[0]};
  };
  def.decompose = [](Builder &b, const std::vector<Value *> &in, const AttrMap &attrs) {
    Value *x = in[0];
    Shape matrix(x->shape().end() - 2, x->shape().end());
    // c - r lies in (-rows, cols), so the subtraction cannot overflow whatever k is.
    Value *diagonal = b.create(OpKind::Sub, {iotaAlong(b, matrix, 1), iotaAlong(b, matrix, 0)});
    Value *k = i64Constant(b, attrInt(attrs, "k"));
    Value *keep = b.create(readFlag(attrs, "upper") ? OpKind::Ge : OpKind::Le, {diagonal, k});
    Value *zero = b.scalar(x->dtype(), 0);
    return std::vector<Value *>{b.create(OpKind::Where, {keep, x, zero})};
  };
  return def;
}

// one_hot: out[..., j, ...] = values[1] where j == index (a negative index counts from
// depth), else values[0]. An index outside [-depth, depth) equals no j, so its row is all off.
OpDef defineOneHot() {
  OpDef def;
  def.attrs = {intAttr("depth"), intAttr("axis", -1)};
  def.infer = [](const std::vector<TensorType> &in, const AttrMap &attrs) {
    int64_t axis = 0;
    return std::vector<TensorType>{{in[1].dtype, oneHotShape(in[0], in[1], attrs, axis)}};
  };
  def.decompose = [](Builder &b, const std::vector<Value *> &in, const AttrMap &attrs) {
    Value *indices = in[0], *values = in[1];
    int64_t axis = 0;
    Shape outShape = oneHotShape(indices->type(), values->type(), attrs, axis);
    if (indices->dtype() != DType::I64)
      indices = b.create(OpKind::Cast, {indices}, {{"to", DType::I64}});
    // A size-1 dim at `axis` lines each index up against the depth positions.
    Shape column = indices->shape();
    column.insert(column.begin() + axis, 1);
    indices = b.create(OpKind::Reshape, {indices}, {{"shape", column}});
    Value *zero = i64Constant(b, 0), *depth = i64Constant(b, attrInt(attrs, "depth"));
    // Negative indices are < 0, so adding depth (> 0) cannot overflow where it is selected.
    Value *negative = b.create(OpKind::Lt, {indices, zero});
    Value *wrapped = b.create(OpKind::Where, {negative, b.create(OpKind::Add, {indices, depth}), indices});
    Value *hot = b.create(OpKind::Eq, {iotaAlong(b, outShape, axis), wrapped});
    Value *off = b.create(OpKind::Gather, {values, zero});
    Value *on = b.create(OpKind::Gather, {values, i64Constant(b, 1)});
    return std::vector<Value *>{b.create(OpKind::Where, {hot, on, off})};
  };
  return def;
}

// tile (numpy tile): x [d0, d1, ...] -> reshape [1, d0, 1, d1, ...] -> broadcast
// [r0, d0, r1, d1, ...] -> reshape [r0*d0, r1*d1, ...]; row-major order makes each output
// dim run through x's dim r times, which is exactly out[i] = x[i mod d].
OpDef defineTile() {
  OpDef def;
  def.attrs = {intsAttr("repeats")};
  def.infer = [](const std::vector<TensorType> &in, const AttrMap &attrs) {
    return std::vector<TensorType>{{in[0].dtype, tiledShape(in[0], attrInts(attrs, "repeats"))}};
  };
  def.decompose = [](Builder &b, const std::vector<Value *> &in, const AttrMap &attrs) {
    Value *x = in[0];
    const std::vector<int64_t> &repeats = attrInts(attrs, "repeats");
    Shape outShape = tiledShape(x->type(), repeats);
    Shape interleaved, expanded;
    for (size_t d = 0; d < repeats.size(); ++d) {
      interleaved.insert(interleaved.end(), {1, x->shape()[d]});
      expanded.insert(expanded.end(), {repeats[d], x->shape()[d]});
    }
    Value *y = b.create(OpKind::Reshape, {x}, {{"shape", interleaved}});
    y = b.create(OpKind::Broadcast, {y}, {{"shape", expanded}});
    return std::vector<Value *>{b.create(OpKind::Reshape, {y}, {{"shape", outShape}})};
  };
  return def;
}

} // namespace kiln::ir
