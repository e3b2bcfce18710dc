// kiln::runtime::kernels::pool2d: NCHW f32 max and average pooling (u8 and s8 max pooling in
// Pool2dBytes.cpp). Pools with small output planes run in channel blocks (Pool2dBlocks.cpp);
// the rest plane by plane here, parallel over
// (image, output row) pairs, each thread taking a run of output rows of every channel. That is
// how the convolutions around a pool split their pixels (the GEMM driver numbers its shares
// product by product, pixels within; Winograd splits blocks of tile rows), so each core pools
// the rows it wrote and writes the rows it will read next. Split by planes, a batch-1 pool
// read half its input from the other core, which cost twice its time whenever the two cores
// are on different L3s. Small output planes split by planes all the same
// (kMaxPlaneSplitOutputs): there the bands' shared cache lines cost more. Semantics follow the reference evaluator (ir/ops/Pooling.cpp): window taps outside
// the input never win a max and count in an average's divisor only with count_include_pad,
// and then only inside the padded extent; NaN wins a max; an empty window gives -inf (max) or
// NaN (average of nothing).
//
// The ABI gives only the leading pads, so the padded extent ends at h + pad_top and
// w + pad_left (symmetric padding, what PyTorch exports). That matters only for an average with
// count_include_pad whose last window, with ceil_mode, reaches past the trailing padding.
//
// Each output row splits into a left border, an interior whose windows lie inside the input
// columns, and a right border. The interior runs 16 outputs per vector; borders run scalar.
// A 3x3 stride-2 max (ResNet's stem) runs separably instead: maxima along each input row once,
// border windows masked, then across each output row's three rows (maxPool3x3Stride2). A
// stride-1 pool that keeps the plane's size (Inception's branch pools) runs separably over the
// flattened plane, 16 pixels a vector whatever the row length (poolSameSize). A 2x2 stride-2
// pool without padding (LeNet's, VGG's) combines row pairs, then column pairs (pool2x2Stride2).
#include <algorithm>
#include <cmath>
#include <limits>

#include "runtime/kernels/GemmDriver.h"
#include "runtime/kernels/Kernels.h"
#include "runtime/kernels/Pool2dCommon.h"
#include "runtime/kernels/Simd.h"

namespace kiln::runtime::kernels {

namespace {

/// Output planes up to this many pixels split over threads by whole planes, not by rows: a
/// band of rows per thread shares a cache line with the other band at every plane's boundary,
/// and on small planes that false sharing (the cores at times on different L3s) cost more
/// than reading input the other core wrote. Two Zen 5 threads, pools' time in the model:
/// GoogLeNet's 28x28-7x7 max pools ran 2-6x slower on two threads than ORT (480 channels
/// 28x28 -> 14x14: 0.379 ms against 0.061); split by planes the models took GoogLeNet
/// 9.6-9.9 -> 9.0-9.2 ms, SqueezeNet 2.90 -> 2.82, DenseNet-121 20.8-21.3 -> 20.3-20.7. ResNet-50's
/// 56x56 stem pool keeps rows (its model was 0.5% faster so).
constexpr int64_t kMaxPlaneSplitOutputs = 32 * 32;

/// Planes up to this many pixels take the flattened same-size path (poolSameSize): its 32-bit
/// lane arithmetic and a plane of row windows in the scratch stay small.
constexpr int64_t kMaxSameSizePlane = int64_t{1} << 20;

using detail::poolTaps;
using detail::TapRange;

float finishAverage(float sum, int64_t count) {
  return count > 0 ? sum / static_cast<float>(count) : std::numeric_limits<float>::quiet_NaN();
}

#ifdef __AVX512F__
/// The interior of one output row: every window's columns lie inside the input, and its
/// rows [first, first + rows) too. `origin` is the first window's top-left input element.
struct Window {
  const float *origin;
  int64_t rowStep, rows, kernelW, dilationW, strideW;
};

/// p[0], p[stride], ... for the first `count` lanes, the stride fixed at compile time when it
/// is 1 or 2 (Stride = 0: any).
template <int Stride> __m512 loadLanes(const float *p, int64_t stride, int64_t count) {
  if (Stride == 1 && count >= 16)
    return _mm512_loadu_ps(p);
  return detail::loadStrided(p, Stride ? Stride : stride, count);
}

template <bool IsMax, int Stride>
void poolInterior(const Window &w, int64_t outputs, float inverseCount, float *out) {
  // Four vectors of outputs at a time: four independent max/add chains per tap.
  constexpr int kVectors = 4;
  const int64_t stride = Stride ? Stride : w.strideW;
  for (int64_t o = 0; o < outputs; o += kVectors * 16) {
    int64_t counts[kVectors];
    __m512 acc[kVectors];
    __mmask16 nan[kVectors];
    for (int v = 0; v < kVectors; ++v) {
      counts[v] = std::clamp<int64_t>(outputs - o - v * 16, 0, 16);
      acc[v] = _mm512_set1_ps(IsMax ? -std::numeric_limits<float>::infinity() : 0.0f);
      nan[v] = 0;
    }
    const float *corner = w.origin + o * stride;
    for (int64_t r = 0; r < w.rows; ++r, corner += w.rowStep) {
      for (int64_t s = 0; s < w.kernelW; ++s) {
        const float *tap = corner + s * w.dilationW;
        for (int v = 0; v < kVectors; ++v) {
          if (counts[v] == 0)
            break;
          const __m512 x = loadLanes<Stride>(tap + v * 16 * stride, stride, counts[v]);
          if (IsMax) {
            acc[v] = _mm512_max_ps(acc[v], x);
            nan[v] |= _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q); // NaN wins a max
          } else {
            acc[v] = _mm512_add_ps(acc[v], x);
          }
        }
      }
    }
    for (int v = 0; v < kVectors && counts[v] > 0; ++v) {
      __m512 result = IsMax ? _mm512_mask_blend_ps(nan[v], acc[v], _mm512_set1_ps(std::numeric_limits<float>::quiet_NaN()))
                            : _mm512_mul_ps(acc[v], _mm512_set1_ps(inverseCount));
      _mm512_mask_storeu_ps(out + o + v * 16, detail::firstLanes(counts[v]), result);
    }
  }
}

/// Max of 3 x 3 windows at stride 2 (ResNet's stem pool), separably: each input row's
/// horizontal maxima once (16 windows from two loads, two permutes and a lane shift), then
/// each output row the maximum of its three rows of those. The window-by-window form read every
/// input row three times per output row it feeds, with a two-load permute per tap. `rowMax`
/// holds h x ow floats. Taps outside the input never win; a NaN tap makes the window NaN.
void maxPool3x3Stride2(const kiln_pool2d_args &a, const float *in, float *out, float *rowMax, int64_t oh0,
                       int64_t oh1) {
  const __m512 minusInfVector = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
  const __m512 nanVector = _mm512_set1_ps(std::numeric_limits<float>::quiet_NaN());
  // The shape in locals: read through `a`, every store to the output (which might alias it, as
  // far as the compiler knows) reloaded it, and that bookkeeping was most of a 111-wide row.
  const int64_t h = a.h, w = a.w, outWidth = a.ow, padTop = a.pad_top, padLeft = a.pad_left;
  // The input rows that output rows [oh0, oh1) read; rowMax is indexed by input row.
  const int64_t firstRow = std::max<int64_t>(0, 2 * oh0 - padTop);
  const int64_t lastRow = std::min(h, 2 * (oh1 - 1) - padTop + 3);
  for (int64_t i = firstRow; i < lastRow; ++i) {
    const float *row = in + i * w;
    float *maxima = rowMax + i * outWidth;
    for (int64_t ow = 0; ow < outWidth; ow += 16) {
      const int64_t count = std::min<int64_t>(16, outWidth - ow);
      // Tap 0 of window ow and the floats the windows read from there; those outside the row
      // (the padding, a ceil-mode window past the end) are masked off as -inf, which never
      // wins, so the border windows need no scalar loop.
      const int64_t start = 2 * ow - padLeft, span = 2 * count + 1;
      const float *base = row + start;
      __m512 lo, hi, next;
      if (start >= 0 && start + span <= w) {
        // No border: the masks only end the span, and the lanes past it feed no window that is
        // stored (zero-masked loads: merging -inf into them made SqueezeNet's 111-wide rows
        // 15% slower).
        lo = _mm512_maskz_loadu_ps(detail::firstLanes(span), base);
        hi = _mm512_maskz_loadu_ps(detail::firstLanes(span - 16), base + 16);
        next = _mm512_maskz_loadu_ps(detail::firstLanes(span - 32), base + 32);
      } else {
        const int64_t insideLo = std::max<int64_t>(0, -start), insideHi = std::min(span, w - start);
        auto inside = [&](int64_t from) {
          return static_cast<__mmask16>(detail::firstLanes(insideHi - from) & ~detail::firstLanes(insideLo - from));
        };
        lo = _mm512_mask_loadu_ps(minusInfVector, inside(0), base);
        hi = _mm512_mask_loadu_ps(minusInfVector, inside(16), base + 16);
        next = _mm512_mask_loadu_ps(minusInfVector, inside(32), base + 32);
      }
      const __m512 tap0 = _mm512_permutex2var_ps(lo, even, hi), tap1 = _mm512_permutex2var_ps(lo, odd, hi);
      const __m512 tap2 = _mm512_castsi512_ps(_mm512_alignr_epi32(_mm512_castps_si512(next), _mm512_castps_si512(tap0), 1));
      const __mmask16 nan = _mm512_cmp_ps_mask(tap0, tap0, _CMP_UNORD_Q) | _mm512_cmp_ps_mask(tap1, tap1, _CMP_UNORD_Q) |
                            _mm512_cmp_ps_mask(tap2, tap2, _CMP_UNORD_Q);
      const __m512 best = _mm512_max_ps(_mm512_max_ps(tap0, tap1), tap2);
      _mm512_mask_storeu_ps(maxima + ow, detail::firstLanes(count), _mm512_mask_blend_ps(nan, best, nanVector));
    }
  }
  for (int64_t oh = oh0; oh < oh1; ++oh) {
    const TapRange rows = poolTaps(oh * 2 - padTop, 1, 3, 0, h);
    float *outRow = out + oh * outWidth;
    for (int64_t ow = 0; ow < outWidth; ow += 16) {
      const __mmask16 lanes = detail::firstLanes(outWidth - ow);
      __m512 best = minusInfVector;
      __mmask16 nan = 0;
      for (int64_t r = rows.first; r < rows.last; ++r) {
        const __m512 x = _mm512_maskz_loadu_ps(lanes, rowMax + (oh * 2 - padTop + r) * outWidth + ow);
        best = _mm512_max_ps(best, x);
        nan |= _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
      }
      _mm512_mask_storeu_ps(outRow + ow, lanes, _mm512_mask_blend_ps(nan, best, nanVector));
    }
  }
}

/// Whether every window is a 2 x 2 block at stride 2 inside the input (no padding, dilation 1,
/// no ceil-mode window past the edge): LeNet's and VGG's pools.
bool isPlainTwoByTwo(const kiln_pool2d_args &a) {
  return a.kernel_h == 2 && a.kernel_w == 2 && a.stride_h == 2 && a.stride_w == 2 && a.dilation_h == 1 &&
         a.dilation_w == 1 && a.pad_top == 0 && a.pad_left == 0 && 2 * a.oh <= a.h && 2 * a.ow <= a.w;
}

/// max(x, y) lane by lane, NaN where either is NaN (NaN wins a max).
inline __m512 maxKeepingNaN(__m512 x, __m512 y) {
  return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, y, _CMP_UNORD_Q), _mm512_max_ps(x, y),
                              _mm512_set1_ps(std::numeric_limits<float>::quiet_NaN()));
}

/// Output rows [oh0, oh1) of a plain 2 x 2 stride-2 pool (isPlainTwoByTwo): 16 outputs from
/// two loads of each input row, combined down the rows first, then across even and odd
/// columns. The generic interior loop paid its per-row setup (tap ranges, a strided load and
/// permute per tap) on rows of 14 outputs: LeNet-5's pools ran at ~5 GB/s.
void pool2x2Stride2(const kiln_pool2d_args &a, const float *in, float *out, int64_t oh0, int64_t oh1) {
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
  const __m512 quarter = _mm512_set1_ps(0.25f);
  for (int64_t oh = oh0; oh < oh1; ++oh) {
    const float *top = in + 2 * oh * a.w, *bottom = top + a.w;
    float *outRow = out + oh * a.ow;
    for (int64_t ow = 0; ow < a.ow; ow += 16) {
      const int64_t count = std::min<int64_t>(16, a.ow - ow);
      const __mmask16 loMask = detail::firstLanes(2 * count), hiMask = detail::firstLanes(2 * count - 16);
      const __m512 top0 = _mm512_maskz_loadu_ps(loMask, top + 2 * ow);
      const __m512 top1 = _mm512_maskz_loadu_ps(hiMask, top + 2 * ow + 16);
      const __m512 bottom0 = _mm512_maskz_loadu_ps(loMask, bottom + 2 * ow);
      const __m512 bottom1 = _mm512_maskz_loadu_ps(hiMask, bottom + 2 * ow + 16);
      __m512 result;
      if (a.is_max) {
        const __m512 rows0 = maxKeepingNaN(top0, bottom0), rows1 = maxKeepingNaN(top1, bottom1);
        result = maxKeepingNaN(_mm512_permutex2var_ps(rows0, even, rows1), _mm512_permutex2var_ps(rows0, odd, rows1));
      } else { // every window holds 4 taps of the input
        const __m512 rows0 = _mm512_add_ps(top0, bottom0), rows1 = _mm512_add_ps(top1, bottom1);
        result = _mm512_mul_ps(_mm512_add_ps(_mm512_permutex2var_ps(rows0, even, rows1),
                                             _mm512_permutex2var_ps(rows0, odd, rows1)),
                               quarter);
      }
      _mm512_mask_storeu_ps(outRow + ow, detail::firstLanes(count), result);
    }
  }
}

/// Whether the pool keeps the plane's size at stride 1 (odd kernels, pads of half the kernel:
/// the branch pools of Inception-style nets). Every window then lies inside the padded extent,
/// so count_include_pad divides by the whole kernel.
bool isSameSizeStrideOne(const kiln_pool2d_args &a) {
  return a.stride_h == 1 && a.stride_w == 1 && a.dilation_h == 1 && a.dilation_w == 1 && a.kernel_h % 2 == 1 &&
         a.kernel_w % 2 == 1 && a.pad_top == a.kernel_h / 2 && a.pad_left == a.kernel_w / 2 && a.oh == a.h &&
         a.ow == a.w;
}

/// Output rows [oh0, oh1) of a same-size stride-1 pool (isSameSizeStrideOne), separably over
/// the flattened plane, 16 pixels a vector whatever the row length: first each needed input
/// row's horizontal windows into `rows` (h x w floats), then each output the vertical window of
/// those. A lane's taps past its row's ends (its column, tracked in a vector) or past the
/// plane's top and bottom are masked off: they never win a max and do not count in an
/// average unless count_include_pad. The row-by-row form paid its per-row setup and two
/// scalar border outputs on rows of 7-28 pixels: GoogLeNet's 3x3 branch pools ran at 3-8 ns
/// an output.
template <bool IsMax>
void poolSameSize(const kiln_pool2d_args &a, const float *in, float *out, float *rows, int64_t oh0, int64_t oh1) {
  const int64_t w = a.w, size = a.h * a.w, reachW = a.kernel_w / 2, reachH = a.kernel_h / 2;
  const __m512 fill = _mm512_set1_ps(IsMax ? -std::numeric_limits<float>::infinity() : 0.0f);
  const __m512 nanVector = _mm512_set1_ps(std::numeric_limits<float>::quiet_NaN());
  const __m512i one = _mm512_set1_epi32(1), width = _mm512_set1_epi32(static_cast<int>(w));
  const __m512i columnStep = _mm512_set1_epi32(static_cast<int>(16 % w));
  // The columns of lanes p, p + 1, ... for p a multiple of w.
  alignas(64) int32_t firstColumns[16];
  for (int l = 0; l < 16; ++l)
    firstColumns[l] = static_cast<int32_t>(l % w);
  auto nextColumns = [&](__m512i column) {
    column = _mm512_add_epi32(column, columnStep);
    return _mm512_mask_sub_epi32(column, _mm512_cmpge_epi32_mask(column, width), column, width);
  };
  // The lanes whose row has a pixel s to the left, and s to the right, of theirs.
  auto neighbours = [&](__m512i column, int64_t s) {
    const __m512i offset = _mm512_set1_epi32(static_cast<int>(s));
    return std::make_pair(_mm512_cmpge_epi32_mask(column, offset),
                          _mm512_cmplt_epi32_mask(_mm512_add_epi32(column, offset), width));
  };
  auto combine = [&](__m512 &acc, __mmask16 &nan, __m512 x) {
    if (IsMax) {
      acc = _mm512_max_ps(acc, x);
      nan |= _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q); // NaN wins a max
    } else {
      acc = _mm512_add_ps(acc, x);
    }
  };

  const int64_t rowBegin = std::max<int64_t>(0, oh0 - reachH) * w, rowEnd = std::min(a.h, oh1 + reachH) * w;
  __m512i column = _mm512_load_si512(firstColumns);
  for (int64_t p = rowBegin; p < rowEnd; p += 16, column = nextColumns(column)) {
    const __mmask16 lanes = detail::firstLanes(rowEnd - p);
    __m512 acc = _mm512_mask_loadu_ps(fill, lanes, in + p);
    __mmask16 nan = IsMax ? _mm512_cmp_ps_mask(acc, acc, _CMP_UNORD_Q) : 0;
    for (int64_t s = 1; s <= reachW; ++s) {
      const auto [left, right] = neighbours(column, s);
      combine(acc, nan, _mm512_mask_loadu_ps(fill, lanes & left, in + p - s)); // masked lanes are not read
      combine(acc, nan, _mm512_mask_loadu_ps(fill, lanes & right, in + p + s));
    }
    _mm512_mask_storeu_ps(rows + p, lanes, IsMax ? _mm512_mask_blend_ps(nan, acc, nanVector) : acc);
  }

  const bool wholeKernel = a.count_include_pad != 0;
  const __m512 kernelArea = _mm512_set1_ps(static_cast<float>(a.kernel_h * a.kernel_w));
  const __m512i laneIndex = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  column = _mm512_load_si512(firstColumns);
  for (int64_t p = oh0 * w; p < oh1 * w; p += 16, column = nextColumns(column)) {
    const __mmask16 lanes = detail::firstLanes(oh1 * w - p);
    __m512 acc = _mm512_maskz_loadu_ps(lanes, rows + p);
    __mmask16 nan = 0;
    if (IsMax)
      nan = _mm512_cmp_ps_mask(acc, acc, _CMP_UNORD_Q);
    // Rows and columns of each lane's window inside the plane (averages without the padding).
    __m512i rowsInside = one, columnsInside = one;
    const __m512i pixel = _mm512_add_epi32(_mm512_set1_epi32(static_cast<int>(p)), laneIndex);
    for (int64_t t = 1; t <= reachH; ++t) {
      const __m512i shift = _mm512_set1_epi32(static_cast<int>(t * w));
      const __mmask16 up = lanes & _mm512_cmpge_epi32_mask(pixel, shift);
      const __mmask16 down =
          lanes & _mm512_cmplt_epi32_mask(_mm512_add_epi32(pixel, shift), _mm512_set1_epi32(static_cast<int>(size)));
      combine(acc, nan, _mm512_mask_loadu_ps(fill, up, rows + p - t * w));
      combine(acc, nan, _mm512_mask_loadu_ps(fill, down, rows + p + t * w));
      if (!IsMax && !wholeKernel) {
        rowsInside = _mm512_mask_add_epi32(rowsInside, up, rowsInside, one);
        rowsInside = _mm512_mask_add_epi32(rowsInside, down, rowsInside, one);
      }
    }
    __m512 result;
    if (IsMax) {
      result = _mm512_mask_blend_ps(nan, acc, nanVector);
    } else if (wholeKernel) {
      result = _mm512_div_ps(acc, kernelArea);
    } else {
      for (int64_t s = 1; s <= reachW; ++s) {
        const auto [left, right] = neighbours(column, s);
        columnsInside = _mm512_mask_add_epi32(columnsInside, left, columnsInside, one);
        columnsInside = _mm512_mask_add_epi32(columnsInside, right, columnsInside, one);
      }
      result = _mm512_div_ps(acc, _mm512_cvtepi32_ps(_mm512_mullo_epi32(rowsInside, columnsInside)));
    }
    _mm512_mask_storeu_ps(out + p, lanes, result);
  }
}

using InteriorFn = void (*)(const Window &, int64_t, float, float *);
InteriorFn interiorRow(bool isMax, int64_t stride) {
  if (stride == 1)
    return isMax ? poolInterior<true, 1> : poolInterior<false, 1>;
  if (stride == 2)
    return isMax ? poolInterior<true, 2> : poolInterior<false, 2>;
  return isMax ? poolInterior<true, 0> : poolInterior<false, 0>;
}
#endif

/// Output rows [oh0, oh1) of one plane.
void poolRows(const kiln_pool2d_args &a, int64_t plane, int64_t oh0, int64_t oh1) {
#ifdef __AVX512F__
  if (isPlainTwoByTwo(a)) {
    pool2x2Stride2(a, a.x + plane * a.h * a.w, a.y + plane * a.oh * a.ow, oh0, oh1);
    return;
  }
  if (isSameSizeStrideOne(a) && a.h * a.w <= kMaxSameSizePlane) {
    float *rows = detail::scratch(detail::Scratch::PackedA, static_cast<size_t>(a.h * a.w));
    (a.is_max ? poolSameSize<true> : poolSameSize<false>)(a, a.x + plane * a.h * a.w, a.y + plane * a.oh * a.ow,
                                                          rows, oh0, oh1);
    return;
  }
  if (a.is_max && a.kernel_h == 3 && a.kernel_w == 3 && a.stride_h == 2 && a.stride_w == 2 && a.dilation_h == 1 &&
      a.dilation_w == 1) {
    float *rowMax = detail::scratch(detail::Scratch::PackedA, static_cast<size_t>(a.h * a.ow));
    maxPool3x3Stride2(a, a.x + plane * a.h * a.w, a.y + plane * a.oh * a.ow, rowMax, oh0, oh1);
    return;
  }
#endif
  const float minusInf = -std::numeric_limits<float>::infinity();
  // Interior columns: every tap of the window is inside [0, w).
  auto firstInside = [&](int64_t ow) { return ow * a.stride_w - a.pad_left >= 0; };
  int64_t owLo = 0;
  while (owLo < a.ow && !firstInside(owLo))
    ++owLo;
  int64_t owHi = owLo;
  while (owHi < a.ow && owHi * a.stride_w - a.pad_left + (a.kernel_w - 1) * a.dilation_w < a.w)
    ++owHi;

  {
    const float *in = a.x + plane * a.h * a.w;
    float *out = a.y + plane * a.oh * a.ow;
    for (int64_t oh = oh0; oh < oh1; ++oh) {
      const int64_t baseH = oh * a.stride_h - a.pad_top;
      const TapRange rows = poolTaps(baseH, a.dilation_h, a.kernel_h, 0, a.h);
      float *outRow = out + oh * a.ow;

      auto scalarOutput = [&](int64_t ow) {
        const int64_t baseW = ow * a.stride_w - a.pad_left;
        const TapRange cols = poolTaps(baseW, a.dilation_w, a.kernel_w, 0, a.w);
        float best = minusInf, sum = 0.0f;
        for (int64_t r = rows.first; r < rows.last; ++r) {
          const float *row = in + (baseH + r * a.dilation_h) * a.w + baseW;
          for (int64_t s = cols.first; s < cols.last; ++s) {
            const float v = row[s * a.dilation_w];
            if (v > best || std::isnan(v))
              best = v;
            sum += v;
          }
          if (a.is_max && std::isnan(best))
            break;
        }
        if (a.is_max) {
          outRow[ow] = best;
          return;
        }
        outRow[ow] = finishAverage(sum, detail::averageCount(a, baseH, baseW));
      };

      for (int64_t ow = 0; ow < owLo; ++ow)
        scalarOutput(ow);
      int64_t ow = owLo;
#ifdef __AVX512F__
      if (owLo < owHi && rows.first < rows.last) {
        const int64_t divisor = detail::averageCount(a, baseH, owLo * a.stride_w - a.pad_left);
        const Window window{in + (baseH + rows.first * a.dilation_h) * a.w + owLo * a.stride_w - a.pad_left,
                            a.dilation_h * a.w, rows.last - rows.first, a.kernel_w, a.dilation_w, a.stride_w};
        const auto row = interiorRow(a.is_max != 0, a.stride_w);
        row(window, owHi - owLo, 1.0f / static_cast<float>(divisor), outRow + owLo);
        ow = owHi;
      }
#endif
      for (; ow < a.ow; ++ow)
        scalarOutput(ow);
    }
  }
}

/// Units [begin, end) of the n * oh (image, output row) pairs, image-major: each image's run of
/// rows, in every channel.
void poolRowUnits(void *ctx, int64_t begin, int64_t end) {
  const kiln_pool2d_args &a = *static_cast<const kiln_pool2d_args *>(ctx);
  for (int64_t unit = begin; unit < end;) {
    const int64_t image = unit / a.oh, oh0 = unit % a.oh;
    const int64_t oh1 = std::min(a.oh, oh0 + (end - unit));
    for (int64_t channel = 0; channel < a.c; ++channel)
      poolRows(a, image * a.c + channel, oh0, oh1);
    unit += oh1 - oh0;
  }
}

/// Planes [begin, end), whole: for pools with fewer output rows than threads (a global pool).
void poolPlanes(void *ctx, int64_t begin, int64_t end) {
  const kiln_pool2d_args &a = *static_cast<const kiln_pool2d_args *>(ctx);
  for (int64_t plane = begin; plane < end; ++plane)
    poolRows(a, plane, 0, a.oh);
}

bool validPool(const kiln_pool2d_args &a) {
  if (a.n < 0 || a.c < 0 || a.h < 1 || a.w < 1 || a.oh < 0 || a.ow < 0 || a.kernel_h < 1 || a.kernel_w < 1)
    return false;
  if (a.stride_h < 1 || a.stride_w < 1 || a.dilation_h < 1 || a.dilation_w < 1 || a.pad_top < 0 || a.pad_left < 0)
    return false;
  if (a.element == KILN_POOL_U8 || a.element == KILN_POOL_S8)
    return a.is_max && a.x_bytes && a.y_bytes;
  return a.element == KILN_POOL_F32 && a.x && a.y;
}

} // namespace

namespace detail {

void poolPlaneByPlane(const kiln_rt *rt, const kiln_pool2d_args &a) {
  const int64_t planes = a.n * a.c;
  const int64_t work = planes * a.oh * a.ow * a.kernel_h * a.kernel_w, rowUnits = a.n * a.oh;
  const int threads = threadsOf(rt);
  void *ctx = const_cast<kiln_pool2d_args *>(&a);
  if (threads == 1 || work < (int64_t{1} << 16))
    poolPlanes(ctx, 0, planes);
  else if (rowUnits >= threads && a.oh * a.ow > kMaxPlaneSplitOutputs)
    rt->parallel_for(rt, rowUnits, 1, poolRowUnits, ctx);
  else
    rt->parallel_for(rt, planes, 1, poolPlanes, ctx);
}

} // namespace detail

void pool2d(const kiln_rt *rt, const kiln_pool2d_args *args) {
  if (!args || !validPool(*args))
    return;
  const kiln_pool2d_args &a = *args;
  if (a.n * a.c == 0 || a.oh == 0 || a.ow == 0)
    return;
  if (a.element != KILN_POOL_F32)
    return detail::maxPoolBytes(rt, a);
  // Small planes in channel blocks, but for the plain 2 x 2 stride-2 pool, whose plane-by-plane
  // form streams at ~55 GB/s (256 channels 56x56: 0.072 ms against 0.145 in blocks).
  if (!isPlainTwoByTwo(a) && detail::channelBlockPool(a))
    return detail::poolChannelBlocks(rt, a);
  detail::poolPlaneByPlane(rt, a);
}

} // namespace kiln::runtime::kernels
