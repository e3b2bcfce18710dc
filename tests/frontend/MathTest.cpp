// Elementwise frontend functions and operators: which ops they build (checked on the graph),
// dtype promotion (the inserted casts), broadcasting, and values against loops in the test.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/Error.h"
#include "frontend/Frontend.h"
#include "ir/Evaluator.h"

using namespace kiln;
using namespace kiln::frontend;
using ir::OpKind;

namespace {

/// Finishes the graph with `output` and evaluates it on `inputs`.
Tensor run(GraphBuilder &gb, const Var &output, const std::vector<Tensor> &inputs = {}) {
  auto graph = gb.finish({output});
  return ir::evaluate(*graph, inputs)[0];
}

OpKind opOf(const Var &v) { return v.value()->producer()->op(); }
/// The dtype of operand i of v's producer.
DType operandDType(const Var &v, size_t i) { return v.value()->producer()->input(i)->dtype(); }

Tensor vec(DType dtype, Shape shape, std::vector<double> values) {
  return Tensor::fromDoubles(dtype, std::move(shape), values);
}

} // namespace

TEST(FrontendPromotion, TorchLikeTable) {
  EXPECT_EQ(promoteTypes(DType::F32, DType::F32), DType::F32);
  EXPECT_EQ(promoteTypes(DType::Bool, DType::I8), DType::I8);
  EXPECT_EQ(promoteTypes(DType::I64, DType::Bool), DType::I64);
  EXPECT_EQ(promoteTypes(DType::I32, DType::I64), DType::I64);
  EXPECT_EQ(promoteTypes(DType::I8, DType::I32), DType::I32);
  EXPECT_EQ(promoteTypes(DType::U8, DType::I8), DType::I32); // torch: i16, which kiln lacks
  EXPECT_EQ(promoteTypes(DType::I64, DType::F16), DType::F16);
  EXPECT_EQ(promoteTypes(DType::F16, DType::F32), DType::F32);
  EXPECT_EQ(promoteTypes(DType::F64, DType::F32), DType::F64);
  EXPECT_EQ(promoteTypes(DType::F16, DType::BF16), DType::F32);
  EXPECT_EQ(promoteTypes(DType::Bool, DType::BF16), DType::BF16);
}

TEST(FrontendPromotion, ScalarsTakeTheTensorTypeUnlessOfAHigherCategory) {
  EXPECT_EQ(scalarOperandType(DType::F16, Scalar(2.0).kind), DType::F16);
  EXPECT_EQ(scalarOperandType(DType::F16, Scalar(2).kind), DType::F16);
  EXPECT_EQ(scalarOperandType(DType::I32, Scalar(2).kind), DType::I32);
  EXPECT_EQ(scalarOperandType(DType::I32, Scalar(true).kind), DType::I32);
  EXPECT_EQ(scalarOperandType(DType::I32, Scalar(0.5).kind), DType::F32);
  EXPECT_EQ(scalarOperandType(DType::Bool, Scalar(1).kind), DType::I64);
  EXPECT_EQ(scalarOperandType(DType::Bool, Scalar(false).kind), DType::Bool);
}

TEST(FrontendPromotion, MixedOperandsGetACast) {
  GraphBuilder gb;
  Var a = gb.input("a", DType::I32, {3});
  Var b = gb.input("b", DType::F32, {3});
  Var y = a + b;
  EXPECT_EQ(opOf(y), OpKind::Add);
  EXPECT_EQ(y.dtype(), DType::F32);
  Var castA = Var(y.value()->producer()->input(0), &gb);
  EXPECT_EQ(opOf(castA), OpKind::Cast);
  EXPECT_EQ(castA.value()->producer()->input(0), a.value());
  EXPECT_EQ(operandDType(y, 1), DType::F32);
  // Equal dtypes need no cast: the operands are the inputs themselves.
  Var same = b * b;
  EXPECT_EQ(same.value()->producer()->input(0), b.value());
  auto graph = gb.finish({y});
  auto out = ir::evaluate(*graph, {vec(DType::I32, {3}, {1, 2, 3}), vec(DType::F32, {3}, {0.5, 0.25, -4})});
  EXPECT_EQ(out[0].toDoubles(), (std::vector<double>{1.5, 2.25, -1}));
}

TEST(FrontendPromotion, ScalarOperandsFollowTheTensor) {
  GraphBuilder gb;
  Var h = gb.input("h", DType::F16, {2});
  Var i = gb.input("i", DType::I32, {2});
  Var flag = gb.input("flag", DType::Bool, {2});
  EXPECT_EQ((h * 2.0).dtype(), DType::F16);
  EXPECT_EQ((i * 2).dtype(), DType::I32);
  EXPECT_EQ((i * 0.5).dtype(), DType::F32);
  EXPECT_EQ((flag + 1).dtype(), DType::I64);
  EXPECT_EQ((1.0 - h).dtype(), DType::F16);
  Var scaled = i * 0.5;
  auto graph = gb.finish({scaled});
  auto out = ir::evaluate(*graph, {Tensor(DType::F16, {2}), vec(DType::I32, {2}, {3, -5}), Tensor(DType::Bool, {2})});
  EXPECT_EQ(out[0].toDoubles(), (std::vector<double>{1.5, -2.5}));
}

TEST(FrontendMath, OperatorsBuildTheirOps) {
  GraphBuilder gb;
  Var x = gb.input("x", DType::F32, {2});
  Var y = gb.input("y", DType::F32, {2});
  EXPECT_EQ(opOf(x + y), OpKind::Add);
  EXPECT_EQ(opOf(x - y), OpKind::Sub);
  EXPECT_EQ(opOf(x * y), OpKind::Mul);
  EXPECT_EQ(opOf(x / y), OpKind::Div);
  EXPECT_EQ(opOf(x % y), OpKind::Mod);
  EXPECT_EQ(opOf(-x), OpKind::Neg);
  EXPECT_EQ(opOf(x == y), OpKind::Eq);
  EXPECT_EQ(opOf(x != y), OpKind::Ne);
  EXPECT_EQ(opOf(x < y), OpKind::Lt);
  EXPECT_EQ(opOf(x <= y), OpKind::Le);
  EXPECT_EQ(opOf(x > y), OpKind::Gt);
  EXPECT_EQ(opOf(x >= y), OpKind::Ge);
  EXPECT_EQ((x < y).dtype(), DType::Bool);
  Var b = x > 0.0;
  EXPECT_EQ(opOf(b & b), OpKind::And);
  EXPECT_EQ(opOf(b | b), OpKind::Or);
  EXPECT_EQ(opOf(b ^ b), OpKind::Xor);
  EXPECT_EQ(opOf(!b), OpKind::Not);
  EXPECT_EQ(opOf(pow(x, 2.0)), OpKind::Pow);
  EXPECT_EQ(opOf(maximum(x, y)), OpKind::Max);
  EXPECT_EQ(opOf(minimum(x, 0.0)), OpKind::Min);
  Var acc = x;
  acc += y;
  acc *= 3.0;
  EXPECT_EQ(opOf(acc), OpKind::Mul);
}

TEST(FrontendMath, ArithmeticBroadcastsAndEvaluates) {
  GraphBuilder gb;
  Var a = gb.input("a", DType::F32, {2, 3});
  Var b = gb.input("b", DType::F32, {3});
  Var c = gb.input("c", DType::F32, {2, 1});
  Var y = (a + b) * c - a / 2.0 + 1.0;
  EXPECT_EQ(y.shape(), (Shape{2, 3}));
  std::vector<double> av{1, 2, 3, 4, 5, 6}, bv{10, 20, 30}, cv{2, -1};
  Tensor out = run(gb, y, {vec(DType::F32, {2, 3}, av), vec(DType::F32, {3}, bv), vec(DType::F32, {2, 1}, cv)});
  for (int r = 0; r < 2; ++r)
    for (int k = 0; k < 3; ++k) {
      double want = (av[r * 3 + k] + bv[k]) * cv[r] - av[r * 3 + k] / 2.0 + 1.0;
      EXPECT_NEAR(out.getDouble(r * 3 + k), want, 1e-5);
    }
}

TEST(FrontendMath, BinaryFunctionValues) {
  GraphBuilder gb;
  Var a = gb.input("a", DType::F32, {4});
  Var b = gb.input("b", DType::F32, {4});
  std::vector<Var> ys = {pow(a, b), maximum(a, b), minimum(a, b), mod(a, b), eq(a, b), ne(a, b),
                         lt(a, b),  le(a, b),      gt(a, b),      ge(a, b),  pow(a, 2), 2.0 - a};
  auto graph = gb.finish(ys);
  std::vector<double> av{2, -3, 0.5, 4}, bv{3, -3, 2, -1.5};
  auto out = ir::evaluate(*graph, {vec(DType::F32, {4}, av), vec(DType::F32, {4}, bv)});
  for (size_t k = 0; k < 4; ++k) {
    double x = av[k], y = bv[k];
    double floored = x - std::floor(x / y) * y; // Python's %, the divisor's sign
    std::vector<double> want = {std::pow(x, y), std::max(x, y), std::min(x, y), floored,
                                double(x == y), double(x != y), double(x < y),  double(x <= y),
                                double(x > y),  double(x >= y), x * x,          2.0 - x};
    for (size_t f = 0; f < want.size(); ++f)
      EXPECT_NEAR(out[f].getDouble(static_cast<int64_t>(k)), want[f], 1e-6) << "function " << f << " at " << k;
  }
  EXPECT_EQ(out[4].dtype(), DType::Bool);
}

TEST(FrontendMath, IsNanIsInf) {
  GraphBuilder gb;
  Var x = gb.input("x", DType::F32, {3});
  auto graph = gb.finish({isnan(x), isinf(x)});
  double inf = std::numeric_limits<double>::infinity();
  auto out = ir::evaluate(*graph, {vec(DType::F32, {3}, {std::nan(""), inf, 1})});
  EXPECT_EQ(out[0].toDoubles(), (std::vector<double>{1, 0, 0}));
  EXPECT_EQ(out[1].toDoubles(), (std::vector<double>{0, 1, 0}));
}

TEST(FrontendMath, ScalarOnTheLeft) {
  GraphBuilder gb;
  Var x = gb.input("x", DType::F32, {3});
  Var y = concat({1.0 - x, 2.0 / x, 3.0 * x, 4.0 + x}, 0);
  Tensor out = run(gb, y, {vec(DType::F32, {3}, {1, 2, 4})});
  EXPECT_EQ(out.toDoubles(), (std::vector<double>{0, -1, -3, 2, 1, 0.5, 3, 6, 12, 5, 6, 8}));
}

TEST(FrontendMath, DivisionIsTrueDivision) {
  GraphBuilder gb;
  Var i = gb.input("i", DType::I64, {3});
  Var q = i / 2;
  EXPECT_EQ(q.dtype(), DType::F32);
  Tensor out = run(gb, q, {vec(DType::I64, {3}, {7, -7, 4})});
  EXPECT_EQ(out.toDoubles(), (std::vector<double>{3.5, -3.5, 2}));
}

TEST(FrontendMath, IntegerArithmeticStaysExact) {
  GraphBuilder gb;
  Var i = gb.input("i", DType::I64, {3});
  Var y = i * 3 + (i % 4);
  EXPECT_EQ(y.dtype(), DType::I64);
  Tensor out = run(gb, y, {vec(DType::I64, {3}, {5, -5, 1000000})});
  // Floored modulo as in Python: -5 % 4 == 3.
  EXPECT_EQ(out.toDoubles(), (std::vector<double>{16, -12, 3000000}));
}

TEST(FrontendMath, ComparisonsAndWhere) {
  GraphBuilder gb;
  Var x = gb.input("x", DType::F32, {4});
  Var i = gb.input("i", DType::I32, {4});
  Var mask = (x > 0.0) & (i != 2);
  Var y = where(mask, x, i); // i32 promoted to f32
  EXPECT_EQ(y.dtype(), DType::F32);
  EXPECT_EQ(opOf(y), OpKind::Where);
  Var z = where(x < 0.0, 0.0, x);
  auto graph = gb.finish({y, z});
  auto out = ir::evaluate(*graph, {vec(DType::F32, {4}, {1, -1, 2, 3}), vec(DType::I32, {4}, {7, 8, 2, 9})});
  EXPECT_EQ(out[0].toDoubles(), (std::vector<double>{1, 8, 2, 3}));
  EXPECT_EQ(out[1].toDoubles(), (std::vector<double>{1, 0, 2, 3}));
}

TEST(FrontendMath, LogicalOpsConvertToBool) {
  GraphBuilder gb;
  Var i = gb.input("i", DType::I32, {4});
  Var j = gb.input("j", DType::I32, {4});
  Var y = logicalXor(logicalAnd(i, j), logicalNot(logicalOr(i, j)));
  EXPECT_EQ(y.dtype(), DType::Bool);
  Tensor out = run(gb, y, {vec(DType::I32, {4}, {0, 0, 3, 5}), vec(DType::I32, {4}, {0, 2, 0, -1})});
  // and: 0 0 0 1; not-or: 1 0 0 0; xor: 1 0 0 1
  EXPECT_EQ(out.toDoubles(), (std::vector<double>{1, 0, 0, 1}));
}

TEST(FrontendMath, UnaryFunctions) {
  GraphBuilder gb;
  Var x = gb.input("x", DType::F32, {3});
  std::vector<Var> ys = {neg(x),     abs(x),  exp(x),   expm1(x), log(abs(x)), log1p(abs(x)), sqrt(abs(x)),
                         rsqrt(abs(x)), reciprocal(x), tanh(x), sigmoid(x), erf(x), relu(x), sin(x),
                         cos(x),     tan(x),  asin(x * 0.5), acos(x * 0.5), atan(x), sinh(x), cosh(x),
                         floor(x),   ceil(x), round(x), sign(x)};
  std::vector<double (*)(double)> refs = {
      [](double v) { return -v; },          [](double v) { return std::fabs(v); },
      [](double v) { return std::exp(v); }, [](double v) { return std::expm1(v); },
      [](double v) { return std::log(std::fabs(v)); }, [](double v) { return std::log1p(std::fabs(v)); },
      [](double v) { return std::sqrt(std::fabs(v)); }, [](double v) { return 1 / std::sqrt(std::fabs(v)); },
      [](double v) { return 1 / v; },       [](double v) { return std::tanh(v); },
      [](double v) { return 1 / (1 + std::exp(-v)); }, [](double v) { return std::erf(v); },
      [](double v) { return v > 0 ? v : 0; }, [](double v) { return std::sin(v); },
      [](double v) { return std::cos(v); }, [](double v) { return std::tan(v); },
      [](double v) { return std::asin(v * 0.5); }, [](double v) { return std::acos(v * 0.5); },
      [](double v) { return std::atan(v); }, [](double v) { return std::sinh(v); },
      [](double v) { return std::cosh(v); }, [](double v) { return std::floor(v); },
      [](double v) { return std::ceil(v); }, [](double v) { return std::nearbyint(v); },
      [](double v) { return double((v > 0) - (v < 0)); }};
  ASSERT_EQ(ys.size(), refs.size());
  auto graph = gb.finish(ys);
  std::vector<double> xs{-1.5, 0.25, 1.75};
  auto out = ir::evaluate(*graph, {vec(DType::F32, {3}, xs)});
  for (size_t f = 0; f < refs.size(); ++f)
    for (size_t k = 0; k < xs.size(); ++k)
    {
      double want = refs[f](xs[k]);
      EXPECT_NEAR(out[f].getDouble(k), want, 1e-6 * std::max(1.0, std::fabs(want))) << "function " << f;
    }
}

TEST(FrontendMath, FloatOnlyFunctionsPromoteIntegers) {
  GraphBuilder gb;
  Var i = gb.input("i", DType::I64, {2});
  Var e = exp(i);
  EXPECT_EQ(e.dtype(), DType::F32);
  EXPECT_EQ(opOf(Var(e.value()->producer()->input(0), &gb)), OpKind::Cast);
  EXPECT_EQ(relu(i).dtype(), DType::I64); // relu works on integers directly
  EXPECT_EQ(isnan(i).dtype(), DType::Bool);
  Tensor out = run(gb, e, {vec(DType::I64, {2}, {0, 1})});
  EXPECT_NEAR(out.getDouble(1), std::exp(1.0), 1e-6);
}

TEST(FrontendMath, CastAndClamp) {
  GraphBuilder gb;
  Var x = gb.input("x", DType::F32, {4});
  EXPECT_EQ(cast(x, DType::F32).value(), x.value()); // no-op cast adds nothing
  Var c = cast(x, DType::I32);
  EXPECT_EQ(opOf(c), OpKind::Cast);
  EXPECT_EQ(c.dtype(), DType::I32);
  Var low = clamp(x, -1.0, std::nullopt);
  Var both = clamp(x, -1.0, 1.0);
  EXPECT_EQ(opOf(both), OpKind::Clip);
  auto graph = gb.finish({c, low, both});
  auto out = ir::evaluate(*graph, {vec(DType::F32, {4}, {-2.5, -0.5, 0.5, 7.75})});
  EXPECT_EQ(out[0].toDoubles(), (std::vector<double>{-2, 0, 0, 7})); // truncation toward zero
  EXPECT_EQ(out[1].toDoubles(), (std::vector<double>{-1, -0.5, 0.5, 7.75}));
  EXPECT_EQ(out[2].toDoubles(), (std::vector<double>{-1, -0.5, 0.5, 1}));
}

TEST(FrontendMath, EmptyAndScalarOperands) {
  GraphBuilder gb;
  Var empty = gb.input("e", DType::F32, {0, 3});
  Var s = gb.input("s", DType::F32, {});
  Var y = empty * s + 1.0;
  EXPECT_EQ(y.shape(), (Shape{0, 3}));
  Var z = s * s;
  EXPECT_EQ(z.rank(), 0);
  auto graph = gb.finish({y, z});
  auto out = ir::evaluate(*graph, {Tensor(DType::F32, {0, 3}), Tensor::scalar(DType::F32, 3)});
  EXPECT_EQ(out[0].numElements(), 0);
  EXPECT_EQ(out[1].getDouble(0), 9);
}
