#pragma once
// How qgemm and qconv2d finish an output beyond the post ops when asked to: a residual addend
// (kiln_qgemm_args::addend, or addend_q's bytes dequantized), then the activation, then the
// f32 value and/or its requantisation (kiln_quantized_output): saturate(round_half_even(v /
// scale) + zero) in one byte, bit for bit as generated code's add, div, round, add and
// saturating cast compute them. The product
// tiles do it in registers (storeFinishedTile, from qTile); the other paths hand their f32
// tiles to FinishEpilogue. Internal to runtime/kernels/.
#include <cmath>
#include <cstdint>

#include "runtime/KernelAbi.h"
#include "runtime/kernels/PostOps.h" // TilePostOps, ClampPost
#include "runtime/kernels/Simd.h"    // firstLanes

namespace kiln::runtime::kernels::detail {

inline bool hasQuantizedOutput(const kiln_quantized_output &out) { return out.q != nullptr; }

/// Whether a call's outputs need finishing here rather than a plain (post-op) store.
template <typename Args> bool finishesOutputs(const Args &g) {
  return g.addend || g.addend_q.q || hasQuantizedOutput(g.quantized);
}

/// One byte of a residual read as bytes, dequantized as generated code's cast, sub and mul
/// compute it: not inlined, so that the compiler cannot fuse the product into the caller's add.
__attribute__((noinline)) inline float dequantizedAddend(const kiln_quantized_addend &addend, uint8_t byte) {
  const float value = addend.is_signed ? static_cast<float>(static_cast<int8_t>(byte)) : static_cast<float>(byte);
  return (value - addend.zero) * addend.scale;
}

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

/// Where one tile's finished outputs come from and go: element (i, j) of each at [i * ld + j],
/// each pointer at the tile's first element, or null when the call has none.
struct FinishedTile {
  const float *addend = nullptr;
  const uint8_t *addendBytes = nullptr; // or the residual as bytes, dequantized as addendQuant says
  float *c = nullptr;  // the f32 values
  uint8_t *q = nullptr; // the requantised ones
  int64_t ld = 0;
  const kiln_quantized_output *quantized = nullptr;
  const kiln_quantized_addend *addendQuant = nullptr;
};

/// The pointers of the tile whose first element is output `at` of a call with these outputs
/// (`y` its f32 output, laid out with leading dimension `ld`).
template <typename Args> FinishedTile finishedTile(const Args &g, float *y, int64_t at, int64_t ld) {
  const bool quantized = hasQuantizedOutput(g.quantized);
  return {g.addend ? g.addend + at : nullptr, g.addend_q.q ? static_cast<const uint8_t *>(g.addend_q.q) + at : nullptr,
          !quantized || g.quantized.keep_f32 ? y + at : nullptr,
          quantized ? static_cast<uint8_t *>(g.quantized.q) + at : nullptr, ld, &g.quantized, &g.addend_q};
}

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

/// 16 lanes of row i of a tile (columns j.., `lanes` of them real) finished: the bias, the
/// addend, the activation, then stored as the tile asks.
inline __attribute__((always_inline)) void finishLanes(__m512 v, __m512 bias, const ClampPost &clamp,
                                                       const QuantizeLanes &quantize, const FinishedTile &to,
                                                       int64_t i, int64_t j, __mmask16 lanes) {
  const int64_t at = i * to.ld + j;
  v = _mm512_add_ps(v, bias);
  if (to.addend)
    v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(lanes, to.addend + at));
  if (to.addendBytes) {
    const kiln_quantized_addend &bytes = *to.addendQuant;
    const __m128i raw = _mm_maskz_loadu_epi8(lanes, to.addendBytes + at);
    const __m512 value = _mm512_cvtepi32_ps(bytes.is_signed ? _mm512_cvtepi8_epi32(raw) : _mm512_cvtepu8_epi32(raw));
    // Rounded on its own (an explicit rounding mode): generated code adds the rounded product.
    v = _mm512_add_ps(v, _mm512_mul_round_ps(_mm512_sub_ps(value, _mm512_set1_ps(bytes.zero)),
                                             _mm512_set1_ps(bytes.scale), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  v = clamp.activation(v);
  if (to.c)
    _mm512_mask_storeu_ps(to.c + at, lanes, v);
  if (to.q)
    quantize.store(to.q + at, lanes, v);
}

inline const kiln_quantized_output &quantizedOrNone(const FinishedTile &to) {
  static const kiln_quantized_output kNone{nullptr, 0, 1.0f, 0.0f, 0};
  return to.q ? *to.quantized : kNone;
}

/// A product tile's R x (16*NV) values (its first `cols` columns) finished into `to`, with
/// `post` as ClampPost applies it in the f32 stores.
template <int R, int NV>
inline __attribute__((always_inline)) void storeFinishedTile(const __m512 (&acc)[R][NV], const TilePostOps *post,
                                                             const FinishedTile &to, int64_t cols) {
  const ClampPost clamp(post);
  const QuantizeLanes quantize(quantizedOrNone(to));
  const __mmask16 lastMask = firstLanes(cols - (NV - 1) * 16);
#pragma GCC unroll 8
  for (int i = 0; i < R; ++i) {
    const __m512 rowBias = clamp.rowBias(i);
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) {
      const __mmask16 mask = j == NV - 1 ? lastMask : static_cast<__mmask16>(0xFFFF);
      finishLanes(acc[i][j], clamp.bias(rowBias, j * 16, mask), clamp, quantize, to, i, j * 16, mask);
    }
  }
}
#endif

/// The rows x cols f32 tile at `tile` (leading dimension ld) with `post`'s bias, finished into
/// `to` (the tile may be to.c itself).
void finishTile(const float *tile, int64_t ld, const TilePostOps &post, const FinishedTile &to, int64_t rows,
                int64_t cols);

/// An epilogue that finishes each f32 tile of a call whose outputs need it (finishesOutputs),
/// for the paths that cannot in registers: output (batch, row, col) is element
/// batch * batchStride + row * rowStride + col of y, the addend and q.
struct FinishEpilogue {
  kiln_post_ops post{};
  bool perRow = true;
  const float *addend = nullptr;
  kiln_quantized_addend addend_q{};
  float *y = nullptr;
  kiln_quantized_output quantized{};
  int64_t batchStride = 0, rowStride = 0;

  static void call(void *self, float *tile, int64_t ld, int64_t batch, int64_t row0, int64_t col0, int64_t rows,
                   int64_t cols);
};

} // namespace kiln::runtime::kernels::detail
