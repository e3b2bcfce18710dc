// quantize_linear and dequantize_linear compiled, bit for bit against the reference evaluator:
// per-tensor and per-axis, u8 and i8, on values at every rounding edge (exact halves, an f32
// quotient that rounds onto a half, out-of-range values, infinities, NaN); and the ONNX
// QLinearMatMul whose int32 sum is above 2^24, where rescaling in f32 would round it first.
#include <cmath>
#include <limits>
#include <random>

#include <gtest/gtest.h>

#include "ir/Builder.h"
#include "ir/Evaluator.h"
#include "tests/codegen/CodegenTestUtil.h"
#include "tests/onnx/OnnxTestModel.h"

namespace kiln::codegen::test {
namespace {

using ir::OpKind;

constexpr int64_t kChannels = 3, kInner = 37;
const double kScales[kChannels] = {0.25, 0.935603499, 3};

// x [4, kChannels, kInner]: exact halves of x / scale (scale 0.25 and 3 divide them exactly),
// the quotient 2.33900881 / 0.935603499 that is 2.5 only in f32, values far out of range, and
// random ones.
Tensor edgeInput() {
  Tensor x(DType::F32, {4, kChannels, kInner});
  std::mt19937 rng(11);
  constexpr double kInf = std::numeric_limits<double>::infinity();
  const double specials[] = {2.33900881, -2.33900881, 1e9, -1e9, kInf, -kInf, std::nan(""), 0.0, -0.0};
  for (int64_t i = 0; i < x.numElements(); ++i) {
    double scale = kScales[(i / kInner) % kChannels];
    int64_t j = i % kInner;
    double value = static_cast<double>(static_cast<int64_t>(rng() % 601) - 300) + 0.5;
    if (j < 9)
      value = specials[j];
    else if (j < 20)
      value *= scale;
    else
      value = std::uniform_real_distribution<double>(-300, 300)(rng) * scale;
    x.setDouble(i, value);
  }
  return x;
}

Tensor perChannel(DType dtype, const std::vector<double> &values) {
  return Tensor::fromDoubles(dtype, {kChannels, 1}, values);
}

TEST(CodegenQuantize, PerAxisAndPerTensorAreBitIdentical) {
  ir::Graph graph;
  ir::Builder b(graph);
  ir::Value *x = graph.addInput({DType::F32, {4, kChannels, kInner}}, "x");
  ir::Value *scale = b.constant(perChannel(DType::F32, {kScales[0], kScales[1], kScales[2]}));
  ir::Value *u8Zero = b.constant(perChannel(DType::U8, {0, 128, 255}));
  ir::Value *i8Zero = b.constant(perChannel(DType::I8, {-128, -5, 127}));
  ir::Value *q = b.create(OpKind::QuantizeLinear, {x, scale, u8Zero});
  ir::Value *qs = b.create(OpKind::QuantizeLinear, {x, scale, i8Zero});
  // A scale that is an input, not a constant: nothing may fold the division.
  ir::Value *tensorScale = graph.addInput({DType::F32, {}}, "scale");
  ir::Value *qt = b.create(OpKind::QuantizeLinear, {x, tensorScale, b.scalar(DType::I8, 3)});
  graph.setOutputs({q, qs, qt, b.create(OpKind::DequantizeLinear, {q, scale, u8Zero}),
                    b.create(OpKind::DequantizeLinear, {qs, tensorScale, b.scalar(DType::I8, -7)})});
  expectBitIdentical(graph, {edgeInput(), Tensor::scalar(DType::F32, 0.935603499)});
}

// a [1, 261] . b [261, 1] = 259 * 255 * 255 + 255 * 5 + 3 * 1 = 2^24 + 2^16 + 1, scaled by
// 1 / 2^17: 128.5 + 2^-17, which rounds to 129. In f32 the sum would first round to
// 2^24 + 2^16, a tie that rounds to 128.
TEST(CodegenQuantize, QLinearMatMulRescalesTheExactSum) {
  onnxtest::ModelBuilder m(10);
  m.input("a", DType::U8, {1, 261});
  m.input("b", DType::U8, {261, 1});
  m.initializer("as", Tensor::scalar(DType::F32, 1));
  m.initializer("bs", Tensor::scalar(DType::F32, 1));
  m.initializer("ys", Tensor::scalar(DType::F32, 131072));
  m.initializer("zero", Tensor::scalar(DType::U8, 0));
  m.node("QLinearMatMul", {"a", "as", "zero", "b", "bs", "zero", "ys", "zero"}, {"y"});
  m.output("y", DType::U8, {1, 1});
  std::vector<double> a(261, 255), b(261, 255);
  a[259] = 255, b[259] = 5, a[260] = 3, b[260] = 1;
  std::vector<Tensor> inputs{Tensor::fromDoubles(DType::U8, {1, 261}, a), Tensor::fromDoubles(DType::U8, {261, 1}, b)};
  std::unique_ptr<ir::Graph> graph = onnxtest::import(m);
  EXPECT_EQ(ir::evaluate(*graph, inputs)[0].getInt(0), 129);
  expectBitIdentical(*graph, inputs);
}

} // namespace
} // namespace kiln::codegen::test
