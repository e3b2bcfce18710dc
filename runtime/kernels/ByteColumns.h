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

/// row[x0 + i*stride] for the 64 lanes i, `outside`'s byte where that is outside [0, w):
/// stride 1 as one load masked to the row, stride 2 as two whose even bytes vpermt2b gathers,
/// others a lane at a time. A masked lane never touches memory, so the edges need no branch.
inline __m512i gatherColumns(const uint8_t *row, int64_t x0, int64_t stride, int64_t w, __m512i outside) {
  if (stride == 1)
    return _mm512_mask_loadu_epi8(outside, laneRange(-x0, w - x0), row + x0);
  const InsideColumns inside = insideColumns(x0, stride, w, 64);
  __m512i v;
  if (stride == 2) {
    static const __m512i kEven = [] {
      alignas(64) uint8_t index[64];
      for (int i = 0; i < 64; ++i)
        index[i] = static_cast<uint8_t>(2 * i);
      return _mm512_load_si512(index);
    }();
    const __m512i low = _mm512_maskz_loadu_epi8(laneRange(-x0, w - x0), row + x0);
    const __m512i high = _mm512_maskz_loadu_epi8(laneRange(-x0 - 64, w - x0 - 64), row + x0 + 64);
    v = _mm512_permutex2var_epi8(low, kEven, high);
  } else {
    alignas(64) uint8_t lanes[64] = {};
    for (int64_t i = inside.first; i < inside.last; ++i)
      lanes[i] = row[x0 + i * stride];
    v = _mm512_load_si512(lanes);
  }
  return _mm512_mask_mov_epi8(outside, laneRange(inside.first, inside.last), v);
}
#endif

} // namespace kiln::runtime::kernels::detail
