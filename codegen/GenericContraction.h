#pragma once
// Contractions the runtime's f32 library kernels do not cover, and conv_transpose (internal to
// codegen).
//
//  - Generic stages (codegen/EmitGenericContraction.cpp): matmul, conv, conv_transpose,
//    max_pool/avg_pool and einsum on any dtype codegen supports, and the f32 cases the library
//    lacks (3-D convolution and pooling, avg_pool whose windows reach past the trailing
//    padding with count_include_pad, every einsum). A generated loop nest over contiguous
//    operands, parallel over output rows or planes, the innermost loop contiguous; floats
//    accumulate in the output's precision (f64 in double, as the evaluator), integers wrap.
//    The stage stores only the anchor's value (no fused epilogue: the unit is lowered per op).
//  - ConvTranspose stages (codegen/EmitConvTranspose.cpp): f32 conv_transpose as rt->gemm into
//    columns (Wᵀ·x per image and group) and a generated col2im that accumulates the columns
//    into the output, parallel over output planes, followed by the fused epilogue per plane
//    (a 1x1 kernel: one gemm; few input channels per group, as depthwise: scattered from x).
#include "codegen/StageEmitters.h"

namespace kiln::codegen {

/// Whether `node` (a contraction or pooling op) is lowered by a Generic stage.
bool needsGenericStage(const ir::Node &node);

/// Whether codegen lowers `node`'s op on its dtypes through a Generic or ConvTranspose stage
/// (used by checkSupported for what the library stages do not take).
bool genericStageSupports(const ir::Node &node);

/// Window geometry of a conv, conv_transpose or pooling node, lifted to three spatial dims
/// (leading added dims have size 1, kernel 1, stride 1, no padding), as the evaluator does.
struct WindowGeometry {
  static constexpr int kDims = 3;
  int64_t batch = 0, inChannels = 0, outChannels = 0, groups = 1;
  int64_t in[kDims] = {1, 1, 1}, out[kDims] = {1, 1, 1}, kernel[kDims] = {1, 1, 1};
  int64_t stride[kDims] = {1, 1, 1}, dilation[kDims] = {1, 1, 1};
  int64_t padBegin[kDims] = {0, 0, 0}, padEnd[kDims] = {0, 0, 0};

  int64_t inPlane() const { return in[0] * in[1] * in[2]; }
  int64_t outPlane() const { return out[0] * out[1] * out[2]; }
  int64_t kernelSize() const { return kernel[0] * kernel[1] * kernel[2]; }
};

/// The geometry of `node` from its operand and result shapes and its attributes.
WindowGeometry windowGeometry(const ir::Node &node);

/// The geometry of a window op over input `x` [N, C, spatial...] giving `y` [N, K, spatial...]
/// with `kernel` (one extent per spatial dim) and `groups`, its strides, dilations and pads
/// read from `node`'s attributes (conv_weight_grad: x, its gradient g and weight_shape).
WindowGeometry liftedWindow(const ir::Node &node, const Shape &x, const Shape &y, const std::vector<int64_t> &kernel,
                            int64_t groups);

/// Static C++ function `name(off, stride, size, count, &first, &last)`: the positions i in
/// [0, count) whose target i*stride + off lies in [0, size) (conv and conv_transpose taps).
std::string stridedRangeFunction(const std::string &name);

void emitGenericStage(KernelEmitter &emitter, int stage, KernelText &out);
void emitConvTransposeStage(KernelEmitter &emitter, int stage, KernelText &out);

} // namespace kiln::codegen
