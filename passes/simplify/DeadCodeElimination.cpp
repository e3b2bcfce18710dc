// Dead code elimination in one backward sweep. The node list is in execution order, so every
// user of a node comes after it: walking from the last node to the first, a node is dead when
// none of its outputs has a use left or is returned, and erasing it removes its uses of its
// operands before the sweep reaches their producers. Whole dead chains therefore go in one
// sweep, in time linear in the graph.
#include "passes/simplify/DeadCodeElimination.h"

#include <unordered_set>

namespace kiln::passes {

namespace {

class DeadCodeElimination : public Pass {
public:
  std::string_view name() const override { return "dce"; }

  bool run(ir::Graph &graph, PassContext &context) override {
    // A set rather than Value::hasUses(), which scans the output list for every value.
    std::unordered_set<const ir::Value *> returned(graph.outputs().begin(), graph.outputs().end());
    auto isDead = [&](const ir::Node *node) {
      for (size_t i = 0; i < node->numOutputs(); ++i) {
        const ir::Value *output = node->output(i);
        if (!output->uses().empty() || returned.count(output))
          return false;
      }
      return true;
    };
    int64_t removed = 0;
    for (ir::Node *node = graph.lastNode(); node;) {
      ir::Node *previous = node->prev();
      if (isDead(node)) {
        graph.eraseNode(node);
        ++removed;
      }
      node = previous;
    }
    context.stats.add("nodes removed", removed);
    return removed > 0;
  }
};

} // namespace

std::unique_ptr<Pass> createDeadCodeEliminationPass() { return std::make_unique<DeadCodeElimination>(); }

} // namespace kiln::passes
