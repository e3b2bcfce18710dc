#pragma once
// Neural-network functions on Vars (torch.nn.functional's counterparts): contractions, windows,
// normalisation, activations and losses. Operands of one call are promoted to a common dtype.
// Spatial arguments (stride, padding, dilation, kernel) take one entry for every spatial dim
// or a single entry that applies to all of them, as torch accepts an int or a tuple.
#include <string>

#include "frontend/GraphBuilder.h"

namespace kiln::frontend {

using Ints = std::vector<int64_t>;

/// numpy matmul: 1-d operands are promoted to matrices, batch dims broadcast.
Var matmul(const Var &a, const Var &b);
/// x @ weight^T + bias with weight [out, in] and bias [out] (bias optional).
Var linear(const Var &x, const Var &weight, const Var &bias = Var());

/// N-d convolution in the IR's terms: x [N, C, spatial...], weight [Cout, C/groups, k...],
/// pads [begins..., ends...]; empty strides/pads/dilations mean 1s, 0s and 1s. `bias` [Cout]
/// (optional) is added per output channel.
Var conv(const Var &x, const Var &weight, const Var &bias, Ints strides, Ints pads, Ints dilations,
         int64_t groups = 1);
/// torch's conv1d/conv2d: `padding` pads both sides of each spatial dim.
Var conv1d(const Var &x, const Var &weight, const Var &bias = Var(), int64_t stride = 1, int64_t padding = 0,
           int64_t dilation = 1, int64_t groups = 1);
Var conv2d(const Var &x, const Var &weight, const Var &bias = Var(), Ints stride = {1}, Ints padding = {0},
           Ints dilation = {1}, int64_t groups = 1);

/// torch's max_pool2d / avg_pool2d on [N, C, H, W]; an empty `stride` means the kernel size.
Var maxPool2d(const Var &x, Ints kernel, Ints stride = {}, Ints padding = {0}, Ints dilation = {1},
              bool ceilMode = false);
Var avgPool2d(const Var &x, Ints kernel, Ints stride = {}, Ints padding = {0}, bool ceilMode = false,
              bool countIncludePad = true);

/// Inference batch norm over axis 1: (x - mean) / sqrt(var + epsilon) * scale + bias, with
/// scale, bias, mean and var of shape [C].
Var batchNorm(const Var &x, const Var &scale, const Var &bias, const Var &mean, const Var &var,
              double epsilon = 1e-5);
/// Normalises over the axes from `axis` to the last; weight and bias (optional) have the shape
/// of those axes.
Var layerNorm(const Var &x, int64_t axis = -1, const Var &weight = Var(), const Var &bias = Var(),
              double epsilon = 1e-5);

Var softmax(const Var &x, int64_t axis = -1);
Var logSoftmax(const Var &x, int64_t axis = -1);
/// `approximate` is "none" (the erf form) or "tanh".
Var gelu(const Var &x, const std::string &approximate = "none");
Var silu(const Var &x);

/// Mean squared error; `reduction` is "mean", "sum" or "none".
Var mseLoss(const Var &prediction, const Var &target, const std::string &reduction = "mean");
/// Cross entropy of logits [N, C] against integer class labels [N]; `reduction` as above.
Var crossEntropy(const Var &logits, const Var &labels, const std::string &reduction = "mean");

} // namespace kiln::frontend
