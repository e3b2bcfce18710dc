#include "ir/ContractionCost.h"

#include "core/SymbolicDim.h"

namespace kiln::ir {

namespace {

double elements(const Shape &shape, size_t from = 0) {
  double count = 1;
  for (size_t d = from; d < shape.size(); ++d)
    count *= static_cast<double>(shape[d]);
  return count;
}

bool staticOperands(const Node &node) {
  for (const Value *value : node.inputs())
    if (!isStaticShape(value->shape()))
      return false;
  return isStaticShape(node.output(0)->shape());
}

} // namespace

double multiplyAdds(const Node &node) {
  if (!staticOperands(node))
    return 0;
  const Shape &out = node.output(0)->shape();
  switch (node.op()) {
  case OpKind::MatMul:
  case OpKind::Linear: // each output sums over the last dim of its first operand
    return node.input(0)->rank() == 0 ? 0 : elements(out) * static_cast<double>(node.input(0)->shape().back());
  case OpKind::Conv: // weight [Cout, C/groups, kernel...]: one row of it per output
    return elements(out) * elements(node.input(1)->shape(), 1);
  case OpKind::ConvTranspose: // weight [C, Cout/groups, kernel...]: each input scatters one row
    return elements(node.input(0)->shape()) * elements(node.input(1)->shape(), 1);
  case OpKind::RnnSequence:
  case OpKind::GruSequence:
  case OpKind::LstmSequence: // xw [T, B, D*G*H], r [D, G*H, H]: per step and entry, r times h
    return node.input(1)->rank() == 3 ? elements(node.input(0)->shape()) * static_cast<double>(node.input(1)->shape()[2])
                                       : 0;
  default:
    return 0;
  }
}

double multiplyAdds(const Graph &graph) {
  double total = 0;
  for (const Node *node : graph.nodes())
    total += node->body() ? multiplyAdds(*node->body()) : multiplyAdds(*node);
  return total;
}

double weightTraffic(const Graph &graph) {
  double total = 0;
  for (const Node *node : graph.nodes()) {
    if (node->body()) {
      total += weightTraffic(*node->body());
      continue;
    }
    bool recurrence = node->op() == OpKind::RnnSequence || node->op() == OpKind::GruSequence ||
                      node->op() == OpKind::LstmSequence;
    if ((node->op() == OpKind::Param || node->op() == OpKind::Constant) && isStaticShape(node->output(0)->shape()))
      total += static_cast<double>(node->output(0)->type().byteSize());
    else if (recurrence && staticOperands(*node) && node->input(0)->rank() > 0)
      total += static_cast<double>(node->input(0)->shape()[0] - 1) * static_cast<double>(node->input(1)->type().byteSize());
  }
  return total;
}

} // namespace kiln::ir
