// Post ops applied to finished tiles (PostOps.h).
#include "runtime/kernels/PostOps.h"

namespace kiln::runtime::kernels::detail {

float activate(float v, const TilePostOps &post) {
  switch (post.activation) {
  case KILN_ACTIVATION_RELU: return v > 0.0f || v != v ? v : 0.0f;
  case KILN_ACTIVATION_CLIP: {
    if (v != v)
      return v;
    const float atLeastLo = v < post.lo ? post.lo : v; // std::max(v, lo), then std::min(., hi)
    return post.hi < atLeastLo ? post.hi : atLeastLo;
  }
  case KILN_ACTIVATION_SILU: {
#ifdef __AVX512F__
    float e;
    _mm512_mask_storeu_ps(&e, 1, expVector(_mm512_set1_ps(-v)));
#else
    const float e = std::exp(-v);
#endif
    return v * (1.0f / (1.0f + e));
  }
  case KILN_ACTIVATION_GELU: {
#ifdef __AVX512F__
    float erf;
    _mm512_mask_storeu_ps(&erf, 1, erfVector(_mm512_set1_ps(v * 0.70710678118654752f)));
#else
    const float erf = std::erf(v * 0.70710678118654752f);
#endif
    return (v * 0.5f) * (erf + 1.0f);
  }
  case KILN_ACTIVATION_HARD_SIGMOID:
  case KILN_ACTIVATION_HARD_SWISH: {
    TilePostOps clip;
    clip.activation = KILN_ACTIVATION_CLIP, clip.lo = 0.0f, clip.hi = 1.0f;
    const float product = v * post.alpha; // two roundings, as the decomposition's mul and add
    const float gate = activate(product + post.beta, clip);
    if (post.activation == KILN_ACTIVATION_HARD_SIGMOID)
      return gate;
    return gate == 0.0f ? 0.0f : v * gate;
  }
  default: return v;
  }
}

#ifdef __AVX512F__
__m512 geluVector(__m512 v) {
  const __m512 erf = erfVector(_mm512_mul_ps(v, _mm512_set1_ps(0.70710678118654752f)));
  return _mm512_mul_ps(_mm512_mul_ps(v, _mm512_set1_ps(0.5f)), _mm512_add_ps(erf, _mm512_set1_ps(1.0f)));
}
#endif

void applyPostOps(const kiln_post_ops &post, bool perRow, float *tile, int64_t ld, int64_t row0, int64_t col0,
                  int64_t rows, int64_t cols) {
  const TilePostOps tilePost = tilePostOps(post, perRow, row0, col0);
  for (int64_t i = 0; i < rows; ++i) {
    float *row = tile + i * ld;
    int64_t j = 0;
#ifdef __AVX512F__
    for (; j < cols; j += 16) {
      const __mmask16 lanes = firstLanes(cols - j);
      const __m512 v = _mm512_maskz_loadu_ps(lanes, row + j);
      _mm512_mask_storeu_ps(row + j, lanes, withPostOps(v, tilePost, i, j, lanes));
    }
#endif
    for (; j < cols; ++j)
      row[j] = withPostOps(row[j], tilePost, i, j);
  }
}

void PostOpsEpilogue::call(void *vself, float *tile, int64_t ld, int64_t batch, int64_t row0, int64_t col0,
                           int64_t rows, int64_t cols) {
  const PostOpsEpilogue &self = *static_cast<const PostOpsEpilogue *>(vself);
  applyPostOps(self.post, self.perRow, tile, ld, row0, col0, rows, cols);
  if (self.next)
    self.next(self.nextCtx, tile, ld, batch, row0, col0, rows, cols);
}

void wrapPostOps(kiln_post_ops &post, bool perRow, kiln_epilogue_fn &epilogue, void *&epilogueCtx,
                 PostOpsEpilogue &wrapper) {
  if (!hasPostOps(post))
    return;
  wrapper = PostOpsEpilogue{post, perRow, epilogue, epilogueCtx};
  epilogue = PostOpsEpilogue::call;
  epilogueCtx = &wrapper;
  post = kiln_post_ops{};
}

} // namespace kiln::runtime::kernels::detail
