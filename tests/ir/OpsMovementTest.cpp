// Movement ops that re-index elements (ir/ops/Movement.cpp: reshape, permute, broadcast, squeeze,
// unsqueeze, flatten): every op built through ir::Builder, verified, and evaluated with
// ir::evaluate; expected values are hand-written or computed by plain loops over the obvious index
// formula. slice, pad, concat and split are in OpsMovementRegionTest.cpp.
#include <gtest/gtest.h>

#include <cstdint>

#include "core/Error.h"
#include "ir/Builder.h"
#include "ir/Evaluator.h"
#include "ir/Verifier.h"
#include "tests/ir/OpTestUtil.h"

using namespace kiln;
using namespace kiln::ir;
using namespace kiln::test;

// ---- reshape ---------------------------------------------------------------------------------

TEST(OpsMovementReshape, KeepsRowMajorOrder) {
  Tensor y = runOp(OpKind::Reshape, {seq(DType::F32, {2, 3})}, {{"shape", ints({3, 2})}});
  EXPECT_EQ(y.type(), f32({3, 2}));
  EXPECT_EQ(values(y), values(seq(DType::F32, {6})));
}

TEST(OpsMovementReshape, InfersMinusOneAndKeepsZeroAsZero) {
  EXPECT_EQ(inferTypes(OpKind::Reshape, {f32({2, 3, 4})}, {{"shape", ints({-1, 4})}})[0].shape,
            Shape({6, 4}));
  EXPECT_EQ(inferTypes(OpKind::Reshape, {f32({2, 3, 4})}, {{"shape", ints({4, -1})}})[0].shape,
            Shape({4, 6}));
  // 0 is a zero-size dim, not ONNX's "copy the input dim".
  EXPECT_EQ(inferTypes(OpKind::Reshape, {f32({2, 0, 3})}, {{"shape", ints({0, 5})}})[0].shape, Shape({0, 5}));
  EXPECT_EQ(inferTypes(OpKind::Reshape, {f32({2, 0, 3})}, {{"shape", ints({-1, 7})}})[0].shape,
            Shape({0, 7}));
  EXPECT_ERROR(inferTypes(OpKind::Reshape, {f32({2, 3})}, {{"shape", ints({0, 3})}}), "cannot reshape");
}

TEST(OpsMovementReshape, ScalarsAndExactIntegers) {
  Tensor scalar = Tensor::scalar(DType::I64, 0);
  const int64_t big = (int64_t{1} << 53) + 1; // not representable in double
  scalar.setInt(0, big);
  Tensor y = runOp(OpKind::Reshape, {scalar}, {{"shape", ints({1, 1})}});
  EXPECT_EQ(y.shape(), Shape({1, 1}));
  EXPECT_EQ(y.getInt(0), big);
  Tensor back = runOp(OpKind::Reshape, {y}, {{"shape", ints({})}});
  EXPECT_EQ(back.rank(), 0);
  EXPECT_EQ(back.getInt(0), big);
}

TEST(OpsMovementReshape, Errors) {
  auto infer = [](Shape in, std::vector<int64_t> shape) {
    inferTypes(OpKind::Reshape, {f32(std::move(in))}, {{"shape", ints(std::move(shape))}});
  };
  EXPECT_ERROR(infer({2, 3}, {-1, -1}), "more than one -1");
  EXPECT_ERROR(infer({2, 3}, {-2, 3}), "negative dimension -2");
  EXPECT_ERROR(infer({2, 3}, {4, 2}), "cannot reshape [2,3] (6 elements) into [4,2] (8 elements)");
  EXPECT_ERROR(infer({2, 3}, {4, -1}), "not a multiple of 4");
  EXPECT_ERROR(infer({2, 0}, {0, -1}), "cannot infer the -1");
  EXPECT_ERROR(infer({2, 3}, {kI64Max, kI64Max}), "dimension 9223372036854775807 larger than kiln's limit of 2^48");
  // A dim past the limit is refused also where a zero makes the result empty.
  EXPECT_ERROR(infer({0}, {0, kI64Max}), "dimension 9223372036854775807 larger than kiln's limit of 2^48");
  Graph graph;
  Builder builder(graph);
  EXPECT_ERROR(builder.create(OpKind::Reshape, {graph.addInput(f32({2}))}),
               "missing required attribute 'shape'");
}

// ---- permute ---------------------------------------------------------------------------------

TEST(OpsMovementPermute, MovesAxesWithNegativeEntries) {
  Tensor x = seq(DType::I32, {2, 3, 4});
  for (auto perm : {std::vector<int64_t>{2, 0, 1}, std::vector<int64_t>{-1, 0, -2}}) {
    Tensor y = runOp(OpKind::Permute, {x}, {{"perm", ints(perm)}});
    ASSERT_EQ(y.type(), TensorType({DType::I32, {4, 2, 3}}));
    for (int64_t i = 0; i < 4; ++i)
      for (int64_t j = 0; j < 2; ++j)
        for (int64_t k = 0; k < 3; ++k) // y[i][j][k] = x[j][k][i]
          EXPECT_EQ(y.getInt(i * 6 + j * 3 + k), x.getInt(j * 12 + k * 4 + i));
  }
}

TEST(OpsMovementPermute, ScalarEmptyAndBool) {
  EXPECT_EQ(values(runOp(OpKind::Permute, {Tensor::scalar(DType::F32, 7)}, {{"perm", ints({})}})),
            std::vector<double>{7});
  Tensor empty = runOp(OpKind::Permute, {seq(DType::F32, {2, 0, 3})}, {{"perm", ints({2, 1, 0})}});
  EXPECT_EQ(empty.shape(), Shape({3, 0, 2}));
  Tensor b = Tensor::fromDoubles(DType::Bool, {2, 2}, {1, 0, 0, 0});
  EXPECT_EQ(values(runOp(OpKind::Permute, {b}, {{"perm", ints({1, 0})}})), std::vector<double>({1, 0, 0, 0}));
  Tensor b2 = Tensor::fromDoubles(DType::Bool, {2, 2}, {0, 1, 0, 0});
  EXPECT_EQ(values(runOp(OpKind::Permute, {b2}, {{"perm", ints({1, 0})}})),
            std::vector<double>({0, 0, 1, 0}));
}

TEST(OpsMovementPermute, Errors) {
  auto infer = [](std::vector<int64_t> perm) {
    inferTypes(OpKind::Permute, {f32({2, 3, 4})}, {{"perm", ints(std::move(perm))}});
  };
  EXPECT_ERROR(infer({1, 0}), "has 2 entries, but the operand has rank 3");
  EXPECT_ERROR(infer({0, 1, 1}), "axis 1 appears twice");
  EXPECT_ERROR(infer({0, 1, 3}), "axis 3 is out of range for rank 3");
  EXPECT_ERROR(infer({0, -3, 2}), "axis -3 appears twice"); // -3 is axis 0 again
}

// ---- broadcast -------------------------------------------------------------------------------

TEST(OpsMovementBroadcast, StretchesSizeOneDimsAndAddsLeadingOnes) {
  Tensor x = seq(DType::F32, {2, 1, 3});
  Tensor y = runOp(OpKind::Broadcast, {x}, {{"shape", ints({4, 2, 5, 3})}});
  ASSERT_EQ(y.shape(), Shape({4, 2, 5, 3}));
  for (int64_t a = 0; a < 4; ++a)
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t c = 0; c < 5; ++c)
        for (int64_t d = 0; d < 3; ++d)
          EXPECT_EQ(y.getDouble(((a * 2 + b) * 5 + c) * 3 + d), x.getDouble(b * 3 + d));
  EXPECT_EQ(values(runOp(OpKind::Broadcast, {Tensor::scalar(DType::I8, -3)}, {{"shape", ints({2, 2})}})),
            std::vector<double>({-3, -3, -3, -3}));
  EXPECT_EQ(runOp(OpKind::Broadcast, {seq(DType::F32, {1})}, {{"shape", ints({0})}}).shape(), Shape({0}));
  EXPECT_EQ(runOp(OpKind::Broadcast, {seq(DType::F32, {0, 1})}, {{"shape", ints({3, 0, 2})}}).shape(),
            Shape({3, 0, 2}));
}

TEST(OpsMovementBroadcast, Errors) {
  auto infer = [](Shape in, std::vector<int64_t> shape) {
    inferTypes(OpKind::Broadcast, {f32(std::move(in))}, {{"shape", ints(std::move(shape))}});
  };
  EXPECT_ERROR(infer({3}, {2, 4}), "operand dim 0 has size 3, the target needs 4");
  EXPECT_ERROR(infer({2, 3}, {3}), "lower rank");
  EXPECT_ERROR(infer({1}, {-1}), "negative dimension");
  EXPECT_ERROR(infer({0}, {2}), "cannot broadcast [0] to [2]");
}

// ---- squeeze, unsqueeze, flatten (composites) ------------------------------------------------

/// The composite's decomposition must be exactly one reshape to `shape`.
void expectDecomposesToReshape(OpKind op, const TensorType &in, const AttrMap &attrs, const Shape &shape) {
  auto graph = decompositionGraph(op, {in}, attrs);
  std::vector<Node *> nodes = graph->nodes();
  ASSERT_EQ(nodes.size(), 1u);
  EXPECT_EQ(nodes[0]->op(), OpKind::Reshape);
  EXPECT_EQ(nodes[0]->attrInts("shape"), shape);
  verify(*graph);
}

TEST(OpsMovementSqueeze, DropsSizeOneDims) {
  Tensor x = seq(DType::F32, {1, 3, 1, 2});
  Tensor all = runOp(OpKind::Squeeze, {x}, {});
  EXPECT_EQ(all.shape(), Shape({3, 2}));
  EXPECT_EQ(values(all), values(x));
  EXPECT_EQ(runOp(OpKind::Squeeze, {x}, {{"axes", ints({-2})}}).shape(), Shape({1, 3, 2}));
  EXPECT_EQ(runOp(OpKind::Squeeze, {seq(DType::F32, {1, 1})}, {}).rank(), 0);
  EXPECT_EQ(runOp(OpKind::Squeeze, {seq(DType::F32, {0, 1})}, {}).shape(), Shape({0}));
  expectDecomposesToReshape(OpKind::Squeeze, x.type(), {{"axes", ints({0})}}, {3, 1, 2});
  EXPECT_ERROR(inferTypes(OpKind::Squeeze, {x.type()}, {{"axes", ints({1})}}),
               "cannot squeeze axis 1: it has size 3");
  EXPECT_ERROR(inferTypes(OpKind::Squeeze, {x.type()}, {{"axes", ints({0, -4})}}), "appears twice");
  EXPECT_ERROR(inferTypes(OpKind::Squeeze, {f32({})}, {{"axes", ints({0})}}), "out of range for rank 0");
}

TEST(OpsMovementUnsqueeze, InsertsOnesAtOutputPositions) {
  Tensor x = seq(DType::I64, {3, 2});
  Tensor y = runOp(OpKind::Unsqueeze, {x}, {{"axes", ints({0, -1})}});
  EXPECT_EQ(y.shape(), Shape({1, 3, 2, 1}));
  EXPECT_EQ(values(y), values(x));
  EXPECT_EQ(runOp(OpKind::Unsqueeze, {x}, {{"axes", ints({1})}}).shape(), Shape({3, 1, 2}));
  EXPECT_EQ(runOp(OpKind::Unsqueeze, {x}, {{"axes", ints({-2, 1})}}).shape(), Shape({3, 1, 1, 2}));
  EXPECT_EQ(values(runOp(OpKind::Unsqueeze, {Tensor::scalar(DType::F32, 2)}, {{"axes", ints({0})}})),
            std::vector<double>{2});
  expectDecomposesToReshape(OpKind::Unsqueeze, f32({0, 4}), {{"axes", ints({2})}}, {0, 4, 1});
  EXPECT_ERROR(inferTypes(OpKind::Unsqueeze, {x.type()}, {{"axes", ints({3})}}),
               "axis 3 is out of range for rank 3");
  EXPECT_ERROR(inferTypes(OpKind::Unsqueeze, {x.type()}, {{"axes", ints({0, -4})}}), "axis -4 appears twice");
}

TEST(OpsMovementFlatten, MergesARangeOfDims) {
  Tensor x = seq(DType::F32, {2, 3, 4});
  Tensor all = runOp(OpKind::Flatten, {x}, {});
  EXPECT_EQ(all.shape(), Shape({24}));
  EXPECT_EQ(values(all), values(x));
  auto shapeOf = [](Shape in, int64_t start, int64_t end) {
    return inferTypes(OpKind::Flatten, {f32(std::move(in))}, {{"start", int1(start)}, {"end", int1(end)}})[0]
        .shape;
  };
  EXPECT_EQ(shapeOf({2, 3, 4}, 1, -1), Shape({2, 12}));
  EXPECT_EQ(shapeOf({2, 3, 4}, 0, 1), Shape({6, 4}));
  EXPECT_EQ(shapeOf({2, 3, 4}, -2, -2), Shape({2, 3, 4}));
  EXPECT_EQ(shapeOf({2, 0, 3}, 1, 2), Shape({2, 0}));
  EXPECT_EQ(shapeOf({}, 0, -1), Shape({1}));
  EXPECT_EQ(values(runOp(OpKind::Flatten, {Tensor::scalar(DType::F32, 6)}, {})), std::vector<double>{6});
  expectDecomposesToReshape(OpKind::Flatten, x.type(), {{"start", int1(1)}}, {2, 12});
  EXPECT_ERROR(shapeOf({2, 3, 4}, 2, 1), "start 2 comes after end 1");
  EXPECT_ERROR(shapeOf({2, 3}, 0, 2), "end: axis 2 is out of range for rank 2");
  EXPECT_ERROR(shapeOf({}, 1, -1), "start: axis 1 is out of range for rank 1");
}
