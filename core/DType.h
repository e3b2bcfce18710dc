#pragma once
// Element types and static shapes: the vocabulary every other part of kiln uses.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kiln {

enum class DType : uint8_t { F32, F64, F16, BF16, I64, I32, I8, U8, Bool };
inline constexpr int kNumDTypes = 9;

/// Bytes one element occupies in memory.
size_t dtypeSize(DType dtype);
/// The mnemonic used in IR text and tools: "f32", "i64", "bool", ...
std::string_view dtypeName(DType dtype);
std::optional<DType> parseDType(std::string_view name);
bool isFloat(DType dtype);   // f32, f64, f16, bf16
bool isInteger(DType dtype); // i64, i32, i8, u8 (not bool)
bool isSigned(DType dtype);

/// Dimensions; a rank-0 shape is a scalar. A dim >= 0 is a constant extent; a dim at or below
/// kSymbolicDimBase is a symbolic one (core/SymbolicDim.h).
using Shape = std::vector<int64_t>;

/// Number of elements; 1 for a scalar, 0 if any dim is 0. kiln::Error for a shape outside
/// kiln's limit (core/ShapeMath.h: elementCount(shape, "shape")): a negative dim, a dim above
/// 2^48, or non-zero dims whose product is above 2^48.
int64_t numElements(const Shape &shape);
std::string shapeToString(const Shape &shape); // "[2,3]"
/// Row-major strides in elements; an overflow is a kiln::Error.
std::vector<int64_t> contiguousStrides(const Shape &shape);
/// The one stride s over the flattened index of `batchShape` that matches `strides` (one per
/// batch dim): strides[d] == s * (the product of the sizes after d) for every dim of size > 1,
/// so one batched GEMM call steps through the batch. 0 when no dim is larger than 1; nullopt
/// when there is no such s.
std::optional<int64_t> uniformBatchStride(const std::vector<int64_t> &strides, const Shape &batchShape);
/// Maps a possibly negative axis into [0, rank); throws kiln::Error naming `what` if out of range.
int64_t normalizeAxis(int64_t axis, int64_t rank, std::string_view what);

struct TensorType {
  DType dtype = DType::F32;
  Shape shape;

  int64_t rank() const { return static_cast<int64_t>(shape.size()); }
  /// True when no dim is symbolic (core/SymbolicDim.h).
  bool isStatic() const;
  /// Checked like kiln::numElements: a type outside kiln's limit is a kiln::Error.
  int64_t numElements() const { return kiln::numElements(shape); }
  size_t byteSize() const;
  std::string toString() const; // "f32[2,3]"
  bool operator==(const TensorType &other) const {
    return dtype == other.dtype && shape == other.shape;
  }
  bool operator!=(const TensorType &other) const { return !(*this == other); }
};

} // namespace kiln
