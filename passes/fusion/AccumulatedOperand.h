#pragma once
// Which operand a kernel may write its result over by accumulating into it: a residual block's
// `relu(conv(x, w) + bias + r)` can start from r and add the convolution onto it, so that the
// result takes r's buffer (r dying there) instead of streaming r and a fresh output buffer
// through the cache side by side. ONNX Runtime's NCHWc Sum fusion does the same.
//
// The memory plan (passes/memory/PlanMemory.h) merges the result with that operand like any in-place
// op; codegen then has conv2d add into its output (kiln_conv2d_args::accumulate) and drops the
// operand from the epilogue. Both ask this one function, so that neither can merge buffers the
// other does not know how to fill.
#include "ir/Graph.h"

namespace kiln::passes {

/// For a kernel node whose body is exactly `[relu](X + r)` or `[relu](r + X)`, with
///  - X the contraction `conv(x, w)` or `conv(x, w) + b` / `b + conv(x, w)` (b anything not
///    computed from r), the convolution pointwise (every kernel extent 1, strides 1, pads 0,
///    f32), the kernel's only contraction;
///  - r a body input (kernel operand) of exactly the result's type, used once in the body;
///  - one result;
/// returns r's operand index, else -1. The result then equals `[relu](X' )`, where X' is X with
/// the convolution's value replaced by r + conv(x, w), up to the rounding of the reordered sum.
int accumulatedOperand(const ir::Node &kernel);

/// The body's `X + r` node of such a kernel (accumulatedOperand >= 0), and X: codegen
/// computes the node's value as X's.
struct AccumulatedAdd {
  const ir::Node *add = nullptr;
  const ir::Value *rest = nullptr;
};
AccumulatedAdd accumulatedAdd(const ir::Graph &body, int operand);

} // namespace kiln::passes
