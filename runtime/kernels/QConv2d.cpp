// kiln::runtime::kernels::qconv2d: an int8 2-D convolution as a product of the weights (rows:
// output channels, s8) and the input's pixels (columns: output pixels, u8), summed exactly in
// int32 on QTile.h's tile with the weights' words broadcast, dequantized to f32 in registers,
// then the epilogue (kiln_qconv2d_args).
//
// Per image and group, two steps, each split over the pool:
//  1. Planes: for each quad of input channels, kernel column kx and row phase (the rows a
//     stride of sh reads: row a of phase f is padded input row a*sh + f), the output pixels
//     OH x OW laid out as the output is, each holding the 4 channels' bytes that pixel reads
//     through column kx, the zero point where it reads padding (so padding adds nothing to
//     (x - zero) * w), s8 moved to u8 by flipping the sign bit (x's zero moves with it). Output
//     pixel j = oy*OW + ox reads tap (ky, kx) of quad q at plane(q, kx, ky*dh % sh) + 4 * (j +
//     (ky*dh / sh) * OW): the same offset for every pixel, so a tile of 64 consecutive pixels
//     reads each quad's 64 x 4 bytes as one run, in place (quadOffsets). This writes S copies of
//     the input (3 for 3x3), where an unfolding of every tap wrote R*S and interleaved them again
//     (VGG16 int8 spent 11% of its time there, and its 2-thread speed-up was 1.4x, on the three
//     barriers per chunk of pixels).
//  2. Products: one run of panels (64 pixels) by one block of output channels per work item,
//     each tile over all the quads, the zero point taken out with the weights' row sums (packed
//     with them at load, in the quads' order: channel quad, ky, kx), the scales per channel.
// Groups of fewer than kMinGroupRows output channels would leave those tiles nearly empty
// (MobileNetV2's depthwise layers ran at 1-12 GOP/s so). Depthwise layers have direct kernels
// of their own (QConv2dDepthwise*.cpp); other thin groups go to conv2d's grouped kernels, in f32
// on the centred integers x - zero and w. Both sum in f32 exactly: every product and partial sum
// is an integer below 2^24 in magnitude (detail::sumsExactInF32), so the sums equal the int32
// ones, bit for bit. Those paths read the weights in tap order (c, ky, kx), 4 taps a quad.
#include <algorithm>
#include <cstring>
#include <vector>

#include "runtime/kernels/ByteColumns.h" // ColumnGather, insideColumns, laneRange
#include "runtime/kernels/GemmDriver.h"  // parallelForIfWorth
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
using detail::InsideColumns;
using detail::insideColumns;
using detail::kPanelWidth;
#if defined(__AVX512BW__) && defined(__AVX512VBMI__)
using detail::laneRange;
#endif

constexpr int64_t kMinGroupRows = 8; // fewer output channels per group: through f32
// Step 1's planes are built on the threads from this many bytes on. Built on the calling
// thread alone, a 14 x 14 or 7 x 7 layer's (50-200 KB) left the other thread waiting; the pool's
// workers still spin from the layer before, so waking them costs far less than that. ResNet-50
// int8 at two threads, interleaved: 12.7 -> 12.1 ms with 16 KB instead of 256 KB (64 KB: the
// same within noise; MobileNetV2 3.9 -> 3.5-3.6).
constexpr int64_t kMinParallelPlaneBytes = int64_t{1} << 14;

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

const auto kQTiles = detail::makeTable<detail::QTileFn, detail::QConvTileOf>(detail::RowCounts{},
                                                                            detail::VectorCounts{});

/// Where a weight sits in one output channel's packed row: tap t (= ky*s + kx) of input
/// channel c of the group. In tap order, byte c*spatial + t, the row rounded up to whole quads
/// (the f32 and depthwise routes); in channel-quad order, the 4 channels of quad c/4 at tap t
/// side by side, ((c/4)*spatial + t)*4 + c%4 (the product tiles' order). Past the weights: 0.
struct RowOrder {
  bool channelQuads;
  int64_t channels, spatial;
  int64_t rowBytes() const {
    return channelQuads ? 4 * spatial * quadsOf(channels) : 4 * quadsOf(channels * spatial);
  }
  int64_t byteOf(int64_t c, int64_t t) const {
    return channelQuads ? ((c / 4) * spatial + t) * 4 + c % 4 : c * spatial + t;
  }
};

/// k rows of `from`'s order, fromRowBytes apart, as rows of `to`'s order, then the int32 sum of
/// each row (the zero point's correction).
void packRows(const int8_t *src, const RowOrder &from, int64_t fromRowBytes, int64_t k, const RowOrder &to,
              int8_t *dst) {
  const int64_t rowBytes = to.rowBytes();
  std::memset(dst, 0, static_cast<size_t>(k * rowBytes));
  int8_t *sums = dst + k * rowBytes;
  for (int64_t o = 0; o < k; ++o) {
    int32_t sum = 0;
    for (int64_t c = 0; c < to.channels; ++c)
      for (int64_t t = 0; t < to.spatial; ++t) {
        const int8_t value = src[o * fromRowBytes + from.byteOf(c, t)];
        dst[o * rowBytes + to.byteOf(c, t)] = value;
        sum += value;
      }
    std::memcpy(sums + o * static_cast<int64_t>(sizeof sum), &sum, sizeof sum);
  }
}

/// One call's shapes, and the image and group its steps are on.
struct QConvCall {
  const kiln_qconv2d_args &g;
  int64_t channels, quads, pixels, perGroup; // per group: C/groups, quads of a row, OH*OW, K/groups
  const int8_t *rows;                        // packed weights: K rows of 4*quads bytes
  const int32_t *rowSums;                    // then one sum per row
  uint8_t xZeroByte;                         // x's zero point as x stores it
  uint8_t flip;                              // 0x80 for s8 x
  int64_t planeRows = 0;                     // rows of each plane of step 1
  uint8_t *planes = nullptr;                 // step 1's planes
  const int64_t *quadOffsets = nullptr;      // each quad's plane offset for pixel 0
  int64_t image = 0, group = 0;
  int64_t blockRows = 0, rowBlocks = 0; // step 2's blocks of output channels (equalRowBlocks)
  int64_t runPanels = 0, runs = 0;      // and runs of panels
  int64_t planeBytes() const { return planeRows * g.ow * 4; }
};

const uint8_t *groupInput(const QConvCall &t) {
  const kiln_qconv2d_args &g = t.g;
  return static_cast<const uint8_t *>(g.x) + (t.image * g.c + t.group * t.channels) * g.h * g.w;
}

#if defined(__AVX512BW__) && defined(__AVX512VBMI__)
/// The byte masks of storeInterleaved's four stores for the first `bytes` of its 256.
struct InterleavedMasks {
  __mmask64 part[4];
  explicit InterleavedMasks(int64_t bytes) {
    for (int i = 0; i < 4; ++i)
      part[i] = laneRange(0, bytes - 64 * i);
  }
};

/// 64 pixels of 4 channels (a, b, c, d) as 64 x 4 bytes, pixel by pixel, the bytes `masks`
/// keeps stored: bytes within each 128-bit lane, then the lanes transposed.
void storeInterleaved(__m512i a, __m512i b, __m512i c, __m512i d, const InterleavedMasks &masks, uint8_t *out) {
  const __m512i abLow = _mm512_unpacklo_epi8(a, b), abHigh = _mm512_unpackhi_epi8(a, b);
  const __m512i cdLow = _mm512_unpacklo_epi8(c, d), cdHigh = _mm512_unpackhi_epi8(c, d);
  // Lane k of q[i] holds pixels 16k + 4i .. 16k + 4i + 3.
  const __m512i q0 = _mm512_unpacklo_epi16(abLow, cdLow), q1 = _mm512_unpackhi_epi16(abLow, cdLow);
  const __m512i q2 = _mm512_unpacklo_epi16(abHigh, cdHigh), q3 = _mm512_unpackhi_epi16(abHigh, cdHigh);
  // vpermt2q, not vshufi32x4, whose intrinsic trips GCC 12's -Wuninitialized.
  const __m512i lanes01 = _mm512_set_epi64(11, 10, 3, 2, 9, 8, 1, 0), lanes23 = _mm512_set_epi64(15, 14, 7, 6, 13, 12, 5, 4);
  const __m512i low = _mm512_set_epi64(11, 10, 9, 8, 3, 2, 1, 0), high = _mm512_set_epi64(15, 14, 13, 12, 7, 6, 5, 4);
  const __m512i t0 = _mm512_permutex2var_epi64(q0, lanes01, q1), t1 = _mm512_permutex2var_epi64(q2, lanes01, q3);
  const __m512i t2 = _mm512_permutex2var_epi64(q0, lanes23, q1), t3 = _mm512_permutex2var_epi64(q2, lanes23, q3);
  const __m512i out4[4] = {_mm512_permutex2var_epi64(t0, low, t1), _mm512_permutex2var_epi64(t0, high, t1),
                           _mm512_permutex2var_epi64(t2, low, t3), _mm512_permutex2var_epi64(t2, high, t3)};
  for (int i = 0; i < 4; ++i)
    if (masks.part[i])
      _mm512_mask_storeu_epi8(out + 64 * i, masks.part[i], out4[i]);
}
#endif

/// The rows of one plane: row a holds, for the ow output columns, the 4 bytes of channels
/// 4*quad .. +3 of input row a*stride_h + rowOffset (of the group's input x) at columns x0 +
/// ox*stride_w, the zero point outside the input or past the group's channels, flipped to u8.
void planeRows(const QConvCall &t, const uint8_t *x, int64_t quad, int64_t rowOffset, int64_t x0, uint8_t *out) {
  const kiln_qconv2d_args &g = t.g;
  auto channelRow = [&](int i, int64_t iy) -> const uint8_t * { // null: past the channels, or padding
    return 4 * quad + i < t.channels && iy >= 0 && iy < g.h ? x + ((4 * quad + i) * g.h + iy) * g.w : nullptr;
  };
#if defined(__AVX512BW__) && defined(__AVX512VBMI__)
  const __m512i zeros = _mm512_set1_epi8(static_cast<char>(t.xZeroByte)), flips = _mm512_set1_epi8(static_cast<char>(t.flip));
  for (int64_t ox0 = 0; ox0 < g.ow; ox0 += 64) {
    const detail::ColumnGather gather(x0 + ox0 * g.stride_w, g.stride_w, g.w);
    const InterleavedMasks masks(4 * (g.ow - ox0));
    for (int64_t a = 0; a < t.planeRows; ++a) {
      __m512i v[4];
      for (int i = 0; i < 4; ++i) {
        const uint8_t *row = channelRow(i, a * g.stride_h + rowOffset);
        v[i] = _mm512_xor_si512(row ? gather(row, zeros) : zeros, flips);
      }
      storeInterleaved(v[0], v[1], v[2], v[3], masks, out + 4 * (a * g.ow + ox0));
    }
  }
#else
  const InsideColumns inside = insideColumns(x0, g.stride_w, g.w, g.ow);
  for (int64_t a = 0; a < t.planeRows; ++a)
    for (int64_t ox = 0; ox < g.ow; ++ox)
      for (int i = 0; i < 4; ++i) {
        const uint8_t *row = channelRow(i, a * g.stride_h + rowOffset);
        const bool read = row && ox >= inside.first && ox < inside.last;
        out[4 * (a * g.ow + ox) + i] = (read ? row[x0 + ox * g.stride_w] : t.xZeroByte) ^ t.flip;
      }
#endif
}

#if defined(__AVX512BW__) && defined(__AVX512VBMI__)
/// A whole plane where the rows are contiguous in x and in the plane alike (strides 1, output
/// rows as wide as the input's): plane pixel j reads channel byte j + (x0 - pad_top * w), so
/// 64 pixels are one masked load per channel across row ends, where one load per row of 14
/// pixels made step 1 14% of ResNet-50 int8's time; then the columns that read left or right
/// of the row (|x0| of them) set to the zero point.
void flatPlane(const QConvCall &t, const uint8_t *x, int64_t quad, int64_t x0, uint8_t *out) {
  const kiln_qconv2d_args &g = t.g;
  const __m512i zeros = _mm512_set1_epi8(static_cast<char>(t.xZeroByte)), flips = _mm512_set1_epi8(static_cast<char>(t.flip));
  const int64_t pixels = t.planeRows * g.ow, shift = x0 - g.pad_top * g.w, size = g.h * g.w;
  for (int64_t j0 = 0; j0 < pixels; j0 += 64) {
    __m512i v[4];
    for (int i = 0; i < 4; ++i) {
      const int64_t at = j0 + shift; // channel byte of lane 0
      v[i] = 4 * quad + i < t.channels
                 ? _mm512_mask_loadu_epi8(zeros, laneRange(-at, size - at), x + (4 * quad + i) * size + at)
                 : zeros;
      v[i] = _mm512_xor_si512(v[i], flips);
    }
    storeInterleaved(v[0], v[1], v[2], v[3], InterleavedMasks(4 * (pixels - j0)), out + 4 * j0);
  }
  const InsideColumns inside = insideColumns(x0, 1, g.w, g.ow);
  if (inside.first == 0 && inside.last == g.ow)
    return;
  const uint8_t zero = t.xZeroByte ^ t.flip;
  for (int64_t a = 0; a < t.planeRows; ++a) {
    uint8_t *row = out + 4 * a * g.ow;
    std::memset(row, zero, static_cast<size_t>(4 * inside.first));
    std::memset(row + 4 * inside.last, zero, static_cast<size_t>(4 * (g.ow - inside.last)));
  }
}
#endif

/// Whether some kernel row reads row phase `phase` (step 1 leaves the others unwritten: a 1x1
/// convolution of stride 2 reads one phase of two).
bool phaseRead(const kiln_qconv2d_args &g, int64_t phase) {
  for (int64_t ky = 0; ky < g.r; ++ky)
    if (ky * g.dilation_h % g.stride_h == phase)
      return true;
  return false;
}

/// Step 1 for planes [begin, end): plane (quad, kx, phase) is plane (quad*S + kx)*sh + phase,
/// its row a at input row a*sh + phase - pad_top.
void planesOf(void *ctx, int64_t begin, int64_t end) {
  const QConvCall &t = *static_cast<const QConvCall *>(ctx);
  const kiln_qconv2d_args &g = t.g;
  const uint8_t *x = groupInput(t);
  for (int64_t plane = begin; plane < end; ++plane) {
    const int64_t phase = plane % g.stride_h, kx = plane / g.stride_h % g.s, quad = plane / g.stride_h / g.s;
    const int64_t x0 = kx * g.dilation_w - g.pad_left;
    uint8_t *out = t.planes + plane * t.planeBytes();
    if (!phaseRead(g, phase))
      continue;
#if defined(__AVX512BW__) && defined(__AVX512VBMI__)
    if (g.stride_h == 1 && g.stride_w == 1 && g.ow == g.w) {
      flatPlane(t, x, quad, x0, out);
      continue;
    }
#endif
    planeRows(t, x, quad, phase - g.pad_top, x0, out);
  }
}

/// Step 2: work item = one run of panels by one block of output channels, run-major, so that
/// items the pool hands out together share their pixels; within an item, the block's weights
/// stay in L2 while its panels pass (VGG16's 512-channel layers hold 2.4 MB of weights).
void productItems(void *ctx, int64_t begin, int64_t end) {
  const QConvCall &t = *static_cast<const QConvCall *>(ctx);
  const kiln_qconv2d_args &g = t.g;
  const int64_t rowBytes = 4 * t.quads, panels = ceilDiv(t.pixels, kPanelWidth);
  const int32_t zero = int32_t{static_cast<uint8_t>(t.xZeroByte ^ t.flip)};
  float scales[kMaxRows];
  alignas(64) float tile[kMaxRows * kPanelWidth]; // for tile_in_scratch
  for (int64_t item = begin; item < end; ++item) {
    const int64_t run = item / t.rowBlocks, row0 = item % t.rowBlocks * t.blockRows;
    const int64_t rowCount = std::min(t.blockRows, t.perGroup - row0);
    for (int64_t q = run * t.runPanels; q < std::min(panels, (run + 1) * t.runPanels); ++q) {
      const int64_t p0 = q * kPanelWidth, cols = std::min<int64_t>(kPanelWidth, t.pixels - p0);
      const int vectors = static_cast<int>(ceilDiv(cols, detail::kVector));
      const uint8_t *panel = t.planes + p0 * 4;
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
                                        rowBytes, panel, t.quadOffsets, t.rowSums + channel, scales, zero, c, ldc,
                                        cols, detail::hasPostOps(g.post) ? &post : nullptr,
                                        finishing ? &finish : nullptr);
        if (g.epilogue && !finishing)
          g.epilogue(g.epilogue_ctx, c, ldc, t.image, channel, p0, r, cols);
      }
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

namespace {

/// Which kernel a call runs on (see the top of the file); only Products reads channel quads.
enum class Route { DepthwiseBytes, Depthwise, ThroughFloats, Products };

Route routeOf(const kiln_qconv2d_args &g) {
  if (detail::qconvDepthwiseBytesShape(g))
    return Route::DepthwiseBytes;
  if (detail::qconvDepthwiseShape(g))
    return Route::Depthwise;
  if (g.k / g.groups < kMinGroupRows && detail::sumsExactInF32(g.c / g.groups * g.r * g.s))
    return Route::ThroughFloats;
  return Route::Products;
}

} // namespace

bool qconvChannelQuadRows(const kiln_qconv2d_args &g) { return routeOf(g) == Route::Products; }

int64_t qconvPackedBytes(int64_t k, int64_t channels, int64_t spatial, bool channelQuads) {
  return k * (RowOrder{channelQuads, channels, spatial}.rowBytes() + static_cast<int64_t>(sizeof(int32_t)));
}

void packQConvWeights(const int8_t *src, int64_t k, int64_t channels, int64_t spatial, bool channelQuads,
                      int8_t *dst) {
  packRows(src, RowOrder{false, channels, spatial}, channels * spatial, k, RowOrder{channelQuads, channels, spatial},
           dst);
}

void qconv2d(const kiln_rt *rt, const kiln_qconv2d_args *args) {
  if (!args || args->n <= 0 || args->c <= 0 || args->k <= 0 || args->groups <= 0 || args->c % args->groups != 0 ||
      args->k % args->groups != 0 || args->r <= 0 || args->s <= 0 || args->oh <= 0 || args->ow <= 0 ||
      args->stride_h <= 0 || args->stride_w <= 0 || args->dilation_h <= 0 || args->dilation_w <= 0 || !args->x ||
      !args->weights || !args->w_scales || !args->y || args->weights_packed < 0 || args->weights_packed > 2)
    return; // the ABI has no error channel; codegen never emits these
  const kiln_qconv2d_args &g = *args;
  const int64_t channels = g.c / g.groups, spatial = g.r * g.s, taps = channels * spatial, pixels = g.oh * g.ow;
  // The weights in the order this call's route reads (qconvChannelQuadRows), packed here into
  // the calling thread's scratch, which the workers only read, unless they came so.
  const Route route = routeOf(g);
  const bool channelQuads = route == Route::Products;
  const RowOrder order{channelQuads, channels, spatial};
  const int8_t *weights = g.weights;
  if (g.weights_packed != (channelQuads ? 2 : 1)) {
    const RowOrder given{g.weights_packed == 2, channels, spatial};
    auto *packed = reinterpret_cast<int8_t *>(detail::scratch(
        detail::Scratch::PackedB, static_cast<size_t>(ceilDiv(qconvPackedBytes(g.k, channels, spatial, channelQuads), 4))));
    packRows(g.weights, given, g.weights_packed ? given.rowBytes() : taps, g.k, order, packed);
    weights = packed;
  }
  const int64_t quads = order.rowBytes() / 4;
  if (route == Route::DepthwiseBytes && !g.epilogue) { // it finishes its outputs itself, in registers
    detail::qconvDepthwiseBytes(rt, g, weights, 4 * quads);
    return;
  }
  if (!channelQuads) {
    // These paths finish f32 tiles: the post ops (and addend and requantisation) run on each
    // as an epilogue.
    kiln_qconv2d_args f = g;
    detail::FinishEpilogue finish;
    detail::PostOpsEpilogue postOps;
    if (detail::finishesOutputs(g)) {
      finish = {g.post, true, g.addend, g.addend_q, g.y, g.quantized, g.k * pixels, pixels};
      f.epilogue = detail::FinishEpilogue::call, f.epilogue_ctx = &finish, f.tile_in_scratch = 1;
      f.post = kiln_post_ops{}, f.addend = nullptr, f.addend_q = kiln_quantized_addend{};
      f.quantized = kiln_quantized_output{};
    } else {
      detail::wrapPostOps(f.post, true, f.epilogue, f.epilogue_ctx, postOps);
    }
    if (route == Route::DepthwiseBytes)
      detail::qconvDepthwiseBytes(rt, f, weights, 4 * quads);
    else if (route == Route::Depthwise)
      detail::qconvDepthwise(rt, f, weights, 4 * quads);
    else
      qconvThroughFloats(rt, f, taps, weights, 4 * quads);
    return;
  }
  QConvCall t{g,       channels,
              quads,   pixels,
              g.k / g.groups,
              weights, reinterpret_cast<const int32_t *>(weights + g.k * 4 * quads),
              static_cast<uint8_t>(g.x_zero),
              static_cast<uint8_t>(g.x_signed ? 0x80 : 0)};
  // Step 1's planes: a row phase's rows reach the last output row's furthest kernel row. A
  // last vector of 16 pixels reads up to 15 pixels past the last plane's end.
  t.planeRows = g.oh + (g.r - 1) * g.dilation_h / g.stride_h;
  const int64_t planeCount = ceilDiv(channels, 4) * g.s * g.stride_h;
  const int64_t planesBytes = planeCount * t.planeBytes() + 4 * kPanelWidth;
  t.planes = reinterpret_cast<uint8_t *>(
      detail::scratch(detail::Scratch::Conv, static_cast<size_t>(ceilDiv(planesBytes, 4))));
  std::memset(t.planes + planeCount * t.planeBytes(), t.xZeroByte, 4 * kPanelWidth);
  static thread_local std::vector<int64_t> offsets;
  offsets.resize(static_cast<size_t>(quads));
  for (int64_t quad = 0; quad < ceilDiv(channels, 4); ++quad)
    for (int64_t ky = 0; ky < g.r; ++ky)
      for (int64_t kx = 0; kx < g.s; ++kx) {
        const int64_t plane = (quad * g.s + kx) * g.stride_h + ky * g.dilation_h % g.stride_h;
        offsets[static_cast<size_t>((quad * g.r + ky) * g.s + kx)] =
            plane * t.planeBytes() + ky * g.dilation_h / g.stride_h * g.ow * 4;
      }
  t.quadOffsets = offsets.data();
  // Step 2's items: blocks of output channels by runs of panels, about 32 of them (a run of
  // 16 panels at most), so that two threads share them out evenly as they come free.
  const detail::RowBlocks blocks = detail::equalRowBlocks(t.perGroup);
  t.rowBlocks = blocks.count, t.blockRows = blocks.rows;
  const int64_t panels = ceilDiv(pixels, kPanelWidth);
  t.runPanels = std::clamp<int64_t>(ceilDiv(panels * t.rowBlocks, 32), 1, 16);
  t.runs = ceilDiv(panels, t.runPanels);
  for (t.image = 0; t.image < g.n; ++t.image)
    for (t.group = 0; t.group < g.groups; ++t.group) {
      detail::parallelForIfWorth(rt, planeCount, planeCount * t.planeBytes(), kMinParallelPlaneBytes, planesOf, &t);
      detail::parallelForIfWorth(rt, t.runs * t.rowBlocks, t.perGroup * pixels * taps, int64_t{1} << 20,
                                 productItems, &t, true);
    }
}

} // namespace kiln::runtime::kernels
