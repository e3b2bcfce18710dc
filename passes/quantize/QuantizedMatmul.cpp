// quantized-matmul: matmul(dequantize_linear(a, sa, za), W) where W is an i8 weight
// dequantized per tensor or per output column with zero points of 0 (what kiln-quantize and
// ONNX Runtime's quantizer write for MatMul, Gemm and Linear) becomes
//   qmatmul(a, Wq [K, N], reshape(sa, []), reshape(za, []), reshape(sw, [N] or []))
// W is dequantize_linear(wq [K, N], sw, 0) with sw broadcasting along N, or its transpose,
// permute(dequantize_linear(wq [N, K], sw, 0), [1, 0]) with sw [N, 1] (a Gemm with transB,
// an nn.Linear weight). wq must be known when compiling (a constant, or a parameter's own
// value): it is written out as an i8 [K, N] constant, which the runtime packs at load. So
// must the weight's zero points, which must all be 0 (qmatmul's sums take out only a's).
// a's scale and zero point must be one each (per tensor); they and sw stay runtime values.
//
// Numerics: qmatmul sums the integer products exactly and rounds twice, where the f32
// matmul of the dequantized operands rounds every product and partial sum: the results agree
// to f32 roundings (rtol ~1e-6), and qmatmul's is the exact one.
//
// Runs first in the inference pipeline, before constant-fold could fold a constant weight's
// dequantize_linear into f32. Statistics: "matmuls on int8".
#include "passes/quantize/QuantizedMatmul.h"

#include <algorithm>
#include <cstring>
#include <optional>

#include "core/SymbolicDim.h"
#include "passes/quantize/QuantizedOperands.h"

namespace kiln::passes {

using ir::Node;
using ir::OpKind;
using ir::Value;

namespace {

using namespace quantize;

/// The weight side of the product: wq as i8 [K, N] (transposed from [N, K] when read through
/// a permute) and the scale value to read per column (or once).
struct Weight {
  Tensor values; // i8 [K, N]
  Value *scale;  // f32 [N] or [] after the reshape the rewrite adds
};

std::optional<Weight> weightOf(Value *w, int64_t k, int64_t n) {
  bool transposed = false;
  if (const Node *permute = producerOf(w, OpKind::Permute)) {
    if (permute->attrInts("perm") != std::vector<int64_t>{1, 0})
      return std::nullopt;
    w = permute->input(0);
    transposed = true;
  }
  std::optional<Int8Weight> wq = int8Weight(w);
  if (!wq)
    return std::nullopt;
  // One scale, or one per output column: along the weight's last axis ([N] or [1, N]), or its
  // first when transposed ([N, 1]).
  const Shape &scale = wq->scale->shape();
  const int64_t count = wq->scale->type().numElements();
  const bool perColumn = count == n && n > 1 &&
                         (transposed ? scale == Shape{n, 1} : (scale == Shape{n} || scale == Shape{1, n}));
  if (count != 1 && !perColumn)
    return std::nullopt;
  Weight weight{Tensor(DType::I8, {k, n}), wq->scale};
  const auto *from = static_cast<const int8_t *>(wq->values.data());
  auto *to = static_cast<int8_t *>(weight.values.data());
  if (!transposed) {
    std::memcpy(to, from, static_cast<size_t>(k * n));
    return weight;
  }
  // In 64 x 64 blocks, each written row by row, so that neither side strides through memory:
  // element by element, or a block's columns written down rows 4 KiB apart (one L1 set), VGG16's
  // 4096 x 25088 classifier took ~0.5 s.
  constexpr int64_t kBlock = 64;
  for (int64_t i0 = 0; i0 < k; i0 += kBlock)
    for (int64_t j0 = 0; j0 < n; j0 += kBlock) {
      const int64_t i1 = std::min(k, i0 + kBlock), j1 = std::min(n, j0 + kBlock);
      for (int64_t i = i0; i < i1; ++i)
        for (int64_t j = j0; j < j1; ++j)
          to[i * n + j] = from[j * k + i];
    }
  return weight;
}

bool rewrite(ir::Graph &graph, Node *matmul) {
  Value *left = matmul->input(0), *right = matmul->input(1);
  if (matmul->output()->dtype() != DType::F32 || left->rank() < 2 || right->rank() != 2 ||
      !isStaticShape(left->shape()) || !isStaticShape(right->shape()))
    return false;
  const Node *dq = dequantizedActivations(left);
  if (!dq)
    return false;
  const int64_t k = right->shape()[0], n = right->shape()[1];
  if (k >= (int64_t{1} << 16))
    return false;
  std::optional<Weight> weight = weightOf(right, k, n);
  if (!weight)
    return false;
  replaceWithIntegerProduct(graph, matmul, OpKind::QMatMul, *dq, weight->values, weight->scale,
                            weight->scale->type().numElements() == 1 ? Shape{} : Shape{n});
  return true;
}

class QuantizedMatmulPass final : public Pass {
public:
  std::string_view name() const override { return "quantized-matmul"; }
  bool run(ir::Graph &graph, PassContext &context) override {
    return rewriteEach(graph, context, OpKind::MatMul, "matmuls on int8", rewrite);
  }
};

} // namespace

std::unique_ptr<Pass> createQuantizedMatmulPass() { return std::make_unique<QuantizedMatmulPass>(); }

} // namespace kiln::passes
