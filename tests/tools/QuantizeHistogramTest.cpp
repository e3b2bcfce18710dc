// Where kiln-quantize's calibration clips a range, from a histogram of |x|
// (tools/quantize/QuantizeHistogram.h).
#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "tools/quantize/QuantizeHistogram.h"

namespace kiln::tools {
namespace {

TEST(QuantizeHistogram, PercentileClipsAtTheFewestBinsHoldingTheShare) {
  std::vector<double> histogram(100, 1.0);
  EXPECT_EQ(percentileClipBins(histogram, 50), 50);
  EXPECT_EQ(percentileClipBins(histogram, 50.5), 51);
  EXPECT_EQ(percentileClipBins(histogram, 100), 100);
  histogram.assign(2048, 0.0);
  histogram[10] = 1e6;
  histogram[2047] = 1; // one outlier in a million: 99.999 % clips it off, 99.99999 % does not
  EXPECT_EQ(percentileClipBins(histogram, 99.999), 11);
  EXPECT_EQ(percentileClipBins(histogram, 99.99999), 2048);
}

TEST(QuantizeHistogram, EntropyKeepsAFlatDistributionWhole) {
  // Uniform over the first 512 bins: any clip below 512 folds values into the last bin and
  // diverges; 512 (the smallest clip that loses nothing) is chosen.
  std::vector<double> histogram(2048, 0.0);
  for (int bin = 0; bin < 512; ++bin)
    histogram[bin] = 1000;
  EXPECT_EQ(entropyClipBins(histogram, 128), 512);
}

TEST(QuantizeHistogram, EntropyClipsALongTail) {
  // A decaying tail: the divergence trades the folded tail against the resolution the other
  // values lose, so the clip lies strictly inside the histogram.
  std::vector<double> histogram(2048);
  for (int bin = 0; bin < 2048; ++bin)
    histogram[bin] = std::round(1e6 * std::exp(-bin / 60.0));
  int clip = entropyClipBins(histogram, 128);
  EXPECT_GT(clip, 128);
  EXPECT_LT(clip, 2048);
}

TEST(QuantizeHistogram, EntropyLeavesAHistogramNoLongerThanTheLevels) {
  EXPECT_EQ(entropyClipBins(std::vector<double>(128, 1.0), 128), 128);
  EXPECT_EQ(entropyClipBins(std::vector<double>(64, 1.0), 128), 64);
}

} // namespace
} // namespace kiln::tools
