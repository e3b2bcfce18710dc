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
// A merge is accepted when the merged group obeys every rule (checkGroup, below), stays within
// the limits, and creates no cycle between kernels (cycleThrough). Groups live in a union-find
// over list positions; the node list is a topological order, which bounds the cycle search.
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
//     computing op absorbs merge into one copy. Views of parameters and constants are
//     recomputed as indexing by every group that reads them.
//  5. No cycle: two groups do not merge when a path leaves one and re-enters the other through
//     other kernels: the merged kernel would wait on itself.
//  6. Limits: FusionOptions::maxGroupOps and maxGroupOperands, each a named reason.
#include "passes/fusion/FusionAnalysis.h"

#include <algorithm>
#include <deque>
#include <map>
#include <unordered_map>

#include "core/Error.h"
#include "ir/KernelOutline.h"
#include "ir/Printer.h"
#include "passes/fusion/FusionClasses.h"

namespace kiln::passes {

bool isFreeView(const ir::Node &node) {
  switch (node.op()) {
  case ir::OpKind::Reshape:
  case ir::OpKind::Squeeze:
  case ir::OpKind::Unsqueeze:
  case ir::OpKind::Flatten: return true;
  default: return false;
  }
}

namespace fusion {

OpClass classify(const ir::Node &node) {
  const ir::OpTraits &traits = ir::opTraits(node.op());
  if (traits.tier == ir::OpTier::Source)
    return OpClass::Source;
  // A composite's primitives are unknown until decompose runs; a kernel is already a group.
  if (traits.tier == ir::OpTier::Composite || node.op() == ir::OpKind::Kernel)
    return OpClass::Opaque;
  switch (traits.fusion) {
  case ir::FusionKind::Elementwise: return OpClass::Elementwise;
  // `broadcast` is the one Broadcast-kind op that computes nothing: it is index arithmetic.
  case ir::FusionKind::Broadcast: return node.op() == ir::OpKind::Broadcast ? OpClass::Movement : OpClass::Elementwise;
  case ir::FusionKind::Injective: return OpClass::Movement;
  case ir::FusionKind::Reduction: return OpClass::Reduction;
  case ir::FusionKind::OutFusable: return OpClass::Contraction;
  case ir::FusionKind::Opaque: return OpClass::Opaque;
  }
  return OpClass::Opaque;
}

} // namespace fusion

namespace {

using ir::Node;
using ir::OpKind;

using fusion::classify;
using fusion::OpClass;

/// The rows a reduction folds: its input shape and which dims it reduces.
struct RowDomain {
  Shape input;
  std::vector<bool> reduced;
  int64_t reducedCount = 0;
};

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

std::string axesText(const std::vector<bool> &reduced) {
  std::vector<size_t> axes;
  for (size_t d = 0; d < reduced.size(); ++d)
    if (reduced[d])
      axes.push_back(d);
  return fmt::format("[{}]", fmt::join(axes, ", "));
}

struct Verdict {
  bool ok = true;
  UnfusedReason reason = UnfusedReason::ProducerOpaque;
  std::string detail;
};

Verdict refuse(UnfusedReason reason, std::string detail) { return {false, reason, std::move(detail)}; }

class Fuser {
public:
  Fuser(const ir::Graph &graph, const FusionOptions &options)
      : graph_(graph), options_(options), nodes_(graph.nodes()), names_(ir::printedValueNames(graph)) {
    size_t n = nodes_.size();
    parent_.resize(n);
    members_.resize(n);
    span_.resize(n);
    classes_.resize(n);
    sourceView_.assign(n, false);
    mark_.assign(n, 0);
    visit_.assign(n, 0);
    queued_.assign(n, 0);
    for (size_t i = 0; i < n; ++i) {
      index_[nodes_[i]] = static_cast<int>(i);
      parent_[i] = static_cast<int>(i);
      members_[i] = {static_cast<int>(i)};
      span_[i] = {static_cast<int>(i), static_cast<int>(i)};
      classes_[i] = classify(*nodes_[i]);
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

  FusionAnalysis run();

private:
  // --- graph queries ---------------------------------------------------------------------
  int producerOf(const ir::Value *value) const {
    const Node *producer = value->producer();
    return producer ? index_.at(producer) : -1;
  }
  /// A transpose or reshape read only as matmul operands, in a layout one library GEMM call
  /// takes: the GEMM reads it through strides (trans_a / trans_b), so it needs no kernel of its
  /// own even when its operand is computed: that operand is stored anyway, since a contraction
  /// never computes its operands. (A gradient's A^T * g and g * B^T were a copy kernel each: 9%
  /// of the MLP's training step.)
  bool onlyMatMulOperand(int i) const {
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
  static bool batchedGemmFriendly(const Node &node) {
    const Shape &out = node.output()->shape();
    const size_t rank = out.size();
    bool batched = rank > 2 && numElements(Shape(out.begin(), out.end() - 2)) > 1;
    if (batched && (out[rank - 2] < 32 || out[rank - 1] < 32))
      return false;
    return oneStrideBatch(node);
  }
  /// The permuted view's batch dims step through its contiguous operand with one stride (the
  /// test emitGemmStage applies to the GEMM's operands).
  static bool oneStrideBatch(const Node &node) {
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
  /// Ops that take part in grouping: not sources, not views of sources (attached at the end).
  bool groupable(int i) const { return classes_[i] != OpClass::Source && !sourceView_[i]; }
  bool isOpaque(int i) const { return classes_[i] == OpClass::Opaque; }
  /// The list positions of the nodes using any result of node i, sorted, once each.
  std::vector<int> consumersOf(int i) const {
    std::vector<int> users;
    for (const ir::Value *output : nodes_[i]->outputs())
      for (const ir::Use &use : output->uses())
        users.push_back(index_.at(use.user));
    std::sort(users.begin(), users.end());
    users.erase(std::unique(users.begin(), users.end()), users.end());
    return users;
  }
  int64_t elements(int i) const { return nodes_[i]->output(0)->type().numElements(); }
  const Shape &shapeOf(int i) const { return nodes_[i]->output(0)->shape(); }
  std::string label(int i) const { return label(nodes_[i]); }
  std::string label(const Node *node) const {
    auto it = names_.find(node->output(0));
    return fmt::format("%{} ({})", it == names_.end() ? "?" : it->second, node->opName());
  }
  std::string typeText(int i) const { return nodes_[i]->output(0)->type().toString(); }

  // --- union-find over list positions ---------------------------------------------------
  int find(int x) {
    while (parent_[x] != x)
      x = parent_[x] = parent_[parent_[x]];
    return x;
  }
  void unite(int a, int b) {
    if (members_[a].size() < members_[b].size())
      std::swap(a, b);
    parent_[b] = a;
    members_[a].insert(members_[a].end(), members_[b].begin(), members_[b].end());
    members_[b].clear();
    span_[a] = {std::min(span_[a].first, span_[b].first), std::max(span_[a].second, span_[b].second)};
  }

  // --- the rules ---------------------------------------------------------------------------
  Verdict checkEdge(int producer, int consumer) const;
  Verdict checkGroup(std::vector<int> candidate);
  bool exportedFrom(int i, int stamp) const;
  std::string readersOutside(int i, int stamp) const;
  std::vector<int> viewsRead(const std::vector<int> &members, int stamp);
  int countOperands(const std::vector<int> &members, const std::vector<int> &views, int stamp);
  const Node *cycleThrough(int from, int to);
  bool propose(int producer, int consumer, bool record);
  void grow(int seed, bool forwardOnly);
  FusionGroup describeGroup(std::vector<int> members);

  int newStamp() { return ++stamp_; }

  const ir::Graph &graph_;
  FusionOptions options_;
  std::vector<Node *> nodes_;
  std::unordered_map<const ir::Value *, std::string> names_;
  std::unordered_map<const Node *, int> index_; // lookup only, never iterated
  std::vector<OpClass> classes_;
  std::vector<bool> sourceView_;
  std::vector<int> parent_;
  std::vector<std::vector<int>> members_;
  std::vector<std::pair<int, int>> span_;  // first and last list position of each group
  std::vector<int> mark_, visit_, queued_; // stamps: candidate membership, searches, growth queue
  int stamp_ = 0;
  std::map<std::pair<int, int>, Verdict> refusals_; // by (producer, consumer) position
};

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
  if (classes_[consumer] == OpClass::Contraction)
    return refuse(UnfusedReason::ContractionOperand,
                  fmt::format("{} is an operand of {}", label(producer), label(consumer)));
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
// after `to` ends: list order is topological, so such a group cannot lead back into `to`.
// Returns the last node outside both on such a path, or nullptr.
const Node *Fuser::cycleThrough(int from, int to) {
  int seen = newStamp();
  int limit = span_[to].second;
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

} // namespace

FusionAnalysis analyzeFusion(const ir::Graph &graph, const FusionOptions &options) {
  if (options.maxGroupOps < 1 || options.maxGroupOperands < 1)
    fail("fusion limits must be positive (max group ops {}, max group operands {})", options.maxGroupOps,
         options.maxGroupOperands);
  return Fuser(graph, options).run();
}

} // namespace kiln::passes
