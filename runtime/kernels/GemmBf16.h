#pragma once
// The bf16 half of the GEMM driver (KILN_PRECISION_BF16): operands rounded to bfloat16 in the
// layouts the bf16 micro-kernel reads, and that micro-kernel. The driver (GemmDriver.cpp)
// packs f32 as always and rounds each packed block once (blockedRegionBf16), so every
// operand source (dense, im2col, prepacked panels) serves both precisions. Internal to
// runtime/kernels/.
//
// Layouts, bf16 numbers as their 16-bit patterns:
//  - A: a k-pair (2p, 2p+1) of a row is one 32-bit word, which the micro-kernel broadcasts;
//    row i's pair p at a + i*lda + p*pairStep. Rounded per call: rows of `lda` elements (a
//    multiple of 16), k contiguous, zero past K (pairStep 2). Stored at load: row panels
//    (GemmDriver.h, packBf16Panels), each pair's kMaxRows words side by side (lda 2,
//    pairStep 2 * kMaxRows).
//  - B pair panels: for each k-pair p, `width` columns (a multiple of 16) of two values each,
//    rows 2p and 2p + 1: dst[(p*width + x)*2 + t]. One zmm is 16 columns' pairs, the second
//    operand of vdpbf16ps, which adds a0*b0 + a1*b1 to each f32 lane.
// K is padded with a zero row when odd. Products of two bf16 are exact in f32, so the result
// differs from f32's only by the rounding of the operands (about 2^-9 relative each) and the
// order of the sums.
#include <cstdint>

#include "runtime/kernels/PostOps.h" // TilePostOps

namespace kiln::runtime::kernels::detail {

using Bf16 = uint16_t;

/// `x` rounded to bfloat16 as the conversion instructions round: to nearest with ties to even
/// (core's floatToBFloat16), NaN stays NaN, denormals become zero.
Bf16 toBf16(float x);
/// The float a bfloat16 pattern stands for.
float fromBf16(Bf16 x);

/// dst[x] = toBf16(src[x]) for x < count, 0 for count <= x < width (width a multiple of 16).
void roundRowToBf16(const float *src, int64_t count, Bf16 *dst, int64_t width);
/// The pair panel `width` wide (a multiple of 16) of kc rows of `cols` floats (row k at
/// src + k*ld), zero past cols.
void roundPanelToBf16Pairs(const float *src, int64_t ld, int64_t kc, int64_t cols, int64_t width, Bf16 *dst);

/// C[R x (16*NV)] (+)= A * B over `pairs` k-pairs, A rows `lda` apart and its k-pairs
/// `pairStep` apart, B pair panel rows `ldb` bf16 apart (2 * its width), stored as the f32
/// micro-kernels store (`flags`, `cols`, `post` when not null).
using MicroKernelBf16Fn = void (*)(int64_t pairs, const Bf16 *a, int64_t lda, int64_t pairStep, const Bf16 *b,
                                   int64_t ldb, float *c, int64_t ldc, int64_t cols, int flags,
                                   const TilePostOps *post);
MicroKernelBf16Fn microKernelBf16(int rows, int vectors);

} // namespace kiln::runtime::kernels::detail
