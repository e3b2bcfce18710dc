// Scans, selections and tensor construction: cumsum and topk (ir/ops/CumSumTopK.cpp,
// primitives), trilu and one_hot (ir/ops/Indexing.cpp) and tile (ir/ops/Movement.cpp),
// composites evaluated through their decompositions. Each is built through ir::Builder,
// verified and evaluated with ir::evaluate; expected values are the ONNX examples, hand-written
// cases, or plain loops over the defining formula.
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

/// The ops a composite's decomposition uses.
std::set<OpKind> decompositionOps(OpKind op, const std::vector<TensorType> &inputs, const AttrMap &attrs) {
  std::unique_ptr<Graph> graph = decompositionGraph(op, inputs, attrs); // outlives the loop
  std::set<OpKind> ops;
  for (const Node *node : graph->nodes())
    ops.insert(node->op());
  return ops;
}

} // namespace

// ---- cumsum --------------------------------------------------------------------------------------

TEST(OpsSequenceCumSum, FlagsOnRankOne) {
  Tensor x = f32s({5}, {1, 2, 3, 4, 5});
  auto cumsum = [&](int64_t exclusive, int64_t reverse) {
    return values(runOp(OpKind::CumSum, {x},
                        {{"axis", int1(0)}, {"exclusive", int1(exclusive)}, {"reverse", int1(reverse)}}));
  };
  EXPECT_EQ(cumsum(0, 0), std::vector<double>({1, 3, 6, 10, 15}));
  EXPECT_EQ(cumsum(1, 0), std::vector<double>({0, 1, 3, 6, 10}));
  EXPECT_EQ(cumsum(0, 1), std::vector<double>({15, 14, 12, 9, 5}));
  EXPECT_EQ(cumsum(1, 1), std::vector<double>({14, 12, 9, 5, 0}));
}

// Along the middle axis of [2,3,4], as a loop over the definition, for every flag setting.
TEST(OpsSequenceCumSum, RankThreeNegativeAxisAgainstLoop) {
  Tensor x = Tensor::fromDoubles(DType::F64, {2, 3, 4}, values(seq(DType::F64, {2, 3, 4})));
  for (int64_t i = 0; i < x.numElements(); ++i)
    x.setDouble(i, (i % 5) - 1.5 * (i % 3));
  for (int64_t exclusive : {0, 1})
    for (int64_t reverse : {0, 1}) {
      SCOPED_TRACE(testing::Message() << "exclusive " << exclusive << " reverse " << reverse);
      Tensor y = runOp(OpKind::CumSum, {x},
                       {{"axis", int1(-2)}, {"exclusive", int1(exclusive)}, {"reverse", int1(reverse)}});
      ASSERT_EQ(y.type(), x.type());
      for (int64_t a = 0; a < 2; ++a)
        for (int64_t j = 0; j < 3; ++j)
          for (int64_t c = 0; c < 4; ++c) {
            double want = 0;
            for (int64_t m = 0; m < 3; ++m) {
              bool counted = reverse ? (exclusive ? m > j : m >= j) : (exclusive ? m < j : m <= j);
              if (counted)
                want += x.getDouble((a * 3 + m) * 4 + c);
            }
            EXPECT_DOUBLE_EQ(y.getDouble((a * 3 + j) * 4 + c), want);
          }
    }
}

TEST(OpsSequenceCumSum, ExactIntegersDoubleAccumulationAndEmptyDims) {
  Tensor big(DType::I64, {3});
  big.setInt(0, int64_t{1} << 53);
  big.setInt(1, 1);
  big.setInt(2, 1);
  Tensor sums = runOp(OpKind::CumSum, {big}, {{"axis", int1(0)}});
  EXPECT_EQ(sums.getInt(1), (int64_t{1} << 53) + 1); // not representable in double
  EXPECT_EQ(sums.getInt(2), (int64_t{1} << 53) + 2);
  EXPECT_EQ(
      values(runOp(OpKind::CumSum, {Tensor::fromDoubles(DType::I8, {3}, {-1, -2, 4})}, {{"axis", int1(0)}})),
      std::vector<double>({-1, -3, 1}));
  // f16: 2048 + 1 rounds back to 2048 at every step if the sum were kept in f16; accumulated
  // in double the third output is exactly 2050.
  Tensor half = Tensor::fromDoubles(DType::F16, {3}, {2048, 1, 1});
  EXPECT_EQ(values(runOp(OpKind::CumSum, {half}, {{"axis", int1(0)}})),
            std::vector<double>({2048, 2048, 2050}));
  for (int64_t axis : {0, 1})
    EXPECT_EQ(runOp(OpKind::CumSum, {seq(DType::F32, {0, 3})}, {{"axis", int1(axis)}}).shape(),
              Shape({0, 3}));
  EXPECT_EQ(runOp(OpKind::CumSum, {seq(DType::I32, {2, 0})}, {{"axis", int1(0)}}).shape(), Shape({2, 0}));
}

TEST(OpsSequenceCumSum, Errors) {
  auto infer = [](TensorType x, AttrMap attrs) { inferTypes(OpKind::CumSum, {x}, attrs); };
  TensorType f23{DType::F32, {2, 3}};
  AttrMap base{{"axis", int1(0)}, {"exclusive", int1(0)}, {"reverse", int1(0)}};
  EXPECT_ERROR(infer({DType::Bool, {2}}, base), "input must be numeric, got bool");
  AttrMap badAxis = base, badExclusive = base, badReverse = base;
  badAxis["axis"] = int1(2);
  badExclusive["exclusive"] = int1(2);
  badReverse["reverse"] = int1(-1);
  EXPECT_ERROR(infer(f23, badAxis), "axis 2 is out of range for rank 2");
  EXPECT_ERROR(infer(f23, badExclusive), "attribute 'exclusive' must be 0 or 1, got 2");
  EXPECT_ERROR(infer(f23, badReverse), "attribute 'reverse' must be 0 or 1, got -1");
  EXPECT_ERROR(infer({DType::F32, {}}, base), "out of range for rank 0");
  Graph graph;
  Builder builder(graph);
  Value *x = graph.addInput(f23);
  EXPECT_ERROR(builder.create(OpKind::CumSum, {x}), "missing required attribute 'axis'");
}

// ---- topk ----------------------------------------------------------------------------------------

TEST(OpsSequenceTopK, LargestSmallestAndTies) {
  Tensor x = f32s({8}, {3, 1, 4, 1, 5, 9, 2, 6});
  std::vector<Tensor> top = runOps(OpKind::TopK, {x}, {{"k", int1(3)}});
  ASSERT_EQ(top.size(), 2u);
  EXPECT_EQ(top[0].type(), TensorType({DType::F32, {3}}));
  EXPECT_EQ(top[1].type(), TensorType({DType::I64, {3}}));
  EXPECT_EQ(values(top[0]), std::vector<double>({9, 6, 5}));
  EXPECT_EQ(values(top[1]), std::vector<double>({5, 7, 4}));
  // The two 1s tie: the smaller index comes first.
  std::vector<Tensor> bottom = runOps(OpKind::TopK, {x}, {{"k", int1(3)}, {"largest", int1(0)}});
  EXPECT_EQ(values(bottom[0]), std::vector<double>({1, 1, 2}));
  EXPECT_EQ(values(bottom[1]), std::vector<double>({1, 3, 6}));
  Tensor ties = Tensor::fromDoubles(DType::I32, {4}, {2, 2, 1, 2});
  EXPECT_EQ(values(runOps(OpKind::TopK, {ties}, {{"k", int1(2)}})[1]), std::vector<double>({0, 1}));
  EXPECT_EQ(values(runOps(OpKind::TopK, {ties}, {{"k", int1(4)}, {"largest", int1(0)}})[1]),
            std::vector<double>({2, 0, 1, 3}));
  // sorted=0 allows any order; kiln returns the sorted one.
  EXPECT_EQ(values(runOps(OpKind::TopK, {x}, {{"k", int1(2)}, {"sorted", int1(0)}})[0]),
            std::vector<double>({9, 6}));
}

// NaN counts as larger than every number: first when largest, last when smallest; NaNs tie.
TEST(OpsSequenceTopK, NaNIsLargest) {
  Tensor x = f32s({5}, {1, kNaN, 3, kNaN, 2});
  std::vector<Tensor> top = runOps(OpKind::TopK, {x}, {{"k", int1(3)}});
  EXPECT_TRUE(std::isnan(top[0].getDouble(0)) && std::isnan(top[0].getDouble(1)));
  EXPECT_EQ(top[0].getDouble(2), 3);
  EXPECT_EQ(values(top[1]), std::vector<double>({1, 3, 2}));
  std::vector<Tensor> bottom = runOps(OpKind::TopK, {x}, {{"k", int1(5)}, {"largest", int1(0)}});
  EXPECT_EQ(values(bottom[1]), std::vector<double>({0, 4, 2, 1, 3}));
  EXPECT_EQ(bottom[0].getDouble(2), 3);
  EXPECT_TRUE(std::isnan(bottom[0].getDouble(4)));
}

// Along axis 1 of [2,5,3]: element j of a line lands at rank #{m : v_m before v_j}, counted
// directly rather than sorted; only ranks below k appear in the output.
TEST(OpsSequenceTopK, RankThreeAgainstCounting) {
  Tensor x = Tensor::fromDoubles(DType::F64, {2, 5, 3}, values(seq(DType::F64, {30})));
  for (int64_t i = 0; i < 30; ++i)
    x.setDouble(i, static_cast<double>((i * 7) % 11 % 4)); // many ties
  for (int64_t largest : {0, 1})
    for (int64_t axis : {1, -2}) {
      std::vector<Tensor> out =
          runOps(OpKind::TopK, {x}, {{"k", int1(3)}, {"axis", int1(axis)}, {"largest", int1(largest)}});
      ASSERT_EQ(out[0].shape(), Shape({2, 3, 3}));
      for (int64_t a = 0; a < 2; ++a)
        for (int64_t c = 0; c < 3; ++c)
          for (int64_t j = 0; j < 5; ++j) {
            double vj = x.getDouble((a * 5 + j) * 3 + c);
            int64_t rank = 0;
            for (int64_t m = 0; m < 5; ++m) {
              double vm = x.getDouble((a * 5 + m) * 3 + c);
              rank += (largest ? vm > vj : vm < vj) || (vm == vj && m < j);
            }
            if (rank < 3) {
              EXPECT_EQ(out[1].getInt((a * 3 + rank) * 3 + c), j);
              EXPECT_EQ(out[0].getDouble((a * 3 + rank) * 3 + c), vj);
            }
          }
    }
}

TEST(OpsSequenceTopK, ZeroKEmptyDimsAndExactIntegers) {
  std::vector<Tensor> none = runOps(OpKind::TopK, {seq(DType::F32, {2, 4})}, {{"k", int1(0)}});
  EXPECT_EQ(none[0].shape(), Shape({2, 0}));
  EXPECT_EQ(none[1].shape(), Shape({2, 0}));
  EXPECT_EQ(runOps(OpKind::TopK, {seq(DType::F32, {0, 4})}, {{"k", int1(2)}})[0].shape(), Shape({0, 2}));
  EXPECT_EQ(runOps(OpKind::TopK, {seq(DType::F32, {3, 0})}, {{"k", int1(0)}})[1].shape(), Shape({3, 0}));
  Tensor big(DType::I64, {2});
  big.setInt(0, int64_t{1} << 53);
  big.setInt(1, (int64_t{1} << 53) + 1); // equal to element 0 once rounded to double
  std::vector<Tensor> top = runOps(OpKind::TopK, {big}, {{"k", int1(1)}});
  EXPECT_EQ(top[1].getInt(0), 1);
  EXPECT_EQ(top[0].getInt(0), (int64_t{1} << 53) + 1);
}

TEST(OpsSequenceTopK, Errors) {
  auto infer = [](TensorType x, int64_t k, int64_t axis = -1, int64_t largest = 1) {
    inferTypes(OpKind::TopK, {x},
               {{"k", int1(k)}, {"axis", int1(axis)}, {"largest", int1(largest)}, {"sorted", int1(1)}});
  };
  TensorType f23{DType::F32, {2, 3}};
  EXPECT_ERROR(infer(f23, 4), "k 4 is out of range [0, 3] for axis 1 of shape [2,3]");
  EXPECT_ERROR(infer(f23, 3, 0), "k 3 is out of range [0, 2] for axis 0");
  EXPECT_ERROR(infer(f23, -1), "k -1 is out of range");
  EXPECT_ERROR(infer(f23, 1, 2), "axis 2 is out of range for rank 2");
  EXPECT_ERROR(infer(f23, 1, -1, 2), "attribute 'largest' must be 0 or 1, got 2");
  EXPECT_ERROR(infer({DType::Bool, {3}}, 1), "input must be numeric, got bool");
  EXPECT_ERROR(infer({DType::F32, {}}, 0), "out of range for rank 0");
  Graph graph;
  Builder builder(graph);
  Value *x = graph.addInput(f23);
  EXPECT_ERROR(builder.createMulti(OpKind::TopK, {x}), "missing required attribute 'k'");
  EXPECT_ERROR(builder.create(OpKind::TopK, {x}, {{"k", int1(1)}}), "produces 2 outputs");
}

// ---- trilu ---------------------------------------------------------------------------------------

// [3,4] and a batch [2,3,4], k inside and outside the diagonal range (-3, 4), against loops.
TEST(OpsSequenceTrilu, UpperAndLowerForManyK) {
  Tensor batch = Tensor::fromDoubles(DType::F32, {2, 3, 4}, values(seq(DType::F32, {24})));
  for (int64_t i = 0; i < 24; ++i)
    batch.setDouble(i, i + 1.0); // no zeros, so a kept element is never mistaken for a cleared one
  for (int64_t upper : {0, 1})
    for (int64_t k : {-10, -3, -1, 0, 1, 3, 4, 10}) {
      SCOPED_TRACE(testing::Message() << "upper " << upper << " k " << k);
      Tensor y = runOp(OpKind::Trilu, {batch}, {{"upper", int1(upper)}, {"k", int1(k)}});
      ASSERT_EQ(y.type(), batch.type());
      for (int64_t b = 0; b < 2; ++b)
        for (int64_t r = 0; r < 3; ++r)
          for (int64_t c = 0; c < 4; ++c) {
            bool keep = upper ? c - r >= k : c - r <= k;
            int64_t flat = (b * 3 + r) * 4 + c;
            EXPECT_EQ(y.getDouble(flat), keep ? batch.getDouble(flat) : 0.0);
          }
    }
  // The defaults: upper, main diagonal.
  EXPECT_EQ(values(runOp(OpKind::Trilu, {seq(DType::I32, {2, 2})}, {})), std::vector<double>({0, 1, 0, 3}));
}

TEST(OpsSequenceTrilu, DtypesEmptyDimsAndDecomposition) {
  Tensor flags = Tensor::fromDoubles(DType::Bool, {2, 2}, {1, 1, 1, 1});
  EXPECT_EQ(values(runOp(OpKind::Trilu, {flags}, {{"upper", int1(0)}})), std::vector<double>({1, 0, 1, 1}));
  Tensor big(DType::I64, {1, 1});
  big.setInt(0, (int64_t{1} << 62) + 1);
  EXPECT_EQ(runOp(OpKind::Trilu, {big}, {}).getInt(0), (int64_t{1} << 62) + 1);
  EXPECT_EQ(runOp(OpKind::Trilu, {seq(DType::F32, {0, 3})}, {}).shape(), Shape({0, 3}));
  EXPECT_EQ(runOp(OpKind::Trilu, {seq(DType::F32, {2, 0, 3})}, {{"k", int1(-1)}}).shape(), Shape({2, 0, 3}));
  EXPECT_EQ(decompositionOps(OpKind::Trilu, {{DType::F32, {2, 3, 4}}}, {{"upper", int1(1)}}),
            std::set<OpKind>({OpKind::Iota, OpKind::Sub, OpKind::Constant, OpKind::Ge, OpKind::Where}));
  EXPECT_EQ(decompositionOps(OpKind::Trilu, {{DType::F32, {3, 4}}}, {{"upper", int1(0)}}).count(OpKind::Le),
            1u);
}

TEST(OpsSequenceTrilu, Errors) {
  EXPECT_ERROR(inferTypes(OpKind::Trilu, {{DType::F32, {4}}}, {{"upper", int1(1)}, {"k", int1(0)}}),
               "input must have rank >= 2 (a batch of matrices), got [4]");
  EXPECT_ERROR(inferTypes(OpKind::Trilu, {{DType::F32, {}}}, {{"upper", int1(1)}, {"k", int1(0)}}), "got []");
  EXPECT_ERROR(inferTypes(OpKind::Trilu, {{DType::F32, {2, 2}}}, {{"upper", int1(2)}, {"k", int1(0)}}),
               "attribute 'upper' must be 0 or 1, got 2");
}

// ---- one_hot -------------------------------------------------------------------------------------

TEST(OpsSequenceOneHot, NegativeAndOutOfRangeIndices) {
  Tensor indices = i64s({7}, {0, 2, -1, 3, -4, 4, -5});
  Tensor y = runOp(OpKind::OneHot, {indices, f32s({2}, {0, 1})}, {{"depth", int1(4)}});
  ASSERT_EQ(y.type(), TensorType({DType::F32, {7, 4}}));
  EXPECT_EQ(values(y), std::vector<double>({1, 0, 0, 0,    //  0
                                            0, 0, 1, 0,    //  2
                                            0, 0, 0, 1,    // -1 -> 3
                                            0, 0, 0, 1,    //  3
                                            1, 0, 0, 0,    // -4 -> 0
                                            0, 0, 0, 0,    //  4: out of range, all off
                                            0, 0, 0, 0})); // -5: out of range, all off
}

// indices [2,3] with the depth axis at each position, off/on = 2/7, against a loop.
TEST(OpsSequenceOneHot, EveryAxisAgainstLoop) {
  Tensor indices = Tensor::fromDoubles(DType::I32, {2, 3}, {1, -1, 0, 5, 2, -3});
  Tensor onOff = i64s({2}, {2, 7});
  for (int64_t axis : {0, 1, 2, -1, -2, -3}) {
    SCOPED_TRACE(axis);
    Tensor y = runOp(OpKind::OneHot, {indices, onOff}, {{"depth", int1(3)}, {"axis", int1(axis)}});
    int64_t at = axis < 0 ? axis + 3 : axis;
    Shape want{2, 3};
    want.insert(want.begin() + at, 3);
    ASSERT_EQ(y.type(), TensorType({DType::I64, want}));
    for (int64_t i = 0; i < 2; ++i)
      for (int64_t j = 0; j < 3; ++j)
        for (int64_t d = 0; d < 3; ++d) {
          int64_t index = indices.getInt(i * 3 + j);
          bool hot = index == d || index + 3 == d;
          std::vector<int64_t> position{i, j};
          position.insert(position.begin() + at, d);
          int64_t flat = (position[0] * want[1] + position[1]) * want[2] + position[2];
          EXPECT_EQ(y.getInt(flat), hot ? 7 : 2);
        }
  }
}

TEST(OpsSequenceOneHot, IndexDtypesScalarsAndEmpty) {
  Tensor onOff = Tensor::fromDoubles(DType::Bool, {2}, {0, 1});
  EXPECT_EQ(values(runOp(OpKind::OneHot, {Tensor::fromDoubles(DType::U8, {2}, {200, 1}), onOff},
                         {{"depth", int1(2)}})),
            std::vector<double>({0, 0, 0, 1})); // u8 200 is out of range, not -56
  EXPECT_EQ(
      values(runOp(OpKind::OneHot, {Tensor::fromDoubles(DType::I8, {1}, {-2}), onOff}, {{"depth", int1(3)}})),
      std::vector<double>({0, 1, 0}));
  Tensor scalar =
      runOp(OpKind::OneHot, {Tensor::scalar(DType::I64, 2), f32s({2}, {-1, 0.5})}, {{"depth", int1(3)}});
  EXPECT_EQ(scalar.shape(), Shape({3}));
  EXPECT_EQ(values(scalar), std::vector<double>({-1, -1, 0.5}));
  EXPECT_EQ(
      runOp(OpKind::OneHot, {i64s({0, 2}, {}), f32s({2}, {0, 1})}, {{"depth", int1(5)}, {"axis", int1(1)}})
          .shape(),
      Shape({0, 5, 2}));
}

TEST(OpsSequenceOneHot, Errors) {
  auto infer = [](TensorType indices, TensorType onOff, int64_t depth, int64_t axis = -1) {
    inferTypes(OpKind::OneHot, {indices, onOff}, {{"depth", int1(depth)}, {"axis", int1(axis)}});
  };
  TensorType i3{DType::I64, {3}}, f2{DType::F32, {2}};
  EXPECT_ERROR(infer({DType::F32, {3}}, f2, 4), "indices must be an integer dtype, got f32");
  EXPECT_ERROR(infer({DType::Bool, {3}}, f2, 4), "got bool");
  EXPECT_ERROR(infer(i3, {DType::F32, {3}}, 4), "values must be [off, on] with shape [2], got [3]");
  EXPECT_ERROR(infer(i3, {DType::F32, {}}, 4), "got []");
  EXPECT_ERROR(infer(i3, f2, 0), "depth must be >= 1, got 0");
  EXPECT_ERROR(infer(i3, f2, 4, 2), "axis 2 is out of range [-2, 1] for indices of rank 1");
  EXPECT_ERROR(infer(i3, f2, 4, -3), "axis -3 is out of range [-2, 1]");
  Graph graph;
  Builder builder(graph);
  EXPECT_ERROR(builder.create(OpKind::OneHot, {graph.addInput(i3), graph.addInput(f2)}),
               "missing required attribute 'depth'");
}

// ---- tile ----------------------------------------------------------------------------------------

// out[i][j][k] = x[i mod d0][j mod d1][k mod d2], against a loop; also ranks 0 and 1.
TEST(OpsSequenceTile, AgainstModuloLoop) {
  Tensor x = seq(DType::F32, {2, 1, 3});
  Tensor y = runOp(OpKind::Tile, {x}, {{"repeats", ints({2, 3, 1})}});
  ASSERT_EQ(y.type(), TensorType({DType::F32, {4, 3, 3}}));
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 3; ++j)
      for (int64_t k = 0; k < 3; ++k)
        EXPECT_EQ(y.getDouble((i * 3 + j) * 3 + k), x.getDouble((i % 2) * 3 + k));
  EXPECT_EQ(values(runOp(OpKind::Tile, {seq(DType::I32, {3})}, {{"repeats", ints({2})}})),
            std::vector<double>({0, 1, 2, 0, 1, 2}));
  EXPECT_EQ(values(runOp(OpKind::Tile, {f32s({2, 2}, {1, 2, 3, 4})}, {{"repeats", ints({1, 2})}})),
            std::vector<double>({1, 2, 1, 2, 3, 4, 3, 4}));
  Tensor scalar = runOp(OpKind::Tile, {Tensor::scalar(DType::F64, 2.5)}, {{"repeats", ints({})}});
  EXPECT_EQ(scalar.rank(), 0);
  EXPECT_EQ(scalar.getDouble(0), 2.5);
}

TEST(OpsSequenceTile, ZeroRepeatsEmptyDimsAndExactDtypes) {
  EXPECT_EQ(runOp(OpKind::Tile, {seq(DType::F32, {2, 3})}, {{"repeats", ints({0, 2})}}).shape(),
            Shape({0, 6}));
  EXPECT_EQ(runOp(OpKind::Tile, {seq(DType::F32, {0, 3})}, {{"repeats", ints({4, 1})}}).shape(),
            Shape({0, 3}));
  Tensor big(DType::I64, {1});
  big.setInt(0, (int64_t{1} << 62) + 1);
  Tensor tiled = runOp(OpKind::Tile, {big}, {{"repeats", ints({3})}});
  for (int64_t i = 0; i < 3; ++i)
    EXPECT_EQ(tiled.getInt(i), (int64_t{1} << 62) + 1);
  EXPECT_EQ(decompositionOps(OpKind::Tile, {{DType::F32, {2, 3}}}, {{"repeats", ints({2, 2})}}),
            std::set<OpKind>({OpKind::Reshape, OpKind::Broadcast}));
}

TEST(OpsSequenceTile, Errors) {
  auto infer = [](TensorType x, std::vector<int64_t> repeats) {
    inferTypes(OpKind::Tile, {x}, {{"repeats", ints(std::move(repeats))}});
  };
  TensorType f23{DType::F32, {2, 3}};
  EXPECT_ERROR(infer(f23, {2}), "repeats [2] has 1 entries, but the input has rank 2");
  EXPECT_ERROR(infer(f23, {2, -1}), "repeats [2,-1] has a negative entry -1");
  EXPECT_ERROR(infer(f23, {int64_t{1} << 62, 4}), "overflows int64");
  EXPECT_ERROR(infer(f23, {int64_t{1} << 40, int64_t{1} << 40}), "has too many elements");
  Graph graph;
  Builder builder(graph);
  EXPECT_ERROR(builder.create(OpKind::Tile, {graph.addInput(f23)}), "missing required attribute 'repeats'");
}
