// Loop stages that read a concat along the innermost axis walk that axis in one segment per
// operand (codegen/EmitElementwise.cpp), so each segment reads its operand directly instead of
// clamping and selecting per element. Against the reference evaluator: nested concats, operands
// read through permutes and broadcasts, an elementwise consumer, odd widths, empty operands,
// a concat along another axis (no segments), and one and two threads.
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
  EXPECT_EQ(clampedReads(*graph), 2); // only the concat along the rows: a clamp per operand
  expectMatchesReference(*graph, randomInputs(*graph, 63));
}

} // namespace
} // namespace kiln::codegen::test
