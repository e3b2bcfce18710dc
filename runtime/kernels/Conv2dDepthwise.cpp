// Direct convolution for one input channel per group (depthwise, Conv2dCommon.h). Each output
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
/// Output rows [oh0, oh0 + Rows) of the M output channels that read one input plane, 16
/// outputs at a time: M = 1 is plain depthwise (one plane per work item, 4 rows); M = 5-8 a
/// channel multiplier such as LeNet-5's first layer, 1 -> 6 (2 rows). Each tap's input vector
/// is loaded once and feeds M x Rows FMAs, one chain per (channel, row), so that a tap's FMAs
/// do not wait on each other: a single chain ran at the FMA latency, and with the row count a
/// runtime value the accumulators lived on the stack. One channel at a time loaded the input
/// M times, a load per FMA, and ran LeNet-5's first layer slower than the GEMM path.
template <int M, int Rows, bool UnitStride>
void channelRows(const kiln_conv2d_args &a, const PaddedInput &in, const float *source, const float *weights,
                 float *out, int64_t oh0) {
  const int64_t taps = a.r * a.s, outPlane = a.oh * a.ow;
  for (int64_t ow = 0; ow < a.ow; ow += 16) {
    const int64_t count = std::min<int64_t>(16, a.ow - ow);
    const __mmask16 lanes = firstLanes(count);
    __m512 acc[M][Rows];
#pragma GCC unroll 8
    for (int o = 0; o < M; ++o)
#pragma GCC unroll 4
      for (int i = 0; i < Rows; ++i)
        acc[o][i] = _mm512_setzero_ps();
    for (int64_t r = 0; r < a.r; ++r) {
      const float *row = source + (oh0 * a.stride_h + r * a.dilation_h) * in.width + ow * a.stride_w;
      for (int64_t s = 0; s < a.s; ++s) {
        const float *tap = row + s * a.dilation_w;
        __m512 x[Rows];
#pragma GCC unroll 4
        for (int i = 0; i < Rows; ++i) {
          const float *p = tap + i * a.stride_h * in.width;
          x[i] = UnitStride ? _mm512_maskz_loadu_ps(lanes, p) : loadStrided(p, a.stride_w, count);
        }
        const float *w = weights + r * a.s + s;
#pragma GCC unroll 8
        for (int o = 0; o < M; ++o) {
          const __m512 weight = _mm512_set1_ps(w[o * taps]);
#pragma GCC unroll 4
          for (int i = 0; i < Rows; ++i)
            acc[o][i] = _mm512_fmadd_ps(weight, x[i], acc[o][i]);
        }
      }
    }
#pragma GCC unroll 8
    for (int o = 0; o < M; ++o)
#pragma GCC unroll 4
      for (int i = 0; i < Rows; ++i)
        _mm512_mask_storeu_ps(out + o * outPlane + (oh0 + i) * a.ow + ow, lanes, acc[o][i]);
  }
}

using RowGroupFn = void (*)(const kiln_conv2d_args &, const PaddedInput &, const float *, const float *, float *,
                            int64_t);

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
          a, job.input, source, weights, out, oh0);
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
      rowGroupFn(std::min<int64_t>(kRows, a.oh - oh0), a.stride_w == 1)(a, in, source, weights, out, oh0);
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

} // namespace

void depthwiseConv(const kiln_rt *rt, const kiln_conv2d_args &a, const PaddedInput &input) {
  DepthwiseJob job{a, input};
  const bool shared = sharesInput(a);
  // Work items: output planes, or (image, input channel) pairs whose planes run together.
  const int64_t items = shared ? a.n * a.c : a.n * a.k;
  const kiln_range_fn run = shared ? sharedInputPlanes : depthwisePlanes;
  const int64_t work = a.n * a.k * a.oh * a.ow * a.r * a.s;
  if (threadsOf(rt) > 1 && items > 1 && work >= (int64_t{1} << 16))
    rt->parallel_for(rt, items, 1, run, &job);
  else
    run(&job, 0, items);
}

} // namespace kiln::runtime::kernels::detail
