// The transforms of Winograd F(2x2, 3x3) and F(4x4, 3x3) (Conv2dWinograd.h): the weights'
// U = G g G^T, the input tiles' V = B^T d B and the output tiles' A^T M A, vectorised over 16
// tiles or 16 channels at a time, and the steps that run them over one block of tiles. The
// per-tile transforms and the block steps live in this one file so that the compiler inlines
// the former into the latter.
#include <algorithm>
#include <vector>

#include "runtime/kernels/Conv2dCommon.h"
#include "runtime/kernels/Conv2dWinograd.h"
#include "runtime/kernels/GemmBf16.h"
#include "runtime/kernels/Kernels.h"
#include "runtime/kernels/Simd.h"

namespace kiln::runtime::kernels::detail::winograd {

namespace {

// ---------------------------------------------------------------------------------------------
// The transforms of the two variants, F(2x2, 3x3) and F(4x4, 3x3), as 1-D rules applied along
// rows and then columns (each matrix is applied to vectors of 16 tiles or 16 channels, or to
// plain floats on the portable path). T is float or __m512, whose GCC vector arithmetic takes
// float operands.

/// The 1-D rules of F(M x M, 3x3), alpha = M + 2: g applies G (alpha x 3) to three weights,
/// bt B^T (alpha x alpha) to alpha input values, at A^T (M x alpha) to alpha values of M.
template <int M> struct Rules;

template <> struct Rules<2> {
  template <typename T> static void g(T v0, T v1, T v2, T out[4]) {
    const T sum = (v0 + v2) * 0.5f, odd = v1 * 0.5f;
    out[0] = v0;
    out[1] = sum + odd;
    out[2] = sum - odd;
    out[3] = v2;
  }
  template <typename T> static void bt(const T d[4], T out[4]) {
    out[0] = d[0] - d[2];
    out[1] = d[1] + d[2];
    out[2] = d[2] - d[1];
    out[3] = d[1] - d[3];
  }
  template <typename T> static void at(const T m[4], T out[2]) {
    const T mid = m[1] + m[2];
    out[0] = m[0] + mid;
    out[1] = m[1] - m[2] - m[3];
  }
};

// F(4x4, 3x3) at the points 0, 1, -1, 2, -2 and infinity (Lavin & Gray, section 4.2):
//   B^T = [4 0 -5 0 1 0; 0 -4 -4 1 1 0; 0 4 -4 -1 1 0; 0 -2 -1 2 1 0; 0 2 -1 -2 1 0; 0 4 0 -5 0 1]
//   G   = [1/4 0 0; -1/6 -1/6 -1/6; -1/6 1/6 -1/6; 1/24 1/12 1/6; 1/24 -1/12 1/6; 0 0 1]
//   A^T = [1 1 1 1 1 0; 0 1 -1 2 -2 0; 0 1 1 4 4 0; 0 1 -1 8 -8 1]
template <> struct Rules<4> {
  template <typename T> static void g(T v0, T v1, T v2, T out[6]) {
    const T outer = v0 + v2, far = v0 * (1.0f / 24) + v2 * (1.0f / 6), odd = v1 * (1.0f / 12);
    out[0] = v0 * 0.25f;
    out[1] = (outer + v1) * (-1.0f / 6);
    out[2] = (outer - v1) * (-1.0f / 6);
    out[3] = far + odd;
    out[4] = far - odd;
    out[5] = v2;
  }
  template <typename T> static void bt(const T d[6], T out[6]) {
    const T d34 = d[3] + d[4], d12 = d[1] + d[2], d4m3 = d[4] - d[3], d1m2 = d[1] - d[2];
    const T d4m2 = d[4] - d[2], d3m1 = (d[3] - d[1]) * 2.0f;
    out[0] = d[0] * 4.0f - d[2] * 5.0f + d[4];
    out[1] = d34 - d12 * 4.0f;
    out[2] = d4m3 + d1m2 * 4.0f;
    out[3] = d4m2 + d3m1;
    out[4] = d4m2 - d3m1;
    out[5] = d[1] * 4.0f - d[3] * 5.0f + d[5];
  }
  template <typename T> static void at(const T m[6], T out[4]) {
    const T sum12 = m[1] + m[2], diff12 = m[1] - m[2], sum34 = m[3] + m[4], diff34 = m[3] - m[4];
    out[0] = m[0] + sum12 + sum34;
    out[1] = diff12 + diff34 * 2.0f;
    out[2] = sum12 + sum34 * 4.0f;
    out[3] = diff12 + diff34 * 8.0f + m[5];
  }
};

// ---------------------------------------------------------------------------------------------
// Weight transform: U_xi[k][c] = (G g G^T)_xi for g = w[k][c] (3 x 3).

/// (G g G^T) of one 3 x 3 kernel g (taps g[3r + s]) into u[xi], xi = alpha*i + j.
template <int M, typename T> void transformKernel(const T g[9], T u[(M + 2) * (M + 2)]) {
  constexpr int alpha = M + 2;
  T rows[alpha][3]; // G g
  for (int s = 0; s < 3; ++s) {
    T col[alpha];
    Rules<M>::g(g[s], g[3 + s], g[6 + s], col);
    for (int i = 0; i < alpha; ++i)
      rows[i][s] = col[i];
  }
  for (int i = 0; i < alpha; ++i)
    Rules<M>::g(rows[i][0], rows[i][1], rows[i][2], u + alpha * i);
}

/// Rows [k0, k1) of U from the plain weights w[K][C][3][3].
template <int M>
void transformWeights(const float *weights, int64_t channels, float *u, int64_t plane, int64_t k0, int64_t k1) {
  constexpr int points = (M + 2) * (M + 2);
  for (int64_t k = k0; k < k1; ++k) {
    const float *wk = weights + k * channels * 9;
    int64_t c = 0;
#ifdef __AVX512F__
    const __m512i lanes9 = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                              _mm512_set1_epi32(9));
    for (; c < channels; c += kGroup) {
      const __mmask16 mask = firstLanes(channels - c);
      // Gathers do not train the hardware prefetcher: fetch the weights 4 groups ahead.
      for (int line = 0; line < 9 && c + 5 * kGroup <= channels; ++line)
        _mm_prefetch(reinterpret_cast<const char *>(wk + (c + 4 * kGroup) * 9 + 16 * line), _MM_HINT_T0);
      __m512 g[9], out[points];
      for (int t = 0; t < 9; ++t)
        g[t] = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), mask, lanes9, wk + c * 9 + t, 4);
      transformKernel<M>(g, out);
      for (int xi = 0; xi < points; ++xi)
        _mm512_mask_storeu_ps(u + xi * plane + k * channels + c, mask, out[xi]);
    }
#endif
    for (; c < channels; ++c) {
      float out[points];
      transformKernel<M>(wk + c * 9, out);
      for (int xi = 0; xi < points; ++xi)
        u[xi * plane + k * channels + c] = out[xi];
    }
  }
}

} // namespace

void transformWeights(int tile, const float *weights, int64_t channels, float *u, int64_t plane, int64_t k0,
                      int64_t k1) {
  if (tile == 4)
    transformWeights<4>(weights, channels, u, plane, k0, k1);
  else
    transformWeights<2>(weights, channels, u, plane, k0, k1);
}

namespace {

// ---------------------------------------------------------------------------------------------
// Input transform: V_xi[c][t] = (B^T d B)_xi for the alpha x alpha input tile d of tile t.

/// Copies the input rows of tile rows [tr0, tr1) of channel `channel` into the strip,
/// zero outside the input: strip (i, j) = x[M*tr0 + i - pad_top][j - pad_left].
void fillStrip(const Plan &p, const float *channel, int64_t tr0, int64_t tr1, float *strip) {
  const kiln_conv2d_args &a = p.a;
  const int64_t rows = p.tile * (tr1 - tr0) + 2, width = p.stripWidth;
  const int64_t copyCols = std::clamp<int64_t>(std::min(a.w, width - a.pad_left), 0, a.w);
  const int64_t lead = std::min(a.pad_left, width);
  for (int64_t i = 0; i < rows; ++i) {
    float *out = strip + i * width;
    const int64_t row = p.tile * tr0 + i - a.pad_top;
    if (row < 0 || row >= a.h || copyCols == 0) {
      std::fill(out, out + width, 0.0f);
      continue;
    }
    std::fill(out, out + lead, 0.0f);
    std::copy(channel + row * a.w, channel + row * a.w + copyCols, out + lead);
    std::fill(out + lead + copyCols, out + width, 0.0f);
  }
}

#ifdef __AVX512F__
/// Input rows of 16 tiles from a strip row: d[j] holds element j of each tile's row, lane t
/// for tile t, the tiles starting at row[0] and M floats apart (row[16*M + 1] is the last read).
template <int M> void tileRowElements(const float *row, __m512 d[M + 2]);

template <> void tileRowElements<2>(const float *row, __m512 d[4]) {
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
  const __m512 lo = _mm512_loadu_ps(row), hi = _mm512_loadu_ps(row + 16);
  const __m512 lo2 = _mm512_loadu_ps(row + 2), hi2 = _mm512_loadu_ps(row + 18);
  d[0] = _mm512_permutex2var_ps(lo, even, hi);
  d[1] = _mm512_permutex2var_ps(lo, odd, hi);
  d[2] = _mm512_permutex2var_ps(lo2, even, hi2);
  d[3] = _mm512_permutex2var_ps(lo2, odd, hi2);
}

template <> void tileRowElements<4>(const float *row, __m512 d[6]) {
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
  // The next tile's first two elements: lanes 1..15 of d[0] (d[1]), then the 17th tile's.
  const __m512i next0 = _mm512_setr_epi32(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16);
  const __m512i next1 = _mm512_setr_epi32(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 17);
  const __m512 q0 = _mm512_loadu_ps(row), q1 = _mm512_loadu_ps(row + 16);
  const __m512 q2 = _mm512_loadu_ps(row + 32), q3 = _mm512_loadu_ps(row + 48);
  const __m512 after = _mm512_loadu_ps(row + 64);
  // Elements 0 and 2, and 1 and 3, of tiles 0-7 and of tiles 8-15, then each one apart.
  const __m512 even0 = _mm512_permutex2var_ps(q0, even, q1), odd0 = _mm512_permutex2var_ps(q0, odd, q1);
  const __m512 even1 = _mm512_permutex2var_ps(q2, even, q3), odd1 = _mm512_permutex2var_ps(q2, odd, q3);
  d[0] = _mm512_permutex2var_ps(even0, even, even1);
  d[2] = _mm512_permutex2var_ps(even0, odd, even1);
  d[1] = _mm512_permutex2var_ps(odd0, even, odd1);
  d[3] = _mm512_permutex2var_ps(odd0, odd, odd1);
  d[4] = _mm512_permutex2var_ps(d[0], next0, after);
  d[5] = _mm512_permutex2var_ps(d[1], next1, after);
}
#endif

/// Transforms the tiles of tile rows [tr0, tr1) of one channel from its strip into
/// v[xi*vPlane + t] (t = (tr - tr0)*TW + tc).
template <int M>
void transformInput(const Plan &p, const float *strip, int64_t tr0, int64_t tr1, float *v, int64_t vPlane) {
  constexpr int alpha = M + 2;
  const int64_t width = p.stripWidth, tw = p.tileCols;
  for (int64_t tr = tr0; tr < tr1; ++tr) {
    const float *top = strip + M * (tr - tr0) * width;
    float *out = v + (tr - tr0) * tw;
#ifdef __AVX512F__
    for (int64_t tc = 0; tc < tw; tc += kGroup) {
      const __mmask16 mask = firstLanes(tw - tc);
      __m512 t[alpha][alpha]; // B^T applied along each row: t[i][j]
      for (int i = 0; i < alpha; ++i) {
        __m512 d[alpha];
        tileRowElements<M>(top + i * width + M * tc, d);
        Rules<M>::bt(d, t[i]);
      }
      for (int j = 0; j < alpha; ++j) {
        __m512 col[alpha], res[alpha];
        for (int i = 0; i < alpha; ++i)
          col[i] = t[i][j];
        Rules<M>::bt(col, res);
        for (int i = 0; i < alpha; ++i)
          _mm512_mask_storeu_ps(out + (alpha * i + j) * vPlane + tc, mask, res[i]);
      }
    }
#else
    for (int64_t tc = 0; tc < tw; ++tc) {
      float t[alpha][alpha];
      for (int i = 0; i < alpha; ++i)
        Rules<M>::bt(top + i * width + M * tc, t[i]);
      for (int j = 0; j < alpha; ++j) {
        float col[alpha], res[alpha];
        for (int i = 0; i < alpha; ++i)
          col[i] = t[i][j];
        Rules<M>::bt(col, res);
        for (int i = 0; i < alpha; ++i)
          out[(alpha * i + j) * vPlane + tc] = res[i];
      }
    }
#endif
  }
}

// ---------------------------------------------------------------------------------------------
// Output transform: the M x M tile A^T M A, written only where the output exists.

#ifdef __AVX512F__
/// Stores one output row of 16 tiles, y[b] holding column b of each tile (lane t for tile t),
/// as the 16*M consecutive floats from out on, the first `valid` of them only.
template <int M> void storeTileRow(float *out, const __m512 y[M], int64_t valid);

template <> void storeTileRow<2>(float *out, const __m512 y[2], int64_t valid) {
  const __m512i lowHalf = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
  const __m512i highHalf = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
  _mm512_mask_storeu_ps(out, firstLanes(valid), _mm512_permutex2var_ps(y[0], lowHalf, y[1]));
  _mm512_mask_storeu_ps(out + 16, firstLanes(valid - 16), _mm512_permutex2var_ps(y[0], highHalf, y[1]));
}

template <> void storeTileRow<4>(float *out, const __m512 y[4], int64_t valid) {
  const __m512i lowHalf = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
  const __m512i highHalf = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
  // Pairs (y0, y1) and (y2, y3) of tiles 0-7 and 8-15, then pairs of pairs: tiles 4q..4q+3.
  const __m512i lowPairs = _mm512_setr_epi32(0, 1, 16, 17, 2, 3, 18, 19, 4, 5, 20, 21, 6, 7, 22, 23);
  const __m512i highPairs = _mm512_setr_epi32(8, 9, 24, 25, 10, 11, 26, 27, 12, 13, 28, 29, 14, 15, 30, 31);
  const __m512 first0 = _mm512_permutex2var_ps(y[0], lowHalf, y[1]), first1 = _mm512_permutex2var_ps(y[0], highHalf, y[1]);
  const __m512 second0 = _mm512_permutex2var_ps(y[2], lowHalf, y[3]), second1 = _mm512_permutex2var_ps(y[2], highHalf, y[3]);
  _mm512_mask_storeu_ps(out, firstLanes(valid), _mm512_permutex2var_ps(first0, lowPairs, second0));
  _mm512_mask_storeu_ps(out + 16, firstLanes(valid - 16), _mm512_permutex2var_ps(first0, highPairs, second0));
  _mm512_mask_storeu_ps(out + 32, firstLanes(valid - 32), _mm512_permutex2var_ps(first1, lowPairs, second1));
  _mm512_mask_storeu_ps(out + 48, firstLanes(valid - 48), _mm512_permutex2var_ps(first1, highPairs, second1));
}
#endif

/// Output channel k of tile rows [tr0, tr1) from m[xi*mPlane + t] into its output plane.
template <int M>
void transformOutput(const Plan &p, const float *m, int64_t mPlane, int64_t tr0, int64_t tr1, float *plane) {
  constexpr int alpha = M + 2;
  const kiln_conv2d_args &a = p.a;
  const int64_t tw = p.tileCols;
  for (int64_t tr = tr0; tr < tr1; ++tr) {
    const float *in = m + (tr - tr0) * tw;
    const int64_t oh = M * tr, rows = std::min<int64_t>(M, a.oh - oh);
#ifdef __AVX512F__
    for (int64_t tc = 0; tc < tw; tc += kGroup) {
      const __mmask16 mask = firstLanes(tw - tc);
      __m512 s[alpha][M]; // A^T applied along each row of M: s[i][b]
      for (int i = 0; i < alpha; ++i) {
        __m512 row[alpha];
        for (int j = 0; j < alpha; ++j)
          row[j] = _mm512_maskz_loadu_ps(mask, in + (alpha * i + j) * mPlane + tc);
        Rules<M>::at(row, s[i]);
      }
      __m512 y[M][M]; // y[r][b]: output row oh + r, column M*(tc + lane) + b
      for (int b = 0; b < M; ++b) {
        __m512 col[alpha], res[M];
        for (int i = 0; i < alpha; ++i)
          col[i] = s[i][b];
        Rules<M>::at(col, res);
        for (int r = 0; r < M; ++r)
          y[r][b] = res[r];
      }
      for (int64_t r = 0; r < rows; ++r)
        storeTileRow<M>(plane + (oh + r) * a.ow + M * tc, y[r], a.ow - M * tc);
    }
#else
    for (int64_t tc = 0; tc < tw; ++tc) {
      float s[alpha][M];
      for (int i = 0; i < alpha; ++i) {
        float row[alpha];
        for (int j = 0; j < alpha; ++j)
          row[j] = in[(alpha * i + j) * mPlane + tc];
        Rules<M>::at(row, s[i]);
      }
      for (int b = 0; b < M && M * tc + b < a.ow; ++b) {
        float col[alpha], res[M];
        for (int i = 0; i < alpha; ++i)
          col[i] = s[i][b];
        Rules<M>::at(col, res);
        for (int64_t r = 0; r < rows; ++r)
          plane[(oh + r) * a.ow + M * tc + b] = res[r];
      }
    }
#endif
  }
}

} // namespace

// ---------------------------------------------------------------------------------------------
// The transforms of one block.

void transformBlockInput(const Plan &p, const Block &b, int64_t c0, int64_t c1, float *v, float *strip) {
  const kiln_conv2d_args &a = p.a;
  const int64_t vPlane = a.c * b.tiles;
  for (int64_t c = c0; c < c1; ++c)
    for (int64_t i = 0; i < b.images; ++i) {
      fillStrip(p, a.x + ((b.image0 + i) * a.c + c) * a.h * a.w, b.tr0, b.tr1, strip);
      float *out = v + c * b.tiles + i * b.imageTiles;
      if (p.tile == 4)
        transformInput<4>(p, strip, b.tr0, b.tr1, out, vPlane);
      else
        transformInput<2>(p, strip, b.tr0, b.tr1, out, vPlane);
    }
}

void transformBlockOutput(const Plan &p, const Block &b, int64_t k0, int64_t k1, const float *m) {
  const kiln_conv2d_args &a = p.a;
  const int64_t mPlane = a.k * b.tiles, pixels = a.oh * a.ow;
  const int64_t col0 = p.tile * b.tr0 * a.ow, col1 = std::min(p.tile * b.tr1, a.oh) * a.ow;
  for (int64_t i = 0; i < b.images; ++i) {
    const int64_t image = b.image0 + i;
    float *imageY = a.y + image * a.k * pixels;
    for (int64_t chunk = k0; chunk < k1; chunk += kEpilogueRows) {
      const int64_t rows = std::min(kEpilogueRows, k1 - chunk);
      for (int64_t k = chunk; k < chunk + rows; ++k) {
        const float *in = m + k * b.tiles + i * b.imageTiles;
        if (p.tile == 4)
          transformOutput<4>(p, in, mPlane, b.tr0, b.tr1, imageY + k * pixels);
        else
          transformOutput<2>(p, in, mPlane, b.tr0, b.tr1, imageY + k * pixels);
      }
      if (a.epilogue)
        a.epilogue(a.epilogue_ctx, imageY + chunk * pixels + col0, pixels, image, chunk, col0, rows, col1 - col0);
    }
  }
}

} // namespace kiln::runtime::kernels::detail::winograd

namespace kiln::runtime::kernels {

int64_t winogradWeightFloats(int64_t k, int64_t c, int tile) {
  return detail::winograd::pointsOf(tile) * detail::winograd::uPlaneOf(k, c);
}

int64_t winogradWeightsBf16Elements(int64_t k, int64_t c, int tile) {
  return detail::winograd::pointsOf(tile) * detail::winograd::uPlaneBf16Of(k, c);
}

void packWinogradWeightsBf16(const float *weights, int64_t k, int64_t c, int tile, uint16_t *dst) {
  using namespace detail::winograd;
  std::vector<float> transformed(static_cast<size_t>(winogradWeightFloats(k, c, tile)));
  packWinogradWeights(weights, k, c, tile, transformed.data());
  const int64_t plane = uPlaneOf(k, c), plane16 = uPlaneBf16Of(k, c);
  std::fill(dst, dst + pointsOf(tile) * plane16, uint16_t{0});
  for (int64_t xi = 0; xi < pointsOf(tile); ++xi)
    detail::packBf16Panels(transformed.data() + xi * plane, c, k, c, dst + xi * plane16);
}

void packWinogradWeights(const float *weights, int64_t k, int64_t c, int tile, float *dst) {
  const int64_t plane = detail::winograd::uPlaneOf(k, c);
  // The padding between planes is never read; zero it so that the packed weight is all defined.
  std::fill(dst, dst + detail::winograd::pointsOf(tile) * plane, 0.0f);
  detail::winograd::transformWeights(tile, weights, c, dst, plane, 0, k);
}

} // namespace kiln::runtime::kernels
