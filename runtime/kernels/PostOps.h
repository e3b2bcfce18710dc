#pragma once
// Post ops (kiln_post_ops, KernelAbi.h): the bias and activation gemm and conv2d apply to
// every output before their epilogue. The blocked GEMM (GemmDriver.cpp) applies them in
// registers as its micro-kernels store a tile (TilePostOps); every other kernel path gets
// them as PostOpsEpilogue, an epilogue that applies them to each finished tile before the
// caller's. Internal to runtime/kernels/.
#include <cmath>
#include <cstdint>
#include <initializer_list>

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
  float lo = 0.0f, hi = 0.0f, alpha = 0.0f, beta = 0.0f;
};

/// `post` for the tile whose first element is output (row0, col0): the biases of its rows
/// when perRow, else of its columns, and the activation.
inline TilePostOps tilePostOps(const kiln_post_ops &post, bool perRow, int64_t row0, int64_t col0) {
  TilePostOps tile;
  if (post.bias)
    (perRow ? tile.rowBias : tile.columnBias) = post.bias + (perRow ? row0 : col0);
  tile.activation = post.activation;
  tile.lo = post.lo, tile.hi = post.hi, tile.alpha = post.alpha, tile.beta = post.beta;
  return tile;
}

#ifdef __AVX512F__
/// exp(x) in 16 lanes by the algorithm of generated code's kiln_expf (codegen/ScalarOps.cpp):
/// 2^n exp(r), n = round(x log2 e), r = x - n ln2 with ln2 split so that n*ln2_hi is exact,
/// exp(r) by its Taylor series to r^7; within 2 ulp, and inf, -inf and NaN mapped as std::exp
/// maps them. 2^n is applied by vscalefps, exact down to the denormals.
inline __m512 expVector(__m512 x) {
  const __m512 clamped = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-104.0f)), _mm512_set1_ps(88.8f));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(clamped, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145751953125f), clamped);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.428606765330187045e-06f), r);
  __m512 p = _mm512_set1_ps(1.0f / 5040);
  for (float c : {1.0f / 720, 1.0f / 120, 1.0f / 24, 1.0f / 6, 0.5f, 1.0f, 1.0f})
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(c));
  __m512 result = _mm512_scalef_ps(p, n);
  result = _mm512_mask_mov_ps(result, _mm512_cmp_ps_mask(x, _mm512_set1_ps(88.72284f), _CMP_GT_OQ),
                              _mm512_set1_ps(__builtin_inff()));
  result = _mm512_mask_mov_ps(result, _mm512_cmp_ps_mask(x, _mm512_set1_ps(-103.97208f), _CMP_LT_OQ),
                              _mm512_setzero_ps());
  return _mm512_mask_mov_ps(result, _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), x);
}
#endif

#ifdef __AVX512F__
/// erf(x) in 16 lanes by the algorithm of generated code's kiln_erff (codegen/ScalarOps.cpp):
/// x P(x^2/2 - 1) for |x| < 2, 1 - Q((|x| - 2.96)/0.96) with x's sign below 3.92, +-1 beyond.
inline __m512 erfVector(__m512 x) {
  const __m512 ax = _mm512_abs_ps(x);
  const __m512 u = _mm512_sub_ps(_mm512_mul_ps(_mm512_mul_ps(x, x), _mm512_set1_ps(0.5f)), _mm512_set1_ps(1.0f));
  __m512 near = _mm512_set1_ps(-1.49933358e-05f);
  for (float c : {7.82454372e-05f, -0.000334217271f, 0.00139938062f, -0.0052352082f, 0.0171303954f, -0.048662737f,
                  0.119478881f, -0.261111856f, 0.674933255f})
    near = _mm512_fmadd_ps(near, u, _mm512_set1_ps(c));
  near = _mm512_mul_ps(x, near);
  // Most lanes of a transformer's activations lie within |x| < 2 (GELU's x / sqrt 2: |x| <
  // 2.8): a vector whose lanes all do skips the second polynomial (NaN lanes do not skip).
  const __mmask16 far2 = _mm512_cmp_ps_mask(ax, _mm512_set1_ps(2.0f), _CMP_NLT_UQ);
  if (far2 == 0)
    return near;
  const __m512 v = _mm512_sub_ps(_mm512_mul_ps(ax, _mm512_set1_ps(1.0f / 0.96f)), _mm512_set1_ps(2.96f / 0.96f));
  __m512 tail = _mm512_set1_ps(-1.71577431e-05f);
  for (float c : {1.51444237e-05f, 0.000102883649f, -0.000345551234f, 0.00066689396f, -0.00097614649f,
                  0.00107574905f, -0.000862705638f, 0.000482131611f, -0.000169599865f, 2.83823174e-05f})
    tail = _mm512_fmadd_ps(tail, v, _mm512_set1_ps(c));
  const __m512 one = _mm512_set1_ps(1.0f);
  __m512 far = _mm512_mask_sub_ps(one, _mm512_cmp_ps_mask(ax, _mm512_set1_ps(3.92f), _CMP_LT_OQ), one, tail);
  far = _mm512_mask_sub_ps(far, _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LT_OQ), _mm512_setzero_ps(), far);
  far = _mm512_mask_mov_ps(far, _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), x);
  return _mm512_mask_mov_ps(near, far2, far);
}
#endif

/// The activation as the reference evaluator computes it: relu keeps NaN and turns -0 into
/// +0; clip is kiln_fclip, min(max(x, lo), hi) with NaN kept; hard sigmoid and hard swish are
/// their decompositions' ops in order (all these bit for bit); SiLU is x * (1 / (1 +
/// exp(-x))), exp within 2 ulp; GELU is (x * 0.5) * (1 + erf(x * sqrt(1/2))). Out of line: with AVX-512 it takes the lanes' exp, so that a
/// tile's scalar and vector elements agree whatever flags the caller has.
float activate(float v, const TilePostOps &post);

#ifdef __AVX512F__
/// GELU in 16 lanes, out of line: inlined into every micro-kernel's store with the others,
/// its erf polynomials cost MobileNetV2, which has no GELU, ~5% (8.6 -> 9.1 ms at one thread).
__m512 geluVector(__m512 v);

inline __m512 activate(__m512 v, const TilePostOps &post) {
  const float lo = post.lo, hi = post.hi;
  switch (post.activation) {
  case KILN_ACTIVATION_RELU: // lanes not <= 0 (positive or NaN) kept, the rest +0
    return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(v, _mm512_setzero_ps(), _CMP_NLE_UQ), v);
  case KILN_ACTIVATION_CLIP: // max(a, b) and min(a, b) return b when either is NaN
    return _mm512_min_ps(_mm512_set1_ps(hi), _mm512_max_ps(_mm512_set1_ps(lo), v));
  case KILN_ACTIVATION_SILU: {
    const __m512 one = _mm512_set1_ps(1.0f);
    const __m512 negated = _mm512_sub_ps(_mm512_setzero_ps(), v);
    return _mm512_mul_ps(v, _mm512_div_ps(one, _mm512_add_ps(one, expVector(negated))));
  }
  case KILN_ACTIVATION_GELU: return geluVector(v);
  case KILN_ACTIVATION_HARD_SIGMOID:
  case KILN_ACTIVATION_HARD_SWISH: {
    const __m512 line = _mm512_add_ps(_mm512_mul_ps(v, _mm512_set1_ps(post.alpha)), _mm512_set1_ps(post.beta));
    const __m512 gate = _mm512_min_ps(_mm512_set1_ps(1.0f), _mm512_max_ps(_mm512_setzero_ps(), line));
    if (post.activation == KILN_ACTIVATION_HARD_SIGMOID)
      return gate;
    const __mmask16 closed = _mm512_cmp_ps_mask(gate, _mm512_setzero_ps(), _CMP_EQ_OQ);
    return _mm512_maskz_mov_ps(static_cast<__mmask16>(~closed), _mm512_mul_ps(v, gate));
  }
  default: return v;
  }
}
#endif

/// Element (i, j) of a tile with `post` applied: its bias, then the activation.
inline float withPostOps(float v, const TilePostOps &post, int64_t i, int64_t j) {
  if (post.rowBias)
    v += post.rowBias[i];
  else if (post.columnBias)
    v += post.columnBias[j];
  return activate(v, post);
}

#ifdef __AVX512F__
/// Columns j, j + 1, ... of a tile's row i (`lanes` of them exist) with `post` applied.
inline __m512 withPostOps(__m512 v, const TilePostOps &post, int64_t i, int64_t j, __mmask16 lanes) {
  if (post.rowBias)
    v = _mm512_add_ps(v, _mm512_set1_ps(post.rowBias[i]));
  else if (post.columnBias)
    v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(lanes, post.columnBias + j));
  return activate(v, post);
}

/// Post ops as branch-free vector arithmetic, for store loops too tight to dispatch on their
/// kind (the GEMM micro-kernel, whose k-loop slowed with a loop per kind inlined into it; per
/// vector, withPostOps's tests and switch had cost MnasNet's K = 16 and 32 pointwise layers
/// 10-20%):
/// v + bias (-0 when there is none, which leaves every v as it is), clamped to [lo, hi]
/// (-inf and +inf without clip or relu; max and min keep NaN as their second operand), plus
/// `fix` (+0 for relu, whose -0 becomes +0; -0 otherwise, which changes nothing). That is
/// withPostOps bit for bit for none, bias, relu and clip; any other activation (`other`) is
/// activate()d after the bias.
struct ClampPost {
  explicit ClampPost(const TilePostOps *post) {
    if (!post)
      return;
    post_ = post;
    const int32_t act = post->activation;
    other = act != KILN_ACTIVATION_NONE && act != KILN_ACTIVATION_RELU && act != KILN_ACTIVATION_CLIP;
    if (act == KILN_ACTIVATION_RELU)
      lo = _mm512_setzero_ps(), fix = _mm512_setzero_ps();
    if (act == KILN_ACTIVATION_CLIP)
      lo = _mm512_set1_ps(post->lo), hi = _mm512_set1_ps(post->hi);
  }
  /// Row i's bias as a vector (-0 without a row bias).
  __m512 rowBias(int64_t i) const {
    return post_ && post_->rowBias ? _mm512_set1_ps(post_->rowBias[i]) : _mm512_set1_ps(-0.0f);
  }
  /// The bias of columns j.. (`lanes` of them exist): the column bias, or the row's.
  __m512 bias(__m512 rowBias, int64_t j, __mmask16 lanes) const {
    return post_ && post_->columnBias ? _mm512_maskz_loadu_ps(lanes, post_->columnBias + j) : rowBias;
  }
  __m512 apply(__m512 v, __m512 bias) const { return activation(_mm512_add_ps(v, bias)); }
  /// The activation alone, for a value that has its bias (and any residual) added.
  __m512 activation(__m512 v) const {
    if (other)
      return activate(v, *post_);
    return _mm512_add_ps(_mm512_min_ps(hi, _mm512_max_ps(lo, v)), fix);
  }

  const TilePostOps *post_ = nullptr;
  bool other = false;
  __m512 lo = _mm512_set1_ps(-__builtin_inff()), hi = _mm512_set1_ps(__builtin_inff()), fix = _mm512_set1_ps(-0.0f);
};

/// The post ops a kernel's store loop can fix at compile time, so that no test or switch runs
/// per vector: none, a bias, a bias and relu or clip (BatchNorm folded into a convolution,
/// then ReLU or ReLU6: the common epilogues), and any other combination (withPostKind calls
/// activate()). Tested per vector, the post ops had cost a 3x3 depthwise row loop 55%. (The
/// GEMM micro-kernel takes ClampPost instead: a store loop per kind inlined into it slowed its
/// k-loop, 1x1 16->96 on 112x112 0.21 -> 0.31 ms.)
enum class PostKind { None, Bias, BiasRelu, BiasClip, Any };

inline PostKind postKind(const TilePostOps &post) {
  if (!post.rowBias && !post.columnBias)
    return post.activation == KILN_ACTIVATION_NONE ? PostKind::None : PostKind::Any;
  switch (post.activation) {
  case KILN_ACTIVATION_NONE: return PostKind::Bias;
  case KILN_ACTIVATION_RELU: return PostKind::BiasRelu;
  case KILN_ACTIVATION_CLIP: return PostKind::BiasClip;
  default: return PostKind::Any;
  }
}

/// v with post ops of kind Kind applied, `bias` the vector's bias (read only when `post` has
/// one): as withPostOps computes them, bit for bit.
template <PostKind Kind>
inline __m512 withPostKind(__m512 v, __m512 bias, const TilePostOps &post) {
  if constexpr (Kind == PostKind::None) {
    return v;
  } else if constexpr (Kind == PostKind::Any) {
    return activate(post.rowBias || post.columnBias ? _mm512_add_ps(v, bias) : v, post);
  } else {
    v = _mm512_add_ps(v, bias);
    if constexpr (Kind == PostKind::BiasRelu) // as activate(): NaN kept, -0 to +0
      return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(v, _mm512_setzero_ps(), _CMP_NLE_UQ), v);
    else if constexpr (Kind == PostKind::BiasClip) // as activate(): NaN kept
      return _mm512_min_ps(_mm512_set1_ps(post.hi), _mm512_max_ps(_mm512_set1_ps(post.lo), v));
    else
      return v;
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
