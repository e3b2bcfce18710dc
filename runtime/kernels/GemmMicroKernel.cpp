// The tables of kernel instantiations: micro-kernels for every tile of R = 1..6 rows and 1..4
// vectors of 16 columns, with A packed or read in place, and column dot kernels for 1..6 rows
// by 1..4 columns. Edge tiles get their exact shape, so no FMA is spent on rows that do not
// exist (an M = 49 product runs 8 tiles of 6 rows and one of 1).
#include "runtime/kernels/GemmMicroKernel.h"


namespace kiln::runtime::kernels::detail {

namespace {

template <int R, int Cols>
void columnDotImpl(int64_t kc, const float *a, int64_t lda, const float *columns, float *c, int64_t ldc,
                   int flags) {
  float sums[R][Cols];
#ifdef __AVX512F__
  __m512 acc[R][Cols];
  for (int i = 0; i < R; ++i)
    for (int j = 0; j < Cols; ++j)
      acc[i][j] = _mm512_setzero_ps();
  for (int64_t k = 0; k < kc; k += kVector) {
    const __mmask16 lanes = firstLanes(kc - k);
    __m512 b[Cols];
    for (int j = 0; j < Cols; ++j)
      b[j] = _mm512_maskz_loadu_ps(lanes, columns + j * kc + k);
    for (int i = 0; i < R; ++i) {
      const __m512 av = _mm512_maskz_loadu_ps(lanes, a + i * lda + k);
      for (int j = 0; j < Cols; ++j)
        acc[i][j] = _mm512_fmadd_ps(av, b[j], acc[i][j]);
    }
  }
  for (int i = 0; i < R; ++i)
    for (int j = 0; j < Cols; ++j)
      sums[i][j] = _mm512_reduce_add_ps(acc[i][j]);
#else
  for (int i = 0; i < R; ++i)
    for (int j = 0; j < Cols; ++j) {
      sums[i][j] = 0.0f;
      for (int64_t k = 0; k < kc; ++k)
        sums[i][j] += a[i * lda + k] * columns[j * kc + k];
    }
#endif
  for (int i = 0; i < R; ++i)
    for (int j = 0; j < Cols; ++j)
      c[i * ldc + j] = (flags & kAccumulate) ? c[i * ldc + j] + sums[i][j] : sums[i][j];
}

using ColumnDotFn = void (*)(int64_t, const float *, int64_t, const float *, float *, int64_t, int);

template <bool PackedA> struct MicroKernelOf {
  template <int R, int NV> struct Tile {
    static constexpr MicroKernelFn fn = &microKernelImpl<R, NV, PackedA>;
  };
};
template <int R, int Cols> struct ColumnDotOf {
  static constexpr ColumnDotFn fn = &columnDotImpl<R, Cols>;
};

using DotColumnCounts = std::integer_sequence<int, 1, 2, 3, 4>;
static_assert(kMaxDotColumns == 4, "update DotColumnCounts");

const auto kPackedTable = makeTable<MicroKernelFn, MicroKernelOf<true>::Tile>(RowCounts{}, VectorCounts{});
const auto kInPlaceTable = makeTable<MicroKernelFn, MicroKernelOf<false>::Tile>(RowCounts{}, VectorCounts{});
const auto kDotTable = makeTable<ColumnDotFn, ColumnDotOf>(RowCounts{}, DotColumnCounts{});

} // namespace

MicroKernelFn microKernel(int rows, int vectors, bool packedA) {
  return packedA ? kPackedTable.fns[rows - 1][vectors - 1]
                 : kInPlaceTable.fns[rows - 1][vectors - 1];
}

void columnDotKernel(int rows, int columnCount, int64_t kc, const float *a, int64_t lda, const float *columns,
                     float *c, int64_t ldc, int flags) {
  kDotTable.fns[rows - 1][columnCount - 1](kc, a, lda, columns, c, ldc, flags);
}

} // namespace kiln::runtime::kernels::detail
