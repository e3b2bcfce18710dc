#pragma once
// decompose: replaces every composite node by its decomposition (the op's `decompose` in its
// ir/ops/ family file, built in place before the node), repeating on composites that
// decompositions create, until only sources and primitives remain.
//   Requires: a verified graph.
//   Guarantees: no composite node remains; outputs keep their names. A decomposition that keeps
//   producing composites past kMaxDecompositionDepth rounds is a kiln::Error naming the op.
//   Counter: "composites expanded".
#include <memory>

#include "passes/Pass.h"

namespace kiln::passes {

/// How deeply decompositions may nest composites (the deepest in the op table is a few levels).
inline constexpr int kMaxDecompositionDepth = 32;

std::unique_ptr<Pass> createDecomposePass();

} // namespace kiln::passes
