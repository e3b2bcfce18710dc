#pragma once
// Pieces shared by the pooling paths (Pool2d.cpp: plane by plane; Pool2dBlocks.cpp: channel
// blocks). Internal to runtime/kernels/.
#include <algorithm>
#include <cstdint>

#include "runtime/KernelAbi.h"

namespace kiln::runtime::kernels::detail {

/// Kernel taps t in [first, last) of [0, kernel) with base + t*dilation in [lo, hi).
struct TapRange {
  int64_t first, last;
};
inline TapRange poolTaps(int64_t base, int64_t dilation, int64_t kernel, int64_t lo, int64_t hi) {
  auto ceilDiv = [](int64_t a, int64_t b) { return a >= 0 ? (a + b - 1) / b : -((-a) / b); };
  const int64_t first = base >= lo ? 0 : ceilDiv(lo - base, dilation);
  const int64_t last = base >= hi ? 0 : std::min(kernel, ceilDiv(hi - base, dilation));
  return {std::min(first, last), last};
}

/// The divisor of an average over the window whose first tap is input (baseH, baseW): its
/// taps inside the input, or with count_include_pad inside the padded extent, which ends at
/// h + pad_top and w + pad_left (the ABI gives only the leading pads).
inline int64_t averageCount(const kiln_pool2d_args &a, int64_t baseH, int64_t baseW) {
  const bool padded = a.count_include_pad != 0;
  const TapRange rows = poolTaps(baseH, a.dilation_h, a.kernel_h, padded ? -a.pad_top : 0,
                                 padded ? a.h + a.pad_top : a.h);
  const TapRange cols = poolTaps(baseW, a.dilation_w, a.kernel_w, padded ? -a.pad_left : 0,
                                 padded ? a.w + a.pad_left : a.w);
  return (rows.last - rows.first) * (cols.last - cols.first);
}

/// Pooling plane by plane, 16 outputs along a row a vector (Pool2d.cpp): what pool2d runs for
/// the pools channel blocks do not take. Arguments already validated, some output.
void poolPlaneByPlane(const kiln_rt *rt, const kiln_pool2d_args &args);

/// Pooling with 16 channels in the lanes of a vector (Pool2dBlocks.cpp, ChannelBlocks.h), for
/// the pools whose planes are small enough that plane by plane they pay more per row than per
/// pixel: each window tap one aligned vector of 16 channels, any kernel, stride, dilation,
/// padding and ceil mode. Parallel over (image, block of 16 channels).
bool channelBlockPool(const kiln_pool2d_args &args);
void poolChannelBlocks(const kiln_rt *rt, const kiln_pool2d_args &args);

/// Max pooling of u8 or s8 planes (Pool2dBytes.cpp). Arguments already validated, some output.
void maxPoolBytes(const kiln_rt *rt, const kiln_pool2d_args &args);

} // namespace kiln::runtime::kernels::detail
