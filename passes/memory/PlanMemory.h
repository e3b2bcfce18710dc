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
// over an operand that dies at the same node (an in-place reuse or a view alias) and a concat
// laid out over its operands (each a slice of it: passes/memory/ConcatSlices.h), all listed in
// `reuses`. Graph inputs, graph outputs, parameters and constants are not in the arena.
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
  /// reshape, squeeze, unsqueeze and flatten alias their input (an intermediate of the same
  /// byte size), so that they cost no copy and no bytes: under the same condition the view
  /// takes the buffer over; when the input is still read later (or a concat laid out over it
  /// is), the view shares its bytes, which then stay until the view's last use. On by default;
  /// codegen must then emit these views as no-ops rather than as kernels.
  bool aliasViews = true;
  /// A concat whose operands can be contiguous slices of its result (passes/memory/ConcatSlices.h)
  /// gets them placed there, when no operand is already a slice elsewhere: their producers
  /// write into the concat's buffer, and codegen runs no kernel for the concat.
  bool concatSlices = true;
  /// Every size is rounded up to, and every offset is a multiple of, this many bytes (a power
  /// of two; 64 is a cache line and the widest vector load).
  int64_t alignment = 64;
};

enum class ReuseKind { InPlace, View, ConcatSlice };

/// InPlace: `output` is written into the buffer of `operand`, which dies at `output`'s
/// producer. View: `output` is `operand`'s bytes under another shape; when `operand` is read
/// later, its bytes stay while `output` is live. ConcatSlice: `operand`, an operand of the concat `output`, lies `offset` bytes
/// into `output`'s bytes, which are its operands' bytes: the concat runs no kernel, and each
/// operand's bytes stay as they are while the concat is live.
struct BufferReuse {
  const ir::Value *output = nullptr;
  const ir::Value *operand = nullptr;
  ReuseKind kind = ReuseKind::InPlace;
  int64_t offset = 0; // ConcatSlice only
};

/// One region of the arena: a value and the values that took its buffer over in turn, or a
/// concat laid out over its operands and the views of it. A concat's operands' buffers lie
/// inside its buffer (`parent`), and a later concat over some of the same operands may lie in
/// the same buffer too (DenseNet: every concat of a block is a prefix of the block's last).
struct PlannedBuffer {
  /// In order of definition; at most one holding its own bytes live at a time (views share
  /// their operand's bytes; a concat's are its operands').
  std::vector<const ir::Value *> values;
  int64_t bytes = 0;                     // aligned size
  int64_t offset = 0;
  /// In steps: the values' intervals, extended for a concat's operand to the last step that
  /// reads a concat laid out over it; for a buffer with others inside, theirs too.
  int64_t def = 0, lastUse = 0;
  /// The buffer (an index into MemoryPlan::buffers) this one lies inside, or -1 for a region
  /// of the arena of its own. `offset` is then the parent's offset + offsetInParent.
  int parent = -1;
  int64_t offsetInParent = 0;
};

struct MemoryPlan {
  int64_t arenaBytes = 0;
  /// The largest total of aligned bytes live at one step, with reused buffers counted once and
  /// a buffer inside another counted with it: no placement of these buffers can use less.
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
  /// Whether `value` is a concat laid out over its operands (ConcatSlice reuses): its bytes
  /// are theirs, so no kernel computes it.
  bool isConcatInPlace(const ir::Value *value) const;
};

/// Plans every intermediate of `graph` into one arena: liveness, in-place, view and concat
/// merging, then offsets greedy by size with best fit. Throws kiln::Error for a bad alignment or an
/// arena past int64.
MemoryPlan planMemory(const ir::Graph &graph, const PlanOptions &options = {});

/// Checks `plan` against `graph` independently of how it was made: every intermediate and
/// nothing else placed, offsets aligned and inside the arena, every listed reuse legal (an
/// in-place or view operand is the producer's first operand or the one its kernel accumulates
/// into, dies there with no concat laid out over it still to be read, has the output's byte
/// size and the same offset; a concat's slices are all its operands, each at its byte offset
/// inside it, under the conditions of concatMayBeSlices), and no two values that hold bytes
/// (all but concats laid out over their operands, and views of them) share a byte while both
/// are live (an operand of such a concat until the concat's last use too), unless they form a
/// listed in-place or view reuse. Throws kiln::Error naming the values at fault.
void verifyPlan(const ir::Graph &graph, const MemoryPlan &plan);

/// The pass plan-memory (see the top of this file).
std::unique_ptr<Pass> createPlanMemoryPass();

/// A summary line, then one line per buffer: its values by printed name (with how each took
/// the buffer over), size, offset and live steps; a buffer inside another follows it,
/// indented, with its offset inside it.
std::string formatMemoryPlan(const ir::Graph &graph, const MemoryPlan &plan);

} // namespace kiln::passes
