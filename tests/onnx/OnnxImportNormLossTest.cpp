// ONNX import of the normalisations (InstanceNormalization, LRN, MeanVarianceNormalization,
// BatchNormalization in training mode, LayerNormalization's statistics outputs), the losses
// (NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss) and Einsum, against loops written here
// from the ONNX definitions.
#include <algorithm>
#include <cmath>

#include "OnnxTestModel.h"

using namespace kiln;
using namespace kiln::onnxtest;
using ir::OpKind;

namespace {

/// Mean and biased variance of `x` over the elements `pick(i)` for i in [0, count).
template <typename Pick> std::pair<double, double> moments(const Tensor &x, int64_t count, Pick pick) {
  double sum = 0, squares = 0;
  for (int64_t i = 0; i < count; ++i)
    sum += x.getDouble(pick(i));
  double mean = sum / static_cast<double>(count);
  for (int64_t i = 0; i < count; ++i)
    squares += std::pow(x.getDouble(pick(i)) - mean, 2);
  return {mean, squares / static_cast<double>(count)};
}

TEST(OnnxImportNormLoss, InstanceNormalization) {
  ModelBuilder m(6);
  m.input("x", DType::F32, {2, 2, 3});
  m.initializer("scale", Tensor::fromDoubles(DType::F32, {2}, {2, -1}));
  m.initializer("bias", Tensor::fromDoubles(DType::F32, {2}, {0.5, 3}));
  setFloat(m.node("InstanceNormalization", {"x", "scale", "bias"}, {"y"}), "epsilon", 0.01f);
  m.output("y", DType::F32, {2, 2, 3});
  Tensor x = Tensor::fromDoubles(DType::F32, {2, 2, 3}, {1, 2, 6, -1, 0, 1, 3, 3, 3, 10, 0, 5});
  auto graph = import(m);
  EXPECT_EQ(countOps(*graph, OpKind::InstanceNorm), 1);
  Tensor y = ir::evaluate(*graph, {x})[0];
  double scale[] = {2, -1}, bias[] = {0.5, 3};
  for (int64_t plane = 0; plane < 4; ++plane) {
    auto [mean, var] = moments(x, 3, [&](int64_t i) { return plane * 3 + i; });
    for (int64_t i = 0; i < 3; ++i)
      EXPECT_NEAR(y.getDouble(plane * 3 + i),
                  (x.getDouble(plane * 3 + i) - mean) / std::sqrt(var + 0.01) * scale[plane % 2] + bias[plane % 2],
                  1e-5);
  }
}

TEST(OnnxImportNormLoss, LrnSumsSquaresOverNeighbouringChannels) {
  ModelBuilder m(13);
  m.input("x", DType::F32, {1, 5, 2});
  auto &lrn = m.node("LRN", {"x"}, {"y"});
  setInt(lrn, "size", 4);
  setFloat(lrn, "alpha", 0.5f);
  setFloat(lrn, "beta", 0.6f);
  setFloat(lrn, "bias", 2.0f);
  m.output("y", DType::F32, {1, 5, 2});
  Tensor x = iota(DType::F32, {1, 5, 2}, 0.5, -2);
  auto graph = import(m);
  EXPECT_EQ(countOps(*graph, OpKind::Lrn), 1);
  Tensor y = ir::evaluate(*graph, {x})[0];
  // size 4: channels c - 1 .. c + 2 (floor((4-1)/2) before, ceil after).
  for (int64_t c = 0; c < 5; ++c)
    for (int64_t s = 0; s < 2; ++s) {
      double sum = 0;
      for (int64_t j = std::max<int64_t>(0, c - 1); j <= std::min<int64_t>(4, c + 2); ++j)
        sum += std::pow(x.getDouble(j * 2 + s), 2);
      EXPECT_NEAR(y.getDouble(c * 2 + s), x.getDouble(c * 2 + s) / std::pow(2 + 0.5 / 4 * sum, 0.6), 1e-5);
    }
}

TEST(OnnxImportNormLoss, MeanVarianceNormalizationOverDefaultAxes) {
  ModelBuilder m(13);
  m.input("x", DType::F32, {2, 2, 2, 1});
  m.node("MeanVarianceNormalization", {"x"}, {"y"});
  m.output("y", DType::F32, {2, 2, 2, 1});
  Tensor x = Tensor::fromDoubles(DType::F32, {2, 2, 2, 1}, {1, 5, 0, 2, 3, 7, -4, 4});
  Tensor y = run(m, {x})[0];
  // Axes 0, 2, 3: the statistics are per channel, over batch and spatial positions.
  for (int64_t c = 0; c < 2; ++c) {
    auto pick = [&](int64_t i) { return (i / 2) * 4 + c * 2 + i % 2; };
    auto [mean, var] = moments(x, 4, pick);
    for (int64_t i = 0; i < 4; ++i)
      EXPECT_NEAR(y.getDouble(pick(i)), (x.getDouble(pick(i)) - mean) / (std::sqrt(var) + 1e-9), 1e-5);
  }
}

TEST(OnnxImportNormLoss, BatchNormalizationTrainingModeUsesBatchStatistics) {
  ModelBuilder m(15);
  m.input("x", DType::F32, {2, 2, 2});
  m.initializer("scale", Tensor::fromDoubles(DType::F32, {2}, {1, 2}));
  m.initializer("bias", Tensor::fromDoubles(DType::F32, {2}, {0, 1}));
  m.initializer("mean", Tensor::fromDoubles(DType::F32, {2}, {10, 20}));
  m.initializer("var", Tensor::fromDoubles(DType::F32, {2}, {4, 9}));
  auto &bn = m.node("BatchNormalization", {"x", "scale", "bias", "mean", "var"}, {"y", "rm", "rv"});
  setInt(bn, "training_mode", 1);
  setFloat(bn, "momentum", 0.75f);
  m.output("y", DType::F32, {2, 2, 2});
  m.output("rm", DType::F32, {2});
  m.output("rv", DType::F32, {2});
  Tensor x = Tensor::fromDoubles(DType::F32, {2, 2, 2}, {1, 3, 0, 4, 5, 7, 2, 2});
  auto out = run(m, {x});
  double scale[] = {1, 2}, bias[] = {0, 1}, running[2][2] = {{10, 4}, {20, 9}};
  for (int64_t c = 0; c < 2; ++c) {
    auto pick = [&](int64_t i) { return (i / 2) * 4 + c * 2 + i % 2; };
    auto [mean, var] = moments(x, 4, pick);
    for (int64_t i = 0; i < 4; ++i)
      EXPECT_NEAR(out[0].getDouble(pick(i)), (x.getDouble(pick(i)) - mean) / std::sqrt(var + 1e-5) * scale[c] + bias[c],
                  1e-5);
    EXPECT_NEAR(out[1].getDouble(c), running[c][0] * 0.75 + mean * 0.25, 1e-5);
    EXPECT_NEAR(out[2].getDouble(c), running[c][1] * 0.75 + var * 0.25, 1e-5);
  }

  // Before opset 14 there is no training_mode: the extra outputs are refused by the scan.
  ModelBuilder old(13);
  old.input("x", DType::F32, {2, 2});
  for (const char *name : {"scale", "bias", "mean", "var"})
    old.initializer(name, Tensor::fromDoubles(DType::F32, {2}, {1, 1}));
  old.node("BatchNormalization", {"x", "scale", "bias", "mean", "var"}, {"y", "rm"}, "bn");
  old.output("y", DType::F32, {2, 2});
  old.output("rm", DType::F32, {2});
  expectError([&] { import(old); }, {"node 'bn' (BatchNormalization)", "output 1", "before opset 14"});
}

TEST(OnnxImportNormLoss, LayerNormalizationMeanAndInvStdDevOutputs) {
  ModelBuilder m(17);
  m.input("x", DType::F32, {2, 2, 3});
  m.initializer("scale", Tensor::fromDoubles(DType::F32, {2, 3}, {1, 1, 1, 1, 1, 1}));
  auto &ln = m.node("LayerNormalization", {"x", "scale"}, {"y", "mean", "inv"});
  setInt(ln, "axis", 1);
  setFloat(ln, "epsilon", 0.5f);
  m.output("y", DType::F32, {2, 2, 3});
  m.output("mean", DType::F32, {2, 1, 1});
  m.output("inv", DType::F32, {2, 1, 1});
  Tensor x = Tensor::fromDoubles(DType::F32, {2, 2, 3}, {1, 2, 3, 4, 5, 6, 0, 0, 0, 2, -2, 6});
  auto graph = import(m);
  EXPECT_EQ(countOps(*graph, OpKind::LayerNorm), 1);
  auto out = ir::evaluate(*graph, {x});
  for (int64_t row = 0; row < 2; ++row) {
    auto [mean, var] = moments(x, 6, [&](int64_t i) { return row * 6 + i; });
    EXPECT_NEAR(out[1].getDouble(row), mean, 1e-5);
    EXPECT_NEAR(out[2].getDouble(row), 1 / std::sqrt(var + 0.5), 1e-5);
    for (int64_t i = 0; i < 6; ++i)
      EXPECT_NEAR(out[0].getDouble(row * 6 + i), (x.getDouble(row * 6 + i) - mean) / std::sqrt(var + 0.5), 1e-5);
  }
}

/// Log-probabilities [3, 4] (any numbers do for NLL) and targets, one of them ignored.
TEST(OnnxImportNormLoss, NegativeLogLikelihoodLossReductionsWeightsAndIgnoreIndex) {
  Tensor input = iota(DType::F32, {3, 4}, -0.25, 0.5);
  Tensor target = Tensor::fromDoubles(DType::I64, {3}, {2, -1, 0}); // -1 is ignored below
  std::vector<double> weight{0.5, 1, 2, 4};
  std::vector<double> losses;
  double weightSum = 0;
  for (int64_t n = 0; n < 3; ++n) {
    int64_t t = target.getInt(n);
    double w = t == -1 ? 0 : weight[static_cast<size_t>(t)];
    losses.push_back(t == -1 ? 0 : -input.getDouble(n * 4 + t) * w);
    weightSum += w;
  }
  for (std::string reduction : {"none", "sum", "mean"}) {
    SCOPED_TRACE(reduction);
    ModelBuilder m(13);
    m.input("input", DType::F32, {3, 4});
    m.input("target", DType::I64, {3});
    m.initializer("weight", Tensor::fromDoubles(DType::F32, {4}, weight));
    auto &nll = m.node("NegativeLogLikelihoodLoss", {"input", "target", "weight"}, {"loss"});
    setString(nll, "reduction", reduction);
    setInt(nll, "ignore_index", -1);
    m.output("loss", DType::F32, reduction == "none" ? Shape{3} : Shape{});
    auto graph = import(m);
    EXPECT_EQ(countOps(*graph, OpKind::NllLoss), 1);
    Tensor loss = ir::evaluate(*graph, {input, target})[0];
    double sum = losses[0] + losses[1] + losses[2];
    if (reduction == "none")
      expectClose(loss, losses);
    else
      expectClose(loss, {reduction == "sum" ? sum : sum / weightSum});
  }
}

TEST(OnnxImportNormLoss, SoftmaxCrossEntropyLossWithLogProbOutput) {
  ModelBuilder m(13);
  m.input("scores", DType::F32, {2, 3, 2});
  m.input("labels", DType::I64, {2, 2});
  m.node("SoftmaxCrossEntropyLoss", {"scores", "labels"}, {"loss", "log_prob"});
  m.output("loss", DType::F32, {});
  m.output("log_prob", DType::F32, {2, 3, 2});
  Tensor scores = Tensor::fromDoubles(DType::F32, {2, 3, 2}, {1, 0, 2, 0, 3, 0, -1, 5, 0, 5, 1, 5});
  Tensor labels = Tensor::fromDoubles(DType::I64, {2, 2}, {2, 0, 1, 1});
  auto graph = import(m);
  EXPECT_EQ(countOps(*graph, OpKind::LogSoftmax), 1);
  EXPECT_EQ(countOps(*graph, OpKind::NllLoss), 1);
  auto out = ir::evaluate(*graph, {scores, labels});
  double total = 0;
  for (int64_t n = 0; n < 2; ++n)
    for (int64_t d = 0; d < 2; ++d) {
      double sum = 0;
      for (int64_t c = 0; c < 3; ++c)
        sum += std::exp(scores.getDouble((n * 3 + c) * 2 + d));
      for (int64_t c = 0; c < 3; ++c) {
        int64_t at = (n * 3 + c) * 2 + d;
        EXPECT_NEAR(out[1].getDouble(at), scores.getDouble(at) - std::log(sum), 1e-5);
      }
      total -= scores.getDouble((n * 3 + labels.getInt(n * 2 + d)) * 2 + d) - std::log(sum);
    }
  expectClose(out[0], {total / 4}, 1e-5);
}

TEST(OnnxImportNormLoss, EinsumBatchMatmulAndDiagonal) {
  ModelBuilder m(12);
  m.input("a", DType::F32, {2, 2, 3});
  m.input("b", DType::F32, {2, 3, 2});
  m.input("s", DType::F32, {3, 3});
  setString(m.node("Einsum", {"a", "b"}, {"ab"}), "equation", "bij,bjk->bik");
  setString(m.node("Einsum", {"s"}, {"diag"}), "equation", "ii->i");
  m.output("ab", DType::F32, {2, 2, 2});
  m.output("diag", DType::F32, {3});
  Tensor a = iota(DType::F32, {2, 2, 3}), b = iota(DType::F32, {2, 3, 2}, -1, 3), s = iota(DType::F32, {3, 3});
  auto graph = import(m);
  EXPECT_EQ(countOps(*graph, OpKind::Einsum), 2);
  auto out = ir::evaluate(*graph, {a, b, s});
  std::vector<double> want;
  for (int64_t n = 0; n < 2; ++n)
    for (int64_t i = 0; i < 2; ++i)
      for (int64_t k = 0; k < 2; ++k) {
        double dot = 0;
        for (int64_t j = 0; j < 3; ++j)
          dot += a.getDouble((n * 2 + i) * 3 + j) * b.getDouble((n * 3 + j) * 2 + k);
        want.push_back(dot);
      }
  expectClose(out[0], want);
  expectClose(out[1], {0, 4, 8});
}

// Det by Leibniz's formula: the sum over permutations of sign * product of a[i][perm[i]].
double leibniz(const std::vector<double> &a, int n) {
  std::vector<int> perm(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i)
    perm[i] = i;
  double det = 0;
  do {
    double term = 1;
    int inversions = 0;
    for (int i = 0; i < n; ++i) {
      term *= a[i * n + perm[i]];
      for (int j = i + 1; j < n; ++j)
        inversions += perm[j] < perm[i];
    }
    det += inversions % 2 ? -term : term;
  } while (std::next_permutation(perm.begin(), perm.end()));
  return det;
}

TEST(OnnxImportNormLoss, DetWithPivotingSingularAndBatched) {
  ModelBuilder m(11);
  m.input("a", DType::F64, {3, 3, 3});
  m.node("Det", {"a"}, {"d"});
  m.output("d", DType::F64, {3});
  std::vector<double> values{0,  2,   1, 3, 1, 4,  5,    7, 2, // a zero first pivot: rows must swap
                             1,  2,   3, 2, 4, 6,  7,    8, 9, // singular (row 2 = 2 * row 1)
                             -2, 0.5, 9, 4, 3, -1, 0.25, 8, 6};
  Tensor d = run(m, {Tensor::fromDoubles(DType::F64, {3, 3, 3}, values)})[0];
  for (int k = 0; k < 3; ++k)
    EXPECT_NEAR(d.getDouble(k), leibniz(std::vector<double>(values.begin() + 9 * k, values.begin() + 9 * (k + 1)), 3),
                1e-9)
        << "matrix " << k;
  EXPECT_EQ(d.getDouble(1), 0);
}

} // namespace
