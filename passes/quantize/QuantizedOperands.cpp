// The QDQ patterns both quantize passes read (passes/quantize/QuantizedOperands.h).
#include "passes/quantize/QuantizedOperands.h"

#include <cstring>

namespace kiln::passes::quantize {

using ir::Node;
using ir::OpKind;
using ir::Value;

std::optional<Tensor> knownValue(const Value *v) {
  const Node *node = v->producer();
  if (!node)
    return std::nullopt;
  if (node->op() == OpKind::Constant || node->op() == OpKind::Param) {
    const Tensor &value = node->attrTensor("value");
    if (!value.defined() || value.type() != v->type())
      return std::nullopt;
    return value;
  }
  if (node->op() == OpKind::Reshape) {
    std::optional<Tensor> input = knownValue(node->input(0));
    if (!input)
      return std::nullopt;
    Tensor reshaped(v->type());
    std::memcpy(reshaped.data(), input->data(), input->type().byteSize());
    return reshaped;
  }
  return std::nullopt;
}

const Node *producerOf(const Value *v, OpKind op) {
  const Node *node = v->producer();
  return node && node->op() == op ? node : nullptr;
}

const Node *dequantizedActivations(const Value *v) {
  const Node *dq = producerOf(v, OpKind::DequantizeLinear);
  if (!dq || dq->input(1)->dtype() != DType::F32 || dq->input(1)->type().numElements() != 1 ||
      dq->input(2)->type().numElements() != 1)
    return nullptr;
  const DType dtype = dq->input(0)->dtype();
  return dtype == DType::U8 || dtype == DType::I8 ? dq : nullptr;
}

std::optional<Int8Weight> int8Weight(const Value *v) {
  const Node *dq = producerOf(v, OpKind::DequantizeLinear);
  if (!dq || dq->input(0)->dtype() != DType::I8 || dq->input(1)->dtype() != DType::F32)
    return std::nullopt;
  std::optional<Tensor> values = knownValue(dq->input(0)), zeros = knownValue(dq->input(2));
  if (!values || !zeros)
    return std::nullopt;
  for (int64_t i = 0; i < zeros->numElements(); ++i) // the products take out only the activations'
    if (zeros->getInt(i) != 0)
      return std::nullopt;
  return Int8Weight{std::move(*values), dq->input(1)};
}

namespace {

Value *reshapedTo(ir::Builder &b, Value *v, Shape shape) {
  return v->shape() == shape ? v : b.create(OpKind::Reshape, {v}, {{"shape", std::move(shape)}});
}

} // namespace

void replaceWithIntegerProduct(ir::Graph &graph, Node *product, OpKind op, const Node &activations,
                               const Tensor &weights, Value *weightScale, Shape scaleShape) {
  ir::Builder b(graph);
  b.setInsertionPoint(product);
  Value *result = b.create(op,
                           {activations.input(0), b.constant(weights), reshapedTo(b, activations.input(1), {}),
                            reshapedTo(b, activations.input(2), {}), reshapedTo(b, weightScale, std::move(scaleShape))},
                           product->attrs());
  std::string name = product->output()->name();
  product->output()->replaceAllUsesWith(result);
  graph.eraseNode(product);
  result->setName(std::move(name));
}

bool rewriteEach(ir::Graph &graph, PassContext &context, OpKind op, const char *statistic,
                 const std::function<bool(ir::Graph &, Node *)> &rewrite) {
  std::vector<Node *> products;
  for (Node *node : graph.nodes())
    if (node->op() == op)
      products.push_back(node);
  bool changed = false;
  for (Node *product : products)
    if (rewrite(graph, product)) {
      context.stats.add(statistic);
      changed = true;
    }
  return changed;
}

} // namespace kiln::passes::quantize
