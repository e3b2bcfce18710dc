#pragma once
// Liveness of intermediate values over the graph's execution order.
//
// Requires: a verified graph whose top-level node list is the final execution order (after
// fusion each group is one node, so the analysis sees one step per kernel).
// Provides: for every intermediate value, the closed interval of steps [def, lastUse] during
// which its buffer must hold it.
//
// Steps number the non-source nodes (everything but param and constant) in list order: step i
// is the i-th kernel to run. Intermediates are the outputs of non-source nodes that are not
// graph outputs; graph inputs, graph outputs, parameters and constants live outside the arena
// and have no interval. A value nobody uses lives only at its defining step (its kernel still
// writes it). At a step both the node's operands and its outputs are live, so a kernel never
// writes over an operand unless the planner decides it may (in-place reuse).
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "ir/Graph.h"

namespace kiln::passes {

struct LiveInterval {
  const ir::Value *value = nullptr;
  int64_t def = 0;     // the step of the node that produces the value
  int64_t lastUse = 0; // the last step that reads it; def when nothing reads it

  bool liveAt(int64_t step) const { return def <= step && step <= lastUse; }
  bool overlaps(const LiveInterval &other) const { return def <= other.lastUse && other.def <= lastUse; }
};

class Liveness {
public:
  /// The kernels in execution order: steps()[i] runs at step i.
  const std::vector<const ir::Node *> &steps() const { return steps_; }
  /// Every intermediate, in order of definition (by step, then output index).
  const std::vector<LiveInterval> &intervals() const { return intervals_; }

  /// The interval of `value`, or nullptr when it is not an intermediate.
  const LiveInterval *find(const ir::Value *value) const;
  bool isIntermediate(const ir::Value *value) const { return find(value) != nullptr; }
  /// The step at which `node` runs, or -1 for a source node or a node of another graph.
  int64_t stepOf(const ir::Node *node) const;

private:
  friend Liveness computeLiveness(const ir::Graph &graph);
  std::vector<const ir::Node *> steps_;
  std::vector<LiveInterval> intervals_;
  // Lookup tables only; never iterated, so pointer hashing cannot leak into any output order.
  std::unordered_map<const ir::Value *, size_t> intervalIndex_;
  std::unordered_map<const ir::Node *, int64_t> stepIndex_;
};

/// Computes the intervals in one pass over the node list (O(nodes + uses)).
Liveness computeLiveness(const ir::Graph &graph);

} // namespace kiln::passes
