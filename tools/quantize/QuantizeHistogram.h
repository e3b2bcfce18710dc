#pragma once
// Where calibration clips a tensor's range, from a histogram of |x| over [0, max|x|] (bin b
// covers [b, b + 1) * max|x| / bins). Both return a number of bins c: the range is clipped at
// c * max|x| / bins.
#include <vector>

namespace kiln::tools {

/// The fewest bins that hold at least `percentile` % of the values (ORT's Percentile method).
int percentileClipBins(const std::vector<double> &histogram, double percentile);

/// The clip whose quantisation to `levels` levels loses the least information: for every
/// candidate c >= levels, the reference distribution is the first c bins with the values
/// beyond folded into bin c - 1, the candidate merges those c bins into `levels` groups and
/// spreads each group's count evenly over its non-empty bins; the c with the smallest
/// KL(reference || candidate) wins (TensorRT's entropy calibration, which ORT's Entropy method
/// follows with 128 levels). A histogram of fewer than `levels` bins is not clipped.
int entropyClipBins(const std::vector<double> &histogram, int levels);

} // namespace kiln::tools
