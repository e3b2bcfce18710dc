// Indexing ops (ir/ops/Indexing.cpp): gather, scatter_add and iota, built through ir::Builder,
// verified and evaluated with ir::evaluate. Expected values are hand-written or computed by
// plain loops over the defining formula (numpy take / torch scatter_add / arange).
#include <gtest/gtest.h>

#include "core/Error.h"
#include "ir/Builder.h"
#include "ir/Evaluator.h"
#include "ir/Verifier.h"
#include "tests/ir/OpTestUtil.h"

using namespace kiln;
using namespace kiln::ir;
using namespace kiln::test;

namespace {

Attribute axis(int64_t v) { return v; }

} // namespace

// ---- gather ----------------------------------------------------------------------------------

TEST(OpsIndexingGather, RowsWithNegativeIndices) {
  Tensor data = seq(DType::F32, {3, 2});
  Tensor y = runOp(OpKind::Gather, {data, i64s({3}, {2, 0, -1})});
  EXPECT_EQ(y.type(), TensorType({DType::F32, {3, 2}}));
  EXPECT_EQ(values(y), std::vector<double>({4, 5, 0, 1, 4, 5}));
}

TEST(OpsIndexingGather, RankZeroIndicesDropTheAxis) {
  Tensor data = seq(DType::F32, {3, 2});
  Tensor y = runOp(OpKind::Gather, {data, Tensor::scalar(DType::I64, 1)}, {{"axis", axis(1)}});
  EXPECT_EQ(y.shape(), Shape({3}));
  EXPECT_EQ(values(y), std::vector<double>({1, 3, 5}));
  Tensor s = runOp(OpKind::Gather, {seq(DType::I32, {4}), Tensor::scalar(DType::I32, -2)});
  EXPECT_EQ(s.rank(), 0);
  EXPECT_EQ(s.getInt(0), 2);
}

TEST(OpsIndexingGather, RankTwoIndicesOnAMiddleAxis) {
  Tensor data = seq(DType::F64, {2, 3, 4});
  Tensor indices = Tensor::fromDoubles(DType::I32, {2, 2}, {2, -3, 1, 1});
  for (int64_t a : {1, -2}) {
    Tensor y = runOp(OpKind::Gather, {data, indices}, {{"axis", axis(a)}});
    ASSERT_EQ(y.shape(), Shape({2, 2, 2, 4})); // [2] + [2,2] + [4]
    for (int64_t i = 0; i < 2; ++i)
      for (int64_t p = 0; p < 2; ++p)
        for (int64_t q = 0; q < 2; ++q)
          for (int64_t k = 0; k < 4; ++k) {
            int64_t row = indices.getInt(p * 2 + q);
            row = row < 0 ? row + 3 : row;
            EXPECT_EQ(y.getDouble(((i * 2 + p) * 2 + q) * 4 + k), data.getDouble((i * 3 + row) * 4 + k));
          }
  }
}

TEST(OpsIndexingGather, EmptyShapesAndExactDtypes) {
  EXPECT_EQ(runOp(OpKind::Gather, {seq(DType::F32, {3, 2}), i64s({0}, {})}).shape(), Shape({0, 2}));
  EXPECT_EQ(runOp(OpKind::Gather, {seq(DType::F32, {0, 3}), i64s({1}, {2})}, {{"axis", axis(1)}}).shape(),
            Shape({0, 1}));
  Tensor big(DType::I64, {2});
  big.setInt(0, 7);
  big.setInt(1, (int64_t{1} << 62) + 1); // not representable in double
  EXPECT_EQ(runOp(OpKind::Gather, {big, i64s({1}, {1})}).getInt(0), (int64_t{1} << 62) + 1);
  Tensor flags = Tensor::fromDoubles(DType::Bool, {3}, {0, 1, 0});
  EXPECT_EQ(values(runOp(OpKind::Gather, {flags, i64s({4}, {1, 1, 0, -2})})),
            std::vector<double>({1, 1, 0, 1}));
}

TEST(OpsIndexingGather, Errors) {
  Tensor data = seq(DType::F32, {3, 2});
  EXPECT_ERROR(runOp(OpKind::Gather, {data, i64s({2}, {0, 3})}),
               "gather: index 3 (at indices[1]) is out of range [-3, 3) for axis 0 of size 3");
  EXPECT_ERROR(runOp(OpKind::Gather, {data, i64s({2, 1}, {0, -4})}), "index -4 (at indices[1,0])");
  EXPECT_ERROR(runOp(OpKind::Gather, {data, Tensor::scalar(DType::I64, 2)}, {{"axis", axis(-1)}}),
               "index 2 (at indices[]) is out of range [-2, 2) for axis 1 of size 2");
  // Checked even when the output has no elements.
  EXPECT_ERROR(runOp(OpKind::Gather, {seq(DType::F32, {0, 3}), i64s({1}, {5})}, {{"axis", axis(1)}}),
               "index 5");
  EXPECT_ERROR(runOp(OpKind::Gather, {seq(DType::F32, {0}), i64s({1}, {0})}), "of size 0");
  auto infer = [](TensorType data, TensorType indices, int64_t a) {
    inferTypes(OpKind::Gather, {data, indices}, {{"axis", axis(a)}});
  };
  EXPECT_ERROR(infer({DType::F32, {3}}, {DType::F32, {2}}, 0), "indices must be i64 or i32, got f32");
  EXPECT_ERROR(infer({DType::F32, {3}}, {DType::I8, {2}}, 0), "got i8");
  EXPECT_ERROR(infer({DType::F32, {3}}, {DType::I64, {2}}, 1), "axis 1 is out of range for rank 1");
  EXPECT_ERROR(infer({DType::F32, {}}, {DType::I64, {}}, 0), "out of range for rank 0");
}

// ---- scatter_add -----------------------------------------------------------------------------

TEST(OpsIndexingScatterAdd, RepeatedIndicesAccumulate) {
  Tensor data = Tensor::fromDoubles(DType::F32, {5}, {0, 0, 0, 0, 100});
  Tensor updates = Tensor::fromDoubles(DType::F32, {5}, {1, 2, 3, 4, 5});
  Tensor y = runOp(OpKind::ScatterAdd, {data, i64s({5}, {0, 1, 0, -1, 0}), updates});
  EXPECT_EQ(values(y), std::vector<double>({9, 2, 0, 0, 104}));
  // The operand itself is not modified.
  EXPECT_EQ(values(data), std::vector<double>({0, 0, 0, 0, 100}));
}

// y = data; y[i][index[i][j]] += updates[i][j] (axis 1), y[index[i][j]][j] += ... (axis 0).
TEST(OpsIndexingScatterAdd, TwoDimensionalAgainstLoops) {
  Tensor data = seq(DType::F64, {3, 4});
  Tensor indices = Tensor::fromDoubles(DType::I32, {2, 2}, {3, 0, -1, 1});
  Tensor updates = Tensor::fromDoubles(DType::F64, {2, 2}, {10, 20, 30, 40});
  for (int64_t a : {1, -1}) {
    std::vector<double> want = values(data);
    for (int64_t i = 0; i < 2; ++i)
      for (int64_t j = 0; j < 2; ++j) {
        int64_t col = (indices.getInt(i * 2 + j) + 4) % 4;
        want[i * 4 + col] += updates.getDouble(i * 2 + j);
      }
    EXPECT_EQ(values(runOp(OpKind::ScatterAdd, {data, indices, updates}, {{"axis", axis(a)}})), want);
  }
  // Along axis 0 (size 3) both columns hit one row twice.
  Tensor rows = Tensor::fromDoubles(DType::I32, {2, 2}, {2, 0, -1, -3});
  std::vector<double> want = values(data);
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 2; ++j) {
      int64_t row = (rows.getInt(i * 2 + j) + 3) % 3;
      want[row * 4 + j] += updates.getDouble(i * 2 + j);
    }
  EXPECT_EQ(values(runOp(OpKind::ScatterAdd, {data, rows, updates}, {{"axis", axis(0)}})), want);
}

TEST(OpsIndexingScatterAdd, IntegerEmptyAndPreciseDtypes) {
  Tensor data = Tensor::fromDoubles(DType::I32, {2, 2}, {1, 2, 3, 4});
  Tensor updates = Tensor::fromDoubles(DType::I32, {1, 2}, {-5, 7});
  Tensor y = runOp(OpKind::ScatterAdd, {data, i64s({1, 2}, {1, 1}), updates});
  EXPECT_EQ(values(y), std::vector<double>({1, 2, -2, 11}));
  // Indices with a size-0 dim change nothing.
  Tensor none = runOp(OpKind::ScatterAdd, {data, i64s({0, 2}, {}), Tensor(DType::I32, {0, 2})});
  EXPECT_TRUE(none.identical(data));
  // 2048 + 1 + 1 in f16 step by step would round to 2048 twice; the sum is exact before rounding.
  Tensor half = Tensor::fromDoubles(DType::F16, {1}, {2048});
  Tensor ones = Tensor::fromDoubles(DType::F16, {2}, {1, 1});
  EXPECT_EQ(values(runOp(OpKind::ScatterAdd, {half, i64s({2}, {0, 0}), ones})), std::vector<double>({2050}));
  Tensor single = Tensor::fromDoubles(DType::F32, {1}, {16777216}); // 2^24: f32 has no 2^24 + 1
  Tensor singleOnes = Tensor::fromDoubles(DType::F32, {2}, {1, 1});
  EXPECT_EQ(values(runOp(OpKind::ScatterAdd, {single, i64s({2}, {0, 0}), singleOnes})),
            std::vector<double>({16777218}));
}

TEST(OpsIndexingScatterAdd, Errors) {
  Tensor data = seq(DType::F32, {2, 3});
  Tensor updates = seq(DType::F32, {2, 2});
  EXPECT_ERROR(runOp(OpKind::ScatterAdd, {data, i64s({2, 2}, {0, 1, 2, 3}), updates}, {{"axis", axis(1)}}),
               "scatter_add: index 3 (at indices[1,1]) is out of range [-3, 3) for axis 1 of size 3");
  EXPECT_ERROR(runOp(OpKind::ScatterAdd, {data, i64s({2, 2}, {0, -3, 1, 0}), updates}),
               "index -3 (at indices[0,1])");
  auto infer = [](TensorType d, TensorType i, TensorType u, int64_t a = 0) {
    inferTypes(OpKind::ScatterAdd, {d, i, u}, {{"axis", axis(a)}});
  };
  TensorType f23{DType::F32, {2, 3}}, i22{DType::I64, {2, 2}}, f22{DType::F32, {2, 2}};
  EXPECT_ERROR(infer(f23, {DType::F32, {2, 2}}, f22), "indices must be i64 or i32, got f32");
  EXPECT_ERROR(infer(f23, i22, {DType::F64, {2, 2}}), "updates have dtype f64, data has f32");
  EXPECT_ERROR(infer(f23, {DType::I64, {4}}, {DType::F32, {4}}), "indices have rank 1, data has rank 2");
  EXPECT_ERROR(infer(f23, i22, {DType::F32, {2, 1}}), "updates have shape [2,1], indices have [2,2]");
  EXPECT_ERROR(infer(f23, {DType::I64, {3, 1}}, {DType::F32, {3, 1}}, 1), "exceed data [2,3] on axis 0");
  EXPECT_ERROR(infer(f23, {DType::I64, {1, 4}}, {DType::F32, {1, 4}}, 0), "on axis 1");
  EXPECT_ERROR(infer({DType::Bool, {2}}, {DType::I64, {2}}, {DType::Bool, {2}}), "must be numeric, got bool");
  EXPECT_ERROR(infer(f23, i22, f22, 2), "axis 2 is out of range for rank 2");
  // Larger than data along the scatter axis itself is allowed (torch's rule).
  EXPECT_EQ(inferTypes(OpKind::ScatterAdd, {f23, {DType::I64, {1, 5}}, {DType::F32, {1, 5}}},
                       {{"axis", axis(1)}})[0],
            f23);
}

// ---- iota ------------------------------------------------------------------------------------

TEST(OpsIndexingIota, IndexAlongTheAxis) {
  Tensor cols = runOp(OpKind::Iota, {}, {{"shape", std::vector<int64_t>{2, 3}}, {"axis", axis(1)}});
  EXPECT_EQ(cols.type(), TensorType({DType::I64, {2, 3}})); // i64 by default
  EXPECT_EQ(values(cols), std::vector<double>({0, 1, 2, 0, 1, 2}));
  Tensor rows = runOp(OpKind::Iota, {}, {{"shape", std::vector<int64_t>{2, 3}}});
  EXPECT_EQ(values(rows), std::vector<double>({0, 0, 0, 1, 1, 1}));
  Tensor mid = runOp(OpKind::Iota, {},
                     {{"shape", std::vector<int64_t>{2, 3, 2}}, {"axis", axis(-2)}, {"dtype", DType::F32}});
  ASSERT_EQ(mid.type(), TensorType({DType::F32, {2, 3, 2}}));
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 3; ++j)
      for (int64_t k = 0; k < 2; ++k)
        EXPECT_EQ(mid.getDouble((i * 3 + j) * 2 + k), static_cast<double>(j));
  EXPECT_EQ(runOp(OpKind::Iota, {}, {{"shape", std::vector<int64_t>{0, 3}}, {"axis", axis(1)}}).shape(),
            Shape({0, 3}));
  EXPECT_EQ(values(runOp(OpKind::Iota, {}, {{"shape", std::vector<int64_t>{4}}, {"dtype", DType::I32}})),
            std::vector<double>({0, 1, 2, 3}));
}

TEST(OpsIndexingIota, Errors) {
  auto infer = [](std::vector<int64_t> shape, int64_t a, DType dtype) {
    inferTypes(OpKind::Iota, {}, {{"shape", shape}, {"axis", axis(a)}, {"dtype", dtype}});
  };
  EXPECT_ERROR(infer({}, 0, DType::I64), "axis 0 is out of range for rank 0");
  EXPECT_ERROR(infer({2, 3}, 2, DType::I64), "axis 2 is out of range for rank 2");
  EXPECT_ERROR(infer({2, -1}, 0, DType::I64), "shape [2,-1] has a negative dimension -1");
  EXPECT_ERROR(infer({int64_t{1} << 40, int64_t{1} << 40}, 0, DType::I64), "too many elements");
  EXPECT_ERROR(infer({2}, 0, DType::Bool), "cannot produce bool");
  Graph graph;
  Builder builder(graph);
  EXPECT_ERROR(builder.create(OpKind::Iota, {}), "missing required attribute 'shape'");
}
