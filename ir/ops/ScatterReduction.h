#pragma once
// How a scatter combines an update with the element already there: the `reduction` attribute of
// scatter_elements and scatter_nd, and scatter_add's fixed "add". One parser serves the
// reference evaluator (ir/ops/GatherScatter.cpp) and codegen (codegen/EmitScatter.cpp).
#include <string>

#include "ir/Graph.h"

namespace kiln::ir::ops {

enum class ScatterReduction { None, Add, Mul, Max, Min };

/// "none", "add", "mul", "max" or "min"; anything else is a kiln::Error listing them.
ScatterReduction parseScatterReduction(const std::string &name);

/// The reduction a scatter node applies: Add for scatter_add, else its `reduction` attribute.
ScatterReduction scatterReductionOf(const Node &node);

} // namespace kiln::ir::ops
