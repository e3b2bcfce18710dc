#pragma once
// constant-fold: evaluates each node whose operands are all `constant` nodes (a node without
// operands, such as iota, included) with the reference evaluator and replaces its outputs by
// constants. Parameters are never treated as constants, even when they carry a value: they are
// the model's weights, which a user may rebind. The folded node's operands are left for dce.
// A result over kMaxFoldedElements elements is folded only when no larger than the largest
// operand, so folding never turns a small description (a broadcast scalar, an iota) into a
// large blob; see ConstantFolding.cpp.
//   Requires: a verified graph.
//   Guarantees: no node that may fold has only constant operands. Counters: "nodes folded",
//   "nodes too large to fold", "nodes whose evaluation failed" (left as they are, so that
//   running the graph reports the error where it happens).
#include <cstdint>
#include <memory>

#include "passes/Pass.h"

namespace kiln::passes {

/// Results with more elements than this fold only when no larger than the largest operand.
inline constexpr int64_t kMaxFoldedElements = int64_t(1) << 20;

std::unique_ptr<Pass> createConstantFoldingPass();

} // namespace kiln::passes
