#pragma once
// The GEMM micro-kernel: C[R x W] (+)= A[R x kc] * B[kc x W] with the whole C tile in
// registers. Internal to runtime/kernels/.
//
// Tile shape. The main tile is 6 rows x 64 columns (4 zmm per row): 24 accumulators hide the
// 4-cycle FMA latency on Zen 5's two 512-bit pipes (>= 8 independent chains needed), and each
// k-step costs 4 vector loads of B plus 6 broadcast loads of A for 24 FMAs, which leaves load
// bandwidth to spare. Measured on this machine (one core): with L1-resident operands the tile
// runs at ~215-220 GFLOP/s (8x48 and 7x48 ~200-219, 12x32 and 14x32 ~145 as g++ compiles
// them); broadcasting from memory inside the FMAs ({1to16}) instead was slower (~180). In a
// whole 1024^3 GEMM, 6x64 beat 14x32, 24x16 and 8x48 too.
// Edge tiles use the same code instantiated for R = 1..6 rows and 1..4 vectors; the last
// vector's columns are masked on the C side only (B panels are zero-padded). A last vector that
// would hold 1-4 columns goes to columnDotKernel instead, when A is read in place.
//
// Operand layouts (see GemmPack.h):
//  - B is packed (for each k, W = 16*NV contiguous floats, a 64-byte aligned panel) or, a
//    row-major B whose columns fill whole vectors, read in place with its rows ldb apart.
//  - A is packed (a[k*R + i]) or read in place from a row-major matrix (a[i*lda + k]); the
//    latter saves a copy for the common untransposed A (weights of conv and linear layers).
//  - C is row-major (c[i*ldc + j]) or, when the driver computes C^T = B^T A^T to turn a
//    narrow-N product into a wide one, written transposed (c[j*ldc + i]).
#include <cstdint>
#include <utility>

#include "runtime/kernels/PostOps.h" // TilePostOps, withPostOps
#include "runtime/kernels/Simd.h"    // <immintrin.h>, firstLanes, transpose16x16

namespace kiln::runtime::kernels::detail {

constexpr int kVector = 16;               // floats per packed-B column group (one zmm)
constexpr int kMaxRows = 6;               // MR: rows of the main tile
constexpr int kMaxVectors = 4;            // NR / 16
constexpr int kPanelWidth = kVector * kMaxVectors; // NR = 64 columns

/// fns[R - 1][C - 1] = Kernel<R, C>::fn for every R in Rows and C in Cols.
template <typename Fn, template <int, int> class Kernel, int... Rows, int... Cols>
constexpr auto makeTable(std::integer_sequence<int, Rows...>, std::integer_sequence<int, Cols...> cols) {
  struct Table {
    Fn fns[sizeof...(Rows)][sizeof...(Cols)];
  } table{};
  auto fillRow = [&](auto rowTag) {
    constexpr int R = decltype(rowTag)::value;
    ((table.fns[R - 1][Cols - 1] = Kernel<R, Cols>::fn), ...);
  };
  (fillRow(std::integral_constant<int, Rows>{}), ...);
  (void)cols;
  return table;
}

/// The tile shapes a table of kernels covers: 1..kMaxRows rows by 1..kMaxVectors vectors.
using RowCounts = std::integer_sequence<int, 1, 2, 3, 4, 5, 6>;
using VectorCounts = std::integer_sequence<int, 1, 2, 3, 4>;
static_assert(kMaxRows == 6 && kMaxVectors == 4, "update RowCounts and VectorCounts");

/// Store modes of a micro-kernel call.
enum MicroKernelFlags : int {
  kAccumulate = 1,   // add to C (a later K block) instead of overwriting it
  kTransposedC = 2,  // the tile is C^T: element (i, j) goes to c[j*ldc + i]
  kPrefetchNextA = 4 // A in place: fetch the next 6 rows' same columns into L1 along the way
};

/// kc >= 1 steps. B's row k starts at b + k*ldb: the packed panel's width, which is wider than
/// 16*NV when the driver leaves a panel's last vector to columnDotKernel. `cols` (1..16*NV) is
/// how many of the tile's columns exist in C. `post` (may be null; never with kTransposedC):
/// post ops applied to the tile's final values as they are stored.
using MicroKernelFn = void (*)(int64_t kc, const float *a, int64_t lda, const float *b, int64_t ldb, float *c,
                               int64_t ldc, int64_t cols, int flags, const TilePostOps *post);

/// The kernel for an R x (16*NV) tile; packedA selects a[k*R + i] over a[i*lda + k].
MicroKernelFn microKernel(int rows, int vectors, bool packedA);

/// The most trailing columns of a panel that the driver computes as dot products.
constexpr int kMaxDotColumns = 4;

/// Columns [0, columnCount) of a row-major C tile (1..kMaxDotColumns of them) as `rows` (1..6)
/// rows of dot products along k: c[i*ldc + j] (+)= sum over k < kc of a[i*lda + k] *
/// columns[j*kc + k], A read in place and each column k-contiguous. The driver uses it for
/// the few columns in a panel's last vector (49 = 3*16 + 1 pixels of a 7x7 output, 196 =
/// 12*16 + 4 of a 14x14 one): 16 k-steps of a column's dot products cost `rows` FMAs, where a
/// micro-kernel vector would cost 16*rows however few of its columns exist.
void columnDotKernel(int rows, int columnCount, int64_t kc, const float *a, int64_t lda, const float *columns,
                     float *c, int64_t ldc, int flags);

#ifdef __AVX512F__

/// Stores an R x (16*NV) tile held as acc[i][j] (row i, columns 16j..16j+15) transposed: tile
/// column x (< cols) becomes the R consecutive floats at c + x*ldc, added to what is there when
/// `accumulate`. Each 16-column slice is transposed in registers, then one masked store per
/// column.
template <int R, int NV>
inline void storeTileTransposed(const __m512 (&acc)[R][NV], float *c, int64_t ldc, int64_t cols, bool accumulate) {
  const __mmask16 rowMask = firstLanes(R);
#pragma GCC unroll 4
  for (int j = 0; j < NV; ++j) {
    __m512 slice[16];
#pragma GCC unroll 16
    for (int i = 0; i < 16; ++i)
      slice[i] = i < R ? acc[i][j] : _mm512_setzero_ps();
    transpose16x16(slice);
    const int64_t sliceCols = cols - j * kVector < kVector ? cols - j * kVector : kVector;
    for (int64_t t = 0; t < sliceCols; ++t) {
      float *out = c + (j * kVector + t) * ldc;
      __m512 v = slice[t];
      if (accumulate)
        v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(rowMask, out));
      _mm512_mask_storeu_ps(out, rowMask, v);
    }
  }
}

// Always inlined: called out of line, the accumulators go through the stack (GCC stops
// inlining it once the post ops' code grows; 1x1 16->96 on 112x112 then took 0.28 ms, not 0.21).
template <int R, int NV>
inline __attribute__((always_inline)) void storeTile(const __m512 (&acc)[R][NV], float *c, int64_t ldc,
                                                     int64_t cols, int flags, const TilePostOps *post = nullptr);

template <int R, int NV, bool PackedA>
void microKernelImpl(int64_t kc, const float *a, int64_t lda, const float *b, int64_t ldb, float *c,
                     int64_t ldc, int64_t cols, int flags, const TilePostOps *post) {
  // Touch the C tile now so that its lines arrive during the k loop, not at the store.
  if (!(flags & kTransposedC)) {
#pragma GCC unroll 8
    for (int i = 0; i < R; ++i)
#pragma GCC unroll 4
      for (int j = 0; j < NV; ++j)
        _mm_prefetch(reinterpret_cast<const char *>(c + i * ldc + j * kVector), _MM_HINT_T0);
  }
  __m512 acc[R][NV];
#pragma GCC unroll 8
  for (int i = 0; i < R; ++i)
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j)
      acc[i][j] = _mm512_setzero_ps();

  const float *rowPtr[R];
#pragma GCC unroll 8
  for (int i = 0; i < R; ++i)
    rowPtr[i] = a + i * lda;
  // The driver's first tile of a row tile asks for the rows of its next one, which in a
  // narrow product (7x7 outputs: one tile per row tile) stream from memory otherwise, the
  // FMAs waiting on them: one line of each next row per 16 steps, one tile ahead.
  const bool prefetchNext = !PackedA && (flags & kPrefetchNextA);
  for (int64_t k = 0; k < kc; ++k) {
    if (prefetchNext && (k & 15) == 0) {
#pragma GCC unroll 8
      for (int i = 0; i < kMaxRows; ++i)
        _mm_prefetch(reinterpret_cast<const char *>(a + (R + i) * lda + k), _MM_HINT_T0);
    }
    __m512 bv[NV];
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j)
      bv[j] = _mm512_loadu_ps(b + j * kVector); // prepacked panels need not be aligned
#pragma GCC unroll 8
    for (int i = 0; i < R; ++i) {
      const __m512 av = _mm512_set1_ps(PackedA ? a[i] : rowPtr[i][k]);
#pragma GCC unroll 4
      for (int j = 0; j < NV; ++j)
        acc[i][j] = _mm512_fmadd_ps(av, bv[j], acc[i][j]);
    }
    if (PackedA)
      a += R;
    b += ldb;
  }

  storeTile(acc, c, ldc, cols, flags, post);
}

/// Rows of a tile into row-major C (storeTile), with post ops (as ClampPost) when Post.
template <int R, int NV, bool Post>
inline __attribute__((always_inline)) void storeRows(const __m512 (&acc)[R][NV], float *c, int64_t ldc,
                                                     __mmask16 lastMask, bool accumulate, const TilePostOps *post) {
  const ClampPost clamp(Post ? post : nullptr);
#pragma GCC unroll 8
  for (int i = 0; i < R; ++i) {
    float *row = c + i * ldc;
    const __m512 rowBias = Post ? clamp.rowBias(i) : _mm512_setzero_ps();
#pragma GCC unroll 4
    for (int j = 0; j < NV - 1; ++j) {
      __m512 v = acc[i][j];
      if (accumulate)
        v = _mm512_add_ps(v, _mm512_loadu_ps(row + j * kVector));
      if (Post)
        v = clamp.apply(v, clamp.bias(rowBias, j * kVector, static_cast<__mmask16>(0xFFFF)));
      _mm512_storeu_ps(row + j * kVector, v);
    }
    float *last = row + (NV - 1) * kVector;
    __m512 v = acc[i][NV - 1];
    if (accumulate)
      v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(lastMask, last));
    if (Post)
      v = clamp.apply(v, clamp.bias(rowBias, (NV - 1) * kVector, lastMask));
    _mm512_mask_storeu_ps(last, lastMask, v);
  }
}

/// The store of every micro-kernel (f32 and bf16 ones): the R x (16*NV) tile acc[i][j] into C
/// as `flags` say, only its first `cols` columns, with `post` applied when not null: as
/// ClampPost's bias, clamp and fix-up, no test per vector, and activate() after those only
/// for activations it cannot express.
template <int R, int NV>
inline __attribute__((always_inline)) void storeTile(const __m512 (&acc)[R][NV], float *c, int64_t ldc,
                                                     int64_t cols, int flags, const TilePostOps *post) {
  const bool accumulate = flags & kAccumulate;
  if (!(flags & kTransposedC)) {
    const int64_t lastCols = cols - (NV - 1) * kVector; // 1..16
    const __mmask16 lastMask = firstLanes(lastCols);
    // One loop with post ops and one without: the post ops' vectors, made for a tile without
    // them, had been live across the k-loop.
    if (post)
      storeRows<R, NV, true>(acc, c, ldc, lastMask, accumulate, post);
    else
      storeRows<R, NV, false>(acc, c, ldc, lastMask, accumulate, nullptr);
    return;
  }
  // C^T: row i of the tile is column i of C.
  storeTileTransposed(acc, c, ldc, cols, accumulate);
}

#else // portable: the same contract with plain arrays the compiler may vectorize

/// The store of every portable micro-kernel: acc[i][j] (j < cols) into C as `flags` say.
template <int R, int W>
inline void storeTile(const float (&acc)[R][W], float *c, int64_t ldc, int64_t cols, int flags,
                      const TilePostOps *post = nullptr) {
  const bool accumulate = flags & kAccumulate;
  const bool transposed = flags & kTransposedC;
  for (int i = 0; i < R; ++i)
    for (int64_t j = 0; j < cols; ++j) {
      float &out = transposed ? c[j * ldc + i] : c[i * ldc + j];
      out = accumulate ? out + acc[i][j] : acc[i][j];
      if (post)
        out = withPostOps(out, *post, i, j);
    }
}

template <int R, int NV, bool PackedA>
void microKernelImpl(int64_t kc, const float *a, int64_t lda, const float *b, int64_t ldb, float *c,
                     int64_t ldc, int64_t cols, int flags, const TilePostOps *post) {
  constexpr int W = NV * kVector;
  float acc[R][W] = {};
  for (int64_t k = 0; k < kc; ++k) {
    for (int i = 0; i < R; ++i) {
      const float av = PackedA ? a[k * R + i] : a[i * lda + k];
      for (int j = 0; j < W; ++j)
        acc[i][j] += av * b[j];
    }
    b += ldb;
  }
  storeTile(acc, c, ldc, cols, flags, post);
}

#endif

} // namespace kiln::runtime::kernels::detail
