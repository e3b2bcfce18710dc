#pragma once
// fold-batch-norm: an inference batch_norm whose input is a conv, linear or matmul (optionally
// followed by an add of a per-channel bias) that nothing else reads becomes that contraction
// with new weights and a new bias:
//   factor[c] = scale[c] / sqrt(var[c] + epsilon)
//   w'[c, ...] = w[c, ...] * factor[c]              (the output-channel slice of the weight)
//   b'[c]      = (b[c] - mean[c]) * factor[c] + bias[c]   (b = 0 without a bias)
// This is what both frontends produce: the ONNX importer's Conv is conv + add(reshape(B,
// [C,1,1])) and its BatchNormalization a batch_norm on initializers (params with values);
// kiln's nn Conv2d is conv + add(reshape(bias, [1,C,1,1])) and BatchNorm2d in eval mode a
// batch_norm on its parameters and running statistics; a Gemm is matmul(A, permute(B)) + C.
//
// Before: a verified graph. After: a verified graph with the same output types, whose values
// differ only by rounding: w' and b' are computed in f64 and rounded once to the dtype.
// Requires every operand of the fold - weight, biases, scale, bias, mean, var - to be known at
// compile time: a constant or a parameter with a value, possibly through reshape, permute,
// broadcast, cast and the other views. A parameter's value is treated as final, as the
// inference pipeline treats trained weights. A batch_norm whose operands are parameters without
// values is left alone (counted): such parameters are bound at run time, so the folded weights
// would be recomputed on every call, and that costs a pass over the weights instead of one
// over the activations - for a late ResNet layer at batch 1, 2.4 M weights (512x512x3x3)
// against 25 K normalised elements (512x7x7).
//
// Nodes the fold leaves without users (the batch_norm, the old contraction and bias add, and
// the parameters and constants only they read) are erased. Statistics: "batch norms folded",
// and one "batch norms skipped: <why>" counter per reason a candidate was left.
#include <memory>

#include "passes/Pass.h"

namespace kiln::passes {

std::unique_ptr<Pass> createFoldBatchNormPass();

} // namespace kiln::passes
