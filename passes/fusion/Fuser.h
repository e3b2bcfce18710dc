#pragma once
// The fusion analysis's working state (passes/fusion/FusionAnalysis.cpp runs its stages,
// passes/fusion/FusionRules.cpp holds the rules a merge must obey): the graph's nodes by list
// position, their classes, and the groups grown so far as a union-find over those positions.
// Internal to passes/fusion/.
#include <algorithm>
#include <map>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "ir/Graph.h"
#include "ir/Printer.h"
#include "passes/fusion/FusionAnalysis.h"
#include "passes/fusion/FusionClasses.h"

namespace kiln::passes::fusion {

using ir::Node;
using ir::OpKind;

/// The rows a reduction folds: its input shape and which dims it reduces.
struct RowDomain {
  Shape input;
  std::vector<bool> reduced;
  int64_t reducedCount = 0;
};

/// The rows `reduction` folds (FusionRules.cpp).
RowDomain rowDomainOf(const Node &reduction);

/// A proposed merge's outcome: accepted, or refused for a reason.
struct Verdict {
  bool ok = true;
  UnfusedReason reason = UnfusedReason::ProducerOpaque;
  std::string detail;
};

inline Verdict refuse(UnfusedReason reason, std::string detail) { return {false, reason, std::move(detail)}; }

/// Grows the fusion groups of one graph (FusionAnalysis.cpp: the stages; FusionRules.cpp: the
/// rules, checkEdge and checkGroup, and the cycle check, cycleThrough).
class Fuser {
public:
  /// Stage 1: classifies every node and marks the views of sources. `exactCycles`: see
  /// cycleThrough.
  Fuser(const ir::Graph &graph, const FusionOptions &options, bool exactCycles);

  /// Stages 2-4: grows the groups and describes them.
  FusionAnalysis run();
  /// Whether the groups run() formed depend on each other in a cycle (possible only without
  /// exactCycles, see cycleThrough).
  bool kernelsFormCycle() const { return kernelsFormCycle_; }

private:
  // --- graph queries ---------------------------------------------------------------------
  int producerOf(const ir::Value *value) const {
    const Node *producer = value->producer();
    return producer ? index_.at(producer) : -1;
  }
  bool onlyMatMulOperand(int i) const;
  static bool batchedGemmFriendly(const Node &node);
  static bool oneStrideBatch(const Node &node);
  /// Ops that take part in grouping: not sources, not views of sources (attached at the end).
  bool groupable(int i) const { return classes_[i] != OpClass::Source && !sourceView_[i]; }
  bool isOpaque(int i) const { return classes_[i] == OpClass::Opaque; }
  /// The list positions of the nodes using any result of node i, sorted, once each.
  std::vector<int> consumersOf(int i) const {
    std::vector<int> users;
    for (const ir::Value *output : nodes_[i]->outputs())
      for (const ir::Use &use : output->uses())
        users.push_back(index_.at(use.user));
    std::sort(users.begin(), users.end());
    users.erase(std::unique(users.begin(), users.end()), users.end());
    return users;
  }
  int64_t elements(int i) const { return nodes_[i]->output(0)->type().numElements(); }
  const Shape &shapeOf(int i) const { return nodes_[i]->output(0)->shape(); }
  std::string label(int i) const { return label(nodes_[i]); }
  std::string label(const Node *node) const {
    auto it = names_.find(node->output(0));
    return fmt::format("%{} ({})", it == names_.end() ? "?" : it->second, node->opName());
  }
  std::string typeText(int i) const { return nodes_[i]->output(0)->type().toString(); }

  // --- union-find over list positions ---------------------------------------------------
  int find(int x) {
    while (parent_[x] != x)
      x = parent_[x] = parent_[parent_[x]];
    return x;
  }
  void unite(int a, int b) {
    if (members_[a].size() < members_[b].size())
      std::swap(a, b);
    parent_[b] = a;
    members_[a].insert(members_[a].end(), members_[b].begin(), members_[b].end());
    members_[b].clear();
    span_[a] = {std::min(span_[a].first, span_[b].first), std::max(span_[a].second, span_[b].second)};
    // reach_ is non-decreasing, so the raise stops at the first position already that far.
    for (size_t p = static_cast<size_t>(span_[a].first); p < reach_.size() && reach_[p] < span_[a].second; ++p)
      reach_[p] = span_[a].second;
  }

  // --- the rules (FusionRules.cpp) ----------------------------------------------------------
  Verdict checkEdge(int producer, int consumer) const;
  Verdict checkGroup(std::vector<int> candidate);
  bool exportedFrom(int i, int stamp) const;
  std::string readersOutside(int i, int stamp) const;
  std::vector<int> viewsRead(const std::vector<int> &members, int stamp);
  int countOperands(const std::vector<int> &members, const std::vector<int> &views, int stamp);
  const Node *cycleThrough(int from, int to);

  // --- the stages (FusionAnalysis.cpp) -------------------------------------------------------
  bool propose(int producer, int consumer, bool record);
  void grow(int seed, bool forwardOnly);
  FusionGroup describeGroup(std::vector<int> members);
  bool groupsFormCycle();

  int newStamp() { return ++stamp_; }

  const ir::Graph &graph_;
  FusionOptions options_;
  bool exactCycles_;
  bool kernelsFormCycle_ = false;
  std::vector<Node *> nodes_;
  std::unordered_map<const ir::Value *, std::string> names_;
  std::unordered_map<const Node *, int> index_; // lookup only, never iterated
  std::vector<OpClass> classes_;
  std::vector<bool> sourceView_;
  std::vector<bool> concatAlone_; // concats fusion leaves alone (passes/memory/ConcatSlices.h)
  std::vector<int> parent_;
  std::vector<std::vector<int>> members_;
  std::vector<std::pair<int, int>> span_;  // first and last list position of each group
  // reach_[p]: the largest last position of a group whose first position is at most p (groups
  // merged away count with the group that absorbed them, which reaches at least as far).
  std::vector<int> reach_;
  std::vector<int> mark_, visit_, queued_; // stamps: candidate membership, searches, growth queue
  int stamp_ = 0;
  std::map<std::pair<int, int>, Verdict> refusals_; // by (producer, consumer) position
};

} // namespace kiln::passes::fusion
