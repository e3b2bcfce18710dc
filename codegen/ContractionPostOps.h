#pragma once
// Post ops for contraction stages: when a Gemm or Conv stage's whole epilogue is its tile
// stored as activation(x + bias[channel]) (a convolution's or a linear layer's bias, then
// ReLU, ReLU6 or another clip, SiLU, hard sigmoid, hard swish or GELU as decompose or
// PyTorch's export spell them), the call passes them as kiln_post_ops (runtime/KernelAbi.h),
// which the runtime applies in registers as it stores each tile, and no epilogue at all.
// Anything else (a second stored value, a residual added after the bias, tanh) keeps the
// generated epilogue. An int8 product (qmatmul, qconv) takes the same post ops, and when the
// stage stores them quantized for the next layer, that quantize_linear too.
#include <optional>
#include <string>

#include "codegen/KernelEmitter.h"

namespace kiln::codegen {

/// A residual read as the bytes of a quantized tensor (kiln_quantized_addend): dense, with its
/// dequantize_linear's scale and zero point as C expressions of f32 scalars.
struct BytesAddend {
  StridedAccess bytes;
  bool isSigned = false; // i8, else u8
  std::string scale, zero;
};

struct ContractionPostOps {
  std::optional<StridedAccess> bias;   // one contiguous f32 per channel
  std::optional<StridedAccess> addend; // int8 products only: a residual, dense, added after the bias
  std::optional<BytesAddend> addendBytes; // int8 products only: the residual as bytes instead
  int32_t activation = 0;            // kiln_activation
  double lo = 0, hi = 0;             // clip's bounds
  double alpha = 0, beta = 0;        // the hard sigmoid's line
};

/// The post ops stage `stageIndex`'s epilogue amounts to, or nothing: x is the contraction's
/// value (with a residual the convolution accumulated into, that sum), the bias varies along
/// output dim `channelDim` only; with `addendAllowed` (the int8 products'), a residual tensor
/// added after the bias too, f32 or the dequantize_linear of u8 or i8 bytes.
std::optional<ContractionPostOps> matchPostOps(const KernelEmitter &e, int stageIndex, size_t channelDim,
                                               bool addendAllowed = false);

/// The generated call's `g.post` assignments.
std::string postOpsArguments(const KernelEmitter &e, const ContractionPostOps &post);

/// An int8 product stage that stores its value, after post ops, quantized by the next layer's
/// quantize_linear (kiln_quantized_output), and perhaps that f32 value too (which a residual
/// connection reads): the kernel writes them itself.
struct QuantizedStore {
  ContractionPostOps post;
  int output = 0;          // the u8 or i8 buffer, laid out as the product
  bool isSigned = false;   // i8
  bool keepF32 = false;    // the f32 value to the product's buffer as well
  std::string scale, zero; // C expressions of the f32 scalars
};

/// The quantized store stage `stageIndex` amounts to, or nothing (any other epilogue).
std::optional<QuantizedStore> matchQuantizedStore(const KernelEmitter &e, int stageIndex, size_t channelDim);

/// The generated call's `g.post` and `g.quantized` assignments.
std::string quantizedStoreArguments(const KernelEmitter &e, const QuantizedStore &store);

} // namespace kiln::codegen
