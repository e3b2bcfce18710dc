// The column form of rows stages (codegen/EmitColumnReduction.cpp): reductions over outer
// axes whose innermost dim is kept (bias gradients, per-channel statistics), against the
// reference evaluator. Innermost extents of 16, 17, 33 and 512 cover narrow single partial
// blocks, a full block plus a one-lane partial one and several blocks; fused prologues and
// epilogues, a reduction reading another's result, a tail over the whole domain, NaN, 16-bit
// floats, integers, and one and two threads.
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "frontend/Frontend.h"
#include "ir/Evaluator.h"
#include "runtime/ThreadPool.h"
#include "tests/codegen/CodegenTestUtil.h"

namespace kiln::codegen::test {
namespace {

using frontend::GraphBuilder;
using frontend::Var;

constexpr double kRelative = 1e-5;
constexpr double kAbsolute = 1e-6;

// How many generated stage functions of `graph` use the column form (the emitter marks them).
int columnStages(const ir::Graph &graph, const CompileOptions &options = testOptions()) {
  return countInSource(graph, "// column reduction:", options);
}

TEST(CodegenColumnReduction, SumMeanMaxMinOverAxisZeroForSeveralInnerExtents) {
  // One graph (one compile): per inner extent, every reduction with and without keepdims.
  GraphBuilder gb("columns");
  std::vector<Var> outputs;
  for (int64_t columns : {16, 17, 33, 512}) {
    Var x = gb.input("x" + std::to_string(columns), DType::F32, {37, columns});
    for (bool keepdims : {false, true})
      for (Var y : {frontend::sum(x, {0}, keepdims), frontend::mean(x, {0}, keepdims), frontend::max(x, {0}, keepdims),
                    frontend::min(x, {-2}, keepdims), frontend::prod(x * 0.1 + 1.0, {0}, keepdims)})
        outputs.push_back(y);
  }
  auto graph = gb.finish(outputs);
  EXPECT_GE(columnStages(*graph), 4);
  expectMatchesReference(*graph, randomInputs(*graph, 100), testOptions(), kRelative, kAbsolute);
}

TEST(CodegenColumnReduction, LeadingAxesOfARank3TensorAndInterleavedKeptDims) {
  GraphBuilder gb("leading");
  Var x = gb.input("x", DType::F32, {3, 5, 40});
  Var y = gb.input("y", DType::F32, {3, 4, 2, 24}); // reduce (0, 2): kept (4, 24), partial blocks
  auto graph = gb.finish({frontend::sum(x, {0, 1}), frontend::max(x, {0, 1}, true), frontend::sum(y, {0, 2}),
                          frontend::mean(y, {0, 2}, true)});
  EXPECT_GE(columnStages(*graph), 2);
  expectMatchesReference(*graph, randomInputs(*graph, 110), testOptions(), kRelative, kAbsolute);
}

TEST(CodegenColumnReduction, SquaredPrologueAndNormalisingEpilogueInOneStage) {
  // Batch-norm statistics over the batch: sum and sum of squares in one pass, then
  // rsqrt(var + eps) per column; and a variance of centered values, whose second reduction
  // reads the first's result.
  GraphBuilder gb("stats");
  Var x = gb.input("x", DType::F32, {64, 50});
  Var mean = frontend::sum(x, {0}) / 64.0;
  Var var = frontend::sum(x * x, {0}) / 64.0 - mean * mean;
  Var invStd = frontend::rsqrt(var + 1e-5);
  Var centered = x - frontend::mean(x, {0}, true);
  Var centeredVar = frontend::mean(centered * centered, {0});
  auto graph = gb.finish({mean, invStd, centeredVar});
  EXPECT_GE(columnStages(*graph), 1);
  expectMatchesReference(*graph, randomInputs(*graph, 120), testOptions(), kRelative, kAbsolute);
}

TEST(CodegenColumnReduction, TailOverTheWholeDomainNormalisesEachColumn) {
  // (x - mean) * rsqrt(var + eps) stored over the whole input, with the per-column statistics.
  GraphBuilder gb("normalise");
  Var x = gb.input("x", DType::F32, {48, 35});
  Var mean = frontend::mean(x, {0}, true);
  Var centered = x - mean;
  Var var = frontend::mean(centered * centered, {0}, true);
  auto graph = gb.finish({centered * frontend::rsqrt(var + 1e-5), var});
  EXPECT_GE(columnStages(*graph), 1);
  expectMatchesReference(*graph, randomInputs(*graph, 130), testOptions(), kRelative, kAbsolute);
}

TEST(CodegenColumnReduction, MaxAndMinPropagateANegativeNaNBitForBit) {
  // Inner extents of 16 (one full block), 17 (a partial one) and 70 (a full and a partial
  // one); a negative NaN in column 2, a positive one in the last column.
  const std::vector<int64_t> extents = {16, 17, 70};
  GraphBuilder gb("nan_columns");
  std::vector<Var> outputs;
  std::vector<Tensor> inputs;
  for (int64_t columns : extents) {
    Var x = gb.input("x" + std::to_string(columns), DType::F32, {9, columns});
    outputs.push_back(frontend::max(x, {0}));
    outputs.push_back(frontend::min(x, {0}));
    inputs.push_back(randomTensor({DType::F32, {9, columns}}, 140 + static_cast<uint64_t>(columns)));
    float *data = inputs.back().dataAs<float>();
    data[4 * columns + 2] = -std::numeric_limits<float>::quiet_NaN();
    data[8 * columns + columns - 1] = std::numeric_limits<float>::quiet_NaN();
  }
  auto graph = gb.finish(outputs);
  EXPECT_GE(columnStages(*graph), 3);
  std::vector<Tensor> expected = ir::evaluate(*graph, inputs);
  std::vector<Tensor> actual = compile(*graph, testOptions()).run(inputs);
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    int64_t columns = extents[i / 2];
    ASSERT_TRUE(std::isnan(expected[i].dataAs<float>()[2]) && std::isnan(expected[i].dataAs<float>()[columns - 1]));
    EXPECT_EQ(std::memcmp(actual[i].data(), expected[i].data(), static_cast<size_t>(expected[i].byteSize())), 0)
        << "output " << i << " with " << columns << " columns";
  }
}

TEST(CodegenColumnReduction, SumsAddInTheReferenceOrder) {
  // Each lane folds its column top to bottom, as the evaluator does, so f32 sums (in double)
  // and f16 sums come out bit for bit.
  GraphBuilder gb("order");
  Var x = gb.input("x", DType::F32, {300, 40});
  Var h = gb.input("h", DType::F16, {200, 24});
  auto graph = gb.finish({frontend::sum(x * 1000.0, {0}), frontend::sum(h, {0})});
  EXPECT_GE(columnStages(*graph), 2);
  std::vector<Tensor> inputs = randomInputs(*graph, 150);
  std::vector<Tensor> expected = ir::evaluate(*graph, inputs);
  std::vector<Tensor> actual = compile(*graph, testOptions()).run(inputs);
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i)
    EXPECT_EQ(std::memcmp(actual[i].data(), expected[i].data(), static_cast<size_t>(expected[i].byteSize())), 0)
        << "output " << i;
}

TEST(CodegenColumnReduction, IntegerSumsAndExtremes) {
  GraphBuilder gb("ints");
  Var a = gb.input("a", DType::I64, {11, 20});
  Var b = gb.input("b", DType::I32, {6, 3, 18});
  auto graph = gb.finish({frontend::sum(a, {0}), frontend::max(a, {0}, true), frontend::min(b, {0, 1}),
                          frontend::sum(b, {0})});
  EXPECT_GE(columnStages(*graph), 1);
  expectMatchesReference(*graph, randomInputs(*graph, 160), testOptions(), 0.0, 0.0);
}

TEST(CodegenColumnReduction, BiasGradientShapeOnOneAndTwoThreads) {
  // [1024, 512] is large enough to be split over the pool.
  GraphBuilder gb("bias_grad");
  Var x = gb.input("x", DType::F32, {1024, 512});
  auto graph = gb.finish({frontend::sum(x, {0}), frontend::max(x, {0}, true)});
  uint64_t seed = 170;
  for (int threads : {1, 2}) {
    CompileOptions options = withThreads(threads);
    EXPECT_GE(columnStages(*graph, options), 1);
    SCOPED_TRACE(::testing::Message() << threads << " threads");
    expectMatchesReference(*graph, randomInputs(*graph, seed++), options, kRelative, kAbsolute);
  }
}

TEST(CodegenColumnReduction, NarrowInnerDimsAndInnermostReductionsKeepTheRowForm) {
  GraphBuilder gb("rows");
  Var x = gb.input("x", DType::F32, {40, 15});
  Var y = gb.input("y", DType::F32, {20, 64});
  auto graph = gb.finish({frontend::sum(x, {0}), frontend::sum(y, {1}), frontend::argmax(y, 0)});
  EXPECT_EQ(columnStages(*graph), 0);
  expectMatchesReference(*graph, randomInputs(*graph, 180), testOptions(), kRelative, kAbsolute);
}

TEST(CodegenColumnReduction, TransposedOperandReadsAlongTheReducedAxis) {
  // sum over axis 0 of a transposed [64, 96] reads along the reduced axis: the row form.
  GraphBuilder gb("transposed");
  Var x = gb.input("x", DType::F32, {64, 96});
  auto graph = gb.finish({frontend::sum(frontend::transpose(x, 0, 1), {0}), frontend::max(x, {0})});
  EXPECT_EQ(columnStages(*graph), 1); // the transposed read keeps the row form
  expectMatchesReference(*graph, randomInputs(*graph, 190), testOptions(), kRelative, kAbsolute);
}

} // namespace
} // namespace kiln::codegen::test
