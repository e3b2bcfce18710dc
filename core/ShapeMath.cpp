#include "core/ShapeMath.h"

#include <algorithm>

#include "core/Error.h"
#include "core/SymbolicDim.h"

namespace kiln {

int64_t checkedMul(int64_t a, int64_t b, std::string_view what) {
  int64_t product;
  if (__builtin_mul_overflow(a, b, &product))
    fail("{}: {} * {} overflows int64", what, a, b);
  return product;
}

int64_t checkedAdd(int64_t a, int64_t b, std::string_view what) {
  int64_t sum;
  if (__builtin_add_overflow(a, b, &sum))
    fail("{}: {} + {} overflows int64", what, a, b);
  return sum;
}

int64_t checkedSub(int64_t a, int64_t b, std::string_view what) {
  int64_t difference;
  if (__builtin_sub_overflow(a, b, &difference))
    fail("{}: {} - {} overflows int64", what, a, b);
  return difference;
}

int64_t checkedDim(int64_t dim, std::string_view what) {
  if (dim < 0)
    fail("{}: dimension {} is negative", what, dim);
  if (dim > kMaxElements)
    fail("{}: dimension {} is larger than kiln's limit of 2^48", what, dim);
  return dim;
}

int64_t elementCount(const Shape &shape, size_t from, size_t to, std::string_view what) {
  // The limit applies to the product of the non-zero dims, so a zero cannot hide huge dims
  // beside it: the strides and block sizes of an empty tensor are products of its other dims.
  int64_t nonZeroProduct = 1;
  bool empty = false;
  for (size_t d = from; d < to; ++d) {
    int64_t dim = shape[d];
    if (isInternedSymbolicDim(dim))
      fail("{} {} has the symbolic dimension {}: this needs a static shape (bind the symbols first)",
           what, shapeToString(shape), dimToString(dim));
    if (dim < 0)
      fail("{} {} has a negative dimension {}", what, shapeToString(shape), dim);
    if (dim > kMaxElements)
      fail("{} {} has a dimension {} larger than kiln's limit of 2^48", what, shapeToString(shape), dim);
    if (dim == 0)
      empty = true;
    else if (nonZeroProduct > kMaxElements / dim)
      fail("{} {} has too many elements: more than kiln's limit of 2^48{}", what, shapeToString(shape),
           empty || std::count(shape.begin() + d, shape.begin() + to, 0) ? " (not counting its zero dims)" : "");
    else
      nonZeroProduct *= dim;
  }
  return empty ? 0 : nonZeroProduct;
}

int64_t elementCount(const Shape &shape, std::string_view what) { return elementCount(shape, 0, shape.size(), what); }

void checkShapeWithinLimit(const Shape &shape, std::string_view what) {
  if (isStaticShape(shape)) {
    elementCount(shape, what);
    return;
  }
  Shape constants;
  for (int64_t dim : shape)
    if (!isInternedSymbolicDim(dim))
      constants.push_back(dim);
  try {
    elementCount(constants, what);
  } catch (const Error &) { // name the whole shape, symbols included
    fail("{} {} has a negative dimension or more constant elements than kiln's limit of 2^48", what,
         shapeToString(shape));
  }
}

size_t byteSize(int64_t count, DType dtype, std::string_view what) {
  if (count < 0 || count > kMaxElements)
    fail("{}: {} elements are outside kiln's limit of [0, 2^48]", what, count);
  return static_cast<size_t>(count) * dtypeSize(dtype);
}

int64_t checkedSize(uint64_t value, int64_t limit, std::string_view what) {
  if (value > static_cast<uint64_t>(limit))
    fail("{}: {} is larger than the limit of {}", what, value, limit);
  return static_cast<int64_t>(value);
}

} // namespace kiln
