// random_uniform on the reference evaluator: the values are the documented counter-based
// stream (splitmix64 written out again here, from its published constants), shapes and dtypes,
// the offset input, statistics, and the errors.
#include <cmath>
#include <set>

#include "tests/ir/OpTestUtil.h"

namespace kiln::test {
namespace {

using ir::OpKind;

// The stream as ir/ops/Random.cpp documents it, written independently of it.
uint64_t splitmixOutput(uint64_t state) {
  uint64_t z = state;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

constexpr uint64_t kStep = 0x9E3779B97F4A7C15ull;

double expectedUnit(int64_t seed, int64_t offset, int64_t index, bool single) {
  uint64_t key = splitmixOutput(splitmixOutput(uint64_t(seed) + kStep) + (uint64_t(offset) + 1) * kStep);
  uint64_t bits = splitmixOutput(key + (uint64_t(index) + 1) * kStep);
  return single ? double(bits >> 40) / 16777216.0 : double(bits >> 11) / 9007199254740992.0;
}

ir::AttrMap randomAttrs(Shape shape, int64_t seed, DType dtype = DType::F32) {
  return {{"shape", std::move(shape)}, {"seed", seed}, {"dtype", dtype}};
}

TEST(RandomUniformOp, ValuesAreTheDocumentedStream) {
  for (int64_t seed : {int64_t(0), int64_t(7), int64_t(-3), kI64Max}) {
    Tensor y = runOp(OpKind::RandomUniform, {Tensor::scalar(DType::I64, 5)}, randomAttrs({2, 3, 4}, seed));
    ASSERT_EQ(y.type(), (TensorType{DType::F32, {2, 3, 4}}));
    for (int64_t i = 0; i < y.numElements(); ++i)
      EXPECT_EQ(y.getDouble(i), expectedUnit(seed, 5, i, true)) << "seed " << seed << " element " << i;
  }
  Tensor wide = runOp(OpKind::RandomUniform, {Tensor::scalar(DType::I64, 2)}, randomAttrs({5}, 11, DType::F64));
  ASSERT_EQ(wide.dtype(), DType::F64);
  for (int64_t i = 0; i < 5; ++i)
    EXPECT_EQ(wide.getDouble(i), expectedUnit(11, 2, i, false));
}

TEST(RandomUniformOp, OffsetInputKinds) {
  Tensor none = runOp(OpKind::RandomUniform, {}, randomAttrs({6}, 3));
  Tensor zero = runOp(OpKind::RandomUniform, {Tensor::scalar(DType::I64, 0)}, randomAttrs({6}, 3));
  EXPECT_TRUE(none.identical(zero)); // no offset input means offset 0
  // An f32 offset counts as the integer it holds (truncated; NaN as 0).
  Tensor asInt = runOp(OpKind::RandomUniform, {Tensor::scalar(DType::I64, 4)}, randomAttrs({6}, 3));
  EXPECT_TRUE(runOp(OpKind::RandomUniform, {Tensor::scalar(DType::F32, 4)}, randomAttrs({6}, 3)).identical(asInt));
  EXPECT_TRUE(runOp(OpKind::RandomUniform, {Tensor::scalar(DType::F32, 4.75)}, randomAttrs({6}, 3)).identical(asInt));
  EXPECT_TRUE(runOp(OpKind::RandomUniform, {Tensor::scalar(DType::F32, kNaN)}, randomAttrs({6}, 3)).identical(zero));
  EXPECT_FALSE(asInt.identical(zero));
}

TEST(RandomUniformOp, ScalarAndEmptyShapes) {
  Tensor scalar = runOp(OpKind::RandomUniform, {}, randomAttrs({}, 9));
  ASSERT_EQ(scalar.rank(), 0);
  EXPECT_EQ(scalar.getDouble(0), expectedUnit(9, 0, 0, true));
  EXPECT_EQ(runOp(OpKind::RandomUniform, {}, randomAttrs({3, 0, 2}, 9)).shape(), (Shape{3, 0, 2}));
  // Size-1 dims do not change the linear index: [1,4,1] holds the same numbers as [4].
  EXPECT_TRUE(values(runOp(OpKind::RandomUniform, {}, randomAttrs({1, 4, 1}, 9))) ==
              values(runOp(OpKind::RandomUniform, {}, randomAttrs({4}, 9))));
}

TEST(RandomUniformOp, StatisticsAndIndependentStreams) {
  const int64_t n = 100000;
  Tensor a = runOp(OpKind::RandomUniform, {Tensor::scalar(DType::I64, 1)}, randomAttrs({n}, 42));
  double sum = 0, sumSq = 0;
  for (int64_t i = 0; i < n; ++i) {
    double u = a.getDouble(i);
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
    sumSq += u * u;
  }
  // U[0,1): mean 1/2 (standard error 1/sqrt(12 n) < 1e-3), variance 1/12.
  EXPECT_NEAR(sum / n, 0.5, 4e-3);
  EXPECT_NEAR(sumSq / n - (sum / n) * (sum / n), 1.0 / 12, 2e-3);
  // Another offset or another seed: a different stream, not a shifted copy.
  Tensor nextStep = runOp(OpKind::RandomUniform, {Tensor::scalar(DType::I64, 2)}, randomAttrs({n}, 42));
  Tensor otherSeed = runOp(OpKind::RandomUniform, {Tensor::scalar(DType::I64, 1)}, randomAttrs({n}, 43));
  int64_t equalStep = 0, equalSeed = 0;
  for (int64_t i = 0; i < n; ++i) {
    equalStep += a.getDouble(i) == nextStep.getDouble(i);
    equalSeed += a.getDouble(i) == otherSeed.getDouble(i);
  }
  EXPECT_LT(equalStep, 10); // 2^-24 chance per element
  EXPECT_LT(equalSeed, 10);
  EXPECT_NE(a.getDouble(1), nextStep.getDouble(0));
}

TEST(RandomUniformOp, Errors) {
  expectError([] { inferOne(OpKind::RandomUniform, {}, randomAttrs({2}, 0, DType::I64)); }, "f32 or f64");
  expectError([] { inferOne(OpKind::RandomUniform, {}, randomAttrs({2, -1}, 0)); }, "negative dimension");
  expectError([] { inferOne(OpKind::RandomUniform, {TensorType{DType::I64, {2}}}, randomAttrs({2}, 0)); },
              "offset must be an i64 or f32 scalar");
  expectError([] { inferOne(OpKind::RandomUniform, {TensorType{DType::I32, {}}}, randomAttrs({2}, 0)); },
              "offset must be an i64 or f32 scalar");
  expectError([] { inferOne(OpKind::RandomUniform, {}, {{"seed", int64_t(1)}}); }, "shape");
}

TEST(RandomUniformOp, RoundTripsThroughText) {
  expectRoundTrip(OpKind::RandomUniform, {TensorType{DType::I64, {}}}, randomAttrs({2, 3}, -5, DType::F64));
  expectRoundTrip(OpKind::RandomUniform, {}, randomAttrs({4}, 1));
}

} // namespace
} // namespace kiln::test
