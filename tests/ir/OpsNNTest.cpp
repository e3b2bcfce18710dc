// Neural-network composites (linear, batch_norm, layer_norm, softmax, log_softmax, gelu, silu):
// inference, and evaluation through their decompositions against closed forms and hand loops.
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

Tensor scaled(Tensor t, double factor) {
  for (int64_t i = 0; i < t.numElements(); ++i)
    t.setDouble(i, t.getDouble(i) * factor);
  return t;
}

TEST(OpsNNLinear, MatchesHandLoopWithAndWithoutBias) {
  Tensor x = randomTensor({DType::F64, {2, 3, 5}}, 1), w = randomTensor({DType::F64, {4, 5}}, 2);
  Tensor bias = randomTensor({DType::F64, {4}}, 3);
  Tensor want(DType::F64, {2, 3, 4}), wantBiased(DType::F64, {2, 3, 4});
  for (int64_t r = 0; r < 6; ++r)
    for (int64_t o = 0; o < 4; ++o) {
      double sum = 0;
      for (int64_t k = 0; k < 5; ++k)
        sum += x.getDouble(r * 5 + k) * w.getDouble(o * 5 + k);
      want.setDouble(r * 4 + o, sum);
      wantBiased.setDouble(r * 4 + o, sum + bias.getDouble(o));
    }
  EXPECT_TRUE(near(runOp(OpKind::Linear, {x, w}), want, 1e-12));
  EXPECT_TRUE(near(runOp(OpKind::Linear, {x, w, bias}), wantBiased, 1e-12));

  // A single feature vector, and integers.
  Tensor v = Tensor::fromDoubles(DType::I64, {2}, {1, 2});
  Tensor wi = Tensor::fromDoubles(DType::I64, {3, 2}, {1, 0, 0, 1, 2, 3});
  Tensor bi = Tensor::fromDoubles(DType::I64, {3}, {10, 20, 30});
  EXPECT_TRUE(
      runOp(OpKind::Linear, {v, wi, bi}).identical(Tensor::fromDoubles(DType::I64, {3}, {11, 22, 38})));
}

TEST(OpsNNLinear, Errors) {
  expectError([] { inferOne(OpKind::Linear, {{DType::F32, {2, 5}}, {DType::F32, {4, 3}}}); }, "5 features");
  expectError(
      [] {
        inferOne(OpKind::Linear, {{DType::F32, {2, 3}}, {DType::F32, {4, 3}}, {DType::F32, {3}}});
      },
      "bias must be [4]");
  expectError([] { inferOne(OpKind::Linear, {{DType::F32, {2, 3}}, {DType::F32, {3}}}); }, "[out_features");
  expectError([] { inferOne(OpKind::Linear, {{DType::F32, {}}, {DType::F32, {4, 3}}}); }, "scalar");
  expectError([] { inferOne(OpKind::Linear, {{DType::F32, {2, 3}}, {DType::F64, {4, 3}}}); }, "dtype");
}

TEST(OpsNNBatchNorm, MatchesPerChannelFormula) {
  for (Shape shape : {Shape{2, 3, 2, 5}, Shape{4, 3}, Shape{1, 3, 2, 2, 2}}) {
    Tensor x = randomTensor({DType::F64, shape}, 4);
    Tensor scale = randomTensor({DType::F64, {3}}, 5), bias = randomTensor({DType::F64, {3}}, 6);
    Tensor mean = randomTensor({DType::F64, {3}}, 7),
           var = mapped(randomTensor({DType::F64, {3}}, 8), [](double v) { return std::fabs(v); });
    double eps = 1e-3;
    Tensor want(x.type());
    int64_t inner = x.numElements() / (shape[0] * 3);
    for (int64_t i = 0; i < x.numElements(); ++i) {
      int64_t c = (i / inner) % 3;
      want.setDouble(i, (x.getDouble(i) - mean.getDouble(c)) / std::sqrt(var.getDouble(c) + eps) *
                                scale.getDouble(c) +
                            bias.getDouble(c));
    }
    EXPECT_TRUE(near(runOp(OpKind::BatchNorm, {x, scale, bias, mean, var}, {{"epsilon", eps}}), want, 1e-12))
        << shapeToString(shape);
  }
  // The default epsilon is 1e-5: with var 0, mean 0, scale 1, bias 0 the result is x / sqrt(1e-5).
  Tensor x = Tensor::fromDoubles(DType::F32, {1, 1, 2}, {1, -2});
  Tensor one = Tensor::fromDoubles(DType::F32, {1}, {1}), zero(DType::F32, {1});
  Tensor got = runOp(OpKind::BatchNorm, {x, one, zero, zero, zero});
  EXPECT_NEAR(got.getDouble(0), 1 / std::sqrt(1e-5), 1e-2);
  EXPECT_NEAR(got.getDouble(1), -2 / std::sqrt(1e-5), 1e-2);
}

TEST(OpsNNBatchNorm, Errors) {
  TensorType c3{DType::F32, {3}}, c4{DType::F32, {4}};
  expectError(
      [&] {
        inferOne(OpKind::BatchNorm, {{DType::F32, {2, 3, 4}}, c3, c3, c4, c3});
      },
      "mean must be [3]");
  expectError([&] { inferOne(OpKind::BatchNorm, {{DType::F32, {3}}, c3, c3, c3, c3}); }, "[N, C, ...]");
  TensorType i3{DType::I32, {3}};
  expectError([&] { inferOne(OpKind::BatchNorm, {{DType::I32, {2, 3}}, i3, i3, i3, i3}); }, "floating");
  expectError(
      [&] {
        inferOne(OpKind::BatchNorm, {{DType::F32, {2, 3}}, c3, c3, c3, c3}, {{"epsilon", -1.0}});
      },
      "epsilon");
}

// Normalises each run of `inner` consecutive elements with biased variance, then applies
// weight and bias (indexed by the position inside the run) when given.
Tensor handLayerNorm(const Tensor &x, int64_t inner, const Tensor *weight, const Tensor *bias, double eps) {
  Tensor out(x.type());
  for (int64_t start = 0; start < x.numElements(); start += inner) {
    double mean = 0, var = 0;
    for (int64_t i = 0; i < inner; ++i)
      mean += x.getDouble(start + i) / double(inner);
    for (int64_t i = 0; i < inner; ++i)
      var += std::pow(x.getDouble(start + i) - mean, 2) / double(inner);
    for (int64_t i = 0; i < inner; ++i) {
      double y = (x.getDouble(start + i) - mean) / std::sqrt(var + eps);
      y = y * (weight ? weight->getDouble(i) : 1.0) + (bias ? bias->getDouble(i) : 0.0);
      out.setDouble(start + i, y);
    }
  }
  return out;
}

TEST(OpsNNLayerNorm, MatchesHandLoop) {
  Tensor x = scaled(randomTensor({DType::F64, {2, 3, 4}}, 9), 3);
  Tensor w = randomTensor({DType::F64, {4}}, 10), b = randomTensor({DType::F64, {4}}, 11);
  EXPECT_TRUE(near(runOp(OpKind::LayerNorm, {x, w, b}), handLayerNorm(x, 4, &w, &b, 1e-5), 1e-12));
  EXPECT_TRUE(near(runOp(OpKind::LayerNorm, {x, w}), handLayerNorm(x, 4, &w, nullptr, 1e-5), 1e-12));
  // axis 1 normalises over the last two dims together.
  Tensor w2 = randomTensor({DType::F64, {3, 4}}, 12);
  EXPECT_TRUE(near(runOp(OpKind::LayerNorm, {x, w2}, {{"axis", int64_t(1)}, {"epsilon", 0.1}}),
                   handLayerNorm(x, 12, &w2, nullptr, 0.1), 1e-12));
  EXPECT_TRUE(near(runOp(OpKind::LayerNorm, {x}, {{"axis", int64_t(-3)}}),
                   handLayerNorm(x, 24, nullptr, nullptr, 1e-5), 1e-12));
  // A constant row has zero variance: the result is 0, not NaN.
  Tensor flat = Tensor::fromDoubles(DType::F32, {1, 3}, {2, 2, 2});
  EXPECT_TRUE(near(runOp(OpKind::LayerNorm, {flat}), Tensor(DType::F32, {1, 3}), 0));
}

TEST(OpsNNLayerNorm, Errors) {
  TensorType x{DType::F32, {2, 3, 4}};
  expectError(
      [&] {
        inferOne(OpKind::LayerNorm, {x, {DType::F32, {3}}});
      },
      "weight must have the normalized shape [4]");
  expectError([&] { inferOne(OpKind::LayerNorm, {x, {DType::F32, {4}}, {DType::F32, {3, 4}}}); }, "bias");
  expectError([&] { inferOne(OpKind::LayerNorm, {x}, {{"axis", int64_t(3)}}); }, "axis");
  expectError([] { inferOne(OpKind::LayerNorm, {{DType::I64, {2, 3}}}); }, "floating");
}

// exp(x - max) / sum per row of the last axis, computed directly.
Tensor handSoftmaxRows(const Tensor &x, int64_t cols, bool logarithm) {
  Tensor out(x.type());
  for (int64_t start = 0; start < x.numElements(); start += cols) {
    double max = -INFINITY, sum = 0;
    for (int64_t j = 0; j < cols; ++j)
      max = std::max(max, x.getDouble(start + j));
    for (int64_t j = 0; j < cols; ++j)
      sum += std::exp(x.getDouble(start + j) - max);
    for (int64_t j = 0; j < cols; ++j) {
      double z = x.getDouble(start + j) - max;
      out.setDouble(start + j, logarithm ? z - std::log(sum) : std::exp(z) / sum);
    }
  }
  return out;
}

TEST(OpsNNSoftmax, RowsSumToOneAndMatchExpOverSum) {
  Tensor x = scaled(randomTensor({DType::F64, {3, 5}}, 13), 4);
  Tensor got = runOp(OpKind::Softmax, {x});
  EXPECT_TRUE(near(got, handSoftmaxRows(x, 5, false), 1e-14));
  for (int64_t r = 0; r < 3; ++r) {
    double sum = 0;
    for (int64_t j = 0; j < 5; ++j)
      sum += got.getDouble(r * 5 + j);
    EXPECT_NEAR(sum, 1.0, 1e-14);
  }
  EXPECT_TRUE(near(runOp(OpKind::LogSoftmax, {x}), handSoftmaxRows(x, 5, true), 1e-14));

  // axis 0 on [3,5] is the last-axis softmax of the transpose.
  Tensor xt(DType::F64, {5, 3});
  for (int64_t r = 0; r < 3; ++r)
    for (int64_t c = 0; c < 5; ++c)
      xt.setDouble(c * 3 + r, x.getDouble(r * 5 + c));
  Tensor wantT = handSoftmaxRows(xt, 3, false);
  Tensor got0 = runOp(OpKind::Softmax, {x}, {{"axis", int64_t(0)}});
  for (int64_t r = 0; r < 3; ++r)
    for (int64_t c = 0; c < 5; ++c)
      EXPECT_NEAR(got0.getDouble(r * 5 + c), wantT.getDouble(c * 3 + r), 1e-14);
}

TEST(OpsNNSoftmax, StableForLargeAndInfiniteLogits) {
  // exp(1000) overflows; the max-shifted form does not.
  Tensor x = Tensor::fromDoubles(DType::F32, {1, 3}, {1000, 1001, -INFINITY});
  Tensor got = runOp(OpKind::Softmax, {x});
  double e = std::exp(-1.0);
  EXPECT_TRUE(near(got, Tensor::fromDoubles(DType::F32, {1, 3}, {e / (1 + e), 1 / (1 + e), 0}), 1e-6));
  Tensor logGot = runOp(OpKind::LogSoftmax, {x});
  EXPECT_NEAR(logGot.getDouble(1), -std::log1p(e), 1e-6);
  EXPECT_EQ(logGot.getDouble(2), -INFINITY);
  // A size-1 axis gives exactly 1 (and 0 for log_softmax).
  Tensor col = randomTensor({DType::F32, {4, 1}}, 14);
  EXPECT_TRUE(near(runOp(OpKind::Softmax, {col}), Tensor::fromDoubles(DType::F32, {4, 1}, {1, 1, 1, 1}), 0));
  EXPECT_TRUE(near(runOp(OpKind::LogSoftmax, {col}), Tensor(DType::F32, {4, 1}), 0));
  // Empty inputs have nothing to normalise.
  EXPECT_EQ(runOp(OpKind::Softmax, {Tensor(DType::F32, {3, 0})}).shape(), (Shape{3, 0}));
  EXPECT_EQ(runOp(OpKind::LogSoftmax, {Tensor(DType::F32, {0, 4})}, {{"axis", int64_t(0)}}).shape(),
            (Shape{0, 4}));
}

TEST(OpsNNSoftmax, Errors) {
  expectError([] { inferOne(OpKind::Softmax, {{DType::F32, {}}}); }, "axis");
  expectError([] { inferOne(OpKind::Softmax, {{DType::F32, {2, 3}}}, {{"axis", int64_t(2)}}); }, "axis");
  expectError([] { inferOne(OpKind::LogSoftmax, {{DType::I32, {2, 3}}}); }, "floating");
}

TEST(OpsNNActivation, GeluMatchesErfAndTanhForms) {
  Tensor x = scaled(randomTensor({DType::F64, {4, 6}}, 15), 5);
  Tensor erfForm = mapped(x, [](double v) { return v * 0.5 * (1 + std::erf(v / std::sqrt(2.0))); });
  EXPECT_TRUE(near(runOp(OpKind::Gelu, {x}), erfForm, 1e-14));
  EXPECT_TRUE(near(runOp(OpKind::Gelu, {x}, {{"approximate", std::string("none")}}), erfForm, 1e-14));
  const double pi = std::acos(-1.0);
  Tensor tanhForm = mapped(x, [pi](double v) {
    return 0.5 * v * (1 + std::tanh(std::sqrt(2 / pi) * (v + 0.044715 * v * v * v)));
  });
  EXPECT_TRUE(near(runOp(OpKind::Gelu, {x}, {{"approximate", std::string("tanh")}}), tanhForm, 1e-14));
  // The two forms differ slightly: the test would notice a swap.
  EXPECT_FALSE(near(erfForm, tanhForm, 1e-6));

  Tensor xf = randomTensor({DType::F32, {7}}, 16);
  Tensor erfF = mapped(xf, [](double v) { return v * 0.5 * (1 + std::erf(v / std::sqrt(2.0))); });
  EXPECT_TRUE(near(runOp(OpKind::Gelu, {xf}), erfF, 1e-6));
}

TEST(OpsNNActivation, SiluIsXTimesSigmoid) {
  Tensor x = scaled(randomTensor({DType::F64, {2, 3, 4}}, 17), 6);
  EXPECT_TRUE(
      near(runOp(OpKind::Silu, {x}), mapped(x, [](double v) { return v / (1 + std::exp(-v)); }), 1e-14));
  Tensor scalar = Tensor::scalar(DType::F32, 2);
  EXPECT_NEAR(runOp(OpKind::Silu, {scalar}).getDouble(0), 2 / (1 + std::exp(-2.0)), 1e-6);
}

TEST(OpsNNActivation, Errors) {
  expectError(
      [] {
        inferOne(OpKind::Gelu, {{DType::F32, {3}}}, {{"approximate", std::string("fast")}});
      },
      "approximate");
  expectError([] { inferOne(OpKind::Gelu, {{DType::I32, {3}}}); }, "floating");
  expectError([] { inferOne(OpKind::Silu, {{DType::Bool, {3}}}); }, "floating");
  expectError([] { inferOne(OpKind::Gelu, {{DType::F32, {3}}}, {{"approximate", int64_t(1)}}); }, "string");
}

} // namespace
