// Reduction composites (ir/ops/ReduceComposite.cpp): reduce_l1, reduce_l2, reduce_sum_square,
// reduce_log_sum and reduce_log_sum_exp, evaluated through their decompositions and compared
// with a hand reduction written here (each output element's slice gathered by a plain loop, then
// the closed form applied to it), over axes/keepdims variants, scalars, empty dims, integers,
// large magnitudes and infinities; plus the primitive-only expansion and the errors.
#include <gtest/gtest.h>

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

const std::vector<OpKind> kReduceOps = {OpKind::ReduceL1, OpKind::ReduceL2, OpKind::ReduceSumSquare,
                                        OpKind::ReduceLogSum, OpKind::ReduceLogSumExp};

AttrMap reduceAttrs(std::vector<int64_t> axes, int64_t keepdims) {
  return {{"axes", std::move(axes)}, {"keepdims", keepdims}};
}

Tensor reduce(OpKind op, const Tensor &x, std::vector<int64_t> axes = {}, int64_t keepdims = 0) {
  return runOp(op, {x}, reduceAttrs(std::move(axes), keepdims));
}

TensorType inferReduce(OpKind op, const TensorType &x, std::vector<int64_t> axes = {}, int64_t keepdims = 0) {
  return inferOne(op, {x}, reduceAttrs(std::move(axes), keepdims));
}

using SliceFn = std::function<double(const std::vector<double> &)>;

// The hand reduction: gathers the elements of every output position's slice (positions that
// agree on the kept dims; axes empty means all dims) and applies `closedForm` to each slice.
Tensor handReduce(const Tensor &x, std::vector<int64_t> axes, bool keepdims, const SliceFn &closedForm) {
  int64_t rank = x.rank();
  std::vector<bool> reduced(rank, axes.empty());
  for (int64_t axis : axes)
    reduced[axis < 0 ? axis + rank : axis] = true;
  Shape kept, out;
  for (int64_t d = 0; d < rank; ++d) {
    kept.push_back(reduced[d] ? 1 : x.shape()[d]);
    if (!reduced[d] || keepdims)
      out.push_back(kept.back());
  }
  std::vector<std::vector<double>> slices(numElements(kept));
  for (int64_t flat = 0; flat < x.numElements(); ++flat) {
    // Peel the row-major multi-index off `flat` and rebuild it with reduced dims at 0.
    int64_t rest = flat, target = 0, stride = 1;
    for (int64_t d = rank - 1; d >= 0; --d) {
      int64_t index = rest % x.shape()[d];
      rest /= x.shape()[d];
      target += (reduced[d] ? 0 : index) * stride;
      stride *= kept[d];
    }
    slices[target].push_back(x.getDouble(flat));
  }
  Tensor result(x.dtype(), out);
  for (size_t i = 0; i < slices.size(); ++i)
    result.setDouble(static_cast<int64_t>(i), closedForm(slices[i]));
  return result;
}

// The ONNX definitions, written directly: these are the expectations.
double l1(const std::vector<double> &v) {
  double s = 0;
  for (double e : v)
    s += std::fabs(e);
  return s;
}
double sumSquare(const std::vector<double> &v) {
  double s = 0;
  for (double e : v)
    s += e * e;
  return s;
}
double l2(const std::vector<double> &v) { return std::sqrt(sumSquare(v)); }
double logSum(const std::vector<double> &v) {
  double s = 0;
  for (double e : v)
    s += e;
  return std::log(s);
}
double logSumExp(const std::vector<double> &v) { // naive: fine for the moderate random inputs
  double s = 0;
  for (double e : v)
    s += std::exp(e);
  return std::log(s);
}

SliceFn closedFormOf(OpKind op) {
  switch (op) {
  case OpKind::ReduceL1: return l1;
  case OpKind::ReduceL2: return l2;
  case OpKind::ReduceSumSquare: return sumSquare;
  case OpKind::ReduceLogSum: return logSum;
  default: return logSumExp;
  }
}

TEST(OpsReduceCompositeValues, MatchHandReductionOverAxesAndKeepdims) {
  // Values in [-1, 1) shifted to (0, 2] where a log of the plain sum needs positive slices.
  Tensor x = randomTensor({DType::F64, {2, 3, 4}}, 11);
  Tensor positive(x.type());
  for (int64_t i = 0; i < x.numElements(); ++i)
    positive.setDouble(i, 1 - x.getDouble(i));
  std::vector<std::vector<int64_t>> axesCases = {{}, {0}, {1}, {2}, {-1}, {0, 2}, {-1, 0}, {0, 1, 2}};
  for (OpKind op : kReduceOps) {
    const Tensor &input = op == OpKind::ReduceLogSum ? positive : x;
    for (const auto &axes : axesCases)
      for (int64_t keepdims : {0, 1}) {
        Tensor want = handReduce(input, axes, keepdims, closedFormOf(op));
        EXPECT_TRUE(near(reduce(op, input, axes, keepdims), want, 1e-13))
            << opName(op) << " axes [" << fmt::format("{}", fmt::join(axes, ",")) << "] keepdims "
            << keepdims;
      }
  }
}

TEST(OpsReduceCompositeValues, F32AndScalars) {
  Tensor x = Tensor::fromDoubles(DType::F32, {2, 3}, {-3, 4, 0.5, 2, -2, 1});
  EXPECT_TRUE(near(reduce(OpKind::ReduceL1, x, {1}), Tensor::fromDoubles(DType::F32, {2}, {7.5, 5}), 1e-7));
  EXPECT_TRUE(near(reduce(OpKind::ReduceL2, x, {0}),
                   Tensor::fromDoubles(DType::F32, {3}, {std::sqrt(13.0), std::sqrt(20.0), std::sqrt(1.25)}),
                   1e-7));
  EXPECT_TRUE(near(reduce(OpKind::ReduceSumSquare, x, {}, 1),
                   Tensor::fromDoubles(DType::F32, {1, 1}, {34.25}), 1e-7));
  // log of a plain sum: a negative sum (column 0: -3 + 2) gives NaN, as log does.
  EXPECT_TRUE(near(reduce(OpKind::ReduceLogSum, x, {0}),
                   Tensor::fromDoubles(DType::F32, {3}, {std::log(-1.0), std::log(2.0), std::log(1.5)}),
                   1e-7));
  // A rank-0 input reduces over nothing: each op maps the one value.
  Tensor s = Tensor::scalar(DType::F64, -2);
  EXPECT_EQ(reduce(OpKind::ReduceL1, s).getDouble(0), 2);
  EXPECT_EQ(reduce(OpKind::ReduceL2, s).getDouble(0), 2);
  EXPECT_EQ(reduce(OpKind::ReduceSumSquare, s).getDouble(0), 4);
  EXPECT_TRUE(std::isnan(reduce(OpKind::ReduceLogSum, s).getDouble(0)));
  EXPECT_DOUBLE_EQ(reduce(OpKind::ReduceLogSumExp, s).getDouble(0), -2);
  EXPECT_EQ(reduce(OpKind::ReduceLogSumExp, s).shape(), Shape{});
}

TEST(OpsReduceCompositeLogSumExp, StableForLargeMagnitudesAndInfinities) {
  // Each row is one slice; the expectations are written out from the definition.
  Tensor x = Tensor::fromDoubles(
      DType::F64, {7, 2}, {1000, 1000, -1000, -1000, -kInf, -kInf, -kInf, 0, kInf, 1, kNaN, 1, 1e308, 1e308});
  std::vector<double> want = {1000 + std::log(2.0), -1000 + std::log(2.0), -kInf, 0, kInf, kNaN,
                              1e308 + std::log(2.0)};
  EXPECT_TRUE(
      near(reduce(OpKind::ReduceLogSumExp, x, {1}), Tensor::fromDoubles(DType::F64, {7}, want), 1e-15));
  EXPECT_TRUE(near(reduce(OpKind::ReduceLogSumExp, x, {-1}, 1), Tensor::fromDoubles(DType::F64, {7, 1}, want),
                   1e-15));
  // f32: exp(100) already overflows f32, and the -inf column must not turn into NaN.
  Tensor f = Tensor::fromDoubles(DType::F32, {2, 3}, {100, 99, -kInf, -kInf, -kInf, -kInf});
  Tensor got = reduce(OpKind::ReduceLogSumExp, f, {1});
  EXPECT_TRUE(
      near(got, Tensor::fromDoubles(DType::F32, {2}, {100 + std::log1p(std::exp(-1.0)), -kInf}), 1e-7));
  // Over axis 0 each column has one finite element or none.
  EXPECT_TRUE(reduce(OpKind::ReduceLogSumExp, f, {0})
                  .identical(Tensor::fromDoubles(DType::F32, {3}, {100, 99, -kInf})));
}

TEST(OpsReduceCompositeValues, EmptyDims) {
  // Reducing over an empty axis: sums of nothing are 0, their logs -inf.
  Tensor empty(DType::F32, {2, 0});
  Tensor zeros(DType::F32, {2});
  Tensor minusInf = Tensor::fromDoubles(DType::F32, {2}, {-kInf, -kInf});
  EXPECT_TRUE(reduce(OpKind::ReduceL1, empty, {1}).identical(zeros));
  EXPECT_TRUE(reduce(OpKind::ReduceL2, empty, {1}).identical(zeros));
  EXPECT_TRUE(reduce(OpKind::ReduceSumSquare, empty, {1}).identical(zeros));
  EXPECT_TRUE(reduce(OpKind::ReduceLogSum, empty, {1}).identical(minusInf));
  EXPECT_TRUE(reduce(OpKind::ReduceLogSumExp, empty, {1}).identical(minusInf));
  EXPECT_EQ(reduce(OpKind::ReduceLogSumExp, empty, {}, 1).getDouble(0), -kInf);
  // Reducing a non-empty axis of an empty tensor gives an empty result.
  for (OpKind op : kReduceOps) {
    EXPECT_EQ(reduce(op, empty, {0}).shape(), Shape{0}) << opName(op);
    EXPECT_EQ(reduce(op, empty, {0}, 1).shape(), (Shape{1, 0})) << opName(op);
  }
}

TEST(OpsReduceCompositeIntegers, L1AndSumSquareAreExact) {
  Tensor i32 = Tensor::fromDoubles(DType::I32, {2, 3}, {-3, 4, 0, 7, -7, 1});
  EXPECT_TRUE(reduce(OpKind::ReduceL1, i32, {1}).identical(Tensor::fromDoubles(DType::I32, {2}, {7, 15})));
  EXPECT_TRUE(reduce(OpKind::ReduceSumSquare, i32, {0}, 1)
                  .identical(Tensor::fromDoubles(DType::I32, {1, 3}, {58, 65, 1})));
  // i64 past 2^53: 3037000499^2 + 1 = 9223372030926249002 exactly.
  Tensor i64(DType::I64, {2});
  i64.setInt(0, 3037000499);
  i64.setInt(1, -1);
  EXPECT_EQ(reduce(OpKind::ReduceSumSquare, i64).getInt(0), int64_t(9223372030926249002));
  EXPECT_EQ(reduce(OpKind::ReduceL1, i64).getInt(0), int64_t(3037000500));
  Tensor u8 = Tensor::fromDoubles(DType::U8, {3}, {1, 2, 250});
  EXPECT_EQ(reduce(OpKind::ReduceL1, u8, {0}, 1).getInt(0), (1 + 2 + 250) % 256); // reduce_sum wraps u8
}

TEST(OpsReduceCompositeInference, ShapesAndErrors) {
  TensorType x{DType::F32, {2, 3, 4}};
  for (OpKind op : kReduceOps) {
    EXPECT_EQ(inferReduce(op, x), (TensorType{DType::F32, {}})) << opName(op);
    EXPECT_EQ(inferReduce(op, x, {-2}, 1), (TensorType{DType::F32, {2, 1, 4}})) << opName(op);
    EXPECT_EQ(inferReduce(op, x, {2, 0}), (TensorType{DType::F32, {3}})) << opName(op);
    expectError([&] { inferReduce(op, x, {3}); }, "axes");
    expectError([&] { inferReduce(op, x, {1, -2}); }, "appears twice");
    expectError([&] { inferReduce(op, x, {}, 2); }, "'keepdims' must be 0 or 1");
    expectError([&] { inferReduce(op, {DType::Bool, {2}}); }, std::string(opName(op)) + "(bool[2])");
    expectError([&] { inferReduce(op, {DType::Bool, {2}}); }, "bool");
  }
  // The ops involving sqrt, log or exp need floats; l1 and sum_square take integers.
  for (OpKind op : {OpKind::ReduceL2, OpKind::ReduceLogSum, OpKind::ReduceLogSumExp})
    for (DType dtype : {DType::I32, DType::I64, DType::U8})
      expectError([&] { inferReduce(op, {dtype, {2}}); }, "needs a floating-point operand");
  for (OpKind op : {OpKind::ReduceL1, OpKind::ReduceSumSquare})
    EXPECT_EQ(inferReduce(op, {DType::I8, {2, 3}}, {1}), (TensorType{DType::I8, {2}}));
}

TEST(OpsReduceCompositeDecomposition, ExpandsToPrimitives) {
  for (OpKind op : kReduceOps) {
    EXPECT_TRUE(isComposite(op)) << opName(op);
    EXPECT_EQ(opTraits(op).fusion, FusionKind::Reduction) << opName(op);
    for (const Shape &shape : {Shape{2, 3}, Shape{2, 0}, Shape{}})
      for (int64_t keepdims : {0, 1}) {
        std::vector<int64_t> axes = shape.empty() ? std::vector<int64_t>{} : std::vector<int64_t>{-1};
        expectExpandsToPrimitives(op, {{DType::F64, shape}}, reduceAttrs(axes, keepdims));
      }
  }
  expectExpandsToPrimitives(OpKind::ReduceSumSquare, {{DType::I64, {4}}}, {});
}

} // namespace
