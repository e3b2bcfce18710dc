// kiln::runtime::kernels::qgemm: int8 x int8 products summed exactly in int32, dequantized to
// f32 in registers (kiln_qgemm_args), then the epilogue.
//
// The tile is the f32 GEMM's shape, 6 rows x 64 columns: per quad of k, 4 vectors of B (16
// columns x 4 bytes each) and 6 broadcast words of A (4 bytes of a row) feed 24 vpdpbusd,
// each four u8 x s8 products per int32 lane: four times the products of an f32 FMA step for
// the same instructions. vpdpbusd takes A unsigned and B signed: an s8 A is moved to u8 by
// adding 128 to it and its zero point, which leaves every (a - zero) as it was. The zero point
// is taken out after the sums: sum (a - z) b = sum a b - z * sum b, the column sums packed
// with B at load. A's rows are copied per block of rows into whole quads (zeros past K: B's
// padding is zero too, so nothing past K reaches a sum).
#include <algorithm>
#include <cstring>

#include "runtime/kernels/GemmDriver.h" // parallelForIfWorth, threadsOf
#include "runtime/kernels/GemmMicroKernel.h" // storeTile, kMaxRows, kPanelWidth, makeTable
#include "runtime/kernels/GemmPack.h"        // scratch
#include "runtime/kernels/Kernels.h"

namespace kiln::runtime::kernels {

namespace {

using detail::kMaxRows;
using detail::kPanelWidth;
using detail::kVector;

constexpr int64_t kBlockRows = 16 * kMaxRows; // rows of A copied at a time (96 x K bytes: in L2)
constexpr int64_t kBlockPanels = 4;           // panels of B a work item runs over each block

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t quadsOf(int64_t k) { return ceilDiv(k, 4); }

/// What the tiles of one call share.
struct QTiles {
  const kiln_qgemm_args &g;
  int64_t quads, panels;
  int32_t zero; // A's zero point, moved to u8 with A
  const int32_t *columnSums;
};

using QTileFn = void (*)(int64_t quads, const uint8_t *a, int64_t lda, const int8_t *b, const int32_t *columnSums,
                         const float *scales, int32_t zero, float *c, int64_t ldc, int64_t cols);

template <int R, int NV>
void qTile(int64_t quads, const uint8_t *a, int64_t lda, const int8_t *b, const int32_t *columnSums, const float *scales,
           int32_t zero, float *c, int64_t ldc, int64_t cols) {
#if defined(__AVX512F__) && defined(__AVX512VNNI__)
  // The sums in the builtin's own type: through _mm512_dpbusd_epi32, whose __m512i is a vector of
  // 8 int64 converted to and from 16 int32 at every call, g++ 12 kept all 24 accumulators on
  // the stack, a load and a store around every vpdpbusd (~170 GOP/s on 1024^3 instead of ~330).
  __v16si acc[R][NV];
#pragma GCC unroll 8
  for (int i = 0; i < R; ++i)
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j)
      acc[i][j] = (__v16si)_mm512_setzero_si512();
  const uint8_t *rows[R];
#pragma GCC unroll 8
  for (int i = 0; i < R; ++i)
    rows[i] = a + i * lda;
  for (int64_t p = 0; p < quads; ++p) {
    __v16si bv[NV];
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j)
      bv[j] = (__v16si)_mm512_loadu_si512(b + j * 4 * kVector);
#pragma GCC unroll 8
    for (int i = 0; i < R; ++i) {
      int32_t word = 0;
      std::memcpy(&word, rows[i], sizeof word);
      const __v16si av = (__v16si)_mm512_set1_epi32(word);
#pragma GCC unroll 4
      for (int j = 0; j < NV; ++j)
        acc[i][j] = __builtin_ia32_vpdpbusd_v16si(acc[i][j], av, bv[j]);
      rows[i] += 4;
    }
    b += 4 * kPanelWidth;
  }
  __m512 out[R][NV];
  const __m512i zeros = _mm512_set1_epi32(zero);
#pragma GCC unroll 4
  for (int j = 0; j < NV; ++j) {
    const __m512i correction = _mm512_mullo_epi32(zeros, _mm512_loadu_si512(columnSums + j * kVector));
    const __m512 scale = _mm512_loadu_ps(scales + j * kVector);
#pragma GCC unroll 8
    for (int i = 0; i < R; ++i)
      out[i][j] = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32((__m512i)acc[i][j], correction)), scale);
  }
  detail::storeTile(out, c, ldc, cols, 0);
#else
  constexpr int W = NV * kVector;
  int32_t acc[R][W] = {};
  for (int64_t p = 0; p < quads; ++p)
    for (int i = 0; i < R; ++i)
      for (int j = 0; j < W; ++j)
        for (int t = 0; t < 4; ++t)
          acc[i][j] += int32_t{a[i * lda + 4 * p + t]} * int32_t{b[p * 4 * kPanelWidth + j * 4 + t]};
  float values[R][W];
  for (int i = 0; i < R; ++i)
    for (int j = 0; j < W; ++j)
      values[i][j] = static_cast<float>(acc[i][j] - zero * columnSums[j]) * scales[j];
#ifdef __AVX512F__ // AVX-512 without VNNI: the store takes vectors
  __m512 out[R][NV];
  for (int i = 0; i < R; ++i)
    for (int j = 0; j < NV; ++j)
      out[i][j] = _mm512_loadu_ps(values[i] + j * kVector);
  detail::storeTile(out, c, ldc, cols, 0);
#else
  detail::storeTile(values, c, ldc, cols, 0);
#endif
#endif
}

template <int R, int NV> struct QTileOf {
  static constexpr QTileFn fn = &qTile<R, NV>;
};
const auto kQTiles = detail::makeTable<QTileFn, QTileOf>(detail::RowCounts{}, detail::VectorCounts{});

/// Work item: a block of kBlockRows rows by a run of kBlockPanels panels.
void qgemmItems(void *ctx, int64_t begin, int64_t end) {
  const QTiles &t = *static_cast<const QTiles *>(ctx);
  const kiln_qgemm_args &g = t.g;
  const int64_t rowBytes = 4 * t.quads, panelRuns = ceilDiv(t.panels, kBlockPanels);
  auto *rows = reinterpret_cast<uint8_t *>(
      detail::scratch(detail::Scratch::PackedA, static_cast<size_t>(ceilDiv(kBlockRows * rowBytes, 4))));
  alignas(64) float scales[kPanelWidth];
  for (int64_t item = begin; item < end; ++item) {
    const int64_t row0 = item / panelRuns * kBlockRows, rowCount = std::min(kBlockRows, g.m - row0);
    const int64_t firstPanel = item % panelRuns * kBlockPanels;
    // The block's rows, whole quads, moved to u8 when A is signed.
    const uint8_t flip = g.a_signed ? 0x80 : 0;
    for (int64_t i = 0; i < rowCount; ++i) {
      const uint8_t *from = static_cast<const uint8_t *>(g.a) + (row0 + i) * g.lda;
      uint8_t *to = rows + i * rowBytes;
      for (int64_t k = 0; k < g.k; ++k)
        to[k] = from[k] ^ flip;
      std::fill(to + g.k, to + rowBytes, uint8_t{0});
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
        float *c = g.c + (row0 + i) * g.ldc + col0;
        kQTiles.fns[r - 1][vectors - 1](t.quads, rows + i * rowBytes, rowBytes, panel, sums, scales, t.zero, c, g.ldc,
                                        cols);
        if (g.epilogue)
          g.epilogue(g.epilogue_ctx, c, g.ldc, 0, row0 + i, col0, r, cols);
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
  // Column by column, its sum kept as it goes: qgemm packs a B that is not a weight on every
  // call, so this allocates nothing.
  const int64_t quads = quadsOf(k), panels = ceilDiv(n, kPanelWidth);
  int8_t *sums = dst + panels * quads * 4 * kPanelWidth;
  for (int64_t column = 0; column < panels * kPanelWidth; ++column) {
    const int64_t q = column / kPanelWidth, j = column % kPanelWidth;
    int32_t sum = 0;
    for (int64_t row = 0; row < 4 * quads; ++row) {
      const int8_t value = row < k && column < n ? src[row * strideK + column * strideN] : int8_t{0};
      dst[((q * quads + row / 4) * kPanelWidth + j) * 4 + row % 4] = value;
      sum += value;
    }
    std::memcpy(sums + column * static_cast<int64_t>(sizeof sum), &sum, sizeof sum);
  }
}

void qgemm(const kiln_rt *rt, const kiln_qgemm_args *args) {
  if (!args || args->m <= 0 || args->n <= 0 || args->k < 0 || !args->a || !args->b || !args->b_scales || !args->c ||
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
  const QTiles tiles{g, quads, panels, g.a_zero + (g.a_signed ? 128 : 0),
                     reinterpret_cast<const int32_t *>(g.b + panels * quads * 4 * kPanelWidth)};
  const int64_t items = ceilDiv(g.m, kBlockRows) * ceilDiv(panels, kBlockPanels);
  detail::parallelForIfWorth(rt, items, g.m * g.n * std::max<int64_t>(g.k, 1), int64_t{1} << 20, qgemmItems,
                             const_cast<QTiles *>(&tiles));
}

} // namespace kiln::runtime::kernels
