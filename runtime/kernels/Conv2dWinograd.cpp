// Winograd F(2x2, 3x3) for 3x3 stride-1 convolutions (Lavin & Gray, arXiv 1509.09308): each
// 2 x 2 output tile comes from a 4 x 4 input tile with 16 multiplies per (input, output channel)
// instead of 36, and the channel sums become 16 GEMMs, one per point xi of the 4 x 4 tile:
//   U_xi (K x C) = (G g G^T)_xi          transformed weights, at load or per call
//   V_xi (C x T) = (B^T d B)_xi          transformed input tiles
//   M_xi (K x T) = U_xi * V_xi           the blocked driver, U read in place
//   y tile       = A^T M A               the output transform
// with B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1], G = [1 0 0; .5 .5 .5; .5 -.5 .5; 0 0 1],
// A^T = [1 1 1 0; 0 1 -1 -1]. F(2,3) is as accurate as direct summation (shared/notes/
// cpu-kernels.md, section 3: max error / max |y| 4.3e-7 at C = 256 against 1.2-1.9e-6 for a
// sequential fp32 sum; measured here on ResNet/VGG layers with |N(0,1)| inputs and N(0,1)/
// sqrt(9C) weights against a double reference: 3.1e-7 (C = 64), 4.8e-7 (256), 6.5-7.7e-7 (512),
// GEMM path 4.5-6.0e-7). F(4,3) (2-4x the error of direct per the notes) is not implemented.
//
// Work items are blocks of tiles: a range of tile rows of one image, or several whole small
// images, with at least kMinBlockTiles tiles (each block streams all of U, which for deep
// layers is far larger than V and M) and otherwise as many as keep V (16 x C x T) and
// M (16 x K x T) in L2. Items are split evenly over the threads; with fewer blocks than two
// per thread, the threads instead share every block, each computing a part of the output
// channels (and reading only its part of U). Inside an item everything runs on one thread:
// the input transform reads a zero-padded strip of the block's input rows (one channel at a
// time, so the strip lives in L1), which handles any padding and the partial tiles at odd
// OH/OW; the 16 GEMMs run through the blocked driver; the output transform writes only valid
// output pixels, and the epilogue then sees each image of the block in chunks of 16 channels
// over the block's contiguous output pixels, each element once, after it is final.
//
// U comes transformed when the model's weights are constant and this kernel alone reads them:
// the runtime transforms them once, at load (KILN_CONV_WEIGHTS_WINOGRAD, packWinogradWeights).
// ResNet-50's Winograd layers at one thread (Zen 4): 17.6-21.5 ms -> 15.4-17.0; at two threads
// no change (each thread then streams its part of the stored U, 16/9 the size of the weights,
// from memory, about as long as transforming that part took). Otherwise (training, where the
// weights change) U is recomputed on every call into the calling thread's Scratch::Conv, in
// parallel over K (or, when it is small and every thread reads all of it, by each thread into
// its own): ~0.3 ms for 256 x 256 and ~1.9 ms for 512 x 512 on one core (writing 16 x K x C
// floats, memory-bound). The gate below was measured with that per-call transform, which is
// what keeps deep layers at batch 1 off; with U stored, 512 x 512 at 7 x 7 was still no faster.
#include <algorithm>
#include <cstdlib>
#include <new>

#include "runtime/kernels/Conv2dCommon.h"
#include "runtime/kernels/GemmDriver.h"
#include "runtime/kernels/GemmMicroKernel.h" // kMaxRows
#include "runtime/kernels/Simd.h"

namespace kiln::runtime::kernels::detail {

namespace {

constexpr int64_t kPoints = 16;      // 4 x 4 transformed tile
constexpr int64_t kGroup = 16;       // tiles (or channels) per vectorised transform step
constexpr int64_t kEpilogueRows = 16; // output channels per epilogue call
// Bytes of V and M per work item: half of Zen 5's 1 MiB L2 leaves room for the driver's packed
// panels and the weights streaming through.
constexpr int64_t kBlockBytes = int64_t{640} << 10;
constexpr int64_t kMinBlockTiles = 128;
// The gate (useWinograd), from timings of single layers against the GEMM path (speedup = GEMM
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
// U is 16 x K x C floats in scratch: at most 64 MiB (1024 x 1024 channels).
constexpr int64_t kMaxWeights = int64_t{1} << 20;
// Threads that all read the whole of U each transform their own copy up to this size (U of a
// 64 x 64 layer: 256 KiB); larger U is transformed once, split over the threads.
constexpr int64_t kOwnWeightsMaxFloats = int64_t{1} << 16;
// With fewer (image, block) items than this per thread, the threads split output channels:
// each then transforms and reads only its part of U, at the cost of repeating the input
// transform. With U stored at load there is no transform to share, and whole blocks per thread
// won as soon as there is one each: ResNet-50's 3x3 128-channel 28x28 layers (2 blocks) at 2
// threads, 0.75-0.95 -> 0.68-0.79 ms (6 interleaved runs on Zen 4).
constexpr int64_t kSplitChannelsBelow = 2, kSplitChannelsBelowWithStoredU = 1;
// Channel parts per thread when the threads share a block and U is stored.
constexpr int64_t kFinerChannelParts = 4;

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t roundUp(int64_t a, int64_t b) { return ceilDiv(a, b) * b; }

/// Per-thread buffer of a work item: its own scratch slot, since the calling thread's
/// Scratch::Conv holds U and the driver's slots are in use during the GEMMs.
float *itemScratch(size_t floats) { return scratch(Scratch::WinogradItem, floats); }

/// Floats between the planes of U: K*C rounded to a cache line, plus 4 lines so that the 16
/// planes the weight transform writes at once (1 MiB apart for 512 x 512) do not all map to
/// the same cache sets.
int64_t uPlaneOf(int64_t k, int64_t c) { return roundUp(k * c, 16) + 64; }

/// The shape of one call: tiles, blocks and buffer sizes. A block is either a range of tile
/// rows of one image or, for small images, several whole images.
struct Plan {
  const kiln_conv2d_args &a;
  const float *u;                 // 16 planes of K x C, uPlane floats apart
  int64_t uPlane;
  int64_t tileRows, tileCols;     // TH, TW
  int64_t groupCols;              // TW rounded up to kGroup
  int64_t imagesPerBlock, blocksPerImage, maxBlockRows;
  int64_t kParts;                 // output channels split over this many items of a block
  int64_t stripWidth, stripRows;  // per channel, for the largest block
  int threads;
  uint64_t call = 0;              // nextCallNumber(): a thread's V serves all its parts of a block

  /// The first output channel of channel part `part` (rounded down to whole 6-row GEMM tiles).
  int64_t channelBoundary(int64_t part) const {
    return part >= kParts ? a.k : part * a.k / kParts / kMaxRows * kMaxRows;
  }

  int64_t blocks() const { return ceilDiv(a.n, imagesPerBlock) * blocksPerImage; }
  int64_t items() const { return blocks() * kParts; }
  int64_t firstRow(int64_t block) const { return block * tileRows / blocksPerImage; }
  int64_t maxTiles() const { return imagesPerBlock * maxBlockRows * tileCols; }
};

Plan makePlan(const kiln_conv2d_args &a, int threads) {
  Plan p{a, nullptr, uPlaneOf(a.k, a.c), ceilDiv(a.oh, 2), ceilDiv(a.ow, 2), 0, 1, 1, 1, 1, 0, 0, threads};
  p.groupCols = roundUp(p.tileCols, kGroup);
  // Tiles per block: what keeps V and M in L2, but at least kMinBlockTiles, since every block
  // streams all of U, which for deep layers is far larger than V and M.
  const int64_t bytesPerTile = kPoints * (a.c + a.k) * int64_t{sizeof(float)};
  const int64_t rowsByCache = std::max<int64_t>(1, kBlockBytes / (bytesPerTile * p.tileCols));
  const int64_t target = std::max(rowsByCache * p.tileCols, kMinBlockTiles);
  const int64_t imageTiles = p.tileRows * p.tileCols;
  if (target >= 2 * imageTiles) {
    p.imagesPerBlock = std::min(a.n, target / imageTiles);
  } else {
    p.blocksPerImage = ceilDiv(p.tileRows, ceilDiv(target, p.tileCols));
  }
  const int64_t blocks = p.blocks();
  const int64_t splitBelow =
      a.weights_layout == KILN_CONV_WEIGHTS_WINOGRAD ? kSplitChannelsBelowWithStoredU : kSplitChannelsBelow;
  if (threads > 1 && blocks < splitBelow * threads && a.k >= 2 * kEpilogueRows * threads) {
    // Few blocks of a deep layer: the threads share each block, each computing a part of the
    // output channels (and reading only its part of U); the input transform is repeated. With
    // U stored, in finer parts (each thread transforms a block's input once however many of
    // its parts it runs) that a thread come free takes over from a slower one.
    const bool finer = a.weights_layout == KILN_CONV_WEIGHTS_WINOGRAD &&
                       a.k >= 2 * kEpilogueRows * threads * kFinerChannelParts;
    p.kParts = finer ? threads * kFinerChannelParts : threads;
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
  // Columns 2*tc .. 2*tc + 33 of the strip are read for the group of tiles starting at tc.
  p.stripWidth = 2 * p.groupCols + kGroup;
  p.stripRows = 2 * p.maxBlockRows + 2;
  return p;
}

// ---------------------------------------------------------------------------------------------
// Weight transform: U_xi[k][c] = (G g G^T)_xi for g = w[k][c] (3 x 3).

/// Rows of G applied to three values: (v0, (v0+v1+v2)/2, (v0-v1+v2)/2, v2).
template <typename T> inline void applyG(T v0, T v1, T v2, T out[4], T half) {
  const T sum = (v0 + v2) * half, odd = v1 * half;
  out[0] = v0;
  out[1] = sum + odd;
  out[2] = sum - odd;
  out[3] = v2;
}

/// Rows [k0, k1) of U from the plain weights w[K][C][3][3].
void transformWeights(const float *weights, int64_t channels, float *u, int64_t plane, int64_t k0, int64_t k1) {
  for (int64_t k = k0; k < k1; ++k) {
    const float *wk = weights + k * channels * 9;
    int64_t c = 0;
#ifdef __AVX512F__
    const __m512i lanes9 = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                              _mm512_set1_epi32(9));
    const __m512 half = _mm512_set1_ps(0.5f);
    for (; c < channels; c += kGroup) {
      const __mmask16 mask = firstLanes(channels - c);
      // Gathers do not train the hardware prefetcher: fetch the weights 4 groups ahead.
      for (int line = 0; line < 9 && c + 5 * kGroup <= channels; ++line)
        _mm_prefetch(reinterpret_cast<const char *>(wk + (c + 4 * kGroup) * 9 + 16 * line), _MM_HINT_T0);
      __m512 g[9];
      for (int t = 0; t < 9; ++t)
        g[t] = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), mask, lanes9, wk + c * 9 + t, 4);
      __m512 rows[4][3]; // G g: 4 x 3
      for (int s = 0; s < 3; ++s) {
        __m512 col[4];
        applyG(g[s], g[3 + s], g[6 + s], col, half);
        for (int i = 0; i < 4; ++i)
          rows[i][s] = col[i];
      }
      for (int i = 0; i < 4; ++i) {
        __m512 out[4];
        applyG(rows[i][0], rows[i][1], rows[i][2], out, half);
        for (int j = 0; j < 4; ++j)
          _mm512_mask_storeu_ps(u + (4 * i + j) * plane + k * channels + c, mask, out[j]);
      }
    }
#endif
    for (; c < channels; ++c) {
      const float *g = wk + c * 9;
      float rows[4][3];
      for (int s = 0; s < 3; ++s) {
        float col[4];
        applyG(g[s], g[3 + s], g[6 + s], col, 0.5f);
        for (int i = 0; i < 4; ++i)
          rows[i][s] = col[i];
      }
      for (int i = 0; i < 4; ++i) {
        float out[4];
        applyG(rows[i][0], rows[i][1], rows[i][2], out, 0.5f);
        for (int j = 0; j < 4; ++j)
          u[(4 * i + j) * plane + k * channels + c] = out[j];
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Input transform: V_xi[c][t] = (B^T d B)_xi for the 4 x 4 input tile d of tile t.

/// Rows of B^T applied to four values.
template <typename T> inline void applyBt(const T d[4], T out[4]) {
  out[0] = d[0] - d[2];
  out[1] = d[1] + d[2];
  out[2] = d[2] - d[1];
  out[3] = d[1] - d[3];
}

/// Copies the input rows of tile rows [tr0, tr1) of channel `channel` into the strip,
/// zero outside the input: strip (i, j) = x[2*tr0 + i - pad_top][j - pad_left].
void fillStrip(const Plan &p, const float *channel, int64_t tr0, int64_t tr1, float *strip) {
  const kiln_conv2d_args &a = p.a;
  const int64_t rows = 2 * (tr1 - tr0) + 2, width = p.stripWidth;
  const int64_t copyCols = std::clamp<int64_t>(std::min(a.w, width - a.pad_left), 0, a.w);
  const int64_t lead = std::min(a.pad_left, width);
  for (int64_t i = 0; i < rows; ++i) {
    float *out = strip + i * width;
    const int64_t row = 2 * tr0 + i - a.pad_top;
    if (row < 0 || row >= a.h || copyCols == 0) {
      std::fill(out, out + width, 0.0f);
      continue;
    }
    std::fill(out, out + lead, 0.0f);
    std::copy(channel + row * a.w, channel + row * a.w + copyCols, out + lead);
    std::fill(out + lead + copyCols, out + width, 0.0f);
  }
}

/// Transforms the tiles of tile rows [tr0, tr1) of one channel from its strip into
/// v[xi*vPlane + t] (t = (tr - tr0)*TW + tc).
void transformInput(const Plan &p, const float *strip, int64_t tr0, int64_t tr1, float *v,
                    int64_t vPlane) {
  const int64_t width = p.stripWidth, tw = p.tileCols;
  for (int64_t tr = tr0; tr < tr1; ++tr) {
    const float *top = strip + 2 * (tr - tr0) * width;
    float *out = v + (tr - tr0) * tw;
#ifdef __AVX512F__
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    for (int64_t tc = 0; tc < tw; tc += kGroup) {
      const __mmask16 mask = firstLanes(tw - tc);
      __m512 t[4][4]; // B^T applied along each row: t[i][j]
      for (int i = 0; i < 4; ++i) {
        const float *row = top + i * width + 2 * tc;
        const __m512 lo = _mm512_loadu_ps(row), hi = _mm512_loadu_ps(row + 16);
        const __m512 lo2 = _mm512_loadu_ps(row + 2), hi2 = _mm512_loadu_ps(row + 18);
        const __m512 d[4] = {_mm512_permutex2var_ps(lo, even, hi), _mm512_permutex2var_ps(lo, odd, hi),
                             _mm512_permutex2var_ps(lo2, even, hi2), _mm512_permutex2var_ps(lo2, odd, hi2)};
        applyBt(d, t[i]);
      }
      for (int j = 0; j < 4; ++j) {
        const __m512 col[4] = {t[0][j], t[1][j], t[2][j], t[3][j]};
        __m512 res[4];
        applyBt(col, res);
        for (int i = 0; i < 4; ++i)
          _mm512_mask_storeu_ps(out + (4 * i + j) * vPlane + tc, mask, res[i]);
      }
    }
#else
    for (int64_t tc = 0; tc < tw; ++tc) {
      float t[4][4];
      for (int i = 0; i < 4; ++i) {
        const float *row = top + i * width + 2 * tc;
        const float d[4] = {row[0], row[1], row[2], row[3]};
        applyBt(d, t[i]);
      }
      for (int j = 0; j < 4; ++j) {
        const float col[4] = {t[0][j], t[1][j], t[2][j], t[3][j]};
        float res[4];
        applyBt(col, res);
        for (int i = 0; i < 4; ++i)
          out[(4 * i + j) * vPlane + tc] = res[i];
      }
    }
#endif
  }
}

// ---------------------------------------------------------------------------------------------
// Output transform: the 2 x 2 tile A^T M A, written only where the output exists.

/// Rows of A^T applied to four values.
template <typename T> inline void applyAt(const T m[4], T out[2]) {
  const T mid = m[1] + m[2];
  out[0] = m[0] + mid;
  out[1] = m[1] - m[2] - m[3];
}

/// Output channel k of tile rows [tr0, tr1) from m[xi*mPlane + t] into its output plane.
void transformOutput(const Plan &p, const float *m, int64_t mPlane, int64_t tr0, int64_t tr1,
                     float *plane) {
  const kiln_conv2d_args &a = p.a;
  const int64_t tw = p.tileCols;
  for (int64_t tr = tr0; tr < tr1; ++tr) {
    const float *in = m + (tr - tr0) * tw;
    const int64_t oh = 2 * tr;
    const bool secondRow = oh + 1 < a.oh;
#ifdef __AVX512F__
    const __m512i lowHalf = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    const __m512i highHalf = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
    for (int64_t tc = 0; tc < tw; tc += kGroup) {
      const __mmask16 mask = firstLanes(tw - tc);
      __m512 s[4][2]; // A^T applied along each row of M: s[i][b]
      for (int i = 0; i < 4; ++i) {
        __m512 row[4];
        for (int j = 0; j < 4; ++j)
          row[j] = _mm512_maskz_loadu_ps(mask, in + (4 * i + j) * mPlane + tc);
        applyAt(row, s[i]);
      }
      const int64_t valid = a.ow - 2 * tc; // output columns from 2*tc on
      const __mmask16 lowMask = firstLanes(valid), highMask = firstLanes(valid - 16);
      for (int b = 0; b < 2 && (b == 0 || secondRow); ++b) {
        // y[b][0] and y[b][1]: output row oh + b, columns 2*(tc + lane) and 2*(tc + lane) + 1.
        const __m512 col0[4] = {s[0][0], s[1][0], s[2][0], s[3][0]};
        const __m512 col1[4] = {s[0][1], s[1][1], s[2][1], s[3][1]};
        __m512 y0[2], y1[2];
        applyAt(col0, y0);
        applyAt(col1, y1);
        float *out = plane + (oh + b) * a.ow + 2 * tc;
        _mm512_mask_storeu_ps(out, lowMask, _mm512_permutex2var_ps(y0[b], lowHalf, y1[b]));
        _mm512_mask_storeu_ps(out + 16, highMask, _mm512_permutex2var_ps(y0[b], highHalf, y1[b]));
      }
    }
#else
    for (int64_t tc = 0; tc < tw; ++tc) {
      float s[4][2];
      for (int i = 0; i < 4; ++i) {
        const float row[4] = {in[(4 * i) * mPlane + tc], in[(4 * i + 1) * mPlane + tc],
                              in[(4 * i + 2) * mPlane + tc], in[(4 * i + 3) * mPlane + tc]};
        applyAt(row, s[i]);
      }
      const float col0[4] = {s[0][0], s[1][0], s[2][0], s[3][0]};
      const float col1[4] = {s[0][1], s[1][1], s[2][1], s[3][1]};
      float y0[2], y1[2];
      applyAt(col0, y0);
      applyAt(col1, y1);
      for (int b = 0; b < 2 && (b == 0 || secondRow); ++b) {
        float *out = plane + (oh + b) * a.ow + 2 * tc;
        out[0] = y0[b];
        if (2 * tc + 1 < a.ow)
          out[1] = y1[b];
      }
    }
#endif
  }
}

// ---------------------------------------------------------------------------------------------
// One work item: image n, tile rows [tr0, tr1).

void runItem(const Plan &p, int64_t item) {
  const kiln_conv2d_args &a = p.a;
  // Channel parts outermost: with one part per thread, each thread reads only its part of U.
  const int64_t kPart = item / p.blocks(), block = item % p.blocks();
  const int64_t image0 = block / p.blocksPerImage * p.imagesPerBlock;
  const int64_t images = std::min(p.imagesPerBlock, a.n - image0);
  const int64_t tr0 = p.firstRow(block % p.blocksPerImage), tr1 = p.firstRow(block % p.blocksPerImage + 1);
  const int64_t kLo = p.channelBoundary(kPart), kHi = p.channelBoundary(kPart + 1);
  if (tr0 >= tr1 || kLo >= kHi || images <= 0)
    return;
  // Tile t of image image0 + i is column i*imageTiles + t of V and M.
  const int64_t imageTiles = (tr1 - tr0) * p.tileCols, tiles = images * imageTiles;
  const int64_t vPlane = a.c * tiles, mPlane = a.k * tiles;
  const int64_t maxTiles = p.maxTiles();
  const int64_t stripFloats = p.stripRows * p.stripWidth;
  float *v = itemScratch(static_cast<size_t>(kPoints * (a.c + a.k) * maxTiles + stripFloats + 32));
  float *m = v + kPoints * a.c * maxTiles;
  float *strip = m + kPoints * a.k * maxTiles;

  // V: channel by channel, through the strip (in L1); once per call and block on a thread.
  thread_local uint64_t transformedCall = 0;
  thread_local int64_t transformedBlock = -1;
  if (transformedCall != p.call || transformedBlock != block) {
    for (int64_t c = 0; c < a.c; ++c)
      for (int64_t i = 0; i < images; ++i) {
        fillStrip(p, a.x + ((image0 + i) * a.c + c) * a.h * a.w, tr0, tr1, strip);
        transformInput(p, strip, tr0, tr1, v + c * tiles + i * imageTiles, vPlane);
      }
    transformedCall = p.call, transformedBlock = block;
  }

  // M_xi = U_xi * V_xi: U_xi is K x C row-major (read in place), V_xi is C x T.
  for (int64_t xi = 0; xi < kPoints; ++xi) {
    const DenseSource weights(p.u + xi * p.uPlane, 1, a.c);
    const DenseSource tilesSource(v + xi * vPlane, tiles, 1);
    Product product;
    product.m = a.k;
    product.n = tiles;
    product.k = a.c;
    product.a = &weights;
    product.b = &tilesSource;
    product.c = m + xi * mPlane;
    product.ldc = tiles;
    computeRegion(product, kLo, kHi, 0, tiles);
  }

  // y, then the epilogue on each chunk of channels while it is in cache.
  const int64_t pixels = a.oh * a.ow;
  const int64_t col0 = 2 * tr0 * a.ow, col1 = std::min(2 * tr1, a.oh) * a.ow;
  for (int64_t i = 0; i < images; ++i) {
    const int64_t image = image0 + i;
    float *imageY = a.y + image * a.k * pixels;
    for (int64_t k0 = kLo; k0 < kHi; k0 += kEpilogueRows) {
      const int64_t rows = std::min(kEpilogueRows, kHi - k0);
      for (int64_t k = k0; k < k0 + rows; ++k)
        transformOutput(p, m + k * tiles + i * imageTiles, mPlane, tr0, tr1, imageY + k * pixels);
      if (a.epilogue)
        a.epilogue(a.epilogue_ctx, imageY + k0 * pixels + col0, pixels, image, k0, col0, rows, col1 - col0);
    }
  }
}

void runShare(void *ctx, int64_t begin, int64_t end) {
  const Plan &p = *static_cast<const Plan *>(ctx);
  for (int64_t part = begin; part < end; ++part)
    for (int64_t item = part * p.items() / p.threads; item < (part + 1) * p.items() / p.threads; ++item)
      runItem(p, item);
}

/// runShare with U of this thread's own: every thread transforms all the weights into its
/// Scratch::Conv (free on this path: no padded input is built) before its items.
void runShareWithOwnWeights(void *ctx, int64_t begin, int64_t end) {
  Plan own = *static_cast<const Plan *>(ctx);
  float *u = scratch(Scratch::Conv, static_cast<size_t>(kPoints * own.uPlane));
  transformWeights(own.a.weights, own.a.c, u, own.uPlane, 0, own.a.k);
  own.u = u;
  runShare(&own, begin, end);
}

struct SharedTransform {
  const Plan &plan;
  float *u;
};

void transformWeightsShare(void *ctx, int64_t begin, int64_t end) {
  const SharedTransform &t = *static_cast<const SharedTransform *>(ctx);
  const kiln_conv2d_args &a = t.plan.a;
  for (int64_t part = begin; part < end; ++part)
    transformWeights(a.weights, a.c, t.u, t.plan.uPlane, part * a.k / t.plan.threads,
                     (part + 1) * a.k / t.plan.threads);
}

void runItemRange(void *ctx, int64_t begin, int64_t end) {
  for (int64_t item = begin; item < end; ++item)
    runItem(*static_cast<const Plan *>(ctx), item);
}

/// All items, in parts claimed as the threads come free (items never repeat each other's
/// work: a thread's V serves all of its channel parts of a block).
void runItems(const kiln_rt *rt, Plan &plan) {
  if (plan.threads > 1 && plan.items() > 1)
    parallelForBalanced(rt, plan.items(), 1, runItemRange, &plan);
  else
    for (int64_t item = 0; item < plan.items(); ++item)
      runItem(plan, item);
}

} // namespace

bool winogradShape(const kiln_conv2d_args &a) {
  return a.r == 3 && a.s == 3 && a.stride_h == 1 && a.stride_w == 1 && a.dilation_h == 1 && a.dilation_w == 1 &&
         a.groups == 1;
}

bool useWinograd(const kiln_rt *rt, const kiln_conv2d_args &a) {
  (void)rt; // the measured gains do not yet justify a gate per thread count
  if (!winogradShape(a))
    return false;
  if (a.c < kMinChannels || a.k < kMinChannels || a.oh < kMinSide || a.ow < kMinSide)
    return false;
  // Every call transforms all the weights (16 x K x C floats written, 9 x K x C read) and every
  // block streams U again: with few tiles per call, deep layers lose (see the table above).
  const int64_t tiles = a.n * ceilDiv(a.oh, 2) * ceilDiv(a.ow, 2);
  const double macs = static_cast<double>(a.n) * static_cast<double>(a.k * a.c) * 9.0 * static_cast<double>(a.oh * a.ow);
  if (tiles < kMinTiles || macs < static_cast<double>(kMinMacs) || a.k * a.c > kMaxWeights)
    return false;
  return tiles * kTilesPerWeightRatio >= a.k * a.c;
}

void winogradConv(const kiln_rt *rt, const kiln_conv2d_args &a) {
  const int threads = threadsOf(rt);
  Plan plan = makePlan(a, threads);
  plan.call = nextCallNumber();
  if (a.weights_layout == KILN_CONV_WEIGHTS_WINOGRAD) { // U transformed at load
    plan.u = a.weights;
    runItems(rt, plan);
    return;
  }
  if (threads > 1 && plan.items() > 1 && plan.kParts == 1 && kPoints * a.k * a.c <= kOwnWeightsMaxFloats) {
    // Every thread reads all of U. Shared, half of it would be read from the other core, which
    // costs more than transforming small weights twice when the cores are on different L3s.
    rt->parallel_for(rt, threads, 1, runShareWithOwnWeights, &plan);
    return;
  }
  // U is shared by all threads, so it lives in the calling thread's scratch (the padded
  // input, the other user of Scratch::Conv, is not built on this path).
  float *u = scratch(Scratch::Conv, static_cast<size_t>(kPoints * plan.uPlane));
  SharedTransform transform{plan, u};
  if (threads > 1 && a.k >= threads)
    rt->parallel_for(rt, threads, 1, transformWeightsShare, &transform);
  else
    transformWeights(a.weights, a.c, u, plan.uPlane, 0, a.k);
  plan.u = u;
  runItems(rt, plan);
}

} // namespace kiln::runtime::kernels::detail

namespace kiln::runtime::kernels {

bool convUsesWinograd(const kiln_conv2d_args &args) { return detail::useWinograd(nullptr, args); }

int64_t winogradWeightFloats(int64_t k, int64_t c) { return detail::kPoints * detail::uPlaneOf(k, c); }

void packWinogradWeights(const float *weights, int64_t k, int64_t c, float *dst) {
  const int64_t plane = detail::uPlaneOf(k, c);
  // The padding between planes is never read; zero it so that the packed weight is all defined.
  std::fill(dst, dst + detail::kPoints * plane, 0.0f);
  detail::transformWeights(weights, c, dst, plane, 0, k);
}

} // namespace kiln::runtime::kernels
