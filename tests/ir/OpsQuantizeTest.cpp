// quantize_linear and dequantize_linear (ir/ops/Quantize.cpp), evaluated through their
// decompositions: hand-computed edge cases of the ONNX formulas (halves to even, saturation,
// negative zero points, per-axis scales, NaN and infinities, an f32 quotient that rounds onto a
// half, i32 operands) and a randomised comparison with a plain loop written here; plus the
// expansion, the text form and the errors; and the integer products' (qmatmul, qconv) type
// rules and qconv's reference against a loop.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "tests/ir/OpTestUtil.h"

using namespace kiln;
using namespace kiln::ir;
using namespace kiln::test;

namespace {

Tensor quantize(const Tensor &x, const Tensor &scale, const Tensor &zeroPoint) {
  return runOp(OpKind::QuantizeLinear, {x, scale, zeroPoint});
}

Tensor dequantize(const Tensor &x, const Tensor &scale, const Tensor &zeroPoint) {
  return runOp(OpKind::DequantizeLinear, {x, scale, zeroPoint});
}

Tensor scalarOf(DType dtype, double value) { return Tensor::scalar(dtype, value); }

TEST(OpsQuantize, RoundsHalvesToEven) {
  Tensor x = f32s({10}, {0.5, 1.5, 2.5, 3.5, -0.5, -1.5, -2.5, -3.5, 2.4999998, 2.5000002});
  Tensor y = quantize(x, scalarOf(DType::F32, 1), scalarOf(DType::I8, 0));
  EXPECT_EQ(y.dtype(), DType::I8);
  EXPECT_EQ(intsOf(y), (std::vector<int64_t>{0, 2, 2, 4, 0, -2, -2, -4, 2, 3}));
  // The halves of x / scale: 5 / 2 = 2.5 -> 2, 7 / 2 = 3.5 -> 4, then the zero point is added.
  y = quantize(f32s({2}, {5, 7}), scalarOf(DType::F32, 2), scalarOf(DType::U8, 10));
  EXPECT_EQ(intsOf(y), (std::vector<int64_t>{12, 14}));
}

// The quotient is one f32 division, as numpy divides float32 arrays: 2.33900881 / 0.935603499
// is 2.50000006 exactly but 2.5 in f32, which rounds to 2; dividing in double would give 3.
TEST(OpsQuantize, RoundsTheF32Quotient) {
  Tensor y = quantize(f32s({}, {2.33900881}), f32s({}, {0.935603499}), scalarOf(DType::U8, 0));
  EXPECT_EQ(intsOf(y), (std::vector<int64_t>{2}));
}

TEST(OpsQuantize, SaturatesToTheZeroPointsType) {
  Tensor x = f32s({8}, {-1000, 1000, 255.4, 255.6, -0.4, -0.6, 254.5, 0});
  EXPECT_EQ(intsOf(quantize(x, scalarOf(DType::F32, 1), scalarOf(DType::U8, 0))),
            (std::vector<int64_t>{0, 255, 255, 255, 0, 0, 254, 0}));
  // A negative zero point: round(x) - 3, then [-128, 127].
  x = f32s({6}, {-124.5, -125.5, 130.5, 131, -1000, 1.5});
  EXPECT_EQ(intsOf(quantize(x, scalarOf(DType::F32, 1), scalarOf(DType::I8, -3))),
            (std::vector<int64_t>{-127, -128, 127, 127, -128, -1}));
}

// The spec leaves NaN undefined; kiln's saturating cast takes it to 0. Infinities saturate.
TEST(OpsQuantize, InfinitiesSaturateAndNaNIsZero) {
  Tensor x = f32s({3}, {kInf, -kInf, kNaN});
  EXPECT_EQ(intsOf(quantize(x, scalarOf(DType::F32, 1), scalarOf(DType::U8, 7))), (std::vector<int64_t>{255, 0, 0}));
  EXPECT_EQ(intsOf(quantize(x, scalarOf(DType::F32, 1), scalarOf(DType::I8, 7))), (std::vector<int64_t>{127, -128, 0}));
}

// Per axis: scale and zero point [3, 1] along dim 1 of x [2, 3, 2].
TEST(OpsQuantize, PerAxis) {
  Tensor x = f32s({2, 3, 2}, {1, 2, 1, 2, 1, 2, 10, -10, 10, -10, 10, -10});
  Tensor scale = f32s({3, 1}, {1, 0.5, 4});
  Tensor zero = tensorOf(DType::U8, {3, 1}, {0, 10, 128});
  EXPECT_EQ(intsOf(quantize(x, scale, zero)), (std::vector<int64_t>{1, 2, 12, 14, 128, 128, 10, 0, 30, 0, 130, 126}));
  Tensor q = tensorOf(DType::U8, {2, 3, 2}, {0, 255, 10, 11, 128, 129, 1, 2, 3, 4, 5, 6});
  expectValues(dequantize(q, scale, zero), {0, 255, 0, 0.5, 0, 4, 1, 2, -3.5, -3, -492, -488});
}

// An i32 x divides in f64 (numpy: int32 / float32 is float64).
TEST(OpsQuantize, I32InputDividesInF64) {
  Tensor x = intTensor(DType::I32, {4}, {5, 7, -5, 1 << 30});
  EXPECT_EQ(intsOf(quantize(x, scalarOf(DType::F32, 2), scalarOf(DType::I8, 0))),
            (std::vector<int64_t>{2, 4, -2, 127}));
}

TEST(OpsQuantize, Dequantizes) {
  Tensor y = dequantize(tensorOf(DType::U8, {3}, {0, 128, 255}), scalarOf(DType::F32, 0.5), scalarOf(DType::U8, 128));
  EXPECT_EQ(y.dtype(), DType::F32);
  expectValues(y, {-64, 0, 63.5});
  y = dequantize(tensorOf(DType::I8, {3}, {-128, 0, 127}), scalarOf(DType::F64, 0.25), scalarOf(DType::I8, -1));
  EXPECT_EQ(y.dtype(), DType::F64);
  expectValues(y, {-31.75, 0.25, 32});
  // An i32 x is rounded to f32 first, as numpy's astype(float32): 2^24 + 1 becomes 2^24.
  y = dequantize(intTensor(DType::I32, {2}, {(1 << 24) + 1, -7}), scalarOf(DType::F32, 1), scalarOf(DType::I32, 0));
  expectValues(y, {16777216, -7});
}

// The plain formula, element by element, for x f32 and per-axis scale and zero point along
// dim 1 of a rank-3 x.
std::vector<int64_t> handQuantize(const Tensor &x, const Tensor &scale, const Tensor &zero) {
  std::vector<int64_t> out;
  int64_t channels = x.shape()[1], inner = x.shape()[2];
  bool u8 = zero.dtype() == DType::U8;
  double lo = u8 ? 0 : -128, hi = u8 ? 255 : 127;
  for (int64_t i = 0; i < x.numElements(); ++i) {
    int64_t c = (i / inner) % channels;
    float quotient = static_cast<float>(x.getDouble(i)) / static_cast<float>(scale.getDouble(c));
    double value = std::nearbyint(static_cast<double>(quotient)) + static_cast<double>(zero.getInt(c));
    out.push_back(static_cast<int64_t>(std::clamp(value, lo, hi)));
  }
  return out;
}

// Random per-axis scales (powers of two, so that x = (k + 1/2) * scale is an exact half, and
// arbitrary ones), zero points across the whole range, values well out of range.
TEST(OpsQuantize, RandomisedAgainstThePlainFormula) {
  std::mt19937 rng(2024);
  for (int trial = 0; trial < 40; ++trial) {
    DType dtype = trial % 2 ? DType::U8 : DType::I8;
    SCOPED_TRACE(trial);
    Shape shape{2, 1 + static_cast<int64_t>(rng() % 4), 1 + static_cast<int64_t>(rng() % 5)};
    int64_t channels = shape[1];
    Tensor scale(TensorType{DType::F32, {channels, 1}}), zero(TensorType{dtype, {channels, 1}});
    for (int64_t c = 0; c < channels; ++c) {
      bool powerOfTwo = rng() % 2;
      scale.setDouble(c, powerOfTwo ? std::ldexp(1.0, static_cast<int>(rng() % 9) - 4)
                                    : std::uniform_real_distribution<double>(1e-3, 3)(rng));
      zero.setInt(c, dtype == DType::U8 ? static_cast<int64_t>(rng() % 256) : static_cast<int64_t>(rng() % 256) - 128);
    }
    Tensor x(TensorType{DType::F32, shape});
    for (int64_t i = 0; i < x.numElements(); ++i) {
      double s = scale.getDouble((i / shape[2]) % channels);
      int64_t k = static_cast<int64_t>(rng() % 801) - 400;
      x.setDouble(i, rng() % 2 ? (static_cast<double>(k) + 0.5) * s
                               : std::uniform_real_distribution<double>(-400, 400)(rng) * s);
    }
    EXPECT_EQ(intsOf(quantize(x, scale, zero)), handQuantize(x, scale, zero));
  }
}

TEST(OpsQuantize, ExpandsToPrimitivesAndRoundTrips) {
  std::vector<TensorType> quantizeTypes{f32({2, 3}), {DType::F32, {1, 3}}, {DType::U8, {}}};
  std::vector<TensorType> dequantizeTypes{{DType::I8, {2, 3}}, {DType::F32, {}}, {DType::I8, {2, 1}}};
  expectExpandsToPrimitives(OpKind::QuantizeLinear, quantizeTypes, {});
  expectExpandsToPrimitives(OpKind::DequantizeLinear, dequantizeTypes, {});
  expectRoundTrip(OpKind::QuantizeLinear, quantizeTypes, {});
  expectRoundTrip(OpKind::DequantizeLinear, dequantizeTypes, {});
}

TEST(OpsQuantize, Errors) {
  TensorType u8Zero{DType::U8, {}}, f32Scale{DType::F32, {}};
  EXPECT_ERROR(inferOne(OpKind::QuantizeLinear, {f32({2}), {DType::I32, {}}, u8Zero}), "the scale must be f32 or f64");
  EXPECT_ERROR(inferOne(OpKind::QuantizeLinear, {f32({2}), f32Scale, {DType::I32, {}}}),
               "the zero point must be u8 or i8");
  EXPECT_ERROR(inferOne(OpKind::QuantizeLinear, {{DType::F64, {2}}, f32Scale, u8Zero}), "x must have the scale's dtype");
  EXPECT_ERROR(inferOne(OpKind::QuantizeLinear, {f32({2}), {DType::F32, {3, 2}}, u8Zero}), "must broadcast into x");
  EXPECT_ERROR(inferOne(OpKind::DequantizeLinear, {{DType::U8, {2}}, f32Scale, {DType::I8, {}}}),
               "the zero point must have x's dtype");
  EXPECT_ERROR(inferOne(OpKind::DequantizeLinear, {f32({2}), f32Scale, {DType::F32, {}}}), "x must be u8, i8 or i32");
}

} // namespace

namespace {

// qmatmul's and qconv's type rules: what each operand must be, and K or the taps within exact
// int32 sums.
TEST(OpsQuantize, IntegerProductErrors) {
  const TensorType f32Scale{DType::F32, {}}, u8Zero{DType::U8, {}};
  EXPECT_ERROR(inferOne(OpKind::QMatMul, {f32({2, 3}), {DType::I8, {3, 4}}, f32Scale, u8Zero, f32Scale}),
               "the activations must be u8 or i8");
  EXPECT_ERROR(inferOne(OpKind::QMatMul, {{DType::U8, {2, 3}}, {DType::I8, {3, 4}}, f32Scale, u8Zero, f32({3})}),
               "the weights' scale must be f32 [] or [4]");
  EXPECT_ERROR(inferOne(OpKind::QMatMul, {{DType::U8, {2, 3}}, {DType::U8, {3, 4}}, f32Scale, u8Zero, f32Scale}),
               "b must be i8 [K, N]");
  const TensorType x{DType::U8, {1, 4, 6, 6}}, w{DType::I8, {5, 4, 3, 3}};
  EXPECT_EQ(inferOne(OpKind::QConv, {x, w, f32Scale, u8Zero, f32({5})}, {{"pads", std::vector<int64_t>{1, 1, 1, 1}}}),
            (TensorType{DType::F32, {1, 5, 6, 6}}));
  EXPECT_ERROR(inferOne(OpKind::QConv, {{DType::U8, {4, 6, 6}}, w, f32Scale, u8Zero, f32Scale}),
               "x must be [N, C, H, W]");
  EXPECT_ERROR(inferOne(OpKind::QConv, {x, {DType::F32, {5, 4, 3, 3}}, f32Scale, u8Zero, f32Scale}),
               "w i8 [K, C/groups, R, S]");
  EXPECT_ERROR(inferOne(OpKind::QConv, {x, w, f32Scale, {DType::I8, {}}, f32Scale}),
               "the activations' scale must be f32 [] and zero point u8 []");
  EXPECT_ERROR(inferOne(OpKind::QConv, {{DType::U8, {1, 8192, 3, 3}}, {DType::I8, {2, 8192, 3, 3}}, f32Scale, u8Zero,
                                        f32Scale}),
               "taps per output are too many for exact int32 sums");
  EXPECT_ERROR(inferOne(OpKind::QConv, {x, w, f32Scale, u8Zero, f32Scale}, {{"groups", int64_t{3}}}),
               "groups 3 must divide");
}

// qconv's reference: the centred integers' exact sums, scaled twice, against a loop written
// here (padding adds nothing: it reads x's zero point).
TEST(OpsQuantize, QConvSumsTheCentredIntegersExactly) {
  std::mt19937 rng(7);
  Tensor x(DType::I8, {1, 2, 5, 4}), w(DType::I8, {3, 2, 2, 3});
  for (int64_t i = 0; i < x.numElements(); ++i)
    x.setDouble(i, static_cast<double>(static_cast<int>(rng() % 256) - 128));
  for (int64_t i = 0; i < w.numElements(); ++i)
    w.setDouble(i, static_cast<double>(static_cast<int>(rng() % 255) - 127));
  Tensor scales(DType::F32, {3});
  for (int64_t i = 0; i < 3; ++i)
    scales.setDouble(i, 0.01 * static_cast<double>(i + 1));
  const int64_t zero = -5;
  const float xScale = 0.125f;
  const Tensor y = runOp(OpKind::QConv, {x, w, Tensor::scalar(DType::F32, xScale), Tensor::scalar(DType::I8, zero), scales},
                         {{"pads", std::vector<int64_t>{1, 0, 0, 2}}, {"strides", std::vector<int64_t>{2, 1}}});
  ASSERT_EQ(y.shape(), (Shape{1, 3, 3, 4})); // (5 + 1 - 2) / 2 + 1 rows, (4 + 2 - 3) + 1 columns
  for (int64_t o = 0; o < 3; ++o)
    for (int64_t oy = 0; oy < 3; ++oy)
      for (int64_t ox = 0; ox < 4; ++ox) {
        int64_t sum = 0;
        for (int64_t c = 0; c < 2; ++c)
          for (int64_t ky = 0; ky < 2; ++ky)
            for (int64_t kx = 0; kx < 3; ++kx) {
              const int64_t iy = oy * 2 + ky - 1, ix = ox + kx;
              if (iy < 0 || iy >= 5 || ix >= 4)
                continue;
              sum += (x.getInt((c * 5 + iy) * 4 + ix) - zero) * w.getInt(((o * 2 + c) * 2 + ky) * 3 + kx);
            }
        const float want = static_cast<float>(sum) * (xScale * static_cast<float>(scales.getDouble(o)));
        EXPECT_EQ(static_cast<float>(y.getDouble((o * 3 + oy) * 4 + ox)), want) << o << " " << oy << " " << ox;
      }
}

} // namespace
