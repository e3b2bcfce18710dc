// Direct convolution by tiles of output pixels (Conv2dCommon.h), for one-group convolutions
// whose weights and input rows fit in L2 beside each other: the GEMM would pack its B, the
// im2col panels, on every call, each packed float feeding only M = K output channels (LeNet-5's
// 6 -> 16 5x5 layer packs 150 x 100 floats per image for 16 x 100 x 150 multiply-adds), and
// panels that outgrow L2 (Inception-v3's 1x7 and 7x1 layers at 17x17, 1.5 MB each) written to
// L3 and read back.
//
// It computes Y^T = im2col^T W^T with nothing packed per pixel. A tile is R <= 6 consecutive
// output pixels of one image (in oh*OW + ow order, across row ends) by 16*NV output channels,
// held in R x NV registers over all taps (c, r, s) of the window. For each tap the R pixels'
// input values are broadcast straight from the padded input: pixel i's window origin plus the
// tap's offset, which a table holds. W^T is laid out in panels of up to 64 channels (taps x
// width, zero past the last channel), which every tile streams. The finished
// tile is transposed in registers and stored as R consecutive floats per channel. W^T's panels
// are stored so at load where only this convolution reads the weights
// (KILN_CONV_WEIGHTS_DIRECT_PANELS), else packed per call. A work item is one panel over a
// block of an image's pixels, then the epilogue on that block of channels by pixels; items
// are numbered so that each thread's consecutive run shares the larger operand: the panels
// (weights larger than the image: each thread streams only its panels) or the pixel blocks.
#include <algorithm>
#include <cstring>
#include <vector>

#include "runtime/kernels/Conv2dCommon.h"
#include "runtime/kernels/GemmDriver.h"
#include "runtime/kernels/GemmMicroKernel.h" // kMaxRows, kVector, kMaxVectors, kPanelWidth
#include "runtime/kernels/GemmPack.h"
#include "runtime/kernels/Kernels.h"
#include "runtime/kernels/Simd.h"

namespace kiln::runtime::kernels::detail {

namespace {

// Output pixels per work item: at most 16 tiles of 6, enough for the epilogue's rows to be
// long; fewer where that leaves under kItemsPerThread items per thread.
constexpr int64_t kBlockPixels = 16 * kMaxRows;
constexpr int64_t kItemsPerThread = 4;
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
// over 64 to 4096 taps. Above 4096 taps the panels of W^T, which every tile streams, outgrow L2.
// With more channels a tile is the GEMM's 6 x 64 micro-kernel transposed, with the same loads
// and FMAs per tap; the GEMM packs the im2col panels besides (1.5 MB per call for Inception-v3's
// 1x7 layers at 17x17, written to L3 and read back), this path streams the W^T panel and the
// input rows from L2 for every tile instead. It wins wherever those fit (below), with W^T stored
// at load and items ordered by the larger operand (one image, 1 / 2 threads, Zen 5, ms, the
// GEMM against this path):
//   192 -> 192 1x7, 17x17 (Inception-v3)     0.81-0.86 / 0.55-0.58 against 0.75-0.80 / 0.47-0.51
//   160 -> 160 1x7, 17x17                    0.59-0.61 / 0.45-0.48 against 0.54-0.55 / 0.36-0.37
//   128 -> 128 1x7, 17x17                    0.42 / 0.29 against 0.35 / 0.24
//   96 -> 96 1x7, 17x17                      0.214 / 0.192 against 0.180 / 0.173
//   48 -> 64 5x5, 35x35 (Inception-v3)       1.09-1.19 / 0.62-0.66 against 0.92 / 0.57-0.58
//   32 -> 64 5x5, 14x14                      0.123 / 0.099 against 0.094 / 0.076
//   96 -> 96 3x3/2, 35x35                    0.282 / 0.184 against 0.221 / 0.125
//   64 -> 64 3x3/2, 112x112                  1.51-1.77 / 1.06-1.24 against 1.23-1.49 / 0.87-0.95
//   3 -> 64 7x7/2, 224x224 (a ResNet stem)   1.37-1.47 / 0.76-0.87 against 1.30-1.58 / 0.72-0.85
//   384 -> 384 1x3, 8x8                      0.28 / 0.20 against 0.28 / 0.20
//   32 -> 64 3x3, 147x147                    2.2-2.5 / 1.1-1.5 against 2.2-2.5 / 1.1-1.6
// In bf16 the GEMM multiplies twice as fast and keeps these layers; training steps keep them too.
constexpr int64_t kMinDirectOutputs = 9, kMaxDirectOutputs = 32;
constexpr int64_t kMinDirectTaps = 64, kMaxDirectTaps = 4096;
// Every tile streams its W^T panel and the input rows of its block from L2; with more than
// half of it, some layers lose on two threads: a 128 -> 128 3x3/2 layer on 64x64 (a 295 KB
// panel and 236 KB of rows) ran 1.40 ms against the GEMM's 1.12, DeepLab's dilated 256 -> 256
// layers on 32x32 (590 KB panels) 3.54 against 3.21. Others still won there (288 -> 384 3x3/2
// on 35x35, a 663 KB panel: 2.95 / 1.46 against 3.30 / 1.82 on 1 / 2 threads), for reasons not
// yet understood, so the rule is the safe side of both.
constexpr int64_t kMaxDirectStreamBytes = int64_t{512} << 10;

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
  int64_t taps, panelCount, blockPixels, blocksPerImage;
  bool panelMajor; // items numbered panel by panel within an image, else pixel block by block
};

void runItems(void *ctx, int64_t begin, int64_t end) {
  const DirectJob &job = *static_cast<const DirectJob *>(ctx);
  const kiln_conv2d_args &a = job.a;
  const int64_t pixels = a.oh * a.ow, perImage = job.panelCount * job.blocksPerImage;
  // The tiles store into the block's channels staged contiguously (a stride of blockPixels
  // floats), then each channel's run is copied out whole: stored straight into planes a
  // multiple of 4 KiB apart (32x32, 128x128 outputs), a tile's 64 short column writes fell
  // into one L1 set; a 7x7/2 3 -> 64 layer on 256x256 ran 1.5x the GEMM's time so.
  float *stage = scratch(Scratch::PackedB, static_cast<size_t>(kPanelWidth * job.blockPixels));
  for (int64_t item = begin; item < end; ++item) {
    const int64_t image = item / perImage, local = item % perImage;
    const int64_t q = job.panelMajor ? local / job.blocksPerImage : local % job.panelCount;
    const int64_t block = job.panelMajor ? local % job.blocksPerImage : local / job.panelCount;
    const int64_t p0 = block * job.blockPixels, p1 = std::min(pixels, p0 + job.blockPixels);
    const int64_t width = panelWidth(q, a.k), channels = std::min<int64_t>(kPanelWidth, a.k - q * kPanelWidth);
    const float *imageInput = job.input.data + image * a.c * job.input.plane;
    float *panelOutput = a.y + (image * a.k + q * kPanelWidth) * pixels;
    for (int64_t p = p0; p < p1; p += kMaxRows) {
      const int64_t rows = std::min<int64_t>(kMaxRows, p1 - p);
      const float *origins[kMaxRows];
      for (int64_t i = 0; i < rows; ++i) {
        const int64_t oh = (p + i) / a.ow, ow = (p + i) % a.ow;
        origins[i] = imageInput + oh * a.stride_h * job.input.width + ow * a.stride_w;
      }
      kPixelTiles.fns[rows - 1][width / kVector - 1](job.taps, origins, job.offsets, job.panels + q * kPanelWidth * job.taps,
                                                     width, stage + (p - p0), job.blockPixels, channels);
    }
    for (int64_t channel = 0; channel < channels; ++channel)
      std::memcpy(panelOutput + channel * pixels + p0, stage + channel * job.blockPixels,
                  static_cast<size_t>(p1 - p0) * sizeof(float));
    if (a.epilogue)
      a.epilogue(a.epilogue_ctx, panelOutput + p0, pixels, image, q * kPanelWidth, p0, channels, p1 - p0);
  }
}

} // namespace

bool directConvShape(const kiln_conv2d_args &a) {
  const int64_t taps = a.c * a.r * a.s;
  if (a.groups != 1 || a.k < kMinDirectOutputs || taps < kMinDirectTaps || taps > kMaxDirectTaps)
    return false;
  if (a.weights_layout == KILN_CONV_WEIGHTS_DIRECT_PANELS || a.k <= kMaxDirectOutputs)
    return true;
  // More channels: not in training steps (exact), which keep the GEMM's summation order here
  // as for sparse taps; not in bf16, where the GEMM multiplies twice as fast; not for a 1x1
  // kernel (strided: a shortcut's downsampling), whose im2col is the input subsampled, a plain
  // copy (ResNet-18's 256 -> 512 1x1/2 at batch 8: 0.072 ms as a GEMM against 0.087 here).
  if (a.exact || a.precision == KILN_PRECISION_BF16 || a.r * a.s == 1)
    return false;
  const int64_t blockRows = std::min<int64_t>(a.oh, kBlockPixels / a.ow + 2);
  const int64_t inputRows = (blockRows - 1) * a.stride_h + (a.r - 1) * a.dilation_h + 1;
  const int64_t inputWidth = (a.ow - 1) * a.stride_w + (a.s - 1) * a.dilation_w + 1;
  const int64_t streamed = taps * std::min<int64_t>(a.k, kPanelWidth) + a.c * inputRows * inputWidth;
  return streamed * int64_t{sizeof(float)} <= kMaxDirectStreamBytes;
}

void directConv(const kiln_rt *rt, const kiln_conv2d_args &a, const PaddedInput &input) {
  const int64_t taps = a.c * a.r * a.s;
  const float *panels = a.weights;
  if (a.weights_layout != KILN_CONV_WEIGHTS_DIRECT_PANELS) {
    // W^T in panels, in the calling thread's scratch, which the workers only read, and only
    // until this call returns.
    float *packed = scratch(Scratch::SharedB, static_cast<size_t>(kernels::convDirectPanelFloats(a.k, taps)));
    kernels::packConvDirectPanels(a.weights, a.k, taps, packed);
    panels = packed;
  }
  thread_local std::vector<int64_t> offsets;
  offsets.resize(static_cast<size_t>(taps));
  for (int64_t c = 0, tap = 0; c < a.c; ++c)
    for (int64_t r = 0; r < a.r; ++r)
      for (int64_t s = 0; s < a.s; ++s)
        offsets[static_cast<size_t>(tap++)] = c * input.plane + r * a.dilation_h * input.width + s * a.dilation_w;
  const int threads = threadsOf(rt);
  const int64_t macs = a.n * a.k * taps * a.oh * a.ow;
  const bool parallel = threads > 1 && macs >= kMinDirectParallelMacs;
  const int64_t pixels = a.oh * a.ow, panelCount = (a.k + kPanelWidth - 1) / kPanelWidth;
  // Blocks of whole tiles, smaller than kBlockPixels where the items would be too few to share.
  const int64_t tilesPerImage = (pixels + kMaxRows - 1) / kMaxRows;
  const int64_t wantedBlocks = parallel ? (threads * kItemsPerThread + a.n * panelCount - 1) / (a.n * panelCount) : 1;
  const int64_t blockPixels =
      std::min(kBlockPixels, std::max<int64_t>(1, tilesPerImage / wantedBlocks) * kMaxRows);
  const int64_t blocksPerImage = (pixels + blockPixels - 1) / blockPixels;
  const bool panelMajor = a.k * taps > a.c * input.plane;
  DirectJob job{a, input, panels, offsets.data(), taps, panelCount, blockPixels, blocksPerImage, panelMajor};
  const int64_t items = a.n * panelCount * blocksPerImage;
  if (parallel && items > 1)
    parallelForBalanced(rt, items, 1, runItems, &job);
  else
    runItems(&job, 0, items);
}

} // namespace kiln::runtime::kernels::detail

namespace kiln::runtime::kernels {

int64_t convDirectPanelFloats(int64_t k, int64_t taps) {
  return taps * ((k + detail::kVector - 1) / detail::kVector * detail::kVector);
}

void packConvDirectPanels(const float *weights, int64_t k, int64_t taps, float *dst) {
  for (int64_t q = 0; q * detail::kPanelWidth < k; ++q) {
    const int64_t width = detail::panelWidth(q, k), channels = std::min<int64_t>(detail::kPanelWidth, k - q * detail::kPanelWidth);
    detail::packColumns(dst + q * detail::kPanelWidth * taps, weights + q * detail::kPanelWidth * taps, taps, taps, channels,
                        width);
  }
}

} // namespace kiln::runtime::kernels
