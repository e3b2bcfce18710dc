// ONNX gathers and scatters (ir/ops/GatherScatter.cpp): gather_elements, gather_nd,
// scatter_elements and scatter_nd, built through ir::Builder, verified and evaluated with
// ir::evaluate. Expected values are the ONNX operator examples, hand-written cases, or plain
// loops over the defining formula.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>

#include "core/Error.h"
#include "ir/Builder.h"
#include "ir/Evaluator.h"
#include "ir/Verifier.h"
#include "tests/ir/OpTestUtil.h"

using namespace kiln;
using namespace kiln::ir;
using namespace kiln::test;

namespace {

/// Wraps a possibly negative index into [0, dim), as the ops do.
int64_t wrap(int64_t index, int64_t dim) { return index < 0 ? index + dim : index; }

const char *const kReductions[] = {"none", "add", "mul", "max", "min"};

// Data {1, 2, 3, 4} after updates {5, -1, 7, 3} at indices {0, -4, 2, 0}, by reduction: element 0
// is hit three times (once as -4), and "none" keeps the last write (documented rule).
const std::map<std::string, std::vector<double>> kDuplicateIndexResults = {{"none", {3, 2, 7, 4}},
                                                                           {"add", {8, 2, 10, 4}},
                                                                           {"mul", {-15, 2, 21, 4}},
                                                                           {"max", {5, 2, 7, 4}},
                                                                           {"min", {-1, 2, 3, 4}}};

/// The scatter reductions as the test understands them (one update folded into `old`).
double fold(const std::string &reduction, double old, double update) {
  if (reduction == "add")
    return old + update;
  if (reduction == "mul")
    return old * update;
  if (reduction == "max")
    return std::max(old, update);
  if (reduction == "min")
    return std::min(old, update);
  return update;
}

} // namespace

// ---- gather_elements ---------------------------------------------------------------------------

TEST(OpsGatherScatterGatherElements, OnnxExamples) {
  Tensor y = runOp(OpKind::GatherElements, {f32s({2, 2}, {1, 2, 3, 4}), i64s({2, 2}, {0, 0, 1, 0})},
                   {{"axis", int1(1)}});
  EXPECT_EQ(y.type(), TensorType({DType::F32, {2, 2}}));
  EXPECT_EQ(values(y), std::vector<double>({1, 1, 4, 3}));
  // Axis 0, with indices smaller than data on the other axis; -1 wraps to the last row.
  Tensor z = runOp(OpKind::GatherElements, {seq(DType::F32, {3, 3}), i64s({2, 3}, {1, 2, 0, 2, 0, -1})});
  EXPECT_EQ(values(z), std::vector<double>({3, 7, 2, 6, 1, 8}));
}

// out[i][j][k] = data[i][idx[i][j][k]][k] for axis 1, against a loop; indices longer on the axis.
TEST(OpsGatherScatterGatherElements, RankThreeNegativeAxisAgainstLoop) {
  Tensor data = seq(DType::F64, {2, 3, 4});
  Tensor indices =
      Tensor::fromDoubles(DType::I32, {2, 5, 3}, {0, 1, 2, -1, -2, -3, 2, 2, 2, 0, 0,  0, 1, -1, 1,
                                                  2, 1, 0, -3, 1,  2,  1, 1, 1, 0, -1, 0, 2, 0,  1});
  for (int64_t a : {1, -2}) {
    Tensor y = runOp(OpKind::GatherElements, {data, indices}, {{"axis", int1(a)}});
    ASSERT_EQ(y.shape(), Shape({2, 5, 3}));
    for (int64_t i = 0; i < 2; ++i)
      for (int64_t j = 0; j < 5; ++j)
        for (int64_t k = 0; k < 3; ++k) {
          int64_t row = wrap(indices.getInt((i * 5 + j) * 3 + k), 3);
          EXPECT_EQ(y.getDouble((i * 5 + j) * 3 + k), data.getDouble((i * 3 + row) * 4 + k));
        }
  }
}

TEST(OpsGatherScatterGatherElements, RankOneEmptyAndExactDtypes) {
  Tensor big(DType::I64, {3});
  big.setInt(1, (int64_t{1} << 62) + 1); // not representable in double
  EXPECT_EQ(runOp(OpKind::GatherElements, {big, i64s({2}, {-2, 1})}).getInt(0), (int64_t{1} << 62) + 1);
  Tensor flags = Tensor::fromDoubles(DType::Bool, {3}, {0, 1, 0});
  EXPECT_EQ(values(runOp(OpKind::GatherElements, {flags, i64s({4}, {1, 2, 1, -3})})),
            std::vector<double>({1, 0, 1, 0}));
  EXPECT_EQ(runOp(OpKind::GatherElements, {seq(DType::F32, {3, 2}), i64s({0, 2}, {})}).shape(),
            Shape({0, 2}));
  EXPECT_EQ(runOp(OpKind::GatherElements, {seq(DType::F32, {0, 2}), i64s({0, 2}, {})}).shape(),
            Shape({0, 2}));
}

TEST(OpsGatherScatterGatherElements, Errors) {
  Tensor data = seq(DType::F32, {2, 3});
  EXPECT_ERROR(runOp(OpKind::GatherElements, {data, i64s({2, 2}, {0, 1, 2, 3})}, {{"axis", int1(1)}}),
               "gather_elements: index 3 (at indices[1,1]) is out of range [-3, 3) for axis 1 of size 3");
  EXPECT_ERROR(runOp(OpKind::GatherElements, {data, i64s({1, 1}, {-3})}), "index -3 (at indices[0,0])");
  EXPECT_ERROR(runOp(OpKind::GatherElements, {seq(DType::F32, {0, 3}), i64s({1, 1}, {0})}), "of size 0");
  auto infer = [](TensorType d, TensorType i, int64_t a = 0) {
    inferTypes(OpKind::GatherElements, {d, i}, {{"axis", int1(a)}});
  };
  TensorType f23{DType::F32, {2, 3}};
  EXPECT_ERROR(infer(f23, {DType::I64, {6}}), "indices have rank 1, data has rank 2");
  EXPECT_ERROR(infer(f23, {DType::I64, {1, 4}}, 0), "indices [1,4] exceed data [2,3] on axis 1");
  EXPECT_ERROR(infer(f23, {DType::F32, {2, 3}}), "indices must be i64 or i32, got f32");
  EXPECT_ERROR(infer(f23, {DType::I64, {2, 3}}, -3), "axis -3 is out of range for rank 2");
  EXPECT_ERROR(infer({DType::F32, {}}, {DType::I64, {}}), "out of range for rank 0");
}

// ---- gather_nd -----------------------------------------------------------------------------------

TEST(OpsGatherScatterGatherNd, OnnxExamples) {
  Tensor square = i64s({2, 2}, {0, 1, 2, 3});
  EXPECT_EQ(values(runOp(OpKind::GatherNd, {square, i64s({2, 2}, {0, 0, 1, 1})})),
            std::vector<double>({0, 3}));
  Tensor rows = runOp(OpKind::GatherNd, {square, i64s({2, 1}, {1, 0})});
  EXPECT_EQ(rows.shape(), Shape({2, 2}));
  EXPECT_EQ(values(rows), std::vector<double>({2, 3, 0, 1}));
  Tensor cube = seq(DType::F32, {2, 2, 2});
  Tensor pairs = runOp(OpKind::GatherNd, {cube, i64s({2, 2}, {0, 1, 1, 0})});
  EXPECT_EQ(pairs.shape(), Shape({2, 2}));
  EXPECT_EQ(values(pairs), std::vector<double>({2, 3, 4, 5}));
  Tensor nested = runOp(OpKind::GatherNd, {cube, i64s({2, 1, 2}, {0, 1, 1, 0})});
  EXPECT_EQ(nested.shape(), Shape({2, 1, 2}));
  EXPECT_EQ(values(nested), std::vector<double>({2, 3, 4, 5}));
  Tensor batched = runOp(OpKind::GatherNd, {cube, i64s({2, 1}, {1, 0})}, {{"batch_dims", int1(1)}});
  EXPECT_EQ(batched.shape(), Shape({2, 2}));
  EXPECT_EQ(values(batched), std::vector<double>({2, 3, 4, 5}));
}

// data [2,3,4,2], batch_dims 1, tuples of length 2: out[b][t][e] = data[b][i0][i1][e].
TEST(OpsGatherScatterGatherNd, BatchedNegativeIndicesAgainstLoop) {
  Tensor data = seq(DType::F64, {2, 3, 4, 2});
  Tensor indices = i64s({2, 3, 2}, {0, 0, -1, -1, 1, 2, 2, 3, -3, -4, 0, 1});
  Tensor y = runOp(OpKind::GatherNd, {data, indices}, {{"batch_dims", int1(1)}});
  ASSERT_EQ(y.shape(), Shape({2, 3, 2}));
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t t = 0; t < 3; ++t) {
      int64_t i0 = wrap(indices.getInt((b * 3 + t) * 2), 3),
              i1 = wrap(indices.getInt((b * 3 + t) * 2 + 1), 4);
      for (int64_t e = 0; e < 2; ++e)
        EXPECT_EQ(y.getDouble((b * 3 + t) * 2 + e), data.getDouble(((b * 3 + i0) * 4 + i1) * 2 + e));
    }
  // Rank-1 data with a full-length tuple gives a scalar.
  Tensor scalar = runOp(OpKind::GatherNd, {seq(DType::I32, {5}), i64s({1}, {-2})});
  EXPECT_EQ(scalar.rank(), 0);
  EXPECT_EQ(scalar.getInt(0), 3);
}

TEST(OpsGatherScatterGatherNd, EmptyShapes) {
  EXPECT_EQ(runOp(OpKind::GatherNd, {seq(DType::F32, {3, 2}), i64s({0, 1}, {})}).shape(), Shape({0, 2}));
  Tensor emptySlices = runOp(OpKind::GatherNd, {seq(DType::F32, {3, 0}), i64s({2, 1}, {2, -3})});
  EXPECT_EQ(emptySlices.shape(), Shape({2, 0}));
}

TEST(OpsGatherScatterGatherNd, Errors) {
  Tensor data = seq(DType::F32, {2, 3});
  EXPECT_ERROR(runOp(OpKind::GatherNd, {data, i64s({2, 2}, {0, 1, 1, 3})}),
               "gather_nd: index 3 (at indices[1,1]) is out of range [-3, 3) for axis 1 of size 3");
  EXPECT_ERROR(runOp(OpKind::GatherNd, {data, i64s({1, 1}, {-3})}), "index -3 (at indices[0,0])");
  // Indices are checked even when the slices they select are empty.
  EXPECT_ERROR(runOp(OpKind::GatherNd, {seq(DType::F32, {3, 0}), i64s({1, 1}, {3})}), "index 3");
  auto infer = [](TensorType d, TensorType i, int64_t batch = 0) {
    inferTypes(OpKind::GatherNd, {d, i}, {{"batch_dims", int1(batch)}});
  };
  TensorType f23{DType::F32, {2, 3}};
  EXPECT_ERROR(infer(f23, {DType::I64, {1, 3}}), "index tuples have length 3");
  EXPECT_ERROR(infer(f23, {DType::I64, {1, 3}}), "it must be in [1, 2]");
  EXPECT_ERROR(infer(f23, {DType::I64, {2, 0}}), "index tuples have length 0");
  EXPECT_ERROR(infer(f23, {DType::I64, {2, 2}}, 1), "it must be in [1, 1]");
  EXPECT_ERROR(infer(f23, {DType::I64, {2, 1}}, 2),
               "batch_dims 2 must be in [0, min(data rank 2, indices rank 2))");
  EXPECT_ERROR(infer(f23, {DType::I64, {2, 1}}, -1), "batch_dims -1");
  EXPECT_ERROR(infer(f23, {DType::I64, {3, 1}}, 1), "batch dim 0 differs: indices [3,1] vs data [2,3]");
  EXPECT_ERROR(infer(f23, {DType::I32, {2, 1}}), "indices must be i64, got i32");
  EXPECT_ERROR(infer({DType::F32, {}}, {DType::I64, {1}}), "data must have rank >= 1");
  EXPECT_ERROR(infer(f23, {DType::I64, {}}), "indices must have rank >= 1");
}

// ---- scatter_elements ----------------------------------------------------------------------------

TEST(OpsGatherScatterScatterElements, OnnxExamples) {
  Tensor y = runOp(OpKind::ScatterElements, {Tensor(DType::F32, {3, 3}), i64s({2, 3}, {1, 0, 2, 0, 2, 1}),
                                             f32s({2, 3}, {1, 2, 3, 4, 5, 6})});
  EXPECT_EQ(values(y), std::vector<double>({4, 2, 0, 1, 0, 6, 0, 5, 3}));
  Tensor row = f32s({1, 5}, {1, 2, 3, 4, 5});
  Tensor z = runOp(OpKind::ScatterElements, {row, i64s({1, 2}, {1, -2}), f32s({1, 2}, {10, 20})},
                   {{"axis", int1(-1)}});
  EXPECT_EQ(values(z), std::vector<double>({1, 10, 3, 20, 5}));
  EXPECT_EQ(values(row), std::vector<double>({1, 2, 3, 4, 5})); // the operand is not modified
}

// The kDuplicateIndexResults case, in f32 and i32.
TEST(OpsGatherScatterScatterElements, DuplicateIndicesForEachReduction) {
  Tensor data = f32s({4}, {1, 2, 3, 4});
  Tensor indices = i64s({4}, {0, -4, 2, 0});
  Tensor updates = f32s({4}, {5, -1, 7, 3});
  for (const char *reduction : kReductions) {
    SCOPED_TRACE(reduction);
    Tensor y = runOp(OpKind::ScatterElements, {data, indices, updates}, {{"reduction", str(reduction)}});
    EXPECT_EQ(values(y), kDuplicateIndexResults.at(reduction));
    Tensor ints = runOp(OpKind::ScatterElements,
                        {Tensor::fromDoubles(DType::I32, {4}, values(data)), indices,
                         Tensor::fromDoubles(DType::I32, {4}, values(updates))},
                        {{"reduction", str(reduction)}});
    EXPECT_EQ(ints.dtype(), DType::I32);
    EXPECT_EQ(values(ints), kDuplicateIndexResults.at(reduction));
  }
}

// A rank-3 scatter along the middle axis against a loop, for every reduction.
TEST(OpsGatherScatterScatterElements, RankThreeAgainstLoop) {
  Tensor data = seq(DType::F64, {2, 3, 2});
  Tensor indices = i64s({2, 4, 1}, {0, 2, -1, 0, 1, 1, -3, 2});
  Tensor updates = Tensor::fromDoubles(DType::F64, {2, 4, 1}, {10, -20, 30, 0.5, 7, -8, 9, 11});
  for (const char *reduction : kReductions) {
    SCOPED_TRACE(reduction);
    std::vector<double> want = values(data);
    for (int64_t i = 0; i < 2; ++i)
      for (int64_t j = 0; j < 4; ++j) {
        int64_t target = (i * 3 + wrap(indices.getInt(i * 4 + j), 3)) * 2;
        want[target] = fold(reduction, want[target], updates.getDouble(i * 4 + j));
      }
    EXPECT_EQ(values(runOp(OpKind::ScatterElements, {data, indices, updates},
                           {{"axis", int1(1)}, {"reduction", str(reduction)}})),
              want);
  }
}

TEST(OpsGatherScatterScatterElements, NanEmptyAndExactDtypes) {
  Tensor withNaN =
      runOp(OpKind::ScatterElements, {f32s({2}, {1, kNaN}), i64s({2}, {0, 1}), f32s({2}, {kNaN, 5})},
            {{"reduction", str("max")}});
  EXPECT_TRUE(std::isnan(withNaN.getDouble(0)));
  EXPECT_TRUE(std::isnan(withNaN.getDouble(1)));
  Tensor data = seq(DType::I32, {2, 2});
  Tensor none = runOp(OpKind::ScatterElements, {data, i64s({2, 0}, {}), Tensor(DType::I32, {2, 0})},
                      {{"reduction", str("mul")}});
  EXPECT_TRUE(none.identical(data));
  Tensor big(DType::I64, {1});
  big.setInt(0, (int64_t{1} << 62) + 1); // not representable in double
  EXPECT_EQ(runOp(OpKind::ScatterElements, {Tensor(DType::I64, {2}), i64s({1}, {1}), big}).getInt(1),
            (int64_t{1} << 62) + 1);
  Tensor flags = runOp(OpKind::ScatterElements, {Tensor(DType::Bool, {3}), i64s({1}, {-1}),
                                                 Tensor::fromDoubles(DType::Bool, {1}, {1})});
  EXPECT_EQ(values(flags), std::vector<double>({0, 0, 1}));
  // 2048 + 1 + 1 in f16 step by step would stay at 2048; the sum is rounded once.
  Tensor half = runOp(OpKind::ScatterElements,
                      {Tensor::fromDoubles(DType::F16, {1}, {2048}), i64s({2}, {0, 0}),
                       Tensor::fromDoubles(DType::F16, {2}, {1, 1})},
                      {{"reduction", str("add")}});
  EXPECT_EQ(values(half), std::vector<double>({2050}));
}

TEST(OpsGatherScatterScatterElements, Errors) {
  Tensor data = seq(DType::F32, {2, 3});
  Tensor updates = seq(DType::F32, {2, 2});
  EXPECT_ERROR(
      runOp(OpKind::ScatterElements, {data, i64s({2, 2}, {0, 1, 2, 3}), updates}, {{"axis", int1(1)}}),
      "scatter_elements: index 3 (at indices[1,1]) is out of range [-3, 3) for axis 1 of size 3");
  EXPECT_ERROR(runOp(OpKind::ScatterElements, {data, i64s({2, 2}, {0, -3, 1, 0}), updates}),
               "index -3 (at indices[0,1])");
  auto infer = [](TensorType d, TensorType i, TensorType u, const char *reduction = "none", int64_t a = 0) {
    inferTypes(OpKind::ScatterElements, {d, i, u}, {{"axis", int1(a)}, {"reduction", str(reduction)}});
  };
  TensorType f23{DType::F32, {2, 3}}, i22{DType::I64, {2, 2}}, f22{DType::F32, {2, 2}};
  EXPECT_ERROR(infer(f23, i22, f22, "sum"),
               "reduction must be one of \"none\", \"add\", \"mul\", \"max\", \"min\"; got \"sum\"");
  EXPECT_ERROR(infer(f23, i22, f22, "ADD"), "got \"ADD\"");
  EXPECT_ERROR(infer(f23, {DType::I64, {4}}, {DType::F32, {4}}), "indices have rank 1, data has rank 2");
  EXPECT_ERROR(infer(f23, i22, {DType::F32, {2, 1}}), "updates have shape [2,1], indices have [2,2]");
  EXPECT_ERROR(infer(f23, i22, {DType::F64, {2, 2}}), "updates have dtype f64, data has f32");
  EXPECT_ERROR(infer(f23, {DType::I64, {3, 1}}, {DType::F32, {3, 1}}, "none", 1),
               "exceed data [2,3] on axis 0");
  EXPECT_ERROR(infer(f23, {DType::U8, {2, 2}}, f22), "indices must be i64 or i32, got u8");
  EXPECT_ERROR(infer(f23, i22, f22, "none", 2), "axis 2 is out of range for rank 2");
  EXPECT_ERROR(infer({DType::Bool, {2}}, {DType::I64, {2}}, {DType::Bool, {2}}, "add"),
               "reduction \"add\" needs numeric data, got bool");
}

// ---- scatter_nd ----------------------------------------------------------------------------------

TEST(OpsGatherScatterScatterNd, OnnxExamples) {
  Tensor y = runOp(OpKind::ScatterNd, {f32s({8}, {1, 2, 3, 4, 5, 6, 7, 8}), i64s({4, 1}, {4, 3, 1, 7}),
                                       f32s({4}, {9, 10, 11, 12})});
  EXPECT_EQ(values(y), std::vector<double>({1, 11, 3, 10, 9, 6, 7, 12}));
  // Slices: indices [[0], [-2]] replace the first and third [4,4] blocks of a [4,4,4] tensor.
  Tensor data = seq(DType::F32, {4, 4, 4});
  Tensor updates = Tensor::fromDoubles(DType::F32, {2, 4, 4}, std::vector<double>(32, -1));
  for (int64_t e = 16; e < 32; ++e)
    updates.setDouble(e, -2);
  Tensor z = runOp(OpKind::ScatterNd, {data, i64s({2, 1}, {0, -2}), updates});
  for (int64_t i = 0; i < 64; ++i)
    EXPECT_EQ(z.getDouble(i), i < 16 ? -1 : (i >= 32 && i < 48 ? -2 : static_cast<double>(i))) << i;
}

TEST(OpsGatherScatterScatterNd, DuplicateIndicesForEachReduction) {
  Tensor data = f32s({4}, {1, 2, 3, 4});
  Tensor indices = i64s({4, 1}, {0, -4, 2, 0});
  Tensor updates = f32s({4}, {5, -1, 7, 3});
  for (const char *reduction : kReductions) {
    SCOPED_TRACE(reduction);
    EXPECT_EQ(values(runOp(OpKind::ScatterNd, {data, indices, updates}, {{"reduction", str(reduction)}})),
              kDuplicateIndexResults.at(reduction));
  }
}

// Full-length tuples into a [3,4] matrix with repeats, against a loop, for every reduction.
TEST(OpsGatherScatterScatterNd, ElementTuplesAgainstLoop) {
  Tensor data = Tensor::fromDoubles(DType::I64, {3, 4}, values(seq(DType::I64, {3, 4})));
  Tensor indices = i64s({2, 3, 2}, {0, 0, 2, -1, -3, 0, 1, 2, 2, 3, 1, -2});
  Tensor updates = i64s({2, 3}, {4, -5, 6, 7, 8, 9});
  for (const char *reduction : kReductions) {
    SCOPED_TRACE(reduction);
    std::vector<double> want = values(data);
    for (int64_t t = 0; t < 6; ++t) {
      int64_t target = wrap(indices.getInt(2 * t), 3) * 4 + wrap(indices.getInt(2 * t + 1), 4);
      want[target] = fold(reduction, want[target], updates.getDouble(t));
    }
    EXPECT_EQ(values(runOp(OpKind::ScatterNd, {data, indices, updates}, {{"reduction", str(reduction)}})),
              want);
  }
}

TEST(OpsGatherScatterScatterNd, EmptyAndZeroLengthTuples) {
  Tensor data = seq(DType::F32, {2, 3});
  EXPECT_TRUE(runOp(OpKind::ScatterNd, {data, i64s({0, 1}, {}), Tensor(DType::F32, {0, 3})}).identical(data));
  // A tuple of length 0 addresses all of data: two such updates add twice.
  Tensor twice =
      runOp(OpKind::ScatterNd,
            {data, i64s({2, 0}, {}), Tensor::fromDoubles(DType::F32, {2, 2, 3}, std::vector<double>(12, 1))},
            {{"reduction", str("add")}});
  EXPECT_EQ(values(twice), std::vector<double>({2, 3, 4, 5, 6, 7}));
}

TEST(OpsGatherScatterScatterNd, Errors) {
  Tensor data = seq(DType::F32, {2, 3});
  EXPECT_ERROR(runOp(OpKind::ScatterNd, {data, i64s({1, 2}, {1, 3}), f32s({1}, {0})}),
               "scatter_nd: index 3 (at indices[0,1]) is out of range [-3, 3) for axis 1 of size 3");
  EXPECT_ERROR(runOp(OpKind::ScatterNd, {data, i64s({2, 1}, {0, -3}), seq(DType::F32, {2, 3})}),
               "index -3 (at indices[1,0]) is out of range [-2, 2) for axis 0 of size 2");
  auto infer = [](TensorType d, TensorType i, TensorType u, const char *reduction = "none") {
    inferTypes(OpKind::ScatterNd, {d, i, u}, {{"reduction", str(reduction)}});
  };
  TensorType f23{DType::F32, {2, 3}};
  EXPECT_ERROR(infer(f23, {DType::I64, {1, 3}}, {DType::F32, {1}}), "index tuples have length 3");
  EXPECT_ERROR(infer(f23, {DType::I64, {1, 3}}, {DType::F32, {1}}), "more than data rank 2");
  EXPECT_ERROR(infer(f23, {DType::I64, {4, 1}}, {DType::F32, {4}}),
               "updates have shape [4], expected [4,3] (indices [4,1] without its last dim, then data [2,3] "
               "from axis 1)");
  EXPECT_ERROR(infer(f23, {DType::I64, {4, 1}}, {DType::F32, {4, 3}}, "maximum"), "got \"maximum\"");
  EXPECT_ERROR(infer(f23, {DType::I32, {4, 1}}, {DType::F32, {4, 3}}), "indices must be i64, got i32");
  EXPECT_ERROR(infer(f23, {DType::I64, {4, 1}}, {DType::I32, {4, 3}}),
               "updates have dtype i32, data has f32");
  EXPECT_ERROR(infer({DType::F32, {}}, {DType::I64, {1}}, {DType::F32, {}}), "data must have rank >= 1");
  EXPECT_ERROR(infer(f23, {DType::I64, {}}, f23), "indices must have rank >= 1");
  EXPECT_ERROR(infer({DType::Bool, {2}}, {DType::I64, {1, 1}}, {DType::Bool, {1}}, "mul"),
               "needs numeric data");
}
