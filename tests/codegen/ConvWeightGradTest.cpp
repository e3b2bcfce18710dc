// conv_weight_grad compiled (rt->conv2d_weight_grad for one-group 2-D and 1-D kernels larger than
// 1x1; else generated im2col per chunk of images + rt->gemm per group; the f64 loop nest)
// against the reference evaluator: strides, pads, dilations, groups (depthwise too), 1-D, 2-D
// and 3-D, a 1x1 kernel, images chunked with g copied side by side and chunks summed through
// the scratch matrix, and empty batches.
#include <gtest/gtest.h>

#include "frontend/Frontend.h"
#include "tests/codegen/CodegenTestUtil.h"

namespace kiln::codegen::test {
namespace {

using frontend::GraphBuilder;
using frontend::Var;
using Ints = std::vector<int64_t>;

struct Attrs {
  Ints strides, pads, dilations;
  int64_t groups = 1;
};

// The conv's output shape for x and a weight of `w` (written here from the conv definition).
Shape convOutShape(const Shape &x, const Shape &w, const Attrs &a) {
  size_t spatial = x.size() - 2;
  Shape out{x[0], w[0]};
  for (size_t d = 0; d < spatial; ++d) {
    int64_t stride = a.strides.empty() ? 1 : a.strides[d], dilation = a.dilations.empty() ? 1 : a.dilations[d];
    int64_t padded = x[2 + d] + (a.pads.empty() ? 0 : a.pads[d] + a.pads[spatial + d]);
    out.push_back((padded - (w[2 + d] - 1) * dilation - 1) / stride + 1);
  }
  return out;
}

// Compiles conv_weight_grad(x, g) for weights of shape `w` and compares with the evaluator.
std::vector<std::string> check(const Shape &x, const Shape &w, const Attrs &a, uint64_t seed,
                               DType dtype = DType::F32) {
  GraphBuilder gb("conv_weight_grad");
  Var input = gb.input("x", dtype, x);
  Var grad = gb.input("g", dtype, convOutShape(x, w, a));
  Var gw = gb.op(ir::OpKind::ConvWeightGrad, {input, grad},
                 {{"strides", a.strides},
                  {"pads", a.pads},
                  {"dilations", a.dilations},
                  {"groups", a.groups},
                  {"weight_shape", w}});
  auto graph = gb.finish({gw});
  EXPECT_EQ(graph->outputs()[0]->shape(), w);
  expectMatchesReference(*graph, randomInputs(*graph, seed), testOptions(), 1e-4, 1e-5);
  return launchStrategies(*graph);
}

// How many calls of the direct weight-gradient kernel the compiled source makes.
int directKernelCalls(const Shape &x, const Shape &w, const Attrs &a) {
  GraphBuilder gb("conv_weight_grad");
  Var input = gb.input("x", DType::F32, x);
  Var grad = gb.input("g", DType::F32, convOutShape(x, w, a));
  Var gw = gb.op(ir::OpKind::ConvWeightGrad, {input, grad},
                 {{"strides", a.strides}, {"pads", a.pads}, {"dilations", a.dilations}, {"groups", a.groups},
                  {"weight_shape", w}});
  auto graph = gb.finish({gw});
  return countInSource(*graph, "rt->conv2d_weight_grad(");
}

TEST(CodegenConvWeightGrad, PlainThreeByThree) {
  std::vector<std::string> strategies = check({2, 5, 7, 6}, {4, 5, 3, 3}, {}, 1);
  EXPECT_EQ(strategies, std::vector<std::string>{"per-op"});
  check({3, 8, 9, 9}, {6, 8, 3, 3}, {{}, {1, 1, 1, 1}, {}}, 2);
}

TEST(CodegenConvWeightGrad, StridesAndPads) {
  check({2, 6, 9, 8}, {4, 6, 3, 3}, {{2, 2}, {1, 1, 1, 1}, {}}, 3);
  check({1, 5, 8, 9}, {3, 5, 3, 2}, {{3, 2}, {0, 1, 2, 0}, {}}, 4);    // uneven pads, rows never reached
  check({2, 3, 4, 4}, {2, 3, 4, 4}, {{2, 2}, {3, 3, 3, 3}, {}}, 5);    // pads swallow whole taps
}

TEST(CodegenConvWeightGrad, Dilations) { check({2, 4, 10, 9}, {5, 4, 3, 2}, {{1, 2}, {1, 0, 2, 1}, {2, 3}}, 6); }

TEST(CodegenConvWeightGrad, GroupsAndDepthwise) {
  check({2, 12, 7, 6}, {6, 4, 3, 3}, {{2, 1}, {1, 0, 1, 2}, {}, 3}, 7);
  check({2, 8, 9, 7}, {8, 1, 3, 3}, {{1, 1}, {1, 1, 1, 1}, {}, 8}, 8);  // depthwise
  check({1, 6, 5, 5}, {12, 1, 3, 3}, {{2, 2}, {1, 1, 1, 1}, {}, 6}, 9); // depthwise, multiplier 2
}

TEST(CodegenConvWeightGrad, OneByOneKernel) {
  check({3, 16, 5, 4}, {8, 16, 1, 1}, {}, 10);
  check({2, 8, 6, 5}, {4, 8, 1, 1}, {{2, 2}, {}, {}}, 11);
}

TEST(CodegenConvWeightGrad, OneDAndThreeD) {
  check({2, 7, 11}, {4, 7, 3}, {{2}, {1, 2}, {1}}, 12);
  check({3, 4, 13}, {6, 2, 4}, {{1}, {0, 0}, {2}, 2}, 13);
  check({1, 5, 4, 5, 4}, {3, 5, 2, 3, 2}, {{2, 1, 2}, {0, 1, 0, 1, 0, 1}, {1, 1, 2}}, 14);
}

TEST(CodegenConvWeightGrad, ChunkedImages) {
  // Two groups (so not the direct kernel) and 6 * 9 * 166 * 166 floats of columns per image:
  // two images per chunk, so the first chunk copies g side by side and the second (one image)
  // goes through the scratch sum.
  check({3, 6, 166, 166}, {2, 3, 3, 3}, {{}, {1, 1, 1, 1}, {}, 2}, 15);
}

TEST(CodegenConvWeightGrad, DirectKernelAgainstTheReference) {
  check({2, 20, 9, 8}, {16, 20, 3, 3}, {{}, {1, 1, 1, 1}, {}}, 19);
  check({2, 3, 13, 12}, {24, 3, 5, 5}, {{2, 2}, {2, 2, 1, 1}, {}}, 20);      // vectors along K
  check({1, 18, 10, 9}, {5, 18, 3, 2}, {{1, 2}, {1, 0, 2, 1}, {2, 3}}, 21);  // dilated, strided
  check({2, 17, 11}, {4, 17, 3}, {{2}, {1, 2}, {1}}, 22);                    // 1-D
}

TEST(CodegenConvWeightGrad, DirectKernelForOneGroupPlanarWindows) {
  EXPECT_EQ(directKernelCalls({2, 5, 7, 6}, {16, 5, 3, 3}, {}), 1);
  EXPECT_EQ(directKernelCalls({2, 3, 9, 9}, {32, 3, 7, 7}, {{2, 2}, {3, 3, 3, 3}, {}}), 1); // a stem
  EXPECT_EQ(directKernelCalls({2, 17, 11}, {4, 17, 3}, {{2}, {1, 2}, {1}}), 1); // 1-D
  EXPECT_EQ(directKernelCalls({2, 5, 7, 6}, {4, 5, 3, 3}, {}), 0);  // no side fills a vector
  EXPECT_EQ(directKernelCalls({2, 24, 7, 6}, {18, 8, 3, 3}, {{}, {}, {}, 3}), 0); // groups
  EXPECT_EQ(directKernelCalls({3, 16, 5, 4}, {32, 16, 1, 1}, {}), 0);          // 1x1: columns are x
  EXPECT_EQ(directKernelCalls({1, 16, 4, 5, 4}, {16, 16, 2, 3, 2}, {}), 0);    // 3-D
}

TEST(CodegenConvWeightGrad, FloatSixtyFourLoops) {
  check({2, 6, 7, 6}, {4, 3, 3, 3}, {{2, 1}, {1, 0, 1, 2}, {1, 2}, 2}, 16, DType::F64);
  check({2, 3, 9}, {2, 3, 2}, {{1}, {1, 1}, {3}}, 17, DType::F64);
}

TEST(CodegenConvWeightGrad, EmptyBatchGivesZeros) { check({0, 4, 5, 5}, {3, 4, 3, 3}, {}, 18); }

} // namespace
} // namespace kiln::codegen::test
