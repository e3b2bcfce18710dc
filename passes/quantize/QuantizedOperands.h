#pragma once
// What the quantize passes (quantized-matmul, quantized-conv) recognise in a QDQ graph: values
// the graph fixes, the dequantized activations of a product, and its int8 weights.
#include <optional>

#include "core/Tensor.h"
#include "ir/Builder.h"
#include "ir/Graph.h"

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

/// `v` reshaped to `shape` at b's insertion point (itself when it has that shape already).
ir::Value *reshapedTo(ir::Builder &b, ir::Value *v, Shape shape);

} // namespace kiln::passes::quantize
