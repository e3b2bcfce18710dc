#pragma once
// Helpers shared by the pass tests: parsing a graph from .kir text and the numerics check every
// pass must pass (the reference evaluator on the graph before and after the pass, on the same
// fresh random inputs and parameters, agrees to 1e-5 relative).
#include <gtest/gtest.h>

#include <memory>
#include <string_view>

#include "ir/Graph.h"
#include "passes/Pass.h"

namespace kiln::test {

/// Parses (and verifies) .kir text; a parse error fails the test with the parser's message.
std::unique_ptr<ir::Graph> parseKir(std::string_view text);

/// One pass applied to a copy of a parsed graph.
struct PassRun {
  std::unique_ptr<ir::Graph> before, after;
  passes::PassContext context;
  bool changed = false;
  /// The pass's counter `name` ("nodes removed"), 0 when it never counted.
  int64_t stat(const std::string &name) const { return context.stats.get(name); }
  /// How many nodes of `op` the graph holds after the pass.
  int count(ir::OpKind op) const;
};

/// Parses `text`, runs `pass` on a clone of it and expects the result to verify.
PassRun runPass(std::string_view text, passes::Pass &pass);

/// Evaluates `before` and `after` on the same random inputs (seeded by `seed`), with the same
/// random values for parameters that carry none (matched by parameter name; a parameter of
/// `after` that `before` lacks must carry a value). Expects every output to agree within
/// |got - want| <= atol + rtol * |want|.
void expectSameNumerics(const ir::Graph &before, const ir::Graph &after, uint64_t seed = 1,
                        double rtol = 1e-5, double atol = 1e-6);

// Steps and intervals (bytes):  a [0,2] 256   b [1,3] 128   c [2,4] 64   d [3,4] 256
//                               e [4,5] 320   (f is the output)
// Live bytes per step: 256, 384, 448, 448, 640 (c+d+e), 320 -> lower bound 640;
// naive 256+128+64+256+320 = 1024.
/// The memory-plan tests' packing graph (MemoryPlanTest, MemoryPlanSvgTest).
inline constexpr const char *kPackingGraph = R"(
graph @packing(%x: f32[1,16]) -> (f32[1,16]) {
  %w1 = param "w1" : f32[16,64]
  %w2 = param "w2" : f32[64,32]
  %w3 = param "w3" : f32[64,16]
  %w4 = param "w4" : f32[32,64]
  %w5 = param "w5" : f32[80,16]
  %a = matmul(%x, %w1) : f32[1,64]
  %b = matmul(%a, %w2) : f32[1,32]
  %c = matmul(%a, %w3) : f32[1,16]
  %d = matmul(%b, %w4) : f32[1,64]
  %e = concat(%c, %d) {axis = 1} : f32[1,80]
  %f = matmul(%e, %w5) : f32[1,16]
  return %f
}
)";

} // namespace kiln::test
