// kiln::runtime::kernels::qconv2d: an int8 2-D convolution as a product of the weights (rows:
// output channels, s8) and the unfolded input (columns: output pixels, u8), summed exactly in
// int32 on QTile.h's tile with the weights' words broadcast, dequantized to f32 in registers,
// then the epilogue (kiln_qconv2d_args).
//
// Per image, group and chunk of pixels (sized to stay in L2), three steps, each split over the
// pool:
//  1. Unfold: one line of OH*OW bytes per tap d = (c, r, s) of the group, the input value each
//     output pixel reads through it, x's zero point where it reads padding (so padding adds
//     nothing to (x - zero) * w). A 1x1, stride-1, unpadded convolution reads x's channel rows
//     as its lines, without a copy.
//  2. Interleave: the lines into panels of 64 pixels, the taps in quads (4 bytes of a pixel
//     per lane, as vpdpbusd multiplies them), s8 moved to u8 by flipping the sign bit (x_zero
//     moves with it, leaving every x - zero as it was); work items of kItemQuads quads.
//  3. Products: one panel by one block of output channels per work item, each tile over all
//     the quads, the zero point taken out with the weights' row sums (packed with them at
//     load), the scales applied per output channel.
// Groups of fewer than kMinGroupRows output channels would leave those tiles nearly empty
// (MobileNetV2's depthwise layers ran at 1-12 GOP/s so). Depthwise layers have a direct kernel
// of their own (QConv2dDepthwise.cpp); other thin groups go to conv2d's grouped kernels, in f32
// on the centred integers x - zero and w. Both sum in f32 exactly: every product and partial sum
// is an integer below 2^24 in magnitude (detail::sumsExactInF32), so the sums equal the int32
// ones, bit for bit.
#include <algorithm>
#include <cstring>

#include "runtime/kernels/GemmDriver.h" // parallelForIfWorth
#include "runtime/kernels/GemmPack.h"   // scratch
#include "runtime/kernels/Kernels.h"
#include "runtime/kernels/PostOps.h" // tilePostOps, wrapPostOps
#include "runtime/kernels/QConv2dDepthwise.h"
#include "runtime/kernels/QTile.h"           // qTile, kMaxRows, kPanelWidth, makeTable
#include "runtime/kernels/QuantizedOutput.h" // FinishEpilogue, finishedTile

namespace kiln::runtime::kernels {

namespace {

using detail::kMaxRows;
using detail::quadsOf;
using detail::kPanelWidth;

constexpr int64_t kQuadBytes = 4 * kPanelWidth; // one quad of taps for a panel's 64 pixels
constexpr int64_t kItemQuads = 128;            // quads a step-2 work item interleaves (32 KB)
constexpr int64_t kMinGroupRows = 8;            // fewer output channels per group: through f32
constexpr int64_t kChunkBytes = 768 << 10;      // packed panels per chunk of pixels (see qconv2d)

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

const auto kQTiles = detail::makeTable<detail::QTileFn, detail::QConvTileOf>(detail::RowCounts{},
                                                                            detail::VectorCounts{});

/// One call's shapes, and the image and group its steps are on.
struct QConvCall {
  const kiln_qconv2d_args &g;
  int64_t taps, quads, pixels, perGroup;         // per group: D, ceil(D/4), OH*OW, K/groups
  const int8_t *rows;                            // packed weights: K rows of 4*quads bytes
  const int32_t *rowSums;                        // then one sum per row
  uint8_t xZeroByte;                             // x's zero point as x stores it
  uint8_t flip;                                  // 0x80 for s8 x
  const uint8_t *lines = nullptr;                // step 1's lines (or x's rows), lineStride apart
  int64_t lineStride = 0;
  uint8_t *unfolded = nullptr; // where step 1 writes
  bool shiftedLines = false;   // step 1 shifts whole planes (shiftedLine)
  uint8_t *packed = nullptr;   // where step 2 writes: the chunk's panels x quads x 256 bytes
  int64_t image = 0, group = 0;
  // The chunk of pixels the steps are on: panels [firstPanel, firstPanel + chunkPanels), whose
  // output rows [row0, row1) step 1 unfolds; lines[d * lineStride + i] is pixel lineOrigin + i.
  int64_t firstPanel = 0, chunkPanels = 0, row0 = 0, row1 = 0, lineOrigin = 0;
  int64_t blockRows = 0, rowBlocks = 0; // step 3's blocks of output channels (equalRowBlocks)
};

const uint8_t *groupInput(const QConvCall &t) {
  const kiln_qconv2d_args &g = t.g;
  const int64_t channels = g.c / g.groups;
  return static_cast<const uint8_t *>(g.x) + (t.image * g.c + t.group * channels) * g.h * g.w;
}

#if defined(__AVX512BW__) && defined(__AVX512VBMI__)
/// Bits [begin, end) of a 64-bit lane mask, clipped to [0, 64).
__mmask64 laneRange(int64_t begin, int64_t end) {
  begin = std::max<int64_t>(begin, 0), end = std::min<int64_t>(end, 64);
  if (end <= begin)
    return 0;
  const uint64_t upTo = end == 64 ? ~uint64_t{0} : (uint64_t{1} << end) - 1;
  return upTo & ~((uint64_t{1} << begin) - 1);
}
#endif

/// One output row of a tap's line: line[ox] = row[x0 + ox*stride] where that lies in [0, w),
/// `zero` elsewhere, for ox in [0, ow); [first, last) are the ox that read inside the row.
void unfoldRow(const uint8_t *row, int64_t x0, int64_t stride, int64_t w, int64_t ow, int64_t first, int64_t last,
               uint8_t zero, uint8_t *line) {
#if defined(__AVX512BW__) && defined(__AVX512VBMI__)
  // 64 outputs at a time: stride 1 as one load masked to the row, stride 2 as two loads whose
  // even bytes vpermt2b gathers; a masked lane never touches memory, so the padding needs no
  // branch. Other strides take the loop below.
  if (stride <= 2) {
    const __m512i zeros = _mm512_set1_epi8(static_cast<char>(zero));
    static const __m512i kEven = [] {
      alignas(64) uint8_t index[64];
      for (int i = 0; i < 64; ++i)
        index[i] = static_cast<uint8_t>(2 * i);
      return _mm512_load_si512(index);
    }();
    for (int64_t ox0 = 0; ox0 < ow; ox0 += 64) {
      const int64_t base = x0 + ox0 * stride; // the input column of lane 0
      __m512i v;
      if (stride == 1) {
        v = _mm512_maskz_loadu_epi8(laneRange(-base, w - base), row + base);
      } else {
        const __m512i low = _mm512_maskz_loadu_epi8(laneRange(-base, w - base), row + base);
        const __m512i high = _mm512_maskz_loadu_epi8(laneRange(-base - 64, w - base - 64), row + base + 64);
        v = _mm512_permutex2var_epi8(low, kEven, high);
      }
      v = _mm512_mask_mov_epi8(zeros, laneRange(first - ox0, last - ox0), v);
      _mm512_mask_storeu_epi8(line + ox0, laneRange(0, ow - ox0), v);
    }
    return;
  }
#endif
  std::memset(line, zero, static_cast<size_t>(first));
  for (int64_t ox = first; ox < last; ++ox)
    line[ox] = row[x0 + ox * stride];
  std::memset(line + last, zero, static_cast<size_t>(ow - last));
}

/// A tap's line where the output rows are as wide as the input's and the strides are 1: the
/// plane itself shifted by the tap's offset, copied in one piece, then the columns and rows it
/// reads from padding set to the zero point (with the masked row copies alone, ResNet-50 int8
/// took 33.7 ms at one thread; with this, 32.1).
void shiftedLine(const QConvCall &t, const uint8_t *plane, int64_t y0, int64_t x0, int64_t first, int64_t last,
                 uint8_t *line) {
  const kiln_qconv2d_args &g = t.g;
  const int64_t base = t.row0 * g.ow + y0 * g.w + x0; // line[i] = plane[base + i]
  const int64_t count = (t.row1 - t.row0) * g.ow;
  // The outputs whose source lies inside the plane, [from, to): the rest is padding.
  const int64_t from = std::clamp<int64_t>(-base, 0, count), to = std::clamp<int64_t>(g.h * g.w - base, from, count);
  std::memset(line, t.xZeroByte, static_cast<size_t>(from));
  std::memcpy(line + from, plane + base + from, static_cast<size_t>(to - from));
  std::memset(line + to, t.xZeroByte, static_cast<size_t>(count - to));
  // Rows reading above or below the plane, and columns reading left or right of it.
  const int64_t rowFirst = std::clamp<int64_t>(-y0, t.row0, t.row1);
  const int64_t rowLast = std::clamp<int64_t>(g.h - y0, rowFirst, t.row1);
  std::memset(line, t.xZeroByte, static_cast<size_t>((rowFirst - t.row0) * g.ow));
  std::memset(line + (rowLast - t.row0) * g.ow, t.xZeroByte, static_cast<size_t>((t.row1 - rowLast) * g.ow));
  if (first > 0 || last < g.ow)
    for (int64_t oy = rowFirst; oy < rowLast; ++oy) {
      uint8_t *row = line + (oy - t.row0) * g.ow;
      for (int64_t ox = 0; ox < first; ++ox)
        row[ox] = t.xZeroByte;
      for (int64_t ox = last; ox < g.ow; ++ox)
        row[ox] = t.xZeroByte;
    }
}

/// Step 1 for taps [begin, end).
void unfoldTaps(void *ctx, int64_t begin, int64_t end) {
  QConvCall &t = *static_cast<QConvCall *>(ctx);
  const kiln_qconv2d_args &g = t.g;
  const uint8_t *x = groupInput(t);
  for (int64_t d = begin; d < end; ++d) {
    const int64_t c = d / (g.r * g.s), ky = d / g.s % g.r, kx = d % g.s;
    const uint8_t *plane = x + c * g.h * g.w;
    uint8_t *line = t.unfolded + d * t.lineStride;
    const int64_t x0 = kx * g.dilation_w - g.pad_left;
    // The output columns whose input column lies inside x: [first, last).
    const int64_t first = x0 >= 0 ? 0 : std::min(g.ow, ceilDiv(-x0, g.stride_w));
    const int64_t last = std::max(first, std::min(g.ow, x0 >= g.w ? 0 : ceilDiv(g.w - x0, g.stride_w)));
    if (t.shiftedLines) {
      shiftedLine(t, plane, ky * g.dilation_h - g.pad_top, x0, first, last, line);
      continue;
    }
    for (int64_t oy = t.row0; oy < t.row1; ++oy, line += g.ow) {
      const int64_t iy = oy * g.stride_h + ky * g.dilation_h - g.pad_top;
      if (iy < 0 || iy >= g.h)
        unfoldRow(plane, x0, g.stride_w, g.w, g.ow, 0, 0, t.xZeroByte, line); // all padding
      else
        unfoldRow(plane + iy * g.w, x0, g.stride_w, g.w, g.ow, first, last, t.xZeroByte, line);
    }
  }
}

/// 16 pixels of 4 lines as 16 x 4 bytes, pixel by pixel.
void interleave16(const uint8_t *const lines[4], int64_t at, uint8_t flip, uint8_t *out) {
#ifdef __SSE2__
  const __m128i flips = _mm_set1_epi8(static_cast<char>(flip));
  __m128i v[4];
  for (int t = 0; t < 4; ++t)
    v[t] = _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i *>(lines[t] + at)), flips);
  const __m128i abLow = _mm_unpacklo_epi8(v[0], v[1]), abHigh = _mm_unpackhi_epi8(v[0], v[1]);
  const __m128i cdLow = _mm_unpacklo_epi8(v[2], v[3]), cdHigh = _mm_unpackhi_epi8(v[2], v[3]);
  auto *to = reinterpret_cast<__m128i *>(out);
  _mm_storeu_si128(to + 0, _mm_unpacklo_epi16(abLow, cdLow));
  _mm_storeu_si128(to + 1, _mm_unpackhi_epi16(abLow, cdLow));
  _mm_storeu_si128(to + 2, _mm_unpacklo_epi16(abHigh, cdHigh));
  _mm_storeu_si128(to + 3, _mm_unpackhi_epi16(abHigh, cdHigh));
#else
  for (int p = 0; p < 16; ++p)
    for (int t = 0; t < 4; ++t)
      out[4 * p + t] = lines[t][at + p] ^ flip;
#endif
}

/// Step 2, work item = kItemQuads quads of one of the chunk's panels: a 7 x 7 layer has a
/// single panel, which ResNet-50's 512-channel layers interleaved on one thread while the
/// other waited.
void interleavePanels(void *ctx, int64_t begin, int64_t end) {
  QConvCall &t = *static_cast<QConvCall *>(ctx);
  alignas(64) uint8_t edge[4][kPanelWidth]; // a last panel's lines, padded to 64 pixels
  static const uint8_t kZeros[kPanelWidth] = {};
  const int64_t slices = ceilDiv(t.quads, kItemQuads);
  for (int64_t item = begin; item < end; ++item) {
    const int64_t q = item / slices, firstQuad = item % slices * kItemQuads;
    const int64_t p0 = (t.firstPanel + q) * kPanelWidth, cols = std::min<int64_t>(kPanelWidth, t.pixels - p0);
    uint8_t *out = t.packed + (q * t.quads + firstQuad) * kQuadBytes;
    const uint8_t *chunkLines = t.lines + (p0 - t.lineOrigin);
    for (int64_t quad = firstQuad; quad < std::min(t.quads, firstQuad + kItemQuads); ++quad, out += kQuadBytes) {
      const uint8_t *lines[4];
      for (int i = 0; i < 4; ++i) {
        const int64_t d = 4 * quad + i;
        if (d >= t.taps) { // its weights are 0
          lines[i] = kZeros;
        } else if (cols == kPanelWidth) { // read in place
          lines[i] = chunkLines + d * t.lineStride;
        } else {
          std::memcpy(edge[i], chunkLines + d * t.lineStride, static_cast<size_t>(cols));
          std::memset(edge[i] + cols, 0, static_cast<size_t>(kPanelWidth - cols));
          lines[i] = edge[i];
        }
      }
      for (int64_t at = 0; at < kPanelWidth; at += 16)
        interleave16(lines, at, t.flip, out + 4 * at);
    }
  }
}

/// Step 3: work item = one panel of the chunk by one block of output channels
/// (detail::equalRowBlocks), panel-major, so that the items a thread runs in a row share their
/// panel; the pool hands them out as threads come free (VGG16's 128-channel layers, split
/// statically as 96 + 32, ran 1.25x faster on two threads, not 2x).
void productItems(void *ctx, int64_t begin, int64_t end) {
  const QConvCall &t = *static_cast<const QConvCall *>(ctx);
  const kiln_qconv2d_args &g = t.g;
  const int64_t rowBytes = 4 * t.quads;
  const int32_t zero = int32_t{static_cast<uint8_t>(t.xZeroByte ^ t.flip)};
  float scales[kMaxRows];
  alignas(64) float tile[kMaxRows * kPanelWidth]; // for tile_in_scratch
  for (int64_t item = begin; item < end; ++item) {
    const int64_t q = item / t.rowBlocks, row0 = item % t.rowBlocks * t.blockRows;
    const int64_t rowCount = std::min(t.blockRows, t.perGroup - row0);
    const int64_t p0 = (t.firstPanel + q) * kPanelWidth, cols = std::min<int64_t>(kPanelWidth, t.pixels - p0);
    const int vectors = static_cast<int>(ceilDiv(cols, detail::kVector));
    const uint8_t *panel = t.packed + q * t.quads * kQuadBytes;
    for (int64_t i = 0; i < rowCount; i += kMaxRows) {
      const int r = static_cast<int>(std::min<int64_t>(kMaxRows, rowCount - i));
      const int64_t channel = t.group * t.perGroup + row0 + i; // of all K
      for (int j = 0; j < r; ++j)
        scales[j] = g.x_scale * g.w_scales[g.w_per_channel ? channel + j : 0];
      const bool scratchTile = g.tile_in_scratch && g.epilogue;
      const int64_t at = (t.image * g.k + channel) * t.pixels + p0; // the tile's first output
      float *c = scratchTile ? tile : g.y + at;
      const int64_t ldc = scratchTile ? kPanelWidth : t.pixels;
      const detail::TilePostOps post = detail::tilePostOps(g.post, true, channel, p0);
      const detail::FinishedTile finish = detail::finishedTile(g, g.y, at, t.pixels);
      const bool finishing = detail::finishesOutputs(g);
      kQTiles.fns[r - 1][vectors - 1](t.quads, reinterpret_cast<const uint8_t *>(t.rows + channel * rowBytes),
                                      rowBytes, panel, t.rowSums + channel, scales, zero, c, ldc, cols,
                                      detail::hasPostOps(g.post) ? &post : nullptr, finishing ? &finish : nullptr);
      if (g.epilogue && !finishing)
        g.epilogue(g.epilogue_ctx, c, ldc, t.image, channel, p0, r, cols);
    }
  }
}

/// conv2d's epilogue for a convolution of centred integers: each output channel's scale, then
/// qconv2d's own epilogue.
void scaleThenEpilogue(void *ctx, float *tile, int64_t ld, int64_t batch, int64_t row0, int64_t col0, int64_t rows,
                       int64_t cols) {
  const kiln_qconv2d_args &g = *static_cast<const kiln_qconv2d_args *>(ctx);
  for (int64_t i = 0; i < rows; ++i) {
    const float scale = g.x_scale * g.w_scales[g.w_per_channel ? row0 + i : 0];
    float *row = tile + i * ld;
    for (int64_t j = 0; j < cols; ++j)
      row[j] = row[j] * scale;
  }
  if (g.epilogue)
    g.epilogue(g.epilogue_ctx, tile, ld, batch, row0, col0, rows, cols);
}

/// Centring the input for the f32 route: x - zero as floats, channel planes [begin, end).
struct CentredInput {
  const kiln_qconv2d_args &g;
  float *out;
};

void centreChannels(void *ctx, int64_t begin, int64_t end) {
  const CentredInput &c = *static_cast<const CentredInput *>(ctx);
  const int64_t plane = c.g.h * c.g.w;
  detail::centreBytes(static_cast<const uint8_t *>(c.g.x) + begin * plane, (end - begin) * plane, c.g.x_signed,
                      c.g.x_zero, c.out + begin * plane);
}

/// The convolution through conv2d in f32 on exact integers (see the top of the file); weights
/// are the packed rows, rowBytes apart.
void qconvThroughFloats(const kiln_rt *rt, const kiln_qconv2d_args &g, int64_t taps, const int8_t *rows,
                        int64_t rowBytes) {
  const int64_t inputs = g.n * g.c * g.h * g.w;
  float *floats = detail::scratch(detail::Scratch::QConvFloats, static_cast<size_t>(inputs + g.k * taps));
  CentredInput centred{g, floats};
  detail::parallelForIfWorth(rt, g.n * g.c, inputs, int64_t{1} << 18, centreChannels, &centred);
  float *weights = floats + inputs;
  for (int64_t o = 0; o < g.k; ++o)
    for (int64_t d = 0; d < taps; ++d)
      weights[o * taps + d] = static_cast<float>(rows[o * rowBytes + d]);
  kiln_conv2d_args a{};
  a.n = g.n, a.c = g.c, a.h = g.h, a.w = g.w, a.k = g.k, a.r = g.r, a.s = g.s, a.oh = g.oh, a.ow = g.ow;
  a.stride_h = g.stride_h, a.stride_w = g.stride_w, a.pad_top = g.pad_top, a.pad_left = g.pad_left;
  a.dilation_h = g.dilation_h, a.dilation_w = g.dilation_w, a.groups = g.groups;
  a.x = floats, a.weights = weights, a.y = g.y;
  a.epilogue = scaleThenEpilogue, a.epilogue_ctx = const_cast<kiln_qconv2d_args *>(&g);
  a.exact = 1; // plain sums of products: no transform may round them
  conv2d(rt, &a);
}

} // namespace

int64_t qconvPackedBytes(int64_t k, int64_t taps) {
  return k * (4 * quadsOf(taps) + static_cast<int64_t>(sizeof(int32_t)));
}

void packQConvWeights(const int8_t *src, int64_t k, int64_t taps, int8_t *dst) {
  const int64_t rowBytes = 4 * quadsOf(taps);
  int8_t *sums = dst + k * rowBytes;
  for (int64_t o = 0; o < k; ++o) {
    int32_t sum = 0;
    for (int64_t d = 0; d < rowBytes; ++d) {
      const int8_t value = d < taps ? src[o * taps + d] : int8_t{0};
      dst[o * rowBytes + d] = value;
      sum += value;
    }
    std::memcpy(sums + o * static_cast<int64_t>(sizeof sum), &sum, sizeof sum);
  }
}

void qconv2d(const kiln_rt *rt, const kiln_qconv2d_args *args) {
  if (!args || args->n <= 0 || args->c <= 0 || args->k <= 0 || args->groups <= 0 || args->c % args->groups != 0 ||
      args->k % args->groups != 0 || args->r <= 0 || args->s <= 0 || args->oh <= 0 || args->ow <= 0 ||
      args->stride_h <= 0 || args->stride_w <= 0 || args->dilation_h <= 0 || args->dilation_w <= 0 || !args->x ||
      !args->weights || !args->w_scales || !args->y)
    return; // the ABI has no error channel; codegen never emits these
  const kiln_qconv2d_args &g = *args;
  const int64_t taps = g.c / g.groups * g.r * g.s, pixels = g.oh * g.ow;
  const int8_t *weights = g.weights;
  if (!g.weights_packed) { // packed here, into the calling thread's scratch, which the workers only read
    auto *packed = reinterpret_cast<int8_t *>(
        detail::scratch(detail::Scratch::PackedB, static_cast<size_t>(ceilDiv(qconvPackedBytes(g.k, taps), 4))));
    packQConvWeights(g.weights, g.k, taps, packed);
    weights = packed;
  }
  const int64_t quads = quadsOf(taps), panels = ceilDiv(pixels, kPanelWidth);
  const bool bytes = detail::qconvDepthwiseBytesShape(g), depthwise = !bytes && detail::qconvDepthwiseShape(g);
  if (bytes && !g.epilogue) { // it finishes its outputs itself, in registers
    detail::qconvDepthwiseBytes(rt, g, weights, 4 * quads);
    return;
  }
  if (bytes || depthwise || (g.k / g.groups < kMinGroupRows && detail::sumsExactInF32(taps))) {
    // These paths finish f32 tiles: the post ops (and addend and requantisation) run on each
    // as an epilogue.
    kiln_qconv2d_args f = g;
    detail::FinishEpilogue finish;
    detail::PostOpsEpilogue postOps;
    if (detail::finishesOutputs(g)) {
      finish = {g.post, true, g.addend, g.y, g.quantized, g.k * pixels, pixels};
      f.epilogue = detail::FinishEpilogue::call, f.epilogue_ctx = &finish, f.tile_in_scratch = 1;
      f.post = kiln_post_ops{}, f.addend = nullptr, f.quantized = kiln_quantized_output{};
    } else {
      detail::wrapPostOps(f.post, true, f.epilogue, f.epilogue_ctx, postOps);
    }
    if (bytes)
      detail::qconvDepthwiseBytes(rt, f, weights, 4 * quads);
    else if (depthwise)
      detail::qconvDepthwise(rt, f, weights, 4 * quads);
    else
      qconvThroughFloats(rt, f, taps, weights, 4 * quads);
    return;
  }
  const uint8_t zeroByte = static_cast<uint8_t>(g.x_zero);
  QConvCall t{g,          taps,     quads, pixels, g.k / g.groups, weights,
              reinterpret_cast<const int32_t *>(weights + g.k * 4 * quads), zeroByte,
              static_cast<uint8_t>(g.x_signed ? 0x80 : 0)};
  const bool direct = g.r == 1 && g.s == 1 && g.stride_h == 1 && g.stride_w == 1 && g.pad_top == 0 &&
                      g.pad_left == 0 && g.oh == g.h && g.ow == g.w;
  // Chunks of panels whose packed quads take about kChunkBytes (the unfolded lines as much
  // again), so that each step reads what the one before wrote from L2, not from memory (VGG16's
  // 224 x 224 layers unfold 29 MB whole).
  const int64_t chunkPanels = std::clamp<int64_t>(kChunkBytes / (quads * kQuadBytes), 1, panels);
  const int64_t chunkRows = std::min(g.oh, ceilDiv(chunkPanels * kPanelWidth, g.ow) + 1);
  if (!direct)
    t.unfolded = reinterpret_cast<uint8_t *>(
        detail::scratch(detail::Scratch::Conv, static_cast<size_t>(ceilDiv(taps * chunkRows * g.ow, 4))));
  t.packed = reinterpret_cast<uint8_t *>(
      detail::scratch(detail::Scratch::SharedB, static_cast<size_t>(chunkPanels * quads * kQuadBytes / 4)));
  t.lineStride = direct ? g.h * g.w : chunkRows * g.ow;
  t.shiftedLines = g.stride_h == 1 && g.stride_w == 1 && g.ow == g.w;
  const detail::RowBlocks blocks = detail::equalRowBlocks(t.perGroup);
  t.rowBlocks = blocks.count, t.blockRows = blocks.rows;
  for (t.image = 0; t.image < g.n; ++t.image)
    for (t.group = 0; t.group < g.groups; ++t.group)
      for (t.firstPanel = 0; t.firstPanel < panels; t.firstPanel += chunkPanels) {
        t.chunkPanels = std::min(chunkPanels, panels - t.firstPanel);
        const int64_t p0 = t.firstPanel * kPanelWidth, p1 = std::min(pixels, p0 + t.chunkPanels * kPanelWidth);
        if (direct) {
          t.lines = groupInput(t), t.lineOrigin = 0;
        } else {
          t.row0 = p0 / g.ow, t.row1 = ceilDiv(p1, g.ow);
          t.lines = t.unfolded, t.lineOrigin = t.row0 * g.ow;
          detail::parallelForIfWorth(rt, taps, taps * (p1 - p0), int64_t{1} << 18, unfoldTaps, &t);
        }
        detail::parallelForIfWorth(rt, t.chunkPanels * ceilDiv(quads, kItemQuads), t.chunkPanels * quads * kQuadBytes,
                                   int64_t{1} << 18, interleavePanels, &t);
        detail::parallelForIfWorth(rt, t.chunkPanels * t.rowBlocks, t.perGroup * (p1 - p0) * taps, int64_t{1} << 20,
                                   productItems, &t, true);
      }
}

} // namespace kiln::runtime::kernels
