// kiln::runtime::kernels::qgemm: int8 x int8 products summed exactly in int32, dequantized to
// f32 in registers (kiln_qgemm_args), then the epilogue.
//
// The tile is QTile.h's with u8 rows of A broadcast and s8 panels of B: an s8 A is moved to
// u8 by adding 128 to it and its zero point, which leaves every (a - zero) as it was. The zero
// point is taken out after the sums with B's column sums, packed with B at load. A's rows are
// copied per block of rows into whole quads (zeros past K: B's padding is zero too, so nothing
// past K reaches a sum).
#include <algorithm>
#include <cstring>

#include "runtime/kernels/GemmDriver.h" // parallelForIfWorth
#include "runtime/kernels/GemmPack.h"   // scratch
#include "runtime/kernels/QTile.h"      // qTile, kMaxRows, kPanelWidth, makeTable
#include "runtime/kernels/Kernels.h"

namespace kiln::runtime::kernels {

namespace {

using detail::kMaxRows;
using detail::quadsOf;
using detail::kPanelWidth;
using detail::kVector;

constexpr int64_t kBlockPanels = 4;           // panels of B a work item runs over each block

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/// What the tiles of one call share.
struct QTiles {
  const kiln_qgemm_args &g;
  int64_t quads, panels;
  int32_t zero; // A's zero point, moved to u8 with A
  const int32_t *columnSums;
  int64_t blockRows; // rows per work item (equalRowBlocks; a block of A, at most 96 x K bytes, stays in L2)
};

const auto kQTiles = detail::makeTable<detail::QTileFn, detail::QGemmTileOf>(detail::RowCounts{}, detail::VectorCounts{});

/// row[0, k) ^ flip into to[0, k), zeros to to[width): 64 bytes at a time.
void copyRowToQuads(const uint8_t *row, int64_t k, uint8_t flip, uint8_t *to, int64_t width) {
  int64_t at = 0;
#if defined(__AVX512BW__)
  const __m512i flips = _mm512_set1_epi8(static_cast<char>(flip));
  for (; at + 64 <= k; at += 64)
    _mm512_storeu_si512(to + at, _mm512_xor_si512(_mm512_loadu_si512(row + at), flips));
#endif
  for (; at < k; ++at)
    to[at] = row[at] ^ flip;
  std::fill(to + k, to + width, uint8_t{0});
}

/// Work item: a block of blockRows rows (detail::equalRowBlocks) by a run of kBlockPanels
/// panels, handed out by the pool as threads come free.
void qgemmItems(void *ctx, int64_t begin, int64_t end) {
  const QTiles &t = *static_cast<const QTiles *>(ctx);
  const kiln_qgemm_args &g = t.g;
  const int64_t rowBytes = 4 * t.quads, panelRuns = ceilDiv(t.panels, kBlockPanels);
  auto *rows = reinterpret_cast<uint8_t *>(
      detail::scratch(detail::Scratch::PackedA, static_cast<size_t>(ceilDiv(t.blockRows * rowBytes, 4))));
  alignas(64) float scales[kPanelWidth];
  alignas(64) float tile[kMaxRows * kPanelWidth]; // for tile_in_scratch
  for (int64_t item = begin; item < end; ++item) {
    const int64_t row0 = item / panelRuns * t.blockRows, rowCount = std::min(t.blockRows, g.m - row0);
    const int64_t firstPanel = item % panelRuns * kBlockPanels;
    // The block's rows as whole quads of u8: u8 rows of a K that is a multiple of 4 are read in
    // place; others are copied, moved to u8 when signed, with zeros past K. (The copy, byte by
    // byte and once per run of panels, was a quarter of a 1024^3 product's time.)
    const bool inPlace = !g.a_signed && g.k % 4 == 0;
    const uint8_t *block = static_cast<const uint8_t *>(g.a) + row0 * g.lda;
    const int64_t blockStride = inPlace ? g.lda : rowBytes;
    if (!inPlace) {
      const uint8_t flip = g.a_signed ? 0x80 : 0;
      for (int64_t i = 0; i < rowCount; ++i)
        copyRowToQuads(block + i * g.lda, g.k, flip, rows + i * rowBytes, rowBytes);
      block = rows;
    }
    for (int64_t q = firstPanel; q < std::min(t.panels, firstPanel + kBlockPanels); ++q) {
      const int64_t col0 = q * kPanelWidth, cols = std::min<int64_t>(kPanelWidth, g.n - col0);
      for (int64_t j = 0; j < kPanelWidth; ++j)
        scales[j] = g.a_scale * g.b_scales[g.b_per_column ? std::min(col0 + j, g.n - 1) : 0];
      const int8_t *panel = g.b + q * t.quads * 4 * kPanelWidth;
      const int32_t *sums = t.columnSums + q * kPanelWidth;
      for (int64_t i = 0; i < rowCount; i += kMaxRows) {
        const int r = static_cast<int>(std::min<int64_t>(kMaxRows, rowCount - i));
        const int vectors = static_cast<int>(ceilDiv(cols, kVector));
        const bool scratchTile = g.tile_in_scratch && g.epilogue;
        const int64_t at = (row0 + i) * g.ldc + col0; // the tile's first output
        float *c = scratchTile ? tile : g.c + at;
        const int64_t ldc = scratchTile ? kPanelWidth : g.ldc;
        const detail::TilePostOps post = detail::tilePostOps(g.post, false, row0 + i, col0);
        const detail::FinishedTile finish = detail::finishedTile(g, g.c, at, g.ldc);
        const bool finishing = detail::finishesOutputs(g);
        kQTiles.fns[r - 1][vectors - 1](t.quads, block + i * blockStride, blockStride,
                                        reinterpret_cast<const uint8_t *>(panel), nullptr, sums, scales, t.zero, c, ldc, cols,
                                        detail::hasPostOps(g.post) ? &post : nullptr, finishing ? &finish : nullptr);
        if (g.epilogue && !finishing)
          g.epilogue(g.epilogue_ctx, c, ldc, 0, row0 + i, col0, r, cols);
      }
    }
  }
}

} // namespace

int64_t qgemmPackedBytes(int64_t k, int64_t n) {
  const int64_t panels = ceilDiv(n, kPanelWidth);
  return panels * kPanelWidth * (4 * quadsOf(k) + static_cast<int64_t>(sizeof(int32_t)));
}

void packQGemmB(const int8_t *src, int64_t k, int64_t n, int64_t strideK, int64_t strideN, int8_t *dst) {
  // Row by row (a row-major B, strideN 1, is read in order: column by column, VGG16's 25088 x
  // 4096 classifier took ~0.4 s to pack), the column sums accumulated into dst's sum slots as
  // it goes: qgemm packs a B that is not a weight on every call, so this allocates nothing.
  const int64_t quads = quadsOf(k), panels = ceilDiv(n, kPanelWidth);
  auto *sums = reinterpret_cast<int32_t *>(dst + panels * quads * 4 * kPanelWidth); // 4-aligned: see qgemmPackedBytes
  std::memset(dst, 0, static_cast<size_t>(qgemmPackedBytes(k, n)));
  for (int64_t row = 0; row < k; ++row) {
    const int8_t *from = src + row * strideK;
    int8_t *quad = dst + (row / 4) * 4 * kPanelWidth + row % 4;
    for (int64_t column = 0; column < n; ++column) {
      const int8_t value = from[column * strideN];
      quad[(column / kPanelWidth) * quads * 4 * kPanelWidth + (column % kPanelWidth) * 4] = value;
      sums[column] += value;
    }
  }
}

void qgemm(const kiln_rt *rt, const kiln_qgemm_args *args) {
  if (!args || args->m <= 0 || args->n <= 0 || args->k < 0 || !args->a || !args->b || !args->b_scales ||
      (!args->c && (!args->quantized.q || args->quantized.keep_f32 || args->addend)) ||
      args->lda < args->k || args->ldc < args->n || (!args->b_packed && args->ldb < args->n))
    return; // the ABI has no error channel; codegen never emits these
  kiln_qgemm_args g = *args;
  if (!g.b_packed) { // packed here, into the calling thread's scratch, which the workers only read
    auto *packed = reinterpret_cast<int8_t *>(
        detail::scratch(detail::Scratch::SharedB, static_cast<size_t>(ceilDiv(qgemmPackedBytes(g.k, g.n), 4))));
    packQGemmB(g.b, g.k, g.n, g.ldb, 1, packed);
    g.b = packed;
    g.b_packed = 1;
  }
  const int64_t quads = quadsOf(g.k), panels = ceilDiv(g.n, kPanelWidth);
  const detail::RowBlocks blocks = detail::equalRowBlocks(g.m);
  QTiles tiles{g, quads, panels, g.a_zero + (g.a_signed ? 128 : 0),
               reinterpret_cast<const int32_t *>(g.b + panels * quads * 4 * kPanelWidth), blocks.rows};
  const int64_t items = blocks.count * ceilDiv(panels, kBlockPanels);
  detail::parallelForIfWorth(rt, items, g.m * g.n * std::max<int64_t>(g.k, 1), int64_t{1} << 20, qgemmItems, &tiles,
                             true);
}

} // namespace kiln::runtime::kernels
