// Loop stages that read a concat walk its axis in one segment per operand
// (codegen/EmitElementwise.cpp), so each segment reads its operand directly instead of
// clamping and selecting per element. Against the reference evaluator: nested concats, operands
// read through permutes and broadcasts, an elementwise consumer, odd widths, empty operands,
// concats along outer axes (channels of a batch of images), two axes in one stage (only one is
// segmented), and one and two threads.
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "frontend/Frontend.h"
#include "runtime/ThreadPool.h"
#include "tests/codegen/CodegenTestUtil.h"

namespace kiln::codegen::test {
namespace {

using frontend::GraphBuilder;
using frontend::Var;

// The clamped reads of concat operands left in the generated source (the concat emitter's
// assignments, not the prelude's definition).
int clampedReads(const ir::Graph &graph) { return countInSource(graph, " = kiln_clamp_index("); }

TEST(CodegenConcatSegments, GradientsOfASplitJoinedAlongTheLastAxis) {
  // Q, K and V gradients, K's read through a permute, joined into [tokens, 3 * width] as
  // autodiff's pad sums become after simplify-algebra, with a consumer in the same loop.
  GraphBuilder gb("qkv");
  Var q = gb.input("q", DType::F32, {2, 7, 3, 5});
  Var k = gb.input("k", DType::F32, {2, 3, 7, 5});
  Var v = gb.input("v", DType::F32, {2, 7, 15});
  Var qFlat = frontend::reshape(q, {2, 7, 15});
  Var kFlat = frontend::reshape(frontend::permute(k, {0, 2, 1, 3}), {2, 7, 15});
  Var joined = frontend::concat({frontend::concat({qFlat, kFlat}, 2), v * 2.0}, 2);
  auto graph = gb.finish({frontend::tanh(joined) + 1.0});
  EXPECT_EQ(clampedReads(*graph), 0);
  for (int threads : {1, 2})
    expectMatchesReference(*graph, randomInputs(*graph, 60 + threads), withThreads(threads));
}

TEST(CodegenConcatSegments, BroadcastOperandsOddWidthsAndEmptyPieces) {
  GraphBuilder gb("pieces");
  Var a = gb.input("a", DType::F32, {9, 1});
  Var b = gb.input("b", DType::F32, {9, 13});
  Var e = gb.input("e", DType::F32, {9, 0});
  Var c = gb.input("c", DType::F32, {17});
  Var row = frontend::broadcastTo(frontend::reshape(c, {1, 17}), {9, 17});
  Var joined = frontend::concat({a, e, b, row}, 1);
  auto graph = gb.finish({joined * joined, frontend::concat({b, b}, 0) - 1.0});
  EXPECT_EQ(clampedReads(*graph), 0); // the concat along the rows is segmented by rows
  expectMatchesReference(*graph, randomInputs(*graph, 63));
}

TEST(CodegenConcatSegments, ChannelsOfABatchWithANormalisingConsumer) {
  // DenseNet's layers at batch > 1: every earlier feature map joined along the channels, then
  // BatchNorm and ReLU; the joined channels of one image are not contiguous across the batch,
  // so the concat cannot lie in place. Channel counts that do not fill a vector, a 1x1 image
  // width and 3 to 9 operands; a second consumer keeps the concat itself stored.
  for (int64_t width : {1, 7}) {
    GraphBuilder gb("dense");
    std::vector<Var> features{gb.input("x", DType::F32, {3, 5, 6, width})};
    Var scale = gb.input("scale", DType::F32, {1, 1, 1, 1});
    for (int layer = 0; layer < 8; ++layer) {
      Var joined = frontend::concat(features, 1);
      Var normalised = frontend::relu(joined * scale - 0.5);
      features.push_back(frontend::narrow(normalised, 1, 0, 3 + layer % 2));
    }
    Var all = frontend::concat(features, 1);
    auto graph = gb.finish({all, frontend::sigmoid(all) * 2.0});
    EXPECT_EQ(clampedReads(*graph), 0) << "width " << width;
    for (int threads : {1, 2})
      expectMatchesReference(*graph, randomInputs(*graph, 70 + threads), withThreads(threads));
  }
}

TEST(CodegenConcatSegments, TwoAxesInOneStage) {
  // Channels joined, then that joined along the rows: one axis is segmented, the other's
  // operands selected per element as before.
  GraphBuilder gb("two");
  Var a = gb.input("a", DType::F32, {2, 3, 4, 5});
  Var b = gb.input("b", DType::F32, {2, 2, 4, 5});
  Var c = gb.input("c", DType::F32, {2, 5, 3, 5});
  Var joined = frontend::concat({frontend::concat({a, b}, 1), c}, 2);
  auto graph = gb.finish({frontend::exp(joined)});
  for (int threads : {1, 2})
    expectMatchesReference(*graph, randomInputs(*graph, 80 + threads), withThreads(threads));
}

} // namespace
} // namespace kiln::codegen::test
