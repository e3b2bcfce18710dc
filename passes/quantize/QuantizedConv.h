#pragma once
// quantized-conv: dequantize_linear -> conv with int8 operands becomes one qconv
// (ir/ops/Quantize.cpp), which runs on the runtime's int8 convolution instead of dequantizing
// both operands to f32 and convolving those.
#include <memory>

#include "passes/Pass.h"

namespace kiln::passes {

std::unique_ptr<Pass> createQuantizedConvPass();

} // namespace kiln::passes
