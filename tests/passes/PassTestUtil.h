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

} // namespace kiln::test
