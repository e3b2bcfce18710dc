// The checked shape arithmetic of core/ShapeMath.h at its edges: 0, 1, the limit 2^48 and one
// past it, INT64_MAX, negatives, a zero beside a huge dim, products that overflow only at their
// last factor, and the byte sizes of every dtype at the limit. Each refusal is a kiln::Error
// naming the context the caller passed and, for shapes, the shape.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>

#include "core/DType.h"
#include "core/ShapeMath.h"
#include "core/Tensor.h"
#include "tests/ErrorMatchers.h"

namespace kiln {
namespace {

using test::errorOf;
using test::expectErrorContaining;

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
constexpr int64_t kLimit = int64_t(1) << 48;

TEST(ShapeMath, TheLimitIsTwoToThe48) { EXPECT_EQ(kMaxElements, kLimit); }

TEST(ShapeMath, CheckedMulAtTheEdgesOfInt64) {
  EXPECT_EQ(checkedMul(0, kMax, "m"), 0);
  EXPECT_EQ(checkedMul(kMax, 0, "m"), 0);
  EXPECT_EQ(checkedMul(1, kMax, "m"), kMax);
  EXPECT_EQ(checkedMul(-1, kMax, "m"), -kMax);
  EXPECT_EQ(checkedMul(kLimit, int64_t(1) << 14, "m"), int64_t(1) << 62);
  EXPECT_EQ(checkedMul(int64_t(1) << 31, int64_t(1) << 31, "m"), int64_t(1) << 62);
  EXPECT_EQ(checkedMul(-(int64_t(1) << 31), int64_t(1) << 32, "m"), kMin);
  expectErrorContaining([] { checkedMul(2, kMax, "concat inner size"); },
                        "concat inner size: 2 * 9223372036854775807 overflows int64");
  expectErrorContaining([] { checkedMul(kLimit, kLimit, "m"); }, "overflows int64");
  expectErrorContaining([] { checkedMul(-1, kMin, "m"); }, "overflows int64");
  expectErrorContaining([] { checkedMul(int64_t(1) << 32, int64_t(1) << 31, "m"); }, "overflows int64");
}

TEST(ShapeMath, CheckedAddAndSubAtTheEdgesOfInt64) {
  EXPECT_EQ(checkedAdd(kMax, 0, "a"), kMax);
  EXPECT_EQ(checkedAdd(kMax, kMin, "a"), -1);
  EXPECT_EQ(checkedAdd(kLimit, kLimit, "a"), int64_t(1) << 49);
  expectErrorContaining([] { checkedAdd(kMax, 1, "pads"); }, "pads: 9223372036854775807 + 1 overflows int64");
  expectErrorContaining([] { checkedAdd(kMin, -1, "a"); }, "overflows int64");
  EXPECT_EQ(checkedSub(0, kMax, "s"), -kMax);
  EXPECT_EQ(checkedSub(-1, kMax, "s"), kMin);
  expectErrorContaining([] { checkedSub(0, kMin, "s"); }, "s: 0 - -9223372036854775808 overflows int64");
  expectErrorContaining([] { checkedSub(-2, kMax, "s"); }, "overflows int64");
}

TEST(ShapeMath, CheckedDimAcceptsZeroToTheLimit) {
  EXPECT_EQ(checkedDim(0, "d"), 0);
  EXPECT_EQ(checkedDim(1, "d"), 1);
  EXPECT_EQ(checkedDim(kLimit, "d"), kLimit);
  expectErrorContaining([] { checkedDim(kLimit + 1, "resize sizes"); },
                        "resize sizes: dimension 281474976710657 is larger than kiln's limit of 2^48");
  expectErrorContaining([] { checkedDim(kMax, "d"); }, "larger than kiln's limit");
  expectErrorContaining([] { checkedDim(-1, "d"); }, "d: dimension -1 is negative");
  expectErrorContaining([] { checkedDim(kMin, "d"); }, "is negative");
}

TEST(ShapeMath, ElementCountOfSmallAndLimitShapes) {
  EXPECT_EQ(elementCount({}, "s"), 1);
  EXPECT_EQ(elementCount({0}, "s"), 0);
  EXPECT_EQ(elementCount({1}, "s"), 1);
  EXPECT_EQ(elementCount({2, 3, 4}, "s"), 24);
  EXPECT_EQ(elementCount({kLimit}, "s"), kLimit);
  EXPECT_EQ(elementCount({int64_t(1) << 24, int64_t(1) << 24}, "s"), kLimit);
  EXPECT_EQ(elementCount({1, kLimit, 1}, "s"), kLimit);
  EXPECT_EQ(elementCount({kLimit, 0}, "s"), 0);
  EXPECT_EQ(elementCount({0, kLimit, 1, 0}, "s"), 0);
}

TEST(ShapeMath, ElementCountRefusesADimAboveTheLimitWhateverTheOtherDims) {
  std::string message = errorOf([] { elementCount({kLimit + 1}, "input 'x'"); });
  EXPECT_NE(
      message.find("input 'x' [281474976710657] has a dimension 281474976710657 larger than kiln's limit of 2^48"),
      std::string::npos)
      << message;
  // A zero elsewhere makes the tensor empty but not its dims valid: the shape.
  message = errorOf([] { elementCount({64, 0, 2, kMax}, "concat operand 0"); });
  EXPECT_NE(message.find("concat operand 0 [64,0,2,9223372036854775807] has a dimension 9223372036854775807"),
            std::string::npos)
      << message;
  expectErrorContaining([] { elementCount({0, kLimit + 1}, "s"); }, "larger than kiln's limit");
  expectErrorContaining([] { elementCount({kMax, 0}, "s"); }, "larger than kiln's limit");
}

TEST(ShapeMath, ElementCountRefusesNonZeroDimsWhoseProductPassesTheLimit) {
  // One past the limit, reached only at the last factor.
  std::string message = errorOf([] { elementCount({int64_t(1) << 24, int64_t(1) << 24, 2}, "reshape target"); });
  EXPECT_NE(message.find("reshape target [16777216,16777216,2] has too many elements: more than kiln's limit of 2^48"),
            std::string::npos)
      << message;
  expectErrorContaining([] { elementCount({kLimit, 2}, "s"); }, "has too many elements");
  expectErrorContaining([] { elementCount({3, kLimit / 2}, "s"); }, "has too many elements");
  // Factors that would overflow int64 itself when multiplied: refused, not wrapped.
  expectErrorContaining([] { elementCount({kLimit, kLimit, kLimit}, "s"); }, "has too many elements");
  // A zero before or after does not excuse them: strides over the other dims would still pass 2^48.
  message = errorOf([] { elementCount({int64_t(1) << 30, int64_t(1) << 30, 0}, "s"); });
  EXPECT_NE(message.find("has too many elements"), std::string::npos) << message;
  EXPECT_NE(message.find("not counting its zero dims"), std::string::npos) << message;
  expectErrorContaining([] { elementCount({0, int64_t(1) << 30, int64_t(1) << 30}, "s"); },
                        "not counting its zero dims");
  expectErrorContaining([] { elementCount({0, kLimit, 3, 0}, "s"); }, "not counting its zero dims");
}

TEST(ShapeMath, ElementCountRefusesNegativeDims) {
  expectErrorContaining([] { elementCount({2, -1}, "param 'w'"); }, "param 'w' [2,-1] has a negative dimension -1");
  expectErrorContaining([] { elementCount({0, kMin}, "s"); }, "has a negative dimension");
  expectErrorContaining([] { elementCount({-1, 0}, "s"); }, "has a negative dimension");
}

TEST(ShapeMath, ElementCountOfABlockOfDims) {
  Shape shape{2, 3, 4, 5};
  EXPECT_EQ(elementCount(shape, 0, 0, "b"), 1);
  EXPECT_EQ(elementCount(shape, 1, 3, "b"), 12);
  EXPECT_EQ(elementCount(shape, 2, 4, "b"), 20);
  // Only the block is checked; the error still shows the whole shape.
  Shape huge{kMax, 2, 3};
  EXPECT_EQ(elementCount(huge, 1, 3, "b"), 6);
  expectErrorContaining([&] { elementCount(huge, 0, 2, "b"); }, "b [9223372036854775807,2,3] has a dimension");
}

TEST(ShapeMath, ByteSizesOfEveryDTypeAtTheLimit) {
  for (int i = 0; i < kNumDTypes; ++i) {
    DType dtype = static_cast<DType>(i);
    SCOPED_TRACE(std::string(dtypeName(dtype)));
    size_t size = dtypeSize(dtype);
    EXPECT_EQ(byteSize(0, dtype, "b"), 0u);
    EXPECT_EQ(byteSize(1, dtype, "b"), size);
    EXPECT_EQ(byteSize(kLimit, dtype, "b"), static_cast<size_t>(kLimit) * size);
    expectErrorContaining([&] { byteSize(kLimit + 1, dtype, "weights"); },
                          "weights: 281474976710657 elements are outside");
    expectErrorContaining([&] { byteSize(kMax, dtype, "b"); }, "outside kiln's limit");
    expectErrorContaining([&] { byteSize(-1, dtype, "b"); }, "outside kiln's limit");
    EXPECT_EQ((TensorType{dtype, {kLimit}}.byteSize()), static_cast<size_t>(kLimit) * size);
    EXPECT_EQ((TensorType{dtype, {0, kLimit}}.byteSize()), 0u);
  }
  // The largest byte size anywhere: 2^48 elements of 8 bytes, far below SIZE_MAX.
  EXPECT_EQ(byteSize(kLimit, DType::F64, "b"), size_t(1) << 51);
}

TEST(ShapeMath, CheckedSizeConvertsFileFieldsUpToALimit) {
  EXPECT_EQ(checkedSize(0, 10, "f"), 0);
  EXPECT_EQ(checkedSize(10, 10, "f"), 10);
  EXPECT_EQ(checkedSize(uint64_t(kMax), kMax, "f"), kMax);
  expectErrorContaining([] { checkedSize(11, 10, "arena bytes"); }, "arena bytes: 11 is larger than the limit of 10");
  expectErrorContaining([] { checkedSize(~uint64_t{0}, kMax, "f"); }, "is larger than the limit");
}

TEST(ShapeMath, TypesAndTensorsUseTheSameLimit) {
  EXPECT_EQ(numElements({1, 0, 1, kLimit}), 0);
  expectErrorContaining([] { numElements({64, 0, 2, kMax}); }, "shape [64,0,2,9223372036854775807] has a dimension");
  expectErrorContaining([] { (void)TensorType{DType::F32, {0, kLimit + 1}}.numElements(); },
                        "larger than kiln's limit");
  expectErrorContaining([] { (void)TensorType{DType::F32, {0, kLimit + 1}}.byteSize(); }, "larger than kiln's limit");
  std::string message = errorOf([] { Tensor t(DType::F32, {64, 0, 2, kMax}); });
  EXPECT_NE(message.find("cannot create a tensor of type f32[64,0,2,9223372036854775807]"), std::string::npos)
      << message;
  EXPECT_EQ(Tensor(DType::F32, {0, kLimit}).byteSize(), 0u);
}

TEST(ShapeMath, RowMajorStridesAreChecked) {
  EXPECT_EQ(contiguousStrides({0, kLimit}), (std::vector<int64_t>{kLimit, 1}));
  expectErrorContaining([] { contiguousStrides({1, kMax, 2}); },
                        "row-major strides: 2 * 9223372036854775807 overflows int64");
}

} // namespace
} // namespace kiln
