// plan-memory: runs planMemory with the default options (in-place reuse and view aliasing on,
// 64-byte alignment), leaves the plan for codegen in the pass context and reports the arena
// against its bounds, so that --stats shows how close the packing is to the lower bound.
#include "passes/PlanMemory.h"

#include "passes/MemoryPlan.h"

namespace kiln::passes {

namespace {

class PlanMemoryPass final : public Pass {
public:
  std::string_view name() const override { return "plan-memory"; }

  bool run(ir::Graph &graph, PassContext &context) override {
    MemoryPlan plan = planMemory(graph);
    context.stats.add("arena_bytes", plan.arenaBytes);
    context.stats.add("lower_bound_bytes", plan.lowerBoundBytes);
    context.stats.add("naive_bytes", plan.naiveBytes);
    context.analyses["memory-plan"] = std::move(plan);
    return false;
  }
};

} // namespace

std::unique_ptr<Pass> createPlanMemoryPass() { return std::make_unique<PlanMemoryPass>(); }

} // namespace kiln::passes
