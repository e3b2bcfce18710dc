// Column stages: rows stages whose innermost domain dim is kept (a bias gradient's sum over
// the batch, per-channel statistics of NHWC), lowered so that the loads are contiguous.
//
// The row form (EmitReduction.cpp) walks each row's reduced elements, which here lie a whole
// innermost extent apart: a [1024, 512] f32 sum over axis 0 read one float per 2 KiB and ran
// at about 1.3 GB/s. Here the rows are cut along the innermost kept dim into blocks of
// consecutive rows, the lanes; a block keeps one accumulator per lane (the types of the row
// form: double for float sums and products), loops over the reduced dims outside and over
// its lanes inside, so each step reads the block's contiguous elements and the compiler
// vectorises the lane loop (1.2 ms -> 0.04 ms for that sum, one thread). Every lane folds its
// elements in increasing flat order, the reference evaluator's order, so float sums (in
// double) and f16/bf16 sums come out bit for bit.
//
// Reductions of a stage share a pass (one load feeds sum and sum of squares) unless one reads
// another's result, which then comes from an earlier pass through a per-lane array. After
// the passes, the per-lane results become the overrides of the reductions' outputs, read by
// an optional elementwise tail over the whole domain and by the per-row stores, each in a
// loop over the lanes. The last block of a row may be partial (innermost extent not a
// multiple of the block width): it is emitted separately with its own constant lane count.
#include <cmath>
#include <functional>
#include <set>

#include "codegen/ScalarOps.h"
#include "codegen/StageEmitters.h"
#include "core/Error.h"
#include "core/ShapeMath.h"

namespace kiln::codegen {

using ir::OpKind;

namespace {

// Lanes of one block: 64 (four zmm of f32, eight of double accumulators) ran a [1024, 512]
// f32 sum over axis 0 twice as fast as 16 on one thread: more independent add chains and
// four whole cache lines per step. Work that would leave fewer than kMinColumnBlocks blocks
// for the pool takes narrower blocks, down to kMinColumnLanes.
constexpr int64_t kColumnLanes = 64;
constexpr int64_t kMinColumnLanes = 16;
constexpr int64_t kMinColumnBlocks = 8;

bool isExtremum(const ir::Node &node) { return node.op() == OpKind::ReduceMax || node.op() == OpKind::ReduceMin; }

// Float max/min keep a NaN flag per lane apart from the compare-and-select (foldStatement).
bool tracksNan(const ir::Node &node) { return isExtremum(node) && isFloat(node.input(0)->dtype()); }

// The emission of one stage; a block's body is emitted once per lane count.
class ColumnEmitter {
public:
  /// `precomputeRowValues`: see precomputeRowValues().
  ColumnEmitter(KernelEmitter &e, const Stage &stage, bool precomputeRowValues)
      : e_(e), stage_(stage), precompute_(precomputeRowValues) {
    for (size_t d = 0; d < stage.domain.size(); ++d)
      (stage.reduced[d] ? reducedShape_ : keptShape_).push_back(stage.domain[d]);
    for (const Store &store : stage.stores)
      hasTail_ = hasTail_ || store.value->shape() == stage.domain;
  }

  /// Emits the block of `width` lanes whose first innermost coordinate is `start`, the kept
  /// coordinates before it being `outer`. Returns the number of loads that are strided along
  /// the lanes.
  int emitBlock(const std::vector<Index> &outer, const Index &start, int64_t width) {
    outer_ = outer;
    start_ = start;
    width_ = width;
    results_.clear();
    int strided = 0;
    for (const std::vector<const ir::Node *> &pass : reductionPasses(stage_.reductions, [](const ir::Node &) { return false; }))
      strided += emitPass(pass);
    if (hasTail_) {
      if (precompute_)
        precomputeRowValues();
      std::vector<Index> coords = openDomainLoops();
      for (const Store &store : stage_.stores)
        if (store.value->shape() == stage_.domain)
          e_.store(store, coords, e_.value(store.value, coords));
      closeDomainLoops();
    }
    Index lane = openLaneLoop();
    Index row = rowIndex(lane);
    for (const Store &store : stage_.stores) {
      if (store.value->shape() == stage_.domain)
        continue;
      std::vector<Index> coords = unflattenIndex(e_.arena(), row, store.value->shape());
      e_.store(store, coords, e_.value(store.value, coords));
    }
    e_.close();
    return strided;
  }

private:
  // Opens the lane loop and points the results of the passes so far at it.
  Index openLaneLoop() {
    std::string name = e_.fresh("l");
    lane_ = name;
    e_.open(fmt::format("for (int64_t {0} = 0; {0} < {1}; ++{0})", name, width_));
    Index lane = e_.arena().var(name, width_, e_.depth());
    Index row = rowIndex(lane);
    for (const auto &[value, array] : results_)
      e_.setOverride(value, unflattenIndex(e_.arena(), row, value->shape()),
                     Scalar{fmt::format("{}[{}]", array, name), e_.depth()});
    return lane;
  }

  // The flat row index (over the kept dims) of lane `lane`.
  Index rowIndex(const Index &lane) {
    std::vector<Index> kept = outer_;
    kept.push_back(e_.arena().add(start_, lane));
    return flatIndex(e_.arena(), kept, keptShape_);
  }

  // Opens the reduced loops and the lane loop inside them; returns the domain coordinates.
  std::vector<Index> openDomainLoops() {
    const Shape &domain = stage_.domain;
    std::vector<Index> coords(domain.size());
    for (size_t d = 0; d < domain.size(); ++d)
      if (stage_.reduced[d])
        coords[d] = e_.openLoop(domain[d], "j");
    Index lane = openLaneLoop();
    size_t kept = 0;
    for (size_t d = 0; d + 1 < domain.size(); ++d)
      if (!stage_.reduced[d])
        coords[d] = outer_.at(kept++);
    coords.back() = e_.arena().add(start_, lane);
    e_.watchInnerLoop(lane_);
    return coords;
  }

  // Values per row (not per element) that the tail computes from the reductions' results,
  // such as rsqrt(var + eps), are computed once per lane into arrays: inline, the tail would
  // compute them once per element (the lane loop is innermost, nothing hoists them).
  void precomputeRowValues() {
    std::set<const ir::Value *> reductionOutputs, visited;
    for (const ir::Node *node : stage_.reductions)
      reductionOutputs.insert(node->output());
    int64_t rows = numElements(keptShape_);
    std::vector<const ir::Value *> order; // operands first
    std::function<void(const ir::Value *)> visit = [&](const ir::Value *value) {
      const ir::Node *producer = value->producer();
      if (!visited.insert(value).second || reductionOutputs.count(value) || !producer)
        return;
      for (const ir::Value *input : producer->inputs())
        visit(input);
      ir::FusionKind kind = ir::opTraits(producer->op()).fusion;
      bool elementwise = (kind == ir::FusionKind::Elementwise || kind == ir::FusionKind::Broadcast) &&
                         ir::opTraits(producer->op()).tier == ir::OpTier::Primitive;
      if (elementwise && value->shape() != stage_.domain && numElements(value->shape()) == rows &&
          computedFrom(value, reductionOutputs))
        order.push_back(value);
    };
    for (const Store &store : stage_.stores)
      if (store.value->shape() == stage_.domain)
        visit(store.value);
    if (order.empty())
      return;
    std::vector<std::string> arrays;
    for (const ir::Value *value : order) {
      arrays.push_back(e_.fresh("row"));
      e_.line(fmt::format("{} {}[{}];", cType(value->dtype()), arrays.back(), width_));
    }
    Index row = rowIndex(openLaneLoop());
    for (size_t k = 0; k < order.size(); ++k) {
      Scalar scalar = e_.value(order[k], unflattenIndex(e_.arena(), row, order[k]->shape()));
      e_.line(fmt::format("{}[{}] = {};", arrays[k], lane_, scalar.code));
    }
    e_.close();
    for (size_t k = 0; k < order.size(); ++k)
      results_.emplace_back(order[k], arrays[k]);
  }

  void closeDomainLoops() {
    for (size_t d = 0; d <= reducedShape_.size(); ++d)
      e_.close();
  }

  int emitPass(const std::vector<const ir::Node *> &pass) {
    std::vector<std::string> accs, nans;
    for (const ir::Node *node : pass) {
      ReductionAccumulator acc = reductionAccumulator(node->op(), node->input(0)->dtype());
      accs.push_back(e_.fresh("acc"));
      e_.line(fmt::format("{} {}[{}];", acc.type, accs.back(), width_));
      e_.line(fmt::format("for (int l = 0; l < {}; ++l) {}[l] = {};", width_, accs.back(), acc.init));
      nans.push_back(tracksNan(*node) ? accs.back() + "n" : "");
      if (tracksNan(*node))
        e_.line(fmt::format("int {}[{}] = {{0}};", nans.back(), width_));
    }
    std::vector<Index> coords = openDomainLoops();
    const std::string lane = lane_;
    for (size_t k = 0; k < pass.size(); ++k) {
      Scalar x = e_.value(pass[k]->input(0), coords);
      std::string nan = nans[k].empty() ? "" : fmt::format("{}[{}]", nans[k], lane);
      e_.line(foldStatement(*pass[k], fmt::format("{}[{}]", accs[k], lane), nan, x.code));
    }
    int strided = e_.stridedInnerLoads();
    closeDomainLoops();
    // Per lane, the result in the output dtype; a max/min that met a NaN is the positive quiet
    // NaN, as in the reference, whatever the sign of the NaN it met.
    for (size_t k = 0; k < pass.size(); ++k) {
      const ir::Node &node = *pass[k];
      DType outType = node.output()->dtype();
      std::string array = e_.fresh("res"), acc = accs[k] + "[l]";
      if (tracksNan(node))
        acc = fmt::format("({0}[l] || {1} != {1} ? __builtin_nan(\"\") : (double){1})", nans[k], acc);
      e_.line(fmt::format("{} {}[{}];", cType(outType), array, width_));
      e_.line(fmt::format("for (int l = 0; l < {}; ++l) {}[l] = {};", width_, array,
                          roundExpression(outType, fmt::format("({}){}", cType(outType), acc))));
      results_.emplace_back(node.output(), array);
    }
    return strided;
  }

  KernelEmitter &e_;
  const Stage &stage_;
  Shape keptShape_, reducedShape_;
  bool hasTail_ = false;
  std::vector<Index> outer_;
  Index start_;
  int64_t width_ = 0;
  std::string lane_; // the variable of the lane loop open last
  bool precompute_;
  std::vector<std::pair<const ir::Value *, std::string>> results_; // value per row, its per-lane array
};

} // namespace

bool columnReductionFits(const Stage &stage) {
  const Shape &domain = stage.domain;
  if (domain.empty() || stage.reduced.size() != domain.size() || stage.reduced.back() ||
      domain.back() < kMinColumnLanes || stage.reductions.empty())
    return false;
  int64_t reducedElements = 1;
  bool anyReduced = false;
  for (size_t d = 0; d < domain.size(); ++d) {
    if (!stage.reduced[d])
      continue;
    anyReduced = true;
    reducedElements = checkedMul(reducedElements, domain[d], "reduced element count");
  }
  if (!anyReduced || reducedElements == 0 || numElements(domain) == 0)
    return false;
  for (const ir::Node *node : stage.reductions) {
    switch (node->op()) {
    case OpKind::ReduceSum:
    case OpKind::ReduceProd:
    case OpKind::ReduceMax:
    case OpKind::ReduceMin: break;
    default: return false; // arg reductions keep the row form
    }
  }
  return true;
}

bool emitColumnReductionStage(KernelEmitter &e, int stageIndex, KernelText &out) {
  const Stage &stage = e.plan().stages.at(static_cast<size_t>(stageIndex));
  const Shape &domain = stage.domain;
  Shape outerShape;
  int64_t reducedElements = 1;
  for (size_t d = 0; d + 1 < domain.size(); ++d)
    if (stage.reduced[d])
      reducedElements = checkedMul(reducedElements, domain[d], "reduced element count");
    else
      outerShape.push_back(domain[d]);
  int64_t inner = domain.back(), outerRows = numElements(outerShape), lanes = kColumnLanes;
  auto blocksFor = [&](int64_t width) { return outerRows * ((inner + width - 1) / width); };
  while (lanes > kMinColumnLanes && blocksFor(lanes) < kMinColumnBlocks &&
         numElements(domain) >= kMinColumnBlocks * kMinParallelElements)
    lanes /= 2;
  int64_t fullBlocks = inner / lanes, rest = inner % lanes;
  int64_t blocksPerRow = fullBlocks + (rest != 0 ? 1 : 0);
  int64_t blocks = outerRows * blocksPerRow;

  // The function body, first with the tail's per-row values precomputed; a view of them the
  // tail reads at other coordinates (a StrategyMismatch) makes it compute them inline instead.
  auto emitFunction = [&](bool precompute, int &strided) {
    e.beginFunction(stageIndex);
    e.line(fmt::format("// column reduction: blocks of {} lanes", lanes)); // for readers and tests
    e.open("for (int64_t r = begin; r < end; ++r)");
    Index block = e.arena().var("r", blocks, e.depth());
    std::vector<Index> outer = unflattenIndex(e.arena(), e.arena().div(block, blocksPerRow), outerShape);
    Index blockInRow = e.arena().mod(block, blocksPerRow);
    ColumnEmitter columns(e, stage, precompute);
    strided = 0;
    if (rest == 0) {
      strided += columns.emitBlock(outer, e.arena().scale(blockInRow, lanes), lanes);
    } else if (fullBlocks == 0) { // narrower than one block: a single partial one per row
      strided += columns.emitBlock(outer, IndexArena::constant(0), rest);
    } else {
      // Full blocks, then the partial last one with its own constant lane count (two ifs, not
      // if/else: the emitter may hoist a statement between them).
      e.open(fmt::format("if ({} < {})", e.arena().code(blockInRow), fullBlocks));
      Index start = fullBlocks == 1 ? IndexArena::constant(0)
                                    : e.declareIndex(fmt::format("{} * {}", e.arena().code(blockInRow), lanes),
                                                     (fullBlocks - 1) * lanes + 1, "cs");
      strided += columns.emitBlock(outer, start, lanes);
      e.close();
      e.open(fmt::format("if ({} == {})", e.arena().code(blockInRow), fullBlocks));
      strided += columns.emitBlock(outer, IndexArena::constant(fullBlocks * lanes), rest);
      e.close();
    }
    e.close();
    return e.endFunction();
  };
  std::string body;
  int strided = 0;
  try {
    body = emitFunction(true, strided);
  } catch (const StrategyMismatch &) {
    body = emitFunction(false, strided);
  }
  // An operand read transposed along the lanes (a permuted view) is contiguous along the
  // reduced dims instead: the row form reads it better.
  if (strided > 0)
    return false;
  std::string fn = fmt::format("{}_s{}", e.prefix(), stageIndex);
  out.functions += fmt::format("static void {}(void *vctx, int64_t begin, int64_t end) {{\n{}}}\n\n", fn, body);
  out.body.push_back(runRows(fn, blocks, lanes * reducedElements));
  return true;
}

} // namespace kiln::codegen
