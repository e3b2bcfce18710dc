// Plain depthwise convolution on large planes at stride 1 or 2, straight from NCHW
// (Conv2dCommon.h).
//
// 16 outputs along an output row are one vector. The flat path (Conv2dDepthwise.cpp) loads
// every tap's 16 inputs with its own unaligned load, masked by a table entry: 9 loads a
// vector for 3x3, two thirds of them across a cache line. Here each input row is read once
// per output vector, as the 16-column chunks around it (masked only past the row's ends),
// and tap column s, offset d = s - (S - 1) / 2, is those chunks shifted by d lanes, one
// valignd each. Eight output rows run together, so each input row's shifted vectors feed
// every output row whose window covers it: a 3x3 layer costs per output vector 3.75 loads,
// 2.5 shifts and 9 FMAs, against 9 masked unaligned loads. At stride 2 an output vector's 32
// input columns split into their even and odd phases (two permutes of two chunks), and each
// tap is a phase, or a phase shifted by a lane or two with the lanes shifted in from the
// chunk before or after (one permute).
//
// The loops are shaped by what slowed them (one Zen 5 core, 3x3 32 channels 112x112):
//  - the interior vectors (plain loads) and the edge ones (masked) are separate out-of-line
//    loops, everything inside them inlined: the edge rows out of line kept the accumulators
//    in memory, and edge tests inside one loop cost it a third of its speed;
//  - the bias and the common activations are template parameters (PostKind, PostOps.h)
//    applied in registers before the store: tested per vector, or applied in a pass over the
//    finished rows while in L1, they cost 30-55%.
// Flat -> these, kiln-gemm-bench --conv: 3x3 0.145 -> 0.072 ms, 5x5 0.327 -> 0.256, 7x7
// 0.655 -> 0.470, 5x5 64x64 0.107 -> 0.075. Channel blocks -> these at stride 2: 3x3 96
// 112x112 0.235-0.249 -> 0.153 ms (MobileNetV2's layer at two threads 0.341 -> 0.237); from
// 56x56 inputs the blocks stay faster.
#include <algorithm>
#include <array>
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

#define KILN_INLINE inline __attribute__((always_inline))

/// What a row loop needs of its plane's post ops (PostKind, PostOps.h): the plane's bias as a
/// vector, and the rest.
struct PlanePost {
  __m512 bias;
  TilePostOps any;
};

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

/// The 16-column chunks of an input row an output vector j reads, numbered from 0:
///  - stride 1: columns 16(j - 1) .. 16(j + 2) - 1, every tap of a kernel up to 7 wide
///    padded by (S - 1) / 2 <= 3 (its outputs' columns 16j .. 16j + 15, +-3);
///  - stride 2: columns 32j - 16 .. 32j + 47 (its outputs read columns 32j .. 32j + 30,
///    +-3). Chunks 1 and 2 hold the vector's own columns; chunk 0 is read for taps left of
///    the centre, chunk 3 for those two or more right of it.
constexpr int kMaxChunks = 4;
template <int Stride> constexpr int chunkCount() { return Stride == 1 ? 3 : 4; }
template <int Stride> constexpr int64_t chunkColumn(int64_t j, int k) {
  return Stride == 1 ? kLanes * (j + k - 1) : 2 * kLanes * j + kLanes * (k - 1);
}
/// Whether some tap of an S-wide kernel reads chunk k.
template <int S, int Stride> constexpr bool readsChunk(int k) {
  return Stride == 1 ? k < chunkCount<1>() : k == 1 || k == 2 || (k == 0 && S > 1) || (k == 3 && S >= 5);
}

/// Which lanes of output vector j's chunks lie inside the row: the same for every row.
struct ChunkLanes {
  __mmask16 lanes[kMaxChunks];
};

/// Chunk K of one input row. Edge: it may lie partly or wholly outside the row (masked load,
/// zeros outside); else a plain load.
template <int S, int Stride, bool Edge, int K>
KILN_INLINE __m512 chunk(const float *row, int64_t j, const ChunkLanes &inside) {
  if constexpr (!readsChunk<S, Stride>(K))
    return _mm512_setzero_ps();
  const float *from = row + chunkColumn<Stride>(j, K);
  return Edge ? _mm512_maskz_loadu_ps(inside.lanes[K], from) : _mm512_loadu_ps(from);
}

using Lanes = std::array<int, kLanes>;

/// The permute that takes lanes `first`, `first` + 2, ... out of the 32 lanes of two vectors
/// (a stride-2 phase of 32 consecutive columns).
constexpr Lanes everyOther(int first) {
  Lanes index{};
  for (int l = 0; l < kLanes; ++l)
    index[static_cast<size_t>(l)] = first + 2 * l;
  return index;
}

/// Stride 2, tap offset d != 0, 1: the phase p = d mod 2 shifted by e = floor(d / 2) lanes,
/// the lanes shifted in from chunk 0 (e < 0, as permutex2var's first operand, the phase its
/// second) or chunk 3 (e > 0, the phase first).
constexpr Lanes shiftedPhase(int d) {
  const int p = d & 1, e = (d - p) / 2;
  Lanes index{};
  for (int l = 0; l < kLanes; ++l) {
    const int m = l + e; // lane of the phase sequence, outside 0..15 for the shifted-in ones
    index[static_cast<size_t>(l)] = e < 0 ? (m < 0 ? kLanes + 2 * m + p : kLanes + m)
                                          : (m < kLanes ? m : kLanes + 2 * (m - kLanes) + p);
  }
  return index;
}

template <const Lanes &Index>
KILN_INLINE __m512 permute(__m512 first, __m512 second) {
  const __m512i index = _mm512_set_epi32(Index[15], Index[14], Index[13], Index[12], Index[11], Index[10], Index[9],
                                         Index[8], Index[7], Index[6], Index[5], Index[4], Index[3], Index[2],
                                         Index[1], Index[0]);
  return _mm512_permutex2var_ps(first, index, second);
}

template <int D> struct ShiftedPhase {
  static constexpr Lanes index = shiftedPhase(D);
};
constexpr Lanes kEven = everyOther(0), kOdd = everyOther(1);

/// Tap column Tap of an S-wide kernel: the 16 inputs of the output vector's lanes, d = Tap -
/// (S - 1) / 2 columns (at stride 1) or phase positions (at stride 2) off, out of the
/// chunks. At stride 2 even and odd are the row's two phases over the vector's own columns.
template <int S, int Stride, int Tap>
KILN_INLINE __m512 tapInputs(const __m512 (&chunks)[kMaxChunks], __m512 even, __m512 odd) {
  constexpr int d = Tap - (S - 1) / 2;
  auto bits = [](__m512 v) { return _mm512_castps_si512(v); };
  if constexpr (Stride == 2) {
    if constexpr (d == 0)
      return even;
    else if constexpr (d == 1)
      return odd;
    else if constexpr (d == -1) // column 32j - 1, the last of chunk 0, then the odd ones
      return _mm512_castsi512_ps(_mm512_alignr_epi32(bits(odd), bits(chunks[0]), kLanes - 1));
    else if constexpr (d < 0)
      return permute<ShiftedPhase<d>::index>(chunks[0], (d & 1) ? odd : even);
    else
      return permute<ShiftedPhase<d>::index>((d & 1) ? odd : even, chunks[3]);
  } else if constexpr (d == 0) {
    return chunks[1];
  } else if constexpr (d < 0) { // the last -d lanes of the chunk before, then the first of j's own
    return _mm512_castsi512_ps(_mm512_alignr_epi32(bits(chunks[1]), bits(chunks[0]), kLanes + d));
  } else {
    return _mm512_castsi512_ps(_mm512_alignr_epi32(bits(chunks[2]), bits(chunks[1]), d));
  }
}

template <int S, int Stride, int... Taps>
KILN_INLINE void allTapInputs(const __m512 (&chunks)[kMaxChunks], __m512 (&taps)[S],
                              std::integer_sequence<int, Taps...>) {
  __m512 even = _mm512_setzero_ps(), odd = _mm512_setzero_ps();
  if constexpr (Stride == 2) {
    even = permute<kEven>(chunks[1], chunks[2]);
    odd = permute<kOdd>(chunks[1], chunks[2]);
  }
  ((taps[Taps] = tapInputs<S, Stride, Taps>(chunks, even, odd)), ...);
}

/// Input row I of a group's window (row firstInput + I) into the accumulators of the output
/// rows whose windows hold it: output row g takes it as kernel row I - g * Stride.
template <int S, int Stride, bool Edge, int I>
KILN_INLINE void inputRow(const float *x, int64_t h, int64_t width, int64_t firstInput, int64_t j,
                          const ChunkLanes &inside, const __m512 (&weights)[S * S], __m512 (&acc)[kRows]) {
  const int64_t ih = firstInput + I;
  if (ih < 0 || ih >= h) // padding rows add nothing
    return;
  const float *row = x + ih * width;
  const __m512 chunks[kMaxChunks] = {chunk<S, Stride, Edge, 0>(row, j, inside), chunk<S, Stride, Edge, 1>(row, j, inside),
                                     chunk<S, Stride, Edge, 2>(row, j, inside), chunk<S, Stride, Edge, 3>(row, j, inside)};
  __m512 taps[S];
  allTapInputs<S, Stride>(chunks, taps, std::make_integer_sequence<int, S>{});
#pragma GCC unroll 8
  for (int g = 0; g < kRows; ++g) {
    const int r = I - g * Stride;
    if (r < 0 || r >= S)
      continue;
#pragma GCC unroll 7
    for (int s = 0; s < S; ++s)
      acc[g] = _mm512_fmadd_ps(weights[r * S + s], taps[s], acc[g]);
  }
}

template <int S, int Stride, bool Edge, int... I>
KILN_INLINE void allInputRows(const float *x, int64_t h, int64_t width, int64_t firstInput, int64_t j,
                              const ChunkLanes &inside, const __m512 (&weights)[S * S], __m512 (&acc)[kRows],
                              std::integer_sequence<int, I...>) {
  (inputRow<S, Stride, Edge, I>(x, h, width, firstInput, j, inside, weights, acc), ...);
}

/// Output rows [oh0, oh0 + rows) of one plane, vectors [j0, j1) of each, with the plane's
/// post ops. Rows past `rows` are computed and dropped (their input rows are read only where
/// inside the plane).
template <int S, int Stride, bool Edge, PostKind Post>
__attribute__((noinline)) void rowVectors(const kiln_conv2d_args &a, const float *x, const float *kernel,
                                          const PlanePost &planePost, float *y, int64_t oh0, int rows,
                                          int64_t j0, int64_t j1) {
  // A copy the stores to y cannot alias, so that it stays in registers.
  const PlanePost post = planePost;
  // The plane's weights, broadcast once a call: as FMA memory operands they doubled the loads.
  __m512 weights[S * S];
  for (int t = 0; t < S * S; ++t)
    weights[t] = _mm512_set1_ps(kernel[t]);
  for (int64_t j = j0; j < j1; ++j) {
    __m512 acc[kRows];
#pragma GCC unroll 8
    for (int g = 0; g < kRows; ++g)
      acc[g] = _mm512_setzero_ps();
    ChunkLanes inside{};
    if (Edge)
      for (int k = 0; k < chunkCount<Stride>(); ++k)
        inside.lanes[k] = insideLanes(chunkColumn<Stride>(j, k), a.w);
    allInputRows<S, Stride, Edge>(x, a.h, a.w, oh0 * Stride - a.pad_top, j, inside, weights, acc,
                                  std::make_integer_sequence<int, (kRows - 1) * Stride + S>{});
    const __mmask16 lanes = firstLanes(a.ow - kLanes * j);
#pragma GCC unroll 8
    for (int g = 0; g < kRows; ++g) {
      if (g >= rows)
        break;
      _mm512_mask_storeu_ps(y + (oh0 + g) * a.ow + kLanes * j, lanes,
                            withPostKind<Post>(acc[g], post.bias, post.any));
    }
  }
}

/// The output vectors [1, end) whose chunks all lie inside a row of `width`: plain loads.
template <int S, int Stride>
int64_t interiorEnd(int64_t vectors, int64_t width) {
  int64_t end = 1;
  const int last = readsChunk<S, Stride>(3) ? 3 : 2;
  while (end < vectors && chunkColumn<Stride>(end, last) + kLanes <= width)
    ++end;
  return end;
}

/// Work items [begin, end) of (band of output rows, (image, channel) plane), bands outermost.
template <int S, int Stride, PostKind Post>
void rowPlanes(void *ctx, int64_t begin, int64_t end) {
  const RowsJob &job = *static_cast<const RowsJob *>(ctx);
  const kiln_conv2d_args &a = job.a;
  const int64_t planes = a.n * a.k, outPlane = a.oh * a.ow;
  const int64_t interior = interiorEnd<S, Stride>(job.vectors, a.w);
  for (int64_t item = begin; item < end; ++item) {
    const int64_t band = item / planes, plane = item % planes, image = plane / a.k, channel = plane % a.k;
    const int64_t oh0 = band * a.oh / job.bands, oh1 = (band + 1) * a.oh / job.bands;
    const float *x = a.x + plane * a.h * a.w, *weights = a.weights + channel * S * S;
    float *y = a.y + plane * outPlane;
    PlanePost post;
    post.bias = _mm512_set1_ps(a.post.bias ? a.post.bias[channel] : 0.0f);
    post.any = tilePostOps(a.post, true, channel, 0);
    for (int64_t oh = oh0; oh < oh1; oh += kRows) {
      const int rows = static_cast<int>(std::min<int64_t>(kRows, oh1 - oh));
      rowVectors<S, Stride, true, Post>(a, x, weights, post, y, oh, rows, 0, std::min<int64_t>(1, job.vectors));
      rowVectors<S, Stride, false, Post>(a, x, weights, post, y, oh, rows, 1, interior);
      rowVectors<S, Stride, true, Post>(a, x, weights, post, y, oh, rows, interior, job.vectors);
    }
    if (a.epilogue && oh1 > oh0)
      a.epilogue(a.epilogue_ctx, y + oh0 * a.ow, outPlane, image, channel, oh0 * a.ow, 1, (oh1 - oh0) * a.ow);
  }
}

template <int S, int Stride>
kiln_range_fn rowPlanesFn(PostKind post) {
  switch (post) {
  case PostKind::None: return rowPlanes<S, Stride, PostKind::None>;
  case PostKind::Bias: return rowPlanes<S, Stride, PostKind::Bias>;
  case PostKind::BiasRelu: return rowPlanes<S, Stride, PostKind::BiasRelu>;
  case PostKind::BiasClip: return rowPlanes<S, Stride, PostKind::BiasClip>;
  default: return rowPlanes<S, Stride, PostKind::Any>;
  }
}

template <int Stride>
kiln_range_fn rowPlanesFn(int64_t width, PostKind post) {
  return width == 3 ? rowPlanesFn<3, Stride>(post) : width == 5 ? rowPlanesFn<5, Stride>(post) : rowPlanesFn<7, Stride>(post);
}

#undef KILN_INLINE

#endif

} // namespace

bool shiftedRowDepthwise(const kiln_conv2d_args &a) {
#ifdef __AVX512F__
  // Square kernels 3, 5 and 7 wide, padded by half the kernel on the left ("same"),
  // undilated: every tap's shift is then a compile-time constant (tapInputs). Stride 1 on
  // planes with more outputs than kLargeDepthwisePlane (rows as wide as the input's), stride
  // 2 on inputs that large.
  if (a.groups != a.c || a.k != a.c || a.r != a.s || (a.s != 3 && a.s != 5 && a.s != 7) ||
      a.pad_left != (a.s - 1) / 2 || a.dilation_w != 1 || a.dilation_h != 1)
    return false;
  if (a.stride_h == 1 && a.stride_w == 1)
    return flatPlaneDepthwise(a) && a.oh * a.ow > kLargeDepthwisePlane;
  return a.stride_h == 2 && a.stride_w == 2 && a.h * a.w > kLargeDepthwisePlane;
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
  const PostKind post = postKind(tilePostOps(a.post, true, 0, 0));
  const kiln_range_fn fn = a.stride_w == 1 ? rowPlanesFn<1>(a.s, post) : rowPlanesFn<2>(a.s, post);
  parallelForIfWorth(rt, planes * bands, planes * a.oh * a.ow * a.r * a.s, int64_t{1} << 16, fn, &job);
#else
  (void)rt, (void)a;
#endif
}

} // namespace kiln::runtime::kernels::detail
