// Reductions and nn functions: the op each builds, its attributes, and values against loops
// and closed forms written in the test.
#include <gtest/gtest.h>

#include <cmath>

#include "core/Error.h"
#include "frontend/Frontend.h"
#include "ir/Evaluator.h"

using namespace kiln;
using namespace kiln::frontend;
using ir::OpKind;

namespace {

OpKind opOf(const Var &v) { return v.value()->producer()->op(); }

std::vector<Tensor> runAll(GraphBuilder &gb, const std::vector<Var> &outputs, const std::vector<Tensor> &inputs) {
  auto graph = gb.finish(outputs);
  return ir::evaluate(*graph, inputs);
}

Tensor values(Shape shape, std::vector<double> v) { return Tensor::fromDoubles(DType::F32, std::move(shape), v); }

void expectNear(const Tensor &got, const std::vector<double> &want, double tolerance = 1e-5) {
  ASSERT_EQ(got.numElements(), static_cast<int64_t>(want.size()));
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_NEAR(got.getDouble(static_cast<int64_t>(i)), want[i], tolerance) << "element " << i;
}

} // namespace

TEST(FrontendReduce, SumMeanMaxMinProdOverAxes) {
  GraphBuilder gb;
  Var x = gb.input("x", DType::F32, {2, 3});
  Var all = sum(x);
  EXPECT_EQ(opOf(all), OpKind::ReduceSum);
  EXPECT_EQ(all.rank(), 0);
  Var rows = mean(x, {-1}, true);
  EXPECT_EQ(opOf(rows), OpKind::ReduceMean);
  EXPECT_EQ(rows.shape(), (Shape{2, 1}));
  Var cols = max(x, {0});
  EXPECT_EQ(cols.shape(), (Shape{3}));
  Var smallest = min(x, {0, 1}, true);
  EXPECT_EQ(smallest.shape(), (Shape{1, 1}));
  Var product = prod(x, {1});
  auto out = runAll(gb, {all, rows, cols, smallest, product}, {values({2, 3}, {1, -2, 3, 4, 5, -6})});
  expectNear(out[0], {5});
  expectNear(out[1], {2.0 / 3.0, 1.0});
  expectNear(out[2], {4, 5, 3});
  expectNear(out[3], {-6});
  expectNear(out[4], {-6, -120});
}

TEST(FrontendReduce, ArgMaxArgMinGiveI64) {
  GraphBuilder gb;
  Var x = gb.input("x", DType::F32, {2, 3});
  Var am = argmax(x, 1);
  EXPECT_EQ(opOf(am), OpKind::ArgMax);
  EXPECT_EQ(am.type(), (TensorType{DType::I64, {2}}));
  Var an = argmin(x, 0, true);
  EXPECT_EQ(an.shape(), (Shape{1, 3}));
  auto out = runAll(gb, {am, an}, {values({2, 3}, {1, 7, 7, 4, 5, -6})});
  EXPECT_EQ(out[0].toDoubles(), (std::vector<double>{1, 1})); // the first of equal maxima
  EXPECT_EQ(out[1].toDoubles(), (std::vector<double>{0, 1, 1}));
}

TEST(FrontendReduce, DTypesFollowTorch) {
  GraphBuilder gb;
  Var b = gb.input("b", DType::Bool, {4});
  Var i = gb.input("i", DType::I32, {4});
  Var count = sum(b);
  EXPECT_EQ(count.dtype(), DType::I64);
  Var average = mean(i);
  EXPECT_EQ(average.dtype(), DType::F32);
  EXPECT_EQ(sum(i).dtype(), DType::I32);
  auto out = runAll(gb, {count, average}, {Tensor::fromDoubles(DType::Bool, {4}, {1, 0, 1, 1}),
                                           Tensor::fromDoubles(DType::I32, {4}, {1, 2, 3, 5})});
  EXPECT_EQ(out[0].getInt(0), 3);
  EXPECT_NEAR(out[1].getDouble(0), 2.75, 1e-7);
}

TEST(FrontendFunctional, MatMulAndLinear) {
  GraphBuilder gb;
  Var x = gb.input("x", DType::F32, {2, 3});
  Var w = gb.input("w", DType::F32, {4, 3});
  Var b = gb.input("b", DType::F32, {4});
  Var mm = matmul(x, transpose(w, 0, 1));
  EXPECT_EQ(opOf(mm), OpKind::MatMul);
  EXPECT_EQ(mm.shape(), (Shape{2, 4}));
  Var lin = linear(x, w, b);
  EXPECT_EQ(opOf(lin), OpKind::Linear);
  EXPECT_EQ(lin.value()->producer()->numInputs(), 3u);
  Var noBias = linear(x, w);
  EXPECT_EQ(noBias.value()->producer()->numInputs(), 2u);
  std::vector<double> xv{1, 2, 3, -1, 0, 2}, wv{1, 0, 0, 0, 1, 0, 0, 0, 1, 1, 1, 1}, bv{0.5, -0.5, 1, 2};
  auto out = runAll(gb, {mm, lin, noBias}, {values({2, 3}, xv), values({4, 3}, wv), values({4}, bv)});
  std::vector<double> product, withBias;
  for (int r = 0; r < 2; ++r)
    for (int o = 0; o < 4; ++o) {
      double acc = 0;
      for (int k = 0; k < 3; ++k)
        acc += xv[r * 3 + k] * wv[o * 3 + k];
      product.push_back(acc);
      withBias.push_back(acc + bv[o]);
    }
  expectNear(out[0], product);
  expectNear(out[1], withBias);
  expectNear(out[2], product);
}

TEST(FrontendFunctional, Conv2dWithBiasStridePaddingAndGroups) {
  GraphBuilder gb;
  const int64_t n = 1, c = 2, h = 4, w = 4, cout = 2, groups = 2;
  Var x = gb.input("x", DType::F32, {n, c, h, w});
  Var weight = gb.input("weight", DType::F32, {cout, c / groups, 3, 3});
  Var bias = gb.input("bias", DType::F32, {cout});
  Var y = conv2d(x, weight, bias, {2}, {1}, {1}, groups);
  EXPECT_EQ(y.shape(), (Shape{1, 2, 2, 2}));
  Var conv = Var(y.value()->producer()->input(0), &gb);
  EXPECT_EQ(opOf(conv), OpKind::Conv);
  EXPECT_EQ(conv.value()->producer()->attrInts("pads"), (std::vector<int64_t>{1, 1, 1, 1}));
  EXPECT_EQ(conv.value()->producer()->attrInts("strides"), (std::vector<int64_t>{2, 2}));
  Tensor xt = randomTensor({DType::F32, {n, c, h, w}}, 1), wt = randomTensor({DType::F32, {cout, 1, 3, 3}}, 2);
  Tensor bt = values({2}, {0.25, -1});
  Tensor out = runAll(gb, {y}, {xt, wt, bt})[0];
  // Direct loop: output channel o reads input channel o (groups == channels).
  for (int64_t o = 0; o < cout; ++o)
    for (int64_t oy = 0; oy < 2; ++oy)
      for (int64_t ox = 0; ox < 2; ++ox) {
        double acc = bt.getDouble(o);
        for (int64_t ky = 0; ky < 3; ++ky)
          for (int64_t kx = 0; kx < 3; ++kx) {
            int64_t iy = oy * 2 - 1 + ky, ix = ox * 2 - 1 + kx;
            if (iy >= 0 && iy < h && ix >= 0 && ix < w)
              acc += xt.getDouble((o * h + iy) * w + ix) * wt.getDouble((o * 3 + ky) * 3 + kx);
          }
        EXPECT_NEAR(out.getDouble((o * 2 + oy) * 2 + ox), acc, 1e-5);
      }
}

TEST(FrontendFunctional, Conv1dDilated) {
  GraphBuilder gb;
  Var x = gb.input("x", DType::F32, {1, 1, 6});
  Var weight = gb.input("w", DType::F32, {1, 1, 2});
  Var y = conv1d(x, weight, Var(), 1, 0, 2);
  EXPECT_EQ(y.shape(), (Shape{1, 1, 4}));
  Tensor out = runAll(gb, {y}, {values({1, 1, 6}, {1, 2, 3, 4, 5, 6}), values({1, 1, 2}, {1, 10})})[0];
  expectNear(out, {31, 42, 53, 64}); // x[i] + 10 * x[i + 2]
}

TEST(FrontendFunctional, PoolingUsesTorchDefaults) {
  GraphBuilder gb;
  Var x = gb.input("x", DType::F32, {1, 1, 4, 4});
  Var mp = maxPool2d(x, {2});
  EXPECT_EQ(opOf(mp), OpKind::MaxPool);
  EXPECT_EQ(mp.value()->producer()->attrInts("strides"), (std::vector<int64_t>{2, 2})); // the kernel
  EXPECT_EQ(mp.shape(), (Shape{1, 1, 2, 2}));
  Var ap = avgPool2d(x, {2}, {1}, {1}); // count_include_pad defaults to true, as in torch
  EXPECT_EQ(opOf(ap), OpKind::AvgPool);
  EXPECT_EQ(ap.shape(), (Shape{1, 1, 5, 5}));
  Var apExcl = avgPool2d(x, {2}, {1}, {1}, false, false);
  Var ceil = maxPool2d(x, {3}, {2}, {0}, {1}, true);
  EXPECT_EQ(ceil.shape(), (Shape{1, 1, 2, 2}));
  std::vector<double> xv(16);
  for (int i = 0; i < 16; ++i)
    xv[i] = i;
  auto out = runAll(gb, {mp, ap, apExcl}, {values({1, 1, 4, 4}, xv)});
  expectNear(out[0], {5, 7, 13, 15});
  // Corner window covers only x[0][0] = 0 of 4 positions; the next one x[0][0], x[0][1].
  EXPECT_NEAR(out[1].getDouble(0), 0.0 / 4, 1e-6);
  EXPECT_NEAR(out[1].getDouble(1), (0.0 + 1) / 4, 1e-6);
  EXPECT_NEAR(out[2].getDouble(1), (0.0 + 1) / 2, 1e-6);
  EXPECT_NEAR(out[1].getDouble(6), (0.0 + 1 + 4 + 5) / 4, 1e-6);
}

TEST(FrontendFunctional, BatchNormAndLayerNorm) {
  GraphBuilder gb;
  Var x = gb.input("x", DType::F32, {1, 2, 1, 2});
  Var scale = gb.constant(values({2}, {2, 1}));
  Var shift = gb.constant(values({2}, {0, 1}));
  Var mu = gb.constant(values({2}, {1, -1}));
  Var var = gb.constant(values({2}, {4, 0.25}));
  Var bn = batchNorm(x, scale, shift, mu, var, 0.0);
  EXPECT_EQ(opOf(bn), OpKind::BatchNorm);
  Var ln = layerNorm(x, -1, Var(), Var(), 0.0);
  EXPECT_EQ(opOf(ln), OpKind::LayerNorm);
  Var lnAffine = layerNorm(x, 2, Var(), gb.constant(values({1, 2}, {10, 20})), 0.0);
  auto out = runAll(gb, {bn, ln, lnAffine}, {values({1, 2, 1, 2}, {3, 5, 0, 1})});
  // channel 0: (x - 1) / 2 * 2 + 0; channel 1: (x + 1) / 0.5 * 1 + 1
  expectNear(out[0], {2, 4, 3, 5});
  expectNear(out[1], {-1, 1, -1, 1}); // two values normalise to -1 and 1
  expectNear(out[2], {9, 21, 9, 21});
}

TEST(FrontendFunctional, SoftmaxLogSoftmaxGeluSilu) {
  GraphBuilder gb;
  Var x = gb.input("x", DType::F32, {2, 3});
  Var sm = softmax(x, 1), lsm = logSoftmax(x), g = gelu(x), gt = gelu(x, "tanh"), s = silu(x);
  EXPECT_EQ(opOf(sm), OpKind::Softmax);
  EXPECT_EQ(opOf(lsm), OpKind::LogSoftmax);
  EXPECT_EQ(opOf(g), OpKind::Gelu);
  EXPECT_EQ(opOf(s), OpKind::Silu);
  std::vector<double> xv{1, 2, 3, -1, 0, 0.5};
  auto out = runAll(gb, {sm, lsm, g, gt, s}, {values({2, 3}, xv)});
  for (int r = 0; r < 2; ++r) {
    double total = 0;
    for (int k = 0; k < 3; ++k)
      total += std::exp(xv[r * 3 + k]);
    for (int k = 0; k < 3; ++k) {
      int i = r * 3 + k;
      EXPECT_NEAR(out[0].getDouble(i), std::exp(xv[i]) / total, 1e-6);
      EXPECT_NEAR(out[1].getDouble(i), xv[i] - std::log(total), 1e-5);
    }
  }
  for (int i = 0; i < 6; ++i) {
    double v = xv[i];
    EXPECT_NEAR(out[2].getDouble(i), 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))), 1e-6);
    double inner = std::sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v);
    EXPECT_NEAR(out[3].getDouble(i), 0.5 * v * (1 + std::tanh(inner)), 1e-6);
    EXPECT_NEAR(out[4].getDouble(i), v / (1 + std::exp(-v)), 1e-6);
  }
}

TEST(FrontendFunctional, Losses) {
  GraphBuilder gb;
  Var pred = gb.input("pred", DType::F32, {2, 3});
  Var target = gb.input("target", DType::F32, {2, 3});
  Var labels = gb.input("labels", DType::I64, {2});
  Var mse = mseLoss(pred, target);
  EXPECT_EQ(opOf(mse), OpKind::MseLoss);
  EXPECT_EQ(mse.rank(), 0);
  Var mseNone = mseLoss(pred, target, "none");
  EXPECT_EQ(mseNone.shape(), (Shape{2, 3}));
  Var ce = crossEntropy(pred, labels);
  EXPECT_EQ(opOf(ce), OpKind::CrossEntropy);
  Var ceSum = crossEntropy(pred, labels, "sum");
  std::vector<double> p{1, 2, 3, 0, 0, 0}, t{1, 0, 3, 1, 1, -1};
  std::vector<double> l{2, 0};
  auto out = runAll(gb, {mse, ce, ceSum},
                    {values({2, 3}, p), values({2, 3}, t), Tensor::fromDoubles(DType::I64, {2}, l)});
  double squares = 0;
  for (int i = 0; i < 6; ++i)
    squares += (p[i] - t[i]) * (p[i] - t[i]);
  EXPECT_NEAR(out[0].getDouble(0), squares / 6, 1e-6);
  double nll0 = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0)) - 3;
  double nll1 = std::log(3.0);
  EXPECT_NEAR(out[1].getDouble(0), (nll0 + nll1) / 2, 1e-5);
  EXPECT_NEAR(out[2].getDouble(0), nll0 + nll1, 1e-5);
}

TEST(FrontendFunctional, SpatialArgumentsAreChecked) {
  GraphBuilder gb;
  Var x = gb.input("x", DType::F32, {1, 1, 4, 4});
  Var w = gb.input("w", DType::F32, {1, 1, 3, 3});
  EXPECT_THROW(conv2d(x, w, Var(), {1, 1, 1}), Error);
  EXPECT_THROW(maxPool2d(x, {2, 2, 2}), Error);
  Var flat = gb.input("flat", DType::F32, {4, 4});
  EXPECT_THROW(conv2d(flat, w), Error);
  EXPECT_THROW(maxPool2d(flat, {2}), Error);
  EXPECT_THROW(conv2d(x, w, gb.input("bias", DType::F32, {3})), Error);
}
