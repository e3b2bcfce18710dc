// kiln::runtime::kernels::pool2d for u8 and s8 planes (KILN_POOL_U8, KILN_POOL_S8): max
// pooling of a quantized tensor, which passes/quantize/QuantizedMaxPool.cpp moves in front of
// a quantize_linear (a quarter of the f32 pool's bytes, and the convolution before it stores
// bytes). Window taps outside the input never win; a window with none inside gives the type's
// lowest value, as quantizing the f32 pool's -inf does.
//
// Per output row, separably: the maxima of the window's input rows, 64 columns a vector, then
// across each output's columns, 64 outputs a vector, each tap a strided gather of that row of
// maxima (ByteColumns.h, its masks worked out once per call). Parallel over (plane, output
// row).
#include <vector>

#include "runtime/kernels/ByteColumns.h"
#include "runtime/kernels/GemmDriver.h" // parallelForIfWorth
#include "runtime/kernels/Pool2dCommon.h"

namespace kiln::runtime::kernels::detail {

namespace {

template <bool Signed> struct Bytes {
  static constexpr uint8_t kLowest = Signed ? 0x80 : 0x00;
  static bool greater(uint8_t a, uint8_t b) {
    return Signed ? static_cast<int8_t>(a) > static_cast<int8_t>(b) : a > b;
  }
#if defined(__AVX512BW__) && defined(__AVX512VBMI__)
  static __m512i max(__m512i a, __m512i b) { return Signed ? _mm512_max_epi8(a, b) : _mm512_max_epu8(a, b); }
#endif
};

#if defined(__AVX512BW__) && defined(__AVX512VBMI__)
/// A 2 x 2, stride-2 pool without padding (VGG's): per 64 outputs, the two rows' 128 bytes
/// combined in registers, then their even and odd columns (vpermt2b). Lanes past the row read
/// 0, which only outputs past the row would see. Through maxPoolRows' row of maxima and strided
/// gathers, VGG16 int8's 64 x 224 x 224 pool took 0.93 ms, more than the f32 one's bytes.
template <bool Signed> void maxPool2x2Rows(const kiln_pool2d_args &a, int64_t begin, int64_t end) {
  using B = Bytes<Signed>;
  alignas(64) uint8_t index[2][64];
  for (int i = 0; i < 64; ++i)
    index[0][i] = static_cast<uint8_t>(2 * i), index[1][i] = static_cast<uint8_t>(2 * i + 1);
  const __m512i even = _mm512_load_si512(index[0]), odd = _mm512_load_si512(index[1]);
  for (int64_t unit = begin; unit < end; ++unit) {
    const int64_t plane = unit / a.oh, oy = unit % a.oh;
    const uint8_t *top = static_cast<const uint8_t *>(a.x_bytes) + (plane * a.h + 2 * oy) * a.w;
    const uint8_t *bottom = top + a.w;
    uint8_t *out = static_cast<uint8_t *>(a.y_bytes) + (plane * a.oh + oy) * a.ow;
    for (int64_t ox0 = 0; ox0 < a.ow; ox0 += 64) {
      const int64_t x0 = 2 * ox0;
      const __mmask64 low = laneRange(0, a.w - x0), high = laneRange(0, a.w - x0 - 64);
      const __m512i first = B::max(_mm512_maskz_loadu_epi8(low, top + x0), _mm512_maskz_loadu_epi8(low, bottom + x0));
      const __m512i second =
          B::max(_mm512_maskz_loadu_epi8(high, top + x0 + 64), _mm512_maskz_loadu_epi8(high, bottom + x0 + 64));
      const __m512i v = B::max(_mm512_permutex2var_epi8(first, even, second), _mm512_permutex2var_epi8(first, odd, second));
      _mm512_mask_storeu_epi8(out + ox0, laneRange(0, a.ow - ox0), v);
    }
  }
}
#endif

template <bool Signed> void maxPoolRows(void *ctx, int64_t begin, int64_t end) {
  using B = Bytes<Signed>;
  const kiln_pool2d_args &a = *static_cast<const kiln_pool2d_args *>(ctx);
#if defined(__AVX512BW__) && defined(__AVX512VBMI__)
  if (a.kernel_h == 2 && a.kernel_w == 2 && a.stride_h == 2 && a.stride_w == 2 && a.dilation_h == 1 &&
      a.dilation_w == 1 && a.pad_top == 0 && a.pad_left == 0 && 2 * a.oh <= a.h && 2 * a.ow <= a.w)
    return maxPool2x2Rows<Signed>(a, begin, end);
#endif
  static thread_local std::vector<uint8_t> maxima;
  maxima.resize(static_cast<size_t>(a.w));
#if defined(__AVX512BW__) && defined(__AVX512VBMI__)
  // The gathers across the window's columns, per block of 64 outputs and kernel column: the
  // same for every row.
  std::vector<ColumnGather> gathers;
  for (int64_t ox0 = 0; ox0 < a.ow; ox0 += 64)
    for (int64_t kx = 0; kx < a.kernel_w; ++kx)
      gathers.emplace_back(ox0 * a.stride_w + kx * a.dilation_w - a.pad_left, a.stride_w, a.w);
#endif
  for (int64_t unit = begin; unit < end; ++unit) {
    const int64_t plane = unit / a.oh, oy = unit % a.oh;
    const uint8_t *in = static_cast<const uint8_t *>(a.x_bytes) + plane * a.h * a.w;
    uint8_t *out = static_cast<uint8_t *>(a.y_bytes) + (plane * a.oh + oy) * a.ow;
    const int64_t baseH = oy * a.stride_h - a.pad_top;
    const TapRange rows = poolTaps(baseH, a.dilation_h, a.kernel_h, 0, a.h);
    if (rows.first == rows.last) {
      std::fill(out, out + a.ow, B::kLowest);
      continue;
    }
    // The window rows' maxima, column by column (the row itself when there is one).
    const uint8_t *row = in + (baseH + rows.first * a.dilation_h) * a.w;
    if (rows.last - rows.first > 1) {
#if defined(__AVX512BW__) && defined(__AVX512VBMI__)
      for (int64_t x0 = 0; x0 < a.w; x0 += 64) {
        const __mmask64 lanes = laneRange(0, a.w - x0);
        __m512i v = _mm512_maskz_loadu_epi8(lanes, row + x0);
        for (int64_t t = rows.first + 1; t < rows.last; ++t)
          v = B::max(v, _mm512_maskz_loadu_epi8(lanes, in + (baseH + t * a.dilation_h) * a.w + x0));
        _mm512_mask_storeu_epi8(maxima.data() + x0, lanes, v);
      }
#else
      std::copy(row, row + a.w, maxima.begin());
      for (int64_t t = rows.first + 1; t < rows.last; ++t)
        for (int64_t x = 0; x < a.w; ++x) {
          const uint8_t v = in[(baseH + t * a.dilation_h) * a.w + x];
          if (B::greater(v, maxima[static_cast<size_t>(x)]))
            maxima[static_cast<size_t>(x)] = v;
        }
#endif
      row = maxima.data();
    }
    // Across the window's columns.
#if defined(__AVX512BW__) && defined(__AVX512VBMI__)
    const __m512i lowest = _mm512_set1_epi8(static_cast<char>(B::kLowest));
    const ColumnGather *gather = gathers.data();
    for (int64_t ox0 = 0; ox0 < a.ow; ox0 += 64) {
      __m512i v = lowest;
      for (int64_t kx = 0; kx < a.kernel_w; ++kx)
        v = B::max(v, (*gather++)(row, lowest));
      _mm512_mask_storeu_epi8(out + ox0, laneRange(0, a.ow - ox0), v);
    }
#else
    for (int64_t ox = 0; ox < a.ow; ++ox) {
      const int64_t baseW = ox * a.stride_w - a.pad_left;
      const TapRange cols = poolTaps(baseW, a.dilation_w, a.kernel_w, 0, a.w);
      uint8_t best = B::kLowest;
      for (int64_t t = cols.first; t < cols.last; ++t)
        if (B::greater(row[baseW + t * a.dilation_w], best))
          best = row[baseW + t * a.dilation_w];
      out[ox] = best;
    }
#endif
  }
}

} // namespace

void maxPoolBytes(const kiln_rt *rt, const kiln_pool2d_args &a) {
  const int64_t units = a.n * a.c * a.oh;
  parallelForIfWorth(rt, units, units * a.ow * a.kernel_h * a.kernel_w, int64_t{1} << 16,
                     a.element == KILN_POOL_S8 ? maxPoolRows<true> : maxPoolRows<false>,
                     const_cast<kiln_pool2d_args *>(&a));
}

} // namespace kiln::runtime::kernels::detail
