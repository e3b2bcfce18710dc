// The 16-lane requantisation (QuantizeLanes, runtime/kernels/QuantizedOutput.h, through
// finishTile) against the scalar steps (quantizeValue, generated code's) byte for byte: random
// values over every scale and zero point, values a few ulps either side of every tie,
// saturating ones, NaN and infinities.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "runtime/kernels/QuantizedOutput.h"

namespace {

using kiln::runtime::kernels::detail::quantizeValue;

/// How many of `values` finishTile (on AVX-512 machines its 16-lane QuantizeLanes, compiled for
/// this CPU as the kernels are) stores differently from quantizeValue.
int64_t mismatches(const std::vector<float> &values, const kiln_quantized_output &out) {
  std::vector<uint8_t> got(values.size(), 0xA5);
  kiln::runtime::kernels::detail::FinishedTile to;
  to.q = got.data(), to.ld = static_cast<int64_t>(values.size()), to.quantized = &out;
  kiln::runtime::kernels::detail::finishTile(values.data(), to.ld, {}, to, 1, to.ld);
  int64_t bad = 0;
  for (size_t i = 0; i < values.size(); ++i) {
    const uint8_t want = quantizeValue(values[i], out);
    if (got[i] != want && bad++ < 5)
      ADD_FAILURE() << "v " << values[i] << " scale " << out.scale << " zero " << out.zero << ": " << int{got[i]}
                    << ", expected " << int{want};
  }
  return bad;
}

TEST(QuantizeLanes, RoundsAsTheDivisionDoesAtEveryTie) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> logScale(-14.0f, 4.0f), unit(-1.0f, 1.0f);
  const float kInf = std::numeric_limits<float>::infinity();
  for (int trial = 0; trial < 400; ++trial) {
    const bool isSigned = trial % 2 == 1;
    kiln_quantized_output out{nullptr, isSigned, std::exp2(logScale(rng)),
                              static_cast<float>(isSigned ? int(rng() % 256) - 128 : int(rng() % 256)), 0};
    if (trial % 7 == 0) // a power of two, whose reciprocal is exact
      out.scale = std::exp2(std::round(logScale(rng)));
    std::vector<float> values;
    for (int i = 0; i < 256; ++i) // across and beyond the range that does not saturate
      values.push_back(unit(rng) * 600.0f * out.scale);
    for (int k = -300; k <= 300; ++k) { // the ties (k + 0.5) * scale, and their neighbours
      float tie = (static_cast<float>(k) + 0.5f) * out.scale;
      for (int step = 0; step < 3; ++step) {
        values.push_back(tie);
        tie = std::nextafter(tie, kInf);
      }
      tie = (static_cast<float>(k) + 0.5f) * out.scale;
      for (int step = 0; step < 3; ++step)
        values.push_back(tie = std::nextafter(tie, -kInf));
    }
    for (float special : {0.0f, -0.0f, kInf, -kInf, std::nanf(""), 3e38f, -3e38f, 1e-40f})
      values.push_back(special);
    ASSERT_EQ(mismatches(values, out), 0) << "scale " << out.scale;
  }
  // Scales whose reciprocal overflows or is not finite.
  for (float scale : {1e-40f, 3e-39f, kInf}) {
    std::vector<float> values;
    for (int i = 0; i < 64; ++i)
      values.push_back(unit(rng) * 1e-36f);
    EXPECT_EQ(mismatches(values, {nullptr, 0, scale, 10.0f, 0}), 0) << "scale " << scale;
  }
}

} // namespace
