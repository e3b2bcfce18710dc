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

#include "codegen/EmitStages.h"
#include "codegen/ScalarOps.h"

namespace kiln::codegen {

namespace {

constexpr int64_t kBlock = 4096;   // elements of one block of a split inner dim
constexpr int64_t kFewRows = 16;   // below this many rows, a long inner dim is split
constexpr int64_t kTileRows = 32;  // a tile of a transposing stage: 32 x 64 elements
constexpr int64_t kTileCols = 64;

struct LoopShape {
  int64_t rows = 0;        // parallel rows
  int64_t rowElements = 0; // elements per row (at most)
};

// Opens the loops of a plain (row x inner block) walk and returns the domain coordinates.
std::vector<Index> openPlainLoops(KernelEmitter &e, const Shape &domain, LoopShape &shape) {
  int64_t inner = domain.empty() ? 1 : domain.back();
  Shape rowShape(domain.begin(), domain.empty() ? domain.end() : domain.end() - 1);
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
    e.open(fmt::format("for (int64_t {0} = 0; {0} < std::min<int64_t>({1}, {2} - {3}); ++{0})", j, block, inner, start));
    innerCoord = e.arena().add(e.arena().scale(blockIndex, block), e.arena().var(j, block, e.depth()));
    e.watchInnerLoop(j);
  } else {
    innerCoord = e.openLoop(inner);
    if (!innerCoord.terms.empty())
      e.watchInnerLoop(e.arena().atom(innerCoord.terms[0].first).code);
  }
  if (!domain.empty())
    coords.push_back(innerCoord);
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
  auto openTileLoop = [&](const Index &tile, int64_t size, int64_t dim) {
    std::string start = e.fresh("j"), i = e.fresh("i");
    e.line(fmt::format("const int64_t {} = {} * {};", start, e.arena().code(tile), size));
    e.open(fmt::format("for (int64_t {0} = 0; {0} < std::min<int64_t>({1}, {2} - {3}); ++{0})", i, size, dim, start));
    return e.arena().add(e.arena().scale(tile, size), e.arena().var(i, size, e.depth()));
  };
  coords.push_back(openTileLoop(tileRow, kTileRows, rowsDim));
  coords.push_back(openTileLoop(tileCol, kTileCols, colsDim));
  return coords;
}

} // namespace

std::string runRows(const std::string &fn, int64_t rows, int64_t rowElements) {
  if (rows <= 1 || rows * std::max<int64_t>(rowElements, 1) < kMinParallelElements)
    return fmt::format("{}(&ctx, 0, {});", fn, rows);
  int64_t grain = std::max<int64_t>(1, (kMinParallelElements / 2 + rowElements - 1) / std::max<int64_t>(rowElements, 1));
  return fmt::format("rt->parallel_for(rt, {}, {}, {}, &ctx);", rows, grain, fn);
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
  for (bool tiled : {false, true}) {
    e.beginFunction(stageIndex);
    std::vector<Index> coords = tiled ? openTiledLoops(e, domain, shape) : openPlainLoops(e, domain, shape);
    if (zero)
      e.setOverride(zero, coords, Scalar{literal(zero->dtype(), 0), 0});
    for (const Store &store : stage.stores)
      e.store(store, coords, e.value(store.value, coords));
    bool strided = e.stridedInnerLoads() > 0;
    while (e.depth() > 0)
      e.close();
    body = e.endFunction();
    if (tiled || !strided || !tileable)
      break;
  }
  out.functions += fmt::format("static void {}(void *vctx, int64_t begin, int64_t end) {{\n{}}}\n\n", fn, body);
  out.body.push_back(runRows(fn, shape.rows, shape.rowElements));
}

} // namespace kiln::codegen
