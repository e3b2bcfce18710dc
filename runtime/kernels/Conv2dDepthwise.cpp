// Direct convolution for one input channel per group (depthwise, Conv2dCommon.h).
//
// Plain depthwise (one output channel per input channel: MobileNet, EfficientNet, ConvMixer)
// runs plane by plane as a one-dimensional convolution, in one of two ways:
//  - Stride 1 with output rows as wide as the input's ("same" padding along the width, the
//    common case): outputs are numbered q = oh*W + ow, every tap (r, s) is one fixed offset
//    from q into x itself, and 16 consecutive outputs are one masked load per tap, the lanes
//    whose tap reads padding masked off (flat planes, below).
//  - Otherwise each thread writes its plane, padded, into its own scratch, split by stride
//    phase: phase (a, b) holds the padded rows a, a + S, ... and columns b, b + S, ... (S the
//    stride), Wq columns wide. Output (oh, ow) and tap (r, s) then read phase ((r*dh) % S,
//    (s*dw) % S) at row oh + (r*dh) / S, column ow + (s*dw) / S, so with outputs numbered
//    q = oh*Wq + ow every tap is again one fixed offset and every load of 16 consecutive
//    outputs one unaligned vector load, whatever the stride, dilation, padding or plane
//    width. The Wq - OW columns past each output row are computed and dropped when the rows
//    are copied out. Against the row kernel below (masked 16-wide vectors per output row,
//    the padded input written out for the whole batch first, stride 2 by a permute per tap)
//    a 7x7 plane takes 4 vectors instead of 7, stride 2 loads like stride 1, and the padding
//    never leaves the cache (it is written by masked loads as each plane is copied in).
//
// Channel multipliers of 2-8 keep the row kernel: each output
// plane is a weighted sum of R*S shifted views of one padded input plane; 16 outputs along a
// row share every tap's broadcast weight, so a tap costs one load and one FMA per 16 outputs.
// A GEMM would run these as M <= 8, K = R*S products: mostly edge tiles and packing. With 5-8
// output channels per input channel, all of them run together on each loaded input vector:
// LeNet-5's first layer (1 -> 6, 5x5, 28x28, batch 64) went 0.34-0.39 -> 0.23-0.26 ms against
// the GEMM path, where one channel at a time had been slower than it.
// Four output rows run together, one FMA chain each: with one chain the FMAs waited on each
// other, and a 3x3 256-channel 28x28 layer took 0.44 ms instead of 0.21 (kiln-gemm-bench
// --conv --only depthwise, one Zen 4 core).
#include <algorithm>
#include <array>
#include <map>
#include <vector>

#include "runtime/kernels/Conv2dChannelRows.h"
#include "runtime/kernels/Conv2dCommon.h"
#include "runtime/kernels/GemmDriver.h"
#include "runtime/kernels/Simd.h"

namespace kiln::runtime::kernels::detail {

namespace {

constexpr int kRows = 4; // output rows computed together, one channel at a time (rowGroupFn)
static_assert(kRows == 4, "update rowGroupFn's tables");

struct DepthwiseJob {
  const kiln_conv2d_args &a;
  const PaddedInput &input;
};

#ifdef __AVX512F__
using RowGroupFn = ChannelRowsFn; // channelRows (Conv2dChannelRows.h), one input plane

constexpr int kSharedRows = 2; // rows per pass with 5-8 channels: 2 x M chains of FMAs
constexpr int64_t kMinSharedOutputs = 5, kMaxSharedOutputs = 8;

RowGroupFn sharedInputRowsFn(int64_t outputs, int64_t rows, bool unitStride) {
#define KILN_SHARED_ROWS(M) \
  {channelRows<M, 1, true>, channelRows<M, 2, true>, channelRows<M, 1, false>, channelRows<M, 2, false>}
  static constexpr RowGroupFn table[][4] = {KILN_SHARED_ROWS(5), KILN_SHARED_ROWS(6), KILN_SHARED_ROWS(7),
                                            KILN_SHARED_ROWS(8)};
#undef KILN_SHARED_ROWS
  static_assert(kSharedRows == 2 && kMaxSharedOutputs - kMinSharedOutputs + 1 == 4, "update the table");
  return table[outputs - kMinSharedOutputs][(unitStride ? 0 : 2) + rows - 1];
}

RowGroupFn rowGroupFn(int64_t rows, bool unitStride) {
  static constexpr RowGroupFn unit[kRows] = {channelRows<1, 1, true>, channelRows<1, 2, true>,
                                             channelRows<1, 3, true>, channelRows<1, 4, true>};
  static constexpr RowGroupFn strided[kRows] = {channelRows<1, 1, false>, channelRows<1, 2, false>,
                                                channelRows<1, 3, false>, channelRows<1, 4, false>};
  return (unitStride ? unit : strided)[rows - 1];
}
#endif

/// Whether depthwiseConv runs all output channels of an input channel together
/// (channelRows with M of them) rather than one plane at a time.
bool sharesInput(const kiln_conv2d_args &a) {
#ifdef __AVX512F__
  const int64_t multiplier = a.k / a.groups;
  return multiplier >= kMinSharedOutputs && multiplier <= kMaxSharedOutputs;
#else
  (void)a;
  return false;
#endif
}

/// Work items [begin, end) of (image, input channel): all its output planes together.
void sharedInputPlanes(void *ctx, int64_t begin, int64_t end) {
#ifdef __AVX512F__
  const DepthwiseJob &job = *static_cast<const DepthwiseJob *>(ctx);
  const kiln_conv2d_args &a = job.a;
  const int64_t multiplier = a.k / a.groups, outPlane = a.oh * a.ow;
  for (int64_t item = begin; item < end; ++item) {
    const int64_t image = item / a.c, channel = item % a.c, first = channel * multiplier;
    const float *source = job.input.data + item * job.input.plane;
    const float *weights = a.weights + first * a.r * a.s;
    float *out = a.y + (image * a.k + first) * outPlane;
    for (int64_t oh0 = 0; oh0 < a.oh; oh0 += kSharedRows)
      sharedInputRowsFn(multiplier, std::min<int64_t>(kSharedRows, a.oh - oh0), a.stride_w == 1)(
          a, job.input, source, 1, weights, out, oh0);
    if (a.epilogue)
      for (int64_t o = 0; o < multiplier; ++o)
        a.epilogue(a.epilogue_ctx, out + o * outPlane, outPlane, image, first + o, 0, 1, outPlane);
  }
#else
  (void)ctx, (void)begin, (void)end;
#endif
}

void depthwisePlanes(void *ctx, int64_t begin, int64_t end) {
  const DepthwiseJob &job = *static_cast<const DepthwiseJob *>(ctx);
  const kiln_conv2d_args &a = job.a;
  const PaddedInput &in = job.input;
  const int64_t multiplier = a.k / a.groups, outPlane = a.oh * a.ow;
  for (int64_t plane = begin; plane < end; ++plane) {
    const int64_t image = plane / a.k, channel = plane % a.k;
    // One input channel per group: output channel k reads input channel k / multiplier.
    const float *source = in.data + (image * a.c + channel / multiplier) * in.plane;
    const float *weights = a.weights + channel * a.r * a.s;
    float *out = a.y + plane * outPlane;
#ifdef __AVX512F__
    for (int64_t oh0 = 0; oh0 < a.oh; oh0 += kRows)
      rowGroupFn(std::min<int64_t>(kRows, a.oh - oh0), a.stride_w == 1)(a, in, source, 1, weights, out, oh0);
#else
    for (int64_t oh = 0; oh < a.oh; ++oh) {
      float *outRow = out + oh * a.ow;
      const float *window = source + oh * a.stride_h * in.width;
      for (int64_t ow = 0; ow < a.ow; ++ow) {
        float sum = 0.0f;
        for (int64_t r = 0; r < a.r; ++r)
          for (int64_t s = 0; s < a.s; ++s)
            sum += weights[r * a.s + s] *
                   window[r * a.dilation_h * in.width + ow * a.stride_w + s * a.dilation_w];
        outRow[ow] = sum;
      }
    }
#endif
    if (a.epilogue)
      a.epilogue(a.epilogue_ctx, out, outPlane, image, channel, 0, 1, outPlane);
  }
}


// ---- plain depthwise: one plane at a time, as a 1-D convolution over stride phases ----------

/// The shape of one plane's phase-split padded copy (see the top of this file), the same for
/// every plane of a call.
struct PhasePlanes {
  int64_t stride = 1;       // S: S*S phases (the height's and width's strides are equal)
  int64_t rows = 0, cols = 0; // Hq, Wq: each phase's rows and columns
  int64_t phaseFloats = 0;  // one phase plane, with a zero tail that loads past the end read
  int64_t positions = 0;    // OH * Wq rounded up to whole vectors: the outputs computed
};

struct PlaneJob {
  const kiln_conv2d_args &a;
  PhasePlanes shape;
  const int64_t *tapOffsets; // per tap (r, s): its phase's start plus its row and column offset
};

#ifdef __AVX512F__
/// The 16 lanes in[from + l], l < 16, zero where from + l lies outside [0, width): masked loads
/// never touch the masked-off addresses, so a row's padding costs no separate pass and no
/// bounds check per element. Inside the row (the common case) it is one plain load.
inline __m512 rowVector(const float *in, int64_t width, int64_t from) {
  if (from >= 0 && from + 16 <= width)
    return _mm512_loadu_ps(in + from);
  const int64_t lo = std::clamp<int64_t>(-from, 0, 16), hi = std::clamp<int64_t>(width - from, 0, 16);
  return _mm512_maskz_loadu_ps(static_cast<__mmask16>(firstLanes(hi) & ~firstLanes(lo)), in + from);
}

/// One padded input row (`in`, or zeros where the row is padding) into its S phase rows
/// (`out[b]`, b < S, `cols` each): phase b's column j is the row's column j*S + b - pad_left.
/// Stride 2 reads each 32 input columns once and splits them into both phases' 16 with two
/// permutes (even and odd lanes): splitting each phase from loads of its own read every column
/// twice and spent more time on masks than the convolution spent on its FMAs (a 3x3/2
/// 96-channel 112x112 layer: 0.46 ms, 79% of it filling).
inline void fillRowPhases(const float *in, int64_t width, int64_t padLeft, int64_t S, int64_t cols,
                          float *const *out) {
  for (int64_t j = 0; j < cols; j += 16) {
    const __mmask16 store = firstLanes(cols - j);
    if (!in) {
      for (int64_t b = 0; b < S; ++b)
        _mm512_mask_storeu_ps(out[b] + j, store, _mm512_setzero_ps());
    } else if (S == 1) {
      _mm512_mask_storeu_ps(out[0] + j, store, rowVector(in, width, j - padLeft));
    } else {
      const int64_t from = 2 * j - padLeft;
      const __m512 lo = rowVector(in, width, from), hi = rowVector(in, width, from + 16);
      const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
      const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
      _mm512_mask_storeu_ps(out[0] + j, store, _mm512_permutex2var_ps(lo, even, hi));
      _mm512_mask_storeu_ps(out[1] + j, store, _mm512_permutex2var_ps(lo, odd, hi));
    }
  }
}
#endif

/// Writes plane `source` (h x w) padded and split by phase into `dst`.
void fillPhases(const kiln_conv2d_args &a, const PhasePlanes &p, const float *source, float *dst) {
  const int64_t S = p.stride;
  // Padded rows in order (phase a0's row i is padded row i*S + a0), so that the input is read
  // front to back, as the hardware prefetcher expects.
  // Nested loops rather than padded / S and padded % S: a 64-bit division per row cost as much
  // as the row's copy (filling took ~40% of a 3x3 144-channel 56x56 layer).
  for (int64_t i = 0; i < p.rows; ++i)
    for (int64_t a0 = 0; a0 < S; ++a0) {
      const int64_t inRow = i * S + a0 - a.pad_top;
      const bool padding = inRow < 0 || inRow >= a.h;
      const float *in = source + inRow * a.w;
#ifdef __AVX512F__
      if (S <= 2) {
        float *rows[2];
        for (int64_t b = 0; b < S; ++b)
          rows[b] = dst + (a0 * S + b) * p.phaseFloats + i * p.cols;
        fillRowPhases(padding ? nullptr : in, a.w, a.pad_left, S, p.cols, rows);
        continue;
      }
#endif
      for (int64_t b = 0; b < S; ++b) {
        float *out = dst + (a0 * S + b) * p.phaseFloats + i * p.cols;
        // Column j of phase b is padded column j*S + b, input column j*S + b - pad_left.
        for (int64_t j = 0; j < p.cols; ++j) {
          const int64_t column = b - a.pad_left + j * S;
          out[j] = padding || column < 0 || column >= a.w ? 0.0f : in[column];
        }
      }
    }
  for (int64_t phase = 0; phase < S * S; ++phase) // the tails past the last row
    std::fill(dst + phase * p.phaseFloats + p.rows * p.cols, dst + (phase + 1) * p.phaseFloats, 0.0f);
}

#ifdef __AVX512F__
/// V vectors of 16 consecutive outputs from `q`, every tap accumulated in registers: V
/// independent FMA chains per tap, one load and one FMA each.
template <int V>
inline void planeVectors(const float *phases, const float *weights, const int64_t *tapOffsets, int64_t taps,
                         float *out, int64_t q) {
  __m512 acc[V];
#pragma GCC unroll 8
  for (int v = 0; v < V; ++v)
    acc[v] = _mm512_setzero_ps();
  for (int64_t t = 0; t < taps; ++t) {
    const __m512 w = _mm512_set1_ps(weights[t]);
    const float *x = phases + tapOffsets[t] + q;
#pragma GCC unroll 8
    for (int v = 0; v < V; ++v)
      acc[v] = _mm512_fmadd_ps(w, _mm512_loadu_ps(x + 16 * v), acc[v]);
  }
#pragma GCC unroll 8
  for (int v = 0; v < V; ++v)
    _mm512_storeu_ps(out + q + 16 * v, acc[v]);
}
#endif

/// The OH x OW outputs of one plane, rows `p.cols` apart in `computed`, into `out` with vector
/// copies: a call of std::copy_n per row (56 floats) took ~15% of a 56x56 layer. A row's last
/// vector may run into the rows after it, which are stored after it, but never past the plane:
/// the next plane may be another thread's. (Reads past the last row stay in the scratch.)
void copyOutputRows(const kiln_conv2d_args &a, const PhasePlanes &p, const float *computed, float *out) {
#ifdef __AVX512F__
  for (int64_t oh = 0; oh < a.oh; ++oh) {
    const float *from = computed + oh * p.cols;
    float *to = out + oh * a.ow;
    for (int64_t j = 0; j < a.ow; j += 16) {
      const __m512 v = _mm512_loadu_ps(from + j);
      if (j + 16 <= a.ow || (oh * a.ow + j + 16 <= a.oh * a.ow))
        _mm512_storeu_ps(to + j, v);
      else
        _mm512_mask_storeu_ps(to + j, firstLanes(a.ow - j), v);
    }
  }
#else
  for (int64_t oh = 0; oh < a.oh; ++oh)
    std::copy_n(computed + oh * p.cols, a.ow, out + oh * a.ow);
#endif
}

/// Work items [begin, end) of (image, channel) planes.
void depthwisePhasePlanes(void *ctx, int64_t begin, int64_t end) {
  const PlaneJob &job = *static_cast<const PlaneJob *>(ctx);
  const kiln_conv2d_args &a = job.a;
  const PhasePlanes &p = job.shape;
  const int64_t S = p.stride, taps = a.r * a.s, outPlane = a.oh * a.ow;
  // One thread's scratch: the phases, then the outputs q = oh*Wq + ow.
  // 16 floats past the outputs: copyOutputRows reads whole vectors past the last row's end.
  float *phases = scratch(Scratch::Depthwise, static_cast<size_t>(S * S * p.phaseFloats + p.positions + 16));
  float *computed = phases + S * S * p.phaseFloats;
  for (int64_t plane = begin; plane < end; ++plane) {
    const int64_t image = plane / a.k, channel = plane % a.k;
    fillPhases(a, p, a.x + plane * a.h * a.w, phases);
    const float *weights = a.weights + channel * taps;
#ifdef __AVX512F__
    int64_t q = 0;
    for (; q + 128 <= p.positions; q += 128)
      planeVectors<8>(phases, weights, job.tapOffsets, taps, computed, q);
    for (; q + 64 <= p.positions; q += 64)
      planeVectors<4>(phases, weights, job.tapOffsets, taps, computed, q);
    for (; q < p.positions; q += 16)
      planeVectors<1>(phases, weights, job.tapOffsets, taps, computed, q);
#else
    for (int64_t q = 0; q < p.positions; ++q) {
      float sum = 0.0f;
      for (int64_t t = 0; t < taps; ++t)
        sum += weights[t] * phases[job.tapOffsets[t] + q];
      computed[q] = sum;
    }
#endif
    float *out = a.y + plane * outPlane;
    copyOutputRows(a, p, computed, out);
    if (a.epilogue)
      a.epilogue(a.epilogue_ctx, out, outPlane, image, channel, 0, 1, outPlane);
  }
}

// ---- plain depthwise at stride 1 with output rows as wide as the input's: straight from x ----

/// Output q = oh*W + ow of a plane whose output rows are W wide like its input's reads, for
/// tap (r, s), input element q + (r*dh - pad_top)*W + s*dw - pad_left: one fixed offset per
/// tap, so 16 consecutive outputs are one load per tap from x itself. The lanes whose tap
/// falls in the padding (its row or column outside the plane; at a row's ends that address
/// holds the neighbouring row's element) are masked off the load, and masked-off lanes never
/// touch memory. No padded copy is written and no computed rows are copied out: the phase
/// copy above spent half of a 3x3 144-channel 56x56 layer filling and copying. Measured
/// (kiln-gemm-bench --conv --only depthwise, one Zen 4 core, phases -> straight): 3x3 144
/// 56x56 0.28 -> 0.21 ms, 256 28x28 0.15 -> 0.09-0.10, 960 7x7 0.092 -> 0.032, 32 112x112
/// 0.23 -> 0.19-0.23, 5x5 672 14x14 0.25 -> 0.17.
struct FlatJob {
  const kiln_conv2d_args &a;
  int64_t vectors;               // ceil(OH*OW / 16)
  const int64_t *tapOffsets;     // per tap (r, s)
  const uint16_t *masks;         // [vector][tap]: the lanes whose tap reads inside the plane
  int64_t bands;                 // of each plane's vectors: work items are (band, plane)
};

#ifdef __AVX512F__
/// V vectors of 16 outputs from vector v0 of one plane, written to `out` (masked past OH*OW).
template <int V>
inline void flatVectors(const FlatJob &job, const float *x, const float *weights, float *out, int64_t v0) {
  const int64_t taps = job.a.r * job.a.s, outputs = job.a.oh * job.a.ow;
  __m512 acc[V];
#pragma GCC unroll 8
  for (int v = 0; v < V; ++v)
    acc[v] = _mm512_setzero_ps();
  const uint16_t *masks = job.masks + v0 * taps;
  for (int64_t t = 0; t < taps; ++t) {
    const __m512 w = _mm512_set1_ps(weights[t]);
    const float *from = x + job.tapOffsets[t] + 16 * v0;
#pragma GCC unroll 8
    for (int v = 0; v < V; ++v)
      acc[v] = _mm512_fmadd_ps(w, _mm512_maskz_loadu_ps(masks[v * taps + t], from + 16 * v), acc[v]);
  }
#pragma GCC unroll 8
  for (int v = 0; v < V; ++v) {
    const int64_t q = 16 * (v0 + v);
    if (q + 16 <= outputs)
      _mm512_storeu_ps(out + q, acc[v]);
    else
      _mm512_mask_storeu_ps(out + q, firstLanes(outputs - q), acc[v]);
  }
}

/// Work items [begin, end) of (band of vectors, (image, channel) plane), bands outermost.
void depthwiseFlatPlanes(void *ctx, int64_t begin, int64_t end) {
  const FlatJob &job = *static_cast<const FlatJob *>(ctx);
  const kiln_conv2d_args &a = job.a;
  const int64_t taps = a.r * a.s, outPlane = a.oh * a.ow, planes = a.n * a.k;
  for (int64_t item = begin; item < end; ++item) {
    const int64_t band = item / planes, plane = item % planes, image = plane / a.k, channel = plane % a.k;
    const int64_t v0 = band * job.vectors / job.bands, v1 = (band + 1) * job.vectors / job.bands;
    const float *x = a.x + plane * a.h * a.w, *weights = a.weights + channel * taps;
    float *out = a.y + plane * outPlane;
    int64_t v = v0;
    for (; v + 8 <= v1; v += 8)
      flatVectors<8>(job, x, weights, out, v);
    for (; v + 4 <= v1; v += 4)
      flatVectors<4>(job, x, weights, out, v);
    for (; v < v1; ++v)
      flatVectors<1>(job, x, weights, out, v);
    const int64_t q0 = std::min(16 * v0, outPlane), q1 = std::min(16 * v1, outPlane);
    if (a.epilogue && q1 > q0)
      a.epilogue(a.epilogue_ctx, out + q0, outPlane, image, channel, q0, 1, q1 - q0);
  }
}
#endif

/// A flat layer's tap offsets and load masks: they depend on the plane's shape only, so
/// each is built once per thread and shape and kept (a model's layers repeat every run).
/// Building one costs about as much as a few channels' products: for 8 channels of 112x112
/// it had been most of the call.
struct FlatTables {
  std::vector<int64_t> offsets; // per tap (r, s)
  std::vector<uint16_t> masks;  // [vector][tap]
};

const FlatTables &flatTables(const kiln_conv2d_args &a) {
  using Key = std::array<int64_t, 9>;
  const Key key{a.h, a.w, a.oh, a.r, a.s, a.pad_top, a.pad_left, a.dilation_h, a.dilation_w};
  // The calling thread's tables, read by every worker of its call. A handful of shapes per
  // model; a bound keeps a process that compiles many models from growing without end.
  thread_local std::map<Key, FlatTables> cache;
  if (auto found = cache.find(key); found != cache.end())
    return found->second;
  if (cache.size() >= 256)
    cache.clear();
  FlatTables &t = cache[key];
  const int64_t taps = a.r * a.s, outputs = a.oh * a.ow, vectors = (outputs + 15) / 16;
  t.offsets.resize(static_cast<size_t>(taps));
  for (int64_t r = 0; r < a.r; ++r)
    for (int64_t s = 0; s < a.s; ++s)
      t.offsets[static_cast<size_t>(r * a.s + s)] = (r * a.dilation_h - a.pad_top) * a.w + s * a.dilation_w - a.pad_left;
  t.masks.resize(static_cast<size_t>(vectors * taps));
  std::vector<uint32_t> rowBits(static_cast<size_t>(a.r)), columnBits(static_cast<size_t>(a.s));
  int64_t oh = 0, ow = 0; // of the lane at hand, walked without divisions
  for (int64_t v = 0; v < vectors; ++v) {
    std::fill(rowBits.begin(), rowBits.end(), 0u);
    std::fill(columnBits.begin(), columnBits.end(), 0u);
    for (int64_t lane = 0; lane < 16 && 16 * v + lane < outputs; ++lane) {
      for (int64_t r = 0; r < a.r; ++r) {
        const int64_t ih = oh + r * a.dilation_h - a.pad_top;
        rowBits[static_cast<size_t>(r)] |= (ih >= 0 && ih < a.h ? 1u : 0u) << lane;
      }
      for (int64_t s = 0; s < a.s; ++s) {
        const int64_t iw = ow + s * a.dilation_w - a.pad_left;
        columnBits[static_cast<size_t>(s)] |= (iw >= 0 && iw < a.w ? 1u : 0u) << lane;
      }
      if (++ow == a.ow)
        ow = 0, ++oh;
    }
    for (int64_t r = 0; r < a.r; ++r)
      for (int64_t s = 0; s < a.s; ++s)
        t.masks[static_cast<size_t>(v * taps + r * a.s + s)] =
            static_cast<uint16_t>(rowBits[static_cast<size_t>(r)] & columnBits[static_cast<size_t>(s)]);
  }
  return t;
}

} // namespace

bool flatPlaneDepthwise(const kiln_conv2d_args &a) {
#ifdef __AVX512F__
  return a.groups == a.c && a.k == a.c && a.stride_h == 1 && a.stride_w == 1 && a.ow == a.w;
#else
  (void)a;
  return false;
#endif
}

void depthwiseFlatConv(const kiln_rt *rt, const kiln_conv2d_args &a) {
#ifdef __AVX512F__
  const int64_t taps = a.r * a.s, outputs = a.oh * a.ow, vectors = (outputs + 15) / 16;
  const FlatTables &tables = flatTables(a);
  // A band of each plane's vectors per thread where the layer splits by rows
  // (depthwiseSplitsRows).
  const int64_t threads = threadsOf(rt);
  const int64_t bands = depthwiseSplitsRows(threads, a) ? std::min<int64_t>(threads, vectors) : 1;
  FlatJob job{a, vectors, tables.offsets.data(), tables.masks.data(), bands};
  const int64_t planes = a.n * a.k;
  parallelForIfWorth(rt, planes * bands, planes * vectors * 16 * taps, int64_t{1} << 16, depthwiseFlatPlanes, &job);
#else
  (void)rt, (void)a;
#endif
}

bool phasePlaneDepthwise(const kiln_conv2d_args &a) {
  return a.groups == a.c && a.k == a.c && a.stride_h == a.stride_w && a.stride_h <= 4;
}

void depthwisePlaneConv(const kiln_rt *rt, const kiln_conv2d_args &a) {
  if (flatPlaneDepthwise(a))
    return depthwiseFlatConv(rt, a);
  const int64_t S = a.stride_h, taps = a.r * a.s;
  PhasePlanes p;
  p.stride = S;
  // Padded extents the windows reach (at least the image and its leading pads), in phases.
  const int64_t reachH = (a.oh - 1) * S + (a.r - 1) * a.dilation_h + 1;
  const int64_t reachW = (a.ow - 1) * S + (a.s - 1) * a.dilation_w + 1;
  p.rows = (std::max(a.pad_top + a.h, reachH) + S - 1) / S;
  p.cols = (std::max(a.pad_left + a.w, reachW) + S - 1) / S;
  p.positions = (a.oh * p.cols + 15) / 16 * 16;
  // The calling thread's table of tap offsets, grown once and read by every worker.
  thread_local std::vector<int64_t> offsets;
  offsets.resize(static_cast<size_t>(taps));
  // Loads reach the last tap's offset past the last computed output: the phases' zero tails
  // cover it.
  const int64_t furthest = ((a.r - 1) * a.dilation_h / S) * p.cols + (a.s - 1) * a.dilation_w / S;
  p.phaseFloats = std::max(p.rows * p.cols, p.positions + furthest) + 16;
  for (int64_t r = 0; r < a.r; ++r)
    for (int64_t s = 0; s < a.s; ++s) {
      const int64_t dy = r * a.dilation_h, dx = s * a.dilation_w;
      const int64_t phase = (dy % S) * S + dx % S;
      offsets[static_cast<size_t>(r * a.s + s)] = phase * p.phaseFloats + (dy / S) * p.cols + dx / S;
    }
  PlaneJob job{a, p, offsets.data()};
  const int64_t items = a.n * a.k;
  const int64_t work = items * p.positions * taps;
  parallelForIfWorth(rt, items, work, int64_t{1} << 16, depthwisePhasePlanes, &job);
}

void depthwiseConv(const kiln_rt *rt, const kiln_conv2d_args &a, const PaddedInput &input) {
  DepthwiseJob job{a, input};
  const bool shared = sharesInput(a);
  // Work items: output planes, or (image, input channel) pairs whose planes run together.
  const int64_t items = shared ? a.n * a.c : a.n * a.k;
  const kiln_range_fn run = shared ? sharedInputPlanes : depthwisePlanes;
  const int64_t work = a.n * a.k * a.oh * a.ow * a.r * a.s;
  parallelForIfWorth(rt, items, work, int64_t{1} << 16, run, &job);
}

} // namespace kiln::runtime::kernels::detail
