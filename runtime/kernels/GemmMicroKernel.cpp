// The table of micro-kernel instantiations: every tile of R = 1..6 rows and 1..4 vectors of 16
// columns, with A packed or read in place. Edge tiles get their exact shape, so no FMA is
// spent on rows that do not exist (an M = 49 product runs 8 tiles of 6 rows and one of 1).
#include "runtime/kernels/GemmMicroKernel.h"

#include <utility>

namespace kiln::runtime::kernels::detail {

namespace {

template <bool PackedA, int... Rows, int... Vectors>
constexpr auto makeTable(std::integer_sequence<int, Rows...>, std::integer_sequence<int, Vectors...> vectors) {
  struct Table {
    MicroKernelFn fns[kMaxRows][kMaxVectors];
  } table{};
  auto fillRow = [&](auto rowTag) {
    constexpr int R = decltype(rowTag)::value;
    ((table.fns[R - 1][Vectors - 1] = &microKernelImpl<R, Vectors, PackedA>), ...);
  };
  (fillRow(std::integral_constant<int, Rows>{}), ...);
  (void)vectors;
  return table;
}

using RowCounts = std::integer_sequence<int, 1, 2, 3, 4, 5, 6>;
using VectorCounts = std::integer_sequence<int, 1, 2, 3, 4>;
static_assert(kMaxRows == 6 && kMaxVectors == 4, "update RowCounts and VectorCounts");

const auto kPackedTable = makeTable<true>(RowCounts{}, VectorCounts{});
const auto kInPlaceTable = makeTable<false>(RowCounts{}, VectorCounts{});

} // namespace

MicroKernelFn microKernel(int rows, int vectors, bool packedA) {
  return packedA ? kPackedTable.fns[rows - 1][vectors - 1]
                 : kInPlaceTable.fns[rows - 1][vectors - 1];
}

void columnDotKernel(int rows, int64_t kc, const float *a, int64_t lda, const float *column, float *c,
                     int64_t ldc, int flags) {
  float sums[kMaxRows];
#ifdef __AVX512F__
  __m512 acc[kMaxRows];
  for (int i = 0; i < rows; ++i)
    acc[i] = _mm512_setzero_ps();
  for (int64_t k = 0; k < kc; k += kVector) {
    const __mmask16 lanes = firstLanes(kc - k);
    const __m512 b = _mm512_maskz_loadu_ps(lanes, column + k);
    for (int i = 0; i < rows; ++i)
      acc[i] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(lanes, a + i * lda + k), b, acc[i]);
  }
  for (int i = 0; i < rows; ++i)
    sums[i] = _mm512_reduce_add_ps(acc[i]);
#else
  for (int i = 0; i < rows; ++i) {
    sums[i] = 0.0f;
    for (int64_t k = 0; k < kc; ++k)
      sums[i] += a[i * lda + k] * column[k];
  }
#endif
  for (int i = 0; i < rows; ++i)
    c[i * ldc] = (flags & kAccumulate) ? c[i * ldc] + sums[i] : sums[i];
}

} // namespace kiln::runtime::kernels::detail
