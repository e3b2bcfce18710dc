// where, cast and clip (ir/ops/Elementwise.cpp). Rounding expectations are worked out by hand
// from the formats' mantissa widths.
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

Tensor cast(const Tensor &x, DType to) { return runOp(OpKind::Cast, {x}, {{"to", to}}); }

Tensor clip(const Tensor &x, double lo, double hi) {
  return runOp(OpKind::Clip, {x}, {{"min", lo}, {"max", hi}});
}

} // namespace

// --- where ---

TEST(OpsElementwise, WhereSelectsPerElement) {
  Tensor cond = intTensor(DType::Bool, {4}, {1, 0, 0, 1});
  Tensor x = Tensor::fromDoubles(DType::F32, {4}, {1, 2, 3, kNaN});
  Tensor y = Tensor::fromDoubles(DType::F32, {4}, {-1, -2, kNaN, -4});
  Tensor out = runOp(OpKind::Where, {cond, x, y});
  EXPECT_EQ(out.type(), (TensorType{DType::F32, {4}}));
  expectValues(out, {1, -2, kNaN, kNaN});
}

TEST(OpsElementwise, WhereBroadcastsThreeWays) {
  // cond [1,4,1], x [2,1,3], y [3] -> [2,4,3]
  std::vector<int64_t> condValues = {1, 0, 0, 1};
  Tensor cond = intTensor(DType::Bool, {1, 4, 1}, condValues);
  std::vector<double> xs = {0, 1, 2, 3, 4, 5}, ys = {-10, -20, -30};
  Tensor out = runOp(OpKind::Where, {cond, Tensor::fromDoubles(DType::F64, {2, 1, 3}, xs),
                                     Tensor::fromDoubles(DType::F64, {3}, ys)});
  ASSERT_EQ(out.shape(), (Shape{2, 4, 3}));
  std::vector<double> want;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 4; ++j)
      for (int k = 0; k < 3; ++k)
        want.push_back(condValues[j] ? xs[i * 3 + k] : ys[k]);
  expectValues(out, want);
}

TEST(OpsElementwise, WhereOnIntegersIsExactAndAcceptsScalars) {
  const int64_t big = (int64_t{1} << 53) + 1;
  Tensor cond = intTensor(DType::Bool, {3}, {0, 1, 0});
  Tensor out = runOp(OpKind::Where,
                     {cond, intTensor(DType::I64, {}, {big}), intTensor(DType::I64, {3}, {1, 2, -big})});
  EXPECT_EQ(out.type(), (TensorType{DType::I64, {3}}));
  EXPECT_EQ(intsOf(out), (std::vector<int64_t>{1, big, -big}));
  Tensor bools = runOp(OpKind::Where, {intTensor(DType::Bool, {}, {1}), intTensor(DType::Bool, {2}, {0, 1}),
                                       intTensor(DType::Bool, {2}, {1, 1})});
  EXPECT_EQ(bools.type(), (TensorType{DType::Bool, {2}}));
  EXPECT_EQ(intsOf(bools), (std::vector<int64_t>{0, 1}));
  Tensor empty =
      runOp(OpKind::Where, {Tensor(DType::Bool, {0, 1}), Tensor(DType::U8, {1, 3}), Tensor(DType::U8, {})});
  EXPECT_EQ(empty.type(), (TensorType{DType::U8, {0, 3}}));
}

TEST(OpsElementwise, WhereErrors) {
  EXPECT_ERROR(inferTypes(OpKind::Where, {{DType::F32, {2}}, {DType::F32, {2}}, {DType::F32, {2}}}, {}),
               "condition must be bool, got f32");
  EXPECT_ERROR(inferTypes(OpKind::Where, {{DType::Bool, {2}}, {DType::F32, {2}}, {DType::I32, {2}}}, {}),
               "different dtypes f32 and i32");
  EXPECT_ERROR(inferTypes(OpKind::Where, {{DType::Bool, {2, 1}}, {DType::F32, {3}}, {DType::F32, {4}}}, {}),
               "cannot be broadcast");
  EXPECT_ERROR(inferTypes(OpKind::Where, {{DType::Bool, {2}}, {DType::F32, {2}}}, {}), "expects 3 inputs");
}

// --- cast ---

TEST(OpsElementwise, CastFloatToIntegerTruncatesAndSaturates) {
  Tensor x = Tensor::fromDoubles(DType::F32, {7}, {2.7, -2.7, 0.5, -0.5, 1e10, -1e10, kNaN});
  Tensor i32 = cast(x, DType::I32);
  EXPECT_EQ(i32.type(), (TensorType{DType::I32, {7}}));
  EXPECT_EQ(intsOf(i32), (std::vector<int64_t>{2, -2, 0, 0, kI32Max, kI32Min, 0}));
  EXPECT_EQ(intsOf(cast(Tensor::fromDoubles(DType::F64, {3}, {3.9, 255.5, -1}), DType::U8)),
            (std::vector<int64_t>{3, 255, 0}));
  // 2^53 + 2 is a double; it converts to i64 exactly.
  EXPECT_EQ(cast(Tensor::scalar(DType::F64, 9007199254740994.0), DType::I64).getInt(0), 9007199254740994);
}

TEST(OpsElementwise, CastToBoolIsNonZero) {
  Tensor f = Tensor::fromDoubles(DType::F32, {5}, {0, -0.0, 0.5, kNaN, -kInf});
  EXPECT_EQ(intsOf(cast(f, DType::Bool)), (std::vector<int64_t>{0, 0, 1, 1, 1}));
  Tensor i = intTensor(DType::I64, {4}, {0, 2, -1, int64_t{1} << 40});
  EXPECT_EQ(intsOf(cast(i, DType::Bool)), (std::vector<int64_t>{0, 1, 1, 1}));
  Tensor b = intTensor(DType::Bool, {2}, {1, 0});
  expectValues(cast(b, DType::F32), {1, 0});
  EXPECT_EQ(intsOf(cast(b, DType::I64)), (std::vector<int64_t>{1, 0}));
}

TEST(OpsElementwise, CastBetweenIntegersWrapsAndStaysExact) {
  const int64_t big = (int64_t{1} << 53) + 1;
  Tensor i64 = intTensor(DType::I64, {4}, {(int64_t{1} << 32) + 5, -1, int64_t{1} << 31, big});
  EXPECT_EQ(intsOf(cast(i64, DType::I32)), (std::vector<int64_t>{5, -1, kI32Min, 1}));
  EXPECT_EQ(intsOf(cast(i64, DType::I64)),
            (std::vector<int64_t>{(int64_t{1} << 32) + 5, -1, int64_t{1} << 31, big}));
  EXPECT_EQ(intsOf(cast(intTensor(DType::I64, {3}, {-1, 256, 300}), DType::U8)),
            (std::vector<int64_t>{255, 0, 44}));
  EXPECT_EQ(intsOf(cast(intTensor(DType::U8, {2}, {200, 127}), DType::I8)), (std::vector<int64_t>{-56, 127}));
  EXPECT_EQ(intsOf(cast(intTensor(DType::I8, {1}, {-1}), DType::I64)), (std::vector<int64_t>{-1}));
}

TEST(OpsElementwise, CastIntegerToFloatRoundsOnce) {
  // 2^60 + 2^36 + 1 lies just above the midpoint between two f32 values (spacing 2^37 there):
  // rounded once it goes up. Through double it would first become the midpoint, then go to even.
  int64_t v = (int64_t{1} << 60) + (int64_t{1} << 36) + 1;
  Tensor x = intTensor(DType::I64, {1}, {v});
  EXPECT_EQ(cast(x, DType::F32).getDouble(0), std::ldexp(1.0, 60) + std::ldexp(1.0, 37));
  // To f64: 2^53 + 1 is a tie between 2^53 and 2^53 + 2 and goes to even.
  EXPECT_EQ(cast(intTensor(DType::I64, {1}, {(int64_t{1} << 53) + 1}), DType::F64).getDouble(0),
            std::ldexp(1.0, 53));
  expectValues(cast(intTensor(DType::I32, {3}, {-7, 0, 1 << 24}), DType::F16), {-7, 0, kInf});
  // bf16 keeps 8 significant bits: 257 and 259 are ties between neighbours 2 apart, and go to even.
  expectValues(cast(intTensor(DType::I32, {4}, {255, 257, 259, 3}), DType::BF16), {255, 256, 260, 3});
}

TEST(OpsElementwise, CastBetweenFloatFormatsRoundsToNearestEven) {
  double ulp16 = std::ldexp(1.0, -10); // f16 spacing in [1, 2)
  Tensor x = Tensor::fromDoubles(DType::F32, {5}, {1 + ulp16 / 2, 1 + 3 * ulp16 / 2, 65504, 65520, -0.0});
  Tensor h = cast(x, DType::F16);
  EXPECT_EQ(h.dtype(), DType::F16);
  expectValues(h, {1, 1 + 2 * ulp16, 65504, kInf, 0});
  EXPECT_TRUE(std::signbit(h.getDouble(4)));
  expectValues(cast(h, DType::F32), {1, 1 + 2 * ulp16, 65504, kInf, 0}); // widening is exact
  double ulpBf = std::ldexp(1.0, -7);                                    // bf16 spacing in [1, 2)
  expectValues(cast(Tensor::fromDoubles(DType::F32, {2}, {1 + ulpBf / 2, 1 + 3 * ulpBf / 2}), DType::BF16),
               {1, 1 + 2 * ulpBf});
  expectValues(cast(Tensor::scalar(DType::F64, 0.1), DType::F32), {static_cast<double>(0.1f)});
  expectValues(cast(Tensor::fromDoubles(DType::F64, {2}, {kNaN, -kInf}), DType::F32), {kNaN, -kInf});
}

TEST(OpsElementwise, CastKeepsShapeAndNeedsTarget) {
  EXPECT_EQ(cast(Tensor::scalar(DType::F32, 3.5), DType::I8).type(), (TensorType{DType::I8, {}}));
  EXPECT_EQ(cast(Tensor(DType::F32, {2, 0}), DType::Bool).type(), (TensorType{DType::Bool, {2, 0}}));
  EXPECT_ERROR(runOp(OpKind::Cast, {Tensor(DType::F32, {2})}), "missing required attribute 'to'");
  Graph g("cast");
  Value *x = g.addInput({DType::F32, {2}}, "x");
  Builder b(g);
  Value *y = b.create(OpKind::Cast, {x}, {{"to", DType::I64}});
  g.setOutputs({y});
  verify(g);
  EXPECT_EQ(y->type(), (TensorType{DType::I64, {2}}));
  EXPECT_EQ(intsOf(evaluate(g, {Tensor::fromDoubles(DType::F32, {2}, {-3.99, 7.01})})[0]),
            (std::vector<int64_t>{-3, 7}));
}

// --- clip ---

TEST(OpsElementwise, ClipClampsFloatsAndKeepsNaN) {
  Tensor x = Tensor::fromDoubles(DType::F32, {7}, {-2, -0.5, 0, 0.5, 2, kNaN, kInf});
  Tensor out = clip(x, -1, 1);
  EXPECT_EQ(out.type(), x.type());
  expectValues(out, {-1, -0.5, 0, 0.5, 1, kNaN, 1});
  // Defaults are -inf and +inf: nothing changes.
  expectValues(runOp(OpKind::Clip, {x}), {-2, -0.5, 0, 0.5, 2, kNaN, kInf});
  expectValues(runOp(OpKind::Clip, {x}, {{"min", 0.0}}), {0, 0, 0, 0.5, 2, kNaN, kInf});
  expectValues(runOp(OpKind::Clip, {x}, {{"max", int64_t{0}}}),
               {-2, -0.5, 0, 0, 0, kNaN, 0}); // int attr converts
  expectValues(clip(x, 0.25, 0.25), {0.25, 0.25, 0.25, 0.25, 0.25, kNaN, 0.25});
  expectValues(clip(Tensor::fromDoubles(DType::F16, {2}, {-70000, 3}), -6e4, 1), {-60000, 1});
}

TEST(OpsElementwise, ClipIntegersToTheIntegersInsideTheBounds) {
  Tensor x = intTensor(DType::I32, {5}, {-5, -1, 0, 2, 3});
  Tensor out = clip(x, -1.5, 2.5); // the integers in [-1.5, 2.5] are -1 .. 2
  EXPECT_EQ(out.dtype(), DType::I32);
  EXPECT_EQ(intsOf(out), (std::vector<int64_t>{-1, -1, 0, 2, 2}));
  const int64_t big = (int64_t{1} << 53) + 1;
  Tensor i64 = intTensor(DType::I64, {3}, {big, -big, 4});
  EXPECT_EQ(intsOf(runOp(OpKind::Clip, {i64}, {{"min", 0.0}})), (std::vector<int64_t>{big, 0, 4}));
  EXPECT_EQ(intsOf(clip(intTensor(DType::U8, {2}, {0, 255}), -10, 300)), (std::vector<int64_t>{0, 255}));
  EXPECT_EQ(intsOf(clip(intTensor(DType::I8, {2}, {-100, 100}), -1e30, 1e30)),
            (std::vector<int64_t>{-100, 100}));
  EXPECT_EQ(clip(intTensor(DType::I64, {0}, {}), 1, 2).shape(), (Shape{0}));
}

TEST(OpsElementwise, ClipErrors) {
  EXPECT_ERROR(clip(Tensor(DType::F32, {2}), 2, 1), "min 2 is greater than max 1");
  EXPECT_ERROR(clip(Tensor(DType::F32, {2}), kNaN, 1), "NaN");
  EXPECT_ERROR(clip(Tensor(DType::Bool, {2}), 0, 1), "needs a numeric operand, got bool");
  EXPECT_ERROR(runOp(OpKind::Clip, {Tensor(DType::F32, {2})}, {{"lower", 0.0}}), "unknown attribute 'lower'");
  EXPECT_ERROR(runOp(OpKind::Clip, {Tensor(DType::F32, {2})}, {{"min", std::string("a")}}),
               "attribute 'min' must be");
}
