// Max and average pooling over channel blocks (Pool2dCommon.h, ChannelBlocks.h).
//
// Plane by plane (Pool2d.cpp), 16 outputs along a row are a vector, and a small plane pays its
// setup, its border lanes and, at stride 2, its even/odd permutes per row: GoogLeNet's 3x3/2
// pool of 480 channels 28x28 -> 14x14 took 0.145 ms on one Zen 5 core where ORT's, over
// channel-blocked data, took 0.034. Here a work item is one image's block of 16 channels:
//  1. the planes are transposed into one block t[row][column][16], its padding filled with
//     -inf (max: never wins) or 0 (average: adds nothing), so that every window is whole;
//  2. each output is the max or sum over its window's taps, one aligned vector each, four
//     outputs at a time (four independent chains), NaN made to win a max as the reference
//     evaluator has it; an average is divided by its window's count of taps inside the input
//     (or the padded extent, with count_include_pad), summed in the evaluator's order;
//  3. the outputs go back into the planes, 16 pixels at a time.
// One Zen 5 core, kiln-gemm-bench --pool (plane by plane -> blocks): 3x3/2 480 channels
// 28x28 0.114 -> 0.069-0.079 ms, 3x3/1 480 14x14 0.060 -> 0.037-0.046, 832 7x7 0.050 ->
// 0.017, average 3x3/1 768 17x17 0.115 -> 0.086, 2048 8x8 0.111 -> 0.046; 192 28x28 even
// (0.074 against 0.065-0.075). GoogLeNet's pools 1.06 -> 0.82 ms in the model. Larger planes
// stay plane by plane: there a vector of 16 outputs along a row wastes nothing.
#include <algorithm>
#include <limits>
#include <vector>

#include "runtime/kernels/ChannelBlocks.h"
#include "runtime/kernels/GemmDriver.h"
#include "runtime/kernels/GemmPack.h" // scratch
#include "runtime/kernels/Pool2dCommon.h"

namespace kiln::runtime::kernels::detail {

namespace {

// A thread's scratch at most: the padded block and the computed outputs (8 MiB).
constexpr int64_t kMaxScratchFloats = int64_t{1} << 21;
// Output planes up to this many pixels pool in channel blocks (channelBlockPool).
constexpr int64_t kMaxBlockOutputs = 28 * 28;
constexpr int kOutputs = 4; // outputs computed together

/// The padded block of a pool: the positions the windows reach, and at least the input and
/// its leading pads.
struct BlockShape {
  int64_t rows = 0, cols = 0;
};
BlockShape blockShape(const kiln_pool2d_args &a) {
  BlockShape b;
  b.rows = std::max(a.pad_top + a.h, (a.oh - 1) * a.stride_h + (a.kernel_h - 1) * a.dilation_h + 1);
  b.cols = std::max(a.pad_left + a.w, (a.ow - 1) * a.stride_w + (a.kernel_w - 1) * a.dilation_w + 1);
  return b;
}

#ifdef __AVX512F__

struct PoolJob {
  const kiln_pool2d_args &a;
  BlockShape shape;
  const float *divisors; // averages: per output pixel, its window's count of taps
};

/// Outputs [ow, ow + count) (count <= kOutputs) of output row oh of one block into `out`. KH
/// and KW: the kernel, when fixed at compile time (3x3, undilated), else 0.
template <bool IsMax, int KH, int KW>
inline void blockOutputs(const PoolJob &job, const float *t, int64_t oh, int64_t ow, int count, float *out) {
  const kiln_pool2d_args &a = job.a;
  const int64_t cols = job.shape.cols;
  const int64_t kernelH = KH ? KH : a.kernel_h, kernelW = KW ? KW : a.kernel_w;
  const int64_t dilationH = KH ? 1 : a.dilation_h, dilationW = KW ? 1 : a.dilation_w;
  __m512 acc[kOutputs];
  __mmask16 nan[kOutputs] = {};
#pragma GCC unroll 4
  for (int p = 0; p < kOutputs; ++p)
    acc[p] = IsMax ? _mm512_set1_ps(-std::numeric_limits<float>::infinity()) : _mm512_setzero_ps();
  const float *origin = t + (oh * a.stride_h * cols + ow * a.stride_w) * kBlockLanes;
#pragma GCC unroll 3
  for (int64_t r = 0; r < kernelH; ++r)
#pragma GCC unroll 3
    for (int64_t s = 0; s < kernelW; ++s) {
      const float *tap = origin + (r * dilationH * cols + s * dilationW) * kBlockLanes;
#pragma GCC unroll 4
      for (int p = 0; p < kOutputs; ++p) {
        if (p >= count)
          break;
        const __m512 x = _mm512_load_ps(tap + p * a.stride_w * kBlockLanes);
        if (IsMax) {
          acc[p] = _mm512_max_ps(acc[p], x);
          nan[p] |= _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q); // NaN wins a max
        } else {
          acc[p] = _mm512_add_ps(acc[p], x);
        }
      }
    }
#pragma GCC unroll 4
  for (int p = 0; p < kOutputs; ++p) {
    if (p >= count)
      break;
    const __m512 v = IsMax ? _mm512_mask_blend_ps(nan[p], acc[p], _mm512_set1_ps(std::numeric_limits<float>::quiet_NaN()))
                           : _mm512_div_ps(acc[p], _mm512_set1_ps(job.divisors[oh * a.ow + ow + p]));
    _mm512_store_ps(out + p * kBlockLanes, v);
  }
}

/// Work items [begin, end) of (image, block of 16 channels).
template <bool IsMax, int KH, int KW>
void poolBlocks(void *ctx, int64_t begin, int64_t end) {
  const PoolJob &job = *static_cast<const PoolJob *>(ctx);
  const kiln_pool2d_args &a = job.a;
  const BlockShape &b = job.shape;
  const int64_t blocks = (a.c + kBlockLanes - 1) / kBlockLanes, outputs = a.oh * a.ow;
  const int64_t blockFloats = b.rows * b.cols * kBlockLanes;
  float *t = scratch(Scratch::PoolBlock, static_cast<size_t>(blockFloats + outputs * kBlockLanes));
  float *computed = t + blockFloats;
  // Blocks rewrite only the block's interior: the padding is filled once.
  std::fill_n(t, blockFloats, IsMax ? -std::numeric_limits<float>::infinity() : 0.0f);
  const TilePostOps none;
  for (int64_t item = begin; item < end; ++item) {
    const int64_t image = item / blocks, c0 = item % blocks * kBlockLanes;
    const int64_t count = std::min(kBlockLanes, a.c - c0);
    fillChannelBlock(a.x + (image * a.c + c0) * a.h * a.w, a.h, a.w, a.pad_top, a.pad_left, b.cols, count, 0, a.h, t);
    for (int64_t oh = 0; oh < a.oh; ++oh)
      for (int64_t ow = 0; ow < a.ow; ow += kOutputs)
        blockOutputs<IsMax, KH, KW>(job, t, oh, ow, static_cast<int>(std::min<int64_t>(kOutputs, a.ow - ow)),
                            computed + (oh * a.ow + ow) * kBlockLanes);
    storeChannelBlock<PostKind::None>(computed, count, outputs, 0, outputs, _mm512_setzero_ps(), none,
                                      a.y + (image * a.c + c0) * outputs);
  }
}

#endif

} // namespace

bool channelBlockPool(const kiln_pool2d_args &a) {
#ifdef __AVX512F__
  const BlockShape b = blockShape(a);
  return a.oh * a.ow <= kMaxBlockOutputs && (b.rows * b.cols + a.oh * a.ow) * kBlockLanes <= kMaxScratchFloats;
#else
  (void)a;
  return false;
#endif
}

void poolChannelBlocks(const kiln_rt *rt, const kiln_pool2d_args &a) {
#ifdef __AVX512F__
  // Averages: each output pixel's divisor, the same for every channel.
  thread_local std::vector<float> divisors;
  if (!a.is_max) {
    divisors.resize(static_cast<size_t>(a.oh * a.ow));
    for (int64_t oh = 0; oh < a.oh; ++oh)
      for (int64_t ow = 0; ow < a.ow; ++ow)
        divisors[static_cast<size_t>(oh * a.ow + ow)] = static_cast<float>(
            averageCount(a, oh * a.stride_h - a.pad_top, ow * a.stride_w - a.pad_left));
  }
  PoolJob job{a, blockShape(a), divisors.data()};
  const int64_t items = a.n * ((a.c + kBlockLanes - 1) / kBlockLanes);
  const bool threeByThree = a.kernel_h == 3 && a.kernel_w == 3 && a.dilation_h == 1 && a.dilation_w == 1;
  const kiln_range_fn fn = threeByThree ? (a.is_max ? poolBlocks<true, 3, 3> : poolBlocks<false, 3, 3>)
                                        : (a.is_max ? poolBlocks<true, 0, 0> : poolBlocks<false, 0, 0>);
  parallelForIfWorth(rt, items, a.n * a.c * a.oh * a.ow * a.kernel_h * a.kernel_w, int64_t{1} << 16, fn, &job);
#else
  (void)rt, (void)a;
#endif
}

} // namespace kiln::runtime::kernels::detail
