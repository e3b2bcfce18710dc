// qconv2d's depthwise layers (one input and one output channel per group) of unit column
// stride: per image and channel, the u8 plane is centred (x - zero, as floats) into a padded
// plane of the calling thread, and each output row is summed over the taps with 16-lane FMAs
// (every tap reads consecutive columns), then scaled and handed to the epilogue. The centred values and the s8 weights are integers and every partial sum stays
// below 2^24 in magnitude (sumsExactInF32), so f32 holds each exactly: the sums are the int32 ones, bit for bit. The input is read once, as
// bytes; the plane lives in L1/L2 (MobileNetV2's 112 x 112 planes: 51 KB). Against conv2d in
// f32 on the centred tensor (qconv2d's route for other thin groups), MobileNetV2's stride-1
// depthwise layers took 0.52 and 0.42 ms instead of 0.64 and 0.56; its stride-2 ones were
// slower this way (0.42 against 0.29 ms: the whole input plane built for a quarter of the
// outputs), so they keep that route.
#include "runtime/kernels/QConv2dDepthwise.h"

#include <algorithm>
#include <vector>

#include "runtime/kernels/GemmDriver.h" // parallelForIfWorth
#include "runtime/kernels/GemmPack.h"   // scratch
#include "runtime/kernels/Simd.h"       // <immintrin.h>, firstLanes

namespace kiln::runtime::kernels::detail {

namespace {

struct DepthwiseCall {
  const kiln_qconv2d_args &g;
  const int8_t *weights; // row c holds channel c's taps, rowBytes apart
  int64_t rowBytes;
  int64_t paddedH, planeW;        // the padded plane: paddedH rows of planeW floats
  std::vector<int64_t> tapOffsets; // where tap (ky, kx) of output (0, 0) reads in the plane
};

/// The centred, padded plane of (image, channel): plane[y * planeW + j] is padded row y, column
/// j (0 outside x).
void centredPlane(const DepthwiseCall &t, int64_t image, int64_t channel, float *plane) {
  const kiln_qconv2d_args &g = t.g;
  std::fill(plane, plane + t.paddedH * t.planeW, 0.0f);
  const auto *x = static_cast<const uint8_t *>(g.x) + (image * g.c + channel) * g.h * g.w;
  for (int64_t iy = 0; iy < g.h; ++iy)
    centreBytes(x + iy * g.w, g.w, g.x_signed, g.x_zero, plane + (iy + g.pad_top) * t.planeW + g.pad_left);
}

#ifdef __AVX512F__
/// NV vectors of 16 outputs from ox0 (the last `lastLanes` wide), summed over the taps with
/// NV independent FMA chains, so that the FMAs' latency does not serialise the taps.
template <int NV>
void outputVectors(const float *from, const int64_t *offsets, const float *taps, int64_t count, int64_t lastLanes,
                   float scale, float *out) {
  __m512 acc[NV];
  for (int v = 0; v < NV; ++v)
    acc[v] = _mm512_setzero_ps();
  const __mmask16 last = firstLanes(lastLanes);
  for (int64_t tap = 0; tap < count; ++tap) {
    const __m512 weight = _mm512_set1_ps(taps[tap]);
    const float *at = from + offsets[tap];
    for (int v = 0; v < NV - 1; ++v)
      acc[v] = _mm512_fmadd_ps(_mm512_loadu_ps(at + 16 * v), weight, acc[v]);
    acc[NV - 1] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(last, at + 16 * (NV - 1)), weight, acc[NV - 1]);
  }
  for (int v = 0; v < NV - 1; ++v)
    _mm512_storeu_ps(out + 16 * v, _mm512_mul_ps(acc[v], _mm512_set1_ps(scale)));
  _mm512_mask_storeu_ps(out + 16 * (NV - 1), last, _mm512_mul_ps(acc[NV - 1], _mm512_set1_ps(scale)));
}
#endif

/// out[ox] = sum over taps of plane(oy * stride_h + ky * dilation_h, ox * stride_w + kx * dilation_w) * w
/// for one output row, times `scale`, up to 64 outputs at a time.
void outputRow(const DepthwiseCall &t, const float *plane, const float *taps, int64_t oy, float scale, float *out) {
  const kiln_qconv2d_args &g = t.g;
  const int64_t count = g.r * g.s;
  const float *row = plane + oy * g.stride_h * t.planeW;
  const int64_t *offsets = t.tapOffsets.data();
  for (int64_t ox0 = 0; ox0 < g.ow; ox0 += 64) {
#ifdef __AVX512F__
    const int64_t outputs = std::min<int64_t>(64, g.ow - ox0), vectors = (outputs + 15) / 16;
    const int64_t lastLanes = outputs - 16 * (vectors - 1);
    using Fn = void (*)(const float *, const int64_t *, const float *, int64_t, int64_t, float, float *);
    static constexpr Fn kVectors[4] = {outputVectors<1>, outputVectors<2>, outputVectors<3>, outputVectors<4>};
    kVectors[vectors - 1](row + ox0, offsets, taps, count, lastLanes, scale, out + ox0);
#else
    for (int64_t ox = ox0; ox < std::min<int64_t>(g.ow, ox0 + 64); ++ox) {
      float acc = 0.0f;
      for (int64_t tap = 0; tap < count; ++tap)
        acc += row[offsets[tap] + ox] * taps[tap];
      out[ox] = acc * scale;
    }
#endif
  }
}

/// Work items: (image, channel) pairs.
void depthwiseItems(void *ctx, int64_t begin, int64_t end) {
  const DepthwiseCall &t = *static_cast<const DepthwiseCall *>(ctx);
  const kiln_qconv2d_args &g = t.g;
  const int64_t pixels = g.oh * g.ow, planeFloats = t.paddedH * t.planeW;
  // One block of the thread's scratch: the plane, the channel's taps, and (for
  // tile_in_scratch) its output plane.
  float *plane = scratch(Scratch::Depthwise, static_cast<size_t>(planeFloats + g.r * g.s + pixels));
  float *taps = plane + planeFloats, *own = taps + g.r * g.s;
  const bool scratchTile = g.tile_in_scratch && g.epilogue;
  for (int64_t item = begin; item < end; ++item) {
    const int64_t image = item / g.c, channel = item % g.c;
    centredPlane(t, image, channel, plane);
    for (int64_t i = 0; i < g.r * g.s; ++i)
      taps[i] = static_cast<float>(t.weights[channel * t.rowBytes + i]);
    const float scale = g.x_scale * g.w_scales[g.w_per_channel ? channel : 0];
    float *out = scratchTile ? own : g.y + (image * g.k + channel) * pixels;
    for (int64_t oy = 0; oy < g.oh; ++oy)
      outputRow(t, plane, taps, oy, scale, out + oy * g.ow);
    if (g.epilogue)
      g.epilogue(g.epilogue_ctx, out, pixels, image, channel, 0, 1, pixels);
  }
}

} // namespace

void centreBytes(const uint8_t *x, int64_t n, bool isSigned, int32_t zero, float *out) {
  for (int64_t at = 0; at < n; at += 16) { // 16 at a time
#if defined(__AVX512BW__) && defined(__AVX512VL__)
    const __mmask16 mask = firstLanes(std::min<int64_t>(16, n - at));
    const __m128i bytes = _mm_maskz_loadu_epi8(mask, x + at);
    const __m512i values = isSigned ? _mm512_cvtepi8_epi32(bytes) : _mm512_cvtepu8_epi32(bytes);
    _mm512_mask_storeu_ps(out + at, mask,
                          _mm512_sub_ps(_mm512_cvtepi32_ps(values), _mm512_set1_ps(static_cast<float>(zero))));
#else
    for (int64_t i = at; i < std::min<int64_t>(n, at + 16); ++i)
      out[i] = static_cast<float>(isSigned ? int32_t{static_cast<int8_t>(x[i])} : int32_t{x[i]}) -
               static_cast<float>(zero);
#endif
  }
}

bool qconvDepthwiseShape(const kiln_qconv2d_args &g) {
  return g.groups == g.c && g.k == g.c && g.stride_w == 1 && sumsExactInF32(g.r * g.s);
}

void qconvDepthwise(const kiln_rt *rt, const kiln_qconv2d_args &g, const int8_t *weights, int64_t rowBytes) {
  // The padded extent every output reads: rows up to (oh - 1) * stride + the dilated kernel,
  // columns likewise; wide enough for the input's columns too.
  const int64_t paddedH = (g.oh - 1) * g.stride_h + (g.r - 1) * g.dilation_h + 1;
  const int64_t planeW = std::max(g.ow + (g.s - 1) * g.dilation_w, g.w + g.pad_left);
  DepthwiseCall t{g, weights, rowBytes, std::max(paddedH, g.h + g.pad_top), planeW, {}};
  for (int64_t ky = 0; ky < g.r; ++ky)
    for (int64_t kx = 0; kx < g.s; ++kx)
      t.tapOffsets.push_back(ky * g.dilation_h * planeW + kx * g.dilation_w);
  parallelForIfWorth(rt, g.n * g.c, g.n * g.c * g.oh * g.ow * g.r * g.s, int64_t{1} << 16, depthwiseItems, &t,
                     true);
}

} // namespace kiln::runtime::kernels::detail
