// Matrix-vector products (Gemv.h). Both forms keep 8 independent FMA chains in flight:
// "axpy" (outputs contiguous in memory) accumulates 128 outputs in 8 registers while walking
// the matrix rows; "dot" (depth contiguous) runs 8 dot products side by side and reduces each
// at the end.
#include "runtime/kernels/Gemv.h"

#include <algorithm>

#include "runtime/kernels/Simd.h"

namespace kiln::runtime::kernels::detail {

namespace {

#ifdef __AVX512F__
// How far ahead along each matrix row the dot form fetches: the matrix streams from memory
// once (a classifier's weights at batch 1), 8 rows at a time, more streams than the
// hardware prefetcher followed well: MobileNetV2's 1280 -> 1000 layer (5 MB) took 0.26-0.28 ms
// at one thread, 0.19-0.23 with this (one Zen 5 core).
constexpr int64_t kPrefetchFloats = 512;

// (Not _mm512_reduce_add_ps: g++ 12 warns about an uninitialised temporary inside it.)
float horizontalSum(__m512 v) {
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, v);
  float sum = 0.0f;
  for (float lane : lanes)
    sum += lane;
  return sum;
}

void gemvAxpy(const float *x, const float *mat, int64_t ld, int64_t outputs, int64_t depth,
              float *out) {
  constexpr int kRegs = 8;
  for (int64_t o0 = 0; o0 < outputs; o0 += kRegs * 16) {
    __mmask16 masks[kRegs];
    for (int v = 0; v < kRegs; ++v)
      masks[v] = o0 + v * 16 < outputs ? firstLanes(outputs - o0 - v * 16) : 0;
    __m512 acc[kRegs];
    for (int v = 0; v < kRegs; ++v)
      acc[v] = _mm512_setzero_ps();
    if (masks[kRegs - 1] == 0xFFFF) {
      for (int64_t k = 0; k < depth; ++k) {
        const __m512 xv = _mm512_set1_ps(x[k]);
        const float *row = mat + k * ld + o0;
        for (int v = 0; v < kRegs; ++v)
          acc[v] = _mm512_fmadd_ps(xv, _mm512_loadu_ps(row + v * 16), acc[v]);
      }
    } else {
      for (int64_t k = 0; k < depth; ++k) {
        const __m512 xv = _mm512_set1_ps(x[k]);
        const float *row = mat + k * ld + o0;
        for (int v = 0; v < kRegs; ++v)
          acc[v] = _mm512_fmadd_ps(xv, _mm512_maskz_loadu_ps(masks[v], row + v * 16), acc[v]);
      }
    }
    for (int v = 0; v < kRegs; ++v)
      _mm512_mask_storeu_ps(out + o0 + v * 16, masks[v], acc[v]);
  }
}

void gemvDot(const float *x, const float *mat, int64_t ld, int64_t outputs, int64_t depth,
             float *out) {
  constexpr int kRows = 8;
  for (int64_t o0 = 0; o0 < outputs; o0 += kRows) {
    const int rows = static_cast<int>(std::min<int64_t>(kRows, outputs - o0));
    const float *rowPtr[kRows];
    for (int r = 0; r < kRows; ++r)
      rowPtr[r] = mat + (o0 + std::min(r, rows - 1)) * ld; // repeat the last row: no branches
    __m512 acc[kRows];
    for (int r = 0; r < kRows; ++r)
      acc[r] = _mm512_setzero_ps();
    for (int64_t k = 0; k < depth; k += 16) {
      const __mmask16 mask = firstLanes(depth - k);
      const __m512 xv = _mm512_maskz_loadu_ps(mask, x + k);
      for (int r = 0; r < kRows; ++r) {
        _mm_prefetch(reinterpret_cast<const char *>(rowPtr[r] + k + kPrefetchFloats), _MM_HINT_T0);
        acc[r] = _mm512_fmadd_ps(xv, _mm512_maskz_loadu_ps(mask, rowPtr[r] + k), acc[r]);
      }
    }
    for (int r = 0; r < rows; ++r)
      out[o0 + r] = horizontalSum(acc[r]);
  }
}
#else
void gemvAxpy(const float *x, const float *mat, int64_t ld, int64_t outputs, int64_t depth,
              float *out) {
  std::fill(out, out + outputs, 0.0f);
  for (int64_t k = 0; k < depth; ++k)
    for (int64_t o = 0; o < outputs; ++o)
      out[o] += x[k] * mat[k * ld + o];
}

void gemvDot(const float *x, const float *mat, int64_t ld, int64_t outputs, int64_t depth,
             float *out) {
  for (int64_t o = 0; o < outputs; ++o) {
    float sum = 0.0f;
    for (int64_t k = 0; k < depth; ++k)
      sum += x[k] * mat[o * ld + k];
    out[o] = sum;
  }
}
#endif

} // namespace

void gemv(const float *x, const float *mat, int64_t ld, bool outputsContiguous, int64_t outputs,
          int64_t depth, float *out) {
  if (outputsContiguous)
    gemvAxpy(x, mat, ld, outputs, depth, out);
  else
    gemvDot(x, mat, ld, outputs, depth, out);
}

} // namespace kiln::runtime::kernels::detail
