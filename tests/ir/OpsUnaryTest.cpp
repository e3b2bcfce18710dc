// The unary op family (ir/ops/Unary.cpp) through the public API: inference via inferTypes,
// values via the builder + evaluator. Expected values are tabulated, never computed with the
// <cmath> function the evaluator itself calls: the transcendental ones from mpmath 1.2.1 at 40
// significant digits (printed to 20), the exact ones written out by hand.
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <utility>

#include "core/Error.h"
#include "ir/Builder.h"
#include "ir/Evaluator.h"
#include "ir/Verifier.h"
#include "tests/ir/OpTestUtil.h"

using namespace kiln;
using namespace kiln::ir;
using namespace kiln::test;

namespace {

struct FloatCase {
  OpKind op;
  std::vector<std::pair<double, double>> values; // (x, op(x))
};

// Every op that takes floats, at points inside its domain. The points are exact in f32 (the
// small arguments of expm1 and log1p are 2^-33 and 2^-40), so the f32 test's expected value is
// the tabulated one rounded to f32; the two that are not, abs(-1e-300) and sign(1e-30), commute
// with that rounding.
const std::vector<FloatCase> &floatCases() {
  static const std::vector<FloatCase> cases = {
      {OpKind::Neg, {{-2.5, 2.5}, {0, 0}, {3, -3}}},
      {OpKind::Abs, {{-2.5, 2.5}, {0, 0}, {3, 3}, {-1e-300, 1e-300}}},
      {OpKind::Exp, {{-3, 0.049787068367863942979}, {0, 1}, {0.5, 1.6487212707001281468}, {10, 22026.465794806716517}}},
      {OpKind::Expm1,
       {{-1, -0.6321205588285576784}, {0x1p-33, 1.1641532183371107803e-10}, {0, 0}, {2, 6.3890560989306502272}}},
      {OpKind::Log,
       {{0.125, -2.0794415416798359283}, {1, 0}, {2.5, 0.91629073187415506518}, {1e6, 13.815510557964274104}}},
      {OpKind::Log1p,
       {{-0.5, -0.69314718055994530942}, {0x1p-40, 9.0949470177251464761e-13}, {0, 0}, {3, 1.3862943611198906188}}},
      {OpKind::Sqrt, {{0, 0}, {0.25, 0.5}, {2, 1.4142135623730950488}, {1e6, 1000}}},
      {OpKind::Rsqrt, {{0.25, 2}, {2, 0.7071067811865475244}, {1e6, 0.001}}},
      {OpKind::Reciprocal, {{-4, -0.25}, {0.5, 2}, {3, 0.33333333333333333333}}},
      {OpKind::Tanh,
       {{-20, -0.9999999999999999915}, {-0.5, -0.4621171572600097585}, {0, 0}, {1, 0.76159415595576488812}}},
      {OpKind::Sigmoid,
       {{-10, 4.5397868702434394505e-5}, {-0.5, 0.37754066879814543536}, {0, 0.5}, {3, 0.95257412682243321912}}},
      {OpKind::Erf,
       {{-2, -0.99532226501895273416}, {-0.125, -0.14031620480133381739}, {0, 0}, {0.75, 0.7111556336535151316}}},
      {OpKind::Relu, {{-2, 0}, {-0.0, 0}, {0, 0}, {1.5, 1.5}}},
      {OpKind::Sin,
       {{-3, -0.1411200080598672221}, {0, 0}, {0.5, 0.47942553860420300027}, {100, -0.50636564110975879366}}},
      {OpKind::Cos,
       {{-3, -0.98999249660044545727}, {0, 1}, {0.5, 0.87758256189037271612}, {100, 0.8623188722876839341}}},
      {OpKind::Tan,
       {{-1, -1.5574077246549022305}, {0, 0}, {0.5, 0.54630248984379051326}, {1.25, 3.0095696738628312882}}},
      {OpKind::Asin,
       {{-1, -1.5707963267948966192}, {-0.375, -0.38439677449563908304}, {0, 0}, {0.875, 1.0654358165107393123}}},
      {OpKind::Acos,
       {{-1, 3.1415926535897932385},
        {-0.375, 1.9551931012905357023},
        {0, 1.5707963267948966192},
        {0.875, 0.50536051028415730697}}},
      {OpKind::Atan,
       {{-50, -1.5507989928217460862}, {-0.375, -0.3587706702705722204}, {0, 0}, {2, 1.107148717794090503}}},
      {OpKind::Sinh,
       {{-2, -3.6268604078470187677}, {0, 0}, {0.375, 0.38385106791361456875}, {5, 74.203210577788758977}}},
      {OpKind::Cosh, {{-2, 3.7621956910836314596}, {0, 1}, {0.375, 1.0711403467045867673}, {5, 74.209948524787844444}}},
      {OpKind::Asinh,
       {{-2, -1.4436354751788103425}, {0, 0}, {0.375, 0.36672460423013676549}, {5, 2.3124383412727526203}}},
      {OpKind::Acosh, {{1, 0}, {1.25, 0.69314718055994530942}, {2, 1.3169578969248167086}, {100, 5.2982923656104845907}}},
      {OpKind::Atanh,
       {{-0.5, -0.5493061443340548457}, {0, 0}, {0.375, 0.39422868018213508473}, {0.875, 1.354025100551105033}}},
      {OpKind::Floor, {{-2.5, -3}, {-0.25, -1}, {0, 0}, {1.75, 1}}},
      {OpKind::Ceil, {{-2.5, -2}, {-0.25, -0.0}, {0, 0}, {1.75, 2}}},
      {OpKind::Sign, {{-2.5, -1}, {-0.0, 0}, {0, 0}, {1e-30, 1}}},
  };
  return cases;
}

std::vector<OpKind> floatOnlyOps() {
  return {OpKind::Exp,        OpKind::Expm1, OpKind::Log,     OpKind::Log1p, OpKind::Sqrt, OpKind::Rsqrt,
          OpKind::Reciprocal, OpKind::Tanh,  OpKind::Sigmoid, OpKind::Erf,   OpKind::Sin,  OpKind::Cos,
          OpKind::Tan,        OpKind::Asin,  OpKind::Acos,    OpKind::Atan,  OpKind::Sinh, OpKind::Cosh, OpKind::Asinh,
          OpKind::Acosh,      OpKind::Atanh};
}

std::vector<OpKind> numericOps() {
  return {OpKind::Neg, OpKind::Abs, OpKind::Relu, OpKind::Floor, OpKind::Ceil, OpKind::Round, OpKind::Sign};
}

} // namespace

TEST(OpsUnary, EveryUnaryOpIsCoveredHere) {
  std::set<OpKind> covered;
  for (const FloatCase &c : floatCases())
    covered.insert(c.op);
  for (OpKind op : numericOps())
    covered.insert(op);
  covered.insert({OpKind::Not, OpKind::IsNan, OpKind::IsInf});
  for (int i = 0; i < kNumOps; ++i) {
    auto op = static_cast<OpKind>(i);
    if (opTraits(op).family == "Unary") {
      EXPECT_TRUE(covered.count(op)) << opName(op) << " has no test";
    }
  }
}

/// The inputs of a case, in order.
std::vector<double> inputsOf(const FloatCase &c) {
  std::vector<double> inputs;
  for (const auto &[x, value] : c.values)
    inputs.push_back(x);
  return inputs;
}

TEST(OpsUnary, F64MatchesTabulatedValues) {
  for (const FloatCase &c : floatCases()) {
    SCOPED_TRACE(std::string(opName(c.op)));
    int64_t n = static_cast<int64_t>(c.values.size());
    Tensor out = runOp(c.op, {Tensor::fromDoubles(DType::F64, {n}, inputsOf(c))});
    ASSERT_EQ(out.type(), (TensorType{DType::F64, {n}}));
    for (int64_t i = 0; i < n; ++i) {
      auto [x, want] = c.values[static_cast<size_t>(i)];
      EXPECT_NEAR(out.getDouble(i), want, 1e-14 * std::max(1.0, std::fabs(want))) << "x = " << x;
    }
  }
}

TEST(OpsUnary, F32MatchesTabulatedValuesRoundedToFloat) {
  for (const FloatCase &c : floatCases()) {
    SCOPED_TRACE(std::string(opName(c.op)));
    int64_t n = static_cast<int64_t>(c.values.size());
    Tensor out = runOp(c.op, {Tensor::fromDoubles(DType::F32, {n}, inputsOf(c))});
    ASSERT_EQ(out.type(), (TensorType{DType::F32, {n}}));
    for (int64_t i = 0; i < n; ++i) {
      auto [x, value] = c.values[static_cast<size_t>(i)];
      double want = static_cast<float>(value);
      EXPECT_NEAR(out.getDouble(i), want, 1e-7 * std::max(1.0, std::fabs(want))) << "x = " << x;
    }
  }
}

TEST(OpsUnary, HalfPrecisionTypesStayInTheirDType) {
  for (DType dtype : {DType::F16, DType::BF16}) {
    Tensor out = runOp(OpKind::Exp, {Tensor::fromDoubles(dtype, {3}, {-1, 0, 1})});
    ASSERT_EQ(out.dtype(), dtype);
    EXPECT_NEAR(out.getDouble(0), std::exp(-1.0), 4e-3);
    EXPECT_EQ(out.getDouble(1), 1.0);
    EXPECT_NEAR(out.getDouble(2), std::exp(1.0), 2e-2);
  }
}

TEST(OpsUnary, IntegerVariantsAreExact) {
  const int64_t big = (int64_t{1} << 53) + 1; // not representable in double
  std::vector<int64_t> xs = {-7, -1, 0, 3, big, -big};
  Tensor x = intTensor(DType::I64, {6}, xs);
  EXPECT_EQ(intsOf(runOp(OpKind::Neg, {x})), (std::vector<int64_t>{7, 1, 0, -3, -big, big}));
  EXPECT_EQ(intsOf(runOp(OpKind::Abs, {x})), (std::vector<int64_t>{7, 1, 0, 3, big, big}));
  EXPECT_EQ(intsOf(runOp(OpKind::Sign, {x})), (std::vector<int64_t>{-1, -1, 0, 1, 1, -1}));
  EXPECT_EQ(intsOf(runOp(OpKind::Relu, {x})), (std::vector<int64_t>{0, 0, 0, 3, big, 0}));
  for (OpKind op : {OpKind::Floor, OpKind::Ceil, OpKind::Round}) {
    Tensor out = runOp(op, {x});
    EXPECT_EQ(out.dtype(), DType::I64) << opName(op);
    EXPECT_EQ(intsOf(out), xs) << opName(op);
  }
}

TEST(OpsUnary, NarrowIntegerResultsWrapAndKeepTheirDType) {
  Tensor i8 = intTensor(DType::I8, {3}, {-128, -5, 127});
  Tensor neg = runOp(OpKind::Neg, {i8});
  EXPECT_EQ(neg.dtype(), DType::I8);
  EXPECT_EQ(intsOf(neg), (std::vector<int64_t>{-128, 5, -127})); // -(-128) wraps back to -128
  Tensor u8 = intTensor(DType::U8, {3}, {0, 5, 200});
  EXPECT_EQ(intsOf(runOp(OpKind::Neg, {u8})), (std::vector<int64_t>{0, 251, 56}));
  EXPECT_EQ(intsOf(runOp(OpKind::Abs, {u8})), (std::vector<int64_t>{0, 5, 200}));
  EXPECT_EQ(intsOf(runOp(OpKind::Sign, {u8})), (std::vector<int64_t>{0, 1, 1}));
  Tensor i32 = intTensor(DType::I32, {4}, {-3, 0, 4, -2147483647});
  EXPECT_EQ(intsOf(runOp(OpKind::Relu, {i32})), (std::vector<int64_t>{0, 0, 4, 0}));
  EXPECT_EQ(intsOf(runOp(OpKind::Abs, {i32})), (std::vector<int64_t>{3, 0, 4, 2147483647}));
}

TEST(OpsUnary, RoundHalvesToEven) {
  Tensor x =
      Tensor::fromDoubles(DType::F64, {10}, {0.5, 1.5, 2.5, 3.5, -0.5, -1.5, -2.5, 2.4999, 2.5001, -7.2});
  Tensor out = runOp(OpKind::Round, {x});
  expectValues(out, {0, 2, 2, 4, -0.0, -2, -2, 2, 3, -7});
  EXPECT_TRUE(std::signbit(out.getDouble(4))); // round(-0.5) is -0
  expectValues(runOp(OpKind::Round, {Tensor::fromDoubles(DType::F32, {2}, {0.5, 1.5})}), {0, 2});
}

TEST(OpsUnary, NaNAndInfinities) {
  Tensor x = Tensor::fromDoubles(DType::F32, {4}, {kNaN, kInf, -kInf, -0.0});
  expectValues(runOp(OpKind::Relu, {x}), {kNaN, kInf, 0, 0});
  expectValues(runOp(OpKind::Sign, {x}), {kNaN, 1, -1, 0});
  expectValues(runOp(OpKind::Abs, {x}), {kNaN, kInf, kInf, 0});
  expectValues(runOp(OpKind::Exp, {x}), {kNaN, kInf, 0, 1});
  expectValues(runOp(OpKind::Sigmoid, {x}), {kNaN, 1, 0, 0.5});
  expectValues(runOp(OpKind::Floor, {x}), {kNaN, kInf, -kInf, 0});
  expectValues(runOp(OpKind::Log, {Tensor::fromDoubles(DType::F64, {2}, {0, -1})}), {-kInf, kNaN});
}

TEST(OpsUnary, IsNanAndIsInfReturnBool) {
  for (DType dtype : {DType::F32, DType::F64, DType::F16, DType::BF16}) {
    SCOPED_TRACE(std::string(dtypeName(dtype)));
    Tensor x = Tensor::fromDoubles(dtype, {2, 3}, {0, kNaN, kInf, -kInf, -1.5, 1e30});
    Tensor nan = runOp(OpKind::IsNan, {x});
    Tensor inf = runOp(OpKind::IsInf, {x});
    EXPECT_EQ(nan.type(), (TensorType{DType::Bool, {2, 3}}));
    EXPECT_EQ(inf.type(), (TensorType{DType::Bool, {2, 3}}));
    EXPECT_EQ(intsOf(nan), (std::vector<int64_t>{0, 1, 0, 0, 0, 0}));
    // 1e30 overflows f16 to inf but fits f32, f64 and bf16.
    int64_t bigIsInf = dtype == DType::F16 ? 1 : 0;
    EXPECT_EQ(intsOf(inf), (std::vector<int64_t>{0, 0, 1, 1, 0, bigIsInf}));
  }
}

TEST(OpsUnary, NotOnBool) {
  Tensor x = intTensor(DType::Bool, {2, 2}, {1, 0, 0, 1});
  Tensor out = runOp(OpKind::Not, {x});
  EXPECT_EQ(out.type(), (TensorType{DType::Bool, {2, 2}}));
  EXPECT_EQ(intsOf(out), (std::vector<int64_t>{0, 1, 1, 0}));
}

TEST(OpsUnary, ScalarsAndEmptyTensorsKeepTheirShape) {
  Tensor scalar = runOp(OpKind::Sqrt, {Tensor::scalar(DType::F32, 9)});
  EXPECT_EQ(scalar.type(), (TensorType{DType::F32, {}}));
  EXPECT_EQ(scalar.getDouble(0), 3.0);
  Tensor empty = runOp(OpKind::Neg, {Tensor(DType::I32, {2, 0, 3})});
  EXPECT_EQ(empty.type(), (TensorType{DType::I32, {2, 0, 3}}));
  EXPECT_EQ(empty.numElements(), 0);
  EXPECT_EQ(runOp(OpKind::IsNan, {Tensor(DType::F32, {0})}).type(), (TensorType{DType::Bool, {0}}));
}

TEST(OpsUnary, FloatOnlyOpsRejectIntegerAndBool) {
  for (OpKind op : floatOnlyOps()) {
    SCOPED_TRACE(std::string(opName(op)));
    EXPECT_ERROR(inferTypes(op, {{DType::I32, {3}}}, {}), "needs a floating-point operand, got i32");
    EXPECT_ERROR(inferTypes(op, {{DType::Bool, {3}}}, {}), "needs a floating-point operand, got bool");
  }
  EXPECT_ERROR(inferTypes(OpKind::IsNan, {{DType::I64, {2}}}, {}), "floating-point");
  EXPECT_ERROR(inferTypes(OpKind::IsInf, {{DType::U8, {2}}}, {}), "floating-point");
  // The message names the call.
  EXPECT_ERROR(inferTypes(OpKind::Exp, {{DType::I32, {3}}}, {}), "exp(i32[3])");
}

TEST(OpsUnary, NumericOpsRejectBoolAndNotRejectsNumbers) {
  for (OpKind op : numericOps()) {
    SCOPED_TRACE(std::string(opName(op)));
    EXPECT_ERROR(inferTypes(op, {{DType::Bool, {2}}}, {}), "needs a numeric operand, got bool");
  }
  EXPECT_ERROR(inferTypes(OpKind::Not, {{DType::F32, {2}}}, {}), "needs a bool operand, got f32");
  EXPECT_ERROR(inferTypes(OpKind::Not, {{DType::I64, {2}}}, {}), "needs a bool operand, got i64");
  EXPECT_ERROR(inferTypes(OpKind::Neg, {}, {}), "expects 1 inputs, got 0");
}

TEST(OpsUnary, BuilderChainEvaluates) {
  Graph g("unary");
  Value *x = g.addInput({DType::F64, {3}}, "x");
  Builder b(g);
  Value *y = b.create(OpKind::Sqrt, {b.create(OpKind::Abs, {b.create(OpKind::Neg, {x})})});
  g.setOutputs({y, b.create(OpKind::IsNan, {y})});
  verify(g);
  auto out = evaluate(g, {Tensor::fromDoubles(DType::F64, {3}, {4, -2.25, kNaN})});
  expectValues(out[0], {2, 1.5, kNaN});
  EXPECT_EQ(intsOf(out[1]), (std::vector<int64_t>{0, 0, 1}));
  Value *i = g.addInput({DType::I64, {2}}, "i");
  EXPECT_ERROR(b.create(OpKind::Exp, {i}), "exp(i64[2])");
}
