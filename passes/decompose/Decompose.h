#pragma once
// decompose: replaces every composite node by its decomposition (the op's `decompose` in its
// ir/ops/ family file, built in place before the node), repeating on composites that
// decompositions create, until only sources and primitives remain. For autodiff it also
// expands the primitives that have a decomposition (the recurrences: their unrolled form),
// which autodiff differentiates instead of the op; the pipelines keep those whole, except the
// nodes their op's expandIf picks (a recurrence off f32, which the runtime's kernel does not
// take).
//   Requires: a verified graph.
//   Guarantees: no composite node (nor one expandIf picks) remains; outputs keep their names.
//   A decomposition that keeps producing composites past kMaxDecompositionDepth rounds is a
//   kiln::Error naming the op.
//   Counter: "composites expanded".
#include <memory>

#include "passes/Pass.h"

namespace kiln::passes {

/// How deeply decompositions may nest composites (the deepest in the op table is a few levels).
inline constexpr int kMaxDecompositionDepth = 32;

/// The registered pass: composites only, what every pipeline runs.
std::unique_ptr<Pass> createDecomposePass();
/// The same pass that also expands the primitives with a decomposition (the recurrences), for
/// the training graph's autodiff (passes/autodiff/TrainingGraph.h).
std::unique_ptr<Pass> createDecomposeForAutodiffPass();

} // namespace kiln::passes
