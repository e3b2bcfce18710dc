// Reductions (ir/ops/Reduce.cpp): expected values come from plain loops over the input,
// written here, and from hand-picked edge cases (empty axes, NaN, ties, int64 exactness).
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

Tensor reduce(OpKind op, const Tensor &x, std::vector<int64_t> axes, int64_t keepdims = 0) {
  return runOp(op, {x}, {{"axes", std::move(axes)}, {"keepdims", keepdims}});
}

TensorType inferReduce(OpKind op, const TensorType &x, std::vector<int64_t> axes, int64_t keepdims = 0) {
  return inferTypes(op, {x}, completeAttrs(op, {{"axes", std::move(axes)}, {"keepdims", keepdims}})).at(0);
}

Tensor arg(OpKind op, const Tensor &x, int64_t axis, int64_t keepdims = 0, int64_t selectLast = 0) {
  return runOp(op, {x}, {{"axis", axis}, {"keepdims", keepdims}, {"select_last_index", selectLast}});
}

// x[i][j][k] = values of a [2,3,4] tensor with distinct, signed entries.
double cube(int i, int j, int k) { return (i * 12 + j * 4 + k) * (k % 2 ? -1.0 : 1.0) + 0.5 * j; }

Tensor cubeTensor(DType dtype) {
  std::vector<double> v;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k)
        v.push_back(cube(i, j, k));
  return Tensor::fromDoubles(dtype, {2, 3, 4}, v);
}

} // namespace

TEST(OpsReduce, SumMaxMinProdOverTheMiddleAxis) {
  Tensor x = cubeTensor(DType::F64);
  std::vector<double> sum, max, min, prod;
  for (int i = 0; i < 2; ++i)
    for (int k = 0; k < 4; ++k) {
      double s = 0, hi = -1e300, lo = 1e300, p = 1;
      for (int j = 0; j < 3; ++j) {
        s += cube(i, j, k);
        hi = std::max(hi, cube(i, j, k));
        lo = std::min(lo, cube(i, j, k));
        p *= cube(i, j, k);
      }
      sum.push_back(s), max.push_back(hi), min.push_back(lo), prod.push_back(p);
    }
  Tensor s = reduce(OpKind::ReduceSum, x, {1});
  EXPECT_EQ(s.type(), (TensorType{DType::F64, {2, 4}}));
  expectValues(s, sum);
  expectValues(reduce(OpKind::ReduceMax, x, {1}), max);
  expectValues(reduce(OpKind::ReduceMin, x, {-2}), min);
  expectValues(reduce(OpKind::ReduceProd, x, {1}), prod, 1e-9);
  Tensor kept = reduce(OpKind::ReduceSum, x, {1}, 1);
  EXPECT_EQ(kept.shape(), (Shape{2, 1, 4}));
  expectValues(kept, sum);
}

TEST(OpsReduce, SeveralAxesNegativeAxesAndAllAxes) {
  Tensor x = cubeTensor(DType::F32);
  std::vector<double> overFirstAndLast(3, 0);
  double total = 0;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k) {
        overFirstAndLast[j] += cube(i, j, k);
        total += cube(i, j, k);
      }
  Tensor s = reduce(OpKind::ReduceSum, x, {-1, 0});
  EXPECT_EQ(s.type(), (TensorType{DType::F32, {3}}));
  expectValues(s, overFirstAndLast);
  EXPECT_EQ(reduce(OpKind::ReduceSum, x, {2, 0}, 1).shape(), (Shape{1, 3, 1}));
  // Empty axes (the default) reduce everything.
  Tensor all = runOp(OpKind::ReduceSum, {x});
  EXPECT_EQ(all.type(), (TensorType{DType::F32, {}}));
  expectValues(all, {total});
  EXPECT_EQ(reduce(OpKind::ReduceMax, x, {}, 1).shape(), (Shape{1, 1, 1}));
  expectValues(reduce(OpKind::ReduceMax, x, {0, 1, 2}), {cube(1, 2, 2)});
}

TEST(OpsReduce, ScalarsAndSizeOneDims) {
  Tensor s = Tensor::scalar(DType::F32, 2.5);
  for (OpKind op :
       {OpKind::ReduceSum, OpKind::ReduceMax, OpKind::ReduceMin, OpKind::ReduceProd, OpKind::ReduceMean}) {
    Tensor out = runOp(op, {s});
    EXPECT_EQ(out.type(), s.type()) << opName(op);
    EXPECT_EQ(out.getDouble(0), 2.5) << opName(op);
  }
  Tensor column = Tensor::fromDoubles(DType::I32, {3, 1}, {4, -2, 7});
  EXPECT_EQ(intsOf(reduce(OpKind::ReduceSum, column, {1})), (std::vector<int64_t>{4, -2, 7}));
  EXPECT_EQ(intsOf(reduce(OpKind::ReduceProd, column, {0}, 1)), (std::vector<int64_t>{-56}));
}

TEST(OpsReduce, EmptyAxes) {
  Tensor empty(DType::F32, {2, 0, 3});
  Tensor sum = reduce(OpKind::ReduceSum, empty, {1});
  EXPECT_EQ(sum.type(), (TensorType{DType::F32, {2, 3}}));
  expectValues(sum, {0, 0, 0, 0, 0, 0});
  expectValues(reduce(OpKind::ReduceProd, empty, {1}, 1), {1, 1, 1, 1, 1, 1});
  EXPECT_EQ(intsOf(runOp(OpKind::ReduceSum, {Tensor(DType::I64, {0})})), (std::vector<int64_t>{0}));
  // Reducing a non-empty axis of an empty tensor leaves an empty result, max included.
  EXPECT_EQ(reduce(OpKind::ReduceMax, empty, {2}).shape(), (Shape{2, 0}));
  for (OpKind op : {OpKind::ReduceMax, OpKind::ReduceMin}) {
    EXPECT_ERROR(inferReduce(op, {DType::F32, {2, 0, 3}}, {1}),
                 std::string(opName(op)) + " over an empty axis");
    EXPECT_ERROR(inferReduce(op, {DType::I32, {0}}, {}), "over an empty axis");
  }
  // The mean of nothing is NaN, as numpy's.
  expectValues(reduce(OpKind::ReduceMean, empty, {1}), {kNaN, kNaN, kNaN, kNaN, kNaN, kNaN});
}

TEST(OpsReduce, MaxMinPropagateNaN) {
  Tensor x = Tensor::fromDoubles(DType::F32, {2, 3}, {1, kNaN, 3, -1, -5, 2});
  expectValues(reduce(OpKind::ReduceMax, x, {1}), {kNaN, 2});
  expectValues(reduce(OpKind::ReduceMin, x, {1}), {kNaN, -5});
  expectValues(reduce(OpKind::ReduceMax, x, {0}), {1, kNaN, 3});
  expectValues(reduce(OpKind::ReduceSum, x, {1}), {kNaN, -4});
}

TEST(OpsReduce, IntegersReduceExactlyInInt64) {
  const int64_t twoTo53 = int64_t{1} << 53;
  Tensor x = intTensor(DType::I64, {2, 3}, {twoTo53, 1, 1, -twoTo53 - 1, 5, twoTo53});
  // In double, 2^53 + 1 + 1 would come out as 2^53.
  EXPECT_EQ(intsOf(reduce(OpKind::ReduceSum, x, {1})), (std::vector<int64_t>{twoTo53 + 2, 4}));
  EXPECT_EQ(intsOf(reduce(OpKind::ReduceMax, x, {0})), (std::vector<int64_t>{twoTo53, 5, twoTo53}));
  EXPECT_EQ(intsOf(reduce(OpKind::ReduceMin, x, {0})), (std::vector<int64_t>{-twoTo53 - 1, 1, 1}));
  // 3^39 = 4052555153018976267 needs 62 bits.
  Tensor threes = Tensor::fromDoubles(DType::I64, {39}, std::vector<double>(39, 3));
  int64_t threeTo39 = 1;
  for (int i = 0; i < 39; ++i)
    threeTo39 *= 3;
  EXPECT_EQ(intsOf(runOp(OpKind::ReduceProd, {threes})), (std::vector<int64_t>{threeTo39}));
  // Narrow integer results are computed in int64 and wrap into the dtype once.
  Tensor i32 = intTensor(DType::I32, {3}, {2147483647, 1, -1});
  EXPECT_EQ(intsOf(runOp(OpKind::ReduceSum, {i32})), (std::vector<int64_t>{2147483647}));
  Tensor u8 = intTensor(DType::U8, {3}, {200, 100, 1});
  EXPECT_EQ(intsOf(runOp(OpKind::ReduceSum, {u8})), (std::vector<int64_t>{45})); // 301 mod 256
  EXPECT_EQ(runOp(OpKind::ReduceSum, {u8}).dtype(), DType::U8);
}

TEST(OpsReduce, FloatsAccumulateInDouble) {
  // In f32 arithmetic 1e8 + 1 == 1e8, so a float accumulator would return 0.
  Tensor x = Tensor::fromDoubles(DType::F32, {3}, {1e8, 1, -1e8});
  expectValues(runOp(OpKind::ReduceSum, {x}), {1});
  Tensor h = Tensor::fromDoubles(DType::F16, {4}, {2048, 1, 1, -2048});
  expectValues(runOp(OpKind::ReduceSum, {h}), {2});
}

TEST(OpsReduce, AxisErrors) {
  TensorType t{DType::F32, {2, 3}};
  EXPECT_ERROR(inferReduce(OpKind::ReduceSum, t, {0, -2}), "appears twice");
  EXPECT_ERROR(inferReduce(OpKind::ReduceSum, t, {2}), "axis 2 is out of range for rank 2");
  EXPECT_ERROR(inferReduce(OpKind::ReduceMax, t, {-3}), "out of range");
  EXPECT_ERROR(inferReduce(OpKind::ReduceSum, t, {0}, 2), "'keepdims' must be 0 or 1");
  EXPECT_ERROR(inferReduce(OpKind::ReduceSum, t, {0, -2}), "reduce_sum(f32[2,3])");
  for (OpKind op : {OpKind::ReduceSum, OpKind::ReduceMax, OpKind::ReduceMin, OpKind::ReduceProd})
    EXPECT_ERROR(inferReduce(op, {DType::Bool, {2}}, {}), "needs a numeric operand, got bool");
}

TEST(OpsReduce, MeanDecomposesIntoSumTimesReciprocal) {
  auto graph =
      decompositionGraph(OpKind::ReduceMean, {{DType::F32, {2, 3}}}, {{"axes", std::vector<int64_t>{1}}});
  verify(*graph);
  std::vector<OpKind> ops;
  for (const Node *node : graph->nodes())
    ops.push_back(node->op());
  EXPECT_EQ(ops, (std::vector<OpKind>{OpKind::ReduceSum, OpKind::Constant, OpKind::Mul}));
  EXPECT_EQ(graph->outputs().at(0)->type(), (TensorType{DType::F32, {2}}));
  const Tensor &scale = graph->nodes()[1]->attrTensor("value");
  EXPECT_EQ(scale.type(), (TensorType{DType::F32, {}}));
  EXPECT_EQ(scale.getDouble(0), static_cast<double>(1.0f / 3.0f));
}

TEST(OpsReduce, MeanValues) {
  Tensor x = cubeTensor(DType::F64);
  std::vector<double> mean;
  for (int i = 0; i < 2; ++i) {
    double s = 0;
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k)
        s += cube(i, j, k);
    mean.push_back(s / 12);
  }
  Tensor out = reduce(OpKind::ReduceMean, x, {-1, 1}, 1);
  EXPECT_EQ(out.type(), (TensorType{DType::F64, {2, 1, 1}}));
  expectValues(out, mean, 1e-12);
  expectValues(runOp(OpKind::ReduceMean, {Tensor::fromDoubles(DType::F32, {4}, {1, 2, 3, 4})}), {2.5});
  EXPECT_ERROR(inferReduce(OpKind::ReduceMean, {DType::I32, {2}}, {}),
               "needs a floating-point operand, got i32");
  // Through the builder, the composite stays one node until something decomposes it.
  Graph g("mean");
  Value *in = g.addInput({DType::F32, {2, 2}}, "x");
  Builder b(g);
  g.setOutputs({b.create(OpKind::ReduceMean, {in}, {{"axes", std::vector<int64_t>{0}}})});
  verify(g);
  EXPECT_EQ(g.numNodes(), 1u);
  expectValues(evaluate(g, {Tensor::fromDoubles(DType::F32, {2, 2}, {1, 2, 4, 8})})[0], {2.5, 5});
}

TEST(OpsReduce, ArgMaxArgMinAlongEachAxis) {
  Tensor x = cubeTensor(DType::F32);
  for (int axis = 0; axis < 3; ++axis) {
    SCOPED_TRACE(axis);
    Shape shape = {2, 3, 4};
    std::vector<int64_t> wantMax, wantMin;
    Shape outShape = shape;
    outShape.erase(outShape.begin() + axis);
    for (int a = 0; a < outShape[0]; ++a)
      for (int c = 0; c < outShape[1]; ++c) {
        int64_t bestHi = 0, bestLo = 0;
        auto at = [&](int64_t t) {
          int idx[3];
          int outer[2] = {a, c};
          for (int d = 0, o = 0; d < 3; ++d)
            idx[d] = d == axis ? static_cast<int>(t) : outer[o++];
          return cube(idx[0], idx[1], idx[2]);
        };
        for (int64_t t = 1; t < shape[axis]; ++t) {
          if (at(t) > at(bestHi))
            bestHi = t;
          if (at(t) < at(bestLo))
            bestLo = t;
        }
        wantMax.push_back(bestHi);
        wantMin.push_back(bestLo);
      }
    Tensor am = arg(OpKind::ArgMax, x, axis);
    EXPECT_EQ(am.type(), (TensorType{DType::I64, outShape}));
    EXPECT_EQ(intsOf(am), wantMax);
    EXPECT_EQ(intsOf(arg(OpKind::ArgMin, x, axis - 3)), wantMin);
    Shape keptShape = shape;
    keptShape[axis] = 1;
    Tensor kept = arg(OpKind::ArgMax, x, axis, 1);
    EXPECT_EQ(kept.shape(), keptShape);
    EXPECT_EQ(intsOf(kept), wantMax);
  }
}

TEST(OpsReduce, ArgTiesAndNaN) {
  Tensor ties = Tensor::fromDoubles(DType::F64, {2, 4}, {1, 3, 3, 0, 5, 0, 5, 0});
  EXPECT_EQ(intsOf(arg(OpKind::ArgMax, ties, 1)), (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(intsOf(arg(OpKind::ArgMax, ties, 1, 0, 1)), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(intsOf(arg(OpKind::ArgMin, ties, 1)), (std::vector<int64_t>{3, 1}));
  EXPECT_EQ(intsOf(arg(OpKind::ArgMin, ties, 1, 0, 1)), (std::vector<int64_t>{3, 3}));
  // NaN wins over every number, the first NaN (or the last with select_last_index).
  Tensor nan = Tensor::fromDoubles(DType::F32, {5}, {1, kNaN, 9, kNaN, -9});
  EXPECT_EQ(arg(OpKind::ArgMax, nan, 0).getInt(0), 1);
  EXPECT_EQ(arg(OpKind::ArgMin, nan, 0).getInt(0), 1);
  EXPECT_EQ(arg(OpKind::ArgMax, nan, 0, 0, 1).getInt(0), 3);
  EXPECT_EQ(arg(OpKind::ArgMax, Tensor::fromDoubles(DType::F32, {3}, {5, 7, kNaN}), 0).getInt(0), 2);
}

TEST(OpsReduce, ArgOnIntegersAndShapes) {
  const int64_t big = (int64_t{1} << 53) + 1;
  Tensor x = intTensor(DType::I64, {3}, {big - 1, big, big - 1});
  EXPECT_EQ(arg(OpKind::ArgMax, x, 0).getInt(0), 1); // as doubles all three would tie
  EXPECT_EQ(arg(OpKind::ArgMin, x, 0, 0, 1).getInt(0), 2);
  Tensor u8 = intTensor(DType::U8, {1, 3}, {7, 255, 0});
  Tensor out = arg(OpKind::ArgMax, u8, 1, 1);
  EXPECT_EQ(out.type(), (TensorType{DType::I64, {1, 1}}));
  EXPECT_EQ(out.getInt(0), 1);
  // Empty outer dims give an empty result; the chosen axis itself must not be empty.
  EXPECT_EQ(arg(OpKind::ArgMin, Tensor(DType::F32, {0, 3}), 1).type(), (TensorType{DType::I64, {0}}));
  TensorType emptyAxis{DType::F32, {0, 3}};
  EXPECT_ERROR(inferTypes(OpKind::ArgMax, {emptyAxis}, completeAttrs(OpKind::ArgMax, {})),
               "argmax over an empty axis");
  EXPECT_ERROR(inferTypes(OpKind::ArgMin, {emptyAxis}, completeAttrs(OpKind::ArgMin, {})),
               "argmin over an empty axis");
  EXPECT_ERROR(arg(OpKind::ArgMax, Tensor(DType::F32, {2}), 1), "axis 1 is out of range for rank 1");
  EXPECT_ERROR(arg(OpKind::ArgMax, Tensor(DType::F32, {2}), 0, 0, 2), "'select_last_index' must be 0 or 1");
  EXPECT_ERROR(arg(OpKind::ArgMax, Tensor(DType::Bool, {2}), 0), "needs a numeric operand, got bool");
  EXPECT_ERROR(arg(OpKind::ArgMax, Tensor::scalar(DType::F32, 1), 0), "out of range for rank 0");
}

TEST(OpsReduce, BuilderGraphWithReductions) {
  Graph g("reduce");
  Value *x = g.addInput({DType::F64, {2, 3, 4}}, "x");
  Builder b(g);
  Value *sum =
      b.create(OpKind::ReduceSum, {x}, {{"axes", std::vector<int64_t>{0, 2}}, {"keepdims", int64_t{1}}});
  Value *idx = b.create(OpKind::ArgMax, {x}, {{"axis", int64_t{-1}}});
  g.setOutputs({sum, idx});
  verify(g);
  EXPECT_EQ(sum->type(), (TensorType{DType::F64, {1, 3, 1}}));
  EXPECT_EQ(idx->type(), (TensorType{DType::I64, {2, 3}}));
  auto out = evaluate(g, {cubeTensor(DType::F64)});
  std::vector<double> wantSum(3, 0);
  std::vector<int64_t> wantIdx;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j) {
      int64_t best = 0;
      for (int k = 0; k < 4; ++k) {
        wantSum[j] += cube(i, j, k);
        if (cube(i, j, k) > cube(i, j, best))
          best = k;
      }
      wantIdx.push_back(best);
    }
  expectValues(out[0], wantSum);
  EXPECT_EQ(intsOf(out[1]), wantIdx);
  EXPECT_ERROR(b.create(OpKind::ReduceSum, {x}, {{"axes", std::vector<int64_t>{3}}}), "out of range");
}
