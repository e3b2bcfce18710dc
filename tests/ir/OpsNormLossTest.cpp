// instance_norm, nll_loss and lrn: inference, and evaluation through their decompositions
// against loops written here from the ONNX definitions (InstanceNormalization,
// NegativeLogLikelihoodLoss, LRN), plus a hand-worked nll_loss example and the error cases.
#include <gtest/gtest.h>

#include <algorithm>
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

// ---- instance_norm ------------------------------------------------------------------------------

Tensor handInstanceNorm(const Tensor &x, const Tensor &scale, const Tensor &bias, double epsilon) {
  int64_t planes = x.shape()[0] * x.shape()[1], channels = x.shape()[1];
  int64_t size = x.numElements() / planes;
  Tensor y(x.type());
  for (int64_t p = 0; p < planes; ++p) {
    double mean = 0, var = 0;
    for (int64_t i = 0; i < size; ++i)
      mean += x.getDouble(p * size + i) / double(size);
    for (int64_t i = 0; i < size; ++i)
      var += std::pow(x.getDouble(p * size + i) - mean, 2) / double(size);
    int64_t c = p % channels;
    for (int64_t i = 0; i < size; ++i)
      y.setDouble(p * size + i,
                  (x.getDouble(p * size + i) - mean) / std::sqrt(var + epsilon) * scale.getDouble(c) +
                      bias.getDouble(c));
  }
  return y;
}

TEST(OpsNormLossInstanceNorm, AgainstLoops) {
  uint64_t seed = 1;
  for (Shape shape : {Shape{2, 3, 4}, Shape{2, 3, 2, 5}, Shape{1, 2, 2, 2, 3}, Shape{3, 1, 1}}) {
    Tensor x = randomTensor({DType::F64, shape}, seed++);
    Tensor scale = randomTensor({DType::F64, {shape[1]}}, seed++);
    Tensor bias = randomTensor({DType::F64, {shape[1]}}, seed++);
    EXPECT_TRUE(
        near(runOp(OpKind::InstanceNorm, {x, scale, bias}), handInstanceNorm(x, scale, bias, 1e-5), 1e-12))
        << shapeToString(shape);
    EXPECT_TRUE(near(runOp(OpKind::InstanceNorm, {x, scale, bias}, {{"epsilon", 0.5}}),
                     handInstanceNorm(x, scale, bias, 0.5), 1e-12));
  }
  // f32; a constant plane normalises to 0, leaving the bias.
  Tensor x = tensorOf(DType::F32, {1, 2, 3}, {4, 4, 4, 1, 2, 3});
  Tensor scale = tensorOf(DType::F32, {2}, {2, 3}), bias = tensorOf(DType::F32, {2}, {0.5, -1});
  double inv = 1 / std::sqrt(2.0 / 3 + 1e-5);
  EXPECT_TRUE(near(runOp(OpKind::InstanceNorm, {x, scale, bias}),
                   tensorOf(DType::F32, {1, 2, 3}, {0.5, 0.5, 0.5, -3 * inv - 1, -1, 3 * inv - 1}), 1e-6));
  // An empty batch stays empty.
  Tensor empty = runOp(OpKind::InstanceNorm, {Tensor(DType::F32, {0, 2, 3}), scale, bias});
  EXPECT_EQ(empty.shape(), (Shape{0, 2, 3}));
}

TEST(OpsNormLossInstanceNorm, Errors) {
  TensorType x{DType::F32, {2, 3, 4}}, c{DType::F32, {3}};
  expectError(
      [&] {
        inferOne(OpKind::InstanceNorm, {{DType::F32, {2, 3}}, c, c});
      },
      "at least one spatial dim");
  expectError([&] { inferOne(OpKind::InstanceNorm, {x, {DType::F32, {4}}, c}); }, "scale must be [3]");
  expectError([&] { inferOne(OpKind::InstanceNorm, {x, c, {DType::F32, {1, 3}}}); }, "bias must be [3]");
  expectError(
      [&] {
        inferOne(OpKind::InstanceNorm, {x, c, c}, {{"epsilon", -1.0}});
      },
      "epsilon must be >= 0");
  expectError([&] { inferOne(OpKind::InstanceNorm, {x, c, {DType::F64, {3}}}); }, "dtype");
  expectError(
      [] {
        inferOne(OpKind::InstanceNorm, {{DType::I32, {1, 1, 2}}, {DType::I32, {1}}, {DType::I32, {1}}});
      },
      "floating-point");
  expectError([&] { inferOne(OpKind::InstanceNorm, {x, c}); }, "expects 3 inputs");
}

// ---- nll_loss -----------------------------------------------------------------------------------

struct NllResult {
  std::vector<double> losses; // per element, 0 where ignored
  double sum = 0, weightSum = 0;
};

// The ONNX definition over input [N, C, rest] flattened to [N, C, D] and target [N, D].
NllResult handNll(const Tensor &input, const Tensor &target, const Tensor *weight, int64_t ignoreIndex) {
  int64_t n = input.shape()[0], classes = input.shape()[1], d = input.numElements() / (n * classes);
  NllResult r;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < d; ++j) {
      int64_t t = target.getInt(i * d + j);
      if (t == ignoreIndex) {
        r.losses.push_back(0);
        continue;
      }
      int64_t cls = t < 0 ? t + classes : t;
      double w = weight ? weight->getDouble(cls) : 1.0;
      double loss = -input.getDouble((i * classes + cls) * d + j) * w;
      r.losses.push_back(loss);
      r.sum += loss;
      r.weightSum += w;
    }
  return r;
}

AttrMap nllAttrs(const char *reduction, int64_t ignoreIndex = INT64_MIN) {
  AttrMap attrs{{"reduction", std::string(reduction)}};
  if (ignoreIndex != INT64_MIN)
    attrs["ignore_index"] = ignoreIndex;
  return attrs;
}

void checkNll(const Tensor &input, const Tensor &target, const Tensor *weight, int64_t ignoreIndex) {
  NllResult want = handNll(input, target, weight, ignoreIndex);
  std::vector<Tensor> args = {input, target};
  if (weight)
    args.push_back(*weight);
  Tensor none = runOp(OpKind::NllLoss, args, nllAttrs("none", ignoreIndex));
  EXPECT_EQ(none.shape(), target.shape());
  EXPECT_TRUE(near(none, tensorOf(input.dtype(), target.shape(), want.losses), 1e-12));
  EXPECT_NEAR(runOp(OpKind::NllLoss, args, nllAttrs("sum", ignoreIndex)).getDouble(0), want.sum, 1e-12);
  Tensor mean = runOp(OpKind::NllLoss, args, nllAttrs("mean", ignoreIndex));
  EXPECT_EQ(mean.shape(), Shape{});
  EXPECT_NEAR(mean.getDouble(0), want.sum / want.weightSum, 1e-12);
}

TEST(OpsNormLossNll, HandWorkedExample) {
  // Losses 3 * 0.5 and 0.5 * 0.2; the weighted mean divides by the weights taken, 0.5 + 0.2.
  Tensor input = tensorOf(DType::F32, {2, 3}, {-1, -2, -3, -0.5, -1.5, -2.5});
  Tensor target = tensorOf(DType::I64, {2}, {2, 0});
  Tensor weight = tensorOf(DType::F32, {3}, {0.2, 0.3, 0.5});
  EXPECT_TRUE(near(runOp(OpKind::NllLoss, {input, target, weight}, nllAttrs("none")),
                   tensorOf(DType::F32, {2}, {1.5, 0.1}), 1e-6));
  EXPECT_NEAR(runOp(OpKind::NllLoss, {input, target, weight}, nllAttrs("sum")).getDouble(0), 1.6, 1e-6);
  EXPECT_NEAR(runOp(OpKind::NllLoss, {input, target, weight}).getDouble(0), 1.6 / 0.7, 1e-6);
  // Unweighted, the mean is over the elements: (3 + 0.5) / 2.
  EXPECT_NEAR(runOp(OpKind::NllLoss, {input, target}).getDouble(0), 1.75, 1e-6);
}

TEST(OpsNormLossNll, WeightsIgnoreIndexAndSpatialDims) {
  Tensor input = randomTensor({DType::F64, {4, 3}}, 10);
  Tensor target = tensorOf(DType::I64, {4}, {0, 2, 1, 2});
  Tensor weight = tensorOf(DType::F64, {3}, {0.5, 2, 1.5});
  checkNll(input, target, nullptr, INT64_MIN);
  checkNll(input, target, &weight, INT64_MIN);
  // ignore_index may be a real class (ONNX allows any value): those elements drop out of the
  // sum and of the mean's divisor.
  checkNll(input, target, nullptr, 2);
  checkNll(input, target, &weight, 2);
  Tensor withIgnored = tensorOf(DType::I64, {4}, {-100, 1, -100, 0});
  checkNll(input, withIgnored, &weight, -100);
  checkNll(input, withIgnored, nullptr, -100);

  // [N, C, d1, d2] with i32 targets [N, d1, d2].
  Tensor image = randomTensor({DType::F64, {2, 4, 3, 2}}, 11);
  Tensor labels = tensorOf(DType::I32, {2, 3, 2}, {0, 3, 1, 2, 2, 0, 3, 3, 1, 0, 2, 1});
  Tensor classWeight = tensorOf(DType::F64, {4}, {1, 0.25, 3, 0.5});
  checkNll(image, labels, nullptr, INT64_MIN);
  checkNll(image, labels, &classWeight, INT64_MIN);
  checkNll(image, labels, &classWeight, 3);
  // Negative targets count from the end.
  checkNll(input, tensorOf(DType::I64, {4}, {-1, -3, 1, -2}), &weight, INT64_MIN);
  // An ignore_index an i32 target cannot hold ignores nothing.
  checkNll(image, labels, &classWeight, int64_t(1) << 40);
}

TEST(OpsNormLossNll, EdgeCases) {
  Tensor input = randomTensor({DType::F32, {3, 2}}, 12);
  // Everything ignored: the mean is 0/0.
  Tensor ignoredAll = tensorOf(DType::I64, {3}, {-1, -1, -1});
  EXPECT_TRUE(std::isnan(runOp(OpKind::NllLoss, {input, ignoredAll}, nllAttrs("mean", -1)).getDouble(0)));
  EXPECT_EQ(runOp(OpKind::NllLoss, {input, ignoredAll}, nllAttrs("sum", -1)).getDouble(0), 0);
  // An ignored element contributes 0 even where its input is -inf (a log-probability of 0).
  Tensor logProbs = tensorOf(DType::F32, {2, 2}, {-INFINITY, -1, -0.5, -INFINITY});
  EXPECT_TRUE(runOp(OpKind::NllLoss, {logProbs, tensorOf(DType::I64, {2}, {7, 0})}, nllAttrs("none", 7))
                  .identical(tensorOf(DType::F32, {2}, {0, 0.5})));
  // An empty batch: sum 0, "none" empty.
  Tensor none =
      runOp(OpKind::NllLoss, {Tensor(DType::F32, {0, 2}), Tensor(DType::I64, {0})}, nllAttrs("none"));
  EXPECT_EQ(none.shape(), Shape{0});
  EXPECT_EQ(runOp(OpKind::NllLoss, {Tensor(DType::F32, {0, 2}), Tensor(DType::I64, {0})}, nllAttrs("sum"))
                .getDouble(0),
            0);
  // A target outside [-C, C) is caught when the graph runs.
  expectError([&] { runOp(OpKind::NllLoss, {input, tensorOf(DType::I64, {3}, {0, 2, 1})}); }, "out of range");
  expectError(
      [&] {
        runOp(OpKind::NllLoss, {input, tensorOf(DType::I64, {3}, {0, -3, 1})});
      },
      "out of range");
}

TEST(OpsNormLossNll, Errors) {
  TensorType input{DType::F32, {4, 3}}, target{DType::I64, {4}};
  auto infer = [](std::vector<TensorType> types, AttrMap attrs = {}) {
    return [=] { inferOne(OpKind::NllLoss, types, attrs); };
  };
  expectError(infer({{DType::F32, {4}}, target}), "input must be [N, C]");
  expectError(infer({{DType::F32, {4, 0}}, target}), "has no classes");
  expectError(infer({{DType::I32, {4, 3}}, target}), "input must be floating-point");
  expectError(infer({input, {DType::F32, {4}}}), "target must be i64 or i32");
  expectError(infer({input, {DType::I64, {3}}}), "target must be [4]");
  expectError(infer({{DType::F32, {2, 3, 5}}, {DType::I64, {2, 3}}}), "target must be [2,5]");
  expectError(infer({input, target, {DType::F32, {4}}}), "weight must be [3]");
  expectError(infer({input, target, {DType::F64, {3}}}), "weight has dtype f64");
  expectError(infer({input, target}, {{"reduction", std::string("avg")}}), "'reduction' must be");
  expectError(infer({input}), "expects 2 to 3 inputs");
}

// ---- lrn ----------------------------------------------------------------------------------------

Tensor handLrn(const Tensor &x, int64_t size, double alpha, double beta, double bias) {
  int64_t n = x.shape()[0], channels = x.shape()[1],
          rest = x.numElements() / std::max<int64_t>(1, n * channels);
  Tensor y(x.type());
  for (int64_t i = 0; i < n; ++i)
    for (int64_t c = 0; c < channels; ++c)
      for (int64_t r = 0; r < rest; ++r) {
        double squares = 0;
        int64_t lo = std::max<int64_t>(0, c - (size - 1) / 2), hi = std::min(channels - 1, c + size / 2);
        for (int64_t k = lo; k <= hi; ++k)
          squares += std::pow(x.getDouble((i * channels + k) * rest + r), 2);
        int64_t at = (i * channels + c) * rest + r;
        y.setDouble(at, x.getDouble(at) / std::pow(bias + alpha / double(size) * squares, beta));
      }
  return y;
}

TEST(OpsNormLossLrn, AgainstLoops) {
  uint64_t seed = 20;
  for (Shape shape : {Shape{2, 5, 3, 2}, Shape{1, 4, 3}, Shape{3, 4}, Shape{1, 3, 2, 1, 2}})
    for (int64_t size : {1, 2, 3, 5, 8}) {
      Tensor x = randomTensor({DType::F64, shape}, seed++);
      EXPECT_TRUE(near(runOp(OpKind::Lrn, {x}, {{"size", size}}), handLrn(x, size, 1e-4, 0.75, 1.0), 1e-12))
          << shapeToString(shape) << " size " << size;
    }
  // Large alpha makes the window sum matter; ONNX's window for size 4 is c-1 .. c+2.
  Tensor x = randomTensor({DType::F64, {2, 6, 2}}, 40);
  AttrMap attrs{{"size", int64_t(4)}, {"alpha", 2.5}, {"beta", 0.5}, {"bias", 2.0}};
  EXPECT_TRUE(near(runOp(OpKind::Lrn, {x}, attrs), handLrn(x, 4, 2.5, 0.5, 2.0), 1e-12));
  // f32, and one hand value: a lone channel of 2 with size 1 gives 2 / (1 + 4 * 1)^0.5.
  EXPECT_NEAR(runOp(OpKind::Lrn, {tensorOf(DType::F32, {1, 1}, {2})},
                    {{"size", int64_t(1)}, {"alpha", 1.0}, {"beta", 0.5}})
                  .getDouble(0),
              2 / std::sqrt(5.0), 1e-6);
  // Empty tensors pass through.
  EXPECT_EQ(runOp(OpKind::Lrn, {Tensor(DType::F32, {2, 0, 3})}, {{"size", int64_t(3)}}).shape(),
            (Shape{2, 0, 3}));
  EXPECT_EQ(runOp(OpKind::Lrn, {Tensor(DType::F32, {2, 3, 0})}, {{"size", int64_t(3)}}).shape(),
            (Shape{2, 3, 0}));
}

TEST(OpsNormLossLrn, Errors) {
  TensorType x{DType::F32, {1, 3, 4}};
  expectError([&] { inferOne(OpKind::Lrn, {x}); }, "missing required attribute 'size'");
  expectError([&] { inferOne(OpKind::Lrn, {x}, {{"size", int64_t(0)}}); }, "'size' must be >= 1");
  expectError(
      [] {
        inferOne(OpKind::Lrn, {{DType::F32, {3}}}, {{"size", int64_t(1)}});
      },
      "input must be [N, C, ...]");
  expectError(
      [] {
        inferOne(OpKind::Lrn, {{DType::I64, {1, 3}}}, {{"size", int64_t(1)}});
      },
      "floating-point");
}

TEST(OpsNormLoss, PrintsAndParsesBack) {
  expectRoundTrip(OpKind::InstanceNorm, {{DType::F32, {2, 3, 4, 4}}, {DType::F32, {3}}, {DType::F32, {3}}},
                  {{"epsilon", 1e-3}});
  expectRoundTrip(OpKind::NllLoss, {{DType::F32, {4, 3, 2}}, {DType::I64, {4, 2}}, {DType::F32, {3}}},
                  {{"reduction", std::string("sum")}, {"ignore_index", int64_t(-100)}});
  expectRoundTrip(OpKind::NllLoss, {{DType::F32, {4, 3}}, {DType::I32, {4}}}, {});
  expectRoundTrip(OpKind::Lrn, {{DType::F32, {1, 5, 3, 3}}},
                  {{"size", int64_t(3)}, {"alpha", 2e-4}, {"beta", 0.5}, {"bias", 2.0}});
}

} // namespace
