#pragma once
// Outlining a group of nodes into one kernel node (what fusion does with each group it forms)
// and inlining a kernel back (its inverse, for tests and for passes that undo a grouping).
//
// A kernel node's body is a graph isolated from above (ir/Graph.h): the values the group uses
// from outside become the kernel's operands and the body's inputs; the group's values used
// outside become the kernel's results and the body's outputs.
#include <string>
#include <vector>

#include "ir/Graph.h"

namespace kiln::ir {

/// Constants with at most this many elements that a group uses are copied into the body
/// instead of becoming operands: scalars and small tables belong with the code that uses them.
inline constexpr int64_t kMaxInlinedConstantElements = 64;

/// Moves `nodes` (in any order; non-source nodes of `graph`, no kernels) into the body of a
/// new kernel node with attribute rule = `rule`, and returns that node.
///  - Operands: the values the group uses that are defined outside it, each once, in order of
///    first use (group nodes in list order, operands in order). A small constant
///    (kMaxInlinedConstantElements) is copied into the body instead; the outer constant stays
///    where it is (dead-code elimination removes it if nothing else uses it).
///  - Results: the group's values used by a node outside the group or returned by the graph,
///    in list order of their nodes; each takes the name of the value it replaces, and every
///    outside use is redirected to it. Body inputs take their operand's name ("argN" if it has
///    none); body nodes keep their names and their relative list order.
///  - Placement: the kernel takes the place of the group's last node; nodes between the group's
///    first and last node that depend on the group move just after the kernel, in order, so
///    the node list stays a valid execution order.
/// Throws kiln::Error, leaving the graph unchanged, if the group is empty, lists a node twice,
/// holds a node of another graph, a source (param, constant) or a kernel, has no value used
/// outside it, or is not convex: when a path leads from a group node through a node outside
/// the group back into the group, the error names that outside node and the group node it
/// feeds. Requires the node list to be a valid execution order (as the verifier checks); costs
/// time in proportion to the nodes from the group's first to its last, not to the graph.
Node *outlineKernel(Graph &graph, const std::vector<Node *> &nodes, const std::string &rule);

/// Replaces `kernel` (a kernel node of `graph`) by copies of its body's nodes, placed where
/// the kernel was, with body inputs bound to the kernel's operands; every use of a kernel
/// result goes to the corresponding body value's copy, which takes the result's name if it has
/// none. Erases the kernel and returns the copies in order. Throws kiln::Error if `kernel` is
/// not a kernel of `graph` or its body does not match it.
std::vector<Node *> inlineKernel(Graph &graph, Node *kernel);

} // namespace kiln::ir
