// quantized-conv: a 2-D conv(dequantize_linear(x, sx, zx), W) where W is an i8 weight
// dequantized per tensor or per output channel with zero points of 0 (what kiln-quantize and
// ONNX Runtime's quantizer write for Conv) becomes
//   qconv(x, Wq [K, C/groups, R, S], reshape(sx, []), reshape(zx, []), reshape(sw, [K] or []))
// with the conv's attributes. W is dequantize_linear(wq, sw, 0) with sw one value or one per
// output channel ([K, 1, 1, 1]); wq must be known when compiling (a constant, or a parameter's
// own value): it is written out as an i8 constant, which the runtime packs at load. x's scale
// and zero point must be one each (per tensor); they and sw stay runtime values.
//
// Numerics as quantized-matmul's: qconv's integer sums are exact and it rounds twice, so it
// agrees with the f32 conv of the dequantized operands to f32 roundings. Padding is exact in
// both: conv pads the dequantized input with 0, which is x's zero point dequantized.
//
// Runs beside quantized-matmul, first in the inference pipeline. Statistics: "convolutions on
// int8".
#include "passes/quantize/QuantizedConv.h"

#include "core/SymbolicDim.h"
#include "passes/quantize/QuantizedOperands.h"

namespace kiln::passes {

using ir::Node;
using ir::OpKind;
using ir::Value;

namespace {

using namespace quantize;

bool rewrite(ir::Graph &graph, Node *conv) {
  Value *input = conv->input(0), *weights = conv->input(1);
  if (conv->output()->dtype() != DType::F32 || input->rank() != 4 || !isStaticShape(input->shape()) ||
      !isStaticShape(weights->shape()))
    return false;
  const Shape &w = weights->shape();
  const int64_t channels = w[0];
  if (w[1] * w[2] * w[3] >= (int64_t{1} << 16)) // qconv's sums must stay exact in int32
    return false;
  const Node *dq = dequantizedActivations(input);
  std::optional<Int8Weight> wq = int8Weight(weights);
  if (!dq || !wq)
    return false;
  const int64_t scales = wq->scale->type().numElements();
  const bool perChannel = scales == channels && channels > 1 && wq->scale->shape() == Shape{channels, 1, 1, 1};
  if (scales != 1 && !perChannel)
    return false;
  replaceWithIntegerProduct(graph, conv, OpKind::QConv, *dq, wq->values, wq->scale,
                            perChannel ? Shape{channels} : Shape{});
  return true;
}

class QuantizedConvPass final : public Pass {
public:
  std::string_view name() const override { return "quantized-conv"; }
  bool run(ir::Graph &graph, PassContext &context) override {
    return rewriteEach(graph, context, OpKind::Conv, "convolutions on int8", rewrite);
  }
};

} // namespace

std::unique_ptr<Pass> createQuantizedConvPass() { return std::make_unique<QuantizedConvPass>(); }

} // namespace kiln::passes
