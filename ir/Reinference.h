#pragma once
// Re-inferring a graph in place after its sizes change: binding symbols to extents
// (ir/SymbolicShapes.h) and cutting a batch to a tile (ir/BatchTiling.h) both rewrite the
// inputs' types and the attributes that spell dims, then need every node's types inferred
// again and checked against what the change promised.
#include <functional>
#include <string>

#include "ir/Graph.h"

namespace kiln::ir {

/// For every node of `graph` in order: `rewrite(node, attrs)` may change a copy of its
/// attributes (set on the node), then its outputs' types are inferred from its operands'
/// current types and each must have its old dtype and the shape `expected(output)` (called
/// before the output's type changes). The caller has set the inputs' types. kiln::Error naming
/// the node and `at` ("at this binding", "at a batch tile of 2") when inference fails or gives
/// another shape.
void reinferInPlace(Graph &graph, const std::function<void(const Node &, AttrMap &)> &rewrite,
                    const std::function<Shape(const Value &)> &expected, const std::string &at);

} // namespace kiln::ir
