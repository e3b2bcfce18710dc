#pragma once
// einsum-to-matmul: two-operand float einsums that are (batched) matrix products become one
// matmul between permutes and reshapes, so that they run on the GEMM rather than on
// einsum's generic loop nest. Equations it cannot express so are left alone.
#include <memory>

#include "passes/Pass.h"

namespace kiln::passes {

std::unique_ptr<Pass> createEinsumToMatmulPass();

} // namespace kiln::passes
