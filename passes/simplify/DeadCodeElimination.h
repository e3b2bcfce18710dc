#pragma once
// dce: removes every node none of whose outputs is used by another node or returned by the
// graph, including parameters nothing reads. Graph inputs stay, so the graph's signature is
// unchanged.
//   Requires: a verified graph.
//   Guarantees: every remaining node has at least one used output; the outputs compute the same
//   values. Counter: "nodes removed".
#include <memory>

#include "passes/Pass.h"

namespace kiln::passes {

std::unique_ptr<Pass> createDeadCodeEliminationPass();

} // namespace kiln::passes
