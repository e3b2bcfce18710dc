// The rules a fusion group must obey; each refusal names its reason (UnfusedReason). The stages
// that propose the merges: passes/fusion/FusionAnalysis.cpp.
//
// The rules, and why:
//  1. Elementwise chains: elementwise ops over one iteration domain (equal element counts) are
//     one loop, producers computed inline per element; a producer also used outside is computed
//     once and written as a further result. A smaller producer reached through a broadcast
//     stays out: it would be recomputed for every element of the larger domain. Siblings that
//     only share an input are not merged (no horizontal fusion): they would share one read, and
//     their kernels stay simpler.
//  2. Contraction epilogues: a matmul or conv takes the elementwise ops over exactly its output
//     shape (bias, activation, residual add, scale, clip); the library kernel applies them to
//     each output tile while it is in cache. Its operands are never computed in the group: the
//     GEMM packs them into tiles and reads each element many times, so an elementwise prologue
//     would be recomputed for every tile. Views are the exception: they fold into the packing
//     as strides (a weight permute, a bias reshape, and a transpose or reshape of a stored value
//     read only by matmuls, where one batched GEMM call can read it: onlyMatMulOperand). One
//     contraction per group (each is one library call), and no reduction (it needs whole rows,
//     an epilogue sees one tile).
//  3. Reductions: reductions over the same axes of the same domain form one row kernel, with
//     the elementwise ops over the rows (a prologue such as (x - mean)^2, consumers such as
//     x - max) and those over the reduced values (rsqrt(var + eps)), computed once per row:
//     softmax and layernorm are one kernel each. Another axis or domain starts a new kernel.
//  4. Movement: inside a group a movement op is index arithmetic on its operand, never stored,
//     so one whose value another kernel reads from memory stays a node: a copy kernel, or, for
//     a reshape, a free view that memory planning aliases. Chains of movement ops that no
//     computing op absorbs merge into one copy. A concat whose operands memory planning can
//     lay out inside its buffer, each written there by a node that stores it anyway
//     (passes/memory/ConcatSlices.h, concatStandsAlone), joins no group: alone it costs
//     nothing, and its readers read one buffer, where in a group every element read would
//     select between its operands (DenseNet's batch norms, an unrolled LSTM's 16 steps and
//     permute), and a copy kernel would write it anyway (Inception-v3's concat and the pad of
//     the next block's average pool wrote the concat twice over). Views of parameters and
//     constants are recomputed as indexing by every group that reads them.
//  5. No cycle: two groups do not merge when a path leaves one and re-enters the other through
//     other kernels: the merged kernel would wait on itself.
//  6. Limits: FusionOptions::maxGroupOps and maxGroupOperands, each a named reason.
//  7. Widened bytes: a cast of u8 or i8 bytes to float (a dequantize_linear) does not join the
//     bytes' producer when another reader reads the bytes from memory anyway (a QDQ residual:
//     the next layer's qconv reads them, the skip connection's add their dequantized value):
//     in the producer's kernel the float value would be stored too, four times as wide, where
//     each reader widens the bytes it loads (ResNet-50's residual adds then read a quarter of
//     the bytes). Bytes read by the cast alone still fuse (the round trip stays in registers).
#include <algorithm>

#include <fmt/ranges.h>

#include "ir/KernelOutline.h"
#include "passes/fusion/Fuser.h"

namespace kiln::passes::fusion {

namespace {

std::string axesText(const std::vector<bool> &reduced) {
  std::vector<size_t> axes;
  for (size_t d = 0; d < reduced.size(); ++d)
    if (reduced[d])
      axes.push_back(d);
  return fmt::format("[{}]", fmt::join(axes, ", "));
}

} // namespace

RowDomain rowDomainOf(const Node &reduction) {
  RowDomain rows;
  rows.input = reduction.input(0)->shape();
  int64_t rank = static_cast<int64_t>(rows.input.size());
  if (reduction.op() == OpKind::ArgMax || reduction.op() == OpKind::ArgMin) {
    rows.reduced.assign(rows.input.size(), false);
    if (rank > 0)
      rows.reduced[normalizeAxis(reduction.attrInt("axis"), rank, "axis")] = true;
  } else {
    const std::vector<int64_t> &axes = reduction.attrInts("axes");
    rows.reduced.assign(rows.input.size(), axes.empty()); // no axes: every dim
    for (int64_t axis : axes)
      rows.reduced[normalizeAxis(axis, rank, "axes")] = true;
  }
  rows.reducedCount = reduction.output(0)->type().numElements();
  return rows;
}

// Opaque ops never fuse: a library kernel (pooling, scatter, top-k) or a composite has no
// per-element form to inline. A contraction's operands are never computed in its group: the
// GEMM or convolution packs each operand into cache-sized tiles and reads every element many
// times, so an elementwise prologue would be recomputed for every tile it lands in; only views
// of parameters and constants (a weight permute, a bias reshape) fold into the packing as
// strides, and those are attached separately.
Verdict Fuser::checkEdge(int producer, int consumer) const {
  auto opaque = [&](int i, UnfusedReason reason) {
    const Node *node = nodes_[i];
    std::string_view why = ir::isComposite(node->op())    ? "is a composite (run decompose first)"
                           : node->op() == OpKind::Kernel ? "is a kernel already"
                                                          : "runs as its own kernel";
    return refuse(reason, fmt::format("{} {}", label(i), why));
  };
  if (isOpaque(producer))
    return opaque(producer, UnfusedReason::ProducerOpaque);
  if (isOpaque(consumer))
    return opaque(consumer, UnfusedReason::ConsumerOpaque);
  for (int i : {producer, consumer})
    if (concatAlone_[i])
      return refuse(UnfusedReason::ConcatInPlace,
                    fmt::format("{} stays alone, for memory planning to lay its operands out in its buffer", label(i)));
  if (classes_[consumer] == OpClass::Contraction)
    return refuse(UnfusedReason::ContractionOperand,
                  fmt::format("{} is an operand of {}", label(producer), label(consumer)));
  if (const Node *cast = nodes_[consumer]; cast->op() == OpKind::Cast && isFloat(cast->output()->dtype())) {
    const ir::Value *bytes = cast->input(0);
    const bool storedAnyway = graph_.isOutput(bytes) || bytes->uses().size() > 1;
    if ((bytes->dtype() == DType::U8 || bytes->dtype() == DType::I8) && storedAnyway)
      return refuse(UnfusedReason::WidenedBytes,
                    fmt::format("{} widens bytes that other readers read from memory", label(consumer)));
  }
  return {};
}

bool Fuser::exportedFrom(int i, int stamp) const {
  for (const ir::Value *output : nodes_[i]->outputs()) {
    if (graph_.isOutput(output))
      return true;
    for (const ir::Use &use : output->uses())
      if (mark_[index_.at(use.user)] != stamp)
        return true;
  }
  return false;
}

/// "%5 (matmul), %7 (conv) and the graph's return": who reads node i's results from outside.
std::string Fuser::readersOutside(int i, int stamp) const {
  std::vector<std::string> readers;
  for (int user : consumersOf(i))
    if (mark_[user] != stamp)
      readers.push_back(label(user));
  constexpr size_t kNamed = 2;
  if (readers.size() > kNamed + 1) {
    size_t more = readers.size() - kNamed;
    readers.resize(kNamed);
    readers.push_back(fmt::format("{} more", more));
  }
  for (const ir::Value *output : nodes_[i]->outputs())
    if (graph_.isOutput(output)) {
      readers.push_back("the graph's return");
      break;
    }
  return fmt::format("{}", fmt::join(readers, ", "));
}

/// The views of sources that `members` (marked with `stamp`) read, directly or through other
/// such views, in list order.
std::vector<int> Fuser::viewsRead(const std::vector<int> &members, int stamp) {
  std::vector<int> views, work(members);
  int seen = newStamp();
  while (!work.empty()) {
    int i = work.back();
    work.pop_back();
    for (const ir::Value *input : nodes_[i]->inputs()) {
      int p = producerOf(input);
      if (p >= 0 && sourceView_[p] && mark_[p] != stamp && visit_[p] != seen) {
        visit_[p] = seen;
        views.push_back(p);
        work.push_back(p);
      }
    }
  }
  std::sort(views.begin(), views.end());
  return views;
}

int Fuser::countOperands(const std::vector<int> &members, const std::vector<int> &views, int stamp) {
  std::vector<const ir::Value *> operands;
  auto inside = [&](int p) {
    return p >= 0 && (mark_[p] == stamp || std::binary_search(views.begin(), views.end(), p));
  };
  for (const std::vector<int> *list : {&members, &views})
    for (int i : *list)
      for (const ir::Value *input : nodes_[i]->inputs()) {
        int p = producerOf(input);
        bool smallConstant = p >= 0 && nodes_[p]->op() == OpKind::Constant &&
                             input->type().numElements() <= ir::kMaxInlinedConstantElements;
        if (!inside(p) && !smallConstant)
          operands.push_back(input);
      }
  std::sort(operands.begin(), operands.end());
  return static_cast<int>(std::unique(operands.begin(), operands.end()) - operands.begin());
}

// The rules a group must obey as a whole. Checking the merged group rather than the one edge
// makes merging symmetric: the order in which edges are proposed sets priorities, never what
// is legal.
Verdict Fuser::checkGroup(std::vector<int> candidate) {
  std::sort(candidate.begin(), candidate.end());
  int stamp = newStamp();
  for (int i : candidate)
    mark_[i] = stamp;
  std::vector<int> contractions, reductions, elementwise, movement;
  for (int i : candidate) {
    switch (classes_[i]) {
    case OpClass::Contraction: contractions.push_back(i); break;
    case OpClass::Reduction: reductions.push_back(i); break;
    case OpClass::Elementwise: elementwise.push_back(i); break;
    case OpClass::Movement: movement.push_back(i); break;
    case OpClass::Source:
    case OpClass::Opaque: return refuse(UnfusedReason::ProducerOpaque, fmt::format("{} is opaque", label(i)));
    }
  }
  auto within = [&](int p) { return p >= 0 && mark_[p] == stamp; };

  // Rule 2: at most one contraction, whose kernel is a library call with one epilogue hook.
  if (contractions.size() > 1)
    return refuse(UnfusedReason::TwoContractions,
                  fmt::format("{} and {} would share a kernel", label(contractions[0]), label(contractions[1])));
  if (!contractions.empty()) {
    int c = contractions[0];
    if (!reductions.empty())
      return refuse(UnfusedReason::ContractionReduction,
                    fmt::format("{} would join the group of {}", label(reductions[0]), label(c)));
    for (const ir::Value *input : nodes_[c]->inputs())
      if (within(producerOf(input)))
        return checkEdge(producerOf(input), c);
    // The epilogue: elementwise ops over exactly the contraction's output, applied to each
    // tile while it is in cache. Ops downstream of the contraction must keep its layout.
    std::vector<bool> downstream(candidate.size(), false);
    for (size_t k = 0; k < candidate.size(); ++k) {
      int i = candidate[k];
      downstream[k] = i == c;
      for (const ir::Value *input : nodes_[i]->inputs()) {
        int p = producerOf(input);
        if (within(p))
          downstream[k] =
              downstream[k] || downstream[std::lower_bound(candidate.begin(), candidate.end(), p) - candidate.begin()];
      }
      if (downstream[k] && classes_[i] == OpClass::Movement)
        return refuse(UnfusedReason::NotAnEpilogue,
                      fmt::format("{} changes the layout of the output of {}", label(i), label(c)));
    }
    for (int i : elementwise)
      if (shapeOf(i) != shapeOf(c))
        return refuse(UnfusedReason::NotAnEpilogue,
                      fmt::format("{} computes {}, {} computes {}", label(i), typeText(i), label(c), typeText(c)));
  } else if (!reductions.empty()) {
    // Rule 3: one row kernel. Every reduction folds the same axes of the same domain, and every
    // elementwise op runs either per element of the rows or once per row.
    RowDomain rows = rowDomainOf(*nodes_[reductions[0]]);
    for (int r : reductions) {
      RowDomain other = rowDomainOf(*nodes_[r]);
      if (other.input != rows.input || other.reduced != rows.reduced)
        return refuse(UnfusedReason::ReductionAxes,
                      fmt::format("{} reduces axes {} of {}, {} reduces axes {} of {}", label(r),
                                  axesText(other.reduced), shapeToString(other.input), label(reductions[0]),
                                  axesText(rows.reduced), shapeToString(rows.input)));
    }
    int64_t inputCount = numElements(rows.input);
    for (int i : elementwise)
      if (elements(i) != inputCount && elements(i) != rows.reducedCount)
        return refuse(UnfusedReason::RowDomain,
                      fmt::format("{} computes {}; {} reduces rows {} to {} values", label(i), typeText(i),
                                  label(reductions[0]), shapeToString(rows.input), rows.reducedCount));
  } else if (!elementwise.empty()) {
    // Rule 1: one loop over one domain. A smaller producer reached through a broadcast would
    // be recomputed for every element of the larger domain, so it stays a kernel of its own.
    auto [smallest, largest] = std::minmax_element(elementwise.begin(), elementwise.end(),
                                                   [&](int a, int b) { return elements(a) < elements(b); });
    if (elements(*smallest) != elements(*largest))
      return refuse(UnfusedReason::DomainMismatch,
                    fmt::format("{} computes {} elements, {} computes {}", label(*smallest), elements(*smallest),
                                label(*largest), elements(*largest)));
  }
  // Rule 4: inside a computing group a movement op is only index arithmetic, never stored; one
  // whose value is needed in memory elsewhere stays a node. A pure movement group is a copy
  // kernel and stores what others need.
  if (contractions.size() + reductions.size() + elementwise.size() > 0)
    for (int i : movement)
      if (exportedFrom(i, stamp))
        return refuse(UnfusedReason::NeededInFull,
                      fmt::format("{} is read from memory by {}", label(i), readersOutside(i, stamp)));
  // Rule 6: limits, counting the views of sources the group would recompute.
  std::vector<int> views = viewsRead(candidate, stamp);
  int ops = static_cast<int>(candidate.size() + views.size());
  if (ops > options_.maxGroupOps)
    return refuse(UnfusedReason::GroupSizeLimit,
                  fmt::format("the group would hold {} ops (limit {})", ops, options_.maxGroupOps));
  int operands = countOperands(candidate, views, stamp);
  if (operands > options_.maxGroupOperands)
    return refuse(UnfusedReason::OperandLimit, fmt::format("the group would read {} distinct operands (limit {})",
                                                           operands, options_.maxGroupOperands));
  return {};
}

// Rule 5: merging groups `from` and `to` creates a cycle exactly when a path leaves one, passes
// through other kernels and re-enters the other. The search walks kernels, not nodes (entering a
// group reaches all its results, as its kernel node will), and skips every group that starts
// after a cut position `limit`, at first the end of `to`. Edges go forward in list order, so a
// path from beyond the cut back into `to` must pass through a group with members on both sides
// of the cut: one that straddles it. The fast search ignores that (most groups do not lead back
// that way, and in a training graph, where forward and backward ops share groups, moving the cut
// past every straddling group makes the search several times slower); analyzeFusion checks its
// result for cycles and, when there is one, runs the exact search, which moves the cut past the
// groups that straddle it (reach_) until none does.
// Returns the last node outside both on such a path, or nullptr.
const Node *Fuser::cycleThrough(int from, int to) {
  int seen = newStamp();
  int limit = span_[to].second;
  while (exactCycles_ && reach_[static_cast<size_t>(limit)] > limit)
    limit = reach_[static_cast<size_t>(limit)];
  std::vector<int> work;
  auto enter = [&](int group) {
    if (visit_[group] == seen || span_[group].first > limit)
      return;
    visit_[group] = seen;
    work.insert(work.end(), members_[group].begin(), members_[group].end());
  };
  for (int i : members_[from])
    for (int user : consumersOf(i))
      if (int g = find(user); g != from && g != to)
        enter(g);
  while (!work.empty()) {
    int x = work.back();
    work.pop_back();
    for (int user : consumersOf(x)) {
      int g = find(user);
      if (g == to)
        return nodes_[x];
      if (g != from)
        enter(g);
    }
  }
  return nullptr;
}

} // namespace kiln::passes::fusion
