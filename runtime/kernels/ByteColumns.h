#pragma once
// Reading a row of bytes at a column stride, 64 lanes at a time, with the columns outside the
// row replaced: the int8 convolution's planes (QConv2d.cpp) and the byte max pool
// (Pool2dBytes.cpp). Internal to runtime/kernels/.
#include <algorithm>
#include <cstdint>

#include "runtime/kernels/Simd.h" // the intrinsics, included as the kernels include them

namespace kiln::runtime::kernels::detail {

/// The outputs [first, last) of `count` whose column x0 + i*stride lies in [0, w).
struct InsideColumns {
  int64_t first, last;
};
inline InsideColumns insideColumns(int64_t x0, int64_t stride, int64_t w, int64_t count) {
  auto ceilDiv = [](int64_t a, int64_t b) { return (a + b - 1) / b; };
  const int64_t first = x0 >= 0 ? 0 : std::min(count, ceilDiv(-x0, stride));
  return {first, std::max(first, std::min(count, x0 >= w ? 0 : ceilDiv(w - x0, stride)))};
}

#if defined(__AVX512BW__) && defined(__AVX512VBMI__)
/// Bits [begin, end) of a 64-bit lane mask, clipped to [0, 64).
inline __mmask64 laneRange(int64_t begin, int64_t end) {
  begin = std::max<int64_t>(begin, 0), end = std::min<int64_t>(end, 64);
  if (end <= begin)
    return 0;
  const uint64_t upTo = end == 64 ? ~uint64_t{0} : (uint64_t{1} << end) - 1;
  return upTo & ~((uint64_t{1} << begin) - 1);
}

/// row[x0 + i*stride] for the 64 lanes i, `outside`'s byte where that is outside [0, w), for
/// row after row at one x0: the masks are worked out once (per row, they were most of the work
/// of a 7-pixel plane row of ResNet-50's stride-2 layers). Stride 1 is one load masked to the
/// row, stride 2 two whose even bytes vpermt2b gathers, others a lane at a time. A masked lane
/// never touches memory, so the edges need no branch.
class ColumnGather {
public:
  ColumnGather(int64_t x0, int64_t stride, int64_t w)
      : x0_(x0), stride_(stride), low_(laneRange(-x0, w - x0)), high_(laneRange(-x0 - 64, w - x0 - 64)) {
    const InsideColumns inside = insideColumns(x0, stride, w, 64);
    first_ = inside.first, last_ = inside.last, inside_ = laneRange(inside.first, inside.last);
  }
  __m512i operator()(const uint8_t *row, __m512i outside) const {
    if (stride_ == 1)
      return _mm512_mask_loadu_epi8(outside, low_, row + x0_);
    __m512i v;
    if (stride_ == 2) {
      static const __m512i kEven = [] {
        alignas(64) uint8_t index[64];
        for (int i = 0; i < 64; ++i)
          index[i] = static_cast<uint8_t>(2 * i);
        return _mm512_load_si512(index);
      }();
      // A row that ends within the first 64 bytes takes one load: a load with no lane set
      // still cost ~13% of a 14 x 14 layer's planes on Zen 5. (vpermb reads its index mod 64:
      // the lanes that wrap read past the row, which inside_ replaces.)
      const __m512i low = _mm512_maskz_loadu_epi8(low_, row + x0_);
      v = high_ ? _mm512_permutex2var_epi8(low, kEven, _mm512_maskz_loadu_epi8(high_, row + x0_ + 64))
                : _mm512_permutexvar_epi8(kEven, low);
    } else {
      alignas(64) uint8_t lanes[64] = {};
      for (int64_t i = first_; i < last_; ++i)
        lanes[i] = row[x0_ + i * stride_];
      v = _mm512_load_si512(lanes);
    }
    return _mm512_mask_mov_epi8(outside, inside_, v);
  }

private:
  int64_t x0_, stride_, first_ = 0, last_ = 0;
  __mmask64 low_, high_, inside_ = 0;
};

#endif

} // namespace kiln::runtime::kernels::detail
