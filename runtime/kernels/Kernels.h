#pragma once
// kiln's precompiled heavy kernels: the implementations behind kiln_rt's gemm, conv2d and
// pool2d (runtime/KernelAbi.h). They are compiled once into kiln's runtime library with the
// flags that make them fastest, and generated code reaches them only through the kiln_rt table.
#include <cstdint>

#include "runtime/KernelAbi.h"

namespace kiln::runtime::kernels {

/// f32 GEMM with a fused epilogue, parallel over output panels on rt's pool.
void gemm(const kiln_rt *rt, const kiln_gemm_args *args);

/// int8 GEMM dequantized to f32 with a fused epilogue (kiln_qgemm_args; QGemm.cpp).
void qgemm(const kiln_rt *rt, const kiln_qgemm_args *args);
/// Bytes of qgemm's prepacked B for a K x N s8 matrix (KILN_PACK_QGEMM_B).
int64_t qgemmPackedBytes(int64_t k, int64_t n);
/// A K x N s8 matrix S(k, n) = src[k*strideK + n*strideN] as qgemm's B: for each panel of 64
/// columns, K in quads (rounded up to a multiple of 4 with zeros), each quad 64 columns of 4
/// bytes, dst[((q*K4 + p)*64 + n%64)*4 + t] = S(4p + t, n) (columns past N zero), then the
/// int32 sum over k of each column (the zero point's correction), 64 per panel.
void packQGemmB(const int8_t *src, int64_t k, int64_t n, int64_t strideK, int64_t strideN, int8_t *dst);

/// int8 2-D convolution dequantized to f32 with a fused epilogue (kiln_qconv2d_args; QConv2d.cpp).
void qconv2d(const kiln_rt *rt, const kiln_qconv2d_args *args);
/// Whether qconv2d reads `shape`'s weights (its geometry: c, k, r, s, strides, dilations,
/// groups) in channel-quad order (its product tiles) rather than tap order (its depthwise and
/// f32 routes); KILN_PACK_QCONV_WEIGHTS's stride_n and kiln_qconv2d_args::weights_packed say
/// which order a packing holds.
bool qconvChannelQuadRows(const kiln_qconv2d_args &shape);
/// Bytes of qconv2d's packed weights for k output channels of `channels` x `spatial` (= c/groups
/// x r*s) s8 weights each (KILN_PACK_QCONV_WEIGHTS).
int64_t qconvPackedBytes(int64_t k, int64_t channels, int64_t spatial, bool channelQuads);
/// Plain s8 weights src[(o*channels + c)*spatial + t] as qconv2d's packed weights: each output
/// channel's row, in tap order (byte c*spatial + t, the row rounded up to a multiple of 4 bytes
/// with zeros) or in channel-quad order (byte ((c/4)*spatial + t)*4 + c%4, channels rounded up
/// to a multiple of 4 with zeros), then the int32 sum of each row (the zero point's
/// correction), k of them.
void packQConvWeights(const int8_t *src, int64_t k, int64_t channels, int64_t spatial, bool channelQuads,
                      int8_t *dst);

/// f32 2-D convolution (any stride, padding, dilation, groups incl. depthwise) with a fused
/// epilogue.
void conv2d(const kiln_rt *rt, const kiln_conv2d_args *args);

/// f32 weight gradient of a one-group 2-D convolution (any stride, padding, dilation).
void conv2dWeightGrad(const kiln_rt *rt, const kiln_conv2d_weight_grad_args *args);

/// f32 2-D max / average pooling.
void pool2d(const kiln_rt *rt, const kiln_pool2d_args *args);

/// A recurrent cell (RNN, GRU, LSTM) over a whole sequence, the time loop inside
/// (kiln_recurrence_args; runtime/kernels/Recurrence.cpp).
void recurrence(const kiln_rt *rt, const kiln_recurrence_args *args);

/// Floats of the gate-block layout (KILN_RECURRENCE_R_GATE_BLOCKS) of the recurrent weights
/// of `directions` directions of `gates` gates with hidden size `hidden`.
int64_t recurrentWeightFloats(int64_t directions, int64_t gates, int64_t hidden);

/// Writes plain recurrent weights r[d][g*hidden + j][k] (ONNX's R) in the gate-block layout
/// recurrence reads (recurrentWeightFloats(...) floats at dst): for each direction d and block
/// q of 16 hidden units, dst[(((d*blocks + q)*hidden + k)*gates + g)*16 + u] = r[d][g*hidden +
/// 16q + u][k], 0 past the last unit. The runtime packs recurrent weights so once, at load
/// (KILN_PACK_RECURRENT_GATES).
void packRecurrentWeights(const float *r, int64_t directions, int64_t gates, int64_t hidden, float *dst);

/// Columns per panel of gemm's prepacked B (KILN_GEMM_B_PANELS): N must be a multiple.
inline constexpr int64_t kGemmBPanelWidth = 64;

/// Lays out a K x N matrix S(k, n) = src[k*strideK + n*strideN] (N a multiple of
/// kGemmBPanelWidth, strideK or strideN 1) as gemm's prepacked B (KILN_GEMM_B_PANELS):
/// dst[(n/64)*64*K + k*64 + n%64]. The runtime packs matmul weights so once, at load
/// (kiln_weight_packing).
void packGemmB(const float *src, int64_t k, int64_t n, int64_t strideK, int64_t strideN, float *dst);
/// packGemmB of a matrix whose columns are rows of memory (strideK 1, strideN K: an N x K
/// row-major weight, as nn.Linear stores it), written over the matrix itself. Panel q holds
/// the very 64 rows it is made of, so each panel is packed from a copy of its own rows: the
/// load needs one panel of scratch instead of a second matrix. The result equals packGemmB's.
void packGemmBInPlace(float *matrix, int64_t k, int64_t n);
/// A K x N matrix (as packGemmB reads it) as gemm's bf16 pair panels
/// (KILN_GEMM_B_PAIR_PANELS_BF16): ceil(k/2)*2*n bf16 patterns at dst.
void packGemmBPairsBf16(const float *src, int64_t k, int64_t n, int64_t strideK, int64_t strideN, uint16_t *dst);
/// packGemmBPairsBf16 of an N x K row-major matrix (strideK 1, strideN K) over its own first
/// half, as packGemmBInPlace does for f32 panels: the same bf16 patterns.
void packGemmBPairsBf16InPlace(float *matrix, int64_t k, int64_t n);

/// The M of the Winograd F(M x M, 3x3) that conv2d computes a convolution of these shapes
/// (pointers aside) with: 2 or 4, or 0 when it does not use Winograd. weightsStored: when its
/// weights would be transformed once at load (KILN_CONV_WEIGHTS_WINOGRAD_F2 or _F4), which
/// codegen does for weights that only that kernel reads; more layers pay then (deep ones on
/// small images). Whatever tile the plain weights get, the stored ones get it too.
int convWinogradTile(const kiln_conv2d_args &args, bool weightsStored);

/// Whether conv2d can add a convolution of these shapes into y (kiln_conv2d_args::accumulate):
/// a pointwise one (1x1 kernel, strides 1, no padding).
bool convCanAccumulate(const kiln_conv2d_args &args);

/// Whether conv2d computes a convolution of these shapes tap by tap over the outputs each tap
/// reaches inside the image (most of its taps read padding: large dilations on small maps).
/// Codegen then has its weights laid out tap-major at load (KILN_CONV_WEIGHTS_TAP_MAJOR).
bool convSparseTaps(const kiln_conv2d_args &args);

/// Whether conv2d computes a convolution of these shapes with direct pixel tiles, streaming W^T
/// in panels of 64 output channels (few output channels, or im2col panels larger than L2).
/// Codegen then has its weights stored so at load (KILN_CONV_WEIGHTS_DIRECT_PANELS).
bool convDirectPanels(const kiln_conv2d_args &args);
/// Floats of KILN_CONV_WEIGHTS_DIRECT_PANELS for k output channels of `taps` = c*r*s weights
/// each, and the packing of plain one-group w[k][c][r][s]: panel q (output channels 64q..)
/// at dst + 64*q*taps, taps rows of its width (64, or the last channels rounded up to 16,
/// zero past k), dst[64*q*taps + tap*width + j] = w[64*q + j][tap].
int64_t convDirectPanelFloats(int64_t k, int64_t taps);
void packConvDirectPanels(const float *weights, int64_t k, int64_t taps, float *dst);

/// Elements of KILN_CONV_WEIGHTS_WINOGRAD_F2_BF16 (tile 2) of k x c x 3 x 3 weights, and the
/// packing: packWinogradWeights' transform, each point's K x C matrix as bf16 row panels
/// (detail::packBf16Panels).
int64_t winogradWeightsBf16Elements(int64_t k, int64_t c, int tile);
void packWinogradWeightsBf16(const float *weights, int64_t k, int64_t c, int tile, uint16_t *dst);

/// Whether conv2d computes a convolution of these shapes and precision (bf16, not exact) as a
/// GEMM (pointwise or im2col), whose weights codegen then has stored as bf16 row panels at
/// load (KILN_CONV_WEIGHTS_BF16_PANELS, packConvBf16Panels).
bool convBf16Panels(const kiln_conv2d_args &args);
/// The bf16 elements of KILN_CONV_WEIGHTS_BF16_PANELS for `rows` output channels in `groups`
/// groups of depth = c/groups*r*s weights each, and the packing of plain w[o][d]: each group's
/// rows/groups x depth matrix as row panels (detail::packBf16Panels), one after another.
int64_t convBf16PanelElements(int64_t rows, int64_t depth, int64_t groups);
void packConvBf16Panels(const float *weights, int64_t rows, int64_t depth, int64_t groups, uint16_t *dst);

/// Writes plain one-group weights w[k][c][r][s] tap-major, dst[((r*S + s)*K + k)*C + c]
/// (KILN_CONV_WEIGHTS_TAP_MAJOR; as many floats as the weights).
void packConvTapMajor(const float *weights, int64_t k, int64_t c, int64_t r, int64_t s, float *dst);

/// Floats of the transformed layout (M = tile: KILN_CONV_WEIGHTS_WINOGRAD_F2 or _F4) of
/// k x c x 3 x 3 weights.
int64_t winogradWeightFloats(int64_t k, int64_t c, int tile);

/// Writes plain weights w[k][c][3][3] in the transformed layout of F(tile x tile, 3x3) to dst
/// (winogradWeightFloats(k, c, tile) floats): what conv2d would otherwise compute on every call.
void packWinogradWeights(const float *weights, int64_t k, int64_t c, int tile, float *dst);

} // namespace kiln::runtime::kernels
