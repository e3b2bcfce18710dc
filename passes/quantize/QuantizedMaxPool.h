#pragma once
// quantized-max-pool: quantize_linear(max_pool(x)) becomes max_pool(quantize_linear(x)), a max
// pool of bytes, where that is exact; the quantize then joins the producer of x (an int8
// convolution stores bytes instead of f32).
#include <memory>

#include "passes/Pass.h"

namespace kiln::passes {

std::unique_ptr<Pass> createQuantizedMaxPoolPass();

} // namespace kiln::passes
