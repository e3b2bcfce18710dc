// Activation composites (ir/ops/Activation.cpp): each op evaluated through its decomposition
// and compared with its ONNX closed form computed here in double, on values that include
// negatives, zero, the points where the pieces meet and large magnitudes, in f64 and f32; plus
// broadcasting (prelu), integers (shrink), hardmax against a hand loop, the primitive-only
// expansion of every decomposition, and the errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>

#include "core/Error.h"
#include "ir/Builder.h"
#include "ir/Evaluator.h"
#include "ir/Verifier.h"
#include "tests/ir/OpTestUtil.h"

using namespace kiln;
using namespace kiln::ir;
using namespace kiln::test;

namespace {

constexpr double kSeluAlpha = 1.67326319217681884765625;
constexpr double kSeluGamma = 1.05070102214813232421875;

// The one-input activations that accept only floats (shrink also takes integers).
const std::vector<OpKind> kFloatOnlyOps = {
    OpKind::Elu,      OpKind::Selu,     OpKind::LeakyRelu, OpKind::HardSigmoid,     OpKind::HardSwish,
    OpKind::Softplus, OpKind::Softsign, OpKind::Celu,      OpKind::ThresholdedRelu, OpKind::Mish};

// Negatives, zero, tiny values, the joints of the piecewise forms (+-0.5, +-1, +-3) and
// magnitudes where a naive exp overflows f32 (100) or f64 (1000).
const std::vector<double> kValues = {-1000, -100, -20, -3, -2.5, -1, -0.5, -0.25, -1e-7, 0,
                                     1e-7,  0.25, 0.5, 1,  2.5,  3,  7,    20,    100,   1000};

// Checks `op` against `closedForm` on kValues in f64 (tight) and f32 (a few ulps: each
// primitive of the decomposition rounds once).
void expectMatchesClosedForm(OpKind op, const AttrMap &attrs,
                             const std::function<double(double)> &closedForm) {
  for (DType dtype : {DType::F64, DType::F32}) {
    Tensor x = Tensor::fromDoubles(dtype, {4, 5}, kValues);
    double tol = dtype == DType::F64 ? 1e-13 : 4e-7;
    EXPECT_TRUE(near(runOp(op, {x}, attrs), mapped(x, closedForm), tol, tol))
        << opName(op) << " " << dtypeName(dtype);
  }
}

double softplusOf(double x) { return x > 500 ? x : std::log1p(std::exp(x)); } // exp(x) overflows past ~709

TEST(OpsActivationClosedForm, EluSeluCelu) {
  auto elu = [](double alpha) { return [alpha](double x) { return x < 0 ? alpha * (std::exp(x) - 1) : x; }; };
  expectMatchesClosedForm(OpKind::Elu, {}, elu(1.0));
  expectMatchesClosedForm(OpKind::Elu, {{"alpha", 0.3}}, elu(0.3));
  expectMatchesClosedForm(OpKind::Selu, {}, [](double x) {
    return kSeluGamma * (x > 0 ? x : kSeluAlpha * std::exp(x) - kSeluAlpha);
  });
  expectMatchesClosedForm(OpKind::Selu, {{"alpha", 2.0}, {"gamma", 3.0}},
                          [](double x) { return 3 * (x > 0 ? x : 2 * std::exp(x) - 2); });
  auto celu = [](double alpha) {
    return [alpha](double x) { return std::max(0.0, x) + std::min(0.0, alpha * (std::exp(x / alpha) - 1)); };
  };
  expectMatchesClosedForm(OpKind::Celu, {}, celu(1.0));
  expectMatchesClosedForm(OpKind::Celu, {{"alpha", 2.0}}, celu(2.0));
  expectMatchesClosedForm(OpKind::Celu, {{"alpha", 0.5}}, celu(0.5));
}

TEST(OpsActivationClosedForm, Rectifiers) {
  expectMatchesClosedForm(OpKind::LeakyRelu, {}, [](double x) { return x < 0 ? 0.01 * x : x; });
  expectMatchesClosedForm(OpKind::LeakyRelu, {{"alpha", 0.2}}, [](double x) { return x < 0 ? 0.2 * x : x; });
  // x == alpha is not above the threshold: 1 maps to 0 with the default alpha.
  expectMatchesClosedForm(OpKind::ThresholdedRelu, {}, [](double x) { return x > 1 ? x : 0; });
  expectMatchesClosedForm(OpKind::ThresholdedRelu, {{"alpha", -0.5}},
                          [](double x) { return x > -0.5 ? x : 0; });
}

TEST(OpsActivationClosedForm, HardSigmoidAndHardSwish) {
  auto hardSigmoid = [](double alpha, double beta) {
    return [=](double x) { return std::max(0.0, std::min(1.0, alpha * x + beta)); };
  };
  expectMatchesClosedForm(OpKind::HardSigmoid, {}, hardSigmoid(0.2, 0.5));
  expectMatchesClosedForm(OpKind::HardSigmoid, {{"alpha", 0.5}, {"beta", 0.25}}, hardSigmoid(0.5, 0.25));
  // hard_swish(-3) = 0 and hard_swish(3) = 3 are the joints of x * relu6(x + 3) / 6.
  expectMatchesClosedForm(OpKind::HardSwish, {},
                          [](double x) { return x * std::max(0.0, std::min(6.0, x + 3)) / 6; });
}

TEST(OpsActivationClosedForm, SoftplusSoftsignMish) {
  expectMatchesClosedForm(OpKind::Softplus, {}, softplusOf);
  expectMatchesClosedForm(OpKind::Softsign, {}, [](double x) { return x / (1 + std::fabs(x)); });
  expectMatchesClosedForm(OpKind::Mish, {}, [](double x) { return x * std::tanh(softplusOf(x)); });
}

TEST(OpsActivationClosedForm, LargeMagnitudesAndInfinities) {
  // Exact expectations, written out: these are the cases a naive formula gets wrong.
  Tensor x = Tensor::fromDoubles(DType::F32, {5}, {-kInf, -1000, 100, 1000, kInf});
  auto expect = [&](OpKind op, std::vector<double> want, AttrMap attrs = {}) {
    EXPECT_TRUE(near(runOp(op, {x}, attrs), Tensor::fromDoubles(DType::F32, {5}, want), 1e-7, 0))
        << opName(op);
  };
  expect(OpKind::Softplus, {0, 0, 100, 1000, kInf}); // not inf: exp(100) overflows f32
  expect(OpKind::Softsign, {-1, -1000 / 1001.0, 100 / 101.0, 1000 / 1001.0, 1});
  expect(OpKind::Mish, {0, 0, 100, 1000, kInf});
  expect(OpKind::Elu, {-2, -2, 100, 1000, kInf}, {{"alpha", 2.0}});
  expect(OpKind::Celu, {-2, -2, 100, 1000, kInf}, {{"alpha", 2.0}});
  expect(OpKind::Selu,
         {-kSeluAlpha * kSeluGamma, -kSeluAlpha * kSeluGamma, 100 * kSeluGamma, 1000 * kSeluGamma, kInf});
  expect(OpKind::HardSwish, {0, 0, 100, 1000, kInf});
  expect(OpKind::LeakyRelu, {-kInf, -10, 100, 1000, kInf});

  // f16 too: softplus(100) has no intermediate that exceeds 65504.
  Tensor half = Tensor::fromDoubles(DType::F16, {2}, {100, -100});
  EXPECT_TRUE(runOp(OpKind::Softplus, {half}).identical(Tensor::fromDoubles(DType::F16, {2}, {100, 0})));
}

TEST(OpsActivationClosedForm, NaNPropagates) {
  Tensor x = Tensor::fromDoubles(DType::F64, {1}, {kNaN});
  for (OpKind op : {OpKind::Elu, OpKind::Selu, OpKind::LeakyRelu, OpKind::HardSigmoid, OpKind::HardSwish,
                    OpKind::Softplus, OpKind::Softsign, OpKind::Celu, OpKind::Mish})
    EXPECT_TRUE(std::isnan(runOp(op, {x}).getDouble(0))) << opName(op);
  // The ops defined by comparisons alone map NaN to their "otherwise" piece, 0, as ONNX's
  // reference (numpy.where) does.
  EXPECT_EQ(runOp(OpKind::ThresholdedRelu, {x}).getDouble(0), 0);
  EXPECT_EQ(runOp(OpKind::Shrink, {x}).getDouble(0), 0);
}

TEST(OpsActivationShapes, ScalarsEmptyTensorsAndF64) {
  std::vector<OpKind> unaryOps = kFloatOnlyOps;
  unaryOps.push_back(OpKind::Shrink);
  Tensor scalar = Tensor::scalar(DType::F64, -2);
  Tensor empty(DType::F32, {0, 3});
  for (OpKind op : unaryOps) {
    Tensor y = runOp(op, {scalar});
    EXPECT_EQ(y.type(), scalar.type()) << opName(op);
    EXPECT_EQ(runOp(op, {empty}).type(), empty.type()) << opName(op);
  }
  EXPECT_DOUBLE_EQ(runOp(OpKind::Elu, {scalar}).getDouble(0), std::exp(-2.0) - 1);
}

TEST(OpsActivationPRelu, SlopeBroadcastsToInput) {
  Tensor x = Tensor::fromDoubles(DType::F64, {2, 3, 2}, {-1, 2, -3, 4, -5, 6, 7, -8, 9, -10, 0, -12});
  // Each slope shape that broadcasts unidirectionally to [2,3,2], with the slope read back by
  // hand at each element's (n, c, w) position.
  struct Case {
    Shape shape;
    std::function<int64_t(int64_t n, int64_t c, int64_t w)> slopeIndex;
  };
  std::vector<Case> cases = {
      {{}, [](int64_t, int64_t, int64_t) { return int64_t(0); }},
      {{1}, [](int64_t, int64_t, int64_t) { return int64_t(0); }},
      {{2}, [](int64_t, int64_t, int64_t w) { return w; }},
      {{3, 1}, [](int64_t, int64_t c, int64_t) { return c; }},
      {{2, 1, 1}, [](int64_t n, int64_t, int64_t) { return n; }},
      {{2, 3, 2}, [](int64_t n, int64_t c, int64_t w) { return n * 6 + c * 2 + w; }},
  };
  for (const Case &c : cases) {
    Tensor slope(DType::F64, c.shape);
    for (int64_t i = 0; i < slope.numElements(); ++i)
      slope.setDouble(i, 0.1 * (i + 1));
    Tensor want(x.type());
    for (int64_t n = 0; n < 2; ++n)
      for (int64_t ch = 0; ch < 3; ++ch)
        for (int64_t w = 0; w < 2; ++w) {
          int64_t i = n * 6 + ch * 2 + w;
          double v = x.getDouble(i);
          want.setDouble(i, v < 0 ? v * slope.getDouble(c.slopeIndex(n, ch, w)) : v);
        }
    EXPECT_TRUE(near(runOp(OpKind::PRelu, {x, slope}), want, 1e-15, 0)) << shapeToString(c.shape);
  }
  // f32, and a zero slope is relu.
  Tensor xf = Tensor::fromDoubles(DType::F32, {3}, {-2, 0, 3});
  EXPECT_TRUE(near(runOp(OpKind::PRelu, {xf, Tensor::scalar(DType::F32, 0)}),
                   Tensor::fromDoubles(DType::F32, {3}, {0, 0, 3}), 0, 0));
}

TEST(OpsActivationPRelu, Errors) {
  TensorType x{DType::F32, {2, 3}};
  TensorType slope4{DType::F32, {4}};
  expectError([&] { inferOne(OpKind::PRelu, {x, slope4}); }, "slope [4] does not broadcast to input [2,3]");
  // Bidirectional broadcasting would widen x; prelu keeps x's shape, so these are errors.
  TensorType column{DType::F32, {2, 1}}, row{DType::F32, {1, 3}};
  expectError([&] { inferOne(OpKind::PRelu, {column, row}); }, "does not broadcast");
  expectError([&] { inferOne(OpKind::PRelu, {x, {DType::F32, {1, 2, 3}}}); }, "does not broadcast");
  expectError([&] { inferOne(OpKind::PRelu, {x, {DType::F64, {3}}}); }, "different dtypes");
  expectError([&] { inferOne(OpKind::PRelu, {{DType::I32, {2, 3}}, {DType::I32, {3}}}); }, "floating-point");
  expectError([&] { inferOne(OpKind::PRelu, {x}); }, "expects 2 inputs");
}

// ONNX Shrink: x + bias below -lambd, x - bias above lambd, 0 between.
double shrinkOf(double x, double bias, double lambd) {
  if (x < -lambd)
    return x + bias;
  if (x > lambd)
    return x - bias;
  return 0;
}

TEST(OpsActivationShrink, FloatsAndIntegers) {
  expectMatchesClosedForm(OpKind::Shrink, {}, [](double x) { return shrinkOf(x, 0, 0.5); });
  expectMatchesClosedForm(OpKind::Shrink, {{"bias", 1.5}, {"lambd", 1.5}},
                          [](double x) { return shrinkOf(x, 1.5, 1.5); });
  // Integers: a fractional lambd still splits exactly (|x| = 1 is inside 1.5, 2 outside).
  std::vector<double> ints = {-4, -2, -1, 0, 1, 2, 4};
  for (DType dtype : {DType::I32, DType::I64, DType::I8}) {
    Tensor x = Tensor::fromDoubles(dtype, {7}, ints);
    Tensor want = mapped(x, [](double v) { return shrinkOf(v, 1, 1.5); });
    EXPECT_TRUE(runOp(OpKind::Shrink, {x}, {{"bias", 1.0}, {"lambd", 1.5}}).identical(want))
        << dtypeName(dtype);
  }
  // i64 beyond 2^53 stays exact; a lambd past the dtype's range leaves nothing outside it.
  Tensor big(DType::I64, {1});
  big.setInt(0, (int64_t(1) << 60) + 1);
  EXPECT_EQ(runOp(OpKind::Shrink, {big}, {{"bias", 1.0}}).getInt(0), int64_t(1) << 60);
  Tensor i8 = Tensor::fromDoubles(DType::I8, {3}, {-128, 0, 127});
  EXPECT_TRUE(runOp(OpKind::Shrink, {i8}, {{"lambd", 1000.0}}).identical(Tensor(DType::I8, {3})));
  Tensor u8 = Tensor::fromDoubles(DType::U8, {3}, {0, 3, 255});
  EXPECT_TRUE(runOp(OpKind::Shrink, {u8}, {{"bias", 2.0}})
                  .identical(Tensor::fromDoubles(DType::U8, {3}, {0, 1, 253})));
}

TEST(OpsActivationShrink, Errors) {
  TensorType f{DType::F32, {2}}, i{DType::I32, {2}};
  expectError([&] { inferOne(OpKind::Shrink, {f}, {{"lambd", -1.0}}); }, "'lambd' must be >= 0");
  expectError([&] { inferOne(OpKind::Shrink, {f}, {{"lambd", kNaN}}); }, "'lambd' must be >= 0");
  expectError([&] { inferOne(OpKind::Shrink, {f}, {{"bias", kNaN}}); }, "'bias' must not be NaN");
  expectError([&] { inferOne(OpKind::Shrink, {i}, {{"bias", 0.5}}); }, "'bias' 0.5 is not a value");
  TensorType u8{DType::U8, {2}};
  expectError([&] { inferOne(OpKind::Shrink, {u8}, {{"bias", -1.0}}); }, "integer input dtype u8");
  expectError([&] { inferOne(OpKind::Shrink, {{DType::Bool, {2}}}); }, "numeric");
}

// Hand loop: for each slice along `axis`, the first position holding the maximum (or the first
// NaN) gets 1.
Tensor handHardmax(const Tensor &x, int64_t axis) {
  Tensor out(x.type());
  int64_t extent = x.shape()[axis], inner = 1, outer = 1;
  for (int64_t d = 0; d < x.rank(); ++d)
    (d < axis ? outer : inner) *= d == axis ? 1 : x.shape()[d];
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      int64_t best = 0;
      for (int64_t k = 1; k < extent; ++k) {
        double candidate = x.getDouble((o * extent + k) * inner + i),
               current = x.getDouble((o * extent + best) * inner + i);
        if (!std::isnan(current) && (std::isnan(candidate) || candidate > current))
          best = k;
      }
      out.setDouble((o * extent + best) * inner + i, 1);
    }
  return out;
}

TEST(OpsActivationHardmax, FirstMaximumAlongAxis) {
  // Ties (3, 3), negatives, -inf and a NaN; every axis of a rank-3 tensor, negative axes too.
  Tensor x =
      Tensor::fromDoubles(DType::F64, {2, 3, 4}, {1,  3,    3, -1, -2, -2, -2, -2, 0, 5,     -kInf, 5,
                                                  -7, kNaN, 2, 2,  -5, 8,  8,  1,  4, -kInf, 0,     0});
  for (int64_t axis : {0, 1, 2, -1, -2, -3}) {
    int64_t positive = axis < 0 ? axis + 3 : axis;
    Tensor got = runOp(OpKind::Hardmax, {x}, {{"axis", axis}});
    EXPECT_TRUE(got.identical(handHardmax(x, positive))) << "axis " << axis << ": " << tensorSummary(got, 24);
  }
  // The default axis is -1; a spot check written out: row [1, 3, 3, -1] marks the first 3.
  Tensor row = runOp(OpKind::Hardmax, {Tensor::fromDoubles(DType::F32, {1, 4}, {1, 3, 3, -1})});
  EXPECT_TRUE(row.identical(Tensor::fromDoubles(DType::F32, {1, 4}, {0, 1, 0, 0})));
  // A size-1 axis is all ones; empty tensors stay empty.
  EXPECT_TRUE(runOp(OpKind::Hardmax, {Tensor::fromDoubles(DType::F32, {3, 1}, {-1, 0, 2})})
                  .identical(Tensor::fromDoubles(DType::F32, {3, 1}, {1, 1, 1})));
  for (Shape shape : {Shape{0, 3}, Shape{2, 0}})
    EXPECT_EQ(runOp(OpKind::Hardmax, {Tensor(DType::F32, shape)}).shape(), shape);
}

TEST(OpsActivationHardmax, Errors) {
  expectError([] { inferOne(OpKind::Hardmax, {{DType::I64, {2, 3}}}); }, "floating-point");
  expectError([] { inferOne(OpKind::Hardmax, {{DType::F32, {2, 3}}}, {{"axis", int64_t(2)}}); }, "axis");
  expectError([] { inferOne(OpKind::Hardmax, {{DType::F32, {}}}); }, "axis");
}

TEST(OpsActivationErrors, FloatOnlyOpsRejectIntegersAndBool) {
  for (OpKind op : kFloatOnlyOps) {
    for (DType dtype : {DType::I32, DType::I64, DType::Bool}) {
      TensorType type{dtype, {2}};
      expectError([&] { inferOne(op, {type}); }, std::string(opName(op)) + "(" + type.toString() + ")");
      expectError([&] { inferOne(op, {type}); }, "must be floating-point");
    }
  }
  TensorType f32{DType::F32, {2}};
  expectError([&] { inferOne(OpKind::Celu, {f32}, {{"alpha", 0.0}}); }, "'alpha' must be non-zero");
  expectError([] { inferOne(OpKind::Elu, {{DType::F32, {2}}}, {{"alpha", std::string("x")}}); }, "alpha");
  expectError([] { inferOne(OpKind::Softplus, {{DType::F32, {2}}}, {{"beta", 1.0}}); }, "beta");
}

TEST(OpsActivationDecomposition, EveryOpExpandsToPrimitives) {
  TensorType x{DType::F32, {2, 3}};
  std::vector<OpKind> unaryOps = kFloatOnlyOps;
  unaryOps.insert(unaryOps.end(), {OpKind::Shrink, OpKind::Hardmax});
  for (OpKind op : unaryOps) {
    EXPECT_TRUE(isComposite(op)) << opName(op);
    expectExpandsToPrimitives(op, {x}, {});
  }
  expectExpandsToPrimitives(OpKind::PRelu, {x, {DType::F32, {3}}}, {});
  expectExpandsToPrimitives(OpKind::Shrink, {{DType::I8, {4}}}, {{"bias", 3.0}});
  expectExpandsToPrimitives(OpKind::Hardmax, {{DType::F64, {2, 3, 4}}}, {{"axis", int64_t(1)}});
  EXPECT_EQ(opTraits(OpKind::Hardmax).fusion, FusionKind::Reduction);
  EXPECT_EQ(opTraits(OpKind::Mish).fusion, FusionKind::Elementwise);
}

} // namespace
