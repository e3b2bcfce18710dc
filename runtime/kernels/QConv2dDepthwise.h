#pragma once
// qconv2d's routes in f32 on exact integers (QConv2dDepthwise.cpp): the bound that keeps them
// exact, the centring both use, and the direct kernel for depthwise layers; and the direct
// kernel that sums depthwise layers in int32 where VNNI can (QConv2dDepthwiseBytes.cpp).
// Internal to runtime/kernels/.
#include <cstdint>

#include "runtime/KernelAbi.h"

namespace kiln::runtime::kernels::detail {

/// Whether `taps` centred products (|x - zero| <= 255, |w| <= 128) sum exactly in f32: every
/// partial sum an integer below 2^24 in magnitude.
inline bool sumsExactInF32(int64_t taps) { return taps * 255 * 128 < (int64_t{1} << 24); }

/// x[i] - zero as floats for i < n (x u8, or s8 when `isSigned`).
void centreBytes(const uint8_t *x, int64_t n, bool isSigned, int32_t zero, float *out);

/// Whether `g` is a depthwise layer qconvDepthwise takes: one input and one output channel per
/// group, unit column stride, taps that sum exactly in f32.
bool qconvDepthwiseShape(const kiln_qconv2d_args &g);

/// The depthwise qconv2d `g` with its weights as rows of rowBytes bytes (packed or plain).
void qconvDepthwise(const kiln_rt *rt, const kiln_qconv2d_args &g, const int8_t *weights, int64_t rowBytes);

/// Whether `g` is a depthwise layer qconvDepthwiseBytes takes (QConv2dDepthwiseBytes.cpp): one
/// input and one output channel per group, column stride 1 or 2, on a CPU with VNNI and VBMI.
bool qconvDepthwiseBytesShape(const kiln_qconv2d_args &g);

/// The depthwise qconv2d `g` summed in int32 from the bytes, weights as for qconvDepthwise;
/// without an epilogue, its post ops, addend and quantized output applied in registers.
void qconvDepthwiseBytes(const kiln_rt *rt, const kiln_qconv2d_args &g, const int8_t *weights, int64_t rowBytes);

} // namespace kiln::runtime::kernels::detail
