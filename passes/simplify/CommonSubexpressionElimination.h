#pragma once
// cse: merges nodes that compute the same thing: the same op, the same attributes (constants
// compare by value, bit for bit) and the same operands (in any order for ops flagged
// kCommutative in ir/Ops.def) and, for kernel nodes, equal bodies. The later node's uses move
// to the earlier one and it is erased.
// Parameters never merge: each is a distinct named input of the model.
//   Requires: a verified graph.
//   Guarantees: no two non-parameter nodes compute the same thing; linear time in the graph
//   (hashing), plus hashing each constant's bytes once. Counter: "nodes merged".
#include <memory>

#include "passes/Pass.h"

namespace kiln::passes {

std::unique_ptr<Pass> createCommonSubexpressionEliminationPass();

} // namespace kiln::passes
