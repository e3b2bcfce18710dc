#pragma once
// Graph algorithms over the data-dependence graph of an ir::Graph (node -> node edges from
// producer to user), computed with Boost.Graph behind this adapter so no other file needs
// Boost's headers. Traversals are iterative: graph depth comes from the user's model.
#include <memory>
#include <vector>

#include "ir/Graph.h"

namespace kiln::ir {

class DependenceGraph {
public:
  explicit DependenceGraph(const Graph &graph);
  ~DependenceGraph();
  DependenceGraph(const DependenceGraph &) = delete;
  DependenceGraph &operator=(const DependenceGraph &) = delete;

  size_t numNodes() const;
  /// Nodes in a topological order (producers before users), as Boost's depth-first
  /// topological sort finds it. Throws kiln::Error if the edges contain a cycle.
  std::vector<Node *> topologicalOrder() const;
  /// True if a path of one or more edges leads from `from` to `to`.
  bool reaches(const Node *from, const Node *to) const;
  /// Every node reachable from any of `sources` (the sources themselves excluded unless reachable).
  std::vector<Node *> reachableFrom(const std::vector<const Node *> &sources) const;
  /// Adds an extra edge, e.g. to ask whether merging two nodes would create a cycle.
  void addEdge(const Node *from, const Node *to);
  bool hasCycle() const;
  /// A topological order that keeps the node list's relative order wherever dependences
  /// allow (Kahn's algorithm, smallest original position first), so rewrites stay
  /// deterministic. Throws kiln::Error on a cycle.
  std::vector<Node *> stableTopologicalOrder() const;

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// Reorders the graph's node list into stableTopologicalOrder().
void sortTopologically(Graph &graph);

} // namespace kiln::ir
