#pragma once
// qconv2d's direct kernel for depthwise layers (QConv2dDepthwise.cpp). Internal to
// runtime/kernels/.
#include <cstdint>

#include "runtime/KernelAbi.h"

namespace kiln::runtime::kernels::detail {

/// The most taps whose centred products (|x - zero| <= 255, |w| <= 128) still sum exactly in
/// f32: 513 * 255 * 128 < 2^24.
constexpr int64_t kMaxDepthwiseTaps = 513;

/// Whether `g` is a depthwise layer qconvDepthwise takes: one input and one output channel per
/// group, unit column stride, at most kMaxDepthwiseTaps taps.
bool qconvDepthwiseShape(const kiln_qconv2d_args &g);

/// The depthwise qconv2d `g` with its weights as rows of rowBytes bytes (packed or plain).
void qconvDepthwise(const kiln_rt *rt, const kiln_qconv2d_args &g, const int8_t *weights, int64_t rowBytes);

} // namespace kiln::runtime::kernels::detail
