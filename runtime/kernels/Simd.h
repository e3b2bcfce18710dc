#pragma once
// AVX-512 helpers shared by the kernels: lane masks, loads of every stride-th float (for the
// convolution packer, depthwise convolution and pooling, whose windows step by 1 or 2 pixels)
// and a 16 x 16 transpose (transposing packs and stores). Internal to runtime/kernels/.
#include <cstdint>

#ifdef __AVX512F__
// g++ 12's AVX-512 intrinsics start from _mm512_undefined_*(), written as a self-initialised
// variable, and -W(maybe-)uninitialized flags it inside them. Diagnostics go by source
// location, so silencing the warnings around the include covers exactly those headers.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
#endif

namespace kiln::runtime::kernels::detail {

#ifdef __AVX512F__

/// The first n lanes (n may be <= 0 or >= 16).
inline __mmask16 firstLanes(int64_t n) {
  if (n <= 0)
    return 0;
  return n >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << n) - 1u);
}

/// Lane t < count (1..16) holds p[t*stride], the others 0; reads nothing else.
inline __m512 loadStrided(const float *p, int64_t stride, int64_t count) {
  const __mmask16 mask = firstLanes(count);
  if (stride == 1)
    return _mm512_maskz_loadu_ps(mask, p);
  if (stride == 2) { // p[0], p[2], ... from two loads of 16: no gather
    const int64_t span = 2 * count - 1;
    const __m512 lo = _mm512_maskz_loadu_ps(firstLanes(span), p);
    const __m512 hi = _mm512_maskz_loadu_ps(firstLanes(span - 16), p + 16);
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    return _mm512_maskz_permutex2var_ps(mask, lo, even, hi);
  }
  if (stride > 0 && stride <= (int64_t{1} << 26)) {
    const __m512i index = _mm512_mullo_epi32(
        _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
        _mm512_set1_epi32(static_cast<int>(stride)));
    return _mm512_mask_i32gather_ps(_mm512_setzero_ps(), mask, index, p, 4);
  }
  alignas(64) float lanes[16] = {};
  for (int64_t t = 0; t < count; ++t)
    lanes[t] = p[t * stride];
  return _mm512_load_ps(lanes);
}


/// Transposes 16 rows of 16 floats in place: afterwards r[u][t] is the old r[t][u].
inline void transpose16x16(__m512 r[16]) {
  __m512 t[16];
  for (int i = 0; i < 8; ++i) { // 32-bit interleave of row pairs
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  __m512 u[16]; // u[4j + c], 128-bit lane q: column 4q + c of rows 4j..4j+3
  for (int j = 0; j < 4; ++j) {
    const __m512d t0 = _mm512_castps_pd(t[4 * j]), t1 = _mm512_castps_pd(t[4 * j + 1]);
    const __m512d t2 = _mm512_castps_pd(t[4 * j + 2]), t3 = _mm512_castps_pd(t[4 * j + 3]);
    u[4 * j + 0] = _mm512_castpd_ps(_mm512_unpacklo_pd(t0, t2));
    u[4 * j + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(t0, t2));
    u[4 * j + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(t1, t3));
    u[4 * j + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(t1, t3));
  }
  for (int c = 0; c < 4; ++c) { // gather lane q of u[c], u[4+c], u[8+c], u[12+c]
    const __m512 even0 = _mm512_shuffle_f32x4(u[c], u[4 + c], 0x88);
    const __m512 even1 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0x88);
    const __m512 odd0 = _mm512_shuffle_f32x4(u[c], u[4 + c], 0xDD);
    const __m512 odd1 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0xDD);
    r[c] = _mm512_shuffle_f32x4(even0, even1, 0x88);
    r[8 + c] = _mm512_shuffle_f32x4(even0, even1, 0xDD);
    r[4 + c] = _mm512_shuffle_f32x4(odd0, odd1, 0x88);
    r[12 + c] = _mm512_shuffle_f32x4(odd0, odd1, 0xDD);
  }
}
#endif

/// dst[t] = src[t*stride] for t < count.
inline void copyStrided(float *dst, const float *src, int64_t stride, int64_t count) {
#ifdef __AVX512F__
  int64_t t = 0;
  if (stride == 1) {
    for (; t + 16 <= count; t += 16)
      _mm512_storeu_ps(dst + t, _mm512_loadu_ps(src + t));
  }
  for (; t < count; t += 16)
    _mm512_mask_storeu_ps(dst + t, firstLanes(count - t), loadStrided(src + t * stride, stride, count - t));
#else
  for (int64_t t = 0; t < count; ++t)
    dst[t] = src[t * stride];
#endif
}

} // namespace kiln::runtime::kernels::detail
