// Indexing ops: gather (ONNX Gather), scatter_add (torch.scatter_add, i.e. ONNX
// ScatterElements with reduction "add") and iota (each element's index along one axis)
// primitives; trilu (ONNX Trilu) and one_hot (ONNX OneHot), composites that compare iota
// positions and select with where, so fusion and codegen see only ops they already know.
//
// Index values are data, not types, so inference cannot check them: an index out of range
// is a kiln::Error from evaluation that names the index, where it sits and the dim.
#include "ir/Builder.h"
#include "ir/ops/Common.h"

namespace kiln::ir {

using namespace ops;

OpDef defineGather() {
  OpDef def;
  def.attrs = {intAttr("axis", 0)};
  def.infer = [](const std::vector<TensorType> &in, const AttrMap &attrs) {
    const TensorType &data = in[0], &indices = in[1];
    requireIndexDType(indices);
    auto axis = static_cast<size_t>(normalizeAxis(attrInt(attrs, "axis"), data.rank(), "axis"));
    // data.shape[:axis] + indices.shape + data.shape[axis+1:]
    Shape shape(data.shape.begin(), data.shape.begin() + axis);
    shape.insert(shape.end(), indices.shape.begin(), indices.shape.end());
    shape.insert(shape.end(), data.shape.begin() + axis + 1, data.shape.end());
    return std::vector<TensorType>{{data.dtype, shape}};
  };
  def.eval = [](const std::vector<Tensor> &in, const AttrMap &attrs, const std::vector<TensorType> &out) {
    const Tensor &data = in[0], &indices = in[1];
    auto axis = static_cast<size_t>(normalizeAxis(attrInt(attrs, "axis"), data.rank(), "axis"));
    int64_t dim = data.shape()[axis];
    // Every index is checked, even when the output is empty, so validity never depends on
    // the sizes of the other dims.
    std::vector<int64_t> rows;
    for (int64_t j = 0; j < indices.numElements(); ++j)
      rows.push_back(resolveIndex("gather", indices, j, static_cast<int64_t>(axis), dim));

    // View data as [outer, dim, inner] and the output as [outer, count, inner]: output
    // block (o, j) is data block (o, rows[j]).
    int64_t outer = productOf(data.shape(), 0, axis);
    int64_t inner = productOf(data.shape(), axis + 1, data.shape().size());
    auto count = static_cast<int64_t>(rows.size());
    Tensor y(out[0]);
    if (inner != 0) // else there is nothing to copy, however many blocks
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t j = 0; j < count; ++j)
          copyElements(data, (o * dim + rows[j]) * inner, y, (o * count + j) * inner, inner);
    return std::vector<Tensor>{y};
  };
  return def;
}

OpDef defineScatterAdd() {
  OpDef def;
  def.attrs = {intAttr("axis", 0)};
  def.infer = [](const std::vector<TensorType> &in, const AttrMap &attrs) {
    const TensorType &data = in[0], &indices = in[1], &updates = in[2];
    if (data.dtype == DType::Bool)
      fail("data must be numeric, got bool");
    requireIndexDType(indices);
    if (updates.dtype != data.dtype)
      fail("updates have dtype {}, data has {}", dtypeName(updates.dtype), dtypeName(data.dtype));
    if (indices.rank() != data.rank())
      fail("indices have rank {}, data has rank {}; they must match", indices.rank(), data.rank());
    if (updates.shape != indices.shape)
      fail("updates have shape {}, indices have {}; they must match", shapeToString(updates.shape),
           shapeToString(indices.shape));
    int64_t axis = normalizeAxis(attrInt(attrs, "axis"), data.rank(), "axis");
    // torch's rule: off the scatter axis, indices address a sub-box of data.
    for (int64_t d = 0; d < data.rank(); ++d)
      if (d != axis && indices.shape[d] > data.shape[d])
        fail("indices {} exceed data {} on axis {} (only axis {} may be larger)",
             shapeToString(indices.shape), shapeToString(data.shape), d, axis);
    return std::vector<TensorType>{data};
  };
  def.eval = [](const std::vector<Tensor> &in, const AttrMap &attrs, const std::vector<TensorType> &out) {
    const Tensor &data = in[0], &indices = in[1], &updates = in[2];
    int64_t axis = normalizeAxis(attrInt(attrs, "axis"), data.rank(), "axis");
    int64_t dim = data.shape()[axis];
    std::vector<int64_t> strides = contiguousStrides(data.shape());
    // Sums accumulate in double (floats) or int64 (integers) and round once at the end, so
    // repeated indices in f16 or bf16 do not lose precision at every step.
    bool useFloat = isFloat(data.dtype());
    int64_t n = data.numElements();
    std::vector<double> floatSums(useFloat ? n : 0);
    std::vector<int64_t> intSums(useFloat ? 0 : n);
    for (int64_t i = 0; i < n; ++i) {
      if (useFloat)
        floatSums[i] = data.getDouble(i);
      else
        intSums[i] = data.getInt(i);
    }
    forEachIndex(indices.shape(), [&](const std::vector<int64_t> &index, int64_t flat) {
      int64_t target = 0;
      for (size_t d = 0; d < index.size(); ++d) {
        int64_t coordinate = static_cast<int64_t>(d) == axis
                                 ? resolveIndex("scatter_add", indices, flat, axis, dim)
                                 : index[d];
        target += coordinate * strides[d];
      }
      if (useFloat) {
        floatSums[target] += updates.getDouble(flat);
      } else { // wraps on overflow like two's-complement hardware, instead of undefined behaviour
        intSums[target] = static_cast<int64_t>(static_cast<uint64_t>(intSums[target]) +
                                               static_cast<uint64_t>(updates.getInt(flat)));
      }
    });
    Tensor y(out[0]);
    for (int64_t i = 0; i < n; ++i) {
      if (useFloat)
        y.setDouble(i, floatSums[i]);
      else
        y.setInt(i, intSums[i]);
    }
    return std::vector<Tensor>{y};
  };
  return def;
}

OpDef defineIota() {
  OpDef def;
  def.attrs = {intsAttr("shape"), intAttr("axis", 0), dtypeAttr("dtype", DType::I64)};
  def.infer = [](const std::vector<TensorType> &, const AttrMap &attrs) {
    TensorType type{attrDType(attrs, "dtype"), attrInts(attrs, "shape")};
    if (type.dtype == DType::Bool)
      fail("iota cannot produce bool (indices are not truth values)");
    elementCount(type.shape, "shape");
    normalizeAxis(attrInt(attrs, "axis"), type.rank(), "axis");
    return std::vector<TensorType>{type};
  };
  def.eval = [](const std::vector<Tensor> &, const AttrMap &attrs, const std::vector<TensorType> &out) {
    Tensor y(out[0]);
    auto axis = static_cast<size_t>(normalizeAxis(attrInt(attrs, "axis"), y.rank(), "axis"));
    int64_t dim = y.shape()[axis];
    int64_t inner = productOf(y.shape(), axis + 1, y.shape().size());
    // Element `flat` sits at position (flat / inner) % dim along the axis. (No element
    // exists when inner is 0, so the division is never reached then.)
    for (int64_t flat = 0; flat < y.numElements(); ++flat)
      y.setInt(flat, (flat / inner) % dim);
    return std::vector<Tensor>{y};
  };
  return def;
}

namespace {

Value *i64Constant(Builder &b, int64_t value) {
  Tensor t(DType::I64, {});
  t.setInt(0, value); // exact, where Builder::scalar would go through double
  return b.constant(t);
}

Value *iotaAlong(Builder &b, Shape shape, int64_t axis) {
  return b.create(OpKind::Iota, {}, {{"shape", std::move(shape)}, {"axis", axis}, {"dtype", DType::I64}});
}

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

} // namespace

// trilu keeps x[..., r, c] where c - r >= k (upper) or c - r <= k (lower) and zeros the rest:
// the mask is built once on the [rows, cols] matrix and broadcast over the batch dims.
OpDef defineTrilu() {
  OpDef def;
  def.attrs = {intAttr("upper", 1), intAttr("k", 0)};
  def.infer = [](const std::vector<TensorType> &in, const AttrMap &attrs) {
    checkTrilu(in[0]);
    attrFlag(attrs, "upper");
    return std::vector<TensorType>{in[0]};
  };
  def.decompose = [](Builder &b, const std::vector<Value *> &in, const AttrMap &attrs) {
    Value *x = in[0];
    Shape matrix(x->shape().end() - 2, x->shape().end());
    // c - r lies in (-rows, cols), so the subtraction cannot overflow whatever k is.
    Value *diagonal = b.create(OpKind::Sub, {iotaAlong(b, matrix, 1), iotaAlong(b, matrix, 0)});
    Value *k = i64Constant(b, attrInt(attrs, "k"));
    Value *keep = b.create(attrFlag(attrs, "upper") ? OpKind::Ge : OpKind::Le, {diagonal, k});
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

} // namespace kiln::ir
