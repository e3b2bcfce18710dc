// Loop stages: one loop nest over the stored values' shape.
//
// The dims before the last are flattened into one row index, which is what parallel_for
// splits; the last dim is the inner loop, contiguous in every stored value, with restrict
// pointers and no calls it cannot inline, so the compiler vectorises it (-O3 -march=native).
// When the rows are too few to keep the pool busy (a long vector, batch 1), the last dim is cut
// into blocks that become rows too.
//
// A stage that reads some operand transposed (its address jumps along the inner loop) walks
// the last two dims in tiles instead, so that the lines of the transposed operand a tile
// touches are still in L1 when the tile's next row reads them: a 1024x1024 f32 transpose
// went from 9.7 ms to about 1 ms here. The stage is emitted once plainly to find out.
#include <algorithm>
#include <functional>
#include <map>
#include <set>

#include "codegen/ScalarOps.h"
#include "codegen/StageEmitters.h"
#include "core/ShapeMath.h"
#include "ir/ElementwiseOps.h"

namespace kiln::codegen {

namespace {

constexpr int64_t kBlock = 4096;   // elements of one block of a split inner dim
constexpr int64_t kFewRows = 16;   // below this many rows, a long inner dim is split
constexpr int64_t kTileRows = 32;  // a tile of a transposing stage: 32 x 64 elements
constexpr int64_t kTileCols = 64;
constexpr int64_t kShortRow = 16;  // an inner loop shorter than this is merged (openPlainLoops)

struct LoopShape {
  int64_t rows = 0;        // parallel rows
  int64_t rowElements = 0; // elements per row (at most)
};

// Opens the loops of a plain (row x inner block) walk and returns the domain coordinates.
// With mergeShortRows, a last dim shorter than a vector takes the dims before it into the
// inner loop until it is one vector long (7x7 -> 49, 14x14 -> 196): a 7- or 14-step loop is
// not vectorised usefully. The caller keeps this only if every access stays a fixed stride.
std::vector<Index> openPlainLoops(KernelEmitter &e, const Shape &domain, LoopShape &shape, bool mergeShortRows) {
  size_t innerDims = domain.empty() ? 0 : 1;
  int64_t inner = domain.empty() ? 1 : domain.back();
  while (mergeShortRows && innerDims < domain.size() && inner < kShortRow)
    inner = checkedMul(inner, domain[domain.size() - ++innerDims], "merged row length");
  Shape rowShape(domain.begin(), domain.end() - static_cast<std::ptrdiff_t>(innerDims));
  Shape innerShape(domain.end() - static_cast<std::ptrdiff_t>(innerDims), domain.end());
  int64_t outerRows = numElements(rowShape);
  int64_t block = outerRows < kFewRows && inner > 2 * kBlock ? kBlock : inner;
  int64_t blocks = (inner + block - 1) / block;
  if (blocks > 1)
    rowShape.push_back(blocks);
  shape = {outerRows * blocks, block};
  e.open("for (int64_t r = begin; r < end; ++r)");
  std::vector<Index> coords = unflattenIndex(e.arena(), e.arena().var("r", shape.rows, e.depth()), rowShape);
  Index innerCoord;
  if (blocks > 1) {
    Index blockIndex = coords.back();
    coords.pop_back();
    std::string start = e.fresh("j");
    e.line(fmt::format("const int64_t {} = {} * {};", start, e.arena().code(blockIndex), block));
    std::string j = e.fresh("i");
    e.openIndependent(fmt::format("for (int64_t {0} = 0; {0} < std::min<int64_t>({1}, {2} - {3}); ++{0})", j, block, inner, start));
    innerCoord = e.arena().add(e.arena().scale(blockIndex, block), e.arena().var(j, block, e.depth()));
    e.watchInnerLoop(j);
  } else {
    innerCoord = e.openIndependentLoop(inner);
    if (!innerCoord.terms.empty())
      e.watchInnerLoop(e.arena().atom(innerCoord.terms[0].first).code);
  }
  if (!domain.empty())
    for (const Index &coord : unflattenIndex(e.arena(), innerCoord, innerShape))
      coords.push_back(coord);
  return coords;
}

// Opens the loops of a tiled walk over the last two dims.
std::vector<Index> openTiledLoops(KernelEmitter &e, const Shape &domain, LoopShape &shape) {
  size_t rank = domain.size();
  int64_t rowsDim = domain[rank - 2], colsDim = domain[rank - 1];
  Shape tileShape(domain.begin(), domain.end() - 2);
  tileShape.push_back((rowsDim + kTileRows - 1) / kTileRows);
  tileShape.push_back((colsDim + kTileCols - 1) / kTileCols);
  shape = {numElements(tileShape), kTileRows * kTileCols};
  e.open("for (int64_t r = begin; r < end; ++r)");
  std::vector<Index> coords = unflattenIndex(e.arena(), e.arena().var("r", shape.rows, e.depth()), tileShape);
  Index tileCol = coords.back();
  coords.pop_back();
  Index tileRow = coords.back();
  coords.pop_back();
  auto openTileLoop = [&](const Index &tile, int64_t size, int64_t dim, bool inner) {
    std::string start = e.fresh("j"), i = e.fresh("i");
    e.line(fmt::format("const int64_t {} = {} * {};", start, e.arena().code(tile), size));
    std::string header = fmt::format("for (int64_t {0} = 0; {0} < std::min<int64_t>({1}, {2} - {3}); ++{0})", i, size, dim, start);
    inner ? e.openIndependent(header) : e.open(header);
    return e.arena().add(e.arena().scale(tile, size), e.arena().var(i, size, e.depth()));
  };
  coords.push_back(openTileLoop(tileRow, kTileRows, rowsDim, false));
  coords.push_back(openTileLoop(tileCol, kTileCols, colsDim, true));
  return coords;
}

// Where some concat that the stage reads at the domain's own coordinates (through same-shape
// elementwise ops, or as an operand of such a concat) switches operand, along the axis with
// the most such cuts. Walking that axis in one segment per operand lets the emitter see which
// operand each coordinate reads (KernelEmitter::concat checks the coordinate's range), so the
// body becomes plain loads instead of a clamp and a select per operand per element: a
// [1024, 768] concat of three permuted [., 256] gradients took 2.6 ms that way, about a tenth
// of it now; DenseNet-121 at batch 8, whose channel concats of up to 49 operands cannot lie in
// place (each image's slice is its own run of bytes), spent half its time in such selects.
struct ConcatCuts {
  size_t axis = 0;
  std::vector<int64_t> cuts; // inside (0, domain[axis]), ascending; empty: no segments
};

ConcatCuts concatCuts(const KernelPlan &plan, const Stage &stage) {
  const Shape &domain = stage.domain;
  std::map<size_t, std::set<int64_t>> cutsByAxis;
  auto storedHere = [&](const ir::Value *value) {
    for (const Store &store : stage.stores)
      if (store.value == value)
        return true;
    return false;
  };
  constexpr size_t kUnshifted = ~size_t{0};
  // `value` is read at the domain's coordinates, with the one along `shifted` (if any) moved
  // by -offset; its shape is the domain's but along `shifted`.
  std::function<void(const ir::Value *, size_t, int64_t)> visit = [&](const ir::Value *value, size_t shifted,
                                                                      int64_t offset) {
    const ir::Node *node = value->producer();
    if (!node || (plan.bufferOf.count(value) && !storedHere(value)))
      return; // loaded from memory
    const Shape &shape = value->shape();
    if (shape.size() != domain.size())
      return;
    for (size_t d = 0; d < shape.size(); ++d)
      if (d != shifted && shape[d] != domain[d])
        return;
    if (node->op() == ir::OpKind::Concat) {
      int64_t axisAttr = node->attrInt("axis");
      const size_t axis = static_cast<size_t>(axisAttr < 0 ? axisAttr + static_cast<int64_t>(shape.size()) : axisAttr);
      if (shifted != kUnshifted && shifted != axis)
        return;
      int64_t begin = 0;
      for (const ir::Value *operand : node->inputs()) {
        if (begin > 0)
          cutsByAxis[axis].insert(offset + begin);
        visit(operand, axis, offset + begin);
        begin += operand->shape()[axis];
      }
      return;
    }
    const ir::FusionKind kind = ir::opTraits(node->op()).fusion;
    if (kind != ir::FusionKind::Elementwise && kind != ir::FusionKind::Broadcast)
      return; // operands of the same shape as the result are read at the same coordinates
    for (const ir::Value *operand : node->inputs())
      if (operand->shape() == shape)
        visit(operand, shifted, offset);
  };
  for (const Store &store : stage.stores)
    if (store.value->shape() == domain)
      visit(store.value, kUnshifted, 0);
  ConcatCuts best;
  for (const auto &[axis, cuts] : cutsByAxis) { // ascending axes: a tie goes to the inner one
    std::vector<int64_t> inside;
    for (int64_t cut : cuts)
      if (cut > 0 && cut < domain[axis])
        inside.push_back(cut);
    if (!inside.empty() && inside.size() >= best.cuts.size())
      best = {axis, inside};
  }
  return best;
}

/// The segment bounds along the cut axis: 0, the cuts, the axis's extent.
std::vector<int64_t> segmentBounds(const ConcatCuts &cuts, int64_t extent) {
  std::vector<int64_t> bounds{0};
  bounds.insert(bounds.end(), cuts.cuts.begin(), cuts.cuts.end());
  bounds.push_back(extent);
  return bounds;
}

void storeSegment(KernelEmitter &e, const Stage &stage, const std::vector<Index> &coords, const ir::Value *zero) {
  if (zero)
    e.setOverride(zero, coords, Scalar{literal(zero->dtype(), 0), 0});
  for (const Store &store : stage.stores)
    e.store(store, coords, e.value(store.value, coords));
}

// Cut along the last axis: rows are the dims before it, and each row's inner loop is cut at
// the cuts, each segment its own loop and body.
std::string innerSegmentedBody(KernelEmitter &e, int stageIndex, const ConcatCuts &cuts, const ir::Value *zero,
                               LoopShape &shape) {
  const Stage &stage = e.plan().stages.at(static_cast<size_t>(stageIndex));
  const Shape &domain = stage.domain;
  Shape rowShape(domain.begin(), domain.end() - 1);
  shape = {numElements(rowShape), domain.back()};
  e.beginFunction(stageIndex);
  e.open("for (int64_t r = begin; r < end; ++r)");
  std::vector<Index> rowCoords = unflattenIndex(e.arena(), e.arena().var("r", shape.rows, e.depth()), rowShape);
  std::vector<int64_t> bounds = segmentBounds(cuts, domain.back());
  for (size_t s = 0; s + 1 < bounds.size(); ++s) {
    Index local = e.openIndependentLoop(bounds[s + 1] - bounds[s]);
    std::vector<Index> coords = rowCoords;
    coords.push_back(e.arena().addConstant(local, bounds[s]));
    storeSegment(e, stage, coords, zero);
    e.close();
  }
  while (e.depth() > 0)
    e.close();
  return e.endFunction();
}

// Cut along an outer axis: a row is one index along the dims up to the cut axis, and holds
// the dims after it, walked as the plain walk's inner loop (merged into one). Each segment
// walks the rows of [begin, end) that fall in it, as an outer index o and a local index along
// the axis, so every coordinate along the axis has the segment's range.
std::string outerSegmentedBody(KernelEmitter &e, int stageIndex, const ConcatCuts &cuts, const ir::Value *zero,
                               LoopShape &shape) {
  const Stage &stage = e.plan().stages.at(static_cast<size_t>(stageIndex));
  const Shape &domain = stage.domain;
  const auto axisEnd = domain.begin() + static_cast<std::ptrdiff_t>(cuts.axis);
  const Shape outerShape(domain.begin(), axisEnd), innerShape(axisEnd + 1, domain.end());
  const int64_t extent = domain[cuts.axis], outer = numElements(outerShape), inner = numElements(innerShape);
  shape = {outer * extent, inner};
  e.beginFunction(stageIndex);
  std::vector<int64_t> bounds = segmentBounds(cuts, extent);
  for (size_t s = 0; s + 1 < bounds.size(); ++s) {
    const int64_t first = bounds[s], size = bounds[s + 1] - first;
    const std::string o = e.fresh("o"), lo = e.fresh("lo"), hi = e.fresh("hi"), c = e.fresh("c");
    e.open(fmt::format("for (int64_t {0} = begin / {1}; {0} * {1} < end; ++{0})", o, extent));
    std::vector<Index> coords = unflattenIndex(e.arena(), e.arena().var(o, outer, e.depth()), outerShape);
    e.line(fmt::format("const int64_t {} = std::max<int64_t>(begin - {} * {}, {}) - {};", lo, o, extent, first, first));
    e.line(fmt::format("const int64_t {} = std::min<int64_t>(end - {} * {}, {}) - {};", hi, o, extent, first + size,
                       first));
    e.open(fmt::format("for (int64_t {0} = {1}; {0} < {2}; ++{0})", c, lo, hi));
    coords.push_back(e.arena().addConstant(e.arena().var(c, size, e.depth()), first));
    Index innerCoord = e.openIndependentLoop(inner);
    if (!innerCoord.terms.empty())
      e.watchInnerLoop(e.arena().atom(innerCoord.terms[0].first).code);
    for (const Index &coord : unflattenIndex(e.arena(), innerCoord, innerShape))
      coords.push_back(coord);
    storeSegment(e, stage, coords, zero);
    while (e.depth() > 0)
      e.close();
  }
  return e.endFunction();
}

} // namespace

std::string runRows(const std::string &fn, int64_t rows, int64_t rowElements, int64_t elementCost) {
  const int64_t rowCost = std::max<int64_t>(rowElements, 1) * std::max<int64_t>(elementCost, 1);
  if (rows <= 1 || rows * rowCost < kMinParallelElements)
    return fmt::format("{}(&ctx, 0, {});", fn, rows);
  int64_t grain = std::max<int64_t>(1, (kMinParallelElements / 2 + rowCost - 1) / rowCost);
  return fmt::format("rt->parallel_for(rt, {}, {}, {}, &ctx);", rows, grain, fn);
}

int64_t stageElementCost(const Stage &stage) {
  auto callsMath = [](std::string_view spelling) {
    return spelling.find("std::") != std::string_view::npos || spelling.find("kiln_") != std::string_view::npos;
  };
  std::set<const ir::Node *> seen;
  std::vector<const ir::Node *> pending;
  auto visit = [&](const ir::Value *value) {
    const ir::Node *producer = value->producer();
    if (producer && seen.insert(producer).second) // the stage's body; its inputs have none
      pending.push_back(producer);
  };
  for (const Store &store : stage.stores)
    visit(store.value);
  for (const ir::Node *reduction : stage.reductions)
    visit(reduction->output());
  int64_t cost = 1;
  while (!pending.empty()) {
    const ir::Node *node = pending.back();
    pending.pop_back();
    if (const ir::UnaryOpRow *row = ir::unaryOpRow(node->op()))
      cost += callsMath(row->f32Spelling.empty() ? row->spelling : row->f32Spelling) ? kMathCallCost : 0;
    else if (const ir::BinaryOpRow *row = ir::binaryOpRow(node->op()))
      cost += callsMath(row->spelling) ? kMathCallCost : 0;
    for (const ir::Value *input : node->inputs())
      visit(input);
  }
  return cost;
}

void emitLoopStage(KernelEmitter &e, int stageIndex, KernelText &out, const ir::Value *zero) {
  const Stage &stage = e.plan().stages.at(static_cast<size_t>(stageIndex));
  const Shape &domain = stage.domain;
  if (numElements(domain) == 0 || stage.stores.empty())
    return;
  bool tileable = domain.size() >= 2 && domain[domain.size() - 2] >= kTileRows && domain.back() >= kTileCols;
  std::string fn = fmt::format("{}_s{}", e.prefix(), stageIndex);
  std::string body;
  LoopShape shape;
  const ConcatCuts cuts = concatCuts(e.plan(), stage);
  const bool inner = cuts.axis + 1 == domain.size();
  // Segments keep their rows whole (the dims before the cut axis, and the axis itself when it
  // is not the last), so they need rows enough for the pool, as the blocks below do.
  const size_t rowDims = inner ? cuts.axis : cuts.axis + 1;
  if (!cuts.cuts.empty() && (numElements(Shape(domain.begin(), domain.begin() + rowDims)) >= kFewRows ||
                             numElements(Shape(domain.begin() + rowDims, domain.end())) <= 2 * kBlock)) {
    body = inner ? innerSegmentedBody(e, stageIndex, cuts, zero, shape)
                 : outerSegmentedBody(e, stageIndex, cuts, zero, shape);
    out.functions += fmt::format("static void {}(void *vctx, int64_t begin, int64_t end) {{\n{}}}\n\n", fn, body);
    out.body.push_back(runRows(fn, shape.rows, shape.rowElements, stageElementCost(stage)));
    return;
  }
  // Walks in order of preference: short rows merged, plain, tiled; each is emitted to see
  // whether its inner loop reads with fixed strides, and the first that does is kept.
  enum class Walk { Merged, Plain, Tiled };
  bool shortRows = domain.size() >= 2 && domain.back() < kShortRow;
  for (Walk walk : {Walk::Merged, Walk::Plain, Walk::Tiled}) {
    if (walk == Walk::Merged && !shortRows)
      continue;
    e.beginFunction(stageIndex);
    std::vector<Index> coords = walk == Walk::Tiled ? openTiledLoops(e, domain, shape)
                                                    : openPlainLoops(e, domain, shape, walk == Walk::Merged);
    if (zero)
      e.setOverride(zero, coords, Scalar{literal(zero->dtype(), 0), 0});
    for (const Store &store : stage.stores)
      e.store(store, coords, e.value(store.value, coords));
    bool strided = e.stridedInnerLoads() > 0, irregular = e.irregularInnerAccesses() > 0;
    while (e.depth() > 0)
      e.close();
    body = e.endFunction();
    if (walk == Walk::Merged ? !strided && !irregular : walk == Walk::Tiled || !strided || !tileable)
      break;
  }
  out.functions += fmt::format("static void {}(void *vctx, int64_t begin, int64_t end) {{\n{}}}\n\n", fn, body);
  out.body.push_back(runRows(fn, shape.rows, shape.rowElements, stageElementCost(stage)));
}

} // namespace kiln::codegen
