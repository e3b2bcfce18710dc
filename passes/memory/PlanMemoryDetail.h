#pragma once
// Arithmetic and orderings shared by the memory planner's files (PlanMemory.cpp, VerifyPlan.cpp,
// MemoryPlanSvg.cpp); not an interface for other callers.
#include <cstdint>
#include <vector>

#include "ir/Graph.h"
#include "passes/memory/PlanMemory.h"

namespace kiln::passes::detail {

/// a + b, checked by core/ShapeMath.h: kiln::Error ("memory plan: arena bytes") past its limit.
int64_t checkedAdd(int64_t a, int64_t b);
/// `bytes` rounded up to a multiple of `alignment` (a power of two), checked like checkedAdd.
int64_t alignUp(int64_t bytes, int64_t alignment);
int64_t valueBytes(const ir::Value *value);
/// reshape, squeeze, unsqueeze, flatten: the same bytes under another shape.
bool isViewOp(ir::OpKind op);

/// The plan's buffer indices with each buffer of its own (plan order) followed by the buffers
/// inside it, depth first, those by offset inside their parent (ties in plan order): how the
/// text form and the picture list them.
std::vector<size_t> bufferTreeOrder(const MemoryPlan &plan);

} // namespace kiln::passes::detail
