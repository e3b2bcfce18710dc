#include "distributed/GradientBuckets.h"

#include "core/Error.h"

namespace kiln::distributed {

std::vector<GradientBucket> planBuckets(const std::vector<int64_t> &bytes, const std::vector<int> &dtypeBytes,
                                        int64_t firstBucketBytes, int64_t bucketBytes) {
  std::vector<size_t> reversed;
  for (size_t i = bytes.size(); i-- > 0;)
    reversed.push_back(i);
  return planBuckets(bytes, dtypeBytes, reversed, firstBucketBytes, bucketBytes);
}

std::vector<GradientBucket> planBuckets(const std::vector<int64_t> &bytes, const std::vector<int> &dtypeBytes,
                                        const std::vector<size_t> &order, int64_t firstBucketBytes,
                                        int64_t bucketBytes) {
  std::vector<bool> seen(bytes.size(), false);
  for (size_t i : order) {
    if (i >= bytes.size() || seen[i])
      fail("gradient buckets: the order names gradient {} {}", i, i >= bytes.size() ? "of none" : "twice");
    seen[i] = true;
  }
  if (order.size() != bytes.size())
    fail("gradient buckets: the order names {} of the {} gradients", order.size(), bytes.size());
  std::vector<GradientBucket> buckets;
  GradientBucket open;
  auto close = [&] {
    if (!open.gradients.empty())
      buckets.push_back(std::move(open));
    open = GradientBucket{};
  };
  for (size_t i : order) {
    if (!open.gradients.empty() && open.dtypeBytes != dtypeBytes[i])
      close();
    open.gradients.push_back(i);
    open.bytes += bytes[i];
    open.dtypeBytes = dtypeBytes[i];
    if (open.bytes >= (buckets.empty() ? firstBucketBytes : bucketBytes))
      close();
  }
  close();
  return buckets;
}

} // namespace kiln::distributed
