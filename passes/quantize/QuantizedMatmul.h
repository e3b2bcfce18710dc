#pragma once
// quantized-matmul: dequantize_linear -> matmul with int8 operands becomes one qmatmul
// (ir/ops/Quantize.cpp), which runs on the runtime's int8 GEMM instead of dequantizing both
// operands to f32 and multiplying those.
#include <memory>

#include "passes/Pass.h"

namespace kiln::passes {

std::unique_ptr<Pass> createQuantizedMatmulPass();

} // namespace kiln::passes
