#pragma once
// The direct convolution step shared by depthwise (Conv2dDepthwise.cpp) and grouped
// (Conv2dGrouped.cpp) convolutions: output rows [oh0, oh0 + Rows) of M output channels that
// read the same `inputs` padded input planes, 16 outputs of a row per vector. Each tap of each
// input plane loads Rows input vectors once and feeds them to M x Rows FMAs, one chain per
// (channel, row), each channel's weight broadcast: with one chain the FMAs waited on each
// other (a 3x3 256-channel 28x28 depthwise layer took 0.44 ms instead of 0.21), and loading
// the input once per channel ran LeNet-5's first layer (1 -> 6) slower than the GEMM path.
// Internal to runtime/kernels/.
#include <algorithm>

#include "runtime/kernels/Conv2dCommon.h"
#include "runtime/kernels/Simd.h"

namespace kiln::runtime::kernels::detail {

#ifdef __AVX512F__
/// `source` is the first input plane of `in` that the channels read; `weights` is the first
/// channel's, w[o][ci][r][s] (M channels, `inputs` planes each); `out` is the first channel's
/// output plane.
template <int M, int Rows, bool UnitStride>
void channelRows(const kiln_conv2d_args &a, const PaddedInput &in, const float *source, int64_t inputs,
                 const float *weights, float *out, int64_t oh0) {
  const int64_t taps = a.r * a.s, depth = inputs * taps, outPlane = a.oh * a.ow;
  for (int64_t ow = 0; ow < a.ow; ow += 16) {
    const int64_t count = std::min<int64_t>(16, a.ow - ow);
    const __mmask16 lanes = firstLanes(count);
    __m512 acc[M][Rows];
#pragma GCC unroll 8
    for (int o = 0; o < M; ++o)
#pragma GCC unroll 4
      for (int i = 0; i < Rows; ++i)
        acc[o][i] = _mm512_setzero_ps();
    for (int64_t ci = 0; ci < inputs; ++ci) {
      const float *plane = source + ci * in.plane, *w = weights + ci * taps;
      for (int64_t r = 0; r < a.r; ++r) {
        const float *row = plane + (oh0 * a.stride_h + r * a.dilation_h) * in.width + ow * a.stride_w;
        for (int64_t s = 0; s < a.s; ++s) {
          const float *tap = row + s * a.dilation_w;
          __m512 x[Rows];
#pragma GCC unroll 4
          for (int i = 0; i < Rows; ++i) {
            const float *p = tap + i * a.stride_h * in.width;
            x[i] = UnitStride ? _mm512_maskz_loadu_ps(lanes, p) : loadStrided(p, a.stride_w, count);
          }
          const float *tapWeights = w + r * a.s + s;
#pragma GCC unroll 8
          for (int o = 0; o < M; ++o) {
            const __m512 weight = _mm512_set1_ps(tapWeights[o * depth]);
#pragma GCC unroll 4
            for (int i = 0; i < Rows; ++i)
              acc[o][i] = _mm512_fmadd_ps(weight, x[i], acc[o][i]);
          }
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

using ChannelRowsFn = void (*)(const kiln_conv2d_args &, const PaddedInput &, const float *, int64_t,
                               const float *, float *, int64_t);
#endif

} // namespace kiln::runtime::kernels::detail
