// runtime/TensorSums.h: the gradient arithmetic of a Trainer's micro-batches and a
// TrainingStep's batch tiles, per float type, against the same arithmetic written here.
#include <gtest/gtest.h>

#include <cstring>

#include "runtime/TensorSums.h"

namespace {

using kiln::DType;
using kiln::Tensor;

Tensor filled(DType dtype, int64_t count, double start, double step) {
  Tensor t(kiln::TensorType{dtype, {count}});
  for (int64_t i = 0; i < count; ++i)
    t.setDouble(i, start + step * static_cast<double>(i));
  return t;
}

TEST(TensorSums, ScaleAndAddInEachFloatType) {
  for (DType dtype : {DType::F32, DType::F64, DType::BF16, DType::F16}) {
    SCOPED_TRACE(kiln::dtypeName(dtype));
    Tensor y = filled(dtype, 37, 0.5, 0.25), x = filled(dtype, 37, -3.0, 0.125);
    Tensor before = filled(dtype, 37, 0.5, 0.25);
    kiln::runtime::scaleAndAdd(y, 0.3, x);
    for (int64_t i = 0; i < 37; ++i) {
      double want = dtype == DType::F32 ? static_cast<double>(static_cast<float>(before.getDouble(i)) +
                                                              0.3f * static_cast<float>(x.getDouble(i)))
                                        : before.getDouble(i) + 0.3 * x.getDouble(i);
      Tensor rounded(kiln::TensorType{dtype, {1}}); // f16 and bf16 round once, as the tensor stores them
      rounded.setDouble(0, want);
      EXPECT_EQ(y.getDouble(i), rounded.getDouble(0)) << "element " << i;
    }
  }
}

TEST(TensorSums, ScaleInPlaceWritesTheProductAndLeavesOneAlone) {
  for (DType dtype : {DType::F32, DType::F64, DType::BF16}) {
    SCOPED_TRACE(kiln::dtypeName(dtype));
    Tensor x = filled(dtype, 21, -2.0, 0.375);
    Tensor original = filled(dtype, 21, -2.0, 0.375);
    kiln::runtime::scaleInPlace(x, 1.0);
    EXPECT_EQ(std::memcmp(x.data(), original.data(), x.byteSize()), 0);
    kiln::runtime::scaleInPlace(x, 0.125); // a power of two: exact in every type
    for (int64_t i = 0; i < 21; ++i)
      EXPECT_EQ(x.getDouble(i), original.getDouble(i) * 0.125) << "element " << i;
    const float *storage = dtype == DType::F32 ? x.dataAs<float>() : nullptr;
    kiln::runtime::scaleInPlace(x, 3.0); // in place: the same storage
    if (storage)
      EXPECT_EQ(x.dataAs<float>(), storage);
    EXPECT_EQ(x.getDouble(5), original.getDouble(5) * 0.375);
  }
}

} // namespace
