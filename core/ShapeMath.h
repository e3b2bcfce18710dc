#pragma once
// Checked arithmetic for shapes: every product or sum of dims, strides, element counts and
// byte sizes in kiln goes through these helpers, because shapes come from user files (ONNX,
// .kir, .npy, safetensors, compiled models) and a wrapped int64 turns into an undersized
// allocation, an out-of-bounds access, or undefined behaviour before any check runs.
//
// kiln's one size limit: no dimension, and no product of a shape's non-zero dims, exceeds
// kMaxElements (2^48), so a zero dim does not excuse huge ones beside it (an empty tensor's
// dims still feed strides, block sizes and the products of sub-ranges of its shape). Within
// that limit every stride, block size and count of a valid shape is at most 2^48, times the
// widest dtype (8 bytes) at most 2^51, and a sum of a few of them fits in int64 with room;
// arithmetic that can leave that range (products of two counts, attributes times dims, pads,
// the index expressions of a loop nest) uses checkedMul/checkedAdd. Every failure is a
// kiln::Error naming `what` (the op, node or file and the shape), so callers pass their
// context or catch and rethrow with it.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/DType.h"

namespace kiln {

/// The largest element count of any tensor, and the largest dimension, kiln accepts.
inline constexpr int64_t kMaxElements = int64_t(1) << 48;

/// a * b, a + b and a - b; a result outside int64 is a kiln::Error "WHAT: A * B overflows int64".
int64_t checkedMul(int64_t a, int64_t b, std::string_view what);
int64_t checkedAdd(int64_t a, int64_t b, std::string_view what);
int64_t checkedSub(int64_t a, int64_t b, std::string_view what);

/// Returns `dim` when it lies in [0, kMaxElements]; otherwise a kiln::Error naming `what`.
int64_t checkedDim(int64_t dim, std::string_view what);

/// The number of elements of `shape` (1 for a scalar, 0 when a dim is 0). A negative dim, a
/// dim above kMaxElements, or non-zero dims whose product is above it, is a kiln::Error
/// "WHAT [d0,d1,...] has ...": [0, 2^60] is refused like [2, 2^60], and [2^30, 2^30, 0] too.
int64_t elementCount(const Shape &shape, std::string_view what);

/// Checks `shape` against kiln's limit like elementCount, except that symbolic dims
/// (core/SymbolicDim.h) are allowed: its constant dims, and their product, must be within it.
void checkShapeWithinLimit(const Shape &shape, std::string_view what);

/// The product of shape[from, to): the element count of a block of dims, checked like
/// elementCount (a block of a valid shape always passes).
int64_t elementCount(const Shape &shape, size_t from, size_t to, std::string_view what);

/// Bytes that `count` elements of `dtype` occupy; a count outside [0, kMaxElements] is a
/// kiln::Error naming `what`. The result is at most 2^51.
size_t byteSize(int64_t count, DType dtype, std::string_view what);

/// A size read from a file (an unsigned field, a byte count) as an int64 in [0, limit];
/// anything larger is a kiln::Error naming `what`.
int64_t checkedSize(uint64_t value, int64_t limit, std::string_view what);

} // namespace kiln
