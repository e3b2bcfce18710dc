#pragma once
// Graph exports for other tools: Graphviz DOT for pictures and JSON for scripts. Both use the
// value names of the text form (ir/Printer.h), so the three views of a graph line up.
#include <string>

#include "ir/Graph.h"

namespace kiln::ir {

/// A Graphviz digraph: one vertex per graph input (labelled "%x" and its type), one per node
/// (labelled with its op and output types), one for the return; an edge per operand,
/// labelled with the value's name. A kernel is one vertex (shape box3d) labelled with its
/// rule, the ops of its body in order, and its result types, and filled with its rule's colour
/// (elementwise light blue, contraction+epilogue light orange, reduction light green, movement
/// light purple, any other rule grey); single ops stay unfilled. A graph with kernels also gets
/// a legend: a cluster "cluster_legend" with one sample vertex per colour.
std::string toDot(const Graph &graph);

/// A JSON document: {"name", "inputs": [{"name", "type"}], "nodes": [{"op", "inputs",
/// "outputs", "types", "attrs"}], "outputs"}. Every attribute is present; tensors are
/// summarised as {"type", "values"} with at most 8 leading values and "truncated"; floats
/// that JSON cannot hold (inf, nan) are strings. A kernel node also has "body": {"inputs",
/// "nodes", "outputs"} in the body's own value names.
std::string toJson(const Graph &graph);

} // namespace kiln::ir
