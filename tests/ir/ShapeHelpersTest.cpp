// The shape helpers of core/DType.h that passes and codegen share: row-major strides, and the one
// batch stride a batched GEMM call needs (FusionAnalysis decides with it whether a permute can
// be read through strides; EmitContraction then sets stride_a / stride_b from it).
#include <gtest/gtest.h>

#include "core/DType.h"

using kiln::contiguousStrides;
using kiln::Shape;
using kiln::uniformBatchStride;

TEST(ShapeHelpers, ContiguousStridesAreRowMajor) {
  EXPECT_EQ(contiguousStrides({2, 3, 4}), (std::vector<int64_t>{12, 4, 1}));
  EXPECT_EQ(contiguousStrides({5}), (std::vector<int64_t>{1}));
  EXPECT_TRUE(contiguousStrides({}).empty());
}

TEST(ShapeHelpers, BatchDimsOfOneContiguousBlockHaveOneStride) {
  // [2, 3] batch of 4 x 5 matrices stored contiguously: step 20 per flattened batch index.
  EXPECT_EQ(uniformBatchStride({60, 20}, {2, 3}), 20);
  // A broadcast operand: stride 0 everywhere.
  EXPECT_EQ(uniformBatchStride({0, 0}, {2, 3}), 0);
}

TEST(ShapeHelpers, SizeOneBatchDimsDoNotConstrainTheStride) {
  // Dims of size 1 never move, whatever their stride; with no dim above 1 the stride is 0.
  EXPECT_EQ(uniformBatchStride({999, 20}, {1, 3}), 20);
  EXPECT_EQ(uniformBatchStride({60, 7, 20}, {2, 1, 3}), 20);
  EXPECT_EQ(uniformBatchStride({5, 9}, {1, 1}), 0);
  EXPECT_EQ(uniformBatchStride({}, {}), 0);
}

TEST(ShapeHelpers, PermutedOrSplitBatchDimsHaveNoSingleStride) {
  // Swapped batch dims ([heads, batch] view of [batch, heads, ...]): strides 20, 60 for sizes 2, 3.
  EXPECT_FALSE(uniformBatchStride({20, 60}, {2, 3}).has_value());
  // The outer dim steps further than the inner dims span: a gap between blocks.
  EXPECT_FALSE(uniformBatchStride({100, 20}, {2, 3}).has_value());
  // Not a multiple of the inner extent.
  EXPECT_FALSE(uniformBatchStride({61, 20}, {2, 3}).has_value());
  // One broadcast dim next to a moving one.
  EXPECT_FALSE(uniformBatchStride({0, 20}, {2, 3}).has_value());
}
