// qconv2d's depthwise layers summed in int32 on VNNI straight from the bytes: per image and
// channel, the u8 plane is copied into a padded plane of the calling thread (x's zero point in
// the padding, so that padding adds nothing to (x - zero) * w), and for each output row, 16
// outputs per vector, each kernel row's taps go four at a time to one vpdpbusd: vpermt2b
// gathers, for lane ox, the four input bytes its taps (kx..kx+3) read at any column stride
// and dilation, and the channel's four weights are broadcast. The zero point comes out per
// channel as zero * sum(w). The int32 sums are scaled to f32 and finished in registers as the
// product tiles finish theirs (post ops, residual, requantisation: QuantizedOutput.h), or
// handed to the epilogue as the f32 route's (QConv2dDepthwise.cpp) are, bit for bit.
// MobileNetV2's int8 depthwise layers went through f32 (centred planes, or conv2d on the whole
// centred input at stride 2) and took half its int8 time.
#include <algorithm>
#include <cstring>
#include <vector>

#include "runtime/kernels/GemmDriver.h" // parallelForIfWorth
#include "runtime/kernels/GemmPack.h"   // scratch
#include "runtime/kernels/QConv2dDepthwise.h"
#include "runtime/kernels/QuantizedOutput.h" // finishLanes, FinishedTile
#include "runtime/kernels/Simd.h"            // <immintrin.h>

namespace kiln::runtime::kernels::detail {

namespace {

constexpr int64_t kLanes = 16;   // outputs per vector
constexpr int64_t kWindow = 128; // bytes vpermt2b gathers from: two 64-byte loads
constexpr int64_t kSlack = 2 * kWindow; // readable bytes past the plane: a last window's overrun

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/// The bytes a vector of 16 outputs reads of one kernel row, from its first output's first tap.
int64_t windowOf(const kiln_qconv2d_args &g) { return (kLanes - 1) * g.stride_w + (g.s - 1) * g.dilation_w + 1; }

struct BytesCall {
  const kiln_qconv2d_args &g;
  const int8_t *weights; // row c holds channel c's taps, rowBytes apart
  int64_t rowBytes;
  int64_t quadsPerRow;        // ceil(s / 4): the quads a kernel row's taps fill
  int64_t paddedH, planeW;    // the padded plane: paddedH rows of planeW bytes (and kSlack more)
  uint8_t zeroByte, flip;     // x's zero point as stored; 0x80 for s8 x (moved to u8)
  int32_t zero;               // the zero point of the u8 values vpdpbusd multiplies
#if defined(__AVX512VBMI__) && defined(__AVX512VNNI__)
  __m512i gather[4];          // per quad of a kernel row: lane l's 4 bytes' offsets
  // Narrow planes (ow <= kLanes) as runs of 16 outputs of the flattened output plane, which
  // span output rows: per run, where its first output's window starts in the plane, and per
  // run and quad, lane l's offsets from there (runs x quadsPerRow vectors).
  struct alignas(64) Gather {
    uint8_t offsets[64];
  };
  std::vector<int64_t> runStarts;
  std::vector<Gather> runGathers;
#endif
};

/// Fills the padding of the calling thread's plane with the zero point: the same for every
/// channel, so once per call of bytesItems; paddedPlane then writes only the input's bytes.
void padPlane(const BytesCall &t, uint8_t *plane) {
  std::memset(plane, static_cast<uint8_t>(t.zeroByte ^ t.flip), static_cast<size_t>(t.paddedH * t.planeW + kSlack));
}

/// The padded u8 plane of (image, channel): plane[y * planeW + j] is padded row y, column j
/// (the padding as padPlane left it).
void paddedPlane(const BytesCall &t, int64_t image, int64_t channel, uint8_t *plane) {
  const kiln_qconv2d_args &g = t.g;
  const auto *x = static_cast<const uint8_t *>(g.x) + (image * g.c + channel) * g.h * g.w;
  for (int64_t iy = 0; iy < g.h; ++iy) {
    uint8_t *row = plane + (iy + g.pad_top) * t.planeW + g.pad_left;
    if (t.flip) {
      for (int64_t ix = 0; ix < g.w; ++ix)
        row[ix] = x[iy * g.w + ix] ^ t.flip;
    } else {
      std::memcpy(row, x + iy * g.w, static_cast<size_t>(g.w));
    }
  }
}

#if defined(__AVX512VBMI__) && defined(__AVX512VNNI__)
/// Where one channel's scaled sums go: its f32 plane `out` (the epilogue then runs on it), or,
/// when the call asks for post ops, an addend or requantisation and gives no epilogue,
/// finished in registers into `finish` (element j of the plane: the bytes of a QDQ model's
/// next layer, as the product tiles store theirs).
struct ChannelOutput {
  ChannelOutput(float *out, const FinishedTile *finish, const TilePostOps &post)
      : out(out), finish(finish), clamp(&post), quantize(finish ? quantizedOrNone(*finish) : quantizedOrNone({})),
        bias(clamp.rowBias(0)) {}

  void store(int64_t j, __mmask16 lanes, __m512 v) const {
    if (finish)
      finishLanes(v, bias, clamp, quantize, *finish, 0, j, lanes);
    else
      _mm512_mask_storeu_ps(out + j, lanes, v);
  }

  float *out;
  const FinishedTile *finish;
  ClampPost clamp;
  QuantizeLanes quantize;
  __m512 bias;
};

/// One output row's sums, V (1-4) vectors of 16 outputs from output column ox0, the first
/// element j0 of the channel's plane. With Narrow, every window lies within one 64-byte load
/// (vpermb); else two (vpermt2b).
template <int V, bool Narrow>
void rowVectors(const BytesCall &t, const uint8_t *row0, const int32_t *quadWeights, int64_t ox0, int64_t outputs,
                int32_t correction, float scale, const ChannelOutput &out, int64_t j0) {
  const kiln_qconv2d_args &g = t.g;
  __m512i acc[V];
  for (int v = 0; v < V; ++v)
    acc[v] = _mm512_setzero_si512();
  for (int64_t ky = 0; ky < g.r; ++ky) {
    const uint8_t *row = row0 + ky * g.dilation_h * t.planeW + ox0 * g.stride_w;
    for (int64_t q = 0; q < t.quadsPerRow; ++q) {
      const __m512i weights = _mm512_set1_epi32(quadWeights[ky * t.quadsPerRow + q]);
      const uint8_t *from = row + 4 * q * g.dilation_w;
      for (int v = 0; v < V; ++v) {
        const uint8_t *at = from + v * kLanes * g.stride_w;
        const __m512i bytes = Narrow ? _mm512_permutexvar_epi8(t.gather[q], _mm512_loadu_si512(at))
                                     : _mm512_permutex2var_epi8(_mm512_loadu_si512(at), t.gather[q],
                                                                _mm512_loadu_si512(at + 64));
        acc[v] = _mm512_dpbusd_epi32(acc[v], bytes, weights);
      }
    }
  }
  for (int v = 0; v < V; ++v) {
    const __mmask16 lanes = firstLanes(outputs - v * kLanes);
    const __m512 sums = _mm512_cvtepi32_ps(_mm512_sub_epi32(acc[v], _mm512_set1_epi32(correction)));
    out.store(j0 + v * kLanes, lanes, _mm512_mul_ps(sums, _mm512_set1_ps(scale)));
  }
}
#endif

#if defined(__AVX512VBMI__) && defined(__AVX512VNNI__)
/// The whole output plane of a narrow layer in runs of 16 flattened outputs (BytesCall::runStarts).
void planeRuns(const BytesCall &t, const uint8_t *plane, const int32_t *quadWeights, int32_t correction, float scale,
               const ChannelOutput &out) {
  const kiln_qconv2d_args &g = t.g;
  const int64_t pixels = g.oh * g.ow;
  for (size_t run = 0; run < t.runStarts.size(); ++run) {
    __m512i acc = _mm512_setzero_si512();
    const BytesCall::Gather *gathers = &t.runGathers[run * static_cast<size_t>(t.quadsPerRow)];
    for (int64_t ky = 0; ky < g.r; ++ky) {
      const uint8_t *from = plane + t.runStarts[run] + ky * g.dilation_h * t.planeW;
      for (int64_t q = 0; q < t.quadsPerRow; ++q) {
        const uint8_t *at = from + 4 * q * g.dilation_w;
        const __m512i bytes = _mm512_permutex2var_epi8(
            _mm512_loadu_si512(at), _mm512_load_si512(gathers[q].offsets), _mm512_loadu_si512(at + 64));
        acc = _mm512_dpbusd_epi32(acc, bytes, _mm512_set1_epi32(quadWeights[ky * t.quadsPerRow + q]));
      }
    }
    const int64_t first = static_cast<int64_t>(run) * kLanes;
    const __m512 sums = _mm512_cvtepi32_ps(_mm512_sub_epi32(acc, _mm512_set1_epi32(correction)));
    out.store(first, firstLanes(pixels - first), _mm512_mul_ps(sums, _mm512_set1_ps(scale)));
  }
}
#endif

/// Work items: (image, channel) pairs.
void bytesItems(void *ctx, int64_t begin, int64_t end) {
#if defined(__AVX512VBMI__) && defined(__AVX512VNNI__)
  const BytesCall &t = *static_cast<const BytesCall *>(ctx);
  const kiln_qconv2d_args &g = t.g;
  const int64_t pixels = g.oh * g.ow, planeBytes = t.paddedH * t.planeW + kSlack;
  // One block of the thread's scratch: the plane, and (for tile_in_scratch) the output plane.
  float *block = scratch(Scratch::Depthwise, static_cast<size_t>(ceilDiv(planeBytes, 4) + pixels));
  auto *plane = reinterpret_cast<uint8_t *>(block);
  float *own = block + ceilDiv(planeBytes, 4);
  const bool scratchTile = g.tile_in_scratch && g.epilogue;
  const bool finishing = !g.epilogue && (finishesOutputs(g) || hasPostOps(g.post));
  int32_t quadWeights[64]; // the channel's taps as r rows of quadsPerRow words (zeros past s)
  using RowFn = void (*)(const BytesCall &, const uint8_t *, const int32_t *, int64_t, int64_t, int32_t, float,
                         const ChannelOutput &, int64_t);
  static constexpr RowFn kRows[2][4] = {{rowVectors<1, false>, rowVectors<2, false>, rowVectors<3, false>,
                                         rowVectors<4, false>},
                                        {rowVectors<1, true>, rowVectors<2, true>, rowVectors<3, true>,
                                         rowVectors<4, true>}};
  const RowFn *rows = kRows[windowOf(g) + 3 * g.dilation_w <= 64 ? 1 : 0];
  padPlane(t, plane);
  for (int64_t item = begin; item < end; ++item) {
    const int64_t image = item / g.c, channel = item % g.c;
    paddedPlane(t, image, channel, plane);
    const int8_t *taps = t.weights + channel * t.rowBytes;
    int32_t weightSum = 0;
    for (int64_t ky = 0; ky < g.r; ++ky)
      for (int64_t q = 0; q < t.quadsPerRow; ++q) {
        int8_t quad[4] = {};
        for (int64_t i = 0; i < 4 && 4 * q + i < g.s; ++i)
          quad[i] = taps[ky * g.s + 4 * q + i], weightSum += quad[i];
        std::memcpy(&quadWeights[ky * t.quadsPerRow + q], quad, sizeof quad);
      }
    const int32_t correction = t.zero * weightSum;
    const float scale = g.x_scale * g.w_scales[g.w_per_channel ? channel : 0];
    float *out = scratchTile ? own : g.y + (image * g.k + channel) * pixels;
    const TilePostOps post = tilePostOps(g.post, true, channel, 0);
    const FinishedTile finish = finishedTile(g, g.y, (image * g.k + channel) * pixels, pixels);
    const ChannelOutput output(out, finishing ? &finish : nullptr, post);
    if (!t.runStarts.empty()) {
      planeRuns(t, plane, quadWeights, correction, scale, output);
    } else {
      for (int64_t oy = 0; oy < g.oh; ++oy) {
        const uint8_t *row0 = plane + oy * g.stride_h * t.planeW;
        for (int64_t ox0 = 0; ox0 < g.ow; ox0 += 4 * kLanes) {
          const int64_t outputs = std::min<int64_t>(4 * kLanes, g.ow - ox0);
          rows[ceilDiv(outputs, kLanes) - 1](t, row0, quadWeights, ox0, outputs, correction, scale, output,
                                              oy * g.ow + ox0);
        }
      }
    }
    if (g.epilogue)
      g.epilogue(g.epilogue_ctx, out, pixels, image, channel, 0, 1, pixels);
  }
#else
  (void)ctx, (void)begin, (void)end;
#endif
}

} // namespace

bool qconvDepthwiseBytesShape(const kiln_qconv2d_args &g) {
#if defined(__AVX512VBMI__) && defined(__AVX512VNNI__)
  return g.groups == g.c && g.k == g.c && g.stride_w <= 2 && g.r * ceilDiv(g.s, 4) <= 64 && ceilDiv(g.s, 4) <= 4 &&
         windowOf(g) + 3 * g.dilation_w <= kWindow;
#else
  (void)g;
  return false;
#endif
}

void qconvDepthwiseBytes(const kiln_rt *rt, const kiln_qconv2d_args &g, const int8_t *weights, int64_t rowBytes) {
  // The padded extent every output reads, and wide enough for the input's columns and for
  // each row's last vector to load a whole window (kSlack past the plane's end covers the
  // last row's).
  const int64_t paddedH = std::max((g.oh - 1) * g.stride_h + (g.r - 1) * g.dilation_h + 1, g.h + g.pad_top);
  const int64_t planeW = std::max((g.ow - 1) * g.stride_w + (g.s - 1) * g.dilation_w + 1, g.w + g.pad_left);
  BytesCall t{g, weights, rowBytes, ceilDiv(g.s, 4), paddedH, planeW, static_cast<uint8_t>(g.x_zero),
              static_cast<uint8_t>(g.x_signed ? 0x80 : 0), g.x_zero + (g.x_signed ? 128 : 0)
#if defined(__AVX512VBMI__) && defined(__AVX512VNNI__)
              , {}, {}, {}
#endif
  };
#if defined(__AVX512VBMI__) && defined(__AVX512VNNI__)
  for (int64_t q = 0; q < t.quadsPerRow; ++q) {
    alignas(64) uint8_t offsets[64];
    for (int64_t lane = 0; lane < kLanes; ++lane)
      for (int64_t i = 0; i < 4; ++i) // a tap past the row's last reads any byte: its weight is 0
        offsets[4 * lane + i] = static_cast<uint8_t>(lane * g.stride_w + (4 * q + i < g.s ? i * g.dilation_w : 0));
    t.gather[q] = _mm512_load_si512(offsets);
  }
  // A narrow plane (MobileNetV2's 14 x 14 and 7 x 7 layers filled 14 or 7 of a row's 16
  // lanes) runs as flattened runs of 16 outputs where every run's window fits in 128 bytes.
  if (g.ow <= kLanes) {
    const int64_t pixels = g.oh * g.ow;
    auto start = [&](int64_t o) { return o / g.ow * g.stride_h * planeW + o % g.ow * g.stride_w; };
    bool fits = true;
    for (int64_t first = 0; first < pixels && fits; first += kLanes) {
      t.runStarts.push_back(start(first));
      for (int64_t q = 0; q < t.quadsPerRow; ++q) {
        BytesCall::Gather gather{};
        for (int64_t lane = 0; lane < kLanes && first + lane < pixels; ++lane)
          for (int64_t i = 0; i < 4; ++i) {
            const int64_t offset = start(first + lane) - start(first) + (4 * q + i < g.s ? i * g.dilation_w : 0);
            fits = fits && offset < kWindow;
            gather.offsets[4 * lane + i] = static_cast<uint8_t>(offset);
          }
        t.runGathers.push_back(gather);
      }
    }
    if (!fits)
      t.runStarts.clear(), t.runGathers.clear();
  }
#endif
  parallelForIfWorth(rt, g.n * g.c, g.n * g.c * g.oh * g.ow * g.r * g.s, int64_t{1} << 16, bytesItems, &t, true);
}

} // namespace kiln::runtime::kernels::detail
