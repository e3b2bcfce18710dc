// Training-mode tracing: BatchNorm2d records its running-statistics updates as buffer writes
// (extra outputs after the caller's, listed by GraphBuilder::bufferWrites), and Dropout draws
// its mask from random_uniform on the graph's random offset. Checked on the reference evaluator
// against loops written here.
#include <gtest/gtest.h>

#include <cmath>

#include "core/Error.h"
#include "frontend/Frontend.h"
#include "ir/Evaluator.h"

namespace kiln::frontend {
namespace {

/// Per channel of x [N, C, H, W]: the mean and the unbiased variance.
std::pair<std::vector<double>, std::vector<double>> channelStats(const Tensor &x) {
  const Shape &s = x.shape();
  int64_t n = s[0], c = s[1], hw = s[2] * s[3];
  std::vector<double> mean(size_t(c), 0.0), var(size_t(c), 0.0);
  for (int64_t k = 0; k < c; ++k) {
    for (int64_t b = 0; b < n; ++b)
      for (int64_t i = 0; i < hw; ++i)
        mean[size_t(k)] += x.getDouble((b * c + k) * hw + i);
    mean[size_t(k)] /= double(n * hw);
    for (int64_t b = 0; b < n; ++b)
      for (int64_t i = 0; i < hw; ++i) {
        double d = x.getDouble((b * c + k) * hw + i) - mean[size_t(k)];
        var[size_t(k)] += d * d;
      }
    var[size_t(k)] /= double(n * hw - 1);
  }
  return {mean, var};
}

TEST(TrainingMode, BatchNormRecordsItsRunningStatisticsAsBufferWrites) {
  nn::BatchNorm2d bn(3, 1e-5, 0.25);
  bn.loadStateDict({{"running_mean", Tensor::fromDoubles(DType::F32, {3}, {1, -1, 0.5})},
                    {"running_var", Tensor::fromDoubles(DType::F32, {3}, {2, 1, 0.5})},
                    {"num_batches_tracked", Tensor::scalar(DType::I64, 4)}},
                   false);
  GraphBuilder gb("bn");
  Var y = bn(gb.input("x", DType::F32, {2, 3, 2, 5}));
  EXPECT_TRUE(gb.bufferWrites().empty()); // listed by finish()
  auto graph = gb.finish({{"y", y}});
  const std::vector<BufferWrite> &writes = gb.bufferWrites();
  ASSERT_EQ(writes.size(), 3u);
  EXPECT_EQ(writes[0].param, "running_mean");
  EXPECT_EQ(writes[1].param, "running_var");
  EXPECT_EQ(writes[2].param, "num_batches_tracked");
  ASSERT_EQ(graph->outputs().size(), 4u); // y first, then the new values in that order
  EXPECT_EQ(graph->outputs()[0]->name(), "y");
  for (size_t i = 0; i < 3; ++i)
    EXPECT_EQ(graph->outputs()[i + 1]->name(), writes[i].output);
  EXPECT_EQ(writes[0].output, "next.running_mean");

  Tensor x = randomTensor({DType::F32, {2, 3, 2, 5}}, 3);
  std::vector<Tensor> out = ir::evaluate(*graph, {x});
  auto [mean, var] = channelStats(x);
  std::vector<double> mean0{1, -1, 0.5}, var0{2, 1, 0.5};
  for (size_t k = 0; k < 3; ++k) {
    EXPECT_NEAR(out[1].getDouble(int64_t(k)), 0.75 * mean0[k] + 0.25 * mean[k], 1e-6) << k;
    EXPECT_NEAR(out[2].getDouble(int64_t(k)), 0.75 * var0[k] + 0.25 * var[k], 1e-6) << k;
  }
  EXPECT_EQ(out[3].getInt(0), 5);
  EXPECT_EQ(out[3].dtype(), DType::I64);
}

TEST(TrainingMode, BatchNormWithoutMomentumKeepsTheCumulativeAverage) {
  // torch's momentum=None: after the update counting batch t, running = (1 - 1/t) running +
  // (1/t) batch; from 3 batches tracked, the fourth weighs 1/4.
  nn::BatchNorm2d bn(2, 1e-5, std::nullopt);
  bn.loadStateDict({{"running_mean", Tensor::fromDoubles(DType::F32, {2}, {0.5, -2})},
                    {"running_var", Tensor::fromDoubles(DType::F32, {2}, {1.5, 3})},
                    {"num_batches_tracked", Tensor::scalar(DType::I64, 3)}},
                   false);
  GraphBuilder gb("bn_cma");
  auto graph = gb.finish({bn(gb.input("x", DType::F32, {3, 2, 2, 2}))});
  Tensor x = randomTensor({DType::F32, {3, 2, 2, 2}}, 11);
  std::vector<Tensor> out = ir::evaluate(*graph, {x});
  auto [mean, var] = channelStats(x);
  std::vector<double> mean0{0.5, -2}, var0{1.5, 3};
  for (size_t k = 0; k < 2; ++k) {
    EXPECT_NEAR(out[1].getDouble(int64_t(k)), 0.75 * mean0[k] + 0.25 * mean[k], 1e-6) << k;
    EXPECT_NEAR(out[2].getDouble(int64_t(k)), 0.75 * var0[k] + 0.25 * var[k], 1e-6) << k;
  }
  EXPECT_EQ(out[3].getInt(0), 4);
  // A momentum outside [0, 1] is refused; None is not.
  EXPECT_THROW(nn::BatchNorm2d(2, 1e-5, 1.5), Error);
}

TEST(TrainingMode, BatchNormCalledTwiceUpdatesTwiceAndEvalModeWritesNothing) {
  auto bn = std::make_shared<nn::BatchNorm2d>(1);
  GraphBuilder gb("twice");
  Var x = gb.input("x", DType::F32, {1, 1, 1, 4});
  Var y = (*bn)((*bn)(x) * 3.0);
  auto graph = gb.finish({y});
  ASSERT_EQ(gb.bufferWrites().size(), 3u); // one write per buffer: the second call's
  Tensor in = Tensor::fromDoubles(DType::F32, {1, 1, 1, 4}, {1, 2, 3, 6});
  std::vector<Tensor> out = ir::evaluate(*graph, {in});
  // First call: mean 3, unbiased var 14/3; its output normalised, times 3: mean 0, unbiased
  // var 9 * (4/3) = 12 (the biased variance of a normalised batch is 1, up to epsilon).
  double mean1 = 0.1 * 3, var1 = 0.9 + 0.1 * 14.0 / 3;
  double normalisedVar = 9.0 * (14.0 / 4) / (14.0 / 4 + 1e-5) * 4.0 / 3;
  EXPECT_NEAR(out[1].getDouble(0), 0.9 * mean1, 1e-6);
  EXPECT_NEAR(out[2].getDouble(0), 0.9 * var1 + 0.1 * normalisedVar, 1e-5);
  EXPECT_EQ(out[3].getInt(0), 2);

  bn->eval();
  GraphBuilder inference;
  auto evalGraph = inference.finish({(*bn)(inference.input("x", DType::F32, {1, 1, 1, 4}))});
  EXPECT_TRUE(inference.bufferWrites().empty());
  EXPECT_EQ(evalGraph->outputs().size(), 1u);
}

TEST(TrainingMode, WriteBufferChecksItsOperands) {
  GraphBuilder gb;
  Var x = gb.input("x", DType::F32, {3});
  Var p = gb.param("p", Tensor(DType::F32, {3}));
  EXPECT_THROW(gb.writeBuffer(x, x), Error); // not a parameter
  try {
    gb.writeBuffer(p, gb.scalar(1.0));
    FAIL() << "expected a kiln::Error";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("new value of parameter 'p' has type f32[]"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(gb.currentValue(p).value(), p.value()); // nothing written yet: the parameter itself
  Var sum = p + x;
  gb.writeBuffer(p, sum);
  EXPECT_EQ(gb.currentValue(p).value(), sum.value());
  Var named = p * 2.0;
  named.setName("doubled");
  gb.writeBuffer(p, named); // replaces the earlier write; a named value keeps its name
  EXPECT_EQ(gb.currentValue(p).value(), named.value());
  auto graph = gb.finish({x});
  ASSERT_EQ(gb.bufferWrites().size(), 1u);
  EXPECT_EQ(gb.bufferWrites()[0].output, "doubled");
  EXPECT_EQ(graph->outputs().size(), 2u);
}

TEST(TrainingMode, DropoutKeepsAboutOneMinusPAndScalesTheKept) {
  const int64_t n = 100000;
  for (double p : {0.1, 0.5, 0.8}) {
    nn::Dropout dropout(p, 1234);
    GraphBuilder gb("dropout");
    Var x = gb.input("x", DType::F32, {n});
    auto graph = gb.finish({dropout(x)});
    ASSERT_EQ(gb.bufferWrites().size(), 1u);
    EXPECT_EQ(gb.bufferWrites()[0].param, "rng_offset");
    Tensor in = randomTensor({DType::F32, {n}}, 8);
    Tensor out = ir::evaluate(*graph, {in})[0];
    int64_t kept = 0;
    for (int64_t i = 0; i < n; ++i) {
      double v = out.getDouble(i);
      if (v == 0.0 && in.getDouble(i) != 0.0)
        continue;
      ++kept;
      EXPECT_FLOAT_EQ(float(v), float(in.getDouble(i) / (1 - p))) << i;
    }
    // Binomial(n, 1 - p): within 3 standard deviations.
    double sigma = std::sqrt(n * p * (1 - p));
    EXPECT_NEAR(double(kept), n * (1 - p), 3 * sigma) << "p " << p;
    // The same graph evaluated again draws the same mask (the offset is the parameter's value).
    EXPECT_TRUE(ir::evaluate(*graph, {in})[0].identical(out));
  }
}

TEST(TrainingMode, DropoutStreamsDifferPerModuleAndPerCallAndFollowTheOffset) {
  nn::manualSeed(5);
  auto a = std::make_shared<nn::Dropout>(0.5);
  auto b = std::make_shared<nn::Dropout>(0.5);
  EXPECT_NE(a->seed(), b->seed());
  nn::manualSeed(5);
  EXPECT_EQ(nn::Dropout(0.5).seed(), a->seed()); // reproducible after manualSeed
  GraphBuilder gb("streams");
  Var x = gb.input("x", DType::F32, {64});
  auto graph = gb.finish({(*a)(x), (*b)(x), (*a)(x)});
  ASSERT_EQ(gb.bufferWrites().size(), 1u); // one shared offset
  Tensor ones(DType::F32, {64});
  for (int64_t i = 0; i < 64; ++i)
    ones.setDouble(i, 1.0);
  std::vector<Tensor> out = ir::evaluate(*graph, {ones});
  EXPECT_FALSE(out[0].identical(out[1]));
  EXPECT_FALSE(out[0].identical(out[2])); // the same module called twice: two masks
  EXPECT_EQ(out[3].getInt(0), 1);          // rng_offset + 1
  // Another offset value: other masks.
  std::vector<Tensor> next = ir::evaluate(*graph, {ones}, {{"rng_offset", Tensor::scalar(DType::I64, 1)}});
  EXPECT_FALSE(next[0].identical(out[0]));
  EXPECT_EQ(next[3].getInt(0), 2);
}

TEST(TrainingMode, DropoutEdgeCases) {
  GraphBuilder gb;
  Var x = gb.input("x", DType::F32, {4});
  EXPECT_EQ(nn::Dropout(0.0)(x).value(), x.value()); // the identity even in training
  nn::Dropout off(0.5);
  off.eval();
  EXPECT_EQ(off(x).value(), x.value());
  Var all = nn::Dropout(1.0)(x);
  Var wide = nn::Dropout(0.5)(gb.input("w", DType::F64, {3}));
  EXPECT_EQ(wide.dtype(), DType::F64);
  GraphBuilder other;
  EXPECT_THROW(nn::Dropout(0.5)(other.input("i", DType::I64, {3})), Error);
  EXPECT_THROW(nn::Dropout(-0.1), Error);
  auto graph = gb.finish({all});
  Tensor out = ir::evaluate(*graph, {Tensor::fromDoubles(DType::F32, {4}, {1, -2, 3, 4}),
                                     Tensor::fromDoubles(DType::F64, {3}, {1, 2, 3})})[0];
  EXPECT_EQ(out.toDoubles(), (std::vector<double>{0, 0, 0, 0}));
}

} // namespace
} // namespace kiln::frontend
