// ONNX's element- and tuple-indexed gathers and scatters: gather_elements (GatherElements),
// gather_nd (GatherND), scatter_elements (ScatterElements) and scatter_nd (ScatterND). The
// plain axis gather, scatter_add and iota live in Indexing.cpp.
//
// Index values are data, not types, so inference cannot check them: an index out of range is
// a kiln::Error from evaluation that names the index, where it sits in `indices` and the dim.
// Negative indices count from the end of their axis, as in ONNX.
//
// Scatter reductions ("none", "add", "mul", "max", "min") are applied in update order, which is
// row-major order over `indices`. With "none" and a repeated index the last write wins (ONNX
// leaves that case undefined; kiln pins it down so the evaluator is deterministic). Values are
// combined in double (floats) or exact int64 (integers, wrapping on overflow) and rounded to the
// data dtype once at the end, so repeated f16/bf16 updates do not lose precision at each step.
// "max" and "min" propagate NaN, as numpy's maximum and minimum do.
#include <algorithm>
#include <cmath>
#include <limits>

#include "ir/ops/Common.h"
#include "ir/ops/ScatterReduction.h"

namespace kiln::ir {

using namespace ops;

ScatterReduction ops::parseScatterReduction(const std::string &name) {
  if (name == "none")
    return ScatterReduction::None;
  if (name == "add")
    return ScatterReduction::Add;
  if (name == "mul")
    return ScatterReduction::Mul;
  if (name == "max")
    return ScatterReduction::Max;
  if (name == "min")
    return ScatterReduction::Min;
  fail("reduction must be one of \"none\", \"add\", \"mul\", \"max\", \"min\"; got \"{}\"", name);
}

ScatterReduction ops::scatterReductionOf(const Node &node) {
  if (node.op() == OpKind::ScatterAdd)
    return ScatterReduction::Add;
  return parseScatterReduction(node.attrString("reduction"));
}

namespace {

// ---- scatter reductions ------------------------------------------------------------------------

using Reduction = ScatterReduction;

/// The checks both scatters share on data, updates and the reduction.
void checkScatterOperands(const TensorType &data, const TensorType &updates, const AttrMap &attrs) {
  Reduction reduction = parseScatterReduction(attrString(attrs, "reduction"));
  if (updates.dtype != data.dtype)
    fail("updates have dtype {}, data has {}", dtypeName(updates.dtype), dtypeName(data.dtype));
  if (reduction != Reduction::None && data.dtype == DType::Bool)
    fail("reduction \"{}\" needs numeric data, got bool", attrString(attrs, "reduction"));
}

/// The scatter output while updates are folded in: a copy of data held in double or int64.
class ScatterAccumulator {
public:
  ScatterAccumulator(const Tensor &data, Reduction reduction)
      : reduction_(reduction), useFloat_(isFloat(data.dtype())) {
    int64_t n = data.numElements();
    if (useFloat_)
      floats_.resize(static_cast<size_t>(n));
    else
      ints_.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      if (useFloat_)
        floats_[i] = data.getDouble(i);
      else
        ints_[i] = data.getInt(i);
    }
  }

  /// Folds updates[source] into output element `target`.
  void apply(int64_t target, const Tensor &updates, int64_t source) {
    if (useFloat_)
      floats_[target] = combineFloat(floats_[target], updates.getDouble(source));
    else
      ints_[target] = combineInt(ints_[target], updates.getInt(source));
  }

  Tensor finish(const TensorType &type) const {
    Tensor y(type);
    for (int64_t i = 0; i < y.numElements(); ++i) {
      if (useFloat_)
        y.setDouble(i, floats_[i]);
      else
        y.setInt(i, ints_[i]);
    }
    return y;
  }

private:
  double combineFloat(double old, double update) const {
    constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
    switch (reduction_) {
    case Reduction::None: return update;
    case Reduction::Add: return old + update;
    case Reduction::Mul: return old * update;
    case Reduction::Max: return std::isnan(old) || std::isnan(update) ? kNaN : std::max(old, update);
    case Reduction::Min: return std::isnan(old) || std::isnan(update) ? kNaN : std::min(old, update);
    }
    return update;
  }
  // Sums and products in uint64 wrap like two's-complement hardware instead of being UB.
  int64_t combineInt(int64_t old, int64_t update) const {
    switch (reduction_) {
    case Reduction::None: return update;
    case Reduction::Add:
      return static_cast<int64_t>(static_cast<uint64_t>(old) + static_cast<uint64_t>(update));
    case Reduction::Mul:
      return static_cast<int64_t>(static_cast<uint64_t>(old) * static_cast<uint64_t>(update));
    case Reduction::Max: return std::max(old, update);
    case Reduction::Min: return std::min(old, update);
    }
    return update;
  }

  Reduction reduction_;
  bool useFloat_;
  std::vector<double> floats_;
  std::vector<int64_t> ints_;
};

// ---- shape rules ---------------------------------------------------------------------------------

/// gather_elements and scatter_elements: indices have data's rank, and off the indexed axis
/// they address a sub-box of data (torch's gather/scatter rule), so no read leaves data.
int64_t checkElementwiseIndices(const TensorType &data, const TensorType &indices, const AttrMap &attrs) {
  requireIndexDType(indices, true);
  if (indices.rank() != data.rank())
    fail("indices have rank {}, data has rank {}; they must match", indices.rank(), data.rank());
  int64_t axis = normalizeAxis(attrInt(attrs, "axis"), data.rank(), "axis");
  for (int64_t d = 0; d < data.rank(); ++d)
    if (d != axis && indices.shape[d] > data.shape[d])
      fail("indices {} exceed data {} on axis {} (only axis {} may be larger)", shapeToString(indices.shape),
           shapeToString(data.shape), d, axis);
  return axis;
}

/// The position in `data` that element `flat` (at `index`) of `indices` addresses along `axis`.
int64_t elementSource(std::string_view op, const Tensor &indices, const std::vector<int64_t> &index,
                      int64_t flat, int64_t axis, const Shape &dataShape) {
  int64_t source = 0;
  for (size_t d = 0; d < index.size(); ++d) {
    int64_t coordinate =
        static_cast<int64_t>(d) == axis ? resolveIndex(op, indices, flat, axis, dataShape[d]) : index[d];
    source = source * dataShape[d] + coordinate;
  }
  return source;
}

/// gather_nd and scatter_nd read `indices` as tuples along its last dim; returns the tuple
/// length after checking the rank rules common to both.
int64_t tupleLength(const TensorType &data, const TensorType &indices) {
  requireIndexDType(indices, false);
  if (data.rank() < 1)
    fail("data must have rank >= 1, got a scalar");
  if (indices.rank() < 1)
    fail("indices must have rank >= 1 (index tuples along the last dim), got a scalar");
  return indices.shape.back();
}

/// Row-major position in data of the index tuple number `tuple` (its entries address data
/// axes first..first+length), starting from `base` (the flat position of any batch prefix).
int64_t tupleOffset(std::string_view op, const Tensor &indices, int64_t tuple, int64_t length, int64_t first,
                    const Shape &dataShape, int64_t base) {
  for (int64_t j = 0; j < length; ++j) {
    int64_t axis = first + j;
    base = base * dataShape[axis] + resolveIndex(op, indices, tuple * length + j, axis, dataShape[axis]);
  }
  return base;
}

} // namespace

OpDef defineGatherElements() {
  OpDef def;
  def.attrs = {intAttr("axis", 0)};
  def.infer = [](const std::vector<TensorType> &in, const AttrMap &attrs) {
    checkElementwiseIndices(in[0], in[1], attrs);
    return std::vector<TensorType>{{in[0].dtype, in[1].shape}};
  };
  // out[i...] = data[i... with i[axis] replaced by indices[i...]]
  def.eval = [](const std::vector<Tensor> &in, const AttrMap &attrs, const std::vector<TensorType> &out) {
    const Tensor &data = in[0], &indices = in[1];
    int64_t axis = normalizeAxis(attrInt(attrs, "axis"), data.rank(), "axis");
    Tensor y(out[0]);
    forEachIndex(indices.shape(), [&](const std::vector<int64_t> &index, int64_t flat) {
      copyElements(data, elementSource("gather_elements", indices, index, flat, axis, data.shape()), y, flat,
                   1);
    });
    return std::vector<Tensor>{y};
  };
  return def;
}

OpDef defineGatherNd() {
  OpDef def;
  def.attrs = {intAttr("batch_dims", 0)};
  def.infer = [](const std::vector<TensorType> &in, const AttrMap &attrs) {
    const TensorType &data = in[0], &indices = in[1];
    int64_t length = tupleLength(data, indices);
    int64_t batch = attrInt(attrs, "batch_dims");
    if (batch < 0 || batch >= std::min(data.rank(), indices.rank()))
      fail("batch_dims {} must be in [0, min(data rank {}, indices rank {}))", batch, data.rank(),
           indices.rank());
    for (int64_t d = 0; d < batch; ++d)
      if (indices.shape[d] != data.shape[d])
        fail("batch dim {} differs: indices {} vs data {}", d, shapeToString(indices.shape),
             shapeToString(data.shape));
    if (length < 1 || length > data.rank() - batch)
      fail("index tuples have length {} (indices {} last dim); it must be in [1, {}] (data rank {} - "
           "batch_dims {})",
           length, shapeToString(indices.shape), data.rank() - batch, data.rank(), batch);
    // indices.shape[:-1] + data.shape[batch_dims + length:]
    Shape shape(indices.shape.begin(), indices.shape.end() - 1);
    shape.insert(shape.end(), data.shape.begin() + batch + length, data.shape.end());
    return std::vector<TensorType>{{data.dtype, shape}};
  };
  // Tuple t of indices (in batch b) selects the slice data[b, tuple...]: slices are
  // contiguous in data and in the output, so each is one copy.
  def.eval = [](const std::vector<Tensor> &in, const AttrMap &attrs, const std::vector<TensorType> &out) {
    const Tensor &data = in[0], &indices = in[1];
    const Shape &dataShape = data.shape(), &indexShape = indices.shape();
    int64_t length = indexShape.back();
    auto batch = static_cast<size_t>(attrInt(attrs, "batch_dims"));
    int64_t sliceSize = productOf(dataShape, batch + static_cast<size_t>(length), dataShape.size());
    int64_t tuples = productOf(indexShape, 0, indexShape.size() - 1);
    int64_t tuplesPerBatch = productOf(indexShape, batch, indexShape.size() - 1);
    Tensor y(out[0]);
    for (int64_t t = 0; t < tuples; ++t) {
      int64_t start = tupleOffset("gather_nd", indices, t, length, static_cast<int64_t>(batch), dataShape,
                                  t / tuplesPerBatch);
      if (sliceSize > 0)
        copyElements(data, start * sliceSize, y, t * sliceSize, sliceSize);
    }
    return std::vector<Tensor>{y};
  };
  return def;
}

OpDef defineScatterElements() {
  OpDef def;
  def.attrs = {intAttr("axis", 0), stringAttr("reduction", std::string("none"))};
  def.infer = [](const std::vector<TensorType> &in, const AttrMap &attrs) {
    const TensorType &data = in[0], &indices = in[1], &updates = in[2];
    checkScatterOperands(data, updates, attrs);
    checkElementwiseIndices(data, indices, attrs);
    if (updates.shape != indices.shape)
      fail("updates have shape {}, indices have {}; they must match", shapeToString(updates.shape),
           shapeToString(indices.shape));
    return std::vector<TensorType>{data};
  };
  // out = data; out[i... with i[axis] replaced by indices[i...]] (reduce)= updates[i...]
  def.eval = [](const std::vector<Tensor> &in, const AttrMap &attrs, const std::vector<TensorType> &out) {
    const Tensor &data = in[0], &indices = in[1], &updates = in[2];
    int64_t axis = normalizeAxis(attrInt(attrs, "axis"), data.rank(), "axis");
    ScatterAccumulator result(data, parseScatterReduction(attrString(attrs, "reduction")));
    forEachIndex(indices.shape(), [&](const std::vector<int64_t> &index, int64_t flat) {
      result.apply(elementSource("scatter_elements", indices, index, flat, axis, data.shape()), updates,
                   flat);
    });
    return std::vector<Tensor>{result.finish(out[0])};
  };
  return def;
}

OpDef defineScatterNd() {
  OpDef def;
  def.attrs = {stringAttr("reduction", std::string("none"))};
  def.infer = [](const std::vector<TensorType> &in, const AttrMap &attrs) {
    const TensorType &data = in[0], &indices = in[1], &updates = in[2];
    checkScatterOperands(data, updates, attrs);
    int64_t length = tupleLength(data, indices);
    // A tuple of length 0 addresses the whole of data, so 0 is allowed (ONNX: at most the rank).
    if (length > data.rank())
      fail("index tuples have length {} (indices {} last dim), more than data rank {}", length,
           shapeToString(indices.shape), data.rank());
    // updates: indices.shape[:-1] + data.shape[length:]
    Shape want(indices.shape.begin(), indices.shape.end() - 1);
    want.insert(want.end(), data.shape.begin() + length, data.shape.end());
    if (updates.shape != want)
      fail("updates have shape {}, expected {} (indices {} without its last dim, then data {} from axis {})",
           shapeToString(updates.shape), shapeToString(want), shapeToString(indices.shape),
           shapeToString(data.shape), length);
    return std::vector<TensorType>{data};
  };
  // out = data; out[tuple t, ...] (reduce)= updates[t, ...], tuple by tuple in order.
  def.eval = [](const std::vector<Tensor> &in, const AttrMap &attrs, const std::vector<TensorType> &out) {
    const Tensor &data = in[0], &indices = in[1], &updates = in[2];
    const Shape &dataShape = data.shape(), &indexShape = indices.shape();
    int64_t length = indexShape.back();
    int64_t sliceSize = productOf(dataShape, static_cast<size_t>(length), dataShape.size());
    int64_t tuples = productOf(indexShape, 0, indexShape.size() - 1);
    ScatterAccumulator result(data, parseScatterReduction(attrString(attrs, "reduction")));
    for (int64_t t = 0; t < tuples; ++t) {
      int64_t start = tupleOffset("scatter_nd", indices, t, length, 0, dataShape, 0) * sliceSize;
      for (int64_t e = 0; e < sliceSize; ++e)
        result.apply(start + e, updates, t * sliceSize + e);
    }
    return std::vector<Tensor>{result.finish(out[0])};
  };
  return def;
}

} // namespace kiln::ir
