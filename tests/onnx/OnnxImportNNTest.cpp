// ONNX import of the neural-network ops: each model is built with the ONNX protobuf API,
// imported, evaluated with kiln's reference evaluator and compared with values computed here
// by plain loops over the ONNX formulas.
#include <cmath>
#include <optional>

#include "tests/ErrorMatchers.h"
#include "OnnxTestModel.h"
#include "ir/ops/Random.h"

using namespace kiln;
using namespace kiln::onnxtest;

namespace {

TEST(OnnxImportNN, GemmWithTransBAlphaBetaAndBroadcastBias) {
  ModelBuilder m(13);
  m.input("A", DType::F32, {2, 3});
  Tensor b = iota(DType::F32, {4, 3}, 0.5, -1);
  Tensor c = Tensor::fromDoubles(DType::F32, {4}, {1, 2, 3, 4});
  m.initializer("B", b);
  m.initializer("C", c);
  auto &gemm = m.node("Gemm", {"A", "B", "C"}, {"Y"}, "fc");
  setInt(gemm, "transB", 1);
  setFloat(gemm, "alpha", 0.5f);
  setFloat(gemm, "beta", 2.0f);
  m.output("Y", DType::F32, {2, 4});
  Tensor a = iota(DType::F32, {2, 3});
  auto graph = import(m);
  // Initializers are parameters carrying their values, not graph inputs.
  ASSERT_EQ(graph->inputs().size(), 1u);
  ASSERT_EQ(graph->params().size(), 2u);
  EXPECT_EQ(graph->params()[0]->attrString("name"), "B");
  Tensor y = ir::evaluate(*graph, {a})[0];
  std::vector<double> want;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 4; ++j) {
      double dot = 0;
      for (int k = 0; k < 3; ++k)
        dot += a.getDouble(i * 3 + k) * b.getDouble(j * 3 + k);
      want.push_back(0.5 * dot + 2.0 * c.getDouble(j));
    }
  expectClose(y, want);
}

// Before IR version 4 every initializer was also listed as a graph input; it is still a
// parameter, not an input the caller binds. Integer initializers used only as static operands
// never become parameters at all.
TEST(OnnxImportNN, InitializerListedAsGraphInputIsAParameter) {
  ModelBuilder m(9);
  m.model.set_ir_version(3);
  m.input("x", DType::F32, {2, 2});
  m.input("w", DType::F32, {2, 2});
  m.initializer("w", Tensor::fromDoubles(DType::F32, {2, 2}, {1, 2, 3, 4}));
  m.input("shape", DType::I64, {1});
  m.initializer("shape", Tensor::fromDoubles(DType::I64, {1}, {4}));
  m.node("MatMul", {"x", "w"}, {"y"});
  m.node("Reshape", {"y", "shape"}, {"z"});
  m.output("z", DType::F32, {4});
  auto graph = import(m);
  ASSERT_EQ(graph->inputs().size(), 1u);
  EXPECT_EQ(graph->inputs()[0]->name(), "x");
  ASSERT_EQ(graph->params().size(), 1u);
  EXPECT_EQ(graph->params()[0]->attrString("name"), "w");
  Tensor y = ir::evaluate(*graph, {Tensor::fromDoubles(DType::F32, {2, 2}, {1, 0, 0, 1})})[0];
  expectClose(y, {1, 2, 3, 4});
}

TEST(OnnxImportNN, GemmOpset11WithoutC) {
  ModelBuilder m(11);
  m.input("A", DType::F32, {3, 2});
  m.input("B", DType::F32, {3, 2});
  setInt(m.node("Gemm", {"A", "B"}, {"Y"}), "transA", 1);
  m.output("Y", DType::F32, {2, 2});
  Tensor a = iota(DType::F32, {3, 2}), b = iota(DType::F32, {3, 2}, 1, 1);
  Tensor y = run(m, {a, b})[0];
  std::vector<double> want;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j) {
      double dot = 0;
      for (int k = 0; k < 3; ++k)
        dot += a.getDouble(k * 2 + i) * b.getDouble(k * 2 + j);
      want.push_back(dot);
    }
  expectClose(y, want);
}

// Conv with strides 2 on a 4x4 input and auto_pad: out = ceil(4 / 2) = 2, which needs one row
// and column of padding in total - at the end for SAME_UPPER, at the start for SAME_LOWER.
TEST(OnnxImportNN, ConvAutoPadSameWithBias) {
  for (std::string mode : {"SAME_UPPER", "SAME_LOWER"}) {
    ModelBuilder m(11);
    m.input("x", DType::F32, {1, 1, 4, 4});
    Tensor w = iota(DType::F32, {2, 1, 3, 3}, 0.1, -0.4);
    Tensor bias = Tensor::fromDoubles(DType::F32, {2}, {1, -1});
    m.initializer("w", w);
    m.initializer("b", bias);
    auto &conv = m.node("Conv", {"x", "w", "b"}, {"y"}, "conv");
    setString(conv, "auto_pad", mode);
    setInts(conv, "strides", {2, 2});
    setInts(conv, "kernel_shape", {3, 3});
    m.output("y", DType::F32, {1, 2, 2, 2});
    Tensor x = iota(DType::F32, {1, 1, 4, 4});
    Tensor y = run(m, {x})[0];
    int begin = mode == "SAME_UPPER" ? 0 : 1;
    std::vector<double> want;
    for (int o = 0; o < 2; ++o)
      for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 2; ++j) {
          double sum = bias.getDouble(o);
          for (int ki = 0; ki < 3; ++ki)
            for (int kj = 0; kj < 3; ++kj) {
              int r = 2 * i + ki - begin, c = 2 * j + kj - begin;
              if (r >= 0 && r < 4 && c >= 0 && c < 4)
                sum += x.getDouble(r * 4 + c) * w.getDouble(o * 9 + ki * 3 + kj);
            }
          want.push_back(sum);
        }
    SCOPED_TRACE(mode);
    expectClose(y, want, 1e-4);
  }
}

TEST(OnnxImportNN, MaxPoolCeilModeAndAveragePoolCountIncludePad) {
  ModelBuilder m(12);
  m.input("x", DType::F32, {1, 1, 4, 4});
  auto &maxPool = m.node("MaxPool", {"x"}, {"max"});
  setInts(maxPool, "kernel_shape", {3, 3});
  setInts(maxPool, "strides", {2, 2});
  setInt(maxPool, "ceil_mode", 1);
  auto &avgPool = m.node("AveragePool", {"x"}, {"avg"});
  setInts(avgPool, "kernel_shape", {3, 3});
  setInts(avgPool, "pads", {1, 1, 1, 1});
  setInt(avgPool, "count_include_pad", 1);
  m.output("max", DType::F32, {1, 1, 2, 2});
  m.output("avg", DType::F32, {1, 1, 4, 4});
  Tensor x = iota(DType::F32, {1, 1, 4, 4});
  auto out = run(m, {x});
  // ceil_mode: windows start at 0 and 2; the second is cut off at the edge.
  expectClose(out[0], {10, 11, 14, 15});
  std::vector<double> want;
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) {
      double sum = 0;
      for (int r = i - 1; r <= i + 1; ++r)
        for (int c = j - 1; c <= j + 1; ++c)
          if (r >= 0 && r < 4 && c >= 0 && c < 4)
            sum += r * 4 + c;
      want.push_back(sum / 9); // padding counts in the divisor
    }
  expectClose(out[1], want);
}

TEST(OnnxImportNN, GlobalPoolsKeepSpatialDimsAsOnes) {
  ModelBuilder m(13);
  m.input("x", DType::F32, {1, 2, 2, 3});
  m.node("GlobalAveragePool", {"x"}, {"avg"});
  m.node("GlobalMaxPool", {"x"}, {"max"});
  m.output("avg", DType::F32, {1, 2, 1, 1});
  m.output("max", DType::F32, {1, 2, 1, 1});
  auto out = run(m, {iota(DType::F32, {1, 2, 2, 3})});
  expectClose(out[0], {2.5, 8.5});
  expectClose(out[1], {5, 11});
}

TEST(OnnxImportNN, BatchNormalizationInference) {
  ModelBuilder m(15);
  m.input("x", DType::F32, {2, 3, 2});
  Tensor scale = Tensor::fromDoubles(DType::F32, {3}, {1, 2, 0.5});
  Tensor bias = Tensor::fromDoubles(DType::F32, {3}, {0, 1, -1});
  Tensor mean = Tensor::fromDoubles(DType::F32, {3}, {1, 2, 3});
  Tensor var = Tensor::fromDoubles(DType::F32, {3}, {4, 1, 0.25});
  m.initializer("scale", scale);
  m.initializer("bias", bias);
  m.initializer("mean", mean);
  m.initializer("var", var);
  setFloat(m.node("BatchNormalization", {"x", "scale", "bias", "mean", "var"}, {"y"}), "epsilon", 0.0f);
  m.output("y", DType::F32, {2, 3, 2});
  Tensor x = iota(DType::F32, {2, 3, 2});
  Tensor y = run(m, {x})[0];
  std::vector<double> want;
  for (int i = 0; i < 12; ++i) {
    int c = (i / 2) % 3;
    want.push_back((x.getDouble(i) - mean.getDouble(c)) / std::sqrt(var.getDouble(c)) * scale.getDouble(c) +
                   bias.getDouble(c));
  }
  expectClose(y, want, 1e-5);
}

TEST(OnnxImportNN, LayerNormalizationOpset17) {
  ModelBuilder m(17);
  m.input("x", DType::F32, {2, 4});
  m.initializer("scale", Tensor::fromDoubles(DType::F32, {4}, {1, 2, 3, 4}));
  m.initializer("bias", Tensor::fromDoubles(DType::F32, {4}, {0.5, 0.5, 0.5, 0.5}));
  setFloat(m.node("LayerNormalization", {"x", "scale", "bias"}, {"y"}), "epsilon", 0.0f);
  m.output("y", DType::F32, {2, 4});
  Tensor x = Tensor::fromDoubles(DType::F32, {2, 4}, {1, 2, 3, 4, -2, 0, 2, 4});
  Tensor y = run(m, {x})[0];
  std::vector<double> want;
  for (int r = 0; r < 2; ++r) {
    double mean = 0, var = 0;
    for (int k = 0; k < 4; ++k)
      mean += x.getDouble(r * 4 + k) / 4;
    for (int k = 0; k < 4; ++k)
      var += std::pow(x.getDouble(r * 4 + k) - mean, 2) / 4;
    for (int k = 0; k < 4; ++k)
      want.push_back((x.getDouble(r * 4 + k) - mean) / std::sqrt(var) * (k + 1) + 0.5);
  }
  expectClose(y, want, 1e-5);
}

// Softmax at opset 11 normalises over everything from `axis` on (the 2-D coercion); at
// opset 13 over the one dim `axis`.
TEST(OnnxImportNN, SoftmaxAxisSemanticsOpset11VersusOpset13) {
  Tensor x = iota(DType::F32, {2, 3, 4}, 0.1);
  for (int64_t opset : {11, 13}) {
    ModelBuilder m(opset);
    m.input("x", DType::F32, {2, 3, 4});
    setInt(m.node("Softmax", {"x"}, {"y"}), "axis", 1);
    m.output("y", DType::F32, {2, 3, 4});
    Tensor y = run(m, {x})[0];
    std::vector<double> want(24);
    for (int b = 0; b < 2; ++b)
      for (int k = 0; k < 4; ++k)
        for (int j = 0; j < 3; ++j) {
          double sum = 0;
          for (int jj = 0; jj < 3; ++jj)
            for (int kk = 0; kk < 4; ++kk)
              if (opset == 11 || kk == k)
                sum += std::exp(x.getDouble(b * 12 + jj * 4 + kk));
          int i = b * 12 + j * 4 + k;
          want[i] = std::exp(x.getDouble(i)) / sum;
        }
    SCOPED_TRACE(opset);
    expectClose(y, want, 1e-6);
  }
}

TEST(OnnxImportNN, DropoutIsIdentityWithAllTrueMask) {
  ModelBuilder m(13);
  m.input("x", DType::F32, {2, 2});
  m.constant("ratio", Tensor::scalar(DType::F32, 0.5));
  m.node("Dropout", {"x", "ratio"}, {"y", "mask"});
  m.output("y", DType::F32, {2, 2});
  m.output("mask", DType::Bool, {2, 2});
  Tensor x = iota(DType::F32, {2, 2});
  auto out = run(m, {x});
  EXPECT_TRUE(out[0].identical(x));
  expectClose(out[1], {1, 1, 1, 1});
  EXPECT_EQ(out[1].dtype(), DType::Bool);
}

/// Dropout (opset 13) with training_mode true on x = 1, 2, ..., n, outputs y and mask.
ModelBuilder trainingDropoutModel(int64_t n, double ratio, std::optional<int64_t> seed, int nodes = 1) {
  ModelBuilder m(13);
  m.input("x", DType::F32, {n});
  m.constant("ratio", Tensor::scalar(DType::F32, ratio));
  m.constant("training", Tensor::scalar(DType::Bool, 1));
  for (int i = 0; i < nodes; ++i) {
    std::string suffix = std::to_string(i);
    auto &node = m.node("Dropout", {"x", "ratio", "training"}, {"y" + suffix, "mask" + suffix});
    if (seed)
      setInt(node, "seed", *seed);
    m.output("y" + suffix, DType::F32, {n});
    m.output("mask" + suffix, DType::Bool, {n});
  }
  return m;
}

TEST(OnnxImportNN, TrainingDropoutKeepsOneMinusRatioScaledAndDrawsAtTheRandomOffset) {
  const int64_t n = 20000;
  const double ratio = 0.3;
  auto graph = import(trainingDropoutModel(n, ratio, 7));
  ASSERT_EQ(countOps(*graph, ir::OpKind::RandomUniform), 1);
  const ir::Node *draw = findOp(*graph, ir::OpKind::RandomUniform);
  ASSERT_EQ(draw->numInputs(), 1u);
  EXPECT_EQ(draw->input(0)->producer()->attrString("name"), ir::random::kOffsetParam);
  EXPECT_EQ(draw->attrInt("seed"), 7);
  ASSERT_EQ(graph->params().size(), 1u); // the offset, not folded into a constant

  Tensor x = iota(DType::F32, {n}, 1, 1);
  std::vector<Tensor> out = ir::evaluate(*graph, {x});
  int64_t kept = 0;
  for (int64_t i = 0; i < n; ++i) {
    bool keep = out[1].getDouble(i) != 0;
    kept += keep ? 1 : 0;
    ASSERT_NEAR(out[0].getDouble(i), keep ? x.getDouble(i) / (1 - ratio) : 0.0, 1e-6 * x.getDouble(i))
        << "element " << i;
  }
  // Binomial(n, 0.7): the standard deviation is 65 elements; 5 of them either way.
  EXPECT_NEAR(static_cast<double>(kept), 0.7 * n, 5 * std::sqrt(n * 0.7 * 0.3));

  // Another offset (a later training step) draws another mask.
  std::vector<Tensor> next = ir::evaluate(*graph, {x}, {{ir::random::kOffsetParam, Tensor::scalar(DType::I64, 1)}});
  EXPECT_FALSE(next[1].identical(out[1]));
  EXPECT_TRUE(ir::evaluate(*graph, {x})[1].identical(out[1])); // the same offset, the same mask
}

TEST(OnnxImportNN, TrainingDropoutNodesSharingASeedDrawIndependentMasks) {
  auto graph = import(trainingDropoutModel(256, 0.5, std::nullopt, 2));
  ASSERT_EQ(countOps(*graph, ir::OpKind::RandomUniform), 2);
  ASSERT_EQ(graph->params().size(), 1u); // one offset for both
  std::vector<Tensor> out = ir::evaluate(*graph, {iota(DType::F32, {256}, 1, 1)});
  EXPECT_FALSE(out[1].identical(out[3]));
}

TEST(OnnxImportNN, TrainingDropoutAtRatioZeroOrOneAndBadRatios) {
  Tensor x = iota(DType::F32, {64}, 1, 1);
  std::vector<Tensor> none = run(trainingDropoutModel(64, 0.0, 3), {x});
  EXPECT_TRUE(none[0].identical(x));
  // Ratio 0 drops nothing: no draw at all (Swin's attention dropouts, exported in training mode).
  EXPECT_EQ(countOps(*import(trainingDropoutModel(64, 0.0, 3)), ir::OpKind::RandomUniform), 0);
  std::vector<Tensor> all = run(trainingDropoutModel(64, 1.0, 3), {x});
  for (int64_t i = 0; i < 64; ++i) {
    EXPECT_EQ(none[1].getDouble(i), 1.0);
    EXPECT_EQ(all[0].getDouble(i), 0.0);
    EXPECT_EQ(all[1].getDouble(i), 0.0);
  }
  test::expectErrorContaining([] { import(trainingDropoutModel(64, 1.5, 3)); }, "ratio 1.5 is not in [0, 1]");
  ModelBuilder m(13);
  m.input("x", DType::F32, {4});
  m.input("training", DType::Bool, {});
  m.node("Dropout", {"x", "", "training"}, {"y"});
  m.output("y", DType::F32, {4});
  test::expectErrorContaining([&] { import(m); }, "training_mode");
}

TEST(OnnxImportNN, ActivationsFollowTheirFormulas) {
  ModelBuilder m(14);
  m.input("x", DType::F32, {5});
  setFloat(m.node("LeakyRelu", {"x"}, {"leaky"}), "alpha", 0.1f);
  m.node("HardSwish", {"x"}, {"hswish"});
  m.node("Softplus", {"x"}, {"softplus"});
  m.node("Elu", {"x"}, {"elu"});
  for (const char *name : {"leaky", "hswish", "softplus", "elu"})
    m.output(name, DType::F32, {5});
  std::vector<double> xs{-3, -0.5, 0, 1, 40};
  auto out = run(m, {Tensor::fromDoubles(DType::F32, {5}, xs)});
  for (size_t i = 0; i < xs.size(); ++i) {
    double x = xs[i];
    EXPECT_NEAR(out[0].getDouble(i), x < 0 ? 0.1 * x : x, 1e-6);
    EXPECT_NEAR(out[1].getDouble(i), x * std::clamp(x / 6 + 0.5, 0.0, 1.0), 1e-6);
    EXPECT_NEAR(out[2].getDouble(i), std::log1p(std::exp(x)), 1e-5);
    EXPECT_NEAR(out[3].getDouble(i), x < 0 ? std::exp(x) - 1 : x, 1e-6);
  }
}

} // namespace
