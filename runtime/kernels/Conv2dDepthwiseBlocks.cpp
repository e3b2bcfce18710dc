// Plain depthwise convolution with 16 channels in the lanes of a vector (Conv2dCommon.h).
//
// The plane-by-plane paths (Conv2dDepthwise.cpp) put 16 outputs of one plane in a vector, so
// a plane's edges cost masked or wasted lanes and every plane pays its own setup: on a 7x7
// output 49 of 64 lanes are used, and a 3x3/2 512-channel 14x14 layer ran at ~5 GFLOP/s
// (one Zen 5 core), overhead almost all of it. Here a work item is one image's block of 16
// channels:
//  1. its input planes are transposed, 16x16 at a time in registers, into one padded block
//     t[row][column][16] in the thread's scratch, zeros in the padding, so that every tap of
//     every output is one aligned vector load, whatever the stride, dilation or padding;
//  2. outputs are computed 8 along a row on 2 rows at a time (16 independent FMA chains),
//     each tap one broadcast-free FMA with the block's 16 weights of that tap, into a
//     pixel-major buffer;
//  3. that buffer is transposed back into the 16 NCHW output planes, 16 pixels at a time,
//     post ops applied in registers on the way (the bias is one vector: a lane per channel),
//     and the epilogue sees each finished plane.
// The transposes cost about as much as a 3x3 layer's products, so large stride-1 planes,
// where 16 outputs along a row waste nothing, run along their rows instead (the shifted-row
// and flat paths, kLargeDepthwisePlane).
#include <algorithm>
#include <array>
#include <utility>
#include <vector>

#include "runtime/kernels/ChannelBlocks.h"
#include "runtime/kernels/Conv2dCommon.h"
#include "runtime/kernels/GemmDriver.h"
#include "runtime/kernels/GemmPack.h" // scratch, transposeCopy
#include "runtime/kernels/PostOps.h"
#include "runtime/kernels/Simd.h"

namespace kiln::runtime::kernels::detail {

namespace {

constexpr int64_t kLanes = kBlockLanes; // channels per block, one per lane (ChannelBlocks.h)
constexpr int kRowPixels = 8;   // outputs along a row computed together,
constexpr int kRows = 2;        // on this many rows: 16 independent FMA chains
// A thread's scratch at most: the padded block and the computed outputs (8 MiB).
constexpr int64_t kMaxScratchFloats = int64_t{1} << 21;

#ifdef __AVX512F__
/// The padded input of one block: `rows` x `cols` positions of 16 floats, position (i, j)
/// holding input row i - pad_top, column j - pad_left of the block's channels.
struct BlockShape {
  int64_t rows = 0, cols = 0;
};

struct BlockJob {
  const kiln_conv2d_args &a;
  BlockShape shape;
  const int64_t *tapOffsets; // per tap (r, s): (r*dh*cols + s*dw)*16 floats into the block
  int64_t bands;             // of output rows per block: work items are (band, image, block)
};

/// P outputs along each of Rows rows (Rows * P independent FMA chains) from block position
/// `from` (the first output's window origin): outputs S positions apart along a row (Stride;
/// 0: `stride` at run time), rows `rowStep` floats apart in the block and `outRow` floats
/// apart in the pixel-major `out`.
template <int P, int Rows, int Stride>
inline void rowPixels(const float *from, int64_t stride, int64_t rowStep, const float *weights,
                      const int64_t *tapOffsets, int64_t taps, float *out, int64_t outRow) {
  const int64_t step = (Stride ? Stride : stride) * kLanes;
  __m512 acc[Rows][P];
#pragma GCC unroll 2
  for (int i = 0; i < Rows; ++i)
#pragma GCC unroll 8
    for (int u = 0; u < P; ++u)
      acc[i][u] = _mm512_setzero_ps();
  for (int64_t t = 0; t < taps; ++t) {
    const float *p = from + tapOffsets[t];
    const __m512 w = _mm512_loadu_ps(weights + t * kLanes);
#pragma GCC unroll 2
    for (int i = 0; i < Rows; ++i)
#pragma GCC unroll 8
      for (int u = 0; u < P; ++u)
        acc[i][u] = _mm512_fmadd_ps(w, _mm512_load_ps(p + i * rowStep + u * step), acc[i][u]);
  }
#pragma GCC unroll 2
  for (int i = 0; i < Rows; ++i)
#pragma GCC unroll 8
    for (int u = 0; u < P; ++u)
      _mm512_store_ps(out + i * outRow + u * kLanes, acc[i][u]);
}

using RowPixelsFn = void (*)(const float *, int64_t, int64_t, const float *, const int64_t *, int64_t, float *,
                             int64_t);

template <int Rows, int Stride, int... P>
constexpr std::array<RowPixelsFn, sizeof...(P)> rowPixelsTable(std::integer_sequence<int, P...>) {
  return {rowPixels<P + 1, Rows, Stride>...};
}

/// The kernel for `pixels` (1..kRowPixels) outputs along `rows` (1..kRows) rows at this
/// stride.
RowPixelsFn rowPixelsFn(int64_t pixels, int64_t rows, int64_t stride) {
  using Counts = std::make_integer_sequence<int, kRowPixels>;
  static constexpr std::array<RowPixelsFn, kRowPixels> tables[kRows][3] = {
      {rowPixelsTable<1, 1>(Counts{}), rowPixelsTable<1, 2>(Counts{}), rowPixelsTable<1, 0>(Counts{})},
      {rowPixelsTable<2, 1>(Counts{}), rowPixelsTable<2, 2>(Counts{}), rowPixelsTable<2, 0>(Counts{})}};
  static_assert(kRows == 2, "update the tables");
  return tables[rows - 1][stride == 1 ? 0 : stride == 2 ? 1 : 2][static_cast<size_t>(pixels - 1)];
}

using StorePlanesFn = void (*)(const float *, int64_t, int64_t, int64_t, int64_t, __m512, const TilePostOps &,
                               float *);

StorePlanesFn storePlanesFn(PostKind kind) {
  switch (kind) {
  case PostKind::None: return storeChannelBlock<PostKind::None>;
  case PostKind::Bias: return storeChannelBlock<PostKind::Bias>;
  case PostKind::BiasRelu: return storeChannelBlock<PostKind::BiasRelu>;
  case PostKind::BiasClip: return storeChannelBlock<PostKind::BiasClip>;
  default: return storeChannelBlock<PostKind::Any>;
  }
}

/// Work items [begin, end) of (band of output rows, image, block of 16 channels).
void channelBlocks(void *ctx, int64_t begin, int64_t end) {
  const BlockJob &job = *static_cast<const BlockJob *>(ctx);
  const kiln_conv2d_args &a = job.a;
  const BlockShape &b = job.shape;
  const int64_t taps = a.r * a.s, blocks = (a.c + kLanes - 1) / kLanes, outputs = a.oh * a.ow;
  const int64_t blockFloats = b.rows * b.cols * kLanes;
  // The padded block, the computed outputs, then the block's weights by tap. Blocks rewrite
  // only the block's interior: its padding is zeroed once.
  float *t = scratch(Scratch::Depthwise, static_cast<size_t>(blockFloats + (outputs + taps) * kLanes));
  float *computed = t + blockFloats, *weights = computed + outputs * kLanes;
  std::fill_n(t, blockFloats, 0.0f);
  const int64_t rowStep = a.stride_h * b.cols * kLanes, pixelStep = a.stride_w * kLanes;
  struct Item {
    int64_t image, c0, count, oh0, oh1, row0, row1;
    const float *x;
  };
  auto itemAt = [&](int64_t item) {
    // Bands outermost: with bands for the threads, each thread's share is whole bands.
    const int64_t perBand = a.n * blocks;
    const int64_t band = item / perBand, image = item % perBand / blocks, block = item % blocks;
    Item it{image, block * kLanes, 0, band * a.oh / job.bands, (band + 1) * a.oh / job.bands, 0, 0, nullptr};
    it.count = std::min(kLanes, a.c - it.c0);
    // The input rows the band's windows reach (padded rows oh0*S .. (oh1 - 1)*S + (R - 1)*dh).
    it.row0 = std::clamp<int64_t>(it.oh0 * a.stride_h - a.pad_top, 0, a.h);
    it.row1 = std::max(it.row0, std::clamp<int64_t>((it.oh1 - 1) * a.stride_h + (a.r - 1) * a.dilation_h + 1 - a.pad_top, 0, a.h));
    it.x = a.x + (image * a.c + it.c0) * a.h * a.w;
    return it;
  };
  PlanePrefetch next;
  for (int64_t item = begin; item < end; ++item) {
    const Item it = itemAt(item);
    const int64_t image = it.image, c0 = it.c0, count = it.count, oh0 = it.oh0, oh1 = it.oh1;
    fillChannelBlock(it.x, a.h, a.w, a.pad_top, a.pad_left, b.cols, count, it.row0, it.row1, t);
    if (item + 1 < end) {
      const Item following = itemAt(item + 1);
      next.start(following.x, a.h * a.w, following.count, a.w, following.row0, following.row1, (oh1 - oh0 + kRows - 1) / kRows);
    } else {
      next.start(nullptr, 0, 0, 0, 0, 0, 1);
    }
    // The block's weights tap-major: 16 floats per tap, zero past the last channel.
    transposeCopy(weights, kLanes, a.weights + c0 * taps, taps, taps, count, kLanes);
    // The block's bias, a lane per channel (none read past the last channel).
    const TilePostOps post = tilePostOps(a.post, false, 0, c0);
    const __m512 bias = a.post.bias ? _mm512_maskz_loadu_ps(firstLanes(count), a.post.bias + c0) : _mm512_setzero_ps();
    for (int64_t oh = oh0; oh < oh1; oh += kRows) {
      next.step();
      const int64_t rows = std::min<int64_t>(kRows, oh1 - oh);
      const float *row = t + oh * rowStep;
      float *out = computed + oh * a.ow * kLanes;
      for (int64_t ow = 0; ow < a.ow; ow += kRowPixels) {
        const int64_t pixels = std::min<int64_t>(kRowPixels, a.ow - ow);
        rowPixelsFn(pixels, rows, a.stride_w)(row + ow * pixelStep, a.stride_w, rowStep, weights, job.tapOffsets,
                                              taps, out + ow * kLanes, a.ow * kLanes);
      }
    }
    float *y = a.y + (image * a.k + c0) * outputs;
    const int64_t q0 = oh0 * a.ow, q1 = oh1 * a.ow;
    storePlanesFn(postKind(post))(computed, count, outputs, q0, q1, bias, post, y);
    if (a.epilogue)
      for (int64_t l = 0; l < count; ++l)
        a.epilogue(a.epilogue_ctx, y + l * outputs + q0, outputs, image, c0 + l, q0, 1, q1 - q0);
  }
}

/// The padded block of these arguments: the positions the windows reach, and at least the
/// image and its leading pads.
BlockShape blockShape(const kiln_conv2d_args &a) {
  BlockShape b;
  b.rows = std::max(a.pad_top + a.h, (a.oh - 1) * a.stride_h + (a.r - 1) * a.dilation_h + 1);
  b.cols = std::max(a.pad_left + a.w, (a.ow - 1) * a.stride_w + (a.s - 1) * a.dilation_w + 1);
  return b;
}
#endif

} // namespace

bool channelBlockDepthwise(const kiln_conv2d_args &a) {
#ifdef __AVX512F__
  if (a.groups != a.c || a.k != a.c)
    return false;
  const BlockShape b = blockShape(a);
  if ((b.rows * b.cols + a.oh * a.ow) * kLanes > kMaxScratchFloats)
    return false;
  // Large stride-1 planes with rows as wide as the input's run along their rows
  // (kLargeDepthwisePlane).
  return !(flatPlaneDepthwise(a) && a.oh * a.ow > kLargeDepthwisePlane);
#else
  (void)a;
  return false;
#endif
}

void depthwiseChannelBlocks(const kiln_rt *rt, const kiln_conv2d_args &a) {
#ifdef __AVX512F__
  const BlockShape b = blockShape(a);
  const int64_t taps = a.r * a.s;
  // The calling thread's table, read by every worker of its call.
  thread_local std::vector<int64_t> offsets;
  offsets.resize(static_cast<size_t>(taps));
  for (int64_t r = 0; r < a.r; ++r)
    for (int64_t s = 0; s < a.s; ++s)
      offsets[static_cast<size_t>(r * a.s + s)] = (r * a.dilation_h * b.cols + s * a.dilation_w) * kLanes;
  const int64_t blocks = (a.c + kLanes - 1) / kLanes;
  // Bands of output rows, one per thread, where the layer splits by rows
  // (depthwiseSplitsRows). Else bands only when there are fewer blocks than two per thread:
  // 48 channels (3 blocks) on 2 threads would otherwise run 2 blocks on one and 1 on the
  // other.
  const int64_t threads = threadsOf(rt);
  const int64_t bands =
      depthwiseSplitsRows(threads, a)
          ? std::min<int64_t>(threads, a.oh)
          : std::clamp<int64_t>((2 * threads + a.n * blocks - 1) / (a.n * blocks), 1, a.oh);
  BlockJob job{a, b, offsets.data(), bands};
  const int64_t items = a.n * blocks * bands;
  parallelForIfWorth(rt, items, a.n * a.c * a.oh * a.ow * taps, int64_t{1} << 16, channelBlocks, &job);
#else
  (void)rt, (void)a;
#endif
}

} // namespace kiln::runtime::kernels::detail
