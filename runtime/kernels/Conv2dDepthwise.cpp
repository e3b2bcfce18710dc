// Direct convolution for one input channel per group (depthwise, Conv2dCommon.h). Each output
// plane is a weighted sum of R*S shifted views of one padded input plane; 16 outputs along a
// row share every tap's broadcast weight, so a tap costs one load and one FMA per 16 outputs.
// A GEMM would run these as M <= 4, K = R*S products: mostly edge tiles and packing.
// Four output rows run together, one FMA chain each: with one chain the FMAs waited on each
// other, and a 3x3 256-channel 28x28 layer took 0.44 ms instead of 0.21 (kiln-gemm-bench
// --conv --only depthwise, one Zen 4 core).
#include <algorithm>

#include "runtime/kernels/Conv2dCommon.h"
#include "runtime/kernels/GemmDriver.h"
#include "runtime/kernels/Simd.h"

namespace kiln::runtime::kernels::detail {

namespace {

constexpr int kRows = 4; // output rows computed together (rowGroup)
static_assert(kRows == 4, "update rowGroupFn's tables");

struct DepthwiseJob {
  const kiln_conv2d_args &a;
  const PaddedInput &input;
};

#ifdef __AVX512F__
/// Output rows [oh0, oh0 + Rows) of one plane, 16 outputs at a time, with one FMA chain per
/// row so that a tap's FMAs do not wait on each other: a single chain ran at the FMA latency,
/// and with the row count a runtime value the accumulators lived on the stack.
template <int Rows, bool UnitStride>
void rowGroup(const kiln_conv2d_args &a, const PaddedInput &in, const float *source, const float *weights, float *out,
              int64_t oh0) {
  for (int64_t ow = 0; ow < a.ow; ow += 16) {
    const int64_t count = std::min<int64_t>(16, a.ow - ow);
    const __mmask16 lanes = firstLanes(count);
    __m512 acc[Rows];
#pragma GCC unroll 4
    for (int i = 0; i < Rows; ++i)
      acc[i] = _mm512_setzero_ps();
    for (int64_t r = 0; r < a.r; ++r) {
      const float *row = source + (oh0 * a.stride_h + r * a.dilation_h) * in.width + ow * a.stride_w;
      for (int64_t s = 0; s < a.s; ++s) {
        const __m512 weight = _mm512_set1_ps(weights[r * a.s + s]);
        const float *tap = row + s * a.dilation_w;
#pragma GCC unroll 4
        for (int i = 0; i < Rows; ++i) {
          const float *p = tap + i * a.stride_h * in.width;
          const __m512 x = UnitStride ? _mm512_maskz_loadu_ps(lanes, p) : loadStrided(p, a.stride_w, count);
          acc[i] = _mm512_fmadd_ps(weight, x, acc[i]);
        }
      }
    }
#pragma GCC unroll 4
    for (int i = 0; i < Rows; ++i)
      _mm512_mask_storeu_ps(out + (oh0 + i) * a.ow + ow, lanes, acc[i]);
  }
}

using RowGroupFn = void (*)(const kiln_conv2d_args &, const PaddedInput &, const float *, const float *, float *,
                            int64_t);
RowGroupFn rowGroupFn(int64_t rows, bool unitStride) {
  static constexpr RowGroupFn unit[kRows] = {rowGroup<1, true>, rowGroup<2, true>, rowGroup<3, true>,
                                             rowGroup<4, true>};
  static constexpr RowGroupFn strided[kRows] = {rowGroup<1, false>, rowGroup<2, false>, rowGroup<3, false>,
                                                rowGroup<4, false>};
  return (unitStride ? unit : strided)[rows - 1];
}
#endif

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
  const int64_t planes = a.n * a.k;
  const int64_t work = planes * a.oh * a.ow * a.r * a.s;
  if (threadsOf(rt) > 1 && planes > 1 && work >= (int64_t{1} << 16))
    rt->parallel_for(rt, planes, 1, depthwisePlanes, &job);
  else
    depthwisePlanes(&job, 0, planes);
}

} // namespace kiln::runtime::kernels::detail
