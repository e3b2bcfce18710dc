#pragma once
// Reverse-mode automatic differentiation over a kiln graph, from the per-primitive gradient
// rules of passes/autodiff/GradientRules.h.
//   Requires: a verified graph whose nodes on the paths from `wrt` to `loss` are primitives
//   (run decompose first); `loss` holds one float element (any shape whose dims are all 1).
//   Guarantees: the gradient nodes are appended at the end of the graph (after every forward
//   node, so forward values are available); the graph's outputs are untouched (the caller adds
//   the gradients it wants as outputs). Each returned gradient has exactly its wrt value's type.
//   A wrt value the loss does not depend on gets zeros. Integer and bool values, and ops that
//   are not differentiable (comparisons, argmax, floor), carry no gradient.
//   Errors: a kiln::Error naming the node when an op on a gradient path has no rule or is a
//   composite, or when loss or wrt are not float values of this graph.
#include <vector>

#include "ir/Graph.h"

namespace kiln::passes::autodiff {

/// Appends to `graph` the gradient of `loss` with respect to each value of `wrt` and returns
/// them, in the order of `wrt`.
std::vector<ir::Value *> appendGradients(ir::Graph &graph, ir::Value *loss, const std::vector<ir::Value *> &wrt);

} // namespace kiln::passes::autodiff
