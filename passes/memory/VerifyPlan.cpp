// verifyPlan (passes/memory/PlanMemory.h), independently of how the plan was made, in stages:
//   1. every intermediate placed, aligned, inside the arena;
//   2. nothing else placed;
//   3. every listed reuse legal. A concat whose operands are all listed as its slices, and a
//      view of such a concat, holds no bytes of its own: it is made of its *atoms*, the values
//      holding the bytes it was laid out over, which must keep them until its last use;
//   4. a sweep over the values that hold bytes, in order of definition, keeping those still
//      held (an atom until the last use of everything made of it), checks each pair held at
//      one step for shared bytes, unless the two form a listed in-place or view reuse. Cost
//      O(pairs of values held at one step), fine for tests and debug checks.
#include <algorithm>
#include <map>
#include <set>
#include <unordered_map>

#include "core/Error.h"
#include "ir/Printer.h"
#include "passes/fusion/AccumulatedOperand.h"
#include "passes/memory/ConcatSlices.h"
#include "passes/memory/Liveness.h"
#include "passes/memory/PlanMemory.h"
#include "passes/memory/PlanMemoryDetail.h"

namespace kiln::passes {

namespace {

using detail::alignUp;
using detail::checkedAdd;
using detail::valueBytes;

class PlanChecker {
public:
  PlanChecker(const ir::Graph &graph, const MemoryPlan &plan)
      : graph_(graph), plan_(plan), names_(ir::printedValueNames(graph)), liveness_(computeLiveness(graph)) {
    for (const BufferReuse &reuse : plan.reuses)
      if (reuse.kind == ReuseKind::View)
        views_.emplace(reuse.output, &reuse);
  }

  void run() {
    if (plan_.alignment <= 0)
      fail("memory plan: alignment must be positive, got {}", plan_.alignment);
    checkPlacement();
    checkConcatSlices();
    findAtoms();
    checkReuses();
    checkSharedBytes();
  }

private:
  std::string name(const ir::Value *value) const {
    auto it = names_.find(value);
    return it == names_.end() ? std::string("a value of another graph") : "%" + it->second;
  }
  const LiveInterval &intervalOf(const ir::Value *value) const {
    const LiveInterval *interval = liveness_.find(value);
    if (!interval)
      fail("memory plan: a reuse names {}, which is not an intermediate", name(value));
    return *interval;
  }

  // Stages 1 and 2.
  void checkPlacement() {
    const auto &intervals = liveness_.intervals();
    for (const LiveInterval &interval : intervals) {
      const std::string value = name(interval.value);
      int64_t offset = plan_.offsetOf(interval.value);
      int64_t bytes = alignUp(valueBytes(interval.value), plan_.alignment);
      if (offset < 0)
        fail("memory plan: intermediate {} has no offset", value);
      if (offset % plan_.alignment != 0)
        fail("memory plan: {} at offset {} is not aligned to {} bytes", value, offset, plan_.alignment);
      if (checkedAdd(offset, bytes) > plan_.arenaBytes)
        fail("memory plan: {} ({} bytes at offset {}) ends past the arena of {} bytes", value, bytes, offset,
             plan_.arenaBytes);
    }
    if (plan_.offsets.size() == intervals.size())
      return;
    for (const ir::Value *input : graph_.inputs())
      if (plan_.offsets.count(input))
        fail("memory plan: graph input {} is placed in the arena", name(input));
    for (const ir::Node *node : graph_.nodes())
      for (const ir::Value *value : node->outputs())
        if (plan_.offsets.count(value) && !liveness_.isIntermediate(value))
          fail("memory plan: {} is placed in the arena but is not an intermediate (a graph output, "
               "parameter or constant)",
               name(value));
    fail("memory plan: {} values placed that do not belong to this graph", plan_.offsets.size() - intervals.size());
  }

  // Stage 3, concats: every operand listed once, at its byte offset, where the plan put it.
  void checkConcatSlices() {
    std::map<const ir::Value *, std::vector<const BufferReuse *>> slicesOf; // lookup only
    std::vector<const ir::Value *> concats;                                  // in listed order
    for (const BufferReuse &reuse : plan_.reuses)
      if (reuse.kind == ReuseKind::ConcatSlice) {
        auto &slices = slicesOf[reuse.output];
        if (slices.empty())
          concats.push_back(reuse.output);
        slices.push_back(&reuse);
      }
    for (const ir::Value *concat : concats) {
      intervalOf(concat);
      const ir::Node *node = concat->producer();
      if (node->op() != ir::OpKind::Concat)
        fail("memory plan: {} is laid out over its operands, but its {} is no concat", name(concat), node->opName());
      if (!concatMayBeSlices(graph_, *node, plan_.alignment))
        fail("memory plan: {} cannot be laid out over its operands: not every dim before its axis is 1, or an "
             "operand is no intermediate, is empty, appears twice or starts off the {}-byte alignment",
             name(concat), plan_.alignment);
      const std::vector<int64_t> offsets = *concatSliceOffsets(*node);
      const std::vector<const BufferReuse *> &slices = slicesOf.at(concat);
      for (size_t k = 0; k < node->numInputs(); ++k) {
        const ir::Value *operand = node->input(k);
        auto listed = std::count_if(slices.begin(), slices.end(),
                                    [&](const BufferReuse *slice) { return slice->operand == operand; });
        if (listed != 1)
          fail("memory plan: {} is laid out over its operands, but lists its operand {} {} times", name(concat),
               name(operand), listed);
        const BufferReuse *slice = *std::find_if(slices.begin(), slices.end(),
                                                 [&](const BufferReuse *s) { return s->operand == operand; });
        if (slice->offset != offsets[k])
          fail("memory plan: {} lists its operand {} at byte {}, but it starts at byte {}", name(concat),
               name(operand), slice->offset, offsets[k]);
        if (plan_.offsetOf(operand) != checkedAdd(plan_.offsetOf(concat), offsets[k]))
          fail("memory plan: {} is laid out over its operands, but {} is placed at offset {}, not {} + {}",
               name(concat), name(operand), plan_.offsetOf(operand), plan_.offsetOf(concat), offsets[k]);
      }
      if (slices.size() != node->numInputs())
        fail("memory plan: {} lists a slice that is not its operand", name(concat));
      composite_.insert(concat);
    }
  }

  // Stage 3: the atoms of each value made of others' bytes, and how long each atom is held.
  void findAtoms() {
    for (const LiveInterval &interval : liveness_.intervals()) {
      const ir::Value *value = interval.value;
      std::vector<const ir::Value *> atoms;
      if (composite_.count(value)) {
        for (const ir::Value *operand : value->producer()->inputs()) {
          auto it = atoms_.find(operand);
          if (it == atoms_.end())
            atoms.push_back(operand);
          else
            atoms.insert(atoms.end(), it->second.begin(), it->second.end());
        }
      } else if (const BufferReuse *view = viewOf(value); view && sharesBytes(*view, interval)) {
        composite_.insert(value);
        auto it = atoms_.find(view->operand);
        atoms = it == atoms_.end() ? std::vector<const ir::Value *>{view->operand} : it->second;
      } else {
        continue;
      }
      for (const ir::Value *atom : atoms) {
        auto [it, fresh] = heldUntil_.emplace(atom, std::make_pair(interval.lastUse, value));
        if (!fresh && it->second.first < interval.lastUse)
          it->second = {interval.lastUse, value};
      }
      atoms_[value] = std::move(atoms);
    }
  }

  /// Whether a view shares its operand's bytes rather than taking them over: the operand
  /// holds none (a concat laid out over its operands, or a view of one), is read after the
  /// view is defined, or holds bytes a concat defined before the view still reads then.
  bool sharesBytes(const BufferReuse &view, const LiveInterval &output) const {
    if (composite_.count(view.operand))
      return true;
    const LiveInterval *operand = liveness_.find(view.operand);
    if (operand && operand->lastUse != output.def)
      return true;
    auto held = heldUntil_.find(view.operand);
    return held != heldUntil_.end() && held->second.first >= output.def;
  }

  const BufferReuse *viewOf(const ir::Value *value) const {
    auto it = views_.find(value);
    return it == views_.end() ? nullptr : it->second;
  }

  // Stage 3, in place and views.
  void checkReuses() {
    for (const BufferReuse &reuse : plan_.reuses) {
      if (reuse.kind == ReuseKind::ConcatSlice)
        continue;
      const LiveInterval &output = intervalOf(reuse.output);
      const LiveInterval &operand = intervalOf(reuse.operand);
      const ir::Node *producer = reuse.output->producer();
      const int accumulated = producer->op() == ir::OpKind::Kernel ? accumulatedOperand(*producer) : -1;
      const bool intoAccumulated = accumulated >= 0 && producer->input(accumulated) == reuse.operand;
      if (!intoAccumulated && (producer->numInputs() == 0 || producer->input(0) != reuse.operand))
        fail("memory plan: {} reuses {}, which is not the first operand of its {}", name(reuse.output),
             name(reuse.operand), producer->opName());
      bool opAllows = reuse.kind == ReuseKind::InPlace
                          ? intoAccumulated || (ir::opTraits(producer->op()).flags & ir::kInPlace) != 0
                          : detail::isViewOp(producer->op());
      if (!opAllows)
        fail("memory plan: {} cannot reuse {}: {} does not work {}", name(reuse.output), name(reuse.operand),
             producer->opName(), reuse.kind == ReuseKind::InPlace ? "in place" : "as a view");
      if (valueBytes(reuse.output) != valueBytes(reuse.operand))
        fail("memory plan: {} ({} bytes) reuses {} ({} bytes) of another size", name(reuse.output),
             valueBytes(reuse.output), name(reuse.operand), valueBytes(reuse.operand));
      if (plan_.offsetOf(reuse.output) != plan_.offsetOf(reuse.operand))
        fail("memory plan: {} reuses {} but is placed at another offset", name(reuse.output), name(reuse.operand));
      if (reuse.kind == ReuseKind::View && composite_.count(reuse.output))
        continue; // shares the operand's bytes, which stay (findAtoms): nothing more to check
      if (operand.lastUse != output.def)
        fail("memory plan: {} reuses {}, which is still used at step {} after {} is written at step {}",
             name(reuse.output), name(reuse.operand), operand.lastUse, name(reuse.output), output.def);
      if (reuse.kind == ReuseKind::InPlace && composite_.count(reuse.operand))
        fail("memory plan: {} is written over {}, whose bytes are not its own", name(reuse.output),
             name(reuse.operand));
      if (auto held = heldUntil_.find(reuse.operand); held != heldUntil_.end() && held->second.first >= output.def)
        fail("memory plan: {} reuses {}, whose bytes {} still reads at step {}", name(reuse.output),
             name(reuse.operand), name(held->second.second), held->second.first);
      allowed_.emplace(reuse.output, reuse.operand);
      allowed_.emplace(reuse.operand, reuse.output);
    }
  }

  // Stage 4.
  void checkSharedBytes() {
    struct Held {
      const LiveInterval *interval;
      int64_t until, offset, bytes;
    };
    std::vector<Held> live;
    for (const LiveInterval &interval : liveness_.intervals()) {
      if (composite_.count(interval.value))
        continue;
      Held held{&interval, interval.lastUse, plan_.offsetOf(interval.value),
                alignUp(valueBytes(interval.value), plan_.alignment)};
      if (auto it = heldUntil_.find(interval.value); it != heldUntil_.end())
        held.until = std::max(held.until, it->second.first);
      live.erase(std::remove_if(live.begin(), live.end(), [&](const Held &other) { return other.until < interval.def; }),
                 live.end());
      for (const Held &other : live) {
        int64_t begin = std::max(held.offset, other.offset);
        int64_t end = std::min(held.offset + held.bytes, other.offset + other.bytes);
        if (begin < end && !allowed_.count({interval.value, other.interval->value}))
          fail("memory plan: {} and {} are both live at step {} and share bytes [{}, {})",
               name(other.interval->value), name(interval.value), interval.def, begin, end);
      }
      live.push_back(held);
    }
  }

  const ir::Graph &graph_;
  const MemoryPlan &plan_;
  std::unordered_map<const ir::Value *, std::string> names_;
  Liveness liveness_;
  // Lookup only, never iterated in an order that reaches the output.
  std::map<const ir::Value *, const BufferReuse *> views_; // by output
  std::set<const ir::Value *> composite_;
  std::map<const ir::Value *, std::vector<const ir::Value *>> atoms_;
  std::map<const ir::Value *, std::pair<int64_t, const ir::Value *>> heldUntil_; // step, and who reads it then
  std::set<std::pair<const ir::Value *, const ir::Value *>> allowed_;
};

} // namespace

void verifyPlan(const ir::Graph &graph, const MemoryPlan &plan) { PlanChecker(graph, plan).run(); }

} // namespace kiln::passes
