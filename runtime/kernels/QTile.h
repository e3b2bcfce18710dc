#pragma once
// The int8 micro-kernel qgemm and qconv2d share: a 6 x 64 tile of exact int32 sums on AVX-512
// VNNI, dequantized to f32 in registers and stored as the f32 GEMM's tiles are. Internal to
// runtime/kernels/.
//
// Per quad of k, 4 vectors of the panel (16 columns x 4 bytes each) and 6 broadcast words of
// the rows (4 bytes of a row) feed 24 vpdpbusd, each four u8 x s8 products per int32 lane:
// four times the products of an f32 FMA step for the same instructions. vpdpbusd takes one
// operand unsigned and the other signed, and either may be the broadcast one:
//  - RowsSigned = false (qgemm): u8 activation rows, s8 weight panels. The activations' zero
//    point z is taken out per column: sum (a - z) b = sum a b - z * colsum(b); scales are per
//    column too.
//  - RowsSigned = true (qconv2d): s8 weight rows (output channels), u8 activation panels
//    (pixels). The correction z * rowsum(w) and the scales are per row.
// `sums` and `scales` hold one value per column (64) or per row (R) accordingly.
#include <cstdint>
#include <cstring>

#include "runtime/kernels/GemmMicroKernel.h" // storeTile, kMaxRows, kPanelWidth, makeTable
#include "runtime/kernels/QuantizedOutput.h" // storeFinishedTile, FinishedTile

namespace kiln::runtime::kernels::detail {

/// The quads (4 bytes: one int32 lane of vpdpbusd) that k int8 values fill, the last padded.
inline int64_t quadsOf(int64_t k) { return (k + 3) / 4; }

/// Rows per work item of an int8 product over m rows: at most kQBlockRows, in as few blocks as
/// that allows, the blocks as equal as whole tiles make them (96 + 32 rows split statically
/// left one thread with three times the other's work).
constexpr int64_t kQBlockRows = 16 * kMaxRows;
struct RowBlocks {
  int64_t count, rows;
};
inline RowBlocks equalRowBlocks(int64_t m) {
  const int64_t count = (m + kQBlockRows - 1) / kQBlockRows;
  return {count, ((m + count - 1) / count + kMaxRows - 1) / kMaxRows * kMaxRows};
}

/// The tile's f32 values go to c (ldc apart), with `post` applied when not null; with `finish`,
/// finished as it says instead (c unused). Quad p of the panel (its 64 columns x 4 bytes) lies
/// at panel + p * 4 * kPanelWidth (a packed panel: quadOffsets is null) or, for the tiles that
/// read their quads in place (QuadOffsets), at panel + quadOffsets[p].
using QTileFn = void (*)(int64_t quads, const uint8_t *rows, int64_t rowBytes, const uint8_t *panel,
                         const int64_t *quadOffsets, const int32_t *sums, const float *scales, int32_t zero, float *c,
                         int64_t ldc, int64_t cols, const TilePostOps *post, const FinishedTile *finish);

template <int R, int NV, bool RowsSigned, bool QuadOffsets>
void qTile(int64_t quads, const uint8_t *a, int64_t lda, const uint8_t *b, const int64_t *quadOffsets,
           const int32_t *sums, const float *scales, int32_t zero, float *c, int64_t ldc, int64_t cols,
           const TilePostOps *post, const FinishedTile *finish) {
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
    const uint8_t *quad = QuadOffsets ? b + quadOffsets[p] : b + p * 4 * kPanelWidth;
    __v16si bv[NV];
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j)
      bv[j] = (__v16si)_mm512_loadu_si512(quad + j * 4 * kVector);
#pragma GCC unroll 8
    for (int i = 0; i < R; ++i) {
      int32_t word = 0;
      std::memcpy(&word, rows[i], sizeof word);
      const __v16si av = (__v16si)_mm512_set1_epi32(word);
#pragma GCC unroll 4
      for (int j = 0; j < NV; ++j)
        acc[i][j] = RowsSigned ? __builtin_ia32_vpdpbusd_v16si(acc[i][j], bv[j], av)
                               : __builtin_ia32_vpdpbusd_v16si(acc[i][j], av, bv[j]);
      rows[i] += 4;
    }
  }
  __m512 out[R][NV];
  const __m512i zeros = _mm512_set1_epi32(zero);
#pragma GCC unroll 4
  for (int j = 0; j < NV; ++j)
#pragma GCC unroll 8
    for (int i = 0; i < R; ++i) {
      const __m512i correction = RowsSigned ? _mm512_set1_epi32(zero * sums[i])
                                            : _mm512_mullo_epi32(zeros, _mm512_loadu_si512(sums + j * kVector));
      const __m512 scale = RowsSigned ? _mm512_set1_ps(scales[i]) : _mm512_loadu_ps(scales + j * kVector);
      out[i][j] = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32((__m512i)acc[i][j], correction)), scale);
    }
  if (finish)
    storeFinishedTile(out, post, *finish, cols);
  else
    storeTile(out, c, ldc, cols, 0, post);
#else
  constexpr int W = NV * kVector;
  int32_t acc[R][W] = {};
  for (int64_t p = 0; p < quads; ++p)
    for (int i = 0; i < R; ++i)
      for (int j = 0; j < W; ++j)
        for (int t = 0; t < 4; ++t) {
          const int32_t row = RowsSigned ? int32_t{static_cast<int8_t>(a[i * lda + 4 * p + t])} : a[i * lda + 4 * p + t];
          const uint8_t byte = (QuadOffsets ? b + quadOffsets[p] : b + p * 4 * kPanelWidth)[j * 4 + t];
          acc[i][j] += row * (RowsSigned ? int32_t{byte} : int32_t{static_cast<int8_t>(byte)});
        }
  float values[R][W];
  for (int i = 0; i < R; ++i)
    for (int j = 0; j < W; ++j)
      values[i][j] = RowsSigned ? static_cast<float>(acc[i][j] - zero * sums[i]) * scales[i]
                                : static_cast<float>(acc[i][j] - zero * sums[j]) * scales[j];
  if (finish) {
    finishTile(&values[0][0], W, post ? *post : TilePostOps{}, *finish, R, cols);
    return;
  }
#ifdef __AVX512F__ // AVX-512 without VNNI: the store takes vectors
  __m512 out[R][NV];
  for (int i = 0; i < R; ++i)
    for (int j = 0; j < NV; ++j)
      out[i][j] = _mm512_loadu_ps(values[i] + j * kVector);
  storeTile(out, c, ldc, cols, 0, post);
#else
  storeTile(values, c, ldc, cols, 0, post);
#endif
#endif
}

template <int R, int NV> struct QGemmTileOf {
  static constexpr QTileFn fn = &qTile<R, NV, false, false>;
};
template <int R, int NV> struct QConvTileOf {
  static constexpr QTileFn fn = &qTile<R, NV, true, true>;
};

} // namespace kiln::runtime::kernels::detail
