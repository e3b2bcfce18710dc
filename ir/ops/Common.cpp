#include "ir/ops/Common.h"

#include <algorithm>
#include <cstring>

#include "core/ShapeMath.h"

namespace kiln::ir::ops {

Shape broadcastShapes(const Shape &a, const Shape &b) {
  size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1)
      fail("shapes {} and {} cannot be broadcast together{}", shapeToString(a), shapeToString(b),
           isSymbolicDim(da) || isSymbolicDim(db)
               ? fmt::format(" (dim {}: {} vs {}; a symbolic dim broadcasts only against an equal dim or 1)", i,
                             dimToString(da), dimToString(db))
               : "");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

DType commonDType(const std::vector<TensorType> &inputs) {
  for (auto &t : inputs)
    if (t.dtype != inputs.front().dtype)
      fail("operands have different dtypes {} and {}", dtypeName(inputs.front().dtype), dtypeName(t.dtype));
  return inputs.front().dtype;
}

std::vector<int64_t> normalizeAxes(const std::vector<int64_t> &axes, int64_t rank, std::string_view what) {
  std::vector<int64_t> out;
  for (int64_t axis : axes) {
    int64_t a = normalizeAxis(axis, rank, what);
    if (std::find(out.begin(), out.end(), a) != out.end())
      fail("{}: axis {} appears twice", what, axis);
    out.push_back(a);
  }
  return out;
}

std::vector<int64_t> unflattenIndex(int64_t flat, const Shape &shape) {
  std::vector<int64_t> index(shape.size());
  for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
    index[d] = flat % shape[d];
    flat /= shape[d];
  }
  return index;
}

int64_t flattenIndex(const std::vector<int64_t> &index, const Shape &shape) {
  int64_t flat = 0;
  for (size_t d = 0; d < shape.size(); ++d)
    flat = flat * shape[d] + index[d];
  return flat;
}

int64_t broadcastSourceIndex(const std::vector<int64_t> &outIndex, const Shape &inShape) {
  size_t offset = outIndex.size() - inShape.size();
  int64_t flat = 0;
  for (size_t d = 0; d < inShape.size(); ++d)
    flat = flat * inShape[d] + (inShape[d] == 1 ? 0 : outIndex[d + offset]);
  return flat;
}

void forEachIndex(const Shape &shape, const std::function<void(const std::vector<int64_t> &, int64_t)> &fn) {
  int64_t n = numElements(shape);
  if (n == 0)
    return;
  std::vector<int64_t> index(shape.size(), 0);
  for (int64_t flat = 0; flat < n; ++flat) {
    fn(index, flat);
    for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
      if (++index[d] < shape[d])
        break;
      index[d] = 0;
    }
  }
}

int64_t productOf(const Shape &shape, size_t from, size_t to) { return elementCount(shape, from, to, "shape"); }

void copyElements(const Tensor &from, int64_t fromFlat, Tensor &to, int64_t toFlat, int64_t count) {
  if (count == 0) // an empty tensor may have no storage at all
    return;
  size_t size = dtypeSize(from.dtype());
  std::memcpy(static_cast<unsigned char *>(to.data()) + static_cast<size_t>(toFlat) * size,
              static_cast<const unsigned char *>(from.data()) + static_cast<size_t>(fromFlat) * size,
              static_cast<size_t>(count) * size);
}

void requireIndexDType(const TensorType &indices, bool allowI32) {
  if (indices.dtype == DType::I64 || (allowI32 && indices.dtype == DType::I32))
    return;
  fail("indices must be {}, got {}", allowI32 ? "i64 or i32" : "i64", dtypeName(indices.dtype));
}

int64_t resolveIndex(std::string_view op, const Tensor &indices, int64_t flat, int64_t axis, int64_t dim) {
  int64_t index = indices.getInt(flat);
  if (index < -dim || index >= dim)
    fail("{}: index {} (at indices{}) is out of range [{}, {}) for axis {} of size {}", op, index,
         shapeToString(unflattenIndex(flat, indices.shape())), -dim, dim, axis, dim);
  return index < 0 ? index + dim : index;
}

Tensor mapElements(const std::vector<Tensor> &inputs, const TensorType &outType, const ScalarFn &floatFn,
                   const IntFn &intFn) {
  Tensor out(outType);
  bool useFloat = std::any_of(inputs.begin(), inputs.end(), [](auto &t) { return isFloat(t.dtype()); });
  std::vector<double> fargs(inputs.size());
  std::vector<int64_t> iargs(inputs.size());
  forEachIndex(outType.shape, [&](const std::vector<int64_t> &index, int64_t flat) {
    for (size_t k = 0; k < inputs.size(); ++k) {
      int64_t src = broadcastSourceIndex(index, inputs[k].shape());
      if (useFloat)
        fargs[k] = inputs[k].getDouble(src);
      else
        iargs[k] = inputs[k].getInt(src);
    }
    if (useFloat)
      out.setDouble(flat, floatFn(fargs));
    else
      out.setInt(flat, intFn(iargs));
  });
  return out;
}

bool attrFlag(const AttrMap &attrs, const std::string &name) {
  int64_t value = attrInt(attrs, name);
  if (value != 0 && value != 1)
    fail("attribute '{}' must be 0 or 1, got {}", name, value);
  return value == 1;
}

AttrSpec intAttr(std::string name, std::optional<int64_t> d) {
  return {std::move(name), AttrKind::Int, d ? std::optional<Attribute>(*d) : std::nullopt};
}
AttrSpec floatAttr(std::string name, std::optional<double> d) {
  return {std::move(name), AttrKind::Float, d ? std::optional<Attribute>(*d) : std::nullopt};
}
AttrSpec intsAttr(std::string name, std::optional<std::vector<int64_t>> d) {
  return {std::move(name), AttrKind::Ints, d ? std::optional<Attribute>(*d) : std::nullopt};
}
AttrSpec floatsAttr(std::string name, std::optional<std::vector<double>> d) {
  return {std::move(name), AttrKind::Floats, d ? std::optional<Attribute>(*d) : std::nullopt};
}
AttrSpec stringAttr(std::string name, std::optional<std::string> d) {
  return {std::move(name), AttrKind::String, d ? std::optional<Attribute>(*d) : std::nullopt};
}
AttrSpec dtypeAttr(std::string name, std::optional<DType> d) {
  return {std::move(name), AttrKind::DType, d ? std::optional<Attribute>(*d) : std::nullopt};
}
AttrSpec optionalTensorAttr(std::string name) {
  return {std::move(name), AttrKind::Tensor, std::optional<Attribute>(Tensor())};
}

} // namespace kiln::ir::ops
