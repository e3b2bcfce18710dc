// kiln::Tensor's storage: zero-filled, 64-byte aligned at every size (huge-page sized ones
// too), shared by copies and deep-copied by clone(), and a byte count that would not fit is a
// kiln::Error rather than a wrapped, undersized allocation. A borrowed tensor reads and writes
// the caller's bytes in place and never claims to own them.
#include <gtest/gtest.h>

#include <cstdint>

#include "core/Error.h"
#include "core/Tensor.h"
#include "tests/ErrorMatchers.h"

namespace kiln {
namespace {

TEST(TensorStorage, ZeroFilledAndAlignedAtEverySize) {
  for (int64_t elements : {int64_t{0}, int64_t{1}, int64_t{3}, int64_t{17}, int64_t{1000},
                           int64_t{(2 << 20) / 4 + 5}, int64_t{3 << 20}}) {
    Tensor t(DType::F32, {elements});
    ASSERT_NE(t.data(), nullptr) << elements;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data()) % 64, 0u) << elements;
    const float *values = t.dataAs<float>();
    for (int64_t i = 0; i < elements; i += 4099)
      EXPECT_EQ(values[i], 0.0f) << elements << " at " << i;
    if (elements > 0)
      EXPECT_EQ(values[elements - 1], 0.0f) << elements;
  }
}

TEST(TensorStorage, CopiesShareAndCloneIsDeep) {
  Tensor a(DType::I32, {5000});
  for (int64_t i = 0; i < a.numElements(); ++i)
    a.setInt(i, i * 7 - 3);
  Tensor shared = a;
  Tensor deep = a.clone();
  EXPECT_TRUE(deep.identical(a));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(deep.data()) % 64, 0u);
  a.setInt(4999, -1);
  EXPECT_EQ(shared.getInt(4999), -1);
  EXPECT_EQ(deep.getInt(4999), 4999 * 7 - 3);
}

TEST(TensorStorage, ByteCountsThatWouldWrapAreErrors) {
  // 2^61 f64 elements need 2^64 bytes: refused by kiln's element limit (2^48, core/ShapeMath.h)
  // before any byte count is computed.
  std::string message = test::errorOf([] { Tensor t(DType::F64, {int64_t{1} << 31, int64_t{1} << 30}); });
  EXPECT_NE(message.find("has too many elements"), std::string::npos) << message;
  EXPECT_NE(message.find("f64[2147483648,1073741824]"), std::string::npos) << message;
}

TEST(TensorStorage, BorrowedBytesAreReadAndWrittenInPlace) {
  float bytes[7] = {1, 2, 3, 4, 5, 6, 7};
  // An address 4 bytes past a 64-byte boundary at best: borrowing needs only element alignment.
  Tensor t = Tensor::borrow({DType::F32, {2, 3}}, bytes + 1);
  EXPECT_EQ(t.data(), bytes + 1);
  EXPECT_TRUE(t.defined());
  EXPECT_FALSE(t.ownsStorageAlone());
  EXPECT_EQ(t.getDouble(5), 7.0);
  Tensor copy = t;
  copy.setDouble(0, -2.5);
  EXPECT_EQ(bytes[1], -2.5f);
  EXPECT_FALSE(copy.ownsStorageAlone());
  // clone() is a deep, owned, aligned copy.
  Tensor deep = t.clone();
  EXPECT_NE(deep.data(), t.data());
  EXPECT_TRUE(deep.ownsStorageAlone());
  EXPECT_TRUE(deep.identical(t));
}

TEST(TensorStorage, BorrowingNothingNeedsNoBytes) {
  Tensor empty = Tensor::borrow({DType::F32, {0, 4}}, nullptr);
  EXPECT_TRUE(empty.defined());
  EXPECT_EQ(empty.byteSize(), 0u);
  std::string message = test::errorOf([] { Tensor::borrow({DType::I64, {3}}, nullptr); });
  EXPECT_NE(message.find("null address"), std::string::npos) << message;
  EXPECT_NE(message.find("i64[3]"), std::string::npos) << message;
}

} // namespace
} // namespace kiln
