// Direct convolution by tiles of output pixels (Conv2dCommon.h), for convolutions with few
// output channels, whose GEMM would spend about as long packing its B (the im2col panels, each
// float of which feeds only M = K output channels) as multiplying: LeNet-5's 6 -> 16 5x5 layer
// packs 150 x 100 floats per image for 16 x 100 x 150 multiply-adds.
//
// It computes Y^T = im2col^T W^T with nothing packed per pixel. A tile is R <= 6 consecutive
// output pixels of one image (in oh*OW + ow order, across row ends) by 16*NV output channels,
// held in R x NV registers over all taps (c, r, s) of the window. For each tap the R pixels'
// input values are broadcast straight from the padded input: pixel i's window origin plus the
// tap's offset, which a table holds. W^T is packed once per call into panels of up to 64
// channels (taps x width, zero past the last channel), which every tile streams. The finished
// tile is transposed in registers and stored as R consecutive floats per channel. Work items are
// blocks of an image's pixels; each runs every panel over its tiles and then the epilogue on
// the block: all channels by its pixels, contiguous columns of the epilogue's matrix.
#include <algorithm>
#include <vector>

#include "runtime/kernels/Conv2dCommon.h"
#include "runtime/kernels/GemmDriver.h"
#include "runtime/kernels/GemmMicroKernel.h" // kMaxRows, kVector, kMaxVectors, kPanelWidth
#include "runtime/kernels/GemmPack.h"
#include "runtime/kernels/Simd.h"

namespace kiln::runtime::kernels::detail {

namespace {

// Output pixels per work item: 16 tiles of 6, enough for the epilogue's rows to be long.
constexpr int64_t kBlockPixels = 16 * kMaxRows;
// Below this many multiply-adds a call runs on the calling thread (as the GEMM driver's).
constexpr int64_t kMinDirectParallelMacs = int64_t{1} << 18;
// The gate (directConvShape): this path against the GEMM's, time on one / two Zen 4 cores:
//   LeNet-5 6 -> 16 5x5, 14x14, batch 64     0.31-0.35 / 0.15-0.16 ms against 0.67 / 0.35-0.63
//   16 -> 24 3x3, 32x32, batch 8             0.61-0.70 ms against 0.72 (one core)
//   3 -> 16 3x3/2, 224x224                   0.14-0.21 ms against 0.19 (one core)
//   3 -> 32 3x3/2, 224x224                   0.31-0.33 ms against 0.30: 27 taps per tile do not
//                                            pay for its transposed stores
//   3 -> 64 7x7/2 (a ResNet stem)            2.68-2.86 / 1.35-1.61 ms against 2.61-2.66 / 1.32-1.81
//   64 -> 64 3x3/2, 56x56                    0.57 / 0.34-0.36 ms against 0.67-0.68 / 0.37-0.62
//   128 -> 128 up to 512 -> 512 3x3/2         0.93-1.05 of the GEMM's time on one core, noisy on two
// So 9 to 32 output channels (fewer go to the depthwise loop when there is one input channel)
// over 64 to 4096 taps; from 64 channels on the GEMM's 6 x 64 tiles are about as good. Above
// 4096 taps the panels of W^T, which every tile streams, outgrow L2.
constexpr int64_t kMinDirectOutputs = 9, kMaxDirectOutputs = 32;
constexpr int64_t kMinDirectTaps = 64, kMaxDirectTaps = 4096;

/// One tile: out[(16*j + t)*plane + i] = sum over taps of origins[i][offsets[tap]] *
/// panel[tap*width + 16*j + t], for pixels i < R and channels 16*j + t < channels.
template <int R, int NV>
void pixelTile(int64_t taps, const float *const *origins, const int64_t *offsets, const float *panel, int64_t width,
               float *out, int64_t plane, int64_t channels) {
#ifdef __AVX512F__
  __m512 acc[R][NV];
#pragma GCC unroll 8
  for (int i = 0; i < R; ++i)
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j)
      acc[i][j] = _mm512_setzero_ps();
  const float *origin[R];
#pragma GCC unroll 8
  for (int i = 0; i < R; ++i)
    origin[i] = origins[i];
  for (int64_t tap = 0; tap < taps; ++tap, panel += width) {
    const int64_t offset = offsets[tap];
    __m512 w[NV];
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j)
      w[j] = _mm512_loadu_ps(panel + j * kVector);
#pragma GCC unroll 8
    for (int i = 0; i < R; ++i) {
      const __m512 x = _mm512_set1_ps(origin[i][offset]);
#pragma GCC unroll 4
      for (int j = 0; j < NV; ++j)
        acc[i][j] = _mm512_fmadd_ps(x, w[j], acc[i][j]);
    }
  }
  // Channel 16*j + t of the tile is lane t of acc[.][j]: stored as R consecutive pixels.
  storeTileTransposed(acc, out, plane, channels, false);
#else
  float acc[R][NV * kVector] = {};
  for (int64_t tap = 0; tap < taps; ++tap, panel += width)
    for (int i = 0; i < R; ++i) {
      const float x = origins[i][offsets[tap]];
      for (int t = 0; t < NV * kVector; ++t)
        acc[i][t] += x * panel[t];
    }
  for (int64_t t = 0; t < channels; ++t)
    for (int i = 0; i < R; ++i)
      out[t * plane + i] = acc[i][t];
#endif
}

using PixelTileFn = void (*)(int64_t, const float *const *, const int64_t *, const float *, int64_t, float *, int64_t,
                             int64_t);

template <int R, int NV> struct PixelTileOf {
  static constexpr PixelTileFn fn = &pixelTile<R, NV>;
};
/// fns[R - 1][NV - 1]: the kernel for R pixels (1..6) by NV vectors (1..4) of channels.
const auto kPixelTiles = makeTable<PixelTileFn, PixelTileOf>(RowCounts{}, VectorCounts{});

struct DirectJob {
  const kiln_conv2d_args &a;
  const PaddedInput &input;
  const float *panels;     // W^T, panel q (channels 64q..) at panels + q*64*taps, taps x width(q)
  const int64_t *offsets;  // per tap (c, r, s): c*plane + r*dilation_h*width + s*dilation_w
  int64_t taps, blocksPerImage;
};

void runBlocks(void *ctx, int64_t begin, int64_t end) {
  const DirectJob &job = *static_cast<const DirectJob *>(ctx);
  const kiln_conv2d_args &a = job.a;
  const int64_t pixels = a.oh * a.ow;
  for (int64_t unit = begin; unit < end; ++unit) {
    const int64_t image = unit / job.blocksPerImage;
    const int64_t p0 = unit % job.blocksPerImage * kBlockPixels, p1 = std::min(pixels, p0 + kBlockPixels);
    const float *imageInput = job.input.data + image * a.c * job.input.plane;
    float *imageOutput = a.y + image * a.k * pixels;
    for (int64_t p = p0; p < p1; p += kMaxRows) {
      const int64_t rows = std::min<int64_t>(kMaxRows, p1 - p);
      const float *origins[kMaxRows];
      for (int64_t i = 0; i < rows; ++i) {
        const int64_t oh = (p + i) / a.ow, ow = (p + i) % a.ow;
        origins[i] = imageInput + oh * a.stride_h * job.input.width + ow * a.stride_w;
      }
      for (int64_t q = 0; q * kPanelWidth < a.k; ++q) {
        const int64_t width = panelWidth(q, a.k), channels = std::min<int64_t>(kPanelWidth, a.k - q * kPanelWidth);
        kPixelTiles.fns[rows - 1][width / kVector - 1](job.taps, origins, job.offsets,
                                                       job.panels + q * kPanelWidth * job.taps, width,
                                                       imageOutput + q * kPanelWidth * pixels + p, pixels, channels);
      }
    }
    if (a.epilogue)
      a.epilogue(a.epilogue_ctx, imageOutput + p0, pixels, image, 0, p0, a.k, p1 - p0);
  }
}

} // namespace

bool directConvShape(const kiln_conv2d_args &a) {
  return a.groups == 1 && a.k >= kMinDirectOutputs && a.k <= kMaxDirectOutputs && a.c * a.r * a.s >= kMinDirectTaps &&
         a.c * a.r * a.s <= kMaxDirectTaps;
}

void directConv(const kiln_rt *rt, const kiln_conv2d_args &a, const PaddedInput &input) {
  const int64_t taps = a.c * a.r * a.s;
  // W^T in panels, in the calling thread's scratch, which the workers only read, and only
  // until this call returns.
  const int64_t panelChannels = (a.k + kPanelWidth - 1) / kPanelWidth * kPanelWidth;
  float *panels = scratch(Scratch::SharedB, static_cast<size_t>(taps * panelChannels));
  for (int64_t q = 0; q * kPanelWidth < a.k; ++q) {
    const int64_t width = panelWidth(q, a.k), channels = std::min<int64_t>(kPanelWidth, a.k - q * kPanelWidth);
    packColumns(panels + q * kPanelWidth * taps, a.weights + q * kPanelWidth * taps, taps, taps, channels, width);
  }
  thread_local std::vector<int64_t> offsets;
  offsets.resize(static_cast<size_t>(taps));
  for (int64_t c = 0, tap = 0; c < a.c; ++c)
    for (int64_t r = 0; r < a.r; ++r)
      for (int64_t s = 0; s < a.s; ++s)
        offsets[static_cast<size_t>(tap++)] = c * input.plane + r * a.dilation_h * input.width + s * a.dilation_w;
  const int64_t blocksPerImage = (a.oh * a.ow + kBlockPixels - 1) / kBlockPixels;
  DirectJob job{a, input, panels, offsets.data(), taps, blocksPerImage};
  const int64_t units = a.n * blocksPerImage;
  const int64_t macs = a.n * a.k * taps * a.oh * a.ow;
  if (threadsOf(rt) > 1 && units > 1 && macs >= kMinDirectParallelMacs)
    parallelForBalanced(rt, units, 1, runBlocks, &job);
  else
    runBlocks(&job, 0, units);
}

} // namespace kiln::runtime::kernels::detail
