// The Winograd gate (which convolutions go to Winograd, and by which variant) and the plan of a
// call (how its tiles are cut into blocks), from timings on the shared machine
// (kiln-gemm-bench --winograd). The algorithm itself: Conv2dWinograd.h.
//
// Accuracy, measured here on ResNet/VGG layers with |N(0,1)| inputs and N(0,1)/sqrt(9C) weights
// against a double reference, max error / max |y|: F(2,3) 3.2-3.4e-7 (C = 64), 4.4-5.8e-7
// (128), 5.8-6.8e-7 (256), 6.5-8.1e-7 (512), GEMM path 4.5-6.0e-7, so as accurate as direct
// summation (shared/notes/cpu-kernels.md, section 3); F(4,3) 3.2-3.8e-6 (64), 4.1-6.4e-6 (128),
// 6.3-9.3e-6 (256), 1.3e-5 (512), about ten times F(2,3)'s. The gate keeps F(4,3) to at most
// 256 channels; the seed models still match their float64 results within half the tolerance
// (ResNet-50 at rtol 5e-5, atol 5e-6: max abs error 2.67e-5, against 1.91e-5 with F(2,3) alone).
#include <algorithm>

#include "runtime/kernels/Conv2dCommon.h"
#include "runtime/kernels/Conv2dWinograd.h"
#include "runtime/kernels/Kernels.h"

namespace kiln::runtime::kernels::detail {

namespace winograd {

namespace {

// Bytes of V and M per work item: half of Zen 5's 1 MiB L2 leaves room for the driver's packed
// panels and the weights streaming through.
constexpr int64_t kBlockBytes = int64_t{640} << 10;
// Output pixels per block, at least: 128 tiles of F(2,3); 128 of F(4,3), whose GEMMs ran
// faster on more tiles (wider B) than on V and M that fit L2 (kiln-gemm-bench --winograd,
// F(4,3) at 1 thread: 64 -> 64 at 56x56 0.82-0.91 ms with 512 pixels, 0.78-0.81 with 2048;
// 128 -> 128 at 28x28, 0.93-1.17 -> 0.74-0.78; 256 -> 256 at 56x56, 14.3 -> 11.7-12.9).
int64_t minBlockPixels(int tile) { return tile == 4 ? 2048 : 512; }
// But the tiles of this many bytes of V and M at most, rounded to whole rows of tiles (so up
// to a row more): V and M live in each thread's scratch, which is never freed. FCN-ResNet50's
// 2048 -> 512 head at 32 x 32 (batch 4) took 128 tiles per block, 21 MB; with blocks of 48
// tiles (7.9 MB) the model ran as fast (1.22-1.24 s against 1.22-1.25, one thread), its peak
// RSS 265.8 -> 250.9 MB, and VGG16 and ResNet-50 f32 kept their times.
constexpr int64_t kMaxBlockBytes = int64_t{6} << 20;
// The gate (winogradTile), first for Winograd at all, from timings of single layers against the GEMM path (speedup = GEMM
// time / Winograd time on one core, 3x3 pad 1, batch 1 unless noted; ranges over runs on the
// shared machine; "2t" = on two threads):
//   C=K  image   tiles  speedup            C=K  image     tiles  speedup
//    64  56x56    784   1.6-1.7 (2t 1.6)    64  224x224   12544  1.7-1.8 (2t 1.7)
//   128  28x28    196   1.5-1.7 (2t 1.3)   128  112x112    3136  1.7     (2t 1.6)
//   256  14x14     49   1.2-1.4 (2t ~1.0)  256  56x56       784   1.4-1.8 (2t 1.6)
//   512   7x7      16   0.2-0.4            512  28x28       196   1.2-1.5 (2t 1.4)
//   512   7x7 b8  128   1.1-1.35           512  14x14        49   0.8-0.9
//   256  14x14 b8 392   1.6-1.9             64  14x14        49   1.28
//    64   8x8      16   0.65               128   7x7        16   0.78
//    32  16x16     64   0.95                16  32x32       256   1.23
// Small images waste the 16-tile vectors of the transforms and the fixed costs dominate small
// layers; deep layers lose when U (16 x K x C, transformed every call, streamed by every block)
// is large against the tiles it serves.
constexpr int64_t kMinChannels = 16, kMinSide = 6, kMinTiles = 40;
constexpr int64_t kMinMacs = int64_t{1} << 22;
constexpr int64_t kTilesPerWeightRatio = 2048;
// With U stored at load (codegen asks with weightsStored), deep layers on small images win
// too: the GEMMs, C x K per tile, then dwarf the input and output transforms, C and K per
// tile. F(2,3) against the GEMM path, U and GEMM weights streamed from memory
// (kiln-gemm-bench --winograd --cold, 1 / 2 threads, Zen 4, batch 1):
//   C=K  image  tiles  GEMM / F(2,3)        C=K  image  tiles  GEMM / F(2,3)
//   512   7x7    16    1.14 / 1.16          256   7x7    16    1.01 / 1.02
//   512   8x8    16    1.32 / 1.31          128   7x7    16    0.80 / 1.07
//   512  14x14   49    1.90 / 1.91           64   8x8    16    0.93 / 1.23
// Wider layers gain as much or more, U now streaming from memory like the GEMM's weights
// (--winograd --cold, F(2,3) with U stored against the plain path, 1 / 2 threads):
//   2048 -> 512 at 32x32 (FCN's head)    83 / 44 ms against 177 / 94
//   1024 -> 1024 at 14x14                18.4 / 13.4 ms against 36.8 / 34.8
//   1024 -> 1024 at 7x7                  7.6 / 4.7 ms against 9.1 / 10.0
//   2048 -> 1024 at 7x7                  13.8 / 10.0 ms against 19.2 / 11.5
// So: at least 16 tiles and 2^17 weights (C x K), and at most 2^21 of them (U 134 MB, 16/9 of
// the plain weights, which it replaces); above that the rules for U transformed per call hold.
constexpr int64_t kMinTilesStoredU = 16;
constexpr int64_t kMinWeightsStoredU = int64_t{1} << 17, kMaxWeightsStoredU = int64_t{1} << 21;
// Then F(4,3) over F(2,3), both with U stored (kiln-gemm-bench --winograd; F(2,3) time /
// F(4,3) time, ranges over runs on Zen 4, blocks as above):
//   C=K  image    1 thread   2 threads    C=K  image        1 thread   2 threads
//    64  56x56    1.5-1.75   1.5-1.6      64  224x224       1.3-1.45   1.35-1.5
//   128  28x28    1.5-1.6    1.35-1.5    128  112x112       1.3-1.6    1.5-1.6
//   256  14x14    0.75-1.0   0.85-0.9    256  56x56         1.4-1.55   1.55-1.65
//    64  56x56 b8 1.37                   512  28x28         1.1-1.45   1.4-1.5
//   128  28x28 b8 1.14                   512  14x14         0.92 (Winograd off)
//   256  14x14 b8 0.91                   512  7x7 b8        1.23
// F(4,3) loses where its 4 x 4 tiles overhang the image (14 x 14 computed as 16 x 16: 0.73 of
// F(2,3)'s points rather than 0.56), so it needs a side that 4 divides or nearly (a point
// count at most 0.6 of F(2,3)'s) and enough tiles to fill two vectors. Its U is 36 x K x C,
// 2.25 times F(2,3)'s: 37.7 MB for 512 x 512, which training transforms on every call and
// every block streams; up to 256 x 256 (9.4 MB) only.
constexpr int64_t kMinTilesF4 = 32;
constexpr int64_t kMaxWeightsF4 = int64_t{1} << 16;
// In bf16 with U stored at load, F(2,3) multiplies in bf16 (KILN_CONV_WEIGHTS_WINOGRAD_F2_BF16)
// while F(4,3) stays f32 (its transforms would amplify bf16's rounding to ~4%): twice the GEMM
// rate for 16 / 4 = 4 products per output against 2.25. F(4,3) f32 time / F(2,3) bf16 time,
// interleaved, Zen 5 (1 thread / 2 threads; 3x3 pad 1, batch 1):
//   C=K  image    1t    2t           C=K  image     1t         2t
//    64  56x56   0.94  0.95          128  28x28    1.04       1.62
//    64  28x28   1.09  1.90          128  56x56    1.03-1.05  0.85-1.05
//    64  224x224 1.03  1.12-1.15     128  112x112  1.13       1.07
//                                    256  56x56    1.14-1.16  1.18
// So bf16 takes F(2,3) wherever f32 would take F(4,3): one rule, as fast or faster but for
// 64 channels at 56 x 56 (and one of two runs of 128 at 56 x 56 on two threads).
// U is 16 x K x C floats in scratch: at most 64 MiB (1024 x 1024 channels); F(4,3)'s 36 x K x C
// at most 9.4 MB (kMaxWeightsF4).
constexpr int64_t kMaxWeights = int64_t{1} << 20;
// With fewer blocks than this per thread, the call runs in phases (runPhased) instead of block
// by block. With U stored at load there is no transform to share, and whole blocks per thread
// won as soon as there is one each: ResNet-50's 3x3 128-channel 28x28 layers (2 blocks) at 2
// threads, 0.75-0.95 -> 0.68-0.79 ms (6 interleaved runs on Zen 4).
constexpr int64_t kPhasedBelow = 2, kPhasedBelowWithStoredU = 1;
// Unless the layer has this many times more output channels than input channels: then each
// block's output channels are split over the threads instead, every thread transforming the
// whole block's input for itself. That input transform is small against the GEMMs (C x K per
// tile), and the phases' two extra joins and the V and M that one core writes and the other
// reads cost more on such small layers: SqueezeNet's expand layers ran slower on 2 threads than
// on 1 (kiln-gemm-bench --winograd, F(2,3), 48 -> 192 at 13x13: 0.112 ms on 1, 0.147 on 2).
constexpr int64_t kSplitOutputsRatio = 2;

} // namespace

Plan makePlan(const kiln_conv2d_args &a, int threads, int tile) {
  Plan p{a, tile, pointsOf(tile), nullptr, uPlaneOf(a.k, a.c), ceilDiv(a.oh, tile), ceilDiv(a.ow, tile),
         0, 1, 1, 1, false, 0, 0, threads};
  p.groupCols = roundUp(p.tileCols, kGroup);
  // Tiles per block: what keeps V and M in L2, but at least minBlockPixels of output, since
  // every block streams all of U, which for deep layers is far larger than V and M; and the
  // tiles of kMaxBlockBytes at most (a row of tiles at least; blocks are whole rows, so the
  // cap is a target too).
  const int64_t bytesPerTile = p.points * (a.c + a.k) * int64_t{sizeof(float)};
  const int64_t rowsByCache = std::max<int64_t>(1, kBlockBytes / (bytesPerTile * p.tileCols));
  const int64_t target = std::min(std::max(rowsByCache * p.tileCols, minBlockPixels(tile) / (tile * tile)),
                                  std::max(p.tileCols, kMaxBlockBytes / bytesPerTile));
  const int64_t imageTiles = p.tileRows * p.tileCols;
  if (target >= 2 * imageTiles) {
    p.imagesPerBlock = std::min(a.n, target / imageTiles);
  } else {
    p.blocksPerImage = ceilDiv(p.tileRows, ceilDiv(target, p.tileCols));
  }
  const int64_t blocks = p.blocks();
  const bool storedU = winogradTileOfLayout(a.weights_layout) == tile;
  const int64_t phasedBelow = storedU ? kPhasedBelowWithStoredU : kPhasedBelow;
  if (threads > 1 && blocks < phasedBelow * threads && a.k >= 2 * kEpilogueRows * threads) {
    // Few blocks of a deep layer: the threads share every block, by its output channels when
    // they far outnumber its input channels, else phase by phase.
    if (a.k >= kSplitOutputsRatio * a.c)
      p.outputParts = threads;
    else
      p.phased = true;
  } else if (threads > 1 && blocks < 8 * threads && blocks % threads != 0) {
    // Few items: make their count a multiple of the threads so that no thread idles.
    if (p.imagesPerBlock > 1) {
      p.imagesPerBlock = ceilDiv(a.n, roundUp(blocks, threads));
    } else {
      int64_t even = p.blocksPerImage;
      while (even < p.tileRows && (a.n * even) % threads != 0)
        ++even;
      if ((a.n * even) % threads == 0)
        p.blocksPerImage = even;
    }
  }
  p.maxBlockRows = ceilDiv(p.tileRows, p.blocksPerImage);
  // Columns M*tc .. M*tc + 16*M + 15 of the strip are read for the group of tiles from tc on
  // (tileRowElements).
  p.stripWidth = tile * p.groupCols + kGroup;
  p.stripRows = tile * p.maxBlockRows + 2;
  return p;
}

} // namespace winograd

using namespace winograd;

bool winogradShape(const kiln_conv2d_args &a) {
  return a.r == 3 && a.s == 3 && a.stride_h == 1 && a.stride_w == 1 && a.dilation_h == 1 && a.dilation_w == 1 &&
         a.groups == 1;
}

int winogradTile(const kiln_conv2d_args &a, bool weightsStored) {
  if (!winogradShape(a))
    return 0;
  if (a.c < kMinChannels || a.k < kMinChannels || a.oh < kMinSide || a.ow < kMinSide)
    return 0;
  const int64_t tiles = a.n * ceilDiv(a.oh, 2) * ceilDiv(a.ow, 2);
  const int64_t weights = a.k * a.c;
  const bool deepWithStoredU = weightsStored && tiles >= kMinTilesStoredU && weights >= kMinWeightsStoredU &&
                               weights <= kMaxWeightsStoredU;
  if (!deepWithStoredU) {
    // Every call transforms all the weights (16 x K x C floats written, 9 x K x C read) and
    // every block streams U again: with few tiles per call, deep layers lose (see the table
    // above).
    const double macs = static_cast<double>(a.n) * static_cast<double>(weights) * 9.0 * static_cast<double>(a.oh * a.ow);
    if (tiles < kMinTiles || macs < static_cast<double>(kMinMacs) || weights > kMaxWeights)
      return 0;
    if (tiles * kTilesPerWeightRatio < weights)
      return 0;
  }
  if (weightsStored && a.precision == KILN_PRECISION_BF16 && !a.exact)
    return 2;
  // F(4,3) where its tiles fit the image and its U stays moderate (see the second table).
  const int64_t tiles4 = a.n * ceilDiv(a.oh, 4) * ceilDiv(a.ow, 4);
  const bool fits = 5 * pointsOf(4) * tiles4 <= 3 * pointsOf(2) * tiles;
  return fits && tiles4 >= kMinTilesF4 && weights <= kMaxWeightsF4 ? 4 : 2;
}

int winogradTileOfLayout(int32_t weightsLayout) {
  switch (weightsLayout) {
  case KILN_CONV_WEIGHTS_WINOGRAD_F2:
  case KILN_CONV_WEIGHTS_WINOGRAD_F2_BF16:
    return 2;
  case KILN_CONV_WEIGHTS_WINOGRAD_F4:
    return 4;
  default:
    return 0;
  }
}

} // namespace kiln::runtime::kernels::detail

namespace kiln::runtime::kernels {

int convWinogradTile(const kiln_conv2d_args &args, bool weightsStored) {
  return detail::winogradTile(args, weightsStored);
}

} // namespace kiln::runtime::kernels
