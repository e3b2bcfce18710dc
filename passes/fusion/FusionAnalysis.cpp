// Fusion analysis in stages:
//   1. Classify every node by the Fusion column of ir/Ops.def (TVM's vocabulary) into source,
//      elementwise, movement, reduction, contraction or opaque, and mark the *views of sources*:
//      movement ops whose operands are all parameters, constants or such views.
//   2. Grow groups from seeds in priority order, each growth a worklist over the group's edges
//      that proposes merging the group with the neighbour's group. Contractions seed first and
//      grow forward only (rule 2: they take their epilogues before anything else can), then
//      reductions (rule 3), elementwise ops (rule 1) and movement ops (rule 4), growing both ways.
//   3. Sweep every producer -> consumer edge, proposing the merge of its two groups, until a
//      sweep merges nothing. The last sweep records, for each edge still between two groups,
//      why those final groups do not merge.
//   4. Attach to each group the views of sources it reads, assign each op its role, and list
//      the groups of two or more ops, the single ops and the unfused edges.
// A merge is accepted when the merged group obeys every rule (checkGroup), stays within the
// limits, and creates no cycle between kernels (cycleThrough): passes/fusion/FusionRules.cpp
// holds the rules and says why each exists. Groups live in a union-find over list positions
// (passes/fusion/Fuser.h); the node list is a topological order, which bounds the cycle search.
#include "passes/fusion/FusionAnalysis.h"

#include <algorithm>
#include <deque>

#include "core/Error.h"
#include "passes/fusion/Fuser.h"
#include "passes/memory/ConcatSlices.h"
#include "passes/memory/PlanMemory.h"

namespace kiln::passes {

namespace fusion {

Fuser::Fuser(const ir::Graph &graph, const FusionOptions &options, bool exactCycles)
    : graph_(graph), options_(options), exactCycles_(exactCycles), nodes_(graph.nodes()),
      names_(ir::printedValueNames(graph)) {
  size_t n = nodes_.size();
  parent_.resize(n);
  members_.resize(n);
  span_.resize(n);
  reach_.resize(n);
  classes_.resize(n);
  sourceView_.assign(n, false);
  concatAlone_.assign(n, false);
  mark_.assign(n, 0);
  visit_.assign(n, 0);
  queued_.assign(n, 0);
  for (size_t i = 0; i < n; ++i) {
    index_[nodes_[i]] = static_cast<int>(i);
    parent_[i] = static_cast<int>(i);
    members_[i] = {static_cast<int>(i)};
    span_[i] = {static_cast<int>(i), static_cast<int>(i)};
    reach_[i] = static_cast<int>(i);
    classes_[i] = classify(*nodes_[i]);
    concatAlone_[i] = concatStandsAlone(graph, *nodes_[i], PlanOptions{}.alignment);
  }
  // Stage 1: views of sources, in list order so that a view's producers are decided first.
  for (size_t i = 0; i < n; ++i) {
    if (classes_[i] != OpClass::Movement)
      continue;
    bool fromSources = true;
    for (const ir::Value *input : nodes_[i]->inputs()) {
      int p = producerOf(input);
      fromSources = fromSources && p >= 0 && (classes_[p] == OpClass::Source || sourceView_[p]);
    }
    sourceView_[i] = fromSources || onlyMatMulOperand(i);
  }
}

/// A transpose or reshape read only as matmul operands, in a layout one library GEMM call
/// takes: the GEMM reads it through strides (trans_a / trans_b), so it needs no kernel of its
/// own even when its operand is computed: that operand is stored anyway, since a contraction
/// never computes its operands. (A gradient's A^T * g and g * B^T were a copy kernel each: 9%
/// of the MLP's training step.)
bool Fuser::onlyMatMulOperand(int i) const {
  const Node *node = nodes_[i];
  if ((node->op() != OpKind::Permute && node->op() != OpKind::Reshape) || graph_.isOutput(node->output(0)))
    return false;
  const std::vector<ir::Use> &uses = node->output(0)->uses();
  bool onlyMatMuls = !uses.empty() && std::all_of(uses.begin(), uses.end(), [](const ir::Use &use) {
    return use.user->op() == OpKind::MatMul;
  });
  return onlyMatMuls && (node->op() == OpKind::Reshape || batchedGemmFriendly(*node));
}

/// Whether permute `node` of a contiguous operand is read well by one batched GEMM call: no
/// batch dims, or batch dims (all but the last two) with one uniform stride and matrices of
/// at least 32 x 32. Otherwise a copy kernel first is faster: attention's per-head Q and K^T,
/// [batch, heads, ...] views of [batch, tokens, heads * dim], would run one GEMM per (batch,
/// head), and a [tokens, batch, hidden] view of [batch, tokens, hidden] 128 GEMMs of 8 rows
/// instead of one of 1024 (BERT-mini inference lost 20% both ways).
bool Fuser::batchedGemmFriendly(const Node &node) {
  const Shape &out = node.output()->shape();
  const size_t rank = out.size();
  bool batched = rank > 2 && numElements(Shape(out.begin(), out.end() - 2)) > 1;
  if (batched && (out[rank - 2] < 32 || out[rank - 1] < 32))
    return false;
  return oneStrideBatch(node);
}

/// The permuted view's batch dims step through its contiguous operand with one stride (the
/// test emitGemmStage applies to the GEMM's operands).
bool Fuser::oneStrideBatch(const Node &node) {
  const Shape &in = node.input(0)->shape();
  std::vector<int64_t> perm = node.attrInts("perm");
  const int64_t rank = static_cast<int64_t>(in.size());
  std::vector<int64_t> base = contiguousStrides(in), strides;
  Shape batchShape;
  for (int64_t d = 0; d + 2 < rank; ++d) {
    const int64_t axis = perm[d] < 0 ? perm[d] + rank : perm[d];
    strides.push_back(base[axis]);
    batchShape.push_back(in[axis]);
  }
  return uniformBatchStride(strides, batchShape).has_value();
}

/// Proposes merging the groups of `producer` and `consumer` across their edge; returns true
/// if it merged them. With `record`, a refusal is kept as that edge's reason.
bool Fuser::propose(int producer, int consumer, bool record) {
  int a = find(producer), b = find(consumer);
  if (a == b)
    return false;
  Verdict verdict = checkEdge(producer, consumer);
  if (verdict.ok) {
    std::vector<int> candidate(members_[a]);
    candidate.insert(candidate.end(), members_[b].begin(), members_[b].end());
    verdict = checkGroup(std::move(candidate));
  }
  if (verdict.ok) {
    const Node *through = cycleThrough(a, b);
    if (!through)
      through = cycleThrough(b, a);
    if (through)
      verdict = refuse(UnfusedReason::Cycle,
                       fmt::format("through {}, which depends on one side and feeds the other", label(through)));
  }
  if (!verdict.ok) {
    if (record)
      refusals_[{producer, consumer}] = std::move(verdict);
    return false;
  }
  unite(a, b);
  return true;
}

/// Grows the group of `seed` across its edges, breadth first: producers in operand order,
/// then consumers in list order. `forwardOnly` follows only the edges out of ops downstream of
/// the seed (a contraction's epilogue).
void Fuser::grow(int seed, bool forwardOnly) {
  std::deque<int> queue{seed};
  int queued = newStamp();
  queued_[seed] = queued;
  auto absorb = [&](int group) {
    for (int m : members_[group])
      if (queued_[m] != queued) {
        queued_[m] = queued;
        queue.push_back(m);
      }
  };
  while (!queue.empty()) {
    int x = queue.front();
    queue.pop_front();
    if (!forwardOnly)
      for (const ir::Value *input : nodes_[x]->inputs())
        if (int p = producerOf(input); p >= 0 && groupable(p) && propose(p, x, false))
          absorb(find(x));
    for (int user : consumersOf(x))
      if (groupable(user) && (!forwardOnly || find(user) != find(seed)) && propose(x, user, false))
        absorb(find(x));
  }
}

FusionAnalysis Fuser::run() {
  int n = static_cast<int>(nodes_.size());
  // Stage 2: seeds by priority.
  const std::pair<OpClass, bool> phases[] = {{OpClass::Contraction, true},
                                             {OpClass::Reduction, false},
                                             {OpClass::Elementwise, false},
                                             {OpClass::Movement, false}};
  for (auto [seedClass, forwardOnly] : phases)
    for (int i = 0; i < n; ++i)
      if (classes_[i] == seedClass && groupable(i))
        grow(i, forwardOnly);
  // Stage 3: sweep to a fixed point; the final sweep's refusals are the reasons reported.
  for (bool merged = true; merged;) {
    merged = false;
    refusals_.clear();
    for (int i = 0; i < n; ++i)
      if (groupable(i))
        for (const ir::Value *input : nodes_[i]->inputs())
          if (int p = producerOf(input); p >= 0 && groupable(p))
            merged = propose(p, i, true) || merged;
  }
  kernelsFormCycle_ = groupsFormCycle();

  // Stage 4: groups, singles and reasons.
  FusionAnalysis analysis;
  std::vector<int> kernelOf(nodes_.size(), -1);
  std::vector<bool> viewNeeded(nodes_.size(), false); // a view some non-absorbing user reads
  for (int i = 0; i < n; ++i) {
    if (classes_[i] == OpClass::Source)
      continue;
    ++analysis.numOps;
    if (!groupable(i) || find(i) != i)
      continue;
    std::vector<int> members = members_[i];
    int stamp = newStamp();
    for (int m : members)
      mark_[m] = stamp;
    std::vector<int> views = isOpaque(i) ? std::vector<int>{} : viewsRead(members, stamp);
    if (members.size() + views.size() < 2)
      continue;
    members.insert(members.end(), views.begin(), views.end());
    analysis.groups.push_back(describeGroup(std::move(members)));
  }
  // Order groups by the list position of their last non-view op (stable, deterministic).
  auto lastPosition = [&](const FusionGroup &group) {
    int last = -1;
    for (const FusedOp &op : group.ops)
      if (op.role != FusionRole::SourceView && op.role != FusionRole::OperandView)
        last = std::max(last, index_.at(op.node));
    return last;
  };
  std::stable_sort(analysis.groups.begin(), analysis.groups.end(),
                   [&](const FusionGroup &a, const FusionGroup &b) { return lastPosition(a) < lastPosition(b); });
  for (size_t g = 0; g < analysis.groups.size(); ++g)
    for (const FusedOp &op : analysis.groups[g].ops)
      if (op.role != FusionRole::SourceView && op.role != FusionRole::OperandView)
        kernelOf[index_.at(op.node)] = static_cast<int>(g);
  // A view of sources stays a node when some user does not recompute it: an opaque op, a
  // graph output, or a view that itself stays. Users come later in the list: go backwards.
  for (int i = n - 1; i >= 0; --i)
    if (sourceView_[i]) {
      viewNeeded[i] = graph_.isOutput(nodes_[i]->output(0));
      for (int user : consumersOf(i))
        viewNeeded[i] = viewNeeded[i] || isOpaque(user) || (sourceView_[user] ? viewNeeded[user] : kernelOf[user] < 0);
    }
  for (int i = 0; i < n; ++i) {
    if (classes_[i] == OpClass::Source)
      continue;
    if (sourceView_[i] ? viewNeeded[i] : kernelOf[i] < 0)
      analysis.singles.push_back(nodes_[i]);
  }
  for (int i = 0; i < n; ++i) {
    if (classes_[i] == OpClass::Source)
      continue;
    std::vector<int> producers;
    for (const ir::Value *input : nodes_[i]->inputs())
      if (int p = producerOf(input); p >= 0 && classes_[p] != OpClass::Source)
        producers.push_back(p);
    std::sort(producers.begin(), producers.end());
    producers.erase(std::unique(producers.begin(), producers.end()), producers.end());
    for (int p : producers) {
      if (sourceView_[i] && !sourceView_[p]) { // a view of a computed value (onlyMatMulOperand)
        analysis.unfused.push_back({nodes_[p], nodes_[i], UnfusedReason::ContractionOperand,
                                    fmt::format("{} is read by a matmul through the view {}, which the GEMM folds "
                                                "into its operand's strides",
                                                label(p), label(i))});
        continue;
      }
      if (sourceView_[p]) {
        if (isOpaque(i))
          analysis.unfused.push_back({nodes_[p], nodes_[i], UnfusedReason::ConsumerOpaque, checkEdge(p, i).detail});
        continue;
      }
      if (find(p) == find(i))
        continue;
      auto it = refusals_.find({p, i});
      Verdict verdict = it != refusals_.end() ? it->second : checkEdge(p, i);
      if (verdict.ok) // cannot happen after the fixed point; kept honest rather than silent
        verdict = refuse(UnfusedReason::Cycle, "not merged (no rule refused it)");
      analysis.unfused.push_back({nodes_[p], nodes_[i], verdict.reason, std::move(verdict.detail)});
    }
  }
  return analysis;
}

/// Rule, anchor, domain and each op's role, for members (non-views) followed by views.
FusionGroup Fuser::describeGroup(std::vector<int> all) {
  std::vector<int> members, views;
  for (int i : all)
    (sourceView_[i] ? views : members).push_back(i);
  std::sort(members.begin(), members.end());
  std::sort(views.begin(), views.end());
  int stamp = newStamp();
  for (int m : members)
    mark_[m] = stamp;
  FusionGroup group;
  int contraction = -1, reduction = -1, lastElementwise = -1;
  for (int i : members) {
    if (classes_[i] == OpClass::Contraction)
      contraction = i;
    if (classes_[i] == OpClass::Reduction && reduction < 0)
      reduction = i;
    if (classes_[i] == OpClass::Elementwise)
      lastElementwise = i;
  }
  int anchor = contraction >= 0       ? contraction
               : reduction >= 0       ? reduction
               : lastElementwise >= 0 ? lastElementwise
                                      : members.back();
  group.rule = contraction >= 0       ? FusionRule::Contraction
               : reduction >= 0       ? FusionRule::Reduction
               : lastElementwise >= 0 ? FusionRule::Elementwise
                                      : FusionRule::Movement;
  group.anchor = nodes_[anchor];
  group.domain = group.rule == FusionRule::Reduction ? nodes_[anchor]->input(0)->shape() : shapeOf(anchor);
  int64_t reducedCount = reduction >= 0 ? rowDomainOf(*nodes_[reduction]).reducedCount : 0;
  // after[k]: members[k] is downstream of the contraction, or of some reduction, in the group.
  std::vector<bool> after(members.size(), false);
  for (size_t k = 0; k < members.size(); ++k) {
    int i = members[k];
    bool downstream = i == contraction || classes_[i] == OpClass::Reduction;
    for (const ir::Value *input : nodes_[i]->inputs())
      if (int p = producerOf(input); p >= 0 && mark_[p] == stamp)
        downstream = downstream || after[std::lower_bound(members.begin(), members.end(), p) - members.begin()];
    after[k] = downstream;
    FusedOp op{nodes_[i], FusionRole::IndexExpression, exportedFrom(i, stamp)};
    bool computes = classes_[i] == OpClass::Elementwise;
    if (i == anchor)
      op.role = FusionRole::Anchor;
    else if (classes_[i] == OpClass::Reduction)
      op.role = FusionRole::RowReduction;
    else if (computes && group.rule == FusionRule::Contraction)
      op.role = downstream ? FusionRole::Epilogue : FusionRole::EpilogueInput;
    else if (computes && group.rule == FusionRule::Reduction)
      op.role = elements(i) == reducedCount && elements(i) != numElements(group.domain) ? FusionRole::RowOutputConsumer
                : downstream                                                            ? FusionRole::RowInputConsumer
                                                                                        : FusionRole::Prologue;
    else if (computes)
      op.role = FusionRole::ElementwiseInline;
    group.ops.push_back(op);
  }
  for (int v : views) {
    bool feedsContraction = false;
    for (int user : consumersOf(v))
      feedsContraction = feedsContraction || user == contraction;
    group.ops.push_back({nodes_[v], feedsContraction ? FusionRole::OperandView : FusionRole::SourceView, false});
  }
  std::sort(group.ops.begin(), group.ops.end(),
            [&](const FusedOp &a, const FusedOp &b) { return index_.at(a.node) < index_.at(b.node); });
  group.numOperands = countOperands(members, views, stamp);
  return group;
}

/// Kahn's algorithm on the graph of groups (an edge per producer -> consumer edge between two
/// groups): true when some groups are left, each waiting on another.
bool Fuser::groupsFormCycle() {
  int n = static_cast<int>(nodes_.size());
  std::vector<int> waiting(nodes_.size(), 0), ready;
  int groups = 0;
  for (int i = 0; i < n; ++i) {
    groups += find(i) == i;
    for (int user : consumersOf(i))
      if (find(user) != find(i))
        ++waiting[static_cast<size_t>(find(user))];
  }
  for (int g = 0; g < n; ++g)
    if (find(g) == g && waiting[static_cast<size_t>(g)] == 0)
      ready.push_back(g);
  int done = 0;
  while (!ready.empty()) {
    int g = ready.back();
    ready.pop_back();
    ++done;
    for (int m : members_[g])
      for (int user : consumersOf(m))
        if (int h = find(user); h != g && --waiting[static_cast<size_t>(h)] == 0)
          ready.push_back(h);
  }
  return done < groups;
}

} // namespace fusion

FusionAnalysis analyzeFusion(const ir::Graph &graph, const FusionOptions &options) {
  if (options.maxGroupOps < 1 || options.maxGroupOperands < 1)
    fail("fusion limits must be positive (max group ops {}, max group operands {})", options.maxGroupOps,
         options.maxGroupOperands);
  fusion::Fuser fast(graph, options, false);
  FusionAnalysis analysis = fast.run();
  if (!fast.kernelsFormCycle())
    return analysis;
  // Rare: the fast cycle search missed a path through a straddling group (cycleThrough).
  return fusion::Fuser(graph, options, true).run();
}

} // namespace kiln::passes
