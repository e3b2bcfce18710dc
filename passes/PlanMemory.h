#pragma once
// plan-memory: plans every intermediate value into one arena (passes/MemoryPlan.h).
//
// Requires: a verified graph in its final execution order, so run it last, after fusion (each
// kernel group then is one node and one step).
// Provides: context.analyses["memory-plan"] holds the passes::MemoryPlan; statistics
// "arena_bytes", "lower_bound_bytes" and "naive_bytes". The IR is not changed (returns false).
#include <memory>

#include "passes/Pass.h"

namespace kiln::passes {

std::unique_ptr<Pass> createPlanMemoryPass();

} // namespace kiln::passes
