#pragma once
// The requantisation kiln_quantized_output asks of qgemm and qconv2d: each f32 output, after
// the post ops, stored as saturate(round_half_even(v / scale) + zero) in one byte, bit for bit
// as generated code's div, round, add and saturating cast compute it. The product tiles do it
// in registers (storeQuantizedTile, from qTile); every other path hands its finished f32 tiles
// to QuantizedOutputEpilogue. Internal to runtime/kernels/.
#include <cmath>
#include <cstdint>

#include "runtime/KernelAbi.h"
#include "runtime/kernels/PostOps.h" // TilePostOps, ClampPost
#include "runtime/kernels/Simd.h"    // firstLanes

namespace kiln::runtime::kernels::detail {

inline bool hasQuantizedOutput(const kiln_quantized_output &out) { return out.q != nullptr; }

/// One output as kiln_quantized_output stores it, for the scalar paths: what generated code's
/// kiln_sat does to the rounded value (NaN to 0, clamped, truncated toward zero).
inline uint8_t quantizeValue(float v, const kiln_quantized_output &out) {
  const float r = std::nearbyint(v / out.scale) + out.zero;
  const float lo = out.is_signed ? -128.0f : 0.0f, hi = out.is_signed ? 127.0f : 255.0f;
  if (r != r)
    return 0;
  const int32_t value = static_cast<int32_t>(r <= lo ? lo : (r >= hi ? hi : r));
  return static_cast<uint8_t>(value);
}

/// Where one tile's bytes go: element (i, j) to q[i * ldq + j].
struct QuantizedTile {
  uint8_t *q;
  int64_t ldq;
  const kiln_quantized_output *out;
};

#ifdef __AVX512F__
/// The requantisation in 16 lanes: max(v, lo) takes a NaN lane to lo, which the mask of
/// ordered lanes then zeroes, as quantizeValue does.
struct QuantizeLanes {
  explicit QuantizeLanes(const kiln_quantized_output &out)
      : scale(_mm512_set1_ps(out.scale)), zero(_mm512_set1_ps(out.zero)),
        lo(_mm512_set1_ps(out.is_signed ? -128.0f : 0.0f)), hi(_mm512_set1_ps(out.is_signed ? 127.0f : 255.0f)) {}

  void store(uint8_t *to, __mmask16 lanes, __m512 v) const {
    v = _mm512_roundscale_ps(_mm512_div_ps(v, scale), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    v = _mm512_add_ps(v, zero);
    const __mmask16 ordered = _mm512_cmp_ps_mask(v, v, _CMP_ORD_Q);
    const __m512i values = _mm512_maskz_cvttps_epi32(ordered, _mm512_min_ps(_mm512_max_ps(v, lo), hi));
    _mm512_mask_cvtepi32_storeu_epi8(to, lanes, values);
  }

  __m512 scale, zero, lo, hi;
};

/// A product tile's R x (16*NV) values (its first `cols` columns) with `post` applied (as
/// ClampPost applies them in the f32 stores), requantised into the tile's bytes.
template <int R, int NV>
inline __attribute__((always_inline)) void storeQuantizedTile(const __m512 (&acc)[R][NV], const TilePostOps *post,
                                                              const QuantizedTile &tile, int64_t cols) {
  const ClampPost clamp(post);
  const QuantizeLanes lanes(*tile.out);
  const __mmask16 lastMask = firstLanes(cols - (NV - 1) * 16);
#pragma GCC unroll 8
  for (int i = 0; i < R; ++i) {
    const __m512 rowBias = clamp.rowBias(i);
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) {
      const __mmask16 mask = j == NV - 1 ? lastMask : static_cast<__mmask16>(0xFFFF);
      lanes.store(tile.q + i * tile.ldq + j * 16, mask, clamp.apply(acc[i][j], clamp.bias(rowBias, j * 16, mask)));
    }
  }
}
#endif

/// Applies `post` to the rows x cols f32 tile at `tile` (leading dimension ld), then
/// requantises it into `to`.
void quantizeTile(const float *tile, int64_t ld, const TilePostOps &post, const QuantizedTile &to, int64_t rows,
                  int64_t cols);

/// An epilogue that does the post ops and the requantisation on each finished f32 tile, for
/// the paths that cannot in registers: output (batch, row, col) goes to
/// q + batch * batchStride + row * rowStride + col.
struct QuantizedOutputEpilogue {
  kiln_post_ops post{};
  bool perRow = true;
  kiln_quantized_output out{};
  int64_t batchStride = 0, rowStride = 0;

  static void call(void *self, float *tile, int64_t ld, int64_t batch, int64_t row0, int64_t col0, int64_t rows,
                   int64_t cols);
};

} // namespace kiln::runtime::kernels::detail
