// Batch tiles end to end (codegen::chooseBatchTile, ir::retileBatch, runtime::Executable): a
// graph compiled for a tile of rows runs whole batches as tiles, one after another or side by
// side on the threads, and matches the reference evaluator; a symbolic batch compiles once and
// runs at every size; what a caller gets wrong about the batch is an error naming it.
#include <gtest/gtest.h>

#include <thread>

#include "codegen/CompileModel.h"
#include "core/SymbolicDim.h"
#include "frontend/Frontend.h"
#include "ir/BatchTiling.h"
#include "ir/Evaluator.h"
#include "runtime/ThreadPool.h"
#include "tests/ErrorMatchers.h"
#include "tests/TempDir.h"
#include "tests/codegen/CodegenTestUtil.h"
#include "tests/ir/RandomChain.h"

namespace kiln::codegen::test {
namespace {

using frontend::GraphBuilder;
using frontend::Var;
using kiln::test::expectErrorContaining;

/// conv -> bias -> relu -> pool -> mean -> linear -> softmax on x [batch, 3, 8, 8] (batch may
/// be symbolic), with a second input `shift` [batch, 5] added to the logits.
std::unique_ptr<ir::Graph> convClassifier(int64_t batch) {
  GraphBuilder gb("classifier");
  Var x = gb.input("x", DType::F32, {batch, 3, 8, 8});
  Var shift = gb.input("shift", DType::F32, {batch, 5});
  Var w = gb.param("w", randomTensor({DType::F32, {6, 3, 3, 3}}, 1));
  Var bias = gb.param("b", randomTensor({DType::F32, {6}}, 2));
  Var fc = gb.param("fc", randomTensor({DType::F32, {5, 6}}, 3));
  Var y = frontend::relu(frontend::conv2d(x, w, bias, {1}, {1}));
  y = frontend::maxPool2d(y, {2, 2}, {2, 2});
  Var logits = frontend::linear(frontend::mean(y, {2, 3}), fc) + shift;
  return gb.finish({frontend::softmax(logits, -1)});
}

CompileOptions tiled(int threads, int64_t tile) {
  CompileOptions options = withThreads(threads);
  options.batchTile = tile;
  return options;
}

TEST(BatchTiles, TilesMatchTheReferenceOneAfterAnotherAndSideBySide) {
  auto graph = convClassifier(6);
  for (int threads : {1, 2, 3})
    for (int64_t tile : {1, 2, 3}) {
      SCOPED_TRACE(fmt::format("{} threads, tiles of {}", threads, tile));
      runtime::Executable executable = compile(*graph, tiled(threads, tile));
      EXPECT_EQ(executable.batchTile(), tile);
      EXPECT_EQ(executable.inputs()[0].type.toString(), "f32[6,3,8,8]");
      EXPECT_EQ(executable.outputs()[0].type.toString(), "f32[6,5]");
      expectMatchesReference(*graph, randomInputs(*graph, 10 + tile), tiled(threads, tile));
    }
}

TEST(BatchTiles, ASymbolicBatchCompilesOnceForEverySize) {
  auto graph = convClassifier(GraphBuilder::dim("N"));
  std::string why;
  EXPECT_EQ(chooseBatchTile(*graph, withThreads(2), &why), 1);
  EXPECT_EQ(why, "tiles of 1 row: the batch N is symbolic");
  runtime::Executable executable = compile(*graph, withThreads(2));
  EXPECT_EQ(executable.inputs()[0].type.toString(), "f32[N,3,8,8]");
  EXPECT_EQ(executable.inputs()[1].type.toString(), "f32[N,5]");
  EXPECT_EQ(executable.outputs()[0].type.toString(), "f32[N,5]");
  for (int64_t rows : {1, 2, 3, 5, 8, 13}) {
    std::vector<Tensor> inputs = {randomTensor({DType::F32, {rows, 3, 8, 8}}, 20 + rows),
                                  randomTensor({DType::F32, {rows, 5}}, 40 + rows)};
    std::vector<Tensor> want = ir::evaluate(*graph, inputs);
    std::vector<Tensor> got = executable.run(inputs);
    ASSERT_EQ(got[0].type().toString(), fmt::format("f32[{},5]", rows));
    Comparison comparison = compareTensors(got[0], want[0], 1e-4, 1e-5);
    EXPECT_TRUE(comparison.ok) << rows << " rows: " << comparison.message;
  }
}

TEST(BatchTiles, AheadOfTimeModelServesEverySize) {
  auto graph = convClassifier(GraphBuilder::dim("N"));
  kiln::test::TempDir dir("kiln-batch-tiles-aot");
  AotModel aot = compileAheadOfTime(*graph, dir.file("classifier.so"), withThreads(2));
  runtime::Executable executable = runtime::Executable::load(aot.soPath);
  EXPECT_EQ(executable.inputs()[0].type.toString(), "f32[N,3,8,8]");
  for (int64_t rows : {3, 4}) {
    std::vector<Tensor> inputs = {randomTensor({DType::F32, {rows, 3, 8, 8}}, rows),
                                  randomTensor({DType::F32, {rows, 5}}, 9 + rows)};
    Comparison comparison = compareTensors(executable.run(inputs)[0], ir::evaluate(*graph, inputs)[0], 1e-4, 1e-5);
    EXPECT_TRUE(comparison.ok) << comparison.message;
  }
}

TEST(BatchTiles, RandomChainsCompileOnceAndRunEveryBatch) {
  // Random chains over a batch N (tests/ir/RandomChain.h, M fixed): those that serve every
  // batch compile once, together, and run at 1, 3, 4 and 7 rows as the reference evaluator does.
  std::vector<std::unique_ptr<ir::Graph>> graphs;
  for (uint64_t seed = 0; seed < 80; ++seed) {
    auto graph = kiln::test::RandomChain(seed).build({{"N", GraphBuilder::dim("N")}, {"M", 5}});
    if (ir::servesEveryBatch(*graph))
      graphs.push_back(std::move(graph));
  }
  ASSERT_GE(graphs.size(), 10u);
  std::vector<const ir::Graph *> batch;
  for (const auto &graph : graphs)
    batch.push_back(graph.get());
  std::vector<runtime::Executable> executables = compileBatch(batch, withThreads(2));
  for (size_t g = 0; g < graphs.size(); ++g) {
    EXPECT_EQ(executables[g].batchTile(), 1);
    for (int64_t rows : {1, 3, 4, 7}) {
      std::vector<Tensor> inputs;
      for (const ir::Value *input : graphs[g]->inputs())
        inputs.push_back(randomTensor({DType::F32, evaluateShape(input->shape(), {{"N", rows}}, "input")}, rows + g));
      Comparison comparison = compareTensors(executables[g].run(inputs)[0], ir::evaluate(*graphs[g], inputs)[0], 1e-4, 1e-5);
      EXPECT_TRUE(comparison.ok) << "chain " << g << " at " << rows << " rows: " << comparison.message;
    }
  }
}

TEST(BatchTiles, WrongBatchesAreErrorsNamingTheInput) {
  auto symbolic = convClassifier(GraphBuilder::dim("N"));
  runtime::Executable any = compile(*symbolic, tiled(2, 2));
  auto inputs = [](int64_t xRows, int64_t shiftRows, int64_t channels = 3) {
    return std::vector<Tensor>{randomTensor({DType::F32, {xRows, channels, 8, 8}}, 1),
                               randomTensor({DType::F32, {shiftRows, 5}}, 2)};
  };
  expectErrorContaining([&] { any.run(inputs(4, 6)); },
                        "the batch N has two extents: 4 from input 'x' but 6 from input 'shift'");
  expectErrorContaining([&] { any.run(inputs(3, 3)); },
                        "input 'x': 3 rows, but the model runs tiles of 2: give a multiple of 2");
  expectErrorContaining([&] { any.run(inputs(4, 4, 2)); }, "input 'x': expected f32[N,3,8,8], got f32[4,2,8,8]");
  auto fixed = convClassifier(6);
  runtime::Executable six = compile(*fixed, tiled(2, 3));
  expectErrorContaining([&] { six.run(inputs(3, 3)); }, "input 'x': expected f32[6,3,8,8], got f32[3,3,8,8]");
  std::vector<Tensor> outputs = {Tensor(DType::F32, {3, 5})};
  expectErrorContaining([&] { six.runInto(inputs(6, 6), outputs); }, "output '");
}

TEST(BatchTiles, WhatCannotTileIsSaidOrRefused) {
  GraphBuilder gb("mixes");
  Var x = gb.input("x", DType::F32, {4, 3});
  auto graph = gb.finish({frontend::softmax(x, 0)});
  std::string why;
  EXPECT_EQ(chooseBatchTile(*graph, withThreads(2), &why), 0);
  EXPECT_EQ(why, "not batch-separable: softmax computes along the batch axis");
  expectErrorContaining([&] { chooseBatchTile(*graph, tiled(2, 2)); },
                        "cannot run graph @mixes in batch tiles of 2: softmax computes along the batch axis");
  expectErrorContaining([&] { chooseBatchTile(*convClassifier(6), tiled(2, 4)); },
                        "its batch of 6 is not a multiple");
  CompileOptions off = withThreads(2);
  off.batchTile = CompileOptions::kBatchTileOff;
  EXPECT_EQ(chooseBatchTile(*convClassifier(GraphBuilder::dim("N")), off), 0);
}

TEST(BatchTiles, OnlyValuesCarryingTheBatchAreActivations) {
  // A weight computed from a param (as a QDQ model's dequantized weights are), 8 MiB, is no
  // activation: the largest that carries the batch is the 0.5 MiB product, which a core's
  // cache holds, so the batch of 4 runs whole.
  GraphBuilder gb("computedWeight");
  Var x = gb.input("x", DType::F32, {4, 64});
  Var w = gb.param("w", randomTensor({DType::F32, {64, 32768}}, 5));
  auto graph = gb.finish({frontend::matmul(x, w * 2.0)});
  std::string why;
  EXPECT_EQ(chooseBatchTile(*graph, withThreads(1), &why), 0);
  EXPECT_NE(why.find("largest activation 0.5 MiB"), std::string::npos) << why;
  EXPECT_NE(why.find("whole batch of 4"), std::string::npos) << why;
}

TEST(BatchTiles, ConcurrentCallersAndLaunchWatchersGetEveryRow) {
  auto graph = convClassifier(8);
  runtime::Executable executable = compile(*graph, tiled(2, 1));
  std::vector<Tensor> a = randomInputs(*graph, 70), b = randomInputs(*graph, 80);
  std::vector<Tensor> wantA = ir::evaluate(*graph, a), wantB = ir::evaluate(*graph, b);
  std::vector<Tensor> gotA, gotB;
  std::thread other([&] { gotB = executable.run(b); });
  gotA = executable.run(a);
  other.join();
  EXPECT_TRUE(compareTensors(gotA[0], wantA[0], 1e-4, 1e-5).ok);
  EXPECT_TRUE(compareTensors(gotB[0], wantB[0], 1e-4, 1e-5).ok);
  // With a launch watcher the tiles run in order, and the calls come during the last one.
  std::vector<Tensor> outputs = {Tensor(executable.outputs()[0].type)};
  int64_t calls = 0;
  executable.runInto(a, outputs, [&](int64_t) { ++calls; });
  EXPECT_EQ(calls, executable.numLaunches());
  EXPECT_TRUE(compareTensors(outputs[0], wantA[0], 1e-4, 1e-5).ok);
}

} // namespace
} // namespace kiln::codegen::test
