#pragma once
// The verifier: run after construction, parsing and every pass. It checks that the graph is in
// SSA form in node order (each operand defined earlier, by a node of this graph or an input),
// that use lists match operands exactly, that attributes match each op's schema, and that
// every node's output types equal what inference computes from its inputs, and that every
// input and result type lies within kiln's size limit (core/ShapeMath.h).
//
// A kernel node is checked against its body instead of inference: it must have a body whose
// inputs have the operands' types and whose outputs have the node's result types; the body
// must verify on its own (so it uses no outer value), hold no param and no nested kernel, and
// return at least one value. A body on any other op is an error.
#include "ir/Graph.h"

namespace kiln::ir {

/// Throws kiln::Error naming the first offending node (its position and op) and the problem;
/// a problem inside a kernel's body names the kernel node, then the body's node.
void verify(const Graph &graph);

} // namespace kiln::ir
