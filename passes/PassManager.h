#pragma once
// The pass registry and the PassManager. The registry is the table passes/PassRegistry.def,
// looked up by name; the manager runs a list of passes (given by name, by pipeline or as
// objects) over one graph, verifies the graph after each, and records for each pass whether it
// changed the graph, how long it took and the counters it reported. A callback after each pass
// is how the tools print the IR after a pass (--print-after-all, --print-after=NAME) and check
// numerics pass by pass (kiln-run --bisect-passes).
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "passes/Pass.h"

namespace kiln::passes {

/// One line of passes/PassRegistry.def.
struct PassInfo {
  std::string_view name;
  std::string_view description;
  std::unique_ptr<Pass> (*create)();
};

/// Every registered pass, in table order (sorted by name).
const std::vector<PassInfo> &registeredPasses();
/// The registered pass called `name`, or nullptr.
const PassInfo *findPass(std::string_view name);
/// A new instance of the registered pass `name`; kiln::Error listing the known passes if there
/// is none.
std::unique_ptr<Pass> createPass(std::string_view name);

/// Splits a comma-separated pass list ("constant-fold,cse,dce"); an empty list or an empty
/// item is a kiln::Error. Names are not looked up here.
std::vector<std::string> splitPassList(std::string_view list);

/// What the manager recorded about one run of one pass.
struct PassRecord {
  std::string name;
  bool changed = false;
  double seconds = 0;
  /// The counters this pass reported in this run (the context's stats hold the sums).
  PassStatistics stats;
};

class PassManager {
public:
  /// Called after each pass has run and the graph has passed verification, with that pass's
  /// record and the graph as the pass left it. An exception it throws stops the run.
  using AfterPassCallback = std::function<void(const PassRecord &record, const ir::Graph &graph)>;

  void addPass(std::unique_ptr<Pass> pass);
  /// Adds the registered pass `name`; kiln::Error listing the known passes if it is unknown.
  void addPass(std::string_view name);
  void addPasses(const std::vector<std::string> &names);
  /// Adds every pass of the pipeline `name` (passes/Pipelines.h); kiln::Error listing the known
  /// pipelines if it is unknown.
  void addPipeline(std::string_view name);

  /// The names of the passes added so far, in order.
  std::vector<std::string> passNames() const;
  void setAfterPassCallback(AfterPassCallback callback) { afterPass_ = std::move(callback); }

  /// Verifies `graph`, then runs every pass in order and verifies the graph after each. Returns
  /// true when some pass changed the graph. A pass that throws, or leaves a graph that fails
  /// verification, is a kiln::Error whose message names the pass. Each pass's counters go to
  /// its record and are added to `context.stats`. records() is reset at the start of each run.
  bool run(ir::Graph &graph, PassContext &context);

  /// One record per pass that ran in the last run(), in order.
  const std::vector<PassRecord> &records() const { return records_; }

private:
  std::vector<std::unique_ptr<Pass>> passes_;
  AfterPassCallback afterPass_;
  std::vector<PassRecord> records_;
};

} // namespace kiln::passes
