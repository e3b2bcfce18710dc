// Learning-rate schedules: their spellings, the rate of each update, and refused spellings.
#include <gtest/gtest.h>

#include "tests/ErrorMatchers.h"

#include <cmath>

#include "runtime/LearningRateSchedule.h"

namespace kiln::runtime {

using kiln::test::expectErrorContaining;

TEST(LearningRateSchedule, ConstantStepAndCosine) {
  LearningRateSchedule constant = LearningRateSchedule::parse("constant");
  EXPECT_EQ(constant.at(0.1, 0, 10), 0.1);
  EXPECT_EQ(constant.at(0.1, 9, 10), 0.1);

  LearningRateSchedule step = LearningRateSchedule::parse("step:4:0.5");
  EXPECT_EQ(step.toString(), "step:4:0.5");
  EXPECT_EQ(step.at(1.0, 3, 100), 1.0);
  EXPECT_EQ(step.at(1.0, 4, 100), 0.5);
  EXPECT_EQ(step.at(1.0, 11, 100), 0.25);

  // cosine:2 over 10 updates: 0.5, 1 (warm-up), then (1 + cos(pi * k / 8)) / 2 for k = 0..7.
  LearningRateSchedule cosine = LearningRateSchedule::parse("cosine:2");
  EXPECT_EQ(cosine.toString(), "cosine:2");
  EXPECT_DOUBLE_EQ(cosine.at(1.0, 0, 10), 0.5);
  EXPECT_DOUBLE_EQ(cosine.at(1.0, 1, 10), 1.0);
  EXPECT_DOUBLE_EQ(cosine.at(1.0, 2, 10), 1.0);
  EXPECT_DOUBLE_EQ(cosine.at(1.0, 6, 10), 0.5);
  EXPECT_NEAR(cosine.at(1.0, 9, 10), (1 + std::cos(M_PI * 7 / 8)) / 2, 1e-15);
  EXPECT_EQ(LearningRateSchedule::parse("cosine").at(2.0, 0, 4), 2.0);
}

TEST(LearningRateSchedule, RefusesWhatItCannotRead) {
  expectErrorContaining([] { LearningRateSchedule::parse("linear"); },
                        "learning-rate schedule 'linear': expected constant, step:K:G or cosine[:W]");
  expectErrorContaining([] { LearningRateSchedule::parse("step:0:0.5"); }, "the step size K must be an integer >= 1");
  expectErrorContaining([] { LearningRateSchedule::parse("step:3"); }, "expected constant, step:K:G");
  expectErrorContaining([] { LearningRateSchedule::parse("step:3:-1"); }, "the factor G must be a finite number >= 0");
  expectErrorContaining([] { LearningRateSchedule::parse("cosine:x"); }, "the warm-up W must be an integer >= 0");
  expectErrorContaining([] { LearningRateSchedule::parse("cosine:4").at(1.0, 0, 4); },
                        "the warm-up of 4 updates leaves none of the run's 4 to decay over");
}

} // namespace kiln::runtime
