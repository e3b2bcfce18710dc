// Row kernels against the reference evaluator: softmax and layernorm as one kernel each,
// reductions over leading, middle and all axes, keepdims or not, argmax/argmin, integer
// reductions and empty reductions.
#include <cmath>
#include <cstring>
#include <limits>
#include <regex>

#include <gtest/gtest.h>

#include "frontend/Frontend.h"
#include "ir/Evaluator.h"
#include "tests/codegen/CodegenTestUtil.h"

namespace kiln::codegen::test {
namespace {

using frontend::GraphBuilder;
using frontend::Var;

TEST(CodegenReduction, SoftmaxIsOneRowKernel) {
  GraphBuilder gb("softmax");
  Var x = gb.input("x", DType::F32, {6, 50});
  auto graph = gb.finish({frontend::softmax(x * 3.0, -1)});
  expectMatchesReference(*graph, randomInputs(*graph, 21));
  EXPECT_EQ(launchStrategies(*graph), std::vector<std::string>{"rows"});
}

TEST(CodegenReduction, LayerNormIsOneRowKernel) {
  GraphBuilder gb("layernorm");
  Var x = gb.input("x", DType::F32, {4, 3, 64});
  Var w = gb.param("w", randomTensor({DType::F32, {64}}, 22));
  Var b = gb.param("b", randomTensor({DType::F32, {64}}, 23));
  auto graph = gb.finish({frontend::layerNorm(x, -1, w, b)});
  expectMatchesReference(*graph, randomInputs(*graph, 24));
  EXPECT_EQ(launchStrategies(*graph), std::vector<std::string>{"rows"});
}

TEST(CodegenReduction, SoftmaxOverAMiddleAxisAndLogSoftmax) {
  GraphBuilder gb("softmax_mid");
  Var x = gb.input("x", DType::F32, {3, 7, 5});
  auto graph = gb.finish({frontend::softmax(x, 1), frontend::logSoftmax(x, 0)});
  expectMatchesReference(*graph, randomInputs(*graph, 25));
}

TEST(CodegenReduction, SumsMeansAndExtremesOverVariousAxes) {
  GraphBuilder gb("reduce");
  Var x = gb.input("x", DType::F32, {4, 5, 6});
  auto graph = gb.finish({frontend::sum(x, {1}, true), frontend::mean(x, {0, 2}), frontend::max(x, {}),
                          frontend::min(x, {-1}, true), frontend::prod(x * 0.5 + 1.0, {0}),
                          frontend::sum(frontend::exp(x), {2}) + 1.0});
  expectMatchesReference(*graph, randomInputs(*graph, 26));
}

TEST(CodegenReduction, ArgMaxAndArgMinWithTies) {
  GraphBuilder gb("args");
  Var x = gb.input("x", DType::F32, {4, 6});
  Var i = gb.input("i", DType::I32, {3, 5});
  auto graph = gb.finish({frontend::argmax(x, 1), frontend::argmin(x, 0, true), frontend::argmax(i, 0),
                          frontend::argmin(i, 1, true)});
  // Integer inputs in [0, 10) have ties: the first index must win.
  expectMatchesReference(*graph, randomInputs(*graph, 27));
}

TEST(CodegenReduction, IntegerReductionsAndEmptyAxes) {
  GraphBuilder gb("ints");
  Var a = gb.input("a", DType::I64, {5, 7});
  Var e = gb.input("e", DType::F32, {3, 0});
  auto graph = gb.finish({frontend::sum(a, {1}), frontend::max(a, {0}, true), frontend::prod(a, {1}),
                          frontend::sum(e, {1}), frontend::prod(e, {1}, true)});
  expectMatchesReference(*graph, randomInputs(*graph, 28));
}

TEST(CodegenReduction, LongRowsUseAccumulatorLanes) {
  // Innermost reduced dims of 70 and 45 (lanes plus a remainder), with an outer reduced dim.
  GraphBuilder gb("lanes");
  Var x = gb.input("x", DType::F32, {3, 5, 70});
  Var i = gb.input("i", DType::I64, {4, 45});
  auto graph = gb.finish({frontend::sum(x, {0, 2}), frontend::max(x, {1, 2}, true), frontend::min(x, {2}),
                          frontend::prod(x * 0.1 + 1.0, {2}), frontend::sum(i, {1}), frontend::max(i, {1})});
  expectMatchesReference(*graph, randomInputs(*graph, 30));
  // Each lane pass keeps its 16 lanes a loop the vectoriser sees (unrolled first, a row max
  // became 16 scalar chains, 3.7x slower): the line before every lane loop is the pragma.
  const std::string source = lowerGraph(*graph, testOptions()).model.source;
  std::regex laneLoop(R"(for \(int64_t (\w+) = 0; \1 < 16; \+\+\1\))");
  int laneLoops = 0;
  for (std::sregex_iterator it(source.begin(), source.end(), laneLoop), end; it != end; ++it, ++laneLoops) {
    const size_t lineStart = source.rfind('\n', static_cast<size_t>(it->position()));
    const size_t previousLine = source.rfind('\n', lineStart - 1);
    EXPECT_NE(source.substr(previousLine, lineStart - previousLine).find("#pragma GCC unroll 1"), std::string::npos)
        << it->str();
  }
  EXPECT_GE(laneLoops, 4);
}

TEST(CodegenReduction, ShortReducedRowsMergeIntoLanes) {
  // Batch-norm statistics and gradient over (N, H, W) of 7 x 7, 5 x 5 and 28 x 12 planes: the
  // planes run as one merged loop in lanes (49 = 3 x 16 + 1, 25 = 16 + 9, 336 = 21 x 16); an
  // operand varying along H only keeps H and W apart; the tail stores over the whole domain.
  for (auto [h, w] : {std::pair<int64_t, int64_t>{7, 7}, {5, 5}, {28, 12}}) {
    SCOPED_TRACE(testing::Message() << h << "x" << w);
    GraphBuilder gb("bn");
    Var x = gb.input("x", DType::F32, {3, 4, h, w});
    Var dy = gb.input("dy", DType::F32, {3, 4, h, w});
    Var rowScale = gb.input("row_scale", DType::F32, {h, 1});
    double count = 3.0 * static_cast<double>(h * w);
    Var centered = x - frontend::mean(x, {0, 2, 3}, true);
    Var variance = frontend::mean(centered * centered, {0, 2, 3}, true);
    Var s1 = frontend::sum(dy, {0, 2, 3}, true), s2 = frontend::sum(dy * centered, {0, 2, 3}, true);
    auto graph = gb.finish({variance, dy - s1 * (1.0 / count) - centered * s2 * (1.0 / count),
                            frontend::sum(x * rowScale, {0, 2, 3})});
    expectMatchesReference(*graph, randomInputs(*graph, 31));
  }
}

TEST(CodegenReduction, SumsOfASelectOverShortInterleavedRows) {
  // GCC 12.2 miscompiled these nests at -O3 (a short innermost reduced dim that cannot merge,
  // because a broadcast operand of the kernel's tail is not laid out along it; the summed
  // select's other arm became a masked load in an interleaved group): the compiler driver
  // passes it -fno-tree-sink. Every row length from 2 to 7 had a wrong sum before.
  for (int64_t row = 2; row <= 7; ++row) {
    GraphBuilder gb("select_rows");
    Var x = gb.input("x", DType::F32, {4, 12, row});
    Var y = gb.input("y", DType::F32, {4, 12, row});
    Var p = gb.input("p", DType::F32, {12, 1});
    Var selected = frontend::where(frontend::gt(x, 0.0), x, y);
    auto graph = gb.finish({selected / p, frontend::sum(selected * selected, {}), frontend::sum(selected, {})});
    SCOPED_TRACE(row);
    expectMatchesReference(*graph, randomInputs(*graph, 40 + static_cast<uint64_t>(row)));
  }
}

TEST(CodegenReduction, IndependentReductionsOfOneRowShareOnePass) {
  // A batch norm's gradient: sum(dy) and sum(dy * x-hat) per channel read the rows once, in one
  // lane loop; the variance's second sum reads the mean, so it keeps a pass of its own.
  GraphBuilder gb("bn_grad");
  Var dy = gb.input("dy", DType::F32, {2, 6, 48});
  Var xh = gb.input("xh", DType::F32, {2, 6, 48});
  Var relu = dy * frontend::cast(xh > 0.0, DType::F32);
  Var s1 = frontend::sum(relu, {0, 2}, true), s2 = frontend::sum(relu * xh, {0, 2}, true);
  auto graph = gb.finish({relu - s1 * (1.0 / 96) - xh * s2 * (1.0 / 96)});
  expectMatchesReference(*graph, randomInputs(*graph, 27));
  EXPECT_EQ(launchStrategies(*graph), std::vector<std::string>{"rows"});
  EXPECT_EQ(countInSource(*graph, "for (int64_t jb"), 1);

  GraphBuilder vb("variance_passes");
  Var x = vb.input("x", DType::F32, {3, 64});
  Var centered = x - frontend::mean(x, {1}, true);
  auto variance = vb.finish({frontend::mean(centered * centered, {1}) + frontend::sum(x, {1})});
  expectMatchesReference(*variance, randomInputs(*variance, 28));
  // mean(x) and sum(x) share the first pass; the centered square needs the mean: a second.
  EXPECT_EQ(countInSource(*variance, "for (int64_t jb"), 2);
}

TEST(CodegenReduction, VarianceOfCenteredRowsStaysAccurate) {
  // Large offsets make float accumulation lose the variance; the kernel sums in double.
  GraphBuilder gb("variance");
  Var x = gb.input("x", DType::F32, {2, 4096});
  Var centered = x - frontend::mean(x, {1}, true);
  auto graph = gb.finish({frontend::mean(centered * centered, {1})});
  Tensor input = randomTensor(x.type(), 29);
  for (int64_t k = 0; k < input.numElements(); ++k)
    input.setDouble(k, input.getDouble(k) + 1000.0);
  expectMatchesReference(*graph, {input}, testOptions(), 1e-3, 1e-5);
}

// A row holding a negative NaN: max and min are NaN, and the sign bit must be the
// reference's (a positive quiet NaN), not that of whichever NaN the loop kept. Rows of 40
// take the vectorised eight-lane path, rows of 5 the scalar one.
TEST(CodegenReduction, MaxAndMinOfARowWithANegativeNaNMatchTheReferenceBitForBit) {
  for (int64_t rowLength : {5, 40}) {
    GraphBuilder gb("nan_rows");
    Var x = gb.input("x", DType::F32, {3, rowLength});
    auto graph = gb.finish({frontend::max(x, {1}), frontend::min(x, {1})});
    Tensor input = randomTensor({DType::F32, {3, rowLength}}, 31);
    float *data = input.dataAs<float>();
    data[rowLength + 2] = -std::numeric_limits<float>::quiet_NaN();
    ASSERT_TRUE(std::signbit(data[rowLength + 2]));
    std::vector<Tensor> expected = ir::evaluate(*graph, {input});
    std::vector<Tensor> actual = compile(*graph, testOptions()).run({input});
    ASSERT_EQ(actual.size(), expected.size());
    for (size_t i = 0; i < expected.size(); ++i)
      EXPECT_EQ(std::memcmp(actual[i].data(), expected[i].data(), static_cast<size_t>(expected[i].byteSize())), 0)
          << "output " << i << " with rows of " << rowLength;
  }
}

} // namespace
} // namespace kiln::codegen::test
