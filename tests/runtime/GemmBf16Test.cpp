// bf16 rounding (runtime/kernels/GemmBf16.h): the scalar rule against values worked out by
// hand, and the vector conversions against the scalar rule.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "runtime/kernels/GemmBf16.h"

namespace {

using kiln::runtime::kernels::detail::Bf16;
using kiln::runtime::kernels::detail::fromBf16;
using kiln::runtime::kernels::detail::toBf16;

float fromBits(uint32_t bits) {
  float x = 0.0f;
  std::memcpy(&x, &bits, sizeof x);
  return x;
}

TEST(GemmBf16, RoundsToNearestTiesToEven) {
  EXPECT_EQ(toBf16(1.0f), 0x3F80);
  EXPECT_EQ(toBf16(-2.0f), 0xC000);
  // bf16 keeps 7 fraction bits: 1 + 2^-8 lies halfway between 1 (even) and 1 + 2^-7.
  EXPECT_EQ(toBf16(1.0f + 0x1p-8f), 0x3F80);
  // 1 + 3 * 2^-8 lies halfway between 1 + 2^-7 (odd) and 1 + 2^-6 (even).
  EXPECT_EQ(toBf16(1.0f + 3 * 0x1p-8f), 0x3F82);
  // Just above halfway rounds up.
  EXPECT_EQ(toBf16(fromBits(0x3F808001u)), 0x3F81);
  EXPECT_EQ(toBf16(std::numeric_limits<float>::infinity()), 0x7F80);
  EXPECT_EQ(toBf16(std::numeric_limits<float>::max()), 0x7F80); // rounds past the largest bf16
  EXPECT_TRUE(std::isnan(fromBf16(toBf16(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_TRUE(std::isnan(fromBf16(toBf16(fromBits(0x7F800001u))))); // a NaN whose payload would round to inf
  EXPECT_EQ(toBf16(fromBits(0x00400000u)), 0x0000); // denormals become zero, keeping the sign
  EXPECT_EQ(toBf16(fromBits(0x80400000u)), 0x8000);
  EXPECT_EQ(fromBf16(0x4049), 3.140625f);
}

TEST(GemmBf16, VectorConversionsMatchTheScalarRule) {
  std::mt19937 rng(3);
  std::uniform_int_distribution<uint32_t> bits(0, 0xFFFFFFFFu);
  // Random bit patterns: every exponent, ties and NaNs included (denormals vanish either way).
  std::vector<float> values(21 * 48);
  for (float &x : values)
    x = fromBits(bits(rng));
  for (int64_t count : {1, 15, 16, 17, 37}) {
    std::vector<Bf16> row(48, 0xFFFF);
    kiln::runtime::kernels::detail::roundRowToBf16(values.data(), count, row.data(), 48);
    for (int64_t x = 0; x < 48; ++x) {
      const Bf16 expected = x < count ? toBf16(values[x]) : Bf16{0};
      const bool bothNan = std::isnan(fromBf16(row[x])) && std::isnan(fromBf16(expected));
      EXPECT_TRUE(row[x] == expected || bothNan) << "count " << count << " x " << x;
    }
  }
  // Pair panels of 21 rows (odd: the last pair's second row is zeros), 32 wide, rows 48 apart,
  // of all 32 columns or of the first 1, 16, 17 or 30 (zero past them; the last row is read no
  // further than its columns: it ends the values here).
  const int64_t kc = 21, width = 32, ld = 48;
  for (int64_t cols : {32, 1, 16, 17, 30}) {
    std::vector<Bf16> pairs((kc + 1) * width, 0xFFFF);
    const float *src = values.data() + values.size() - (kc - 1) * ld - cols;
    kiln::runtime::kernels::detail::roundPanelToBf16Pairs(src, ld, kc, cols, width, pairs.data());
    for (int64_t k = 0; k < kc + 1; ++k)
      for (int64_t x = 0; x < width; ++x) {
        const Bf16 got = pairs[(k / 2 * width + x) * 2 + k % 2];
        const Bf16 expected = k < kc && x < cols ? toBf16(src[k * ld + x]) : Bf16{0};
        const bool bothNan = std::isnan(fromBf16(got)) && std::isnan(fromBf16(expected));
        EXPECT_TRUE(got == expected || bothNan) << "cols " << cols << " k " << k << " x " << x;
      }
  }
}

} // namespace
