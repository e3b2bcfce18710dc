// bf16 operands and the bf16 micro-kernel (GemmBf16.h).
//
// The tile is the f32 kernel's, 6 rows x 64 columns: each k-pair step loads 4 pair vectors of
// B and broadcasts 6 pair words of A for 24 vdpbf16ps, twice the products of the f32 step's
// 24 FMAs for the same instructions. Without AVX-512 BF16 (an AVX-512 CPU before Zen 4 or
// Cooper Lake) each pair runs as two FMAs on the widened values, odd element first as
// vdpbf16ps adds them, so both give the same bits; without AVX-512, plain loops.
#include "runtime/kernels/GemmBf16.h"

#include <algorithm>
#include <cstring>

#include "core/Tensor.h" // floatToBFloat16, bfloat16ToFloat
#include "runtime/kernels/GemmMicroKernel.h"

namespace kiln::runtime::kernels::detail {

Bf16 toBf16(float x) {
  // core's rounding, but with denormal inputs as zero, which vcvtneps2bf16 always does.
  uint32_t bits = 0;
  std::memcpy(&bits, &x, sizeof bits);
  if ((bits & 0x7F800000u) == 0)
    return static_cast<Bf16>((bits >> 16) & 0x8000u);
  return floatToBFloat16(x);
}

float fromBf16(Bf16 x) { return bfloat16ToFloat(x); }

#ifdef __AVX512BF16__
void roundRowToBf16(const float *src, int64_t count, Bf16 *dst, int64_t width) {
  for (int64_t x = 0; x < width; x += kVector) {
    const __m256bh rounded = _mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(firstLanes(count - x), src + x));
    _mm256_storeu_si256(reinterpret_cast<__m256i *>(dst + x), reinterpret_cast<const __m256i &>(rounded));
  }
}

void roundPanelToBf16Pairs(const float *src, int64_t ld, int64_t kc, int64_t cols, int64_t width, Bf16 *dst) {
  // Lane 2x of the result takes column x of the even row (lanes 0-15 of cvtne2ps's result),
  // lane 2x + 1 the odd row's (lanes 16-31).
  alignas(64) static const uint16_t kInterleave[32] = {0, 16, 1, 17, 2,  18, 3,  19, 4,  20, 5,  21, 6,  22, 7,  23,
                                                       8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
  const __m512i interleave = _mm512_load_si512(kInterleave);
  for (int64_t k = 0; k < kc; k += 2) {
    const float *even = src + k * ld, *odd = k + 1 < kc ? even + ld : nullptr;
    Bf16 *out = dst + k * width;
    for (int64_t x = 0; x < width; x += kVector) {
      const __mmask16 lanes = x + kVector <= cols ? __mmask16(0xFFFF) : firstLanes(std::max<int64_t>(cols - x, 0));
      const __m512 lo = _mm512_maskz_loadu_ps(lanes, even + x);
      const __m512 hi = odd ? _mm512_maskz_loadu_ps(lanes, odd + x) : _mm512_setzero_ps();
      const __m512bh both = _mm512_cvtne2ps_pbh(hi, lo);
      _mm512_storeu_si512(out + 2 * x,
                          _mm512_permutexvar_epi16(interleave, reinterpret_cast<const __m512i &>(both)));
    }
  }
}
#else
void roundRowToBf16(const float *src, int64_t count, Bf16 *dst, int64_t width) {
  for (int64_t x = 0; x < width; ++x)
    dst[x] = x < count ? toBf16(src[x]) : Bf16{0};
}

void roundPanelToBf16Pairs(const float *src, int64_t ld, int64_t kc, int64_t cols, int64_t width, Bf16 *dst) {
  for (int64_t k = 0; k < kc; k += 2)
    for (int64_t x = 0; x < width; ++x) {
      dst[(k * width) + 2 * x] = x < cols ? toBf16(src[k * ld + x]) : Bf16{0};
      dst[(k * width) + 2 * x + 1] = k + 1 < kc && x < cols ? toBf16(src[(k + 1) * ld + x]) : Bf16{0};
    }
}
#endif

namespace {

/// A k-pair of A: two bf16 in one word, the even element in the low half.
inline int32_t pairWord(const Bf16 *pair) {
  int32_t word = 0;
  std::memcpy(&word, pair, sizeof word);
  return word;
}

/// One k-pair of an R x NV tile: acc += A's R pair words (broadcast) x B's NV pair vectors.
template <int R, int NV>
__attribute__((always_inline)) inline void bf16PairStep(__m512 (&acc)[R][NV], const Bf16 *a, int64_t lda,
                                                        const Bf16 *b) {
  __m512i bv[NV];
#pragma GCC unroll 4
  for (int j = 0; j < NV; ++j)
    bv[j] = _mm512_loadu_si512(b + j * 2 * kVector);
#pragma GCC unroll 8
  for (int i = 0; i < R; ++i) {
    const __m512i av = _mm512_set1_epi32(pairWord(a + i * lda));
#ifdef __AVX512BF16__
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j)
      acc[i][j] = _mm512_dpbf16_ps(acc[i][j], reinterpret_cast<const __m512bh &>(av),
                                   reinterpret_cast<const __m512bh &>(bv[j]));
#else
    const __m512i highHalves = _mm512_set1_epi32(static_cast<int32_t>(0xFFFF0000u));
    const __m512 aEven = _mm512_castsi512_ps(_mm512_slli_epi32(av, 16));
    const __m512 aOdd = _mm512_castsi512_ps(_mm512_and_si512(av, highHalves));
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) {
      const __m512 bOdd = _mm512_castsi512_ps(_mm512_and_si512(bv[j], highHalves));
      acc[i][j] = _mm512_fmadd_ps(aOdd, bOdd, acc[i][j]);
      acc[i][j] = _mm512_fmadd_ps(aEven, _mm512_castsi512_ps(_mm512_slli_epi32(bv[j], 16)), acc[i][j]);
    }
#endif
  }
}

template <int R, int NV>
void microKernelBf16Impl(int64_t pairs, const Bf16 *a, int64_t lda, int64_t pairStep, const Bf16 *b, int64_t ldb,
                         float *c, int64_t ldc, int64_t cols, int flags, const TilePostOps *post) {
#ifdef __AVX512F__
  __m512 acc[R][NV];
#pragma GCC unroll 8
  for (int i = 0; i < R; ++i)
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j)
      acc[i][j] = _mm512_setzero_ps();
  int64_t p = 0;
  if constexpr (R * NV < 12) {
    // A narrow tile's few sums would each wait on the last vdpbf16ps (latency ~5 cycles, two
    // issued a cycle): a second set takes every other k-pair, added at the end. The trailing
    // 4 columns of 196 pixels (a 6 x 16 tile) took 12% of a 1x1 layer's time.
    __m512 odd[R][NV];
#pragma GCC unroll 8
    for (int i = 0; i < R; ++i)
#pragma GCC unroll 4
      for (int j = 0; j < NV; ++j)
        odd[i][j] = _mm512_setzero_ps();
    for (; p + 2 <= pairs; p += 2) {
      bf16PairStep<R, NV>(acc, a, lda, b);
      bf16PairStep<R, NV>(odd, a + pairStep, lda, b + ldb);
      a += 2 * pairStep;
      b += 2 * ldb;
    }
#pragma GCC unroll 8
    for (int i = 0; i < R; ++i)
#pragma GCC unroll 4
      for (int j = 0; j < NV; ++j)
        acc[i][j] = _mm512_add_ps(acc[i][j], odd[i][j]);
  }
  for (; p < pairs; ++p) {
    bf16PairStep<R, NV>(acc, a, lda, b);
    a += pairStep;
    b += ldb;
  }
#else
  constexpr int W = NV * kVector;
  float acc[R][W] = {};
  for (int64_t p = 0; p < pairs; ++p) {
    for (int i = 0; i < R; ++i)
      for (int j = 0; j < W; ++j) {
        acc[i][j] += fromBf16(a[i * lda + 1]) * fromBf16(b[2 * j + 1]);
        acc[i][j] += fromBf16(a[i * lda]) * fromBf16(b[2 * j]);
      }
    a += pairStep;
    b += ldb;
  }
#endif
  storeTile(acc, c, ldc, cols, flags, post);
}

template <int R, int NV> struct Bf16Tile {
  static constexpr MicroKernelBf16Fn fn = &microKernelBf16Impl<R, NV>;
};

const auto kBf16Table = makeTable<MicroKernelBf16Fn, Bf16Tile>(RowCounts{}, VectorCounts{});

} // namespace

MicroKernelBf16Fn microKernelBf16(int rows, int vectors) { return kBf16Table.fns[rows - 1][vectors - 1]; }

} // namespace kiln::runtime::kernels::detail
