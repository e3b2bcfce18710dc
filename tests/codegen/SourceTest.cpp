// What the generated source holds, checked on the text (no compiler involved): the embedded
// ABI, one extern "C" function per kernel, library calls with epilogues and trans flags for
// folded transposes, literals for small constants, weights for large ones, refs from the
// memory plan, and views that cost no launch.
#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>

#include "codegen/EmitModel.h"
#include "frontend/Frontend.h"
#include "ir/KernelOutline.h"
#include "tests/codegen/CodegenTestUtil.h"

namespace kiln::codegen::test {
namespace {

using frontend::GraphBuilder;
using frontend::Var;

bool contains(const std::string &text, const std::string &part) { return text.find(part) != std::string::npos; }

TEST(CodegenSource, LinearReluCallsGemmWithAnEpilogueAndATransposedWeight) {
  GraphBuilder gb("linear");
  Var x = gb.input("x", DType::F32, {8, 16});
  Var w = gb.param("fc.weight", randomTensor({DType::F32, {4, 16}}, 1));
  Var b = gb.param("fc.bias", randomTensor({DType::F32, {4}}, 2));
  auto graph = gb.finish({frontend::relu(frontend::linear(x, w, b)) * 2.0});
  LoweredModel lowered = lowerGraph(*graph, testOptions());
  const std::string &source = lowered.model.source;
  EXPECT_TRUE(contains(source, "#define KILN_ABI_VERSION")) << "the ABI header is embedded";
  EXPECT_FALSE(contains(source, "#include \"runtime/KernelAbi.h\""));
  ASSERT_EQ(lowered.model.launches.size(), 1u);
  EXPECT_EQ(lowered.model.launches[0].name, "k0_matmul_add_relu_mul");
  EXPECT_TRUE(contains(source, "extern \"C\" void kiln_k0_matmul_add_relu_mul(const kiln_rt *rt, void *const *buffers)"));
  EXPECT_TRUE(contains(source, "rt->gemm(rt, &g);"));
  EXPECT_TRUE(contains(source, "g.epilogue = k0_s0_epilogue;"));
  EXPECT_TRUE(contains(source, "g.trans_b = 1")) << "the weight's transpose is read in place";
  EXPECT_TRUE(contains(source, "2.0f")) << "the scalar constant is a literal";
  ASSERT_EQ(lowered.model.weights.size(), 2u);
  EXPECT_EQ(lowered.model.weights[0].name, "fc.weight");
  EXPECT_EQ(lowered.model.weights[1].name, "fc.bias");
  EXPECT_TRUE(contains(source, "{\"fc.weight\", \"f32\", 2, kiln_weights_shape0}"));
  EXPECT_TRUE(contains(source, "extern \"C\" const kiln_model_desc *kiln_model(void)"));
}

TEST(CodegenSource, IntermediatesLiveInTheArenaAndLargeConstantsAreWeights) {
  GraphBuilder gb("arena");
  Var x = gb.input("x", DType::F32, {4, 100});
  Var table = gb.constant(randomTensor({DType::F32, {100}}, 3));
  Var h = frontend::softmax(x + table, -1);
  Var y = frontend::matmul(h, frontend::transpose(x, 0, 1));
  auto graph = gb.finish({y});
  LoweredModel lowered = lowerGraph(*graph, testOptions());
  ASSERT_EQ(lowered.model.weights.size(), 1u);
  EXPECT_EQ(lowered.model.weights[0].name, "constant.0");
  EXPECT_GT(lowered.model.arenaBytes, 0);
  // A ref {kind 0 = arena, 0, offset} for the softmax result the matmul reads.
  EXPECT_TRUE(contains(lowered.model.source, "{0, 0, ")) << lowered.model.source;
  EXPECT_TRUE(contains(lowered.model.source, "{3, 0, 0}")) << "the table is weight 0";
}

// The lines of `source` above the first loop `for (int64_t i0 = 0; i0 < extent; ++i0)`:
// {two above, one above}, or empty strings when there is no such loop.
std::pair<std::string, std::string> linesAboveLoop(const std::string &source, int64_t extent) {
  std::vector<std::string> lines;
  std::istringstream stream(source);
  for (std::string line; std::getline(stream, line);)
    lines.push_back(line);
  std::string header = "for (int64_t i0 = 0; i0 < " + std::to_string(extent) + "; ++i0) {";
  for (size_t i = 2; i < lines.size(); ++i)
    if (contains(lines[i], header))
      return {lines[i - 2], lines[i - 1]};
  return {};
}

// The BatchNorm+ReLU stage of a training step: two loads, per-channel scalars, three stores.
// GCC 12 left its inner loop scalar (a branch per element) until the loop was marked
// independent and kept a loop; rows shorter than a vector are merged with the rows before.
TEST(CodegenSource, ElementwiseInnerLoopsAreMarkedIndependentAndNotShort) {
  for (int64_t width : {14, 5}) {
    GraphBuilder gb("bn_relu");
    Var x = gb.input("x", DType::F32, {2, 16, width, width});
    Var r = gb.input("r", DType::F32, {2, 16, width, width});
    Var mean = gb.input("mean", DType::F32, {16, 1, 1});
    Var scale = gb.input("scale", DType::F32, {16, 1, 1});
    Var y = (x - mean) * scale + r;
    auto graph = gb.finish({frontend::relu(y), frontend::cast(frontend::gt(y, 0.0), DType::F32), y * 2.0});
    const std::string source = lowerGraph(*graph, testOptions()).model.source;
    auto [before, previous] = linesAboveLoop(source, width * width);
    EXPECT_TRUE(contains(before, "#pragma GCC ivdep")) << source;
    EXPECT_TRUE(contains(previous, "#pragma GCC unroll 1")) << source;
    EXPECT_TRUE(linesAboveLoop(source, width).second.empty()) << "no loop over one short row";
  }
  // An operand that varies along the rows but not the columns would be read at i0 / 7 in a
  // merged loop: the rows stay separate, and a 7-step loop may be unrolled.
  GraphBuilder gb("per_row");
  Var x = gb.input("x", DType::F32, {2, 16, 7, 7});
  Var rowBias = gb.input("row_bias", DType::F32, {7, 1});
  auto graph = gb.finish({frontend::relu(x + rowBias), x * 3.0});
  const std::string source = lowerGraph(*graph, testOptions()).model.source;
  auto [before, previous] = linesAboveLoop(source, 7);
  EXPECT_TRUE(contains(previous, "#pragma GCC ivdep")) << source;
  EXPECT_FALSE(contains(before, "#pragma")) << source;
}

// A batch norm's statistics over (N, H, W) of 28 x 28 planes: the row of 28 is too short for
// the 16 lanes of a vectorised sum, so H and W run as one loop of 784 (49 blocks of 16), read
// at a plain stride. An operand that varies along H only would be read at (i / 28) in such a
// loop: that stage keeps H and W apart.
TEST(CodegenSource, ReductionsMergeShortReducedRowsIntoLanes) {
  GraphBuilder gb("bn_stats");
  Var x = gb.input("x", DType::F32, {4, 8, 28, 28});
  Var centered = x - frontend::mean(x, {0, 2, 3}, true);
  auto graph = gb.finish({frontend::mean(centered * centered, {0, 2, 3})});
  const std::string source = lowerGraph(*graph, testOptions()).model.source;
  EXPECT_TRUE(contains(source, " < 49; ++jb")) << source;
  EXPECT_FALSE(contains(source, "% 28)")) << source;
  EXPECT_FALSE(contains(source, "/ 28)")) << source;

  GraphBuilder perRow("per_row");
  Var y = perRow.input("y", DType::F32, {4, 8, 28, 28});
  Var rowScale = perRow.input("row_scale", DType::F32, {28, 1});
  auto rowGraph = perRow.finish({frontend::sum(y * rowScale, {0, 2, 3})});
  const std::string rowSource = lowerGraph(*rowGraph, testOptions()).model.source;
  EXPECT_FALSE(contains(rowSource, " < 49; ++jb")) << rowSource;
  EXPECT_FALSE(contains(rowSource, "/ 28)")) << rowSource;
}

TEST(CodegenSource, AliasedReshapeCostsNoLaunch) {
  GraphBuilder gb("view");
  Var x = gb.input("x", DType::F32, {6, 4});
  Var a = frontend::exp(x);
  Var r = frontend::reshape(a, {4, 6});
  Var y = frontend::softmax(r, -1);
  auto graph = gb.finish({y});
  CompileOptions options = testOptions();
  options.fuse = false;
  LoweredModel lowered = lowerGraph(*graph, options);
  for (const LaunchInfo &launch : lowered.model.launches)
    EXPECT_EQ(launch.name.find("reshape"), std::string::npos) << launch.name;
  expectMatchesReference(*graph, randomInputs(*graph, 4), options);
}

TEST(CodegenSource, LaunchNamesDescribeTheKernels) {
  GraphBuilder gb("names");
  Var x = gb.input("x", DType::F32, {8, 40});
  auto graph = gb.finish({frontend::layerNorm(x), frontend::maxPool2d(frontend::reshape(x, {1, 2, 4, 40}), {2})});
  LoweredModel lowered = lowerGraph(*graph, testOptions());
  std::vector<std::string> strategies;
  for (const LaunchInfo &launch : lowered.model.launches)
    strategies.push_back(launch.strategy);
  EXPECT_NE(std::find(strategies.begin(), strategies.end(), "rows"), strategies.end());
  EXPECT_NE(std::find(strategies.begin(), strategies.end(), "pool"), strategies.end());
}

// A training step binds an output to a parameter's own storage: the kernel that reads the
// parameter and writes that output must not promise the compiler disjoint buffers.
TEST(CodegenSource, AnOutputOverAParameterGetsNoRestrictPointers) {
  GraphBuilder gb("update");
  Var x = gb.input("x", DType::F32, {64});
  Var w = gb.param("w", randomTensor({DType::F32, {64}}, 3));
  auto graph = gb.finish({w - x * 0.5});
  LoweredModel lowered = lowerGraph(*graph, testOptions());
  ASSERT_EQ(lowered.model.launches.size(), 1u);
  EXPECT_TRUE(contains(lowered.model.source, "__restrict")) << "disjoint buffers are restrict by default";
  ModelSource aliased = emitModel(*lowered.graph, lowered.plan, "", {{0, "w"}});
  EXPECT_FALSE(contains(aliased.source, "__restrict")) << aliased.source;
}

} // namespace
} // namespace kiln::codegen::test
