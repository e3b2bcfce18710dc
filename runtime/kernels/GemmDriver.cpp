// The blocked GEMM driver (GemmDriver.h).
//
// Loop nest of one region, outermost first (Goto/BLIS blocking, oriented for a 6 x 64 tile
// whose A micro-panel is the operand that stays in L1):
//   jo: column blocks                         B packed for (jo, pc): kc x 2048 floats, in L3,
//                                             or kc x 256 just in time when ic runs once, or
//                                             read in place when prepacked (PanelMajorSource)
//   pc: K blocks of kc <= 512                 (K split into equal blocks)
//   ic: row blocks of 192                     the 192 x kc A block (384 KiB) stays in L2,
//       (all rows when they fit that budget)  packed unless it can be read in place
//   jc: column blocks of 256                  this kc x 256 slice of B (512 KiB) stays in L2;
//                                             a prepacked B's next slice is prefetched into
//                                             L2 a part per row tile (NextSlice)
//   ir: row tiles of 6                        the 6 x kc A micro-panel (12 KiB) stays in L1
//   jr: column tiles of 64                    micro-kernel; C tile touched, then stored
// After the last K block, each 6 x 256 strip is handed to the epilogue right after its
// micro-kernels, while it is still in L1.
//
// Measured on this machine (one Zen 5 core): the micro-kernel alone runs at ~215-220 GFLOP/s
// (L1-resident operands); this nest brings 1024^3 and 2048^3 to ~190-205. The classic order
// (a kc x 64 B micro-panel in L1) was 5-10% slower at 2048. When the region has one row block
// (convolutions with 64 output channels), packing B 256 columns at a time, right before the
// micro-kernels read it from L2, beat packing 2048 columns into L3 by ~10% (3x3 64->64 conv).
#include "runtime/kernels/GemmDriver.h"

#include <algorithm>
#include <atomic>
#include <cstring>

#include "runtime/kernels/GemmBf16.h"
#include "runtime/kernels/GemmMicroKernel.h"

namespace kiln::runtime::kernels::detail {

namespace {

constexpr int64_t kMaxKc = 512;
constexpr int64_t kNc = 256;         // multiple of kPanelWidth
constexpr int64_t kOuterCols = 2048; // multiple of kNc
constexpr int64_t kMc = 192;         // multiple of kMaxRows
// Below this many multiply-adds a batch runs on the calling thread. Waking a sleeping worker
// costs ~5 us here (shared/notes/cpu-kernels.md), 500K multiply-adds at full speed, a spinning
// one ~0.1 us; OpenBLAS draws the line at 262,144 too.
constexpr int64_t kMinParallelMacs = int64_t{1} << 18;
// Parts per thread of a product set cut finer (ThreadPool::kChunksPerThread claims as many).
constexpr int64_t kPartsPerThread = 4;
// K blocks at most this deep prefetch their next C tile for writing (prefetchNextCTile): deeper
// ones multiply far more than they store.
constexpr int64_t kPrefetchCDepth = 64;

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t roundUp(int64_t a, int64_t b) { return ceilDiv(a, b) * b; }

/// Rows per row block of a region `rows` tall whose K blocks are kc deep: all of them when
/// their A block fits the L2 budget of a 192 x 512 one, else 192. A region a little taller
/// than 192 (ViT's 197 tokens) otherwise ends in a block of a few rows that reads every B
/// slice once more, from L3, for a sixth of a tile's work: 197 x 3072 x 768 ran 6% faster
/// as one block.
int64_t rowBlock(int64_t rows, int64_t kc) { return rows * kc <= kMc * kMaxKc ? rows : kMc; }

/// The depth of the K blocks of a product: K cut into equal blocks of at most kMaxKc, even when
/// there are several, so that every block starts at an even row: bf16 operands stored in
/// k-pairs (Product::bf16Panels, bf16A) are read from there.
int64_t kBlockDepth(int64_t k) {
  const int64_t depth = ceilDiv(k, ceilDiv(k, kMaxKc));
  return depth < k ? roundUp(depth, 2) : depth;
}

/// Where the row panel that holds row `row` (a multiple of kMaxRows) keeps its pairs of the K
/// block that starts at row pc (kc deep) of bf16 row panels of an M x K matrix
/// (packBf16Panels): every block before it holds kBlockDepth(k) (even) x M rounded up to
/// kMaxRows elements.
int64_t bf16PanelOffset(int64_t m, int64_t pc, int64_t kc, int64_t row) {
  return pc * roundUp(m, kMaxRows) + row * roundUp(kc, 2);
}

/// Where a B packed whole (Product::packedB) holds the panels of the K block that starts at
/// row pc (kc deep) from column x0 (a multiple of 64) on; runProducts writes it, blockedRegion
/// reads it.
int64_t sharedPanelOffset(int64_t n, int64_t pc, int64_t kc, int64_t x0) {
  return pc * roundUp(n, kPanelWidth) + x0 * kc;
}

/// The product as the driver computes it: C' = A' * B', with C' = C or C^T.
struct Oriented {
  const Product &product;
  const PanelSource *a, *b;
  bool transposed;

  /// Hands the finished tile to the epilogue, applying the post ops first unless the
  /// micro-kernels did as they stored it (`postApplied`).
  void finishTile(int64_t i0, int64_t rows, int64_t j0, int64_t cols, bool postApplied = false) const {
    const Product &p = product;
    // The tile in C's own orientation.
    float *tile = transposed ? p.c + j0 * p.ldc + i0 : p.c + i0 * p.ldc + j0;
    const int64_t row0 = p.rowOffset + (transposed ? j0 : i0), col0 = transposed ? i0 : j0;
    const int64_t tileRows = transposed ? cols : rows, tileCols = transposed ? rows : cols;
    if (p.post && !postApplied)
      applyPostOps(*p.post, p.postPerRow, tile, p.ldc, row0, col0, tileRows, tileCols);
    if (p.epilogue)
      p.epilogue(p.epilogueCtx, tile, p.ldc, p.batch, row0, col0, tileRows, tileCols);
  }
};

/// K == 0: C is all zeros (or the addend it holds); the epilogue still runs once per element.
void zeroRegion(const Oriented &o, int64_t row0, int64_t row1, int64_t col0, int64_t col1) {
  const Product &p = o.product;
  for (int64_t i = row0; i < row1; i += kMaxRows) {
    const int64_t rows = std::min<int64_t>(kMaxRows, row1 - i);
    for (int64_t j = col0; j < col1; j += kNc) {
      const int64_t cols = std::min(kNc, col1 - j);
      for (int64_t ii = i; ii < i + rows && !p.accumulate; ++ii)
        for (int64_t jj = j; jj < j + cols; ++jj)
          (o.transposed ? p.c[jj * p.ldc + ii] : p.c[ii * p.ldc + jj]) = 0.0f;
      o.finishTile(i, rows, j, cols);
    }
  }
}

void blockedRegionBf16(const Oriented &o, int64_t row0, int64_t row1, int64_t col0, int64_t col1);

/// The prepacked B slice (kc x up to 256 columns) that the micro-kernels read after the current
/// one: its panels, each kc x 64 contiguous floats, panelStride apart. Prefetched into L2 in
/// parts while the current slice's row tiles run, so that a weight read once from memory (a
/// transformer's linear layers at batch 1) does not stall the first row tile of every slice:
/// the hardware prefetcher only starts on a stream once its misses show.
struct NextSlice {
  const float *panels = nullptr;
  int64_t panelStride = 0, panelCount = 0, panelFloats = 0;

  /// Part `part` of `parts` of the slice's cache lines.
  void prefetchPart(int64_t part, int64_t parts) const {
    const int64_t linesPerPanel = panelFloats / 16, lines = panelCount * linesPerPanel;
    const int64_t begin = part * lines / parts, end = (part + 1) * lines / parts;
    for (int64_t line = begin; line < end; ++line) {
      const float *at = panels + line / linesPerPanel * panelStride + line % linesPerPanel * 16;
      _mm_prefetch(reinterpret_cast<const char *>(at), _MM_HINT_T1);
    }
  }
};

/// The slice after (pc, jc) in blockedRegion's loop order, when B is prepacked: the next column
/// block of this K block, else this K block's first for the next row block, else the next K
/// block's first, else the next outer column block's.
NextSlice nextPrepackedSlice(const Oriented &o, int64_t jc, int64_t jo, int64_t nco, int64_t pc, int64_t kc,
                             int64_t ic, int64_t mc, int64_t row1, int64_t col1, int64_t outerBlock) {
  const Product &p = o.product;
  const int64_t kcMax = kBlockDepth(p.k);
  int64_t nextPc = pc, nextJo = jo, nextJc = jc + kNc, nextEnd = jo + nco;
  if (nextJc >= jo + nco) {
    nextJc = jo;
    if (ic + mc >= row1) {
      if (pc + kc < p.k) {
        nextPc = pc + kc;
      } else if (jo + outerBlock < col1) {
        nextPc = 0, nextJo = nextJc = jo + outerBlock, nextEnd = std::min(col1, nextJo + outerBlock);
      } else {
        return {};
      }
    }
  }
  NextSlice next;
  const float *base = o.b->panelsInPlace(nextPc, nextJo, next.panelStride);
  if (!base)
    return {};
  next.panels = base + (nextJc - nextJo) / kPanelWidth * next.panelStride;
  next.panelCount = ceilDiv(std::min(kNc, nextEnd - nextJc), kPanelWidth);
  next.panelFloats = std::min(kcMax, p.k - nextPc) * kPanelWidth;
  return next;
}

/// The C tile after the current one along its rows (`rows` rows of 64 floats, ldc apart),
/// prefetched for writing while the current one computes. With a short K a tile stores about as
/// much as it multiplies, into `rows` rows far apart (planes of an NCHW output): more write
/// streams than the prefetchers follow, so each store of a new line waited for it from L3.
/// 1x1 16->48 on 112x112 at batch 8, one core: 1.88-2.00 -> 1.70-1.75 ms.
inline void prefetchNextCTile(const float *c, int64_t ldc, int rows) {
  for (int r = 0; r < rows; ++r)
    for (int64_t line = 0; line < kPanelWidth; line += 16)
      _mm_prefetch(reinterpret_cast<const char *>(c + r * ldc + line), _MM_HINT_ET0);
}

void blockedRegion(const Oriented &o, int64_t row0, int64_t row1, int64_t col0, int64_t col1) {
  const Product &p = o.product;
  if (row0 >= row1 || col0 >= col1)
    return;
  if (p.k == 0)
    return zeroRegion(o, row0, row1, col0, col1);
  if (p.bf16)
    return blockedRegionBf16(o, row0, row1, col0, col1);

  int64_t lda = 0;
  const float *aInPlace = o.a->inPlace(lda);
  const int64_t kcMax = kBlockDepth(p.k);
  // A B block is reused by every row block; with a single one, pack B just in time instead.
  const int64_t mcBlock = rowBlock(row1 - row0, kcMax);
  const int64_t outerBlock = row1 - row0 <= mcBlock ? kNc : kOuterCols;
  const int64_t outerCols = std::min(outerBlock, col1 - col0);
  // B packed by runProducts for all threads (never with C^T: its B is the product's A).
  const float *sharedB = o.transposed ? nullptr : p.packedB;
  // B's rows read where they lie (a pointwise convolution's input pixels, a matmul's
  // activations), unpacked, when the region's columns start and end on whole vectors: the
  // micro-kernel's full-vector loads of B then stay inside each row. Packing copied all of B
  // once per column block, a pass that few row tiles amortise: one Zen 5 core, 1x1 144->24 on
  // 56x56 0.139 -> 0.110 ms, 16->96 on 112x112 0.227 -> 0.213; MobileNetV2 (batch 1 and 8),
  // MnasNet and ResNet-50 1.5-3% faster, ViT, GPT-2 and BERT-mini unchanged.
  int64_t directLd = 0;
  const bool directB = !sharedB && !o.transposed && col0 % kVector == 0 && col1 % kVector == 0 &&
                       o.b->rowsInPlace(0, col0, directLd) != nullptr;
  float *ownB = sharedB || directB ? nullptr : scratch(Scratch::PackedB, kcMax * roundUp(outerCols, kPanelWidth));
  float *packedA = aInPlace ? nullptr : scratch(Scratch::PackedA, kcMax * mcBlock);
  const int storeFlags = o.transposed ? kTransposedC : 0;
  // A block whose last vector holds only 1-4 columns (7x7 outputs: 49 = 3*16 + 1; 14x14:
  // 196 = 12*16 + 4) runs its other vectors through the micro-kernel and those columns as dot
  // products along k, which need A in place and each column k-contiguous: copied out of the
  // packed panel into the A slot, unused when A is read in place.
  auto trailingColumns = [&](int64_t blockCols) -> int64_t {
    const int64_t rest = blockCols % kVector;
    return aInPlace && !o.transposed && rest <= kMaxDotColumns ? rest : 0;
  };
  float *lastColumns = aInPlace ? scratch(Scratch::PackedA, kcMax * kMaxDotColumns) : nullptr;

  for (int64_t jo = col0; jo < col1; jo += outerBlock) {
    const int64_t nco = std::min(outerBlock, col1 - jo);
    for (int64_t pc = 0; pc < p.k; pc += kcMax) {
      const int64_t kc = std::min(kcMax, p.k - pc);
      const bool lastK = pc + kc == p.k;
      const int flags = storeFlags | (pc > 0 || p.accumulate ? kAccumulate : 0);
      // Post ops go into the stores of the last K block, in registers; a C^T tile's rows are
      // C's columns, so those tiles get them in finishTile instead.
      const bool postInStore = lastK && p.post && !o.transposed;
      const bool prefetchesC = lastK && !o.transposed && kc <= kPrefetchCDepth;
      // Panels the source already holds (prepacked weights) are read where they lie.
      int64_t panelStride = 0;
      const float *bPanels = o.b->panelsInPlace(pc, jo, panelStride);
      const float *packedB = sharedB ? sharedB + sharedPanelOffset(p.n, pc, kc, jo) : ownB;
      int64_t ld = 0;
      const float *bRows = directB ? o.b->rowsInPlace(pc, jo, ld) : nullptr;
      if (!bPanels && !sharedB && !bRows)
        o.b->packPanels(ownB, pc, kc, jo, nco);
      if (const int64_t trailing = bPanels || bRows ? 0 : trailingColumns(nco)) {
        const int64_t q = (nco - 1) / kPanelWidth, width = panelWidth(q, nco);
        const float *first = packedB + q * kPanelWidth * kc + (nco - trailing) % kPanelWidth;
        for (int64_t kk = 0; kk < kc; ++kk)
          for (int64_t t = 0; t < trailing; ++t)
            lastColumns[t * kc + kk] = first[kk * width + t];
      }
      for (int64_t ic = row0; ic < row1; ic += mcBlock) {
        const int64_t mc = std::min(mcBlock, row1 - ic);
        if (!aInPlace) {
          for (int64_t ir = ic; ir < ic + mc; ir += kMaxRows) {
            const int64_t rows = std::min<int64_t>(kMaxRows, ic + mc - ir);
            o.a->pack(packedA + (ir - ic) * kc, pc, kc, ir, rows, rows);
          }
        }
        for (int64_t jc = jo; jc < jo + nco; jc += kNc) {
          const int64_t nc = std::min(kNc, jo + nco - jc);
          const NextSlice next = bPanels ? nextPrepackedSlice(o, jc, jo, nco, pc, kc, ic, mc, row1, col1, outerBlock)
                                         : NextSlice{};
          const int64_t rowTiles = ceilDiv(mc, kMaxRows);
          for (int64_t ir = ic; ir < ic + mc; ir += kMaxRows) {
            const int rows = static_cast<int>(std::min<int64_t>(kMaxRows, ic + mc - ir));
            next.prefetchPart((ir - ic) / kMaxRows, rowTiles);
            const float *aTile = aInPlace ? aInPlace + ir * lda + pc : packedA + (ir - ic) * kc;
            for (int64_t jr = jc; jr < jc + nc; jr += kPanelWidth) {
              const int64_t cols = std::min<int64_t>(kPanelWidth, jc + nc - jr);
              const int vectors = static_cast<int>(ceilDiv(cols, kVector));
              const float *bPanel = bPanels ? bPanels + (jr - jo) / kPanelWidth * panelStride
                                    : bRows ? bRows + (jr - jo)
                                            : packedB + (jr - jo) * kc;
              const int64_t ldb = bPanels ? kPanelWidth : bRows ? ld : vectors * kVector;
              float *cTile = o.transposed ? p.c + jr * p.ldc + ir : p.c + ir * p.ldc + jr;
              const int64_t trailing = !bPanels && !bRows && jr + cols == jo + nco ? trailingColumns(nco) : 0;
              const TilePostOps post =
                  postInStore ? tilePostOps(*p.post, p.postPerRow, p.rowOffset + ir, jr) : TilePostOps{};
              const TilePostOps *tilePost = postInStore ? &post : nullptr;
              // A read in place: the row tile's first column tile fetches the next one's rows
              // (its last may be dot products only: 196 = 3*64 + 4 columns).
              const int tileFlags = flags | (aInPlace && jr == jc ? kPrefetchNextA : 0);
              if (trailing > 0) {
                if (vectors > 1)
                  microKernel(rows, vectors - 1, false)(kc, aTile, lda, bPanel, ldb, cTile, p.ldc, cols - trailing,
                                                        tileFlags, tilePost);
                columnDotKernel(rows, static_cast<int>(trailing), kc, aTile, lda, lastColumns,
                                cTile + cols - trailing, p.ldc, flags);
                if (postInStore)
                  applyPostOps(*p.post, p.postPerRow, cTile + cols - trailing, p.ldc, p.rowOffset + ir,
                               jr + cols - trailing, rows, trailing);
                continue;
              }
              if (prefetchesC && jr + kPanelWidth < jc + nc)
                prefetchNextCTile(cTile + kPanelWidth, p.ldc, rows);
              microKernel(rows, vectors, !aInPlace)(kc, aTile, lda, bPanel, ldb, cTile, p.ldc, cols,
                                                    tileFlags, tilePost);
            }
            if (lastK)
              o.finishTile(ir, rows, jc, nc, postInStore);
          }
        }
      }
    }
  }
}

/// blockedRegion in bf16 (Product::bf16): the same loop nest over the same f32 packing, each
/// packed block rounded to bf16 once (GemmBf16.h) before the micro-kernels read it: B's K x
/// 2048 (or x 256) block per (jo, pc), A's 6-row micro-panels per row block. A panel's last
/// few columns go through the micro-kernel masked, not as dot products.
void blockedRegionBf16(const Oriented &o, int64_t row0, int64_t row1, int64_t col0, int64_t col1) {
  const Product &p = o.product;
  int64_t lda = 0;
  const float *aInPlace = p.bf16A ? nullptr : o.a->inPlace(lda);
  const int64_t kcMax = kBlockDepth(p.k); // blocks start at even rows, as stored pairs need
  const int64_t storedRows = roundUp(p.k, 2); // of a stored pair panel
  const int64_t rowWidth = roundUp(kcMax, kVector); // of a bf16 A row: whole vectors, zero past kc
  const int64_t outerBlock = row1 - row0 <= kMc ? kNc : kOuterCols;
  const int64_t outerCols = std::min(outerBlock, col1 - col0);
  const float *sharedB = o.transposed ? nullptr : p.packedB;
  const bool roundsB = !p.bf16Panels;
  float *ownB = sharedB || !roundsB ? nullptr : scratch(Scratch::PackedB, kcMax * roundUp(outerCols, kPanelWidth));
  float *packedA = aInPlace || p.bf16A ? nullptr : scratch(Scratch::PackedA, kcMax * kMaxRows);
  // Two bf16 per float of scratch.
  Bf16 *pairsB = roundsB ? reinterpret_cast<Bf16 *>(scratch(
                               Scratch::Bf16B, static_cast<size_t>(roundUp(kcMax, 2) * roundUp(outerCols, kPanelWidth) / 2)))
                         : nullptr;
  Bf16 *rowsA = reinterpret_cast<Bf16 *>(scratch(Scratch::Bf16A, static_cast<size_t>(kMc * rowWidth / 2)));
  const int storeFlags = o.transposed ? kTransposedC : 0;

  for (int64_t jo = col0; jo < col1; jo += outerBlock) {
    const int64_t nco = std::min(outerBlock, col1 - jo);
    for (int64_t pc = 0; pc < p.k; pc += kcMax) {
      const int64_t kc = std::min(kcMax, p.k - pc), kcEven = roundUp(kc, 2);
      const bool lastK = pc + kc == p.k;
      const int flags = storeFlags | (pc > 0 || p.accumulate ? kAccumulate : 0);
      // Post ops go into the last K block's stores, as in blockedRegion: applied over the
      // finished tiles instead, they took 4% of ResNet-50's time in bf16 at two threads.
      const bool postInStore = lastK && p.post && !o.transposed;
      if (roundsB) {
        int64_t panelStride = 0, ld = 0;
        const float *bPanels = o.b->panelsInPlace(pc, jo, panelStride);
        const float *packedB = sharedB ? sharedB + sharedPanelOffset(p.n, pc, kc, jo) : ownB;
        // Rows of B where they lie (a 1x1 convolution's pixels) are rounded straight into
        // pairs, not copied into f32 panels first: one pass over B instead of two.
        const float *bRows = bPanels || sharedB ? nullptr : o.b->rowsInPlace(pc, jo, ld);
        if (!bPanels && !sharedB && !bRows)
          o.b->packPanels(ownB, pc, kc, jo, nco);
        for (int64_t q = 0; q * kPanelWidth < nco; ++q) {
          const int64_t width = panelWidth(q, nco), cols = std::min<int64_t>(kPanelWidth, nco - q * kPanelWidth);
          Bf16 *pairs = pairsB + q * kPanelWidth * kcEven;
          if (bRows)
            roundPanelToBf16Pairs(bRows + q * kPanelWidth, ld, kc, cols, width, pairs);
          else if (bPanels)
            roundPanelToBf16Pairs(bPanels + q * panelStride, kPanelWidth, kc, width, width, pairs);
          else
            roundPanelToBf16Pairs(packedB + q * kPanelWidth * kc, width, kc, width, width, pairs);
        }
      }
      for (int64_t ic = row0; ic < row1; ic += kMc) {
        const int64_t mc = std::min(kMc, row1 - ic);
        for (int64_t ir = ic; ir < ic + mc && !p.bf16A; ir += kMaxRows) {
          const int64_t rows = std::min<int64_t>(kMaxRows, ic + mc - ir);
          Bf16 *rowsOut = rowsA + (ir - ic) * rowWidth;
          if (aInPlace) {
            for (int64_t i = 0; i < rows; ++i)
              roundRowToBf16(aInPlace + (ir + i) * lda + pc, kc, rowsOut + i * rowWidth, rowWidth);
            continue;
          }
          o.a->pack(packedA, pc, kc, ir, rows, rows); // packedA[k*rows + i]
          for (int64_t i = 0; i < rows; ++i)
            for (int64_t k = 0; k < rowWidth; ++k)
              rowsOut[i * rowWidth + k] = k < kc ? toBf16(packedA[k * rows + i]) : Bf16{0};
        }
        for (int64_t jc = jo; jc < jo + nco; jc += kNc) {
          const int64_t nc = std::min(kNc, jo + nco - jc);
          // Row tiles of stored panels end at the panels' edges (a region may start inside one).
          for (int64_t ir = ic, rows = 0; ir < ic + mc; ir += rows) {
            rows = std::min<int64_t>(kMaxRows - (p.bf16A ? ir % kMaxRows : 0), ic + mc - ir);
            // Tiles of up to 64 columns, cut at the panels' edges: a share of the columns may
            // start inside a stored panel (at a multiple of 16).
            for (int64_t jr = jc, next = 0; jr < jc + nc; jr = next) {
              const Bf16 *bTile;
              int64_t ldb;
              if (roundsB) {
                const int64_t q = (jr - jo) / kPanelWidth;
                next = std::min(jc + nc, jr + kPanelWidth);
                bTile = pairsB + q * kPanelWidth * kcEven;
                ldb = 2 * panelWidth(q, nco);
              } else {
                const int64_t q = jr / kPanelWidth;
                next = std::min(jc + nc, (q + 1) * kPanelWidth);
                bTile = p.bf16Panels + q * kPanelWidth * storedRows + pc * kPanelWidth + 2 * (jr % kPanelWidth);
                ldb = 2 * kPanelWidth;
              }
              const int64_t cols = next - jr;
              const int vectors = static_cast<int>(ceilDiv(cols, kVector));
              float *cTile = o.transposed ? p.c + jr * p.ldc + ir : p.c + ir * p.ldc + jr;
              const MicroKernelBf16Fn kernel = microKernelBf16(static_cast<int>(rows), vectors);
              const TilePostOps post =
                  postInStore ? tilePostOps(*p.post, p.postPerRow, p.rowOffset + ir, jr) : TilePostOps{};
              const TilePostOps *tilePost = postInStore ? &post : nullptr;
              if (p.bf16A)
                kernel(kcEven / 2, p.bf16A + bf16PanelOffset(p.m, pc, kc, ir - ir % kMaxRows) + ir % kMaxRows * 2, 2,
                       2 * kMaxRows, bTile, ldb, cTile, p.ldc, cols, flags, tilePost);
              else
                kernel(kcEven / 2, rowsA + (ir - ic) * rowWidth, rowWidth, 2, bTile, ldb, cTile, p.ldc, cols, flags,
                       tilePost);
            }
            if (lastK)
              o.finishTile(ir, rows, jc, nc, postInStore);
          }
        }
      }
    }
  }
}

/// Cycles per k-step of a rows x (16*vectors) tile: 2 FMAs per cycle, but at least 4 cycles
/// (the FMA latency) for tiles of fewer than 8 accumulators.
double tileCycles(int64_t rows, int64_t vectors) {
  return static_cast<double>(std::max<int64_t>(rows * vectors, 8)) / 2;
}

/// Cycles per k-step of an m x n product (as the driver computes it): its tiles, packing A
/// (once per column block) unless it is read in place, and packing B.
double productCycles(int64_t m, int64_t n, const PanelSource &a, const PanelSource &b) {
  const int64_t fullRows = m / kMaxRows, lastRows = m % kMaxRows;
  const int64_t fullPanels = n / kPanelWidth;
  const int64_t lastVectors = ceilDiv(n % kPanelWidth, kVector);
  int64_t lda = 0;
  const bool aInPlace = a.inPlace(lda) != nullptr;
  // 1-4 columns in the last vector run as dot products (blockedRegion): rows/16 FMAs a step each.
  const int64_t trailing = aInPlace && n % kVector <= kMaxDotColumns ? n % kVector : 0;
  auto rowCycles = [&](int64_t rows) {
    const double dots = static_cast<double>(rows * trailing) / 32;
    const double last = !lastVectors ? 0.0
                        : trailing   ? (lastVectors > 1 ? tileCycles(rows, lastVectors - 1) : 0.0) + dots
                                     : tileCycles(rows, lastVectors);
    return static_cast<double>(fullPanels) * tileCycles(rows, kMaxVectors) + last;
  };
  double cycles = static_cast<double>(fullRows) * rowCycles(kMaxRows) + (lastRows ? rowCycles(lastRows) : 0.0);
  if (!aInPlace) {
    const int64_t columnBlocks = ceilDiv(n, m <= kMc ? kNc : kOuterCols);
    cycles += static_cast<double>(m * columnBlocks) * a.packCost(kMaxRows);
  }
  return cycles + static_cast<double>(n) * b.packCost(kPanelWidth);
}

} // namespace

int64_t bf16PanelElements(int64_t m, int64_t k) { return roundUp(m, kMaxRows) * roundUp(k, 2); }

void packBf16Panels(const float *a, int64_t lda, int64_t m, int64_t k, uint16_t *dst) {
  const int64_t kcMax = kBlockDepth(k);
  for (int64_t pc = 0; pc < k; pc += kcMax) {
    const int64_t kc = std::min(kcMax, k - pc);
    for (int64_t row = 0; row < m; row += kMaxRows) {
      uint16_t *panel = dst + bf16PanelOffset(m, pc, kc, row);
      for (int64_t kk = 0; kk < roundUp(kc, 2); ++kk)
        for (int64_t i = 0; i < kMaxRows; ++i)
          panel[(kk / 2 * kMaxRows + i) * 2 + kk % 2] =
              row + i < m && kk < kc ? toBf16(a[(row + i) * lda + pc + kk]) : Bf16{0};
    }
  }
}

bool chooseSwap(int64_t m, int64_t n, const PanelSource &a, const PanelSource &b) {
  // Swap only for a large gain: the model leaves out that the swapped A (often a weight
  // matrix) then streams from memory with little reuse. A 128 x 3072 x 768 product with
  // op(B) = W^T, which the model rates equal either way, ran at ~145 GFLOP/s swapped and ~180
  // as it is.
  return productCycles(n, m, b, a) * 4 < productCycles(m, n, a, b) * 3;
}

void computeRegion(const Product &product, int64_t row0, int64_t row1, int64_t col0,
                   int64_t col1) {
  if (product.swap)
    blockedRegion(Oriented{product, product.b, product.a, true}, col0, col1, row0, row1);
  else
    blockedRegion(Oriented{product, product.a, product.b, false}, row0, row1, col0, col1);
}

int threadsOf(const kiln_rt *rt) {
  if (!rt || !rt->parallel_for || rt->num_threads <= 1)
    return 1;
  return rt->num_threads;
}

uint64_t nextCallNumber() {
  static std::atomic<uint64_t> calls{0};
  return ++calls;
}

void parallelForIfWorth(const kiln_rt *rt, int64_t items, int64_t work, int64_t minWork, kiln_range_fn fn,
                        void *ctx, bool balanced) {
  if (threadsOf(rt) <= 1 || items <= 1 || work < minWork)
    fn(ctx, 0, items);
  else if (balanced)
    parallelForBalanced(rt, items, 1, fn, ctx);
  else
    rt->parallel_for(rt, items, 1, fn, ctx);
}

void parallelForBalanced(const kiln_rt *rt, int64_t n, int64_t grain, kiln_range_fn fn, void *ctx) {
  (rt->parallel_for_balanced ? rt->parallel_for_balanced : rt->parallel_for)(rt, n, grain, fn, ctx);
}

namespace {

/// Shares of a batch: the products' rows (or columns) cut into units of `unit`, numbered
/// product by product; thread t takes units [t*total/parts, (t+1)*total/parts).
struct Split {
  const ProductSet *set;
  bool alongRows;
  int64_t unit, perProduct, total, parts;

  template <typename Fn> void forEachSegment(int64_t part, Fn &&fn) const {
    int64_t u = part * total / parts;
    const int64_t end = (part + 1) * total / parts;
    const int64_t extent = alongRows ? set->m : set->n;
    while (u < end) {
      const int64_t index = u / perProduct, local = u % perProduct;
      const int64_t localEnd = std::min(perProduct, local + (end - u));
      const int64_t lo = local * unit, hi = std::min(extent, localEnd * unit);
      if (alongRows)
        fn(index, lo, hi, int64_t{0}, set->n);
      else
        fn(index, int64_t{0}, set->m, lo, hi);
      u += localEnd - local;
    }
  }

  /// The largest share in elements of C.
  int64_t largestShare() const {
    int64_t largest = 0;
    for (int64_t part = 0; part < parts; ++part) {
      int64_t share = 0;
      forEachSegment(part, [&](int64_t, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
        share += (r1 - r0) * (c1 - c0);
      });
      largest = std::max(largest, share);
    }
    return largest;
  }
};

Split chooseSplit(const ProductSet &set, int threads) {
  const bool swapped = set.swap;
  // Tile rows of the driver are 6 tall, its columns come in vectors of 16 and panels of 64.
  const int64_t rowUnits[] = {swapped ? kPanelWidth : kMaxRows, swapped ? kVector : kMaxRows};
  const int64_t colUnits[] = {swapped ? kMaxRows : kPanelWidth, swapped ? kMaxRows : kVector};
  // On a tie, split the dimension of the larger operand: each thread then streams only its
  // part of it (the weights of a batch-1 layer), while the smaller one is shared.
  const bool preferRows = set.m >= set.n;
  Split best{};
  int64_t bestShare = -1;
  for (int order = 0; order < 2; ++order) {
    const bool alongRows = order == 0 ? preferRows : !preferRows;
    for (int64_t unit : alongRows ? rowUnits : colUnits) {
      const int64_t perProduct = ceilDiv(alongRows ? set.m : set.n, unit);
      Split split{&set, alongRows, unit, perProduct, set.count * perProduct, threads};
      const int64_t share = split.largestShare();
      // Within 2% counts as a tie, which keeps the earlier (preferred) candidate.
      if (bestShare < 0 || share * 50 < bestShare * 49) {
        best = split;
        bestShare = share;
      }
    }
  }
  return best;
}

/// Packs product 0's B whole (Product::packedB, or in bf16 Product::bf16Panels): units of one
/// K block by one run of panels.
struct SharedPacking {
  const ProductSet *set;
  float *dst;
  int64_t kc, panelsPerUnit, unitsPerBlock;

  SharedPacking(const ProductSet &productSet, float *into) : set(&productSet), dst(into) {
    kc = kBlockDepth(productSet.k);
    const int64_t panels = ceilDiv(productSet.n, kPanelWidth);
    panelsPerUnit = ceilDiv(panels, 4);
    unitsPerBlock = ceilDiv(panels, panelsPerUnit);
  }
  int64_t units() const { return ceilDiv(set->k, kc) * unitsPerBlock; }
  /// Floats of the whole packed B: where a block after the last row of B would start; in
  /// bf16, half of N rounded up to 64 x K rounded up to even.
  static size_t floats(const ProductSet &set) {
    if (set.multipliesInBf16())
      return static_cast<size_t>(roundUp(set.n, kPanelWidth) * roundUp(set.k, 2) / 2);
    return static_cast<size_t>(sharedPanelOffset(set.n, set.k, 0, 0));
  }

  static void run(void *ctx, int64_t begin, int64_t end) {
    const SharedPacking &s = *static_cast<const SharedPacking *>(ctx);
    const ProductSet &set = *s.set;
    const bool bf16 = set.multipliesInBf16();
    for (int64_t unit = begin; unit < end; ++unit) {
      const int64_t pc = unit / s.unitsPerBlock * s.kc;
      const int64_t x0 = unit % s.unitsPerBlock * s.panelsPerUnit * kPanelWidth;
      const int64_t kc = std::min(s.kc, set.k - pc);
      const int64_t cols = std::min(s.panelsPerUnit * kPanelWidth, set.n - x0);
      if (!bf16) {
        set.packB(0, s.dst + sharedPanelOffset(set.n, pc, kc, x0), pc, kc, x0, cols);
        continue;
      }
      // f32 panels in this thread's scratch, then each rounded into its 64-wide pair panel.
      float *panels = scratch(Scratch::PackedB, static_cast<size_t>(kc * roundUp(cols, kPanelWidth)));
      set.packB(0, panels, pc, kc, x0, cols);
      Bf16 *pairs = reinterpret_cast<Bf16 *>(s.dst);
      for (int64_t q = 0; q * kPanelWidth < cols; ++q) {
        const int64_t width = panelWidth(q, cols);
        roundPanelToBf16Pairs(panels + q * kPanelWidth * kc, width, kc, width, kPanelWidth,
                              pairs + (x0 / kPanelWidth + q) * kPanelWidth * roundUp(set.k, 2) + pc * kPanelWidth);
      }
    }
  }
};

struct ShareContext {
  const Split *split;
  const float *packedB;
  /// When not 0 (the call's nextCallNumber), each thread packs product 0's B whole for itself,
  /// once per call, before its first part: row parts of a dense B then read it where a thread
  /// already has it, whichever parts it runs, instead of each packing all of B again.
  uint64_t ownPackedBCall = 0;
};

void runShares(void *ctx, int64_t begin, int64_t end) {
  const ShareContext &context = *static_cast<const ShareContext *>(ctx);
  const Split &split = *context.split;
  const float *packedB = context.packedB;
  if (context.ownPackedBCall) {
    thread_local uint64_t packedFor = 0;
    float *own = scratch(Scratch::SharedB, SharedPacking::floats(*split.set));
    if (packedFor != context.ownPackedBCall) {
      SharedPacking packing(*split.set, own);
      SharedPacking::run(&packing, 0, packing.units());
      packedFor = context.ownPackedBCall;
    }
    packedB = own;
  }
  for (int64_t part = begin; part < end; ++part)
    split.forEachSegment(part, [&](int64_t index, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
      split.set->run(index, r0, r1, c0, c1, packedB);
    });
}

} // namespace

int64_t ProductSet::minParallelMacs() const { return kMinParallelMacs; }

void runProducts(const kiln_rt *rt, const ProductSet &set) {
  if (set.count <= 0 || set.m <= 0 || set.n <= 0)
    return;
  const int threads = threadsOf(rt);
  const double macs = static_cast<double>(set.count) * set.m * set.n * std::max<int64_t>(set.k, 1);
  if (threads == 1 || macs < static_cast<double>(set.minParallelMacs())) {
    for (int64_t index = 0; index < set.count; ++index)
      set.run(index, 0, set.m, 0, set.n, nullptr);
    return;
  }
  Split split = chooseSplit(set, threads);
  ShareContext context{&split, nullptr};
  const bool wholeB = split.alongRows && !set.swap && set.count == 1 && set.k > 0;
  if (wholeB && set.sharesPackedB()) {
    // Split along rows, every thread would pack all of B for itself; pack it once instead,
    // each thread a part. Into the caller's slot: the workers only read it, and only until
    // this call returns.
    float *shared = scratch(Scratch::SharedB, SharedPacking::floats(set));
    SharedPacking packing(set, shared);
    rt->parallel_for(rt, packing.units(), 1, SharedPacking::run, &packing);
    context.packedB = shared;
  } else if (wholeB && set.canPackB()) {
    context.ownPackedBCall = nextCallNumber();
  }
  // Parts finer than one per thread, claimed as the threads come free, where cutting finer
  // repeats no work: column parts pack only their own columns of B, and row parts read a B
  // packed once, for all threads or by each thread for itself.
  if (!set.swap && (!split.alongRows || context.packedB || context.ownPackedBCall)) {
    split.parts = std::min<int64_t>(split.total, int64_t{threads} * kPartsPerThread);
    parallelForBalanced(rt, split.parts, 1, runShares, &context);
    return;
  }
  rt->parallel_for(rt, split.parts, 1, runShares, &context);
}

} // namespace kiln::runtime::kernels::detail
