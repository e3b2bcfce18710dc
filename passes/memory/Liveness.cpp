// Liveness in two stages, both linear in the size of the graph:
//   1. number the kernels: walk the node list once, giving each non-source node the next step;
//   2. for each output of each kernel that is not a graph output, its interval starts at the
//      producer's step and ends at the largest step among its users (its own step when unused).
// Users are always later in the list (the verifier guarantees SSA order), so lastUse >= def.
#include "passes/memory/Liveness.h"

#include <algorithm>

#include "core/Error.h"

namespace kiln::passes {

const LiveInterval *Liveness::find(const ir::Value *value) const {
  auto it = intervalIndex_.find(value);
  return it == intervalIndex_.end() ? nullptr : &intervals_[it->second];
}

int64_t Liveness::stepOf(const ir::Node *node) const {
  auto it = stepIndex_.find(node);
  return it == stepIndex_.end() ? -1 : it->second;
}

Liveness computeLiveness(const ir::Graph &graph) {
  Liveness liveness;
  for (const ir::Node *node : graph.nodes()) {
    if (ir::opTraits(node->op()).tier == ir::OpTier::Source)
      continue;
    liveness.stepIndex_.emplace(node, static_cast<int64_t>(liveness.steps_.size()));
    liveness.steps_.push_back(node);
  }

  for (size_t step = 0; step < liveness.steps_.size(); ++step) {
    const ir::Node *node = liveness.steps_[step];
    for (size_t i = 0; i < node->numOutputs(); ++i) {
      const ir::Value *value = node->output(i);
      if (graph.isOutput(value))
        continue;
      LiveInterval interval{value, static_cast<int64_t>(step), static_cast<int64_t>(step)};
      for (const ir::Use &use : value->uses()) {
        int64_t userStep = liveness.stepOf(use.user);
        // A verified graph has every user in its list after the producer; anything else means
        // the caller handed us a graph that was edited without being verified.
        if (userStep < interval.def)
          fail("liveness: value used by a {} node that is not scheduled after its producer {}",
               use.user->opName(), node->opName());
        interval.lastUse = std::max(interval.lastUse, userStep);
      }
      liveness.intervalIndex_.emplace(value, liveness.intervals_.size());
      liveness.intervals_.push_back(interval);
    }
  }
  return liveness;
}

} // namespace kiln::passes
