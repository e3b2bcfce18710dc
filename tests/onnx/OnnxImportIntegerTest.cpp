// ONNX import of the quantisation and integer ops (DequantizeLinear, QuantizeLinear,
// DynamicQuantizeLinear, MatMulInteger, ConvInteger, QLinearMatMul, QLinearConv, BitShift),
// which kiln writes with quantize_linear, dequantize_linear, casts and arithmetic: values against
// the ONNX formulas computed here.
#include <cmath>

#include "OnnxTestModel.h"

using namespace kiln;
using namespace kiln::onnxtest;

namespace {

Tensor u8(const Shape &shape, const std::vector<double> &values) {
  return Tensor::fromDoubles(DType::U8, shape, values);
}
Tensor f32(const Shape &shape, const std::vector<double> &values) {
  return Tensor::fromDoubles(DType::F32, shape, values);
}

/// saturate(round_half_even(v) + zero) into [lo, hi].
double quantize(double v, double zero, double lo, double hi) { return std::clamp(std::nearbyint(v) + zero, lo, hi); }

TEST(OnnxImportInteger, DequantizeLinearPerAxis) {
  ModelBuilder m(13);
  m.input("x", DType::I8, {2, 3});
  m.initializer("scale", f32({3}, {0.5, 2, 0.25}));
  m.initializer("zero", Tensor::fromDoubles(DType::I8, {3}, {1, -2, 0}));
  m.node("DequantizeLinear", {"x", "scale", "zero"}, {"y"}); // axis 1 by default
  m.output("y", DType::F32, {2, 3});
  Tensor x = Tensor::fromDoubles(DType::I8, {2, 3}, {-128, 0, 127, 5, -2, 4});
  double scale[] = {0.5, 2, 0.25}, zero[] = {1, -2, 0};
  std::vector<double> want;
  for (int i = 0; i < 6; ++i)
    want.push_back((x.getDouble(i) - zero[i % 3]) * scale[i % 3]);
  expectClose(run(m, {x})[0], want);
}

TEST(OnnxImportInteger, QuantizeLinearRoundsHalvesToEvenAndSaturates) {
  for (DType dtype : {DType::U8, DType::I8}) {
    SCOPED_TRACE(dtypeName(dtype));
    ModelBuilder m(13);
    m.input("x", DType::F32, {6});
    m.initializer("scale", f32({}, {0.5}));
    m.initializer("zero", Tensor::fromDoubles(dtype, {}, {dtype == DType::U8 ? 10.0 : -10.0}));
    m.node("QuantizeLinear", {"x", "scale", "zero"}, {"y"});
    m.output("y", dtype, {6});
    std::vector<double> xs{1.25, 1.75, -2.25, 100, -100, 0.75};
    Tensor y = run(m, {f32({6}, xs)})[0];
    EXPECT_EQ(y.dtype(), dtype);
    std::vector<double> want;
    for (double v : xs)
      want.push_back(dtype == DType::U8 ? quantize(v / 0.5, 10, 0, 255) : quantize(v / 0.5, -10, -128, 127));
    expectClose(y, want); // 2.5 -> 2 and 3.5 -> 4: halves go to even
  }
}

// Opset 10: no axis, and without a zero point the result is uint8 (zero point 0); a scale of
// shape [1] is per tensor, even for a scalar x.
TEST(OnnxImportInteger, QuantizeLinearWithoutZeroPointIsUint8) {
  ModelBuilder m(10);
  m.input("x", DType::F32, {});
  m.initializer("scale", f32({1}, {2}));
  m.node("QuantizeLinear", {"x", "scale"}, {"q"});
  m.node("DequantizeLinear", {"q", "scale"}, {"y"});
  m.output("q", DType::U8, {});
  m.output("y", DType::F32, {});
  EXPECT_EQ(countOps(*import(m), ir::OpKind::QuantizeLinear), 1);
  auto out = run(m, {f32({}, {5})});
  EXPECT_EQ(out[0].dtype(), DType::U8);
  expectClose(out[0], {2}); // 2.5 -> 2
  expectClose(out[1], {4});
}

TEST(OnnxImportInteger, QuantizeLinearNamesABadZeroPoint) {
  ModelBuilder m(13);
  m.input("x", DType::F32, {2});
  m.initializer("scale", f32({}, {2}));
  m.initializer("zero", Tensor::fromDoubles(DType::I32, {}, {0}));
  m.node("QuantizeLinear", {"x", "scale", "zero"}, {"q"});
  m.output("q", DType::I32, {2});
  expectError([&] { import(m); }, {"QuantizeLinear", "the zero point must be uint8 or int8, got i32"});
}

TEST(OnnxImportInteger, BlockedQuantizationIsNamedUnsupported) {
  ModelBuilder m(13);
  m.input("x", DType::F32, {2, 4});
  m.initializer("scale", f32({2, 2}, {1, 2, 3, 4}));
  setInt(m.node("QuantizeLinear", {"x", "scale"}, {"q"}), "block_size", 2);
  m.output("q", DType::U8, {2, 4});
  expectError([&] { import(m); }, {"QuantizeLinear", "block_size 2 (blocked quantization) is not supported"});
}

TEST(OnnxImportInteger, DynamicQuantizeLinearCoversZero) {
  ModelBuilder m(11);
  m.input("x", DType::F32, {4});
  m.node("DynamicQuantizeLinear", {"x"}, {"y", "scale", "zero"});
  m.output("y", DType::U8, {4});
  m.output("scale", DType::F32, {});
  m.output("zero", DType::U8, {});
  std::vector<double> xs{1, 2.5, 0.5, 4}; // all positive: the range still starts at 0
  auto out = run(m, {f32({4}, xs)});
  double scale = 4.0 / 255;
  EXPECT_NEAR(out[1].getDouble(0), scale, 1e-7);
  EXPECT_EQ(out[2].getDouble(0), 0);
  std::vector<double> want;
  for (double v : xs)
    want.push_back(quantize(static_cast<float>(v / static_cast<float>(scale)), 0, 0, 255));
  expectClose(out[0], want);
}

TEST(OnnxImportInteger, MatMulIntegerPerRowZeroPointAndQLinearMatMul) {
  Tensor a = u8({2, 3}, {10, 20, 30, 40, 50, 60}), b = u8({3, 2}, {1, 2, 3, 4, 5, 6});
  std::vector<double> aZero{10, 40}, acc;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j) {
      double sum = 0;
      for (int k = 0; k < 3; ++k)
        sum += (a.getDouble(i * 3 + k) - aZero[i]) * (b.getDouble(k * 2 + j) - 3);
      acc.push_back(sum);
    }
  {
    ModelBuilder m(10);
    m.input("a", DType::U8, {2, 3});
    m.input("b", DType::U8, {3, 2});
    m.initializer("az", u8({2}, aZero));
    m.initializer("bz", u8({}, {3}));
    m.node("MatMulInteger", {"a", "b", "az", "bz"}, {"y"});
    m.output("y", DType::I32, {2, 2});
    Tensor y = run(m, {a, b})[0];
    EXPECT_EQ(y.dtype(), DType::I32);
    expectClose(y, acc);
  }
  {
    ModelBuilder m(10);
    m.input("a", DType::U8, {2, 3});
    m.input("b", DType::U8, {3, 2});
    m.initializer("as", f32({}, {0.5}));
    m.initializer("az", u8({}, {10}));
    m.initializer("bs", f32({}, {0.25}));
    m.initializer("bz", u8({}, {3}));
    m.initializer("ys", f32({}, {2}));
    m.initializer("yz", u8({}, {100}));
    m.node("QLinearMatMul", {"a", "as", "az", "b", "bs", "bz", "ys", "yz"}, {"y"});
    m.output("y", DType::U8, {2, 2});
    std::vector<double> want;
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 2; ++j) {
        double sum = 0;
        for (int k = 0; k < 3; ++k)
          sum += (a.getDouble(i * 3 + k) - 10) * (b.getDouble(k * 2 + j) - 3);
        want.push_back(quantize(sum * 0.5 * 0.25 / 2, 100, 0, 255));
      }
    expectClose(run(m, {a, b})[0], want);
  }
}

// Padding reads the zero point: the centred input is padded with zeros.
TEST(OnnxImportInteger, ConvIntegerAndQLinearConv) {
  Tensor x = u8({1, 1, 2, 2}, {3, 5, 7, 9}), w = u8({2, 1, 2, 2}, {1, 1, 1, 1, 2, 0, 0, 2});
  std::vector<double> wZero{1, 0}, acc;
  for (int oc = 0; oc < 2; ++oc)
    for (int oh = 0; oh < 3; ++oh)
      for (int ow = 0; ow < 3; ++ow) {
        double sum = 0;
        for (int kh = 0; kh < 2; ++kh)
          for (int kw = 0; kw < 2; ++kw) {
            int ih = oh - 1 + kh, iw = ow - 1 + kw;
            if (ih < 0 || ih > 1 || iw < 0 || iw > 1)
              continue;
            sum += (x.getDouble(ih * 2 + iw) - 2) * (w.getDouble(oc * 4 + kh * 2 + kw) - wZero[oc]);
          }
        acc.push_back(sum);
      }
  {
    ModelBuilder m(10);
    m.input("x", DType::U8, {1, 1, 2, 2});
    m.initializer("w", w);
    m.initializer("xz", u8({}, {2}));
    m.initializer("wz", u8({2}, wZero));
    setInts(m.node("ConvInteger", {"x", "w", "xz", "wz"}, {"y"}), "pads", {1, 1, 1, 1});
    m.output("y", DType::I32, {1, 2, 3, 3});
    expectClose(run(m, {x})[0], acc);
  }
  {
    ModelBuilder m(10);
    m.input("x", DType::U8, {1, 1, 2, 2});
    m.initializer("w", w);
    m.initializer("xs", f32({}, {0.5}));
    m.initializer("xz", u8({}, {2}));
    m.initializer("ws", f32({2}, {1, 0.25}));
    m.initializer("wz", u8({2}, wZero));
    m.initializer("ys", f32({}, {0.5}));
    m.initializer("yz", u8({}, {128}));
    m.initializer("bias", Tensor::fromDoubles(DType::I32, {2}, {4, -8}));
    setInts(m.node("QLinearConv", {"x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "bias"}, {"y"}), "pads", {1, 1, 1, 1});
    m.output("y", DType::U8, {1, 2, 3, 3});
    std::vector<double> want;
    double bias[] = {4, -8}, wScale[] = {1, 0.25};
    for (size_t i = 0; i < acc.size(); ++i)
      want.push_back(quantize((acc[i] + bias[i / 9]) * 0.5 * wScale[i / 9] / 0.5, 128, 0, 255));
    expectClose(run(m, {x})[0], want);
  }
}

TEST(OnnxImportInteger, BitShiftUint8) {
  ModelBuilder m(11);
  m.input("x", DType::U8, {4});
  m.input("s", DType::U8, {4});
  setString(m.node("BitShift", {"x", "s"}, {"left"}), "direction", "LEFT");
  setString(m.node("BitShift", {"x", "s"}, {"right"}), "direction", "RIGHT");
  m.output("left", DType::U8, {4});
  m.output("right", DType::U8, {4});
  auto out = run(m, {u8({4}, {1, 200, 255, 16}), u8({4}, {3, 1, 8, 9})});
  expectClose(out[0], {8, 144, 0, 0}); // 200 << 1 = 400 wraps to 144; 8 and more shift all out
  expectClose(out[1], {0, 100, 0, 0});
}

} // namespace
