// planBuckets (distributed/GradientBuckets.h): which gradients share one all-reduce.
#include "distributed/GradientBuckets.h"

#include <gtest/gtest.h>

#include "core/Error.h"

namespace kiln::distributed {
namespace {

std::vector<std::vector<size_t>> members(const std::vector<GradientBucket> &buckets) {
  std::vector<std::vector<size_t>> out;
  for (const GradientBucket &bucket : buckets)
    out.push_back(bucket.gradients);
  return out;
}

TEST(GradientBuckets, ReverseOrderWithASmallFirstBucket) {
  // Gradients 0..4 of 600, 300, 500, 200, 400 bytes; first bucket closes at 500, the rest at 800.
  auto buckets = planBuckets({600, 300, 500, 200, 400}, {4, 4, 4, 4, 4}, 500, 800);
  EXPECT_EQ(members(buckets), (std::vector<std::vector<size_t>>{{4, 3}, {2, 1}, {0}}));
  EXPECT_EQ(buckets[0].bytes, 600);
  EXPECT_EQ(buckets[1].bytes, 800);
  EXPECT_EQ(buckets[2].bytes, 600);
}

TEST(GradientBuckets, AGradientLargerThanTheCapIsABucketOfItsOwn) {
  auto buckets = planBuckets({100, 5000, 100}, {4, 4, 4}, 150, 1000);
  EXPECT_EQ(members(buckets), (std::vector<std::vector<size_t>>{{2, 1}, {0}}));
  buckets = planBuckets({100, 5000, 100}, {4, 4, 4}, 50, 1000);
  EXPECT_EQ(members(buckets), (std::vector<std::vector<size_t>>{{2}, {1}, {0}}));
}

TEST(GradientBuckets, AnElementTypeChangeClosesABucket) {
  auto buckets = planBuckets({8, 8, 16, 16}, {4, 4, 8, 8}, 1000, 1000);
  ASSERT_EQ(members(buckets), (std::vector<std::vector<size_t>>{{3, 2}, {1, 0}}));
  EXPECT_EQ(buckets[0].dtypeBytes, 8);
  EXPECT_EQ(buckets[1].dtypeBytes, 4);
}

TEST(GradientBuckets, BucketsFollowTheOrderTheGradientsBecomeFinal) {
  // Finalised 2, 0, 3, 1 (a backward pass need not finish them in reverse parameter order).
  auto buckets = planBuckets({100, 100, 100, 100}, {4, 4, 4, 4}, {2, 0, 3, 1}, 150, 200);
  EXPECT_EQ(members(buckets), (std::vector<std::vector<size_t>>{{2, 0}, {3, 1}}));
}

TEST(GradientBuckets, AnOrderThatIsNoPermutationIsRefused) {
  EXPECT_THROW(planBuckets({100, 100}, {4, 4}, {0, 0}, 150, 200), Error);
  EXPECT_THROW(planBuckets({100, 100}, {4, 4}, {0}, 150, 200), Error);
  EXPECT_THROW(planBuckets({100, 100}, {4, 4}, {0, 2}, 150, 200), Error);
}

TEST(GradientBuckets, NoGradientsNoBuckets) { EXPECT_TRUE(planBuckets({}, {}, 1, 1).empty()); }

} // namespace
} // namespace kiln::distributed
