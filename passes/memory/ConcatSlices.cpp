// What a concat node alone says about laying its operands out as slices of its result
// (passes/memory/ConcatSlices.h).
#include "passes/memory/ConcatSlices.h"

#include <algorithm>

#include "passes/fusion/FusionClasses.h"
#include "passes/memory/PlanMemoryDetail.h"

namespace kiln::passes {

std::optional<std::vector<int64_t>> concatSliceOffsets(const ir::Node &node) {
  if (node.op() != ir::OpKind::Concat)
    return std::nullopt;
  const Shape &shape = node.output()->shape();
  const int64_t axis = normalizeAxis(node.attrInt("axis"), static_cast<int64_t>(shape.size()), "axis");
  for (int64_t d = 0; d < axis; ++d)
    if (shape[static_cast<size_t>(d)] != 1)
      return std::nullopt;
  std::vector<int64_t> offsets;
  int64_t offset = 0;
  for (const ir::Value *operand : node.inputs()) {
    offsets.push_back(offset);
    offset += static_cast<int64_t>(operand->type().byteSize());
  }
  return offsets;
}

namespace {

/// A value the arena holds: computed by a kernel (not a source) and not returned.
bool isIntermediate(const ir::Graph &graph, const ir::Value *value) {
  const ir::Node *producer = value->producer();
  return producer && ir::opTraits(producer->op()).tier != ir::OpTier::Source && !graph.isOutput(value);
}

} // namespace

bool concatMayBeSlices(const ir::Graph &graph, const ir::Node &node, int64_t alignment) {
  const std::optional<std::vector<int64_t>> offsets = concatSliceOffsets(node);
  if (!offsets || !isIntermediate(graph, node.output()) || node.output()->type().byteSize() == 0)
    return false;
  const std::vector<ir::Value *> &operands = node.inputs();
  for (size_t k = 0; k < operands.size(); ++k) {
    const ir::Value *operand = operands[k];
    if (!isIntermediate(graph, operand) || operand->type().byteSize() == 0 || (*offsets)[k] % alignment != 0 ||
        std::count(operands.begin(), operands.end(), operand) > 1)
      return false;
  }
  return true;
}

namespace {

/// Whether `value` is written by a node that stores it anyway, through views of intermediates
/// of its size (concatStandsAlone).
bool storedByItsWriter(const ir::Graph &graph, const ir::Value *value, int64_t alignment) {
  const ir::Node *producer = value->producer();
  while (producer && detail::isViewOp(producer->op())) {
    const ir::Value *operand = producer->input(0);
    if (!isIntermediate(graph, operand) || operand->type().byteSize() != value->type().byteSize())
      return false;
    producer = operand->producer();
  }
  if (producer == nullptr)
    return false;
  if (producer->op() == ir::OpKind::Concat)
    return concatStandsAlone(graph, *producer, alignment);
  return fusion::classify(*producer) != fusion::OpClass::Movement;
}

} // namespace

bool concatStandsAlone(const ir::Graph &graph, const ir::Node &node, int64_t alignment) {
  if (!concatMayBeSlices(graph, node, alignment))
    return false;
  for (const ir::Value *operand : node.inputs())
    if (!storedByItsWriter(graph, operand, alignment))
      return false;
  return true;
}

} // namespace kiln::passes
