#pragma once
// plan-memory: one arena for every intermediate value, with an offset per value. The pass
// (createPlanMemoryPass) runs planMemory with the default options, leaves the plan in
// context.analyses["memory-plan"] for codegen and reports the statistics "arena_bytes",
// "lower_bound_bytes" and "naive_bytes"; it does not change the IR (returns false). Run it last,
// after fusion, so that each kernel group is one node and one step.
//
// Requires: a verified graph whose node list is the final execution order (see Liveness.h).
// Provides: every intermediate (passes/memory/Liveness.h) gets an offset, aligned to `alignment`,
// such that two values live at the same step never share a byte, except an output written
// over an operand that dies at the same node (an in-place reuse or a view alias, listed in
// `reuses`). Graph inputs, graph outputs, parameters and constants are not in the arena.
//
// The plan is a pure function of the graph and the options; it does not change the IR.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ir/Graph.h"
#include "passes/Pass.h"

namespace kiln::passes {

struct PlanOptions {
  /// An op with the kInPlace flag (ir/Ops.def) writes its output over its first operand when
  /// that operand is an intermediate of the same byte size whose last use is this op; so does
  /// a kernel over the operand it accumulates into (passes/fusion/AccumulatedOperand.h).
  bool inPlace = true;
  /// reshape, squeeze, unsqueeze and flatten alias their input under the same condition, so
  /// that they cost no copy and no bytes. On by default; codegen must then emit these views
  /// as no-ops (or copies in place) rather than as kernels reading and writing one buffer.
  bool aliasViews = true;
  /// Every size is rounded up to, and every offset is a multiple of, this many bytes (a power
  /// of two; 64 is a cache line and the widest vector load).
  int64_t alignment = 64;
};

enum class ReuseKind { InPlace, View };

/// `output` is written into the buffer of `operand`, which dies at `output`'s producer.
struct BufferReuse {
  const ir::Value *output = nullptr;
  const ir::Value *operand = nullptr;
  ReuseKind kind = ReuseKind::InPlace;
};

/// One region of the arena: a value and the values that took its buffer over in turn.
struct PlannedBuffer {
  std::vector<const ir::Value *> values; // in order of definition; at most one live at a time
  int64_t bytes = 0;                     // aligned size
  int64_t offset = 0;
  int64_t def = 0, lastUse = 0; // union of the values' intervals, in steps
};

struct MemoryPlan {
  int64_t arenaBytes = 0;
  /// The largest total of aligned bytes live at one step, with reused buffers counted once:
  /// no placement of these buffers can use less.
  int64_t lowerBoundBytes = 0;
  /// Every intermediate in its own region: the sum of their aligned sizes.
  int64_t naiveBytes = 0;
  int64_t alignment = 64;
  /// The offset of every intermediate. Keyed by pointer: for lookup only; iterate `buffers`
  /// for a deterministic order.
  std::map<const ir::Value *, int64_t> offsets;
  /// The arena's regions, in order of their first value's definition.
  std::vector<PlannedBuffer> buffers;
  /// In node order.
  std::vector<BufferReuse> reuses;

  /// The value's offset, or -1 when it is not in the arena.
  int64_t offsetOf(const ir::Value *value) const;
};

/// Plans every intermediate of `graph` into one arena: liveness, in-place and view merging,
/// then offsets greedy by size with best fit. Throws kiln::Error for a bad alignment or an
/// arena past int64.
MemoryPlan planMemory(const ir::Graph &graph, const PlanOptions &options = {});

/// Checks `plan` against `graph` independently of how it was made: every intermediate and
/// nothing else placed, offsets aligned and inside the arena, every listed reuse legal (the
/// operand is the producer's first operand or the one its kernel accumulates into, dies there,
/// has the output's byte size and the same offset), and no two values live at one step sharing
/// a byte unless they form a listed reuse. Throws kiln::Error naming the values at fault.
void verifyPlan(const ir::Graph &graph, const MemoryPlan &plan);

/// The pass plan-memory (see the top of this file).
std::unique_ptr<Pass> createPlanMemoryPass();

/// A summary line, then one line per buffer: its values by printed name (with how each took
/// the buffer over), size, offset and live steps.
std::string formatMemoryPlan(const ir::Graph &graph, const MemoryPlan &plan);

} // namespace kiln::passes
