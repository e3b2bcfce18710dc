// Rows stages: row kernels for reductions (softmax, layernorm, mean/var, argmax).
//
// The kept dims of the domain are the rows (parallel), the reduced dims the inner loops. Per
// row: each reduction is one pass over the row into an accumulator (reductions that do not read
// one another's results share a pass, as a batch norm gradient's two sums do; sums and products of
// floats in double, as the reference evaluator does, so long rows stay accurate; integers in
// wrapping int64; max/min propagating NaN), whose result becomes an override that later
// passes read as a per-row scalar (a long pass keeps sixteen accumulators, combined at the end,
// so that it vectorises; the order of a float sum then differs from the evaluator's only in
// double rounding; a short innermost reduced dim is merged with the reduced dims before it
// into one such loop, a batch norm's 28 x 28 plane into 784, unless some operand is not laid
// out along them); then one pass stores the values over the whole domain
// (the elementwise tail) and the per-row values are stored once per row. A lane pass whose
// operand takes a transcendental and that the tail computes again (softmax's exp(x - max))
// keeps it per row on the stack, and the tail reads it back: ViT-B/16's softmax kernels
// 11.4 -> 7.4 ms a run.
//
// A stage whose innermost dim is kept reads its rows strided; it takes the column form
// instead (codegen/EmitColumnReduction.cpp) where that fits, chosen at the top of
// emitRowsStage.
#include <algorithm>
#include <cmath>
#include <set>

#include "codegen/ScalarOps.h"
#include "codegen/StageEmitters.h"
#include "core/Error.h"
#include "core/ShapeMath.h"

namespace kiln::codegen {

using ir::OpKind;

namespace {

constexpr int kLanes = 16;              // accumulators of a vectorised reduction pass (one zmm of f32)
constexpr int64_t kLaneMinimum = 32;    // shorter innermost reductions stay scalar
constexpr int64_t kMaxRowCache = 4096;  // elements of a row kept for the tail (the row cache), on the stack

/// Whether computing `value` inline takes a transcendental function (exp, log, tanh, erf, pow,
/// ...), looking through the values the plan has no buffer for: what is worth keeping rather
/// than computing twice.
bool transcendental(const KernelPlan &plan, const ir::Value *value) {
  std::vector<const ir::Value *> stack{value};
  std::set<const ir::Value *> seen;
  while (!stack.empty()) {
    const ir::Value *v = stack.back();
    stack.pop_back();
    const ir::Node *producer = v->producer();
    if (!seen.insert(v).second || plan.bufferOf.count(v) || !producer)
      continue;
    switch (producer->op()) {
    case OpKind::Exp: case OpKind::Expm1: case OpKind::Log: case OpKind::Log1p: case OpKind::Tanh:
    case OpKind::Sigmoid: case OpKind::Erf: case OpKind::Pow: case OpKind::Sin: case OpKind::Cos:
    case OpKind::Tan: case OpKind::Asin: case OpKind::Acos: case OpKind::Atan: case OpKind::Sinh:
    case OpKind::Cosh: case OpKind::Asinh: case OpKind::Acosh: case OpKind::Atanh:
      return true;
    default:
      for (const ir::Value *input : producer->inputs())
        stack.push_back(input);
    }
  }
  return false;
}

/// Whether computing any of `roots` inline reads `value` (through values without buffers; the
/// stage's reductions are per-row values computed before, not read again).
bool computedFrom(const KernelPlan &plan, const Stage &stage, const std::vector<const ir::Value *> &roots,
                  const ir::Value *value) {
  std::vector<const ir::Value *> stack = roots;
  std::set<const ir::Value *> seen;
  while (!stack.empty()) {
    const ir::Value *v = stack.back();
    stack.pop_back();
    if (v == value)
      return true;
    if (!seen.insert(v).second || plan.bufferOf.count(v) || !v->producer() ||
        std::count(stage.reductions.begin(), stage.reductions.end(), v->producer()))
      continue;
    for (const ir::Value *input : v->producer()->inputs())
      stack.push_back(input);
  }
  return false;
}

std::string updateStatement(const ir::Node &node, const ReductionAccumulator &accumulator, const std::string &acc,
                            const std::string &index, const std::string &x, const std::string &axisCoord) {
  bool floating = isFloat(node.input(0)->dtype());
  switch (node.op()) {
  case OpKind::ReduceSum:
  case OpKind::ReduceProd: return foldStatement(node, acc, "", x);
  case OpKind::ReduceMax:
    return floating ? fmt::format("{0} = ({1} > {0} || {1} != {1}) ? {1} : {0};", acc, x)
                    : fmt::format("{0} = {1} > {0} ? (int64_t){1} : {0};", acc, x);
  case OpKind::ReduceMin:
    return floating ? fmt::format("{0} = ({1} < {0} || {1} != {1}) ? {1} : {0};", acc, x)
                    : fmt::format("{0} = {1} < {0} ? (int64_t){1} : {0};", acc, x);
  case OpKind::ArgMax:
  case OpKind::ArgMin: {
    bool wantMax = node.op() == OpKind::ArgMax;
    bool selectLast = node.attrInt("select_last_index") == 1;
    return fmt::format("if ({3} == 0 || kiln_arg_replaces<{6}>({2}, {0}, {4}, {5})) {{ {0} = {2}; {1} = {3}; }}",
                       acc, index, x, axisCoord, wantMax ? "true" : "false", selectLast ? "true" : "false",
                       accumulator.type);
  }
  default: break;
  }
  fail("codegen: internal error: {} is not a reduction", node.opName());
}

} // namespace

std::string foldStatement(const ir::Node &node, const std::string &acc, const std::string &nan, const std::string &x) {
  bool floating = isFloat(node.input(0)->dtype());
  switch (node.op()) {
  case OpKind::ReduceSum:
    return floating ? fmt::format("{} += (double){};", acc, x) : fmt::format("{0} = kiln_wadd({0}, {1});", acc, x);
  case OpKind::ReduceProd:
    return floating ? fmt::format("{} *= (double){};", acc, x) : fmt::format("{0} = kiln_wmul({0}, {1});", acc, x);
  case OpKind::ReduceMax:
  case OpKind::ReduceMin: {
    const char *better = node.op() == OpKind::ReduceMax ? ">" : "<";
    if (floating)
      return fmt::format("{0} = ({1} {2} {0}) ? {1} : {0}; {3} |= ({1} != {1});", acc, x, better, nan);
    return fmt::format("{0} = ({1} {2} {0}) ? (int64_t){1} : {0};", acc, x, better);
  }
  default: break;
  }
  fail("codegen: internal error: {} has no lane fold", node.opName());
}

namespace {

bool computedFrom(const ir::Value *value, const std::set<const ir::Value *> &targets,
                  std::set<const ir::Value *> &seen) {
  if (targets.count(value))
    return true;
  if (!seen.insert(value).second)
    return false;
  const ir::Node *producer = value->producer();
  if (!producer)
    return false;
  for (const ir::Value *input : producer->inputs())
    if (computedFrom(input, targets, seen))
      return true;
  return false;
}

} // namespace

bool computedFrom(const ir::Value *value, const std::set<const ir::Value *> &targets) {
  std::set<const ir::Value *> seen;
  return computedFrom(value, targets, seen);
}

std::vector<std::vector<const ir::Node *>> reductionPasses(const std::vector<const ir::Node *> &reductions,
                                                           const std::function<bool(const ir::Node &)> &alone) {
  std::vector<std::vector<const ir::Node *>> passes;
  std::set<const ir::Value *> results;
  for (const ir::Node *node : reductions) {
    if (passes.empty() || alone(*node) || alone(*passes.back().front()) || computedFrom(node->input(0), results)) {
      passes.emplace_back();
      results.clear();
    }
    passes.back().push_back(node);
    results.insert(node->output());
  }
  return passes;
}

ReductionAccumulator reductionAccumulator(OpKind op, DType dtype) {
  bool floating = isFloat(dtype);
  std::string native = cType(dtype);
  switch (op) {
  case OpKind::ReduceSum: return floating ? ReductionAccumulator{"double", "0.0"} : ReductionAccumulator{"int64_t", "0"};
  case OpKind::ReduceProd: return floating ? ReductionAccumulator{"double", "1.0"} : ReductionAccumulator{"int64_t", "1"};
  case OpKind::ReduceMax:
    return floating ? ReductionAccumulator{native, literal(dtype, -INFINITY)} : ReductionAccumulator{"int64_t", "INT64_MIN"};
  case OpKind::ReduceMin:
    return floating ? ReductionAccumulator{native, literal(dtype, INFINITY)} : ReductionAccumulator{"int64_t", "INT64_MAX"};
  case OpKind::ArgMax:
  case OpKind::ArgMin: return ReductionAccumulator{floating ? native : "int64_t", "0"};
  default: break;
  }
  fail("codegen: internal error: {} is not a reduction", ir::opName(op));
}

void emitRowsStage(KernelEmitter &e, int stageIndex, KernelText &out) {
  const Stage &stage = e.plan().stages.at(static_cast<size_t>(stageIndex));
  if (columnReductionFits(stage)) {
    try {
      if (emitColumnReductionStage(e, stageIndex, out))
        return;
    } catch (const StrategyMismatch &) {
      // A value the column form cannot place per lane: the row form may still express it
      // (or throws the mismatch itself).
    }
  }
  const Shape &domain = stage.domain;
  Shape keptShape, reducedShape;
  for (size_t d = 0; d < domain.size(); ++d)
    (stage.reduced[d] ? reducedShape : keptShape).push_back(domain[d]);
  int64_t rows = numElements(keptShape), rowSize = numElements(reducedShape);
  if (rows == 0)
    return;

  size_t lastReduced = domain.size();
  for (size_t d = 0; d < domain.size(); ++d)
    if (stage.reduced[d])
      lastReduced = d;
  // The inner loops run over dims [mergeFrom, lastReduced] as one: a short last reduced dim
  // (a batch norm's 28 x 28 or 7 x 7 planes) takes the reduced dims right before it until the
  // loop is long enough for lanes, as elementwise stages merge short rows. The dims'
  // coordinates are unflattened from the merged one, which folds back into a plain stride
  // wherever a tensor is laid out along them.
  size_t mergeFrom = lastReduced;
  for (int64_t extent = lastReduced < domain.size() ? domain[lastReduced] : 0;
       extent > 0 && (extent < kLaneMinimum || extent % kLanes != 0) && mergeFrom > 0 && stage.reduced[mergeFrom - 1];)
    extent = checkedMul(extent, domain[--mergeFrom], "merged reduction extent");

  // The function's text with the inner loop starting at dim `innerFrom`, and how many of its
  // inner-loop accesses that turned into a division (a tensor not laid out along the merged
  // dims): then the stage is emitted unmerged.
  auto emitFunction = [&](size_t innerFrom) {
    int irregular = 0;
    auto watch = [&](const Index &loop) {
      irregular += e.irregularInnerAccesses();
      if (!loop.terms.empty())
        e.watchInnerLoop(e.arena().atom(loop.terms[0].first).code);
    };
    e.beginFunction(stageIndex);
    e.open("for (int64_t r = begin; r < end; ++r)");
    Index row = e.arena().var("r", rows, e.depth());
    std::vector<Index> keptCoords = unflattenIndex(e.arena(), row, keptShape);

    const Shape mergedShape(domain.begin() + static_cast<std::ptrdiff_t>(std::min(innerFrom, domain.size())),
                            domain.begin() + static_cast<std::ptrdiff_t>(std::min(lastReduced + 1, domain.size())));
    const int64_t innerExtent = lastReduced < domain.size() ? numElements(mergedShape) : 0;
    // Loops opened over the reduced dims: those before the inner loop, and the inner loop.
    const size_t reducedLoops = reducedShape.size() - (lastReduced - innerFrom);
    auto setInnerCoords = [&](std::vector<Index> &coords, const Index &inner) {
      std::vector<Index> parts = unflattenIndex(e.arena(), inner, mergedShape);
      for (size_t i = 0; i < parts.size(); ++i)
        coords[innerFrom + i] = parts[i];
    };

    // Domain coordinates with the row's kept ones and fresh loops over the reduced dims before
    // the merged inner loop (whose coordinates the caller sets).
    auto openOuterReducedLoops = [&]() {
      std::vector<Index> coords(domain.size());
      size_t kept = 0;
      for (size_t d = 0; d < domain.size(); ++d) {
        if (!stage.reduced[d])
          coords[d] = keptCoords[kept++];
        else if (d < innerFrom)
          coords[d] = e.openLoop(domain[d], "j");
      }
      return coords;
    };
    // Domain coordinates with fresh loops over all reduced dims (opened here, closed by caller);
    // `inner`, when given, receives the inner loop's index (left as it is without reduced dims).
    auto openReducedLoops = [&](Index *inner = nullptr) {
      std::vector<Index> coords = openOuterReducedLoops();
      if (lastReduced < domain.size()) {
        Index loop = e.openLoop(innerExtent, "j");
        watch(loop);
        setInnerCoords(coords, loop);
        if (inner)
          *inner = loop;
      }
      return coords;
    };
    auto closeReducedLoops = [&]() {
      for (size_t d = 0; d < reducedLoops; ++d)
        e.close();
    };
    // Whether a reduction runs as a lane pass: kLanes accumulators over the innermost reduced
    // dim, so that the compiler vectorises it (a single one is a serial dependency it may not
    // reorder). 16-bit float sums and products keep the reference's order: their rounding to
    // f16/bf16 can expose the last bit of a differently ordered double accumulation.
    auto inLanes = [&](const ir::Node &node) {
      DType inType = node.input(0)->dtype();
      bool arg = node.op() == OpKind::ArgMax || node.op() == OpKind::ArgMin;
      bool halfFloat = inType == DType::F16 || inType == DType::BF16;
      bool orderSensitive = halfFloat && (node.op() == OpKind::ReduceSum || node.op() == OpKind::ReduceProd);
      return !arg && !orderSensitive && rowSize > 0 && innerExtent >= kLaneMinimum;
    };
    // The per-row result of a reduction, which later passes read in place of the node.
    auto finish = [&](const ir::Node &node, const std::string &accName, const std::string &indexName) {
      DType outType = node.output()->dtype();
      bool arg = node.op() == OpKind::ArgMax || node.op() == OpKind::ArgMin;
      std::string result = arg ? indexName : accName;
      // A NaN in the row makes max/min NaN; the reference returns the positive quiet NaN
      // whatever NaN it met, so the sign of the one the loop kept must not leak through.
      bool extremum = node.op() == OpKind::ReduceMax || node.op() == OpKind::ReduceMin;
      if (extremum && isFloat(node.input(0)->dtype()))
        result = fmt::format("({0} != {0} ? __builtin_nan(\"\") : {0})", accName);
      Scalar scalar = e.declare(outType, fmt::format("({}){}", cType(outType), result), e.depth());
      e.setOverride(node.output(), unflattenIndex(e.arena(), row, node.output()->shape()), scalar);
    };

    // Lane passes over the same rows share one loop when none reads another's result (a batch
    // norm's gradient sums dy and dy * x-hat): the row is read once, and what the reductions'
    // inputs have in common is computed once.
    std::vector<std::vector<const ir::Node *>> passes =
        reductionPasses(stage.reductions, [&](const ir::Node &node) { return !inLanes(node); });

    // A row cache: the operand of a lane pass that the tail computes again (softmax's
    // exp(x - max), summed, then divided by the sum) is kept per row as the pass computes it,
    // and the tail reads it back instead of taking the transcendental twice. Only for rows that
    // are one inner loop of at most kMaxRowCache elements, which stay in L1.
    std::vector<const ir::Value *> tailValues;
    for (const Store &store : stage.stores)
      if (store.value->shape() == domain)
        tailValues.push_back(store.value);
    const ir::Value *cached = nullptr;
    if (reducedLoops == 1 && innerExtent <= kMaxRowCache && !tailValues.empty())
      for (const ir::Node *node : stage.reductions)
        if (inLanes(*node) && node->input(0)->shape() == domain && isFloat(node->input(0)->dtype()) &&
            transcendental(e.plan(), node->input(0)) && computedFrom(e.plan(), stage, tailValues, node->input(0)))
          cached = node->input(0);
    const std::string cache = cached ? e.fresh("rc") : "";
    if (cached)
      e.line(fmt::format("{} {}[{}];", cType(cached->dtype()), cache, innerExtent));
    // Keeps the cached operand's value at inner position `inner`.
    auto keep = [&](const ir::Node &node, const Scalar &x, const Index &inner) {
      if (node.input(0) == cached)
        e.line(fmt::format("{}[{}] = {};", cache, e.arena().code(inner), x.code));
    };
    for (const std::vector<const ir::Node *> &pass : passes) {
      const ir::Node &first = *pass.front();
      if (!inLanes(first)) {
        ReductionAccumulator acc = reductionAccumulator(first.op(), first.input(0)->dtype());
        std::string accName = e.fresh("acc"), indexName = e.fresh("idx");
        if (first.op() == OpKind::ArgMax || first.op() == OpKind::ArgMin)
          e.line(fmt::format("int64_t {} = 0;", indexName));
        e.line(fmt::format("{} {} = {};", acc.type, accName, acc.init));
        if (rowSize > 0) {
          std::vector<Index> coords = openReducedLoops();
          Scalar x = e.value(first.input(0), coords);
          std::string axisCoord;
          for (size_t d = 0; d < domain.size(); ++d)
            if (stage.reduced[d])
              axisCoord = e.arena().code(coords[d]);
          e.line(updateStatement(first, acc, accName, indexName, x.code, axisCoord));
          closeReducedLoops();
        }
        finish(first, accName, indexName);
        continue;
      }
      struct LaneAcc {
        const ir::Node *node;
        ReductionAccumulator acc;
        std::string name, lanes;
        bool splitNan;
      };
      std::vector<LaneAcc> accs;
      for (const ir::Node *node : pass) {
        LaneAcc a{node, reductionAccumulator(node->op(), node->input(0)->dtype()), e.fresh("acc"), "", false};
        a.lanes = a.name + "l";
        a.splitNan = node->input(0)->dtype() == DType::F32 &&
                     (node->op() == OpKind::ReduceMax || node->op() == OpKind::ReduceMin);
        e.line(fmt::format("{} {}[{}];", a.acc.type, a.lanes, kLanes));
        e.line(fmt::format("for (int l = 0; l < {}; ++l) {}[l] = {};", kLanes, a.lanes, a.acc.init));
        if (a.splitNan)
          e.line(fmt::format("int {}n[{}] = {{0}};", a.lanes, kLanes));
        accs.push_back(a);
      }
      std::vector<Index> coords = openOuterReducedLoops();
      int64_t extent = innerExtent, whole = extent / kLanes;
      Index block = e.openLoop(whole, "jb");
      // Lanes are independent (each has its accumulator) and must stay a loop: unrolled
      // completely before the vectoriser runs, a row max became 16 scalar chains (3.7x slower
      // on ViT's softmax rows of 197).
      Index laneIndex = e.openIndependentLoop(kLanes);
      const std::string lane = e.arena().code(laneIndex);
      watch(laneIndex);
      const Index inner = e.arena().add(e.arena().scale(block, kLanes), laneIndex);
      setInnerCoords(coords, inner);
      for (const LaneAcc &a : accs) {
        Scalar x = e.value(a.node->input(0), coords);
        keep(*a.node, x, inner);
        // An f32 max/min keeps its NaN test apart from the select (foldStatement): 2.5x on
        // softmax's row max, where GCC unrolled the lane loop and could not vectorise
        // `a > m || a != a`.
        const std::string acc = fmt::format("{}[{}]", a.lanes, lane);
        e.line(a.splitNan ? foldStatement(*a.node, acc, fmt::format("{}n[{}]", a.lanes, lane), x.code)
                          : updateStatement(*a.node, a.acc, acc, "", x.code, ""));
      }
      e.close();
      e.close();
      if (extent % kLanes != 0) {
        Index rest = e.openLoop(extent % kLanes, "jr");
        watch(rest);
        const Index inner = e.arena().addConstant(rest, whole * kLanes);
        setInnerCoords(coords, inner);
        for (const LaneAcc &a : accs) {
          Scalar tail = e.value(a.node->input(0), coords);
          keep(*a.node, tail, inner);
          e.line(updateStatement(*a.node, a.acc, a.lanes + "[0]", "", tail.code, ""));
        }
        e.close();
      }
      for (size_t d = 0; d + 1 < reducedLoops; ++d)
        e.close();
      for (const LaneAcc &a : accs) {
        if (a.splitNan) // a NaN seen by any lane becomes the lane's value: the combine below keeps it
          e.line(fmt::format("for (int l = 0; l < {0}; ++l) {1}[l] = {1}n[l] ? __builtin_nanf(\"\") : {1}[l];",
                             kLanes, a.lanes));
        e.line(fmt::format("{} {} = {}[0];", a.acc.type, a.name, a.lanes));
        e.line(fmt::format("for (int l = 1; l < {}; ++l) {}", kLanes,
                           updateStatement(*a.node, a.acc, a.name, "", a.lanes + "[l]", "")));
      }
      for (const LaneAcc &a : accs)
        finish(*a.node, a.name, "");
    }

    // The tail over the whole domain, then the per-row values.
    bool hasTail = false;
    for (const Store &store : stage.stores)
      hasTail = hasTail || store.value->shape() == domain;
    if (hasTail && rowSize > 0) {
      Index inner;
      std::vector<Index> coords = openReducedLoops(&inner);
      if (cached) // cached implies one inner loop over the reduced dims
        e.setOverride(cached, coords, Scalar{fmt::format("{}[{}]", cache, e.arena().code(inner)), e.depth()});
      for (const Store &store : stage.stores)
        if (store.value->shape() == domain)
          e.store(store, coords, e.value(store.value, coords));
      if (cached)
        e.clearOverride(cached);
      closeReducedLoops();
    }
    for (const Store &store : stage.stores) {
      if (store.value->shape() == domain)
        continue;
      std::vector<Index> coords = unflattenIndex(e.arena(), row, store.value->shape());
      e.store(store, coords, e.value(store.value, coords));
    }
    e.close();
    irregular += e.irregularInnerAccesses();
    return std::make_pair(e.endFunction(), irregular);
  };
  auto [body, irregular] = emitFunction(mergeFrom);
  if (mergeFrom != lastReduced && irregular > 0)
    body = emitFunction(lastReduced).first;
  std::string fn = fmt::format("{}_s{}", e.prefix(), stageIndex);
  out.functions += fmt::format("static void {}(void *vctx, int64_t begin, int64_t end) {{\n{}}}\n\n", fn, body);
  out.body.push_back(runRows(fn, rows, rowSize, stageElementCost(stage)));
}

} // namespace kiln::codegen
