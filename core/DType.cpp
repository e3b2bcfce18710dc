#include "core/DType.h"

#include "core/Error.h"
#include "core/ShapeMath.h"
#include "core/SymbolicDim.h"

namespace kiln {

size_t dtypeSize(DType dtype) {
  switch (dtype) {
  case DType::F64:
  case DType::I64:
    return 8;
  case DType::F32:
  case DType::I32:
    return 4;
  case DType::F16:
  case DType::BF16:
    return 2;
  case DType::I8:
  case DType::U8:
  case DType::Bool:
    return 1;
  }
  return 0;
}

std::string_view dtypeName(DType dtype) {
  switch (dtype) {
  case DType::F32: return "f32";
  case DType::F64: return "f64";
  case DType::F16: return "f16";
  case DType::BF16: return "bf16";
  case DType::I64: return "i64";
  case DType::I32: return "i32";
  case DType::I8: return "i8";
  case DType::U8: return "u8";
  case DType::Bool: return "bool";
  }
  return "?";
}

std::optional<DType> parseDType(std::string_view name) {
  for (int i = 0; i < kNumDTypes; ++i) {
    auto dtype = static_cast<DType>(i);
    if (dtypeName(dtype) == name)
      return dtype;
  }
  return std::nullopt;
}

bool isFloat(DType dtype) {
  return dtype == DType::F32 || dtype == DType::F64 || dtype == DType::F16 || dtype == DType::BF16;
}

bool isInteger(DType dtype) {
  return dtype == DType::I64 || dtype == DType::I32 || dtype == DType::I8 || dtype == DType::U8;
}

bool isSigned(DType dtype) { return isFloat(dtype) || (isInteger(dtype) && dtype != DType::U8); }

int64_t numElements(const Shape &shape) {
  // Shapes come from user files (ONNX, .kir, .npy), so the count is checked: a wrapped count
  // would turn into an undersized allocation and out-of-bounds reads.
  return elementCount(shape, "shape");
}

std::string shapeToString(const Shape &shape) {
  if (isStaticShape(shape))
    return fmt::format("[{}]", fmt::join(shape, ","));
  std::vector<std::string> dims;
  for (int64_t dim : shape)
    dims.push_back(dimToString(dim));
  return fmt::format("[{}]", fmt::join(dims, ","));
}

std::vector<int64_t> contiguousStrides(const Shape &shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (int i = static_cast<int>(shape.size()) - 2; i >= 0; --i)
    strides[i] = checkedMul(strides[i + 1], shape[i + 1], "row-major strides");
  return strides;
}

std::optional<int64_t> uniformBatchStride(const std::vector<int64_t> &strides, const Shape &batchShape) {
  std::optional<int64_t> stride;
  int64_t after = 1; // elements of the flattened batch per step of dim d
  for (size_t d = batchShape.size(); d-- > 0;) {
    if (batchShape[d] > 1) {
      if (strides[d] % after != 0)
        return std::nullopt;
      const int64_t s = strides[d] / after;
      if (stride && *stride != s)
        return std::nullopt;
      stride = s;
    }
    after = checkedMul(after, batchShape[d], "batch stride");
  }
  return stride.value_or(0);
}

int64_t normalizeAxis(int64_t axis, int64_t rank, std::string_view what) {
  int64_t normalized = axis < 0 ? axis + rank : axis;
  if (normalized < 0 || normalized >= rank)
    fail("{}: axis {} is out of range for rank {}", what, axis, rank);
  return normalized;
}

bool TensorType::isStatic() const { return isStaticShape(shape); }

size_t TensorType::byteSize() const { return kiln::byteSize(numElements(), dtype, "tensor byte size"); }

std::string TensorType::toString() const {
  return fmt::format("{}{}", dtypeName(dtype), shapeToString(shape));
}

} // namespace kiln
