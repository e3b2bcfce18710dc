// ONNX import of elementwise, logic, reduction-composite and rearrangement ops, each compared
// with values computed here from the ONNX formulas.
#include <cmath>
#include <limits>

#include "OnnxTestModel.h"

using namespace kiln;
using namespace kiln::onnxtest;

namespace {

TEST(OnnxImportElementwise, UnaryCompositesMatchTheirFormulas) {
  ModelBuilder m(18);
  m.input("x", DType::F64, {4});
  // Opset 18 for Mish, which ONNX 1.12's own registry lacks (kiln's schema shim supplies it).
  for (const char *op : {"Asinh", "Atanh", "Softsign", "Selu", "Celu", "HardSigmoid", "Mish"})
    m.node(op, {"x"}, {std::string("y_") + op});
  for (const char *op : {"Asinh", "Atanh", "Softsign", "Selu", "Celu", "HardSigmoid", "Mish"})
    m.output(std::string("y_") + op, DType::F64, {4});
  std::vector<double> xs{-0.9, -0.25, 0.0, 0.6};
  auto out = run(m, {Tensor::fromDoubles(DType::F64, {4}, xs)});
  const double alpha = 1.67326319217681884765625, gamma = 1.05070102214813232421875;
  for (size_t i = 0; i < xs.size(); ++i) {
    double x = xs[i];
    EXPECT_NEAR(out[0].getDouble(i), std::asinh(x), 1e-12);
    EXPECT_NEAR(out[1].getDouble(i), std::atanh(x), 1e-12);
    EXPECT_NEAR(out[2].getDouble(i), x / (1 + std::fabs(x)), 1e-12);
    EXPECT_NEAR(out[3].getDouble(i), x > 0 ? gamma * x : gamma * alpha * (std::exp(x) - 1), 1e-12);
    EXPECT_NEAR(out[4].getDouble(i), std::max(0.0, x) + std::min(0.0, std::exp(x) - 1), 1e-12);
    EXPECT_NEAR(out[5].getDouble(i), std::clamp(0.2 * x + 0.5, 0.0, 1.0), 1e-12);
    EXPECT_NEAR(out[6].getDouble(i), x * std::tanh(std::log1p(std::exp(x))), 1e-12);
  }
}

TEST(OnnxImportElementwise, IsInfSignsAndComparisons) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  ModelBuilder m(13);
  m.input("x", DType::F32, {4});
  m.input("y", DType::F32, {4});
  setInt(m.node("IsInf", {"x"}, {"pos"}), "detect_negative", 0);
  m.node("IsInf", {"x"}, {"any"});
  m.node("GreaterOrEqual", {"x", "y"}, {"ge"});
  m.node("Equal", {"x", "y"}, {"eq"});
  m.node("Not", {"eq"}, {"ne"});
  m.node("Where", {"ge", "x", "y"}, {"max"});
  for (const char *name : {"pos", "any", "ge", "eq", "ne"})
    m.output(name, DType::Bool, {4});
  m.output("max", DType::F32, {4});
  auto out = run(m, {Tensor::fromDoubles(DType::F32, {4}, {kInf, -kInf, 1, 2}),
                     Tensor::fromDoubles(DType::F32, {4}, {0, 0, 1, 3})});
  expectClose(out[0], {1, 0, 0, 0});
  expectClose(out[1], {1, 1, 0, 0});
  expectClose(out[2], {1, 0, 1, 0});
  expectClose(out[3], {0, 0, 1, 0});
  expectClose(out[4], {1, 1, 0, 1});
  expectClose(out[5], {kInf, 0, 1, 3});
}

TEST(OnnxImportElementwise, CastCastLikePowAndMod) {
  ModelBuilder m(15);
  m.input("x", DType::F32, {4});
  m.input("n", DType::I64, {4});
  setInt(m.node("Cast", {"x"}, {"xi"}), "to", onnx::TensorProto::INT32);
  m.node("CastLike", {"n", "x"}, {"nf"});
  m.node("Pow", {"x", "n"}, {"pow"}); // exponent of another type (opset 12+)
  m.constant("three", Tensor::scalar(DType::I64, 3));
  m.node("Mod", {"n", "three"}, {"mod"});
  m.output("xi", DType::I32, {4});
  m.output("nf", DType::F32, {4});
  m.output("pow", DType::F32, {4});
  m.output("mod", DType::I64, {4});
  auto out = run(m, {Tensor::fromDoubles(DType::F32, {4}, {-1.7, 2.5, 3, 0.5}),
                     Tensor::fromDoubles(DType::I64, {4}, {-4, 2, 3, 5})});
  expectClose(out[0], {-1, 2, 3, 0}); // truncation toward zero
  expectClose(out[1], {-4, 2, 3, 5});
  expectClose(out[2], {std::pow(-1.7, -4), 6.25, 27, 0.03125});
  expectClose(out[3], {2, 2, 0, 2}); // floored: the sign of the divisor
}

TEST(OnnxImportElementwise, ReduceCompositesAndArgMax) {
  ModelBuilder m(13);
  m.input("x", DType::F32, {2, 3});
  setInts(m.node("ReduceLogSumExp", {"x"}, {"lse"}), "axes", {1});
  auto &l2 = m.node("ReduceL2", {"x"}, {"l2"});
  setInts(l2, "axes", {0});
  setInt(l2, "keepdims", 0);
  setInt(m.node("ArgMax", {"x"}, {"arg"}), "axis", 1);
  m.output("lse", DType::F32, {2, 1});
  m.output("l2", DType::F32, {3});
  m.output("arg", DType::I64, {2, 1});
  Tensor x = Tensor::fromDoubles(DType::F32, {2, 3}, {1, 3, 2, 100, -1, 50});
  auto out = run(m, {x});
  for (int r = 0; r < 2; ++r) {
    double mx = r == 0 ? 3 : 100, sum = 0;
    for (int c = 0; c < 3; ++c)
      sum += std::exp(x.getDouble(r * 3 + c) - mx);
    EXPECT_NEAR(out[0].getDouble(r), mx + std::log(sum), 1e-4);
  }
  expectClose(out[1], {std::hypot(1, 100), std::hypot(3, -1), std::hypot(2, 50)}, 1e-3);
  expectClose(out[2], {1, 0});
}

TEST(OnnxImportElementwise, HardmaxAndConcat) {
  ModelBuilder m(13);
  m.input("x", DType::F32, {2, 3});
  m.node("Hardmax", {"x"}, {"h"});
  setInt(m.node("Concat", {"x", "h"}, {"c"}), "axis", -2);
  m.output("h", DType::F32, {2, 3});
  m.output("c", DType::F32, {4, 3});
  auto out = run(m, {Tensor::fromDoubles(DType::F32, {2, 3}, {1, 5, 5, 7, 0, -1})});
  expectClose(out[0], {0, 1, 0, 1, 0, 0}); // the first maximum wins
  EXPECT_EQ(out[1].shape(), (Shape{4, 3}));
  EXPECT_EQ(out[1].getDouble(7), 1);
}

TEST(OnnxImportElementwise, DepthToSpaceInvertsSpaceToDepth) {
  for (std::string mode : {"DCR", "CRD"}) {
    ModelBuilder m(13);
    m.input("x", DType::F32, {1, 2, 4, 6});
    setInt(m.node("SpaceToDepth", {"x"}, {"d"}), "blocksize", 2);
    auto &back = m.node("DepthToSpace", {"d"}, {"y"});
    setInt(back, "blocksize", 2);
    setString(back, "mode", mode);
    m.output("d", DType::F32, {1, 8, 2, 3});
    m.output("y", DType::F32, {1, 2, 4, 6});
    Tensor x = iota(DType::F32, {1, 2, 4, 6});
    auto out = run(m, {x});
    // SpaceToDepth: channel (bh * 2 + bw) * C + c holds x[c, h*2 + bh, w*2 + bw].
    for (int c = 0; c < 2; ++c)
      for (int h = 0; h < 2; ++h)
        for (int w = 0; w < 3; ++w)
          for (int bh = 0; bh < 2; ++bh)
            for (int bw = 0; bw < 2; ++bw)
              EXPECT_EQ(out[0].getDouble((((bh * 2 + bw) * 2 + c) * 2 + h) * 3 + w),
                        x.getDouble((c * 4 + h * 2 + bh) * 6 + w * 2 + bw));
    SCOPED_TRACE(mode);
    if (mode == "DCR")
      EXPECT_TRUE(out[1].identical(x)); // DCR is SpaceToDepth's inverse
    else
      EXPECT_EQ(out[1].shape(), x.shape());
  }
}

TEST(OnnxImportElementwise, Opset7ModelWithBatchNormSpatialAndDropoutMask) {
  ModelBuilder m(7);
  m.input("x", DType::F32, {1, 2, 2});
  for (const char *name : {"s", "b", "mean", "var"})
    m.initializer(name, Tensor::fromDoubles(DType::F32, {2}, {1, 1}));
  auto &bn = m.node("BatchNormalization", {"x", "s", "b", "mean", "var"}, {"y"});
  setInt(bn, "spatial", 1);
  setFloat(bn, "epsilon", 0);
  m.node("Dropout", {"y"}, {"z", "mask"});
  m.output("z", DType::F32, {1, 2, 2});
  m.output("mask", DType::F32, {1, 2, 2}); // opset 7: the mask has the data's type
  auto out = run(m, {iota(DType::F32, {1, 2, 2})});
  // (x - 1) / sqrt(1) * 1 + 1 = x
  expectClose(out[0], {0, 1, 2, 3});
  expectClose(out[1], {1, 1, 1, 1});

  ModelBuilder bad(7);
  bad.input("x", DType::F32, {1, 2, 2});
  for (const char *name : {"s", "b", "mean", "var"})
    bad.initializer(name, Tensor::fromDoubles(DType::F32, {2}, {1, 1}));
  setInt(bad.node("BatchNormalization", {"x", "s", "b", "mean", "var"}, {"y"}, "bn"), "spatial", 0);
  bad.output("y", DType::F32, {1, 2, 2});
  expectError([&] { import(bad); }, {"node 'bn' (BatchNormalization)", "spatial=0"});
}

} // namespace
