// Loss composites (mse_loss, cross_entropy): inference, and evaluation through their
// decompositions against hand loops (squared differences, a hand log-sum-exp).
#include <gtest/gtest.h>

#include <cmath>

#include "core/Error.h"
#include "ir/Builder.h"
#include "ir/Evaluator.h"
#include "ir/Verifier.h"
#include "tests/ir/OpTestUtil.h"

using namespace kiln;
using namespace kiln::ir;
using namespace kiln::test;

namespace {

AttrMap reduction(const char *name) { return {{"reduction", std::string(name)}}; }

TEST(OpsLossMse, MeanSumAndNone) {
  Tensor pred = randomTensor({DType::F64, {3, 4}}, 1), target = randomTensor({DType::F64, {3, 4}}, 2);
  Tensor squares(DType::F64, {3, 4});
  double sum = 0;
  for (int64_t i = 0; i < 12; ++i) {
    double d = pred.getDouble(i) - target.getDouble(i);
    squares.setDouble(i, d * d);
    sum += d * d;
  }
  Tensor mean = runOp(OpKind::MseLoss, {pred, target});
  EXPECT_EQ(mean.shape(), Shape{});
  EXPECT_NEAR(mean.getDouble(0), sum / 12, 1e-14);
  EXPECT_NEAR(runOp(OpKind::MseLoss, {pred, target}, reduction("sum")).getDouble(0), sum, 1e-13);
  Tensor none = runOp(OpKind::MseLoss, {pred, target}, reduction("none"));
  EXPECT_TRUE(compareTensors(none, squares, 1e-14, 1e-14).ok);

  // f32 and a scalar pair.
  Tensor p = Tensor::scalar(DType::F32, 3), t = Tensor::scalar(DType::F32, 1);
  EXPECT_EQ(runOp(OpKind::MseLoss, {p, t}).getDouble(0), 4);
}

TEST(OpsLossMse, Errors) {
  TensorType a{DType::F32, {2, 3}};
  expectError([&] { inferOne(OpKind::MseLoss, {a, {DType::F32, {3, 2}}}); }, "same shape");
  expectError([&] { inferOne(OpKind::MseLoss, {a, a}, reduction("average")); }, "'reduction'");
  expectError([&] { inferOne(OpKind::MseLoss, {a, {DType::F64, {2, 3}}}); }, "dtype");
  expectError([] { inferOne(OpKind::MseLoss, {{DType::I32, {2}}, {DType::I32, {2}}}); }, "floating");
}

// loss[n] = log(sum_c exp(x[n,c])) - x[n, label[n]], with the log-sum-exp shifted by the row max.
std::vector<double> handCrossEntropy(const Tensor &logits, const std::vector<int64_t> &labels) {
  int64_t classes = logits.shape()[1];
  std::vector<double> losses;
  for (size_t n = 0; n < labels.size(); ++n) {
    double max = -INFINITY, sum = 0;
    for (int64_t c = 0; c < classes; ++c)
      max = std::max(max, logits.getDouble(int64_t(n) * classes + c));
    for (int64_t c = 0; c < classes; ++c)
      sum += std::exp(logits.getDouble(int64_t(n) * classes + c) - max);
    losses.push_back(max + std::log(sum) - logits.getDouble(int64_t(n) * classes + labels[n]));
  }
  return losses;
}

TEST(OpsLossCrossEntropy, MatchesHandLogSumExp) {
  Tensor logits = randomTensor({DType::F64, {4, 5}}, 3);
  for (int64_t i = 0; i < logits.numElements(); ++i)
    logits.setDouble(i, logits.getDouble(i) * 4);
  std::vector<int64_t> labelValues = {2, 0, 4, 2};
  std::vector<double> want = handCrossEntropy(logits, labelValues);
  double sum = want[0] + want[1] + want[2] + want[3];
  for (DType labelType : {DType::I64, DType::I32}) {
    Tensor labels = Tensor::fromDoubles(labelType, {4}, {2, 0, 4, 2});
    Tensor none = runOp(OpKind::CrossEntropy, {logits, labels}, reduction("none"));
    ASSERT_EQ(none.shape(), Shape{4});
    for (int64_t n = 0; n < 4; ++n)
      EXPECT_NEAR(none.getDouble(n), want[n], 1e-13);
    Tensor mean = runOp(OpKind::CrossEntropy, {logits, labels});
    EXPECT_EQ(mean.shape(), Shape{});
    EXPECT_NEAR(mean.getDouble(0), sum / 4, 1e-13);
    EXPECT_NEAR(runOp(OpKind::CrossEntropy, {logits, labels}, reduction("sum")).getDouble(0), sum, 1e-13);
  }
}

TEST(OpsLossCrossEntropy, StableForExtremeLogits) {
  // Huge logits would overflow a naive exp; a -inf logit in another class must not produce NaN.
  Tensor logits = Tensor::fromDoubles(DType::F32, {2, 3}, {1000, 1002, -INFINITY, -5, 0, 5});
  Tensor labels = Tensor::fromDoubles(DType::I64, {2}, {1, 0});
  Tensor got = runOp(OpKind::CrossEntropy, {logits, labels}, reduction("none"));
  std::vector<double> want = handCrossEntropy(logits, {1, 0});
  EXPECT_TRUE(std::isfinite(got.getDouble(0)));
  EXPECT_NEAR(got.getDouble(0), want[0], 1e-5);
  EXPECT_NEAR(got.getDouble(1), want[1], 1e-5);
  // A single class: log_softmax is 0, so the loss is 0.
  Tensor one =
      runOp(OpKind::CrossEntropy, {Tensor::fromDoubles(DType::F32, {2, 1}, {3, -7}), Tensor(DType::I32, {2})},
            reduction("sum"));
  EXPECT_EQ(one.getDouble(0), 0);
}

TEST(OpsLossCrossEntropy, Errors) {
  TensorType logits{DType::F32, {4, 5}}, labels{DType::I64, {4}};
  expectError([&] { inferOne(OpKind::CrossEntropy, {logits, {DType::F32, {4}}}); }, "i64 or i32");
  expectError([&] { inferOne(OpKind::CrossEntropy, {logits, {DType::I64, {3}}}); }, "labels must be [4]");
  expectError([&] { inferOne(OpKind::CrossEntropy, {{DType::F32, {4, 5, 2}}, labels}); }, "[N, C]");
  expectError([&] { inferOne(OpKind::CrossEntropy, {{DType::I64, {4, 5}}, labels}); }, "floating");
  expectError([&] { inferOne(OpKind::CrossEntropy, {{DType::F32, {4, 0}}, labels}); }, "no classes");
  expectError([&] { inferOne(OpKind::CrossEntropy, {logits, labels}, reduction("max")); }, "'reduction'");
  EXPECT_EQ(inferOne(OpKind::CrossEntropy, {logits, labels}, reduction("none")).shape, Shape{4});
}

} // namespace
