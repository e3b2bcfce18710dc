// Contraction groups against the reference evaluator: matmul and conv through the runtime's
// precompiled kernels with generated epilogues (bias, activation, residual), operand views
// (transposes become trans flags), batched and broadcast matmuls, pooling, the seed MLP built
// from nn modules and a small ResNet block.
#include <gtest/gtest.h>

#include <cmath>

#include "frontend/Frontend.h"
#include "tests/codegen/CodegenTestUtil.h"

namespace kiln::codegen::test {
namespace {

using frontend::GraphBuilder;
using frontend::Var;

Tensor weights(Shape shape, uint64_t seed) { return randomTensor({DType::F32, std::move(shape)}, seed); }

/// Convolution weights scaled by 1 / sqrt(fan-in), as a trained layer's are, so that a layer's
/// output stays as large as its input and two stacked layers do not cancel large sums.
Tensor convWeights(Shape shape, uint64_t seed) {
  Tensor t = weights(shape, seed);
  const double scale = 1.0 / std::sqrt(static_cast<double>(shape[1] * shape[2] * shape[3]));
  for (int64_t i = 0; i < t.numElements(); ++i)
    t.dataAs<float>()[i] = static_cast<float>(t.dataAs<float>()[i] * scale);
  return t;
}

TEST(CodegenContraction, MatmulBiasReluIsOneKernel) {
  GraphBuilder gb("linear");
  Var x = gb.input("x", DType::F32, {37, 70});
  Var w = gb.param("w", weights({50, 70}, 31));
  Var b = gb.param("b", weights({50}, 32));
  auto graph = gb.finish({frontend::relu(frontend::linear(x, w, b))});
  expectMatchesReference(*graph, randomInputs(*graph, 33));
  EXPECT_EQ(launchStrategies(*graph), std::vector<std::string>{"contraction"});
}

TEST(CodegenContraction, MatmulExportingBothPreAndPostActivation) {
  GraphBuilder gb("two_outputs");
  Var x = gb.input("x", DType::F32, {16, 24});
  Var w = gb.input("w", DType::F32, {24, 40});
  Var b = gb.input("b", DType::F32, {40});
  Var pre = frontend::matmul(x, w) + b;
  auto graph = gb.finish({pre, frontend::tanh(pre) * 2.0});
  expectMatchesReference(*graph, randomInputs(*graph, 34));
}

TEST(CodegenContraction, BatchedAndBroadcastMatmuls) {
  GraphBuilder gb("batched");
  Var a = gb.input("a", DType::F32, {3, 4, 9, 6});
  Var b = gb.input("b", DType::F32, {4, 6, 5});
  Var c = gb.input("c", DType::F32, {3, 1, 6, 5});
  Var v = gb.input("v", DType::F32, {6});
  auto graph = gb.finish({frontend::matmul(a, b),                       // b broadcast over dim 0
                          frontend::matmul(a, c) + 1.0,                 // c broadcast over dim 1
                          frontend::matmul(a, v), frontend::matmul(v, b), // vectors
                          frontend::matmul(frontend::transpose(a, 2, 3), a * 1.0)});
  expectMatchesReference(*graph, randomInputs(*graph, 35));
}

TEST(CodegenContraction, BatchesSharingOneWeightAreRowsOfOneGemm) {
  // [3, 5, 7] x [7, 32]: one GEMM of 15 rows. The epilogue adds a per-batch term ([3, 1, 32])
  // and a per-row one ([5, 1]), so a folded row mapped to the wrong batch or row shows.
  GraphBuilder gb("folded");
  Var x = gb.input("x", DType::F32, {3, 5, 7});
  Var w = gb.param("w", weights({7, 32}, 36));
  Var perBatch = gb.input("per_batch", DType::F32, {3, 1, 32});
  Var perRow = gb.input("per_row", DType::F32, {5, 1});
  auto graph = gb.finish({frontend::relu(frontend::matmul(x, w) + perBatch + perRow)});
  expectMatchesReference(*graph, randomInputs(*graph, 37));
  const std::string source = lowerGraph(*graph, testOptions()).model.source;
  EXPECT_NE(source.find("g.m = 15; g.n = 32; g.k = 7;"), std::string::npos) << source;
  EXPECT_NE(source.find("g.batch = 1;"), std::string::npos);
}

TEST(CodegenContraction, TransposedOperandViews) {
  GraphBuilder gb("transposed");
  Var a = gb.input("a", DType::F32, {20, 12});
  Var b = gb.input("b", DType::F32, {30, 20});
  // aᵀ·bᵀ: both operands are transposed views of inputs, read in place.
  auto graph = gb.finish({frontend::matmul(frontend::transpose(a, 0, 1), frontend::transpose(b, 0, 1))});
  expectMatchesReference(*graph, randomInputs(*graph, 36));
}

TEST(CodegenContraction, WeightsOneMatmulReadsArePackedAtLoad) {
  // A weight that one matmul alone reads, with 64k columns, is packed once at load into the
  // GEMM's B panels: a linear layer's weight read through its transpose, a plain [K, N]
  // parameter and a constant. A weight two matmuls read, and one with 48 columns, stay plain.
  GraphBuilder gb("packed");
  Var x = gb.input("x", DType::F32, {24, 40});
  Var u = gb.input("u", DType::F32, {3, 24, 128});
  Var w1 = gb.param("w1", weights({128, 40}, 41));
  Var w2 = gb.param("w2", weights({128, 64}, 42));
  Var w3 = gb.constant(weights({40, 192}, 43));
  Var shared = gb.param("shared", weights({128, 64}, 44));
  Var narrow = gb.param("narrow", weights({40, 48}, 45));
  auto graph = gb.finish({frontend::relu(frontend::linear(x, w1, gb.param("b1", weights({128}, 46)))),
                          frontend::matmul(u, w2), frontend::matmul(x, w3) * 2.0, frontend::matmul(u, shared),
                          frontend::matmul(frontend::tanh(u), shared), frontend::matmul(x, narrow)});
  EXPECT_EQ(countInSource(*graph, "g.b_layout = KILN_GEMM_B_PANELS;"), 3);
  EXPECT_EQ(countInSource(*graph, "static const kiln_weight_packing kiln_packings[3]"), 1);
  expectMatchesReference(*graph, randomInputs(*graph, 47));
  expectMatchesReference(*graph, randomInputs(*graph, 48), withThreads(2));
}

TEST(CodegenContraction, TransposedViewsOfComputedValues) {
  GraphBuilder gb("computed_views");
  Var x = gb.input("x", DType::F32, {33, 20});
  Var g = gb.input("g", DType::F32, {33, 17});
  Var q = gb.input("q", DType::F32, {2, 9, 3, 8});
  Var k = gb.input("k", DType::F32, {2, 9, 3, 8});
  Var a = frontend::relu(x);
  // A gradient's aᵀ·g and g·...ᵀ (no copy kernel: the GEMM reads the stored relu transposed),
  // and attention's Q·Kᵀ over [batch, heads] with K computed and permuted to [2, 3, 8, 9]:
  // its batch dims do not collapse into one stride, so it stays a copy kernel (one batched
  // GEMM call beats one call per head).
  Var kt = frontend::permute(k * 0.5, {0, 2, 3, 1});
  Var qh = frontend::permute(q, {0, 2, 1, 3});
  auto graph = gb.finish({frontend::matmul(frontend::transpose(a, 0, 1), g),
                          frontend::matmul(frontend::transpose(g, 0, 1), a * 2.0),
                          frontend::matmul(qh, kt)});
  expectMatchesReference(*graph, randomInputs(*graph, 37));
  // relu with a*2, k*0.5, the per-head copies of K^T and Q, and the three GEMMs: no copy for
  // the two matrix transposes (there were two more kernels).
  EXPECT_EQ(launchStrategies(*graph).size(), 7u);
}

TEST(CodegenContraction, ConvBiasReluAndResidual) {
  GraphBuilder gb("conv");
  Var x = gb.input("x", DType::F32, {2, 4, 9, 11});
  Var w = gb.param("w", weights({8, 4, 3, 3}, 37));
  Var b = gb.param("b", weights({8}, 38));
  Var shortcut = gb.input("s", DType::F32, {2, 8, 9, 11});
  Var y = frontend::relu(frontend::conv2d(x, w, b, {1}, {1}));
  Var z = frontend::relu(frontend::conv2d(x, w, b, {1}, {1}) + shortcut);
  auto graph = gb.finish({y, z});
  expectMatchesReference(*graph, randomInputs(*graph, 39));
}

TEST(CodegenContraction, PointwiseConvAccumulatesIntoADyingResidual) {
  // A bottleneck as ResNet has it: s feeds the block's first layer and its residual add,
  // relu(conv1x1(h) + b + s), where s dies. The result gets s's buffer and conv2d adds onto it
  // (passes/fusion/AccumulatedOperand.h). The second block's residual t is still read afterwards, so
  // its result gets a buffer of its own.
  GraphBuilder gb("residual_accumulate");
  Var x = gb.input("x", DType::F32, {2, 16, 7, 9});
  Var w1 = gb.param("w1", convWeights({24, 32, 1, 1}, 63));
  Var b1 = gb.param("b1", weights({24}, 64));
  Var w2 = gb.param("w2", convWeights({32, 24, 1, 1}, 65));
  Var b2 = gb.param("b2", weights({32}, 66));
  auto bottleneck = [&](Var in) {
    Var h = frontend::relu(frontend::conv2d(in, w1, b1));
    return frontend::relu(frontend::conv2d(h, w2, b2) + in);
  };
  Var s = frontend::relu(frontend::conv2d(x, gb.param("ws", convWeights({32, 16, 3, 3}, 61)),
                                          gb.param("bs", weights({32}, 62)), {1}, {1}));
  Var t = frontend::relu(frontend::conv2d(x, gb.param("wt", convWeights({32, 16, 3, 3}, 67)), Var(), {1}, {1}));
  Var w3 = gb.param("w3", convWeights({32, 32, 1, 1}, 70));
  auto graph = gb.finish({frontend::conv2d(bottleneck(s), w3), frontend::conv2d(bottleneck(t), w3) + t});
  EXPECT_EQ(countInSource(*graph, "g.accumulate = 1;"), 1);
  expectMatchesReference(*graph, randomInputs(*graph, 68));
  expectMatchesReference(*graph, randomInputs(*graph, 69), withThreads(2));
}

TEST(CodegenContraction, WeightsOneWinogradConvReadsAreTransformedAtLoad) {
  // A 3x3 stride-1 convolution that conv2d computes with Winograd, whose weights (a parameter or
  // a constant) no other kernel reads, gets them transformed once at load, for the variant the
  // runtime's gate picks: F(4,3) at 24 x 24, F(2,3) at 14 x 14. Weights two convolutions read
  // and a layer below the Winograd gate's stay plain; the strided layer's (32 channels: direct
  // pixel tiles) are stored as W^T's panels.
  GraphBuilder gb("winograd_weights");
  Var x = gb.input("x", DType::F32, {1, 32, 24, 24});
  Var x14 = gb.input("x14", DType::F32, {1, 64, 14, 14});
  Var w1 = gb.param("w1", convWeights({32, 32, 3, 3}, 51));
  Var w2 = gb.constant(convWeights({64, 64, 3, 3}, 52));
  Var shared = gb.param("shared", convWeights({32, 32, 3, 3}, 53));
  Var strided = gb.param("strided", convWeights({32, 32, 3, 3}, 54));
  Var small = gb.param("small", convWeights({8, 32, 3, 3}, 55));
  Var a = frontend::relu(frontend::conv2d(x, w1, gb.param("b1", weights({32}, 56)), {1}, {1}));
  auto graph = gb.finish({a, frontend::conv2d(x14, w2, Var(), {1}, {1}), frontend::conv2d(x, shared, Var(), {1}, {1}),
                          frontend::conv2d(a * 0.5, shared, Var(), {1}, {1}),
                          frontend::conv2d(x, strided, Var(), {2}, {1}), frontend::conv2d(x, small, Var(), {1}, {1})});
  EXPECT_EQ(countInSource(*graph, "g.weights_layout = KILN_CONV_WEIGHTS_WINOGRAD_F4;"), 1);
  EXPECT_EQ(countInSource(*graph, "g.weights_layout = KILN_CONV_WEIGHTS_WINOGRAD_F2;"), 1);
  EXPECT_EQ(countInSource(*graph, "g.weights_layout = KILN_CONV_WEIGHTS_DIRECT_PANELS;"), 1);
  EXPECT_EQ(countInSource(*graph, "static const kiln_weight_packing kiln_packings[3]"), 1);
  expectMatchesReference(*graph, randomInputs(*graph, 57));
  expectMatchesReference(*graph, randomInputs(*graph, 58), withThreads(2));
}

TEST(CodegenContraction, Bf16GemmConvolutionsStoreTheirWeightsAsPanelsAtLoad) {
  // In bf16, the weights of every convolution conv2d computes as a GEMM and only it reads are
  // rounded into row panels once at load: 1 x 1 kernels (whose size-1 dimensions the access
  // steps by 0), a grouped 1 x 1 one and a strided 3 x 3 one (im2col). A weight two
  // convolutions read stays plain, rounded per call. The results are bf16's, within its
  // rounding of the reference.
  GraphBuilder gb("bf16_panels");
  Var x = gb.input("x", DType::F32, {1, 32, 9, 9});
  Var shared = gb.param("shared", convWeights({16, 32, 1, 1}, 91));
  Var a = frontend::relu(frontend::conv2d(x, gb.param("w1", convWeights({40, 32, 1, 1}, 92)),
                                          gb.param("b1", weights({40}, 93))));
  Var grouped = frontend::conv2d(a, gb.param("wg", convWeights({26, 20, 1, 1}, 94)), Var(), {1}, {0}, {1}, 2);
  Var strided = frontend::conv2d(x, gb.param("ws", convWeights({40, 32, 3, 3}, 95)), Var(), {2}, {1});
  auto graph = gb.finish({grouped, strided, frontend::conv2d(x, shared), frontend::conv2d(x * 0.5, shared)});
  CompileOptions bf16 = testOptions();
  bf16.precision = ContractionPrecision::Bf16;
  EXPECT_EQ(countInSource(*graph, "g.weights_layout = KILN_CONV_WEIGHTS_BF16_PANELS;", bf16), 3);
  EXPECT_EQ(countInSource(*graph, "static const kiln_weight_packing kiln_packings[3]", bf16), 1);
  EXPECT_EQ(countInSource(*graph, "g.weights_layout = KILN_CONV_WEIGHTS_BF16_PANELS;"), 0) << "f32 keeps them plain";
  expectMatchesReference(*graph, randomInputs(*graph, 96), bf16, 2e-2, 2e-2);
  CompileOptions twoThreads = withThreads(2);
  twoThreads.precision = ContractionPrecision::Bf16;
  expectMatchesReference(*graph, randomInputs(*graph, 97), twoThreads, 2e-2, 2e-2);
}

TEST(CodegenContraction, Bf16TakesWinogradF2InBf16WhereF32TakesF4) {
  // A layer f32 computes with F(4x4, 3x3) (24 x 24, 32 channels) goes to F(2x2, 3x3) in bf16,
  // its transformed weights stored in bf16: twice F(4,3)'s GEMM rate for 4 products per output
  // against 2.25, and within bf16's rounding (F(4,3)'s transforms would amplify it to ~4%).
  GraphBuilder gb("bf16_winograd");
  Var x = gb.input("x", DType::F32, {1, 32, 24, 24});
  auto graph = gb.finish({frontend::relu(frontend::conv2d(x, gb.param("w", convWeights({32, 32, 3, 3}, 98)),
                                                          gb.param("b", weights({32}, 99)), {1}, {1}))});
  CompileOptions bf16 = testOptions();
  bf16.precision = ContractionPrecision::Bf16;
  EXPECT_EQ(countInSource(*graph, "g.weights_layout = KILN_CONV_WEIGHTS_WINOGRAD_F4;"), 1);
  EXPECT_EQ(countInSource(*graph, "g.weights_layout = KILN_CONV_WEIGHTS_WINOGRAD_F2_BF16;", bf16), 1);
  EXPECT_EQ(countInSource(*graph, "g.weights_layout = KILN_CONV_WEIGHTS_WINOGRAD_F4;", bf16), 0);
  expectMatchesReference(*graph, randomInputs(*graph, 100), bf16, 2e-2, 2e-2);
}

TEST(CodegenContraction, TransformedWeightsStayWithinTheirMemoryBudget) {
  // Three 1024 -> 1024 3x3 layers on 7 x 7 maps would each store F(2,3)'s transformed weights
  // (16/9 of their 37.7 MB): 88 MB more than the plain weights, over the budget of 0.3 x 113 MB
  // + 32 MB. One of them keeps its weights plain, and a smaller layer's stay transformed.
  GraphBuilder gb("winograd_budget");
  Var x = gb.input("x", DType::F32, {1, 1024, 7, 7});
  Var small = gb.input("small", DType::F32, {1, 32, 24, 24});
  std::vector<Var> outputs;
  for (uint64_t layer = 0; layer < 3; ++layer)
    outputs.push_back(frontend::conv2d(x, gb.param("w" + std::to_string(layer), convWeights({1024, 1024, 3, 3}, 80 + layer)),
                                       Var(), {1}, {1}));
  outputs.push_back(frontend::conv2d(small, gb.param("ws", convWeights({32, 32, 3, 3}, 83)), Var(), {1}, {1}));
  auto graph = gb.finish(outputs);
  // Two big layers transformed and the small one: three packed weights. The two transformed
  // layers' kernels are the same code, emitted once.
  EXPECT_EQ(countInSource(*graph, "static const kiln_weight_packing kiln_packings[3]"), 1);
  EXPECT_EQ(countInSource(*graph, "g.weights_layout = KILN_CONV_WEIGHTS_WINOGRAD_F2;"), 1);
  EXPECT_EQ(countInSource(*graph, "g.weights_layout = KILN_CONV_WEIGHTS_WINOGRAD_F4;"), 1);
  EXPECT_EQ(countInSource(*graph, "rt->conv2d(rt, &g);"), 3) << "and the third big layer's, plain";
}

TEST(CodegenContraction, DilatedConvsReachingMostlyPaddingGoTapByTap) {
  // ASPP-style branches on a 12 x 12 map: dilation 8 (a quarter of the (output, tap) pairs
  // inside) and 16 (the centre tap only) run tap by tap over the outputs each tap reaches,
  // their weights laid out tap-major at load; dilation 2 (most pairs inside) runs as direct
  // pixel tiles (16 channels), its W^T stored at load, and a weight two convolutions share
  // stays plain but still runs tap by tap.
  GraphBuilder gb("sparse_taps");
  Var x = gb.input("x", DType::F32, {2, 24, 12, 12});
  Var shared = gb.param("shared", convWeights({16, 24, 3, 3}, 81));
  auto branch = [&](int64_t dilation, uint32_t seed) {
    return frontend::relu(frontend::conv2d(x, gb.param("w" + std::to_string(dilation), convWeights({16, 24, 3, 3}, seed)),
                                           gb.param("b" + std::to_string(dilation), weights({16}, seed + 1)), {1},
                                           {dilation}, {dilation}));
  };
  auto graph = gb.finish({branch(8, 82), branch(16, 84), branch(2, 86),
                          frontend::conv2d(x, shared, Var(), {1}, {8}, {8}),
                          frontend::conv2d(x * 0.5, shared, Var(), {1}, {16}, {16})});
  EXPECT_EQ(countInSource(*graph, "g.weights_layout = KILN_CONV_WEIGHTS_TAP_MAJOR;"), 2);
  EXPECT_EQ(countInSource(*graph, "g.weights_layout = KILN_CONV_WEIGHTS_DIRECT_PANELS;"), 1);
  EXPECT_EQ(countInSource(*graph, "static const kiln_weight_packing kiln_packings[3]"), 1);
  expectMatchesReference(*graph, randomInputs(*graph, 88));
  expectMatchesReference(*graph, randomInputs(*graph, 89), withThreads(2));
}

TEST(CodegenContraction, DirectConvolutionsStoreTheirWeightPanelsAtLoad) {
  // Inception-v3's 1x7 then 7x1 layers at 17x17 run as direct pixel tiles, W^T's panels
  // stored at load; a weight two of them share stays plain and is packed per call, and a
  // 3x3/2 layer whose panel and input rows outgrow half of L2 stays a GEMM.
  GraphBuilder gb("direct_panels");
  Var x = gb.input("x", DType::F32, {1, 192, 17, 17});
  Var shared = gb.param("shared", convWeights({192, 192, 7, 1}, 101));
  Var a = frontend::relu(frontend::conv2d(x, gb.param("w1", convWeights({192, 192, 1, 7}, 102)),
                                          gb.param("b1", weights({192}, 103)), {1}, {0, 3}));
  Var b = frontend::relu(frontend::conv2d(a, gb.param("w2", convWeights({192, 192, 7, 1}, 104)), Var(), {1}, {3, 0}));
  Var c = frontend::conv2d(b, shared, Var(), {1}, {3, 0}) + frontend::conv2d(a, shared, Var(), {1}, {3, 0});
  Var large = frontend::conv2d(gb.input("y", DType::F32, {1, 128, 64, 64}),
                               gb.param("w3", convWeights({128, 128, 3, 3}, 105)), Var(), {2}, {1});
  auto graph = gb.finish({c, large});
  EXPECT_EQ(countInSource(*graph, "g.weights_layout = KILN_CONV_WEIGHTS_DIRECT_PANELS;"), 2);
  EXPECT_EQ(countInSource(*graph, "static const kiln_weight_packing kiln_packings[2]"), 1);
  expectMatchesReference(*graph, randomInputs(*graph, 106));
  expectMatchesReference(*graph, randomInputs(*graph, 107), withThreads(2));
}

TEST(CodegenContraction, DeepSmallLayersUseWinogradOnlyWithWeightsTransformedAtLoad) {
  // 256 -> 512 channels on 7 x 7 pixels: below the gate for weights transformed on every call,
  // above it for weights transformed once at load. The layer whose weights no other kernel
  // reads gets them so, for F(2,3); the two that share their weights compute with the GEMM.
  GraphBuilder gb("winograd_deep");
  Var x = gb.input("x", DType::F32, {1, 256, 7, 7});
  Var own = gb.param("own", convWeights({512, 256, 3, 3}, 71));
  Var shared = gb.param("shared", convWeights({512, 256, 3, 3}, 72));
  auto graph = gb.finish({frontend::relu(frontend::conv2d(x, own, gb.param("b", weights({512}, 73)), {1}, {1})),
                          frontend::conv2d(x, shared, Var(), {1}, {1}),
                          frontend::conv2d(frontend::relu(x), shared, Var(), {1}, {1})});
  EXPECT_EQ(countInSource(*graph, "g.weights_layout = KILN_CONV_WEIGHTS_WINOGRAD_F2;"), 1);
  EXPECT_EQ(countInSource(*graph, "g.weights_layout = KILN_CONV_WEIGHTS_WINOGRAD_F4;"), 0);
  expectMatchesReference(*graph, randomInputs(*graph, 74));
  expectMatchesReference(*graph, randomInputs(*graph, 75), withThreads(2));
}

TEST(CodegenContraction, ConvStridesDilationsGroupsAndOneD) {
  GraphBuilder gb("conv_variants");
  Var x = gb.input("x", DType::F32, {1, 6, 13, 10});
  Var strided = frontend::conv2d(x, gb.param("w1", weights({4, 6, 3, 2}, 40)), Var(), {2, 3}, {1, 0});
  Var dilated = frontend::conv2d(x, gb.param("w2", weights({6, 3, 3, 3}, 41)), Var(), {1}, {2}, {2}, 2);
  Var depthwise = frontend::conv2d(x, gb.param("w3", weights({6, 1, 3, 3}, 42)), Var(), {1}, {1}, {1}, 6);
  Var x1 = gb.input("x1", DType::F32, {2, 3, 17});
  Var oneD = frontend::conv1d(x1, gb.param("w4", weights({5, 3, 4}, 43)), gb.param("b4", weights({5}, 44)), 2, 1);
  auto graph = gb.finish({strided, dilated, depthwise, oneD});
  expectMatchesReference(*graph, randomInputs(*graph, 45));
}

TEST(CodegenContraction, Pooling) {
  GraphBuilder gb("pool");
  Var x = gb.input("x", DType::F32, {2, 3, 11, 9});
  auto graph = gb.finish({frontend::maxPool2d(x, {3}, {2}, {1}), frontend::avgPool2d(x, {2, 3}, {2, 2}),
                          frontend::avgPool2d(x, {3}, {1}, {1}, false, true),
                          frontend::maxPool2d(x, {2}, {2}, {0}, {1}, true)});
  expectMatchesReference(*graph, randomInputs(*graph, 46));
}

TEST(CodegenContraction, SeedMlpFromModules) {
  frontend::nn::manualSeed(47);
  GraphBuilder gb("mlp");
  Var x = gb.input("x", DType::F32, {64, 128});
  frontend::nn::Sequential mlp{std::make_shared<frontend::nn::Linear>(128, 96), std::make_shared<frontend::nn::ReLU>(),
                               std::make_shared<frontend::nn::Linear>(96, 64), std::make_shared<frontend::nn::ReLU>(),
                               std::make_shared<frontend::nn::Linear>(64, 10)};
  auto graph = gb.finish({frontend::softmax(mlp(x), -1)});
  expectMatchesReference(*graph, randomInputs(*graph, 48));
}

TEST(CodegenContraction, ResNetBasicBlock) {
  frontend::nn::manualSeed(49);
  GraphBuilder gb("resnet_block");
  Var x = gb.input("x", DType::F32, {2, 8, 10, 10});
  using namespace frontend::nn;
  Sequential branch{std::make_shared<Conv2d>(8, 8, frontend::Ints{3}, frontend::Ints{1}, frontend::Ints{1}, frontend::Ints{1}, 1, false),
                    std::make_shared<BatchNorm2d>(8), std::make_shared<ReLU>(),
                    std::make_shared<Conv2d>(8, 8, frontend::Ints{3}, frontend::Ints{1}, frontend::Ints{1}, frontend::Ints{1}, 1, false),
                    std::make_shared<BatchNorm2d>(8)};
  branch.eval();
  Var y = frontend::relu(branch(x) + x);
  Var pooled = frontend::maxPool2d(y, {2});
  auto graph = gb.finish({pooled});
  expectMatchesReference(*graph, randomInputs(*graph, 50));
}

} // namespace
} // namespace kiln::codegen::test
