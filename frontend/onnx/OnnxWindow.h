#pragma once
// Window attributes shared by the ONNX convolution and pooling mappings: kernel, strides,
// dilations and pads, with ONNX's auto_pad resolved into explicit pads (the padding depends on
// the static input shape, which kiln knows at import time).
#include <string>
#include <vector>

#include "frontend/onnx/OnnxOpTable.h"

namespace kiln::frontend {

/// One entry per spatial dim; pads are [begins..., ends...].
struct OnnxWindow {
  std::vector<int64_t> kernel, strides, dilations, pads;
};

bool isKnownAutoPad(const std::string &mode);

/// Adds a problem line for an auto_pad value kiln does not know.
void checkAutoPad(const onnx::NodeProto &node, std::vector<std::string> &problems);

/// An ints attribute with one entry >= 1 per spatial dim (default all 1).
std::vector<int64_t> perSpatialDim(const OnnxAttrs &attrs, const std::string &name, size_t rank);

/// Reads strides, dilations (when the op has them) and pads for `kernel` over the spatial dims
/// of `x`. SAME_* pads so that out = ceil(in / stride), the odd unit at the end (UPPER) or the
/// start (LOWER).
OnnxWindow readWindow(const onnx::NodeProto &node, const ir::Value *x, std::vector<int64_t> kernel, bool hasDilations);

/// A per-channel vector [C] shaped [C, 1, ...] to broadcast along dim 1 of a rank-`rank` value.
ir::Value *perChannel(ImportContext &ctx, ir::Value *v, int64_t rank);

} // namespace kiln::frontend
