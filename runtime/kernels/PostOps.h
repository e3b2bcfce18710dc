#pragma once
// Post ops (kiln_post_ops, KernelAbi.h): the bias and activation gemm and conv2d apply to
// every output before their epilogue. The blocked GEMM (GemmDriver.cpp) applies them in
// registers as its micro-kernels store a tile (TilePostOps); every other kernel path gets
// them as PostOpsEpilogue, an epilogue that applies them to each finished tile before the
// caller's. Internal to runtime/kernels/.
#include <cstdint>

#include "runtime/KernelAbi.h"
#include "runtime/kernels/Simd.h" // <immintrin.h>

namespace kiln::runtime::kernels::detail {

inline bool hasPostOps(const kiln_post_ops &post) {
  return post.bias || post.activation != KILN_ACTIVATION_NONE;
}

/// What a micro-kernel applies as it stores one tile: the bias of its row i (rowBias[i]) or
/// of its column j (columnBias[j]), then the activation.
struct TilePostOps {
  const float *rowBias = nullptr;
  const float *columnBias = nullptr;
  int32_t activation = KILN_ACTIVATION_NONE;
  float lo = 0.0f, hi = 0.0f;
};

/// The activation as the reference evaluator computes it, bit for bit: relu keeps NaN and
/// turns -0 into +0; clip is kiln_fclip, min(max(x, lo), hi) with NaN kept.
inline float activate(float v, int32_t activation, float lo, float hi) {
  if (v != v || activation == KILN_ACTIVATION_NONE)
    return v;
  if (activation == KILN_ACTIVATION_RELU)
    return v > 0.0f ? v : 0.0f;
  const float atLeastLo = v < lo ? lo : v; // std::max(v, lo), then std::min(., hi)
  return hi < atLeastLo ? hi : atLeastLo;
}

#ifdef __AVX512F__
inline __m512 activate(__m512 v, int32_t activation, float lo, float hi) {
  switch (activation) {
  case KILN_ACTIVATION_RELU: // lanes not <= 0 (positive or NaN) kept, the rest +0
    return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(v, _mm512_setzero_ps(), _CMP_NLE_UQ), v);
  case KILN_ACTIVATION_CLIP: // max(a, b) and min(a, b) return b when either is NaN
    return _mm512_min_ps(_mm512_set1_ps(hi), _mm512_max_ps(_mm512_set1_ps(lo), v));
  default: return v;
  }
}
#endif

/// Applies `post` to the rows x cols tile at `tile` (leading dimension ld) whose first
/// element is output (row0, col0): bias[row0 + i] on row i when perRow, else bias[col0 + j]
/// on column j; then the activation.
void applyPostOps(const kiln_post_ops &post, bool perRow, float *tile, int64_t ld, int64_t row0, int64_t col0,
                  int64_t rows, int64_t cols);

/// An epilogue that applies post ops to each tile, then calls the caller's epilogue (if any):
/// how the kernels that cannot apply them in registers honour them.
struct PostOpsEpilogue {
  kiln_post_ops post{};
  bool perRow = true;
  kiln_epilogue_fn next = nullptr;
  void *nextCtx = nullptr;

  static void call(void *self, float *tile, int64_t ld, int64_t batch, int64_t row0, int64_t col0, int64_t rows,
                   int64_t cols);
};

/// Moves `post` (when it has any) into `wrapper`, ahead of `epilogue`, and points the epilogue
/// at the wrapper; `post` is cleared.
void wrapPostOps(kiln_post_ops &post, bool perRow, kiln_epilogue_fn &epilogue, void *&epilogueCtx,
                 PostOpsEpilogue &wrapper);

} // namespace kiln::runtime::kernels::detail
