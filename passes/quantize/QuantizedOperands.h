#pragma once
// What the quantize passes (quantized-matmul, quantized-conv, quantized-max-pool) share: what
// they recognise in a QDQ graph (values the graph fixes, the dequantized activations of a
// product, its int8 weights), the rewrite into an integer product, and the walk over the ops
// they rewrite.
#include <functional>
#include <optional>

#include "core/Tensor.h"
#include "ir/Builder.h"
#include "ir/Graph.h"
#include "passes/Pass.h"

namespace kiln::passes::quantize {

/// The value of `v` when the graph fixes it: a constant, a parameter's own value, or a reshape
/// of one.
std::optional<Tensor> knownValue(const ir::Value *v);

/// `v`'s producer when it is an `op` node, else null.
const ir::Node *producerOf(const ir::Value *v, ir::OpKind op);

/// The dequantize_linear that makes a product's f32 activations, when it dequantizes u8 or i8
/// with one f32 scale and one zero point (per tensor), else null.
const ir::Node *dequantizedActivations(const ir::Value *v);

/// An i8 weight dequantized with zero points that are all 0 and known when compiling, and
/// scale `scale`: `dequantize_linear(values, scale, 0)`.
struct Int8Weight {
  Tensor values;     // as the graph stores them
  ir::Value *scale;  // f32, any shape the dequantize broadcast
};

/// `v` as such a weight, when it is one (`dequantize_linear` of a known i8 tensor).
std::optional<Int8Weight> int8Weight(const ir::Value *v);

/// Replaces `product` with `op`(activations, weights as an i8 constant, the activations'
/// scale and zero point as scalars, weightScale reshaped to `scaleShape`) with product's
/// attributes, where `activations` is the dequantize_linear product read; the result takes
/// product's name.
void replaceWithIntegerProduct(ir::Graph &graph, ir::Node *product, ir::OpKind op, const ir::Node &activations,
                               const Tensor &weights, ir::Value *weightScale, Shape scaleShape);

/// Calls `rewrite` on every `op` node of the graph (those there when it starts), counting each
/// one it rewrote under `statistic`; whether it rewrote any.
bool rewriteEach(ir::Graph &graph, PassContext &context, ir::OpKind op, const char *statistic,
                 const std::function<bool(ir::Graph &, ir::Node *)> &rewrite);

} // namespace kiln::passes::quantize
