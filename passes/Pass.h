#pragma once
// A pass rewrites an ir::Graph in place and returns whether it changed anything, so that a
// pipeline can iterate to a fixed point and report which passes did work. Passes read and
// write IR only; what a later stage needs beyond the IR (the memory plan, fusion decisions for
// --explain-fusion) is left in the PassContext as an analysis result.
#include <any>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "ir/Graph.h"

namespace kiln::passes {

/// Named counters a pass reports ("nodes removed", "groups formed", ...), printed by --stats.
class PassStatistics {
public:
  void add(const std::string &counter, int64_t amount = 1);
  /// The counter's value; 0 for a counter never added to.
  int64_t get(const std::string &counter) const;
  /// Adds every counter of `other` (a pipeline sums its passes' statistics).
  void merge(const PassStatistics &other);
  const std::map<std::string, int64_t> &counters() const { return counters_; }

private:
  std::map<std::string, int64_t> counters_;
};

/// What one run of a pass sees besides the graph: its own statistics and the analysis results
/// that passes leave for later stages, by name (e.g. "memory-plan" holds a passes::MemoryPlan).
struct PassContext {
  PassStatistics stats;
  std::map<std::string, std::any> analyses;

  template <typename T> const T *analysis(const std::string &name) const {
    auto it = analyses.find(name);
    return it == analyses.end() ? nullptr : std::any_cast<T>(&it->second);
  }
};

class Pass {
public:
  virtual ~Pass() = default;
  /// The name used in pipelines and on the command line (`--passes=dce,cse`).
  virtual std::string_view name() const = 0;
  /// Rewrites `graph`; returns true when it changed the graph.
  virtual bool run(ir::Graph &graph, PassContext &context) = 0;
};

} // namespace kiln::passes
