// Winograd F(2x2, 3x3) and F(4x4, 3x3) for 3x3 stride-1 convolutions (Lavin & Gray, arXiv
// 1509.09308): each M x M output tile comes from an alpha x alpha input tile (alpha = M + 2)
// with alpha^2 multiplies per (input, output channel) instead of 9 M^2 (16 for 36, or 36 for
// 144), and the channel sums become alpha^2 GEMMs, one per point xi of the transformed tile:
//   U_xi (K x C) = (G g G^T)_xi          transformed weights, at load or per call
//   V_xi (C x T) = (B^T d B)_xi          transformed input tiles
//   M_xi (K x T) = U_xi * V_xi           the blocked driver, U read in place
//   y tile       = A^T M A               the output transform
// with, for F(2,3), B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1], G = [1 0 0; .5 .5 .5;
// .5 -.5 .5; 0 0 1], A^T = [1 1 1 0; 0 1 -1 -1], and F(4,3)'s matrices at Rules<4> below. The
// two variants share everything but the 1-D rules (Rules<M>) and how 16 tiles' values are
// gathered from and scattered to image rows (tileRowElements, storeTileRow).
//
// Accuracy, measured here on ResNet/VGG layers with |N(0,1)| inputs and N(0,1)/sqrt(9C) weights
// against a double reference, max error / max |y|: F(2,3) 3.2-3.4e-7 (C = 64), 4.4-5.8e-7
// (128), 5.8-6.8e-7 (256), 6.5-8.1e-7 (512), GEMM path 4.5-6.0e-7, so as accurate as direct
// summation (shared/notes/cpu-kernels.md, section 3); F(4,3) 3.2-3.8e-6 (64), 4.1-6.4e-6 (128),
// 6.3-9.3e-6 (256), 1.3e-5 (512), about ten times F(2,3)'s. The gate keeps F(4,3) to at most
// 256 channels; the seed models still match their float64 results within half the tolerance
// (ResNet-50 at rtol 5e-5, atol 5e-6: max abs error 2.67e-5, against 1.91e-5 with F(2,3) alone).
//
// Work items are blocks of tiles: a range of tile rows of one image, or several whole small
// images, with at least minBlockPixels of output (each block streams all of U, which for deep
// layers is far larger than V and M) and otherwise as many as keep V (alpha^2 x C x T) and
// M (alpha^2 x K x T) in L2. Items are split evenly over the threads; with fewer blocks than
// threads (than two per thread when U is transformed per call), the threads instead share
// every block phase by phase (runPhased). Inside an item everything runs on one thread:
// the input transform reads a zero-padded strip of the block's input rows (one channel at a
// time, so the strip lives in L1), which handles any padding and the partial tiles at the
// bottom and right; the alpha^2 GEMMs run through the blocked driver; the output transform
// writes only valid output pixels, and the epilogue then sees each image of the block in
// chunks of 16 channels over the block's contiguous output pixels, each element once, after it
// is final.
//
// U comes transformed when the model's weights are constant and this kernel alone reads them:
// the runtime transforms them once, at load (KILN_CONV_WEIGHTS_WINOGRAD_F2/_F4,
// packWinogradWeights).
// ResNet-50's (then F(2,3)) Winograd layers at one thread (Zen 4): 17.6-21.5 ms -> 15.4-17.0; at two threads
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
#include "runtime/kernels/Simd.h"

namespace kiln::runtime::kernels::detail {

namespace {

/// Points of F(M x M, 3x3): its (M + 2) x (M + 2) transformed tile.
constexpr int64_t pointsOf(int tile) { return (tile + 2) * (tile + 2); }
constexpr int64_t kGroup = 16;       // tiles (or channels) per vectorised transform step
constexpr int64_t kEpilogueRows = 16; // output channels per epilogue call
// Bytes of V and M per work item: half of Zen 5's 1 MiB L2 leaves room for the driver's packed
// panels and the weights streaming through.
constexpr int64_t kBlockBytes = int64_t{640} << 10;
// Output pixels per block, at least: 128 tiles of F(2,3); 128 of F(4,3), whose GEMMs ran
// faster on more tiles (wider B) than on V and M that fit L2 (kiln-gemm-bench --winograd,
// F(4,3) at 1 thread: 64 -> 64 at 56x56 0.82-0.91 ms with 512 pixels, 0.78-0.81 with 2048;
// 128 -> 128 at 28x28, 0.93-1.17 -> 0.74-0.78; 256 -> 256 at 56x56, 14.3 -> 11.7-12.9).
int64_t minBlockPixels(int tile) { return tile == 4 ? 2048 : 512; }
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
// So: at least 16 tiles and 2^17 weights (C x K), and at most 512 x 512 of them (U 16.8 MB,
// 16/9 of the plain weights); above that the rules for U transformed per call hold.
constexpr int64_t kMinTilesStoredU = 16;
constexpr int64_t kMinWeightsStoredU = int64_t{1} << 17, kMaxWeightsStoredU = int64_t{1} << 18;
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
// U is 16 x K x C floats in scratch: at most 64 MiB (1024 x 1024 channels); F(4,3)'s 36 x K x C
// at most 9.4 MB (kMaxWeightsF4).
constexpr int64_t kMaxWeights = int64_t{1} << 20;
// Threads that all read the whole of U each transform their own copy up to this size (U of a
// 64 x 64 layer: 256 KiB); larger U is transformed once, split over the threads.
constexpr int64_t kOwnWeightsMaxFloats = int64_t{1} << 16;
// With fewer blocks than this per thread, the call runs in phases (runPhased) instead of block
// by block. With U stored at load there is no transform to share, and whole blocks per thread
// won as soon as there is one each: ResNet-50's 3x3 128-channel 28x28 layers (2 blocks) at 2
// threads, 0.75-0.95 -> 0.68-0.79 ms (6 interleaved runs on Zen 4).
constexpr int64_t kPhasedBelow = 2, kPhasedBelowWithStoredU = 1;
// Input channels per unit of the phased input transform.
constexpr int64_t kPhasedChannels = 16;

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
  int tile;                       // M of F(M x M, 3x3): 2 or 4
  int64_t points;                 // (M + 2)^2
  const float *u;                 // `points` planes of K x C, uPlane floats apart
  int64_t uPlane;
  int64_t tileRows, tileCols;     // TH, TW
  int64_t groupCols;              // TW rounded up to kGroup
  int64_t imagesPerBlock, blocksPerImage, maxBlockRows;
  bool phased;                    // all blocks phase by phase (runPhased), not block by block
  int64_t stripWidth, stripRows;  // per channel, for the largest block
  int threads;

  int64_t blocks() const { return ceilDiv(a.n, imagesPerBlock) * blocksPerImage; }
  int64_t firstRow(int64_t block) const { return block * tileRows / blocksPerImage; }
  int64_t maxTiles() const { return imagesPerBlock * maxBlockRows * tileCols; }
  /// Floats of V, then M, of the largest block.
  int64_t blockFloats() const { return points * (a.c + a.k) * maxTiles(); }
  int64_t stripFloats() const { return stripRows * stripWidth; }
};

Plan makePlan(const kiln_conv2d_args &a, int threads, int tile) {
  Plan p{a, tile, pointsOf(tile), nullptr, uPlaneOf(a.k, a.c), ceilDiv(a.oh, tile), ceilDiv(a.ow, tile),
         0, 1, 1, 1, false, 0, 0, threads};
  p.groupCols = roundUp(p.tileCols, kGroup);
  // Tiles per block: what keeps V and M in L2, but at least minBlockPixels of output, since
  // every block streams all of U, which for deep layers is far larger than V and M.
  const int64_t bytesPerTile = p.points * (a.c + a.k) * int64_t{sizeof(float)};
  const int64_t rowsByCache = std::max<int64_t>(1, kBlockBytes / (bytesPerTile * p.tileCols));
  const int64_t target = std::max(rowsByCache * p.tileCols, minBlockPixels(tile) / (tile * tile));
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
    // Few blocks of a deep layer: the threads share every block, phase by phase.
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

void transformWeights(int tile, const float *weights, int64_t channels, float *u, int64_t plane, int64_t k0,
                      int64_t k1) {
  if (tile == 4)
    transformWeights<4>(weights, channels, u, plane, k0, k1);
  else
    transformWeights<2>(weights, channels, u, plane, k0, k1);
}

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

// ---------------------------------------------------------------------------------------------
// The three steps of a block: input transform, GEMMs, output transform.

/// Block `block` of a plan: images [image0, image0 + images) and tile rows [tr0, tr1) of each.
/// Tile t of image image0 + i is column i*imageTiles + t of its V and M.
struct Block {
  int64_t image0, images, tr0, tr1, imageTiles, tiles;

  Block(const Plan &p, int64_t block) {
    image0 = block / p.blocksPerImage * p.imagesPerBlock;
    images = std::min(p.imagesPerBlock, p.a.n - image0);
    tr0 = p.firstRow(block % p.blocksPerImage);
    tr1 = p.firstRow(block % p.blocksPerImage + 1);
    imageTiles = (tr1 - tr0) * p.tileCols;
    tiles = images * imageTiles;
  }
  bool empty() const { return tr0 >= tr1 || images <= 0; }
};

/// V of input channels [c0, c1) of a block (V_xi is C x T, planes C*T apart), one channel at a
/// time through the strip, which stays in L1.
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

/// M_xi = U_xi * V_xi for points [xi0, xi1), rows [k0, k1): U_xi is K x C row-major (read in
/// place), V_xi is C x T, M_xi is K x T.
void multiplyBlock(const Plan &p, const Block &b, int64_t xi0, int64_t xi1, int64_t k0, int64_t k1, const float *v,
                   float *m) {
  const kiln_conv2d_args &a = p.a;
  const int64_t vPlane = a.c * b.tiles, mPlane = a.k * b.tiles;
  for (int64_t xi = xi0; xi < xi1; ++xi) {
    const DenseSource weights(p.u + xi * p.uPlane, 1, a.c);
    const DenseSource tilesSource(v + xi * vPlane, b.tiles, 1);
    Product product;
    product.m = a.k;
    product.n = b.tiles;
    product.k = a.c;
    product.a = &weights;
    product.b = &tilesSource;
    product.c = m + xi * mPlane;
    product.ldc = b.tiles;
    computeRegion(product, k0, k1, 0, b.tiles);
  }
}

/// Output channels [k0, k1) of a block from M, and the epilogue on each chunk of kEpilogueRows
/// of them right after it is written, while it is in cache.
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

// ---------------------------------------------------------------------------------------------
// Block by block: each block one work item, all three steps on one thread.

void runItem(const Plan &p, int64_t block) {
  const Block b(p, block);
  if (b.empty())
    return;
  const int64_t maxTiles = p.maxTiles();
  float *v = itemScratch(static_cast<size_t>(p.blockFloats() + p.stripFloats() + 32));
  float *m = v + p.points * p.a.c * maxTiles;
  float *strip = m + p.points * p.a.k * maxTiles;
  transformBlockInput(p, b, 0, p.a.c, v, strip);
  multiplyBlock(p, b, 0, p.points, 0, p.a.k, v, m);
  transformBlockOutput(p, b, 0, p.a.k, m);
}

void runShare(void *ctx, int64_t begin, int64_t end) {
  const Plan &p = *static_cast<const Plan *>(ctx);
  for (int64_t part = begin; part < end; ++part)
    for (int64_t item = part * p.blocks() / p.threads; item < (part + 1) * p.blocks() / p.threads; ++item)
      runItem(p, item);
}

/// runShare with U of this thread's own: every thread transforms all the weights into its
/// Scratch::Conv (free on this path: no padded input is built) before its items.
void runShareWithOwnWeights(void *ctx, int64_t begin, int64_t end) {
  Plan own = *static_cast<const Plan *>(ctx);
  float *u = scratch(Scratch::Conv, static_cast<size_t>(own.points * own.uPlane));
  transformWeights(own.tile, own.a.weights, own.a.c, u, own.uPlane, 0, own.a.k);
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
    transformWeights(t.plan.tile, a.weights, a.c, t.u, t.plan.uPlane, part * a.k / t.plan.threads,
                     (part + 1) * a.k / t.plan.threads);
}

void runItemRange(void *ctx, int64_t begin, int64_t end) {
  for (int64_t item = begin; item < end; ++item)
    runItem(*static_cast<const Plan *>(ctx), item);
}

// ---------------------------------------------------------------------------------------------
// Phase by phase: with fewer blocks than threads, every thread takes part in every block. The
// input transforms of all blocks, split by input channels, then the GEMMs, split by point xi
// (each thread reads only its planes of U and packs each V_xi once), then the output
// transforms and epilogues, split by output channels; V and M of every block are shared. So no
// step is repeated, at the price of two more waits for the slowest thread and of each thread
// reading V and M that another wrote. (Splitting each block's output channels over the threads
// instead repeated its input transform on every thread and packed each V_xi once per part:
// ResNet-50's 3x3 256-channel 14x14 layer at 2 threads ran at 1.3 times its 1-thread speed.)

struct Phased {
  const Plan &plan;
  float *shared; // V, then M, of each block, plan.blockFloats() apart

  float *v(int64_t block) const { return shared + block * plan.blockFloats(); }
  float *m(int64_t block) const { return v(block) + plan.points * plan.a.c * plan.maxTiles(); }
  int64_t channelUnits() const { return ceilDiv(plan.a.c, kPhasedChannels); }
  int64_t outputUnits() const { return ceilDiv(plan.a.k, kEpilogueRows); }
};

void phasedInput(void *ctx, int64_t begin, int64_t end) {
  const Phased &ph = *static_cast<const Phased *>(ctx);
  float *strip = itemScratch(static_cast<size_t>(ph.plan.stripFloats() + 32));
  for (int64_t unit = begin; unit < end; ++unit) {
    const int64_t block = unit / ph.channelUnits(), c0 = unit % ph.channelUnits() * kPhasedChannels;
    transformBlockInput(ph.plan, Block(ph.plan, block), c0, std::min(ph.plan.a.c, c0 + kPhasedChannels),
                        ph.v(block), strip);
  }
}

void phasedMultiply(void *ctx, int64_t begin, int64_t end) {
  const Phased &ph = *static_cast<const Phased *>(ctx);
  for (int64_t unit = begin; unit < end; ++unit) {
    const int64_t block = unit / ph.plan.points, xi = unit % ph.plan.points;
    multiplyBlock(ph.plan, Block(ph.plan, block), xi, xi + 1, 0, ph.plan.a.k, ph.v(block), ph.m(block));
  }
}

void phasedOutput(void *ctx, int64_t begin, int64_t end) {
  const Phased &ph = *static_cast<const Phased *>(ctx);
  for (int64_t unit = begin; unit < end; ++unit) {
    const int64_t block = unit / ph.outputUnits(), k0 = unit % ph.outputUnits() * kEpilogueRows;
    transformBlockOutput(ph.plan, Block(ph.plan, block), k0, std::min(ph.plan.a.k, k0 + kEpilogueRows), ph.m(block));
  }
}

void runPhased(const kiln_rt *rt, const Plan &plan) {
  // In the calling thread's scratch: the workers use it only until this call returns.
  Phased ph{plan, scratch(Scratch::WinogradShared, static_cast<size_t>(plan.blocks() * plan.blockFloats()))};
  parallelForBalanced(rt, plan.blocks() * ph.channelUnits(), 1, phasedInput, &ph);
  parallelForBalanced(rt, plan.blocks() * plan.points, 1, phasedMultiply, &ph);
  parallelForBalanced(rt, plan.blocks() * ph.outputUnits(), 1, phasedOutput, &ph);
}

/// All blocks: phase by phase, or as items claimed as the threads come free.
void runItems(const kiln_rt *rt, Plan &plan) {
  if (plan.phased)
    runPhased(rt, plan);
  else if (plan.threads > 1 && plan.blocks() > 1)
    parallelForBalanced(rt, plan.blocks(), 1, runItemRange, &plan);
  else
    for (int64_t item = 0; item < plan.blocks(); ++item)
      runItem(plan, item);
}

} // namespace

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
  // F(4,3) where its tiles fit the image and its U stays moderate (see the second table).
  const int64_t tiles4 = a.n * ceilDiv(a.oh, 4) * ceilDiv(a.ow, 4);
  const bool fits = 5 * pointsOf(4) * tiles4 <= 3 * pointsOf(2) * tiles;
  return fits && tiles4 >= kMinTilesF4 && weights <= kMaxWeightsF4 ? 4 : 2;
}

int winogradTileOfLayout(int32_t weightsLayout) {
  switch (weightsLayout) {
  case KILN_CONV_WEIGHTS_WINOGRAD_F2:
    return 2;
  case KILN_CONV_WEIGHTS_WINOGRAD_F4:
    return 4;
  default:
    return 0;
  }
}

void winogradConv(const kiln_rt *rt, const kiln_conv2d_args &a, int tile) {
  const int threads = threadsOf(rt);
  Plan plan = makePlan(a, threads, tile);
  if (winogradTileOfLayout(a.weights_layout) == tile) { // U transformed at load
    plan.u = a.weights;
    runItems(rt, plan);
    return;
  }
  if (threads > 1 && plan.blocks() > 1 && !plan.phased && plan.points * a.k * a.c <= kOwnWeightsMaxFloats) {
    // Every thread reads all of U. Shared, half of it would be read from the other core, which
    // costs more than transforming small weights twice when the cores are on different L3s.
    rt->parallel_for(rt, threads, 1, runShareWithOwnWeights, &plan);
    return;
  }
  // U is shared by all threads, so it lives in the calling thread's scratch (the padded
  // input, the other user of Scratch::Conv, is not built on this path).
  float *u = scratch(Scratch::Conv, static_cast<size_t>(plan.points * plan.uPlane));
  SharedTransform transform{plan, u};
  if (threads > 1 && a.k >= threads)
    rt->parallel_for(rt, threads, 1, transformWeightsShare, &transform);
  else
    transformWeights(tile, a.weights, a.c, u, plan.uPlane, 0, a.k);
  plan.u = u;
  runItems(rt, plan);
}

} // namespace kiln::runtime::kernels::detail

namespace kiln::runtime::kernels {

int convWinogradTile(const kiln_conv2d_args &args, bool weightsStored) {
  return detail::winogradTile(args, weightsStored);
}

int64_t winogradWeightFloats(int64_t k, int64_t c, int tile) { return detail::pointsOf(tile) * detail::uPlaneOf(k, c); }

void packWinogradWeights(const float *weights, int64_t k, int64_t c, int tile, float *dst) {
  const int64_t plane = detail::uPlaneOf(k, c);
  // The padding between planes is never read; zero it so that the packed weight is all defined.
  std::fill(dst, dst + detail::pointsOf(tile) * plane, 0.0f);
  detail::transformWeights(tile, weights, c, dst, plane, 0, k);
}

} // namespace kiln::runtime::kernels
