// The unary op family (ir/ops/Unary.cpp) through the public API: inference via inferTypes,
// values via the builder + evaluator. Expected values come from <cmath> in
// double, or are written out by hand.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

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
  double (*reference)(double);
  std::vector<double> inputs;
};

// Every op that takes floats, with inputs inside its domain.
const std::vector<FloatCase> &floatCases() {
  static const std::vector<FloatCase> cases = {
      {OpKind::Neg, [](double x) { return -x; }, {-2.5, 0, 3}},
      {OpKind::Abs, [](double x) { return std::fabs(x); }, {-2.5, 0, 3, -1e-300}},
      {OpKind::Exp, [](double x) { return std::exp(x); }, {-3, 0, 0.5, 10}},
      {OpKind::Expm1, [](double x) { return std::expm1(x); }, {-1, 1e-10, 0, 2}},
      {OpKind::Log, [](double x) { return std::log(x); }, {0.1, 1, 2.5, 1e6}},
      {OpKind::Log1p, [](double x) { return std::log1p(x); }, {-0.5, 1e-12, 0, 3}},
      {OpKind::Sqrt, [](double x) { return std::sqrt(x); }, {0, 0.25, 2, 1e6}},
      {OpKind::Rsqrt, [](double x) { return 1 / std::sqrt(x); }, {0.25, 2, 1e6}},
      {OpKind::Reciprocal, [](double x) { return 1 / x; }, {-4, 0.5, 3}},
      {OpKind::Tanh, [](double x) { return std::tanh(x); }, {-20, -0.5, 0, 1}},
      {OpKind::Sigmoid, [](double x) { return 1 / (1 + std::exp(-x)); }, {-10, -0.5, 0, 3}},
      {OpKind::Erf, [](double x) { return std::erf(x); }, {-2, -0.1, 0, 0.7}},
      {OpKind::Relu, [](double x) { return x > 0 ? x : 0.0; }, {-2, -0.0, 0, 1.5}},
      {OpKind::Sin, [](double x) { return std::sin(x); }, {-3, 0, 0.5, 100}},
      {OpKind::Cos, [](double x) { return std::cos(x); }, {-3, 0, 0.5, 100}},
      {OpKind::Tan, [](double x) { return std::tan(x); }, {-1, 0, 0.5, 1.2}},
      {OpKind::Asin, [](double x) { return std::asin(x); }, {-1, -0.3, 0, 0.9}},
      {OpKind::Acos, [](double x) { return std::acos(x); }, {-1, -0.3, 0, 0.9}},
      {OpKind::Atan, [](double x) { return std::atan(x); }, {-50, -0.3, 0, 2}},
      {OpKind::Sinh, [](double x) { return std::sinh(x); }, {-2, 0, 0.3, 5}},
      {OpKind::Cosh, [](double x) { return std::cosh(x); }, {-2, 0, 0.3, 5}},
      {OpKind::Floor, [](double x) { return std::floor(x); }, {-2.5, -0.2, 0, 1.7}},
      {OpKind::Ceil, [](double x) { return std::ceil(x); }, {-2.5, -0.2, 0, 1.7}},
      {OpKind::Sign, [](double x) { return x > 0 ? 1.0 : (x < 0 ? -1.0 : 0.0); }, {-2.5, -0.0, 0, 1e-30}},
  };
  return cases;
}

std::vector<OpKind> floatOnlyOps() {
  return {OpKind::Exp,        OpKind::Expm1, OpKind::Log,     OpKind::Log1p, OpKind::Sqrt, OpKind::Rsqrt,
          OpKind::Reciprocal, OpKind::Tanh,  OpKind::Sigmoid, OpKind::Erf,   OpKind::Sin,  OpKind::Cos,
          OpKind::Tan,        OpKind::Asin,  OpKind::Acos,    OpKind::Atan,  OpKind::Sinh, OpKind::Cosh};
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

TEST(OpsUnary, F64MatchesStdMath) {
  for (const FloatCase &c : floatCases()) {
    SCOPED_TRACE(std::string(opName(c.op)));
    int64_t n = static_cast<int64_t>(c.inputs.size());
    Tensor out = runOp(c.op, {Tensor::fromDoubles(DType::F64, {n}, c.inputs)});
    ASSERT_EQ(out.type(), (TensorType{DType::F64, {n}}));
    for (int64_t i = 0; i < n; ++i) {
      double want = c.reference(c.inputs[i]);
      EXPECT_NEAR(out.getDouble(i), want, 1e-14 * std::max(1.0, std::fabs(want))) << "x = " << c.inputs[i];
    }
  }
}

TEST(OpsUnary, F32MatchesStdMathRoundedToFloat) {
  for (const FloatCase &c : floatCases()) {
    SCOPED_TRACE(std::string(opName(c.op)));
    int64_t n = static_cast<int64_t>(c.inputs.size());
    Tensor out = runOp(c.op, {Tensor::fromDoubles(DType::F32, {n}, c.inputs)});
    ASSERT_EQ(out.type(), (TensorType{DType::F32, {n}}));
    for (int64_t i = 0; i < n; ++i) {
      double x = static_cast<float>(c.inputs[i]);
      double want = static_cast<float>(c.reference(x));
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
