// Plain depthwise convolution on large stride-1 planes, straight from NCHW (Conv2dCommon.h).
//
// 16 outputs along an output row are one vector. The flat path (Conv2dDepthwise.cpp) loads
// every tap's 16 inputs with its own unaligned load, masked by a table entry: 9 loads a
// vector for 3x3, two thirds of them across a cache line. Here each input row is read once
// per output vector, as the 16-column chunks around it (masked only past the row's ends),
// and tap column s, offset d = s - (S - 1) / 2, is those chunks shifted by d lanes, one
// valignd each. Eight output rows run together, so each input row's shifted vectors feed
// every output row whose window covers it: a 3x3 layer costs per output vector 3.75 loads,
// 2.5 shifts and 9 FMAs, against 9 masked unaligned loads. The bias and activation are
// applied in registers before the store (post ops); the epilogue then sees each band of
// finished rows.
//
// One Zen 5 core, kiln-gemm-bench --conv (flat -> these): 3x3 32-channel 112x112 0.145 ->
// 0.101 ms, 5x5 0.327 -> 0.256, 7x7 0.655 -> 0.470, 5x5 64x64 0.107 -> 0.075. On 56x56 and
// smaller planes the channel-block path (Conv2dDepthwiseBlocks.cpp) is as fast or faster
// (3x3 144 56x56 0.154 against 0.151, 256 28x28 0.064 against 0.069), and stride 2 by
// even/odd permutes was slower than it (3x3/2 96 112x112 0.23-0.33 against 0.235), so both
// stay there.
#include <algorithm>
#include <utility>

#include "runtime/kernels/Conv2dCommon.h"
#include "runtime/kernels/GemmDriver.h"
#include "runtime/kernels/PostOps.h"
#include "runtime/kernels/Simd.h"

namespace kiln::runtime::kernels::detail {

namespace {

constexpr int kLanes = 16;
constexpr int kRows = 8; // output rows computed together: 8 FMA chains, input rows reused

#ifdef __AVX512F__

struct RowsJob {
  const kiln_conv2d_args &a;
  int64_t bands;
  int64_t vectors; // ceil(OW / 16)
};

/// Lanes of the 16 columns from `column` on that lie inside a row of `width`.
inline __mmask16 insideLanes(int64_t column, int64_t width) {
  if (column >= width || column + kLanes <= 0)
    return 0;
  const __mmask16 upTo = firstLanes(width - column);
  return column >= 0 ? upTo : static_cast<__mmask16>(upTo & ~firstLanes(-column));
}

/// The chunks an output vector reads: columns 16(j - 1) .. 16(j + 2) - 1 hold every tap of
/// a kernel up to 7 wide padded by (S - 1) / 2 <= 3.
constexpr int kChunks = 3;

/// Chunk K (0: the one before j, 1: j's own, 2: the next) of one input row. Edge: it may
/// lie partly or wholly outside the row (masked load, zeros outside); else a plain load.
template <bool Edge, int K>
inline __m512 chunk(const float *row, int64_t width, int64_t j) {
  const int64_t column = kLanes * (j + K - 1);
  return Edge ? _mm512_maskz_loadu_ps(insideLanes(column, width), row + column) : _mm512_loadu_ps(row + column);
}

/// Tap column s of an S-wide kernel: the 16 inputs d = s - (S - 1) / 2 columns from the
/// output vector's, out of the chunks.
template <int S, int Tap>
inline __m512 tapInputs(const __m512 (&chunks)[kChunks]) {
  constexpr int d = Tap - (S - 1) / 2;
  auto bits = [](__m512 v) { return _mm512_castps_si512(v); };
  if constexpr (d == 0)
    return chunks[1];
  else if constexpr (d < 0) // the last -d lanes of the chunk before, then the first of j's own
    return _mm512_castsi512_ps(_mm512_alignr_epi32(bits(chunks[1]), bits(chunks[0]), kLanes + d));
  else
    return _mm512_castsi512_ps(_mm512_alignr_epi32(bits(chunks[2]), bits(chunks[1]), d));
}

template <int S, int... Taps>
inline void allTapInputs(const __m512 (&chunks)[kChunks], __m512 (&taps)[S], std::integer_sequence<int, Taps...>) {
  ((taps[Taps] = tapInputs<S, Taps>(chunks)), ...);
}

/// Input row I of a group's window (row firstInput + I) into the accumulators of the output
/// rows whose windows hold it: output row g takes it as kernel row I - g.
template <int S, bool Edge, int I>
inline void inputRow(const float *x, int64_t h, int64_t width, int64_t firstInput, int64_t j,
                     const __m512 (&weights)[S * S], __m512 (&acc)[kRows]) {
  const int64_t ih = firstInput + I;
  if (ih < 0 || ih >= h) // padding rows add nothing
    return;
  const float *row = x + ih * width;
  const __m512 chunks[kChunks] = {S > 1 ? chunk<Edge, 0>(row, width, j) : _mm512_setzero_ps(),
                                  chunk<Edge, 1>(row, width, j),
                                  S > 1 ? chunk<Edge, 2>(row, width, j) : _mm512_setzero_ps()};
  __m512 taps[S];
  allTapInputs<S>(chunks, taps, std::make_integer_sequence<int, S>{});
#pragma GCC unroll 8
  for (int g = 0; g < kRows; ++g) {
    const int r = I - g;
    if (r < 0 || r >= S)
      continue;
#pragma GCC unroll 7
    for (int s = 0; s < S; ++s)
      acc[g] = _mm512_fmadd_ps(weights[r * S + s], taps[s], acc[g]);
  }
}

template <int S, bool Edge, int... I>
inline void allInputRows(const float *x, int64_t h, int64_t width, int64_t firstInput, int64_t j,
                         const __m512 (&weights)[S * S], __m512 (&acc)[kRows], std::integer_sequence<int, I...>) {
  (inputRow<S, Edge, I>(x, h, width, firstInput, j, weights, acc), ...);
}

/// Output rows [oh0, oh0 + rows) of one plane, vector j of each. Rows past `rows` are
/// computed and dropped (their input rows are read only where inside the plane).
template <int S, bool Edge>
inline void rowVector(const kiln_conv2d_args &a, const float *x, const __m512 (&weights)[S * S], float *y,
                      int64_t oh0, int rows, int64_t j, const TilePostOps &post) {
  __m512 acc[kRows];
#pragma GCC unroll 8
  for (int g = 0; g < kRows; ++g)
    acc[g] = _mm512_setzero_ps();
  allInputRows<S, Edge>(x, a.h, a.w, oh0 - a.pad_top, j, weights, acc,
                        std::make_integer_sequence<int, kRows - 1 + S>{});
  const __mmask16 lanes = firstLanes(a.ow - kLanes * j);
#pragma GCC unroll 8
  for (int g = 0; g < kRows; ++g) {
    if (g >= rows)
      break;
    __m512 v = acc[g];
    if (post.rowBias)
      v = _mm512_add_ps(v, _mm512_set1_ps(*post.rowBias));
    _mm512_mask_storeu_ps(y + (oh0 + g) * a.ow + kLanes * j, lanes, activate(v, post));
  }
}

/// Work items [begin, end) of (band of output rows, (image, channel) plane), bands outermost.
template <int S>
void rowPlanes(void *ctx, int64_t begin, int64_t end) {
  const RowsJob &job = *static_cast<const RowsJob *>(ctx);
  const kiln_conv2d_args &a = job.a;
  const int64_t planes = a.n * a.k, outPlane = a.oh * a.ow;
  for (int64_t item = begin; item < end; ++item) {
    const int64_t band = item / planes, plane = item % planes, image = plane / a.k, channel = plane % a.k;
    const int64_t oh0 = band * a.oh / job.bands, oh1 = (band + 1) * a.oh / job.bands;
    const float *x = a.x + plane * a.h * a.w;
    float *y = a.y + plane * outPlane;
    // The plane's weights, broadcast once: as FMA memory operands they doubled the loads.
    __m512 weights[S * S];
    for (int t = 0; t < S * S; ++t)
      weights[t] = _mm512_set1_ps(a.weights[channel * S * S + t]);
    const TilePostOps post = tilePostOps(a.post, true, channel, 0);
    for (int64_t oh = oh0; oh < oh1; oh += kRows) {
      const int rows = static_cast<int>(std::min<int64_t>(kRows, oh1 - oh));
      for (int64_t j = 0; j < job.vectors; ++j) {
        // Plain loads where all three chunks lie inside the row.
        if (j >= 1 && kLanes * (j + 2) <= a.w)
          rowVector<S, false>(a, x, weights, y, oh, rows, j, post);
        else
          rowVector<S, true>(a, x, weights, y, oh, rows, j, post);
      }
    }
    if (a.epilogue && oh1 > oh0)
      a.epilogue(a.epilogue_ctx, y + oh0 * a.ow, outPlane, image, channel, oh0 * a.ow, 1, (oh1 - oh0) * a.ow);
  }
}

#endif

} // namespace

bool shiftedRowDepthwise(const kiln_conv2d_args &a) {
#ifdef __AVX512F__
  // Square kernels 3, 5 and 7 wide, padded to keep the size ("same"), undilated, on planes
  // with more outputs than kLargeDepthwisePlane: every tap's shift is then a compile-time
  // constant (tapInputs).
  return flatPlaneDepthwise(a) && a.oh * a.ow > kLargeDepthwisePlane && (a.s == 3 || a.s == 5 || a.s == 7) &&
         a.r == a.s && a.pad_left == (a.s - 1) / 2 && a.dilation_w == 1 && a.dilation_h == 1;
#else
  (void)a;
  return false;
#endif
}

void depthwiseShiftedRows(const kiln_rt *rt, const kiln_conv2d_args &a) {
#ifdef __AVX512F__
  // A band of each plane's rows per thread where the layer splits by rows
  // (depthwiseSplitsRows).
  const int64_t threads = threadsOf(rt);
  const int64_t bands = depthwiseSplitsRows(threads, a) ? std::min<int64_t>(threads, a.oh) : 1;
  RowsJob job{a, bands, (a.ow + kLanes - 1) / kLanes};
  const int64_t planes = a.n * a.k;
  static constexpr kiln_range_fn bySize[] = {rowPlanes<3>, rowPlanes<5>, rowPlanes<7>};
  parallelForIfWorth(rt, planes * bands, planes * a.oh * a.ow * a.r * a.s, int64_t{1} << 16, bySize[(a.s - 3) / 2],
                     &job);
#else
  (void)rt, (void)a;
#endif
}

} // namespace kiln::runtime::kernels::detail
