// The binary op family (ir/ops/Binary.cpp): broadcasting, dtype rules, float math against
// double arithmetic written here, exact integer math, and the division edge cases.
#include <gtest/gtest.h>

#include <cmath>

#include "core/Error.h"
#include "ir/Builder.h"
#include "ir/Evaluator.h"
#include "ir/Verifier.h"
#include "tests/ir/OpTestUtil.h"

using namespace kiln;
using namespace kiln::ir;
using namespace kiln::test;

namespace {

std::vector<double> iota(int64_t n, double scale) {
  std::vector<double> v;
  for (int64_t i = 0; i < n; ++i)
    v.push_back(static_cast<double>(i) * scale);
  return v;
}

} // namespace

TEST(OpsBinary, FloatArithmeticMatchesDoubleMath) {
  struct Case {
    OpKind op;
    double (*reference)(double, double);
  };
  const std::vector<Case> cases = {
      {OpKind::Add, [](double a, double b) { return a + b; }},
      {OpKind::Sub, [](double a, double b) { return a - b; }},
      {OpKind::Mul, [](double a, double b) { return a * b; }},
      {OpKind::Div, [](double a, double b) { return a / b; }},
      {OpKind::Pow, [](double a, double b) { return std::pow(a, b); }},
      {OpKind::Max, [](double a, double b) { return a > b ? a : b; }},
      {OpKind::Min, [](double a, double b) { return a < b ? a : b; }},
  };
  std::vector<double> a = {-3.5, -1, 0, 0.25, 2, 7, 1e300};
  std::vector<double> b = {2, -0.5, 3, 4, 0.5, -3, 1e10};
  Tensor ta = Tensor::fromDoubles(DType::F64, {7}, a), tb = Tensor::fromDoubles(DType::F64, {7}, b);
  for (const Case &c : cases) {
    SCOPED_TRACE(std::string(opName(c.op)));
    Tensor out = runOp(c.op, {ta, tb});
    EXPECT_EQ(out.type(), (TensorType{DType::F64, {7}}));
    std::vector<double> want;
    for (size_t i = 0; i < a.size(); ++i)
      want.push_back(c.reference(a[i], b[i]));
    expectValues(out, want);
  }
}

TEST(OpsBinary, NarrowFloatsRoundOnce) {
  Tensor out = runOp(OpKind::Add, {Tensor::scalar(DType::F32, 0.1), Tensor::scalar(DType::F32, 0.2)});
  EXPECT_EQ(out.getDouble(0), static_cast<double>(0.1f + 0.2f));
  // f16 has 10 mantissa bits: 1 + 2^-11 is a tie that rounds to even (1), 1 + 3 * 2^-11 to 1 + 2^-9.
  Tensor one = Tensor::fromDoubles(DType::F16, {2}, {1, 1 + std::ldexp(1, -10)});
  Tensor half = Tensor::fromDoubles(DType::F16, {1}, {std::ldexp(1, -11)});
  Tensor sum = runOp(OpKind::Add, {one, half});
  EXPECT_EQ(sum.dtype(), DType::F16);
  expectValues(sum, {1, 1 + std::ldexp(1, -9)});
}

TEST(OpsBinary, BroadcastsRankThreeWithRankTwo) {
  // [2,1,3] op [4,1] -> [2,4,3]; sub checks that the operands keep their order.
  Tensor a = Tensor::fromDoubles(DType::F32, {2, 1, 3}, iota(6, 1));
  Tensor b = Tensor::fromDoubles(DType::F32, {4, 1}, iota(4, 10));
  Tensor ab = runOp(OpKind::Sub, {a, b});
  Tensor ba = runOp(OpKind::Sub, {b, a});
  ASSERT_EQ(ab.shape(), (Shape{2, 4, 3}));
  ASSERT_EQ(ba.shape(), (Shape{2, 4, 3}));
  std::vector<double> wantAB, wantBA;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 4; ++j)
      for (int k = 0; k < 3; ++k) {
        double av = i * 3 + k, bv = j * 10;
        wantAB.push_back(av - bv);
        wantBA.push_back(bv - av);
      }
  expectValues(ab, wantAB);
  expectValues(ba, wantBA);
}

TEST(OpsBinary, ScalarWithTensor) {
  Tensor s = Tensor::scalar(DType::I32, 10);
  Tensor v = Tensor::fromDoubles(DType::I32, {3}, {1, 2, 3});
  Tensor sv = runOp(OpKind::Sub, {s, v});
  EXPECT_EQ(sv.type(), (TensorType{DType::I32, {3}}));
  EXPECT_EQ(intsOf(sv), (std::vector<int64_t>{9, 8, 7}));
  EXPECT_EQ(intsOf(runOp(OpKind::Sub, {v, s})), (std::vector<int64_t>{-9, -8, -7}));
  Tensor ss = runOp(OpKind::Mul, {s, s});
  EXPECT_EQ(ss.type(), (TensorType{DType::I32, {}}));
  EXPECT_EQ(ss.getInt(0), 100);
  Tensor cmp = runOp(OpKind::Lt, {v, Tensor::scalar(DType::I32, 2)});
  EXPECT_EQ(cmp.type(), (TensorType{DType::Bool, {3}}));
  EXPECT_EQ(intsOf(cmp), (std::vector<int64_t>{1, 0, 0}));
}

TEST(OpsBinary, ZeroSizeDims) {
  Tensor out = runOp(OpKind::Add, {Tensor(DType::F32, {0, 3}), Tensor(DType::F32, {1, 3})});
  EXPECT_EQ(out.type(), (TensorType{DType::F32, {0, 3}}));
  EXPECT_EQ(runOp(OpKind::Mul, {Tensor(DType::I64, {2, 0}), Tensor(DType::I64, {2, 1})}).shape(),
            (Shape{2, 0}));
  EXPECT_EQ(runOp(OpKind::Eq, {Tensor(DType::F32, {0}), Tensor::scalar(DType::F32, 1)}).type(),
            (TensorType{DType::Bool, {0}}));
  // Integer division over no elements divides by nothing, so it cannot fail.
  EXPECT_EQ(runOp(OpKind::Div, {Tensor(DType::I32, {0}), Tensor(DType::I32, {1})}).shape(), (Shape{0}));
  EXPECT_ERROR(inferTypes(OpKind::Add, {{DType::F32, {0}}, {DType::F32, {2}}}, {}), "cannot be broadcast");
}

TEST(OpsBinary, InferenceErrorsNameTheProblem) {
  EXPECT_ERROR(inferTypes(OpKind::Add, {{DType::F32, {2, 3}}, {DType::F32, {4}}}, {}),
               "shapes [2,3] and [4] cannot be broadcast");
  EXPECT_ERROR(inferTypes(OpKind::Add, {{DType::F32, {2, 3}}, {DType::F32, {4}}}, {}),
               "add(f32[2,3], f32[4])");
  EXPECT_ERROR(inferTypes(OpKind::Mul, {{DType::F32, {2}}, {DType::I32, {2}}}, {}),
               "different dtypes f32 and i32");
  for (OpKind op : {OpKind::Add, OpKind::Sub, OpKind::Mul, OpKind::Div, OpKind::Pow, OpKind::Max, OpKind::Min,
                    OpKind::Mod, OpKind::Lt, OpKind::Le, OpKind::Gt, OpKind::Ge}) {
    SCOPED_TRACE(std::string(opName(op)));
    EXPECT_ERROR(inferTypes(op, {{DType::Bool, {2}}, {DType::Bool, {2}}}, completeAttrs(op, {})),
                 "needs numeric operands, got bool");
  }
  for (OpKind op : {OpKind::And, OpKind::Or, OpKind::Xor}) {
    SCOPED_TRACE(std::string(opName(op)));
    EXPECT_ERROR(inferTypes(op, {{DType::F32, {2}}, {DType::F32, {2}}}, {}), "needs bool operands, got f32");
    EXPECT_ERROR(inferTypes(op, {{DType::I64, {2}}, {DType::I64, {2}}}, {}), "needs bool operands, got i64");
  }
  EXPECT_ERROR(inferTypes(OpKind::Mod, {{DType::I32, {2}}, {DType::I32, {2}}}, {{"fmod", int64_t{2}}}),
               "'fmod' must be 0");
  EXPECT_ERROR(inferTypes(OpKind::Add, {{DType::F32, {2}}}, {}), "expects 2 inputs, got 1");
}

TEST(OpsBinary, OutputDTypes) {
  for (DType dtype :
       {DType::F32, DType::F16, DType::BF16, DType::F64, DType::I64, DType::I32, DType::I8, DType::U8}) {
    SCOPED_TRACE(std::string(dtypeName(dtype)));
    std::vector<TensorType> in = {{dtype, {2}}, {dtype, {2}}};
    for (OpKind op :
         {OpKind::Add, OpKind::Sub, OpKind::Mul, OpKind::Div, OpKind::Pow, OpKind::Max, OpKind::Min})
      EXPECT_EQ(inferTypes(op, in, {})[0].dtype, dtype) << opName(op);
    EXPECT_EQ(inferTypes(OpKind::Mod, in, completeAttrs(OpKind::Mod, {}))[0].dtype, dtype);
    for (OpKind op : {OpKind::Eq, OpKind::Ne, OpKind::Lt, OpKind::Le, OpKind::Gt, OpKind::Ge})
      EXPECT_EQ(inferTypes(op, in, {})[0].dtype, DType::Bool) << opName(op);
  }
  std::vector<TensorType> bools = {{DType::Bool, {2}}, {DType::Bool, {}}};
  for (OpKind op : {OpKind::Eq, OpKind::Ne, OpKind::And, OpKind::Or, OpKind::Xor})
    EXPECT_EQ(inferTypes(op, bools, {})[0], (TensorType{DType::Bool, {2}})) << opName(op);
}

TEST(OpsBinary, IntegerArithmeticIsExactAndWraps) {
  const int64_t big = (int64_t{1} << 53) + 1; // not representable in double
  Tensor a = intTensor(DType::I64, {4}, {big, big, 3037000499, kI64Max});
  Tensor b = intTensor(DType::I64, {4}, {1, -big, 3037000499, 1});
  EXPECT_EQ(intsOf(runOp(OpKind::Add, {a, b})), (std::vector<int64_t>{big + 1, 0, 6074000998, kI64Min}));
  EXPECT_EQ(intsOf(runOp(OpKind::Sub, {a, b})), (std::vector<int64_t>{big - 1, 2 * big, 0, kI64Max - 1}));
  EXPECT_EQ(intsOf(runOp(OpKind::Mul, {a, b}))[2], 9223372030926249001); // 3037000499^2
  EXPECT_EQ(intsOf(runOp(OpKind::Mul, {a, b}))[0], big);

  Tensor i32 = intTensor(DType::I32, {2}, {2147483647, -2147483647 - 1});
  EXPECT_EQ(intsOf(runOp(OpKind::Add, {i32, intTensor(DType::I32, {1}, {1})})),
            (std::vector<int64_t>{-2147483647 - 1, -2147483647}));
  EXPECT_EQ(intsOf(runOp(OpKind::Sub, {intTensor(DType::U8, {1}, {3}), intTensor(DType::U8, {1}, {5})})),
            (std::vector<int64_t>{254}));
  EXPECT_EQ(intsOf(runOp(OpKind::Add, {intTensor(DType::I8, {1}, {100}), intTensor(DType::I8, {1}, {100})})),
            (std::vector<int64_t>{-56}));
  EXPECT_EQ(intsOf(runOp(OpKind::Mul, {intTensor(DType::U8, {1}, {16}), intTensor(DType::U8, {1}, {16})})),
            (std::vector<int64_t>{0}));
}

TEST(OpsBinary, IntegerDivisionTruncatesTowardZero) {
  std::vector<int64_t> a = {7, -7, 7, -7, 0, 6, kI64Min, kI64Min};
  std::vector<int64_t> b = {2, 2, -2, -2, 5, 3, -1, 1};
  Tensor out = runOp(OpKind::Div, {intTensor(DType::I64, {8}, a), intTensor(DType::I64, {8}, b)});
  EXPECT_EQ(intsOf(out), (std::vector<int64_t>{3, -3, -3, 3, 0, 2, kI64Min, kI64Min}));
  Tensor i8 = runOp(OpKind::Div, {intTensor(DType::I8, {2}, {-128, -9}), intTensor(DType::I8, {2}, {-1, 4})});
  EXPECT_EQ(intsOf(i8), (std::vector<int64_t>{-128, -2})); // 128 wraps to -128
}

TEST(OpsBinary, IntegerDivisionByZeroIsAnError) {
  Graph g("div");
  Value *x = g.addInput({DType::I32, {3}}, "x");
  Value *y = g.addInput({DType::I32, {1}}, "y");
  Builder b(g);
  g.setOutputs({b.create(OpKind::Div, {x, y})});
  verify(g); // only evaluation sees the zero
  Tensor xs = intTensor(DType::I32, {3}, {1, 2, 3});
  EXPECT_ERROR(evaluate(g, {xs, intTensor(DType::I32, {1}, {0})}), "div: integer division by zero");
  EXPECT_EQ(intsOf(evaluate(g, {xs, intTensor(DType::I32, {1}, {2})})[0]), (std::vector<int64_t>{0, 1, 1}));
  for (int64_t fmod : {0, 1})
    EXPECT_ERROR(runOp(OpKind::Mod, {xs, intTensor(DType::I32, {3}, {1, 0, 1})}, {{"fmod", fmod}}),
                 "integer division by zero");
}

TEST(OpsBinary, FloatDivisionByZeroFollowsIEEE) {
  Tensor a = Tensor::fromDoubles(DType::F32, {3}, {1, -1, 0});
  expectValues(runOp(OpKind::Div, {a, Tensor::scalar(DType::F32, 0)}), {kInf, -kInf, kNaN});
  for (int64_t fmod : {0, 1})
    expectValues(runOp(OpKind::Mod, {a, Tensor::scalar(DType::F32, 0)}, {{"fmod", fmod}}),
                 {kNaN, kNaN, kNaN});
}

TEST(OpsBinary, ModSignConventions) {
  std::vector<int64_t> a = {7, -7, 7, -7, 6, -6, kI64Min, 5};
  std::vector<int64_t> b = {3, 3, -3, -3, 3, -3, -1, 7};
  Tensor ta = intTensor(DType::I64, {8}, a), tb = intTensor(DType::I64, {8}, b);
  // Default fmod=0: floored, the sign of the divisor (Python's 7 % -3 == -2).
  EXPECT_EQ(intsOf(runOp(OpKind::Mod, {ta, tb})), (std::vector<int64_t>{1, 2, -2, -1, 0, 0, 0, 5}));
  // fmod=1: truncated, the sign of the dividend (C's -7 % 3 == -1).
  EXPECT_EQ(intsOf(runOp(OpKind::Mod, {ta, tb}, {{"fmod", int64_t{1}}})),
            (std::vector<int64_t>{1, -1, 1, -1, 0, 0, 0, 5}));
  EXPECT_EQ(
      intsOf(runOp(OpKind::Mod, {intTensor(DType::U8, {2}, {200, 7}), intTensor(DType::U8, {2}, {7, 200})})),
      (std::vector<int64_t>{4, 7}));

  std::vector<double> fa = {7.5, -7.5, 7.5, -7.5, -4, 4, -1};
  std::vector<double> fb = {2, 2, -2, -2, 2, -2, kInf};
  Tensor tfa = Tensor::fromDoubles(DType::F64, {7}, fa), tfb = Tensor::fromDoubles(DType::F64, {7}, fb);
  Tensor floored = runOp(OpKind::Mod, {tfa, tfb});
  expectValues(floored, {1.5, 0.5, -0.5, -1.5, 0, 0, kInf});
  EXPECT_FALSE(std::signbit(floored.getDouble(4))); // a zero takes the divisor's sign too
  EXPECT_TRUE(std::signbit(floored.getDouble(5)));
  for (size_t i = 0; i < 6; ++i) // a - b * floor(a / b), exact for these values
    EXPECT_EQ(floored.getDouble(static_cast<int64_t>(i)), fa[i] - fb[i] * std::floor(fa[i] / fb[i]));
  expectValues(runOp(OpKind::Mod, {tfa, tfb}, {{"fmod", int64_t{1}}}), {1.5, -1.5, 1.5, -1.5, -0.0, 0, -1});
}

TEST(OpsBinary, IntegerPowIsExact) {
  std::vector<int64_t> base = {3, -2, 0, 2, 5, -1, 7};
  std::vector<int64_t> exponent = {4, 3, 0, 62, 0, 7, 30};
  Tensor out = runOp(OpKind::Pow, {intTensor(DType::I64, {7}, base), intTensor(DType::I64, {7}, exponent)});
  // 7^30 overflows int64: the expected value is repeated multiplication modulo 2^64.
  uint64_t seven30 = 1;
  for (int i = 0; i < 30; ++i)
    seven30 *= 7;
  EXPECT_EQ(intsOf(out),
            (std::vector<int64_t>{81, -8, 1, int64_t{1} << 62, 1, -1, static_cast<int64_t>(seven30)}));
  Tensor i32 = runOp(OpKind::Pow, {intTensor(DType::I32, {2}, {2, 3}), intTensor(DType::I32, {2}, {31, 19})});
  EXPECT_EQ(intsOf(i32), (std::vector<int64_t>{-2147483647 - 1, 1162261467}));
  EXPECT_ERROR(runOp(OpKind::Pow, {intTensor(DType::I64, {1}, {2}), intTensor(DType::I64, {1}, {-1})}),
               "negative integer exponent");
}

TEST(OpsBinary, MaxMinPropagateNaN) {
  Tensor a = Tensor::fromDoubles(DType::F32, {4}, {kNaN, 1, 2, -kInf});
  Tensor b = Tensor::fromDoubles(DType::F32, {4}, {1, kNaN, 3, 5});
  expectValues(runOp(OpKind::Max, {a, b}), {kNaN, kNaN, 3, 5});
  expectValues(runOp(OpKind::Min, {a, b}), {kNaN, kNaN, 2, -kInf});
  const int64_t big = (int64_t{1} << 53) + 1;
  Tensor ia = intTensor(DType::I64, {2}, {big, -5}), ib = intTensor(DType::I64, {2}, {big - 1, 3});
  EXPECT_EQ(intsOf(runOp(OpKind::Max, {ia, ib})), (std::vector<int64_t>{big, 3}));
  EXPECT_EQ(intsOf(runOp(OpKind::Min, {ia, ib})), (std::vector<int64_t>{big - 1, -5}));
}

TEST(OpsBinary, ComparisonsFollowIEEEAndAreExactOnIntegers) {
  Tensor a = Tensor::fromDoubles(DType::F32, {4}, {1, 2, kNaN, 3});
  Tensor b = Tensor::fromDoubles(DType::F32, {4}, {1, 3, kNaN, 2});
  EXPECT_EQ(intsOf(runOp(OpKind::Eq, {a, b})), (std::vector<int64_t>{1, 0, 0, 0}));
  EXPECT_EQ(intsOf(runOp(OpKind::Ne, {a, b})), (std::vector<int64_t>{0, 1, 1, 1}));
  EXPECT_EQ(intsOf(runOp(OpKind::Lt, {a, b})), (std::vector<int64_t>{0, 1, 0, 0}));
  EXPECT_EQ(intsOf(runOp(OpKind::Le, {a, b})), (std::vector<int64_t>{1, 1, 0, 0}));
  EXPECT_EQ(intsOf(runOp(OpKind::Gt, {a, b})), (std::vector<int64_t>{0, 0, 0, 1}));
  EXPECT_EQ(intsOf(runOp(OpKind::Ge, {a, b})), (std::vector<int64_t>{1, 0, 0, 1}));
  // 2^53 + 1 and 2^53 are one double; compared as int64 they differ.
  const int64_t big = (int64_t{1} << 53) + 1;
  Tensor ia = intTensor(DType::I64, {1}, {big}), ib = intTensor(DType::I64, {1}, {big - 1});
  EXPECT_EQ(runOp(OpKind::Eq, {ia, ib}).getInt(0), 0);
  EXPECT_EQ(runOp(OpKind::Gt, {ia, ib}).getInt(0), 1);
  EXPECT_EQ(runOp(OpKind::Le, {ia, ib}).getInt(0), 0);
  Tensor u8 = runOp(OpKind::Lt, {intTensor(DType::U8, {1}, {200}), intTensor(DType::U8, {1}, {100})});
  EXPECT_EQ(u8.getInt(0), 0); // unsigned: 200 is not negative
}

TEST(OpsBinary, BoolEqualityAndLogicTruthTables) {
  Tensor p = intTensor(DType::Bool, {4}, {1, 1, 0, 0});
  Tensor q = intTensor(DType::Bool, {4}, {1, 0, 1, 0});
  EXPECT_EQ(intsOf(runOp(OpKind::Eq, {p, q})), (std::vector<int64_t>{1, 0, 0, 1}));
  EXPECT_EQ(intsOf(runOp(OpKind::Ne, {p, q})), (std::vector<int64_t>{0, 1, 1, 0}));
  EXPECT_EQ(intsOf(runOp(OpKind::And, {p, q})), (std::vector<int64_t>{1, 0, 0, 0}));
  EXPECT_EQ(intsOf(runOp(OpKind::Or, {p, q})), (std::vector<int64_t>{1, 1, 1, 0}));
  EXPECT_EQ(intsOf(runOp(OpKind::Xor, {p, q})), (std::vector<int64_t>{0, 1, 1, 0}));
  Tensor broadcast = runOp(OpKind::And, {intTensor(DType::Bool, {2, 1}, {1, 0}), q});
  EXPECT_EQ(broadcast.type(), (TensorType{DType::Bool, {2, 4}}));
  EXPECT_EQ(intsOf(broadcast), (std::vector<int64_t>{1, 0, 1, 0, 0, 0, 0, 0}));
}

TEST(OpsBinary, BuilderGraphBroadcastsAndVerifies) {
  Graph g("binary");
  Value *x = g.addInput({DType::F64, {2, 1, 3}}, "x");
  Value *y = g.addInput({DType::F64, {4, 1}}, "y");
  Builder b(g);
  Value *product = b.create(OpKind::Mul, {x, y});
  Value *mask = b.create(OpKind::Gt, {product, b.scalar(DType::F64, 20)});
  g.setOutputs({product, mask});
  verify(g);
  EXPECT_EQ(product->type(), (TensorType{DType::F64, {2, 4, 3}}));
  EXPECT_EQ(mask->type(), (TensorType{DType::Bool, {2, 4, 3}}));
  auto out = evaluate(g, {Tensor::fromDoubles(DType::F64, {2, 1, 3}, iota(6, 1)),
                          Tensor::fromDoubles(DType::F64, {4, 1}, iota(4, 2))});
  std::vector<double> wantProduct, wantMask;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 4; ++j)
      for (int k = 0; k < 3; ++k) {
        double v = (i * 3 + k) * (j * 2.0);
        wantProduct.push_back(v);
        wantMask.push_back(v > 20);
      }
  expectValues(out[0], wantProduct);
  expectValues(out[1], wantMask);
  EXPECT_ERROR(b.create(OpKind::Add, {x, g.addInput({DType::F64, {3, 2}}, "z")}), "cannot be broadcast");
}
