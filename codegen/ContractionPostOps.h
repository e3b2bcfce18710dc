#pragma once
// Post ops for contraction stages: when a Gemm or Conv stage's whole epilogue is its tile
// stored as activation(x + bias[channel]) (a convolution's or a linear layer's bias, then
// ReLU, ReLU6 or another clip, SiLU, hard sigmoid, hard swish or GELU as decompose or
// PyTorch's export spell them), the call passes them as kiln_post_ops (runtime/KernelAbi.h),
// which the runtime applies in registers as it stores each tile, and no epilogue at all.
// Anything else (a second stored value, a residual added after the bias, tanh) keeps the
// generated epilogue.
#include <optional>
#include <string>

#include "codegen/KernelEmitter.h"

namespace kiln::codegen {

struct ContractionPostOps {
  std::optional<StridedAccess> bias; // one contiguous f32 per channel
  int32_t activation = 0;            // kiln_activation
  double lo = 0, hi = 0;             // clip's bounds
  double alpha = 0, beta = 0;        // the hard sigmoid's line
};

/// The post ops stage `stageIndex`'s epilogue amounts to, or nothing: x is the contraction's
/// value (with a residual the convolution accumulated into, that sum), the bias varies along
/// output dim `channelDim` only.
std::optional<ContractionPostOps> matchPostOps(const KernelEmitter &e, int stageIndex, size_t channelDim);

/// The generated call's `g.post` assignments.
std::string postOpsArguments(const KernelEmitter &e, const ContractionPostOps &post);

} // namespace kiln::codegen
