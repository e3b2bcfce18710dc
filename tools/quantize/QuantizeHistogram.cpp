// Clipping a calibrated range from a histogram of |x| (see QuantizeHistogram.h).
#include "tools/quantize/QuantizeHistogram.h"

#include <cmath>
#include <limits>
#include <numeric>

namespace kiln::tools {

int percentileClipBins(const std::vector<double> &histogram, double percentile) {
  int bins = static_cast<int>(histogram.size());
  double total = std::accumulate(histogram.begin(), histogram.end(), 0.0);
  double wanted = total * percentile / 100.0, seen = 0;
  for (int bin = 0; bin < bins; ++bin) {
    seen += histogram[bin];
    if (seen >= wanted)
      return bin + 1;
  }
  return bins;
}

namespace {

/// KL(reference || candidate) for a clip at `clip` bins (see entropyClipBins).
double clipDivergence(const std::vector<double> &histogram, int clip, int levels) {
  std::vector<double> reference(histogram.begin(), histogram.begin() + clip);
  for (size_t bin = clip; bin < histogram.size(); ++bin)
    reference[clip - 1] += histogram[bin];
  std::vector<double> candidate(clip, 0.0);
  for (int level = 0; level < levels; ++level) {
    int start = static_cast<int>(int64_t(level) * clip / levels);
    int end = static_cast<int>(int64_t(level + 1) * clip / levels);
    double count = 0;
    int nonEmpty = 0;
    for (int bin = start; bin < end; ++bin) {
      count += histogram[bin];
      nonEmpty += histogram[bin] != 0;
    }
    for (int bin = start; bin < end; ++bin)
      if (histogram[bin] != 0)
        candidate[bin] = count / nonEmpty;
  }
  double referenceTotal = std::accumulate(reference.begin(), reference.end(), 0.0);
  double candidateTotal = std::accumulate(candidate.begin(), candidate.end(), 0.0);
  if (referenceTotal == 0 || candidateTotal == 0)
    return std::numeric_limits<double>::infinity();
  // A bin the candidate leaves empty but the reference fills (the outlier bin) gets a small
  // mass instead of making the divergence infinite, as TensorRT's smoothing does.
  constexpr double kFloor = 1e-10;
  double divergence = 0;
  for (int bin = 0; bin < clip; ++bin) {
    if (reference[bin] == 0)
      continue;
    double p = reference[bin] / referenceTotal;
    double q = std::max(candidate[bin] / candidateTotal, kFloor);
    divergence += p * std::log(p / q);
  }
  return divergence;
}

} // namespace

int entropyClipBins(const std::vector<double> &histogram, int levels) {
  int bins = static_cast<int>(histogram.size());
  if (bins <= levels)
    return bins;
  int best = bins;
  double bestDivergence = std::numeric_limits<double>::infinity();
  for (int clip = levels; clip <= bins; ++clip) {
    double divergence = clipDivergence(histogram, clip, levels);
    if (divergence < bestDivergence) {
      bestDivergence = divergence;
      best = clip;
    }
  }
  return best;
}

} // namespace kiln::tools
