// Direct convolution for one input channel per group (depthwise, Conv2dCommon.h). Each output
// plane is a weighted sum of R*S shifted views of one padded input plane; 16 outputs along a
// row share every tap's broadcast weight, so a tap costs one load and one FMA per 16 outputs.
// A GEMM would run these as M <= 4, K = R*S products: mostly edge tiles and packing.
#include <algorithm>

#include "runtime/kernels/Conv2dCommon.h"
#include "runtime/kernels/GemmDriver.h"
#include "runtime/kernels/Simd.h"

namespace kiln::runtime::kernels::detail {

namespace {

struct DepthwiseJob {
  const kiln_conv2d_args &a;
  const PaddedInput &input;
};

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
    for (int64_t oh = 0; oh < a.oh; ++oh) {
      float *outRow = out + oh * a.ow;
      const float *window = source + oh * a.stride_h * in.width;
#ifdef __AVX512F__
      for (int64_t ow = 0; ow < a.ow; ow += 16) {
        const int64_t count = std::min<int64_t>(16, a.ow - ow);
        __m512 acc = _mm512_setzero_ps();
        for (int64_t r = 0; r < a.r; ++r) {
          const float *row = window + r * a.dilation_h * in.width + ow * a.stride_w;
          for (int64_t s = 0; s < a.s; ++s)
            acc = _mm512_fmadd_ps(_mm512_set1_ps(weights[r * a.s + s]),
                                  loadStrided(row + s * a.dilation_w, a.stride_w, count), acc);
        }
        _mm512_mask_storeu_ps(outRow + ow, firstLanes(count), acc);
      }
#else
      for (int64_t ow = 0; ow < a.ow; ++ow) {
        float sum = 0.0f;
        for (int64_t r = 0; r < a.r; ++r)
          for (int64_t s = 0; s < a.s; ++s)
            sum += weights[r * a.s + s] *
                   window[r * a.dilation_h * in.width + ow * a.stride_w + s * a.dilation_w];
        outRow[ow] = sum;
      }
#endif
    }
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
