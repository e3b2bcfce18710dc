#pragma once
// Channel blocks: 16 NCHW planes of one image side by side in the lanes of a vector, a
// pixel-major buffer t[row][column][16], so that a window op over the planes (depthwise
// convolution, Conv2dDepthwiseBlocks.cpp; pooling, Pool2dBlocks.cpp) reads every tap of every
// output as one aligned vector whatever the stride, dilation or padding, and small planes
// waste no lanes. Into a block and back out the planes go 16x16 at a time, transposed in
// registers. Internal to runtime/kernels/.
#include <algorithm>
#include <cstdint>

#include "runtime/kernels/PostOps.h" // PostKind, withPostKind
#include "runtime/kernels/Simd.h"

namespace kiln::runtime::kernels::detail {

constexpr int64_t kBlockLanes = 16; // channels per block, one per lane

#ifdef __AVX512F__

/// Prefetches the next block's planes while this one computes, a share at a time: a block
/// reads 16 planes at once, 16 streams that the hardware prefetchers do not run ahead of once
/// the planes come from L3 or memory (MobileNetV2 at batch 8: its 14x14 depthwise layers took
/// twice ORT's time, while the same layer at batch 1, in L2, took less than ORT's).
class PlanePrefetch {
public:
  /// Rows [row0, row1) of `count` planes of `plane` floats, the first at x, in `steps` shares.
  void start(const float *x, int64_t plane, int64_t count, int64_t w, int64_t row0, int64_t row1, int64_t steps) {
    line_ = reinterpret_cast<const char *>(x + row0 * w);
    planeBytes_ = plane * int64_t{sizeof(float)};
    linesPerPlane_ = ((row1 - row0) * w * int64_t{sizeof(float)} + 63) / 64 + 1; // +1: unaligned starts
    planesLeft_ = count;
    lineInPlane_ = 0;
    perStep_ = (linesPerPlane_ * count + std::max<int64_t>(steps, 1) - 1) / std::max<int64_t>(steps, 1);
  }
  void step() {
    for (int64_t k = 0; k < perStep_ && planesLeft_ > 0; ++k) {
      _mm_prefetch(line_ + lineInPlane_ * 64, _MM_HINT_T0);
      if (++lineInPlane_ == linesPerPlane_)
        lineInPlane_ = 0, line_ += planeBytes_, --planesLeft_;
    }
  }

private:
  const char *line_ = nullptr; // the current plane's first line
  int64_t planeBytes_ = 0, linesPerPlane_ = 0, planesLeft_ = 0, lineInPlane_ = 0, perStep_ = 0;
};

/// Rows [row0, row1) of `count` (1..16) planes of h x w pixels (the first at x, planes h*w
/// apart) into block t, `cols` positions wide, at row offset padTop and column offset
/// padLeft; positions outside those rows and columns are left as they are (the caller fills
/// the padding once). The rows are read flat, 16 pixels of each plane per load whatever the
/// width: a 7x7 plane takes 4 transposes, not one per row.
inline void fillChannelBlock(const float *x, int64_t h, int64_t w, int64_t padTop, int64_t padLeft, int64_t cols,
                             int64_t count, int64_t row0, int64_t row1, float *t) {
  const int64_t plane = h * w, end = row1 * w;
  float *interior = t + (padTop * cols + padLeft) * kBlockLanes;
  int64_t ih = row0, iw = 0; // of the pixel at hand, walked without divisions
  for (int64_t q0 = row0 * w; q0 < end; q0 += 16) {
    const int64_t n = std::min<int64_t>(16, end - q0);
    const __mmask16 pixels = firstLanes(n);
    __m512 v[16];
#pragma GCC unroll 16
    for (int l = 0; l < 16; ++l)
      v[l] = l < count ? _mm512_maskz_loadu_ps(pixels, x + l * plane + q0) : _mm512_setzero_ps();
    transpose16x16(v);
    for (int64_t u = 0; u < n; ++u) {
      _mm512_store_ps(interior + (ih * cols + iw) * kBlockLanes, v[u]);
      if (++iw == w)
        iw = 0, ++ih;
    }
  }
}

/// Outputs [begin, end) of the pixel-major `computed` (16 floats a position) into `count`
/// planes of `outputs` pixels (the first at y), 16 pixels at a time, with post ops of kind
/// Kind applied to each pixel's vector on the way (`bias`: a lane per channel). (GemmPack's
/// transposeCopy does the same out of line, in general loops: 5-10% slower on 7x7 and 14x14
/// layers, whose whole time this pass is a good part of. Applied per vector as the pixels were
/// computed, with a test and a switch each, the post ops had cost a 3x3 72-channel 56x56
/// depthwise layer a third of its time.)
template <PostKind Kind>
void storeChannelBlock(const float *computed, int64_t count, int64_t outputs, int64_t begin, int64_t end, __m512 bias,
                       const TilePostOps &post, float *y) {
  for (int64_t q0 = begin; q0 < end; q0 += 16) {
    const int64_t n = std::min<int64_t>(16, end - q0);
    __m512 v[16];
#pragma GCC unroll 16
    for (int u = 0; u < 16; ++u)
      v[u] = u < n ? withPostKind<Kind>(_mm512_load_ps(computed + (q0 + u) * kBlockLanes), bias, post)
                   : _mm512_setzero_ps();
    transpose16x16(v);
    const __mmask16 lanes = firstLanes(n);
    for (int64_t l = 0; l < count; ++l)
      _mm512_mask_storeu_ps(y + l * outputs + q0, lanes, v[l]);
  }
}

#endif

} // namespace kiln::runtime::kernels::detail
