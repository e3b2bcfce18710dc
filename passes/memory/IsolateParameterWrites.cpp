// isolate-parameter-writes (see IsolateParameterWrites.h), per parameter write whose kernel
// computes in stages:
//  1. inline the kernel back into the graph;
//  2. mark the staged ops and everything they read within the group (`before`), then the nodes
//     the new value is computed from (`after`); the rest of the group's nodes are pointwise
//     ops that read neither way;
//  3. outline the three parts as kernels, the update's own as `in-place-update`.
#include "passes/memory/IsolateParameterWrites.h"

#include <unordered_set>

#include "ir/KernelOutline.h"
#include "passes/memory/ParameterWrites.h"

namespace kiln::passes {

namespace {

/// Splits `writer`, the kernel computing output `output` of `graph`.
void isolate(ir::Graph &graph, ir::Node *writer, size_t output) {
  std::string rule = writer->hasAttr("rule") ? writer->attrString("rule") : "";
  std::vector<ir::Node *> nodes = ir::inlineKernel(graph, writer);
  // The staged ops and everything they read within the group; latest first, so that each
  // node's users in the group are classified before it.
  std::unordered_set<const ir::Node *> staged;
  for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) {
    bool feedsStaged = isStagedOp((*it)->op());
    for (const ir::Value *value : (*it)->outputs())
      for (const ir::Use &use : value->uses())
        feedsStaged = feedsStaged || staged.count(use.user) != 0;
    if (feedsStaged)
      staged.insert(*it);
  }
  // The nodes the new parameter value is computed from; the group's other pointwise nodes
  // (a gradient that reads the parameter broadcast, say) go to a kernel of their own, or
  // the update kernel would read the parameter at other elements than it writes.
  std::unordered_set<const ir::Node *> feedsUpdate{graph.outputs()[output]->producer()};
  for (auto it = nodes.rbegin(); it != nodes.rend(); ++it)
    for (const ir::Value *value : (*it)->outputs())
      for (const ir::Use &use : value->uses())
        if (feedsUpdate.count(use.user))
          feedsUpdate.insert(*it);
  std::vector<ir::Node *> before, after, rest;
  for (ir::Node *node : nodes)
    if (node->op() != ir::OpKind::Param && node->op() != ir::OpKind::Constant)
      (staged.count(node) ? before : feedsUpdate.count(node) ? after : rest).push_back(node);
  // Both parts are convex: `before` is closed under operands within the group, so no path
  // leaves it and comes back, and a path from `after` into `before` would make its start an
  // operand of a staged op.
  if (!before.empty())
    ir::outlineKernel(graph, before, rule);
  if (!after.empty())
    ir::outlineKernel(graph, after, "in-place-update");
  if (!rest.empty())
    ir::outlineKernel(graph, rest, rule);
}

class IsolateParameterWrites final : public Pass {
public:
  std::string_view name() const override { return "isolate-parameter-writes"; }

  bool run(ir::Graph &graph, PassContext &context) override {
    int64_t split = 0;
    for (const ParameterWrite &write : parameterWrites(graph)) {
      ir::Node *writer = graph.outputs()[write.output]->producer();
      if (!writer || writer->op() != ir::OpKind::Kernel || !writer->body() || !hasStagedOps(*writer))
        continue;
      isolate(graph, writer, write.output);
      ++split;
    }
    context.stats.add("kernels split", split);
    return split > 0;
  }
};

} // namespace

std::unique_ptr<Pass> createIsolateParameterWritesPass() { return std::make_unique<IsolateParameterWrites>(); }

} // namespace kiln::passes
