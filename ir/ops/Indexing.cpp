// Indexing ops: gather (ONNX Gather), scatter_add (torch.scatter_add, i.e. ONNX
// ScatterElements with reduction "add") and iota (each element's index along one axis).
//
// Index values are data, not types, so inference cannot check them: an index out of range
// is a kiln::Error from evaluation that names the index, where it sits and the dim.
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

} // namespace kiln::ir
