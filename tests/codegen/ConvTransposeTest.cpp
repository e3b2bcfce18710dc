// conv_transpose compiled (rt->gemm into columns + generated col2im, the fused epilogue per
// output plane) against the reference evaluator: strides, pads, dilations, groups (depthwise
// too), output_padding, 1-D, 2-D and 3-D, the 1x1 kernel that is a plain gemm, a fused
// bias + relu epilogue, few input channels per group (depthwise: scattered straight from x),
// and f64 through the generic loop nest. Also prints the GFLOP/s of
// conv_transpose next to the forward conv on ResNet-like shapes (printed, not asserted).
#include <chrono>
#include <cstdio>

#include <gtest/gtest.h>

#include "frontend/Frontend.h"
#include "tests/codegen/CodegenTestUtil.h"

namespace kiln::codegen::test {
namespace {

using frontend::GraphBuilder;
using frontend::Var;
using Ints = std::vector<int64_t>;

struct Attrs {
  Ints strides, pads, dilations, outputPadding;
  int64_t groups = 1;
};

Var convTranspose(GraphBuilder &gb, const Var &x, const Var &w, const Attrs &a) {
  return gb.op(ir::OpKind::ConvTranspose, {x, w},
               {{"strides", a.strides},
                {"pads", a.pads},
                {"dilations", a.dilations},
                {"output_padding", a.outputPadding},
                {"groups", a.groups}});
}

// One conv_transpose with a bias + relu epilogue, compiled and compared; returns the strategies.
std::vector<std::string> checkBiasRelu(const Shape &x, const Shape &w, const Attrs &attrs, uint64_t seed) {
  GraphBuilder gb("conv_transpose");
  Var input = gb.input("x", DType::F32, x);
  Var weight = gb.input("w", DType::F32, w);
  int64_t outChannels = w[1] * attrs.groups;
  Shape biasShape(x.size(), 1);
  biasShape[1] = outChannels;
  Var bias = gb.input("b", DType::F32, {outChannels});
  Var y = frontend::relu(convTranspose(gb, input, weight, attrs) + frontend::reshape(bias, biasShape));
  auto graph = gb.finish({y});
  expectMatchesReference(*graph, randomInputs(*graph, seed), testOptions(), 1e-4, 1e-5);
  return launchStrategies(*graph);
}

TEST(CodegenConvTranspose, PlainStrideOneIsOneContractionKernel) {
  std::vector<std::string> strategies = checkBiasRelu({2, 5, 7, 6}, {5, 4, 3, 3}, {}, 1);
  EXPECT_EQ(strategies, std::vector<std::string>{"contraction"});
}

TEST(CodegenConvTranspose, StridesPadsAndOutputPadding) {
  checkBiasRelu({2, 6, 5, 7}, {6, 3, 3, 3}, {{2, 2}, {1, 1, 1, 1}, {}, {1, 1}}, 2);
  checkBiasRelu({1, 5, 4, 5}, {5, 2, 3, 2}, {{3, 2}, {0, 1, 2, 0}, {}, {2, 1}}, 3);
  checkBiasRelu({1, 6, 3, 3}, {6, 2, 4, 4}, {{2, 2}, {3, 3, 3, 3}, {}, {}}, 4); // pads swallow whole taps
}

TEST(CodegenConvTranspose, Dilations) { checkBiasRelu({2, 6, 6, 5}, {6, 3, 3, 2}, {{1, 2}, {1, 0, 2, 1}, {2, 3}, {}}, 5); }

TEST(CodegenConvTranspose, GroupsAndDepthwise) {
  checkBiasRelu({1, 12, 5, 6}, {12, 3, 3, 3}, {{2, 1}, {1, 0, 1, 2}, {}, {1, 0}, 2}, 6); // columns per group
  checkBiasRelu({2, 6, 5, 5}, {6, 2, 3, 3}, {{2, 2}, {1, 1, 1, 1}, {}, {1, 1}, 3}, 6);     // scatter from x
  checkBiasRelu({2, 8, 9, 7}, {8, 1, 3, 3}, {{1, 1}, {1, 1, 1, 1}, {}, {}, 8}, 7); // depthwise
}

TEST(CodegenConvTranspose, WeightsTransposedInBlocksWithRaggedEdges) {
  // The weights are transposed in 16 x 16 blocks: 37 input channels (two blocks and 5) by
  // 21 * 9 = 189 columns (eleven blocks and 13), and two groups of 19 channels by 90.
  checkBiasRelu({2, 37, 6, 5}, {37, 21, 3, 3}, {{2, 2}, {1, 1, 1, 1}, {}, {1, 1}}, 17);
  checkBiasRelu({1, 38, 5, 5}, {38, 10, 3, 3}, {{2, 2}, {1, 1, 1, 1}, {}, {}, 2}, 18);
}

TEST(CodegenConvTranspose, OneByOneKernelIsAGemm) {
  checkBiasRelu({3, 16, 5, 4}, {16, 8, 1, 1}, {}, 8);
  checkBiasRelu({2, 8, 5, 4}, {8, 4, 1, 1}, {{2, 2}, {}, {}, {1, 0}}, 9); // strided: col2im
}

TEST(CodegenConvTranspose, OneDAndThreeD) {
  checkBiasRelu({2, 7, 11}, {7, 4, 3}, {{2}, {1, 2}, {1}, {1}}, 10);
  checkBiasRelu({1, 5, 3, 4, 3}, {5, 3, 2, 3, 2}, {{2, 1, 2}, {0, 1, 0, 1, 0, 1}, {1, 1, 2}, {1, 0, 0}}, 11);
}

TEST(CodegenConvTranspose, FewInputChannelsScatterFromX) {
  checkBiasRelu({2, 3, 6, 5}, {3, 4, 3, 3}, {{2, 2}, {1, 0, 0, 1}, {1, 2}, {1, 1}}, 14);
  checkBiasRelu({1, 2, 9}, {2, 3, 4}, {{3}, {2, 1}, {2}, {2}}, 15);
  checkBiasRelu({1, 2, 3, 4, 3}, {2, 3, 2, 3, 2}, {{2, 1, 2}, {0, 1, 0, 1, 0, 1}, {1, 1, 2}, {1, 0, 0}}, 16);
}

TEST(CodegenConvTranspose, BatchLargerThanOneChunk) {
  // 40 images of 64 x 9 x 32 x 32 columns exceed one chunk of columns: several gemm rounds.
  GraphBuilder gb("chunks");
  Var x = gb.input("x", DType::F32, {40, 8, 32, 32});
  Var w = gb.input("w", DType::F32, {8, 64, 3, 3});
  auto graph = gb.finish({convTranspose(gb, x, w, {{1, 1}, {1, 1, 1, 1}, {}, {}})});
  expectMatchesReference(*graph, randomInputs(*graph, 12));
}

TEST(CodegenConvTranspose, DoubleUsesTheGenericLoops) {
  GraphBuilder gb("f64");
  Var x = gb.input("x", DType::F64, {2, 4, 5, 6});
  Var w = gb.input("w", DType::F64, {4, 3, 3, 3});
  auto graph = gb.finish({convTranspose(gb, x, w, {{2, 1}, {1, 0, 0, 1}, {1, 2}, {1, 0}, 2})});
  expectMatchesReference(*graph, randomInputs(*graph, 13), testOptions(), 1e-12, 1e-12);
}

// Best of three runs of `graph` on `inputs`, in seconds.
double bestSeconds(const ir::Graph &graph, const std::vector<Tensor> &inputs) {
  runtime::Executable executable = compile(graph, testOptions());
  executable.run(inputs); // warm up
  double best = 1e30;
  for (int run = 0; run < 3; ++run) {
    auto start = std::chrono::steady_clock::now();
    executable.run(inputs);
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return best;
}

// conv x[N, C, H, W] -> [N, K, OH, OW] (3x3, pad 1) and the conv_transpose of its output back
// to x's shape (the input gradient): the same multiply-adds, 2*N*K*(C/groups)*9*OH*OW flops.
void printThroughput(const Shape &x, int64_t outChannels, int64_t stride, int64_t groups = 1) {
  int64_t oh = (x[2] + 2 - 3) / stride + 1, ow = (x[3] + 2 - 3) / stride + 1;
  Shape w{outChannels, x[1] / groups, 3, 3}, y{x[0], outChannels, oh, ow};
  double flops = 2.0 * x[0] * outChannels * (x[1] / groups) * 9 * oh * ow;
  GraphBuilder forward("conv");
  Var in = forward.input("x", DType::F32, x);
  Var weight = forward.input("w", DType::F32, w);
  auto conv = forward.finish({frontend::conv(in, weight, Var(), {stride, stride}, {1, 1, 1, 1}, {}, groups)});
  GraphBuilder backward("conv_transpose");
  Var dy = backward.input("dy", DType::F32, y);
  Var weightT = backward.input("w", DType::F32, w);
  auto transpose = backward.finish(
      {convTranspose(backward, dy, weightT, {{stride, stride}, {1, 1, 1, 1}, {}, {stride - 1, stride - 1}, groups})});
  ASSERT_EQ(transpose->outputs()[0]->shape(), x);
  double convSeconds = bestSeconds(*conv, randomInputs(*conv, 20));
  double transposeSeconds = bestSeconds(*transpose, randomInputs(*transpose, 21));
  std::printf("[ perf ] x%s 3x3 stride %lld groups %lld: conv %.1f GFLOP/s (%.2f ms), conv_transpose %.1f GFLOP/s (%.2f ms)\n",
              shapeToString(x).c_str(), static_cast<long long>(stride), static_cast<long long>(groups), flops / convSeconds * 1e-9, convSeconds * 1e3,
              flops / transposeSeconds * 1e-9, transposeSeconds * 1e3);
}

TEST(CodegenConvTranspose, ThroughputOnResNetShapes) {
  if (!std::getenv("KILN_PERF"))
    GTEST_SKIP() << "set KILN_PERF=1 to print conv / conv_transpose GFLOP/s";
  printThroughput({8, 64, 56, 56}, 64, 1);
  printThroughput({8, 64, 56, 56}, 128, 2); // conv_transpose from [8, 128, 28, 28]
  printThroughput({8, 64, 56, 56}, 64, 1, 64); // depthwise
  printThroughput({8, 256, 14, 14}, 512, 2);    // ResNet-18's deepest downsample, weights 4.7 MB
  printThroughput({8, 128, 28, 28}, 256, 2);
}

} // namespace
} // namespace kiln::codegen::test
