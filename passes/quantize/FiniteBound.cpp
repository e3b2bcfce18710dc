// Finite bounds of values in a quantized model (passes/quantize/FiniteBound.h).
#include "passes/quantize/FiniteBound.h"

#include <cmath>
#include <limits>

#include "core/SymbolicDim.h"
#include "passes/quantize/QuantizedOperands.h"

namespace kiln::passes::quantize {

using ir::Node;
using ir::OpKind;
using ir::Value;

namespace {

/// Deep graphs (a ResNet's chain of residual adds) end the walk here: unproven, not a stack
/// overflow.
constexpr int kMaxDepth = 64;

/// max |x| over a known tensor, when every element is finite.
std::optional<double> largestOf(const Tensor &t) {
  double largest = 0;
  for (int64_t i = 0; i < t.numElements(); ++i) {
    const double x = std::fabs(t.getDouble(i));
    if (!std::isfinite(x))
      return std::nullopt;
    largest = std::max(largest, x);
  }
  return largest;
}

/// The largest magnitude an integer dtype holds (a value of it is always finite).
std::optional<double> integerRange(DType dtype) {
  switch (dtype) {
  case DType::U8: return 255.0;
  case DType::I8: return 128.0;
  case DType::I32: return 2147483648.0;
  case DType::I64: return 9.3e18;
  case DType::Bool: return 1.0;
  default: return std::nullopt;
  }
}

/// Products summed per output of a conv or matmul-like op: C/groups*R*S, or the shared dim K.
std::optional<double> termsPerOutput(const Node &node) {
  const Shape &b = node.input(1)->shape();
  if (!isStaticShape(b) || b.size() < 2)
    return std::nullopt;
  if (node.op() == OpKind::Conv || node.op() == OpKind::QConv) {
    double terms = 1;
    for (size_t d = 1; d < b.size(); ++d)
      terms *= static_cast<double>(b[d]);
    return terms;
  }
  return static_cast<double>(b[b.size() - 2]); // matmul, qmatmul: b is [.., K, N]
}

} // namespace

std::optional<double> FiniteBound::of(const Value *v) { return bounded(v, 0); }

std::optional<double> FiniteBound::bounded(const Value *v, int depth) {
  auto found = known_.find(v);
  if (found != known_.end())
    return found->second;
  std::optional<double> bound = depth > kMaxDepth ? std::nullopt : compute(v, depth + 1);
  if (bound && !(*bound <= kLargest))
    bound = std::nullopt;
  // The value where the walk was cut off is not remembered (asked first, it may be proven);
  // those above it are, unproven: sound, if weaker than a walk that started nearer.
  if (depth <= kMaxDepth)
    known_[v] = bound;
  return bound;
}

std::optional<double> FiniteBound::compute(const Value *v, int depth) {
  if (std::optional<double> range = integerRange(v->dtype()))
    return range;
  if (std::optional<Tensor> value = knownValue(v))
    return largestOf(*value);
  const Node *node = v->producer();
  if (!node)
    return std::nullopt;
  auto operand = [&](size_t i) { return bounded(node->input(i), depth); };
  auto known = [&](size_t i) -> std::optional<double> {
    std::optional<Tensor> value = knownValue(node->input(i));
    return value ? largestOf(*value) : std::nullopt;
  };
  switch (node->op()) {
  case OpKind::Reshape:
  case OpKind::Permute:
  case OpKind::MaxPool:
  case OpKind::Relu:
  case OpKind::Neg:
  case OpKind::Abs:
  case OpKind::Clip: // clamping a finite value keeps it finite and no larger
    return operand(0);
  case OpKind::Add:
  case OpKind::Sub: {
    std::optional<double> a = operand(0), b = operand(1);
    return a && b ? std::optional<double>(*a + *b) : std::nullopt;
  }
  case OpKind::Mul: {
    std::optional<double> a = operand(0), b = operand(1);
    return a && b ? std::optional<double>(*a * *b) : std::nullopt;
  }
  case OpKind::DequantizeLinear: { // (x - zero) * scale
    std::optional<double> x = operand(0), scale = known(1), zero = known(2);
    return x && scale && zero ? std::optional<double>((*x + *zero) * *scale) : std::nullopt;
  }
  case OpKind::QConv:
  case OpKind::QMatMul: { // sum of (x - zero) * w, |x - zero| <= 255, |w| <= 128, times the scales
    std::optional<double> terms = termsPerOutput(*node), xScale = known(2), wScale = known(4);
    return terms && xScale && wScale ? std::optional<double>(*terms * 255.0 * 128.0 * *xScale * *wScale)
                                     : std::nullopt;
  }
  case OpKind::Conv:
  case OpKind::MatMul: {
    std::optional<double> terms = termsPerOutput(*node), a = operand(0), b = operand(1);
    return terms && a && b ? std::optional<double>(*terms * *a * *b) : std::nullopt;
  }
  default: return std::nullopt;
  }
}

} // namespace kiln::passes::quantize
