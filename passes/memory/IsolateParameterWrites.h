#pragma once
// isolate-parameter-writes: splits each kernel that writes a parameter's new value
// (passes/memory/ParameterWrites.h) and also computes in stages (a contraction, a reduction:
// fusion puts an update into its gradient's matmul as an epilogue) into the staged part, a
// pointwise `in-place-update` kernel computing the new value, and a kernel for the rest of the
// group's pointwise ops. Codegen lets a contraction write its tile into the group's first result
// buffer, here the parameter's own storage, before the epilogue reads the parameter: the split
// gives the tile an arena buffer of its own. The cost is one parameter-sized read and write per
// split update.
//   Requires: a verified graph after `fuse` whose outputs that overwrite a parameter are named
//   after it (a training graph).
//   Guarantees: the graph computes what it did; no kernel writing a parameter's new value holds
//   a staged op, and the split-off update kernel holds only the ops its value is computed from
//   (a gradient reading the parameter broadcast goes to the third kernel). Counter: "kernels
//   split".
#include <memory>

#include "passes/Pass.h"

namespace kiln::passes {

std::unique_ptr<Pass> createIsolateParameterWritesPass();

} // namespace kiln::passes
