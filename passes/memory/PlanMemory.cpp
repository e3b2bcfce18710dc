// Memory planning, in stages:
//   1. liveness (passes/memory/Liveness.h): an interval of steps per intermediate;
//   2. buffers: walking the intermediates in order of definition, an output joins the buffer
//      of its producer's first operand when the op may write over it (kInPlace, or a view
//      when PlanOptions::aliasViews), or of the operand a kernel accumulates into
//      (passes/fusion/AccumulatedOperand.h), and that operand dies at this node with the same byte
//      size; the buffer's interval becomes the union. Since the operand is dead after this
//      step, a buffer never holds two live values, and merging never raises the lower bound
//      (at that step both were live);
//   3. the bounds: the lower bound is the peak of live aligned bytes over steps (a sweep over
//      interval ends), naive is the sum of all intermediates' aligned sizes;
//   4. offsets, greedy by size with best fit (the planner of TFLite's "greedy by size"
//      arena): buffers largest first; each goes into the smallest gap, between the buffers
//      already placed whose intervals overlap its own, that fits it, or else just above the
//      highest of them. Every placement ends at most at the sum of the sizes placed so far,
//      so arena <= naive. Cost O(buffers^2), fine for graphs of tens of thousands of kernels.
#include "passes/memory/PlanMemory.h"

#include <algorithm>
#include <numeric>
#include <optional>
#include <set>
#include <unordered_map>

#include <fmt/format.h>

#include "core/Error.h"
#include "core/ShapeMath.h"
#include "ir/Printer.h"
#include "passes/fusion/AccumulatedOperand.h"
#include "passes/memory/Liveness.h"

namespace kiln::passes {

namespace {

/// Byte offsets and sizes are checked (core/ShapeMath.h): an arena past int64 is an error.
constexpr std::string_view kArenaBytes = "memory plan: arena bytes";

int64_t alignUp(int64_t bytes, int64_t alignment) {
  return checkedAdd(bytes, alignment - 1, kArenaBytes) / alignment * alignment;
}

int64_t valueBytes(const ir::Value *value) {
  return static_cast<int64_t>(value->type().byteSize());
}

bool isViewOp(ir::OpKind op) {
  return op == ir::OpKind::Reshape || op == ir::OpKind::Squeeze || op == ir::OpKind::Unsqueeze ||
         op == ir::OpKind::Flatten;
}

/// The operand whose buffer `value` may take over under `options` (its producer's first
/// operand, or the one a kernel accumulates into), and how; nullopt when none. The operand
/// must still be checked to die there with the same size.
std::optional<std::pair<const ir::Value *, ReuseKind>> reuseFor(const ir::Value *value, const PlanOptions &options) {
  const ir::Node *producer = value->producer();
  if (producer == nullptr || producer->numOutputs() != 1 || producer->numInputs() == 0)
    return std::nullopt;
  if (options.inPlace && (ir::opTraits(producer->op()).flags & ir::kInPlace))
    return std::make_pair(producer->input(0), ReuseKind::InPlace);
  if (options.aliasViews && isViewOp(producer->op()))
    return std::make_pair(producer->input(0), ReuseKind::View);
  if (options.inPlace && producer->op() == ir::OpKind::Kernel)
    if (const int operand = accumulatedOperand(*producer); operand >= 0)
      return std::make_pair(producer->input(operand), ReuseKind::InPlace);
  return std::nullopt;
}

/// Stage 2: groups the intermediates into buffers, recording each reuse.
void mergeReuses(const Liveness &liveness, const PlanOptions &options, std::vector<PlannedBuffer> &buffers,
                 std::vector<BufferReuse> &reuses) {
  const auto &intervals = liveness.intervals();
  std::vector<size_t> bufferOf(intervals.size()); // each intermediate's buffer, by interval index
  for (size_t i = 0; i < intervals.size(); ++i) {
    const LiveInterval &interval = intervals[i];
    const ir::Value *value = interval.value;
    if (const auto reuse = reuseFor(value, options)) {
      const auto [operand, kind] = *reuse;
      const LiveInterval *operandInterval = liveness.find(operand);
      if (operandInterval && operandInterval->lastUse == interval.def &&
          valueBytes(operand) == valueBytes(value)) {
        // Intervals are in definition order and the operand is defined earlier, so its buffer
        // index is already known.
        size_t buffer = bufferOf[static_cast<size_t>(operandInterval - intervals.data())];
        buffers[buffer].values.push_back(value);
        buffers[buffer].lastUse = std::max(buffers[buffer].lastUse, interval.lastUse);
        bufferOf[i] = buffer;
        reuses.push_back({value, operand, kind});
        continue;
      }
    }
    PlannedBuffer buffer;
    buffer.values = {value};
    buffer.def = interval.def;
    buffer.lastUse = interval.lastUse;
    bufferOf[i] = buffers.size();
    buffers.push_back(std::move(buffer));
  }
}

/// Stage 3: the peak over steps of the bytes of live buffers.
int64_t peakLiveBytes(const std::vector<PlannedBuffer> &buffers, size_t numSteps) {
  std::vector<int64_t> delta(numSteps + 1, 0);
  for (const PlannedBuffer &buffer : buffers) {
    delta[static_cast<size_t>(buffer.def)] += buffer.bytes;
    delta[static_cast<size_t>(buffer.lastUse) + 1] -= buffer.bytes;
  }
  int64_t live = 0, peak = 0;
  for (size_t step = 0; step < numSteps; ++step) {
    live = checkedAdd(live, delta[step], kArenaBytes);
    peak = std::max(peak, live);
  }
  return peak;
}

bool overlapInTime(const PlannedBuffer &a, const PlannedBuffer &b) {
  return a.def <= b.lastUse && b.def <= a.lastUse;
}

/// Stage 4: greedy by size, best fit. Returns the arena size.
int64_t assignOffsets(std::vector<PlannedBuffer> &buffers) {
  std::vector<size_t> order(buffers.size());
  std::iota(order.begin(), order.end(), 0);
  // Ties go to the earlier buffer, so the plan does not depend on the sort's stability.
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return buffers[a].bytes != buffers[b].bytes ? buffers[a].bytes > buffers[b].bytes : a < b;
  });

  std::vector<size_t> placedByOffset; // placed buffers, sorted by offset
  int64_t arenaBytes = 0;
  for (size_t index : order) {
    PlannedBuffer &buffer = buffers[index];
    if (buffer.bytes == 0) { // occupies nothing; any aligned offset will do
      buffer.offset = 0;
      continue;
    }
    int64_t bestOffset = -1, bestGap = INT64_MAX, lowestFree = 0;
    for (size_t other : placedByOffset) {
      const PlannedBuffer &placed = buffers[other];
      if (!overlapInTime(buffer, placed))
        continue;
      int64_t gap = placed.offset - lowestFree;
      if (gap >= buffer.bytes && gap < bestGap) {
        bestGap = gap;
        bestOffset = lowestFree;
      }
      lowestFree = std::max(lowestFree, placed.offset + placed.bytes);
    }
    buffer.offset = bestOffset >= 0 ? bestOffset : lowestFree;
    arenaBytes = std::max(arenaBytes, checkedAdd(buffer.offset, buffer.bytes, kArenaBytes));
    auto position = std::upper_bound(placedByOffset.begin(), placedByOffset.end(), buffer.offset,
                                     [&](int64_t offset, size_t other) { return offset < buffers[other].offset; });
    placedByOffset.insert(position, index);
  }
  return arenaBytes;
}

} // namespace

int64_t MemoryPlan::offsetOf(const ir::Value *value) const {
  auto it = offsets.find(value);
  return it == offsets.end() ? -1 : it->second;
}

MemoryPlan planMemory(const ir::Graph &graph, const PlanOptions &options) {
  if (options.alignment <= 0 || (options.alignment & (options.alignment - 1)) != 0)
    fail("memory plan: alignment must be a positive power of two, got {}", options.alignment);

  Liveness liveness = computeLiveness(graph);
  MemoryPlan plan;
  plan.alignment = options.alignment;
  mergeReuses(liveness, options, plan.buffers, plan.reuses);

  for (const LiveInterval &interval : liveness.intervals())
    plan.naiveBytes = checkedAdd(plan.naiveBytes, alignUp(valueBytes(interval.value), options.alignment), kArenaBytes);
  // Members of one buffer have equal byte sizes, so the first one's size is the buffer's.
  for (PlannedBuffer &buffer : plan.buffers)
    buffer.bytes = alignUp(valueBytes(buffer.values.front()), options.alignment);
  plan.lowerBoundBytes = peakLiveBytes(plan.buffers, liveness.steps().size());

  plan.arenaBytes = assignOffsets(plan.buffers);
  for (const PlannedBuffer &buffer : plan.buffers)
    for (const ir::Value *value : buffer.values)
      plan.offsets.emplace(value, buffer.offset);
  return plan;
}

namespace {

/// Stage 3 of verifyPlan: the listed reuses must each be legal; returns them as allowed pairs.
std::set<std::pair<const ir::Value *, const ir::Value *>>
checkReuses(const MemoryPlan &plan, const Liveness &liveness,
            const std::unordered_map<const ir::Value *, std::string> &names) {
  auto name = [&](const ir::Value *value) {
    auto it = names.find(value);
    return it == names.end() ? std::string("a value of another graph") : "%" + it->second;
  };
  std::set<std::pair<const ir::Value *, const ir::Value *>> allowed;
  for (const BufferReuse &reuse : plan.reuses) {
    const LiveInterval *output = liveness.find(reuse.output);
    const LiveInterval *operand = liveness.find(reuse.operand);
    if (!output || !operand)
      fail("memory plan: reuse of {} by {} names a value that is not an intermediate", name(reuse.operand),
           name(reuse.output));
    const ir::Node *producer = reuse.output->producer();
    const int accumulated = producer->op() == ir::OpKind::Kernel ? accumulatedOperand(*producer) : -1;
    const bool intoAccumulated = accumulated >= 0 && producer->input(accumulated) == reuse.operand;
    if (!intoAccumulated && (producer->numInputs() == 0 || producer->input(0) != reuse.operand))
      fail("memory plan: {} reuses {}, which is not the first operand of its {}", name(reuse.output),
           name(reuse.operand), producer->opName());
    bool opAllows = reuse.kind == ReuseKind::InPlace
                        ? intoAccumulated || (ir::opTraits(producer->op()).flags & ir::kInPlace) != 0
                        : isViewOp(producer->op());
    if (!opAllows)
      fail("memory plan: {} cannot reuse {}: {} does not work {}", name(reuse.output), name(reuse.operand),
           producer->opName(), reuse.kind == ReuseKind::InPlace ? "in place" : "as a view");
    if (operand->lastUse != output->def)
      fail("memory plan: {} reuses {}, which is still used at step {} after {} is written at step {}",
           name(reuse.output), name(reuse.operand), operand->lastUse, name(reuse.output), output->def);
    if (valueBytes(reuse.output) != valueBytes(reuse.operand))
      fail("memory plan: {} ({} bytes) reuses {} ({} bytes) of another size", name(reuse.output),
           valueBytes(reuse.output), name(reuse.operand), valueBytes(reuse.operand));
    if (plan.offsetOf(reuse.output) != plan.offsetOf(reuse.operand))
      fail("memory plan: {} reuses {} but is placed at another offset", name(reuse.output), name(reuse.operand));
    allowed.emplace(reuse.output, reuse.operand);
    allowed.emplace(reuse.operand, reuse.output);
  }
  return allowed;
}

} // namespace

// verifyPlan in stages: (1) every intermediate placed, aligned, inside the arena; (2) nothing
// else placed; (3) every listed reuse legal; (4) a sweep over intervals in order of definition,
// keeping the values still live, checks each pair live at one step for shared bytes. Stage 4
// costs O(pairs of values live at one step), fine for tests and debug checks.
void verifyPlan(const ir::Graph &graph, const MemoryPlan &plan) {
  if (plan.alignment <= 0)
    fail("memory plan: alignment must be positive, got {}", plan.alignment);
  auto names = ir::printedValueNames(graph);
  Liveness liveness = computeLiveness(graph);
  const auto &intervals = liveness.intervals();

  std::vector<int64_t> offsets, sizes;
  for (const LiveInterval &interval : intervals) {
    const std::string &name = names.at(interval.value);
    int64_t offset = plan.offsetOf(interval.value);
    int64_t bytes = alignUp(valueBytes(interval.value), plan.alignment);
    if (offset < 0)
      fail("memory plan: intermediate %{} has no offset", name);
    if (offset % plan.alignment != 0)
      fail("memory plan: %{} at offset {} is not aligned to {} bytes", name, offset, plan.alignment);
    if (checkedAdd(offset, bytes, kArenaBytes) > plan.arenaBytes)
      fail("memory plan: %{} ({} bytes at offset {}) ends past the arena of {} bytes", name, bytes, offset,
           plan.arenaBytes);
    offsets.push_back(offset);
    sizes.push_back(bytes);
  }

  if (plan.offsets.size() != intervals.size()) {
    for (const ir::Value *input : graph.inputs())
      if (plan.offsets.count(input))
        fail("memory plan: graph input %{} is placed in the arena", names.at(input));
    for (const ir::Node *node : graph.nodes())
      for (const ir::Value *value : node->outputs())
        if (plan.offsets.count(value) && !liveness.isIntermediate(value))
          fail("memory plan: %{} is placed in the arena but is not an intermediate (a graph output, "
               "parameter or constant)",
               names.at(value));
    fail("memory plan: {} values placed that do not belong to this graph", plan.offsets.size() - intervals.size());
  }

  auto allowed = checkReuses(plan, liveness, names);

  std::vector<size_t> live;
  for (size_t i = 0; i < intervals.size(); ++i) {
    live.erase(std::remove_if(live.begin(), live.end(),
                              [&](size_t j) { return intervals[j].lastUse < intervals[i].def; }),
               live.end());
    for (size_t j : live) {
      int64_t begin = std::max(offsets[i], offsets[j]);
      int64_t end = std::min(offsets[i] + sizes[i], offsets[j] + sizes[j]);
      if (begin < end && !allowed.count({intervals[i].value, intervals[j].value}))
        fail("memory plan: %{} and %{} are both live at step {} and share bytes [{}, {})",
             names.at(intervals[j].value), names.at(intervals[i].value), intervals[i].def, begin, end);
    }
    live.push_back(i);
  }
}

std::string formatMemoryPlan(const ir::Graph &graph, const MemoryPlan &plan) {
  auto names = ir::printedValueNames(graph);
  std::unordered_map<const ir::Value *, ReuseKind> reuseKind;
  for (const BufferReuse &reuse : plan.reuses)
    reuseKind.emplace(reuse.output, reuse.kind);

  std::string out = fmt::format("memory plan: arena {} bytes, lower bound {} bytes, naive {} bytes, alignment {}\n",
                                plan.arenaBytes, plan.lowerBoundBytes, plan.naiveBytes, plan.alignment);
  for (const PlannedBuffer &buffer : plan.buffers) {
    std::vector<std::string> members;
    for (const ir::Value *value : buffer.values) {
      auto name = names.find(value);
      std::string member = "%" + (name == names.end() ? std::string("?") : name->second);
      auto kind = reuseKind.find(value);
      if (kind != reuseKind.end())
        member += kind->second == ReuseKind::InPlace ? " (in place)" : " (view)";
      members.push_back(std::move(member));
    }
    out += fmt::format("  {}: {} bytes at offset {}, steps {}..{}\n", fmt::join(members, ", "), buffer.bytes,
                       buffer.offset, buffer.def, buffer.lastUse);
  }
  return out;
}

// The pass: the default options (in-place reuse and view aliasing on, 64-byte alignment), the
// plan left for codegen, and the arena against its bounds, so that --stats shows how close the
// packing is to the lower bound.
namespace {

class PlanMemoryPass final : public Pass {
public:
  std::string_view name() const override { return "plan-memory"; }

  bool run(ir::Graph &graph, PassContext &context) override {
    MemoryPlan plan = planMemory(graph);
    context.stats.add("arena_bytes", plan.arenaBytes);
    context.stats.add("lower_bound_bytes", plan.lowerBoundBytes);
    context.stats.add("naive_bytes", plan.naiveBytes);
    context.analyses["memory-plan"] = std::move(plan);
    return false;
  }
};

} // namespace

std::unique_ptr<Pass> createPlanMemoryPass() { return std::make_unique<PlanMemoryPass>(); }

} // namespace kiln::passes
