// Memory planning, in stages:
//   1. liveness (passes/memory/Liveness.h): an interval of steps per intermediate;
//   2. buffers: walking the intermediates in order of definition,
//      - a concat whose operands can be its slices (passes/memory/ConcatSlices.h) gets a buffer
//        of its own with each operand's buffer inside it at the operand's byte offset; when some
//        operands already lie inside another concat's buffer (DenseNet: each layer's concat
//        repeats the block's earlier operands), the concat lies there too, at the place they
//        fix, provided the rest can join it without covering bytes held by anything else;
//      - otherwise an output joins the buffer of its producer's first operand when the op may
//        write over it (kInPlace, or a view when PlanOptions::aliasViews), or of the operand a
//        kernel accumulates into (passes/fusion/AccumulatedOperand.h), and that operand dies at
//        this node with the same byte size, no concat laid out over it is read later, and it is
//        not itself such a concat: the output takes the buffer over. Since the operand is dead
//        after this step, a buffer never holds two live values, and this merging never raises
//        the lower bound (at that step both were live);
//      - a view whose operand is still needed (read later, read through a concat, or a concat
//        itself) shares the operand's bytes without taking them over: the operand's bytes stay
//        until the view's last use (as the bytes of a view of a live value must, wherever it
//        lies), and nothing is ever written over a value that holds no bytes of its own. The
//        concat merging may raise the lower bound, a buffer being held from its first
//        operand's definition;
//   3. the bounds: the lower bound is the peak of live aligned bytes over steps (a sweep over
//      interval ends) of the buffers of their own, naive is the sum of all intermediates'
//      aligned sizes;
//   4. offsets, greedy by size with best fit (the planner of TFLite's "greedy by size"
//      arena): buffers of their own largest first; each goes into the smallest gap, between
//      the buffers already placed whose intervals overlap its own, that fits it, or else just
//      above the highest of them. Every placement ends at most at the sum of the sizes placed
//      so far, so arena <= naive. Cost O(buffers^2), fine for graphs of tens of thousands of
//      kernels. A buffer inside another then takes its offset from it.
#include "passes/memory/PlanMemory.h"

#include <algorithm>
#include <numeric>
#include <optional>
#include <unordered_map>

#include <fmt/format.h>

#include "core/Error.h"
#include "core/ShapeMath.h"
#include "ir/Printer.h"
#include "passes/fusion/AccumulatedOperand.h"
#include "passes/memory/ConcatSlices.h"
#include "passes/memory/Liveness.h"
#include "passes/memory/PlanMemoryDetail.h"

namespace kiln::passes {

namespace detail {

// Byte offsets and sizes are checked (core/ShapeMath.h): an arena past int64 is an error.
int64_t checkedAdd(int64_t a, int64_t b) { return kiln::checkedAdd(a, b, "memory plan: arena bytes"); }

int64_t alignUp(int64_t bytes, int64_t alignment) {
  return checkedAdd(bytes, alignment - 1) / alignment * alignment;
}

int64_t valueBytes(const ir::Value *value) {
  return static_cast<int64_t>(value->type().byteSize());
}

bool isViewOp(ir::OpKind op) {
  return op == ir::OpKind::Reshape || op == ir::OpKind::Squeeze || op == ir::OpKind::Unsqueeze ||
         op == ir::OpKind::Flatten;
}

std::vector<size_t> bufferTreeOrder(const MemoryPlan &plan) {
  const std::vector<PlannedBuffer> &buffers = plan.buffers;
  std::vector<std::vector<size_t>> inside(buffers.size());
  std::vector<size_t> order, stack;
  for (size_t b = buffers.size(); b-- > 0;) {
    if (buffers[b].parent >= 0 && static_cast<size_t>(buffers[b].parent) < buffers.size())
      inside[static_cast<size_t>(buffers[b].parent)].push_back(b);
    else
      stack.push_back(b);
  }
  // `stack` and each `inside` list hold plan order reversed; popping then yields it forwards.
  for (std::vector<size_t> &children : inside)
    std::stable_sort(children.begin(), children.end(), [&](size_t a, size_t b) {
      return buffers[a].offsetInParent > buffers[b].offsetInParent;
    });
  while (!stack.empty()) {
    size_t b = stack.back();
    stack.pop_back();
    order.push_back(b);
    stack.insert(stack.end(), inside[b].begin(), inside[b].end());
  }
  return order;
}

} // namespace detail

namespace {

using detail::alignUp;
using detail::checkedAdd;
using detail::valueBytes;

/// The operand whose buffer `value` may take over under `options` (its producer's first
/// operand, or the one a kernel accumulates into), and how; nullopt when none. The operand
/// must still be checked to die there with the same size.
std::optional<std::pair<const ir::Value *, ReuseKind>> reuseFor(const ir::Value *value, const PlanOptions &options) {
  const ir::Node *producer = value->producer();
  if (producer == nullptr || producer->numOutputs() != 1 || producer->numInputs() == 0)
    return std::nullopt;
  if (options.inPlace && (ir::opTraits(producer->op()).flags & ir::kInPlace))
    return std::make_pair(producer->input(0), ReuseKind::InPlace);
  if (options.aliasViews && detail::isViewOp(producer->op()))
    return std::make_pair(producer->input(0), ReuseKind::View);
  if (options.inPlace && producer->op() == ir::OpKind::Kernel)
    if (const int operand = accumulatedOperand(*producer); operand >= 0)
      return std::make_pair(producer->input(operand), ReuseKind::InPlace);
  return std::nullopt;
}

/// Stage 2: groups the intermediates into buffers, recording each reuse. Values are named by
/// their index in liveness.intervals(). A value *holds* its bytes unless it is a concat laid
/// out over its operands, or a view of one: those are made of the bytes of their *atoms*, the
/// holding values they were laid out over, which must keep them until the concat's last use.
class BufferMerger {
public:
  BufferMerger(const ir::Graph &graph, const Liveness &liveness, const PlanOptions &options, MemoryPlan &plan)
      : graph_(graph), liveness_(liveness), options_(options), plan_(plan) {
    size_t n = liveness.intervals().size();
    bufferOf_.resize(n);
    atoms_.resize(n);
    heldUntil_.assign(n, -1);
  }

  void run() {
    const auto &intervals = liveness_.intervals();
    for (size_t i = 0; i < intervals.size(); ++i) {
      if (options_.concatSlices && layOutConcat(i))
        continue;
      if (takeOperandBuffer(i))
        continue;
      newBuffer(i, /*holds=*/true);
    }
    finishIntervals();
  }

private:
  size_t indexOf(const ir::Value *value) const {
    const LiveInterval *interval = liveness_.find(value);
    return static_cast<size_t>(interval - liveness_.intervals().data());
  }
  const LiveInterval &interval(size_t i) const { return liveness_.intervals()[i]; }
  PlannedBuffer &buffer(size_t b) { return plan_.buffers[b]; }

  size_t newBuffer(size_t i, bool holds) {
    PlannedBuffer created;
    created.values = {interval(i).value};
    created.bytes = alignUp(valueBytes(interval(i).value), options_.alignment);
    bufferOf_[i] = plan_.buffers.size();
    holds_.push_back(holds);
    holdersInside_.emplace_back();
    plan_.buffers.push_back(std::move(created));
    if (holds)
      atoms_[i] = {i};
    return bufferOf_[i];
  }

  size_t rootOf(size_t b) const {
    while (plan_.buffers[b].parent >= 0)
      b = static_cast<size_t>(plan_.buffers[b].parent);
    return b;
  }
  int64_t offsetInRoot(size_t b) const {
    int64_t offset = 0;
    for (; plan_.buffers[b].parent >= 0; b = static_cast<size_t>(plan_.buffers[b].parent))
      offset += plan_.buffers[b].offsetInParent;
    return offset;
  }
  /// Whether bytes [begin, end) of root `root` meet a buffer inside it that holds bytes.
  bool meetsHolder(size_t root, int64_t begin, int64_t end) const {
    for (size_t b : holdersInside_[root]) {
      int64_t start = offsetInRoot(b);
      if (start < end && begin < start + plan_.buffers[b].bytes)
        return true;
    }
    return false;
  }
  /// Root buffer `b` (with what lies inside it) goes inside `parent`.
  void putInside(size_t b, size_t parent, int64_t offset) {
    buffer(b).parent = static_cast<int>(parent);
    buffer(b).offsetInParent = offset;
    size_t root = rootOf(parent);
    if (holds_[b])
      holdersInside_[root].push_back(b);
    holdersInside_[root].insert(holdersInside_[root].end(), holdersInside_[b].begin(), holdersInside_[b].end());
    holdersInside_[b].clear();
  }

  /// The concat at interval i, laid out over its operands if it can be; false when it cannot.
  bool layOutConcat(size_t i) {
    const ir::Node *concat = interval(i).value->producer();
    if (concat->op() != ir::OpKind::Concat || !concatMayBeSlices(graph_, *concat, options_.alignment))
      return false;
    const std::vector<int64_t> offsets = *concatSliceOffsets(*concat);
    const size_t count = concat->numInputs();
    // An operand whose buffer is one of its own, of its size, can move anywhere; any other
    // already lies inside a root buffer, at a place that fixes where the concat must go.
    std::vector<size_t> operands(count);
    std::vector<bool> movable(count);
    std::optional<size_t> root;
    for (size_t k = 0; k < count; ++k) {
      operands[k] = indexOf(concat->input(k));
      const size_t b = bufferOf_[operands[k]];
      movable[k] = buffer(b).parent < 0 && buffer(b).bytes == alignUp(valueBytes(concat->input(k)), options_.alignment);
      if (!movable[k] && !root)
        root = rootOf(b);
    }
    int64_t base = 0;
    bool baseKnown = false;
    for (size_t k = 0; k < count; ++k) {
      const size_t b = bufferOf_[operands[k]];
      if (movable[k] && !(root && b == *root)) // the root itself stays where it is
        continue;
      movable[k] = false;
      const int64_t at = offsetInRoot(b) - offsets[k];
      if (rootOf(b) != *root || (baseKnown && at != base))
        return false;
      base = at;
      baseKnown = true;
    }
    if (base < 0)
      return false;
    if (root)
      for (size_t k = 0; k < count; ++k)
        if (movable[k] && meetsHolder(*root, base + offsets[k], base + offsets[k] + buffer(bufferOf_[operands[k]]).bytes))
          return false;

    // Case A, no operand placed yet: a new root buffer, each operand's inside it. Case B: the
    // concat lies in the root of the placed operands, at the offset they fix, and so do the rest.
    const size_t own = newBuffer(i, /*holds=*/false);
    const size_t parent = root ? *root : own;
    const int64_t shift = root ? base : 0;
    if (root) {
      putInside(own, *root, base);
      buffer(*root).bytes = std::max(buffer(*root).bytes, checkedAdd(base, buffer(own).bytes));
    }
    for (size_t k = 0; k < count; ++k) {
      if (movable[k])
        putInside(bufferOf_[operands[k]], parent, shift + offsets[k]);
      for (size_t atom : atoms_[operands[k]])
        atoms_[i].push_back(atom);
      plan_.reuses.push_back({interval(i).value, concat->input(k), ReuseKind::ConcatSlice, offsets[k]});
    }
    hold(i);
    return true;
  }

  /// Atoms of value i keep their bytes until i's last use.
  void hold(size_t i) {
    for (size_t atom : atoms_[i])
      heldUntil_[atom] = std::max(heldUntil_[atom], interval(i).lastUse);
  }

  /// Whether value i holds its bytes (else it is made of its atoms' bytes).
  bool holdsBytes(size_t i) const { return atoms_[i].size() == 1 && atoms_[i][0] == i; }

  /// In place over an operand dying here, or as a view; false when it cannot. A view whose
  /// operand is read later (or holds bytes a concat still reads, or holds none) shares the
  /// operand's bytes without holding them: it is made of the operand's atoms, which keep them
  /// until its last use. No kernel writes a view, so sharing is always safe.
  bool takeOperandBuffer(size_t i) {
    const ir::Value *value = interval(i).value;
    const auto reuse = reuseFor(value, options_);
    if (!reuse)
      return false;
    const auto [operand, kind] = *reuse;
    const LiveInterval *operandInterval = liveness_.find(operand);
    if (!operandInterval || valueBytes(operand) != valueBytes(value))
      return false;
    const size_t u = indexOf(operand);
    const bool takesOver = operandInterval->lastUse == interval(i).def && holdsBytes(u) && heldUntil_[u] < interval(i).def;
    if (!takesOver && kind != ReuseKind::View)
      return false;
    // Intervals are in definition order and the operand is defined earlier, so its buffer is
    // already known.
    const size_t b = bufferOf_[u];
    buffer(b).values.push_back(value);
    bufferOf_[i] = b;
    if (takesOver) {
      atoms_[i] = {i};
    } else {
      atoms_[i] = atoms_[u];
      hold(i);
    }
    plan_.reuses.push_back({value, operand, kind, 0});
    return true;
  }

  /// Each buffer's steps: its values', a held atom's until the hold ends, and a root's
  /// everything inside it.
  void finishIntervals() {
    std::vector<bool> seen(plan_.buffers.size(), false);
    for (size_t i = 0; i < bufferOf_.size(); ++i) {
      PlannedBuffer &b = buffer(bufferOf_[i]);
      int64_t last = std::max(interval(i).lastUse, heldUntil_[i]);
      if (!seen[bufferOf_[i]]) {
        seen[bufferOf_[i]] = true;
        b.def = interval(i).def;
        b.lastUse = last;
      }
      b.def = std::min(b.def, interval(i).def);
      b.lastUse = std::max(b.lastUse, last);
    }
    for (size_t b = 0; b < plan_.buffers.size(); ++b)
      for (int p = buffer(b).parent; p >= 0; p = buffer(static_cast<size_t>(p)).parent) {
        buffer(static_cast<size_t>(p)).def = std::min(buffer(static_cast<size_t>(p)).def, buffer(b).def);
        buffer(static_cast<size_t>(p)).lastUse = std::max(buffer(static_cast<size_t>(p)).lastUse, buffer(b).lastUse);
      }
  }

  const ir::Graph &graph_;
  const Liveness &liveness_;
  const PlanOptions &options_;
  MemoryPlan &plan_;
  std::vector<size_t> bufferOf_;           // each intermediate's buffer
  std::vector<std::vector<size_t>> atoms_; // the holding values whose bytes it is
  std::vector<int64_t> heldUntil_;         // a holder's last step read through a concat, or -1
  std::vector<bool> holds_;                // by buffer: its values hold bytes
  std::vector<std::vector<size_t>> holdersInside_; // by root buffer: the holding buffers inside it
};

/// Stage 3: the peak over steps of the bytes of live buffers of their own.
int64_t peakLiveBytes(const std::vector<PlannedBuffer> &buffers, size_t numSteps) {
  std::vector<int64_t> delta(numSteps + 1, 0);
  for (const PlannedBuffer &buffer : buffers) {
    if (buffer.parent >= 0)
      continue;
    delta[static_cast<size_t>(buffer.def)] += buffer.bytes;
    delta[static_cast<size_t>(buffer.lastUse) + 1] -= buffer.bytes;
  }
  int64_t live = 0, peak = 0;
  for (size_t step = 0; step < numSteps; ++step) {
    live = checkedAdd(live, delta[step]);
    peak = std::max(peak, live);
  }
  return peak;
}

bool overlapInTime(const PlannedBuffer &a, const PlannedBuffer &b) {
  return a.def <= b.lastUse && b.def <= a.lastUse;
}

/// Stage 4: greedy by size, best fit, for the buffers of their own; then the ones inside
/// others. Returns the arena size.
int64_t assignOffsets(std::vector<PlannedBuffer> &buffers) {
  std::vector<size_t> order;
  for (size_t b = 0; b < buffers.size(); ++b)
    if (buffers[b].parent < 0)
      order.push_back(b);
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
    arenaBytes = std::max(arenaBytes, checkedAdd(buffer.offset, buffer.bytes));
    auto position = std::upper_bound(placedByOffset.begin(), placedByOffset.end(), buffer.offset,
                                     [&](int64_t offset, size_t other) { return offset < buffers[other].offset; });
    placedByOffset.insert(position, index);
  }
  for (PlannedBuffer &buffer : buffers) {
    int64_t offset = 0;
    const PlannedBuffer *at = &buffer;
    for (; at->parent >= 0; at = &buffers[static_cast<size_t>(at->parent)])
      offset += at->offsetInParent;
    buffer.offset = at->offset + offset;
  }
  return arenaBytes;
}

} // namespace

int64_t MemoryPlan::offsetOf(const ir::Value *value) const {
  auto it = offsets.find(value);
  return it == offsets.end() ? -1 : it->second;
}

bool MemoryPlan::isConcatInPlace(const ir::Value *value) const {
  return std::any_of(reuses.begin(), reuses.end(), [&](const BufferReuse &reuse) {
    return reuse.output == value && reuse.kind == ReuseKind::ConcatSlice;
  });
}

MemoryPlan planMemory(const ir::Graph &graph, const PlanOptions &options) {
  if (options.alignment <= 0 || (options.alignment & (options.alignment - 1)) != 0)
    fail("memory plan: alignment must be a positive power of two, got {}", options.alignment);

  Liveness liveness = computeLiveness(graph);
  MemoryPlan plan;
  plan.alignment = options.alignment;
  BufferMerger(graph, liveness, options, plan).run();

  for (const LiveInterval &interval : liveness.intervals())
    plan.naiveBytes = checkedAdd(plan.naiveBytes, alignUp(valueBytes(interval.value), options.alignment));
  plan.lowerBoundBytes = peakLiveBytes(plan.buffers, liveness.steps().size());

  plan.arenaBytes = assignOffsets(plan.buffers);
  for (const PlannedBuffer &buffer : plan.buffers)
    for (const ir::Value *value : buffer.values)
      plan.offsets.emplace(value, buffer.offset);
  return plan;
}

namespace {

/// "(in place)", "(view)", "(concat over its operands)": how a value took its place.
std::string reuseNote(ReuseKind kind) {
  switch (kind) {
  case ReuseKind::InPlace: return " (in place)";
  case ReuseKind::View: return " (view)";
  case ReuseKind::ConcatSlice: return " (concat over its operands)";
  }
  return "";
}

} // namespace

std::string formatMemoryPlan(const ir::Graph &graph, const MemoryPlan &plan) {
  auto names = ir::printedValueNames(graph);
  auto nameOf = [&](const ir::Value *value) {
    auto name = names.find(value);
    return "%" + (name == names.end() ? std::string("?") : name->second);
  };
  std::unordered_map<const ir::Value *, ReuseKind> reuseKind;
  for (const BufferReuse &reuse : plan.reuses)
    reuseKind.emplace(reuse.output, reuse.kind);

  std::string out = fmt::format("memory plan: arena {} bytes, lower bound {} bytes, naive {} bytes, alignment {}\n",
                                plan.arenaBytes, plan.lowerBoundBytes, plan.naiveBytes, plan.alignment);
  for (size_t b : detail::bufferTreeOrder(plan)) {
    const PlannedBuffer &buffer = plan.buffers[b];
    std::vector<std::string> members;
    for (const ir::Value *value : buffer.values) {
      auto kind = reuseKind.find(value);
      members.push_back(nameOf(value) + (kind == reuseKind.end() ? "" : reuseNote(kind->second)));
    }
    int depth = 0;
    for (int p = buffer.parent; p >= 0; p = plan.buffers[static_cast<size_t>(p)].parent)
      ++depth;
    std::string inside;
    if (buffer.parent >= 0)
      inside = fmt::format(" (+{} in {})", buffer.offsetInParent,
                           nameOf(plan.buffers[static_cast<size_t>(buffer.parent)].values.front()));
    out += fmt::format("{:{}}{}: {} bytes at offset {}{}, steps {}..{}\n", "", 2 + 2 * depth, fmt::join(members, ", "),
                       buffer.bytes, buffer.offset, inside, buffer.def, buffer.lastUse);
  }
  return out;
}

// The pass: the default options (in-place reuse, view aliasing and concat slices on, 64-byte
// alignment), the plan left for codegen, and the arena against its bounds, so that --stats
// shows how close the packing is to the lower bound, and how many concats cost no copy.
namespace {

class PlanMemoryPass final : public Pass {
public:
  std::string_view name() const override { return "plan-memory"; }

  bool run(ir::Graph &graph, PassContext &context) override {
    MemoryPlan plan = planMemory(graph);
    context.stats.add("arena_bytes", plan.arenaBytes);
    context.stats.add("lower_bound_bytes", plan.lowerBoundBytes);
    context.stats.add("naive_bytes", plan.naiveBytes);
    int64_t concats = 0;
    for (const ir::Node *node : graph.nodes())
      concats += node->op() == ir::OpKind::Concat && plan.isConcatInPlace(node->output());
    if (concats > 0)
      context.stats.add("concats_in_place", concats);
    context.analyses["memory-plan"] = std::move(plan);
    return false;
  }
};

} // namespace

std::unique_ptr<Pass> createPlanMemoryPass() { return std::make_unique<PlanMemoryPass>(); }

} // namespace kiln::passes
