#include "distributed/GradientBuckets.h"

namespace kiln::distributed {

std::vector<GradientBucket> planBuckets(const std::vector<int64_t> &bytes, const std::vector<int> &dtypeBytes,
                                        int64_t firstBucketBytes, int64_t bucketBytes) {
  std::vector<GradientBucket> buckets;
  GradientBucket open;
  auto close = [&] {
    if (!open.gradients.empty())
      buckets.push_back(std::move(open));
    open = GradientBucket{};
  };
  for (size_t i = bytes.size(); i-- > 0;) {
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
