#pragma once
// distributed::planBuckets: which gradients travel together in one all-reduce. Pure arithmetic,
// no MPI, the same on every rank (so every rank issues the same collectives in the same order).
// Where the gradients are summed in buckets (an elementwise sum of the ranks' values), which
// bucket a gradient travels in changes no result bit for 2 ranks, and nothing across ranks.
#include <cstddef>
#include <cstdint>
#include <vector>

namespace kiln::distributed {

/// One bucket: gradient indices (into the step's trained parameters) and its byte size.
struct GradientBucket {
  std::vector<size_t> gradients;
  int64_t bytes = 0;
  int dtypeBytes = 0; // 4 (f32) or 8 (f64): a bucket holds one element type
};

/// Buckets over gradients of `bytes` each and element size `dtypeBytes` each, taken in reverse
/// order (the last parameters' gradients first, as backward produces them): the first bucket
/// closes once it holds `firstBucketBytes`, the others once they hold `bucketBytes`, and a
/// bucket also closes where the element type changes. A gradient larger than the cap is a
/// bucket of its own. Every gradient is in exactly one bucket.
std::vector<GradientBucket> planBuckets(const std::vector<int64_t> &bytes, const std::vector<int> &dtypeBytes,
                                        int64_t firstBucketBytes, int64_t bucketBytes);
/// The same over the gradients taken in `order` (every index exactly once): the order in which
/// the backward pass finalises them (TrainingStep::gradientReadyOrder), so that the buckets
/// become complete one after another, each as soon as its last gradient is final.
/// kiln::Error when `order` is not a permutation of the gradients.
std::vector<GradientBucket> planBuckets(const std::vector<int64_t> &bytes, const std::vector<int> &dtypeBytes,
                                        const std::vector<size_t> &order, int64_t firstBucketBytes,
                                        int64_t bucketBytes);

} // namespace kiln::distributed
