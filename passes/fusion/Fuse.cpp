// fuse, in stages: (1) analyse the graph (passes/fusion/FusionRules.cpp holds the rules) and write
// the report while the analysed nodes still exist; (2) for each group, give it its own copies
// of the views of parameters and constants it reads (they are index arithmetic, recomputed by
// every kernel that reads them, so one view never ties two kernels together), then outline the
// group with ir::outlineKernel, which checks convexity again; (3) erase the original views that
// no node uses any more. Outlining a group replaces its nodes but leaves every other node in
// place, so the analysis stays valid for the groups still to outline.
#include "passes/fusion/Fuse.h"

#include <algorithm>
#include <unordered_map>

#include "ir/KernelOutline.h"
#include "passes/fusion/FusionAnalysis.h"

namespace kiln::passes {

namespace {

bool isView(const FusedOp &op) { return op.role == FusionRole::SourceView || op.role == FusionRole::OperandView; }

/// Outlines `group`; returns the number of ops moved into the kernel, 0 for a dead group.
int64_t outlineGroup(ir::Graph &graph, const FusionGroup &group) {
  bool used = false;
  for (const FusedOp &op : group.ops)
    used = used || op.exported;
  if (!used)
    return 0;
  // The analysis hands out const nodes; they are nodes of `graph`, which this pass may edit.
  std::vector<ir::Node *> members;
  std::unordered_map<const ir::Value *, ir::Value *> copies;
  for (const FusedOp &op : group.ops) {
    auto *node = const_cast<ir::Node *>(op.node);
    if (!isView(op)) {
      members.push_back(node);
      continue;
    }
    // Each copy goes just before its original, where its operands (sources, or the copy of
    // an earlier view in the chain) are defined.
    ir::Node *before = node;
    graph.cloneNodes({node}, copies, before);
    members.push_back(before->prev());
  }
  for (ir::Node *member : members)
    for (size_t i = 0; i < member->numInputs(); ++i)
      if (auto it = copies.find(member->input(i)); it != copies.end())
        member->setInput(i, it->second);
  ir::outlineKernel(graph, members, std::string(fusionRuleName(group.rule)));
  return static_cast<int64_t>(members.size());
}

class Fuse final : public Pass {
public:
  std::string_view name() const override { return "fuse"; }

  bool run(ir::Graph &graph, PassContext &context) override {
    FusionAnalysis analysis = analyzeFusion(graph);
    FusionReport report{formatFusionReport(graph, analysis)};

    int64_t formed = 0, fused = 0;
    std::vector<ir::Node *> views;
    for (const FusionGroup &group : analysis.groups) {
      for (const FusedOp &op : group.ops)
        if (isView(op))
          views.push_back(const_cast<ir::Node *>(op.node));
      int64_t moved = outlineGroup(graph, group);
      formed += moved > 0;
      fused += moved;
    }
    // Originals of copied views, latest first so that a chain's users go before its producers.
    std::sort(views.begin(), views.end());
    views.erase(std::unique(views.begin(), views.end()), views.end());
    std::vector<ir::Node *> order = graph.nodes();
    std::unordered_map<const ir::Node *, size_t> position; // lookup only
    for (size_t i = 0; i < order.size(); ++i)
      position[order[i]] = i;
    std::sort(views.begin(), views.end(),
              [&](const ir::Node *a, const ir::Node *b) { return position.at(a) > position.at(b); });
    int64_t erased = 0;
    for (ir::Node *view : views) {
      bool used = false;
      for (const ir::Value *output : view->outputs())
        used = used || output->hasUses();
      if (!used) {
        graph.eraseNode(view);
        ++erased;
      }
    }

    int64_t kernels = 0;
    for (const ir::Node *node : graph.nodes())
      kernels += ir::opTraits(node->op()).tier != ir::OpTier::Source;
    context.stats.add("groups formed", formed);
    context.stats.add("ops fused", fused);
    context.stats.add("kernels", kernels);
    context.analyses["fusion"] = std::move(report);
    return formed > 0 || erased > 0;
  }
};

} // namespace

std::unique_ptr<Pass> createFusePass() { return std::make_unique<Fuse>(); }

} // namespace kiln::passes
