#pragma once
// The verifier: run after construction, parsing and every pass. It checks that the graph is in
// SSA form in node order (each operand defined earlier, by a node of this graph or an input),
// that use lists match operands exactly, that attributes match each op's schema, and that
// every node's output types equal what inference computes from its inputs.
#include "ir/Graph.h"

namespace kiln::ir {

/// Throws kiln::Error naming the first offending node (its position and op) and the problem.
void verify(const Graph &graph);

} // namespace kiln::ir
