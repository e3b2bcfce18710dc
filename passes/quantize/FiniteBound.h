#pragma once
// A bound on the magnitude of a value that the graph proves finite, for rewrites that are
// exact only where no NaN can appear (quantized-max-pool: max_pool lets NaN win a window,
// quantize_linear sends it to 0). It follows the ops a quantized model computes between its
// int8 products and its next quantize: integer values, known constants, dequantize_linear of
// known scales, qconv and qmatmul (exact integer sums times known scales), conv and matmul of
// bounded operands, adds, products, activations that keep a bound (relu, clip) and movements.
// Anything else, or a bound past kLargest, proves nothing.
#include <optional>
#include <unordered_map>

#include "ir/Graph.h"

namespace kiln::passes::quantize {

class FiniteBound {
public:
  /// Bounds past this prove nothing: far enough below f32's largest value (3.4e38) that the
  /// roundings of the ops followed cannot carry a result past it.
  static constexpr double kLargest = 1e30;

  /// max |v| over every value `v` can take, when the graph proves it finite.
  std::optional<double> of(const ir::Value *v);

private:
  std::optional<double> compute(const ir::Value *v, int depth);
  std::optional<double> bounded(const ir::Value *v, int depth);
  std::unordered_map<const ir::Value *, std::optional<double>> known_;
};

} // namespace kiln::passes::quantize
