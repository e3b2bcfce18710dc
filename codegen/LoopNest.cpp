// Units and the index maps of re-indexing ops. The stage planning (strategies) lives in
// LoopNestPlanner.cpp.
#include "codegen/LoopNest.h"

#include <algorithm>

#include "core/Error.h"
#include "ir/KernelOutline.h"

namespace kiln::codegen {

using ir::OpKind;

namespace {

bool isSmallConstant(const ir::Value &value) {
  return value.producer() && value.producer()->op() == OpKind::Constant &&
         value.type().numElements() <= ir::kMaxInlinedConstantElements;
}

int64_t clampSliceBound(int64_t bound, int64_t dim, int64_t step) {
  if (bound < 0)
    bound += dim;
  return step > 0 ? std::clamp<int64_t>(bound, 0, dim) : std::clamp<int64_t>(bound, -1, dim - 1);
}

// ONNX Slice as ir/ops/MovementRegion.cpp defines it: per sliced axis its start and step
// (the count is the output dim, which inference already computed).
std::vector<std::pair<int64_t, std::pair<int64_t, int64_t>>> sliceAxes(const ir::Node &node) {
  const Shape &shape = node.input(0)->shape();
  const auto &starts = node.attrInts("starts");
  const auto &axesAttr = node.attrInts("axes");
  const auto &steps = node.attrInts("steps");
  std::vector<std::pair<int64_t, std::pair<int64_t, int64_t>>> out; // axis -> (start, step)
  for (size_t i = 0; i < starts.size(); ++i) {
    int64_t axis = axesAttr.empty() ? static_cast<int64_t>(i) : axesAttr[i];
    if (axis < 0)
      axis += static_cast<int64_t>(shape.size());
    int64_t step = steps.empty() ? 1 : steps[i];
    out.push_back({axis, {clampSliceBound(starts[i], shape[axis], step), step}});
  }
  return out;
}

bool isElementwiseKind(OpKind op) {
  ir::FusionKind kind = ir::opTraits(op).fusion;
  return (kind == ir::FusionKind::Elementwise || kind == ir::FusionKind::Broadcast) &&
         op != OpKind::Broadcast && ir::opTraits(op).tier == ir::OpTier::Primitive;
}

} // namespace

Unit unitForKernel(const ir::Node &kernel, const std::string &label) {
  Unit unit;
  unit.body = kernel.body();
  if (!unit.body)
    fail("codegen: kernel {} has no body", label);
  unit.rule = kernel.hasAttr("rule") ? kernel.attrString("rule") : "";
  unit.nodeLabel = label;
  for (const ir::Value *operand : kernel.inputs())
    unit.inlinedOperands.push_back(isSmallConstant(*operand) ? operand->producer()->attrTensor("value")
                                                             : Tensor());
  return unit;
}

std::vector<const ir::Value *> unitOperandValues(const ir::Node &node) {
  std::vector<const ir::Value *> values;
  for (const ir::Value *operand : node.inputs()) {
    if (isSmallConstant(*operand))
      continue;
    // A kernel's body inputs are 1:1 with its operands; a plain node's scratch body takes
    // each distinct operand once.
    if (node.op() != OpKind::Kernel && std::find(values.begin(), values.end(), operand) != values.end())
      continue;
    values.push_back(operand);
  }
  return values;
}

Unit unitForNode(const ir::Node &node, const std::string &label) {
  Unit unit;
  unit.owned = std::make_unique<ir::Graph>("unit");
  unit.nodeLabel = label;
  std::unordered_map<const ir::Value *, ir::Value *> mapping;
  for (const ir::Value *operand : node.inputs()) {
    if (mapping.count(operand))
      continue;
    if (isSmallConstant(*operand)) {
      unit.owned->cloneNodes({operand->producer()}, mapping);
    } else {
      mapping[operand] = unit.owned->addInput(operand->type(), operand->name());
      unit.inlinedOperands.push_back(Tensor());
    }
  }
  unit.owned->cloneNodes({&node}, mapping);
  for (const ir::Value *output : node.outputs())
    unit.owned->addOutput(mapping.at(output));
  unit.body = unit.owned.get();
  return unit;
}

Unit unitForCopy(const ir::Value &value, const std::string &label) {
  Unit unit;
  unit.owned = std::make_unique<ir::Graph>("copy");
  unit.nodeLabel = label;
  if (isSmallConstant(value)) {
    std::unordered_map<const ir::Value *, ir::Value *> mapping;
    unit.owned->cloneNodes({value.producer()}, mapping);
    unit.owned->addOutput(mapping.at(&value));
  } else {
    unit.owned->addOutput(unit.owned->addInput(value.type(), value.name()));
    unit.inlinedOperands.push_back(Tensor());
  }
  unit.body = unit.owned.get();
  return unit;
}

std::optional<std::vector<Index>> operandCoords(IndexArena &arena, const ir::Node &node, size_t operand,
                                                size_t output, const std::vector<Index> &coords) {
  const Shape &in = node.input(operand)->shape();
  const Shape &out = node.output(output)->shape();
  // numpy broadcasting: the operand is right-aligned and its size-1 dims read index 0.
  auto broadcastMap = [&]() {
    std::vector<Index> mapped(in.size());
    size_t offset = out.size() - in.size();
    for (size_t d = 0; d < in.size(); ++d)
      mapped[d] = in[d] == 1 ? IndexArena::constant(0) : coords[d + offset];
    return mapped;
  };
  OpKind op = node.op();
  if (isElementwiseKind(op) || op == OpKind::Broadcast)
    return broadcastMap();
  switch (op) {
  case OpKind::Reshape: return unflattenIndex(arena, flatIndex(arena, coords, out), in);
  case OpKind::Permute: {
    const auto &perm = node.attrInts("perm");
    std::vector<Index> mapped(in.size());
    for (size_t d = 0; d < perm.size(); ++d) {
      int64_t axis = perm[d] < 0 ? perm[d] + static_cast<int64_t>(in.size()) : perm[d];
      mapped[static_cast<size_t>(axis)] = coords[d];
    }
    return mapped;
  }
  case OpKind::Slice: {
    std::vector<Index> mapped = coords;
    for (const auto &[axis, startStep] : sliceAxes(node))
      mapped[static_cast<size_t>(axis)] =
          arena.addConstant(arena.scale(coords[static_cast<size_t>(axis)], startStep.second), startStep.first);
    return mapped;
  }
  case OpKind::Split: {
    int64_t axis = node.attrInt("axis");
    if (axis < 0)
      axis += static_cast<int64_t>(in.size());
    int64_t offset = 0;
    for (size_t k = 0; k < output; ++k)
      offset += node.attrInts("sizes")[k];
    std::vector<Index> mapped = coords;
    mapped[static_cast<size_t>(axis)] = arena.addConstant(coords[static_cast<size_t>(axis)], offset);
    return mapped;
  }
  default: return std::nullopt;
  }
}

bool StridedAccess::rowMajor(const Shape &shape) const {
  const std::vector<int64_t> expected = contiguousStrides(shape);
  if (strides.size() != expected.size())
    return false;
  for (size_t d = 0; d < shape.size(); ++d)
    if (shape[d] > 1 && strides[d] != expected[d])
      return false;
  return true;
}

std::optional<StridedAccess> stridedAccess(const KernelPlan &plan, int stage, const ir::Value &value) {
  IndexArena arena;
  std::vector<Index> coords;
  std::vector<std::string> names;
  for (size_t d = 0; d < value.shape().size(); ++d) {
    names.push_back("a" + std::to_string(d));
    coords.push_back(arena.var(names.back(), value.shape()[d], 1));
  }
  const ir::Value *current = &value;
  for (;;) {
    auto it = plan.bufferOf.find(current);
    if (it != plan.bufferOf.end() && plan.buffers[static_cast<size_t>(it->second)].producedByStage < stage) {
      Index address = flatIndex(arena, coords, current->shape());
      if (!arena.isAffine(address))
        return std::nullopt;
      StridedAccess access;
      access.buffer = it->second;
      access.offset = address.constant;
      for (const std::string &name : names)
        access.strides.push_back(arena.coefficientOf(address, name));
      return access;
    }
    const ir::Node *producer = current->producer();
    if (!producer)
      return std::nullopt;
    OpKind op = producer->op();
    if (op != OpKind::Reshape && op != OpKind::Permute && op != OpKind::Broadcast && op != OpKind::Slice &&
        op != OpKind::Split)
      return std::nullopt;
    auto mapped = operandCoords(arena, *producer, 0, static_cast<size_t>(current->outputIndex()), coords);
    if (!mapped)
      return std::nullopt;
    coords = std::move(*mapped);
    current = producer->input(0);
  }
}

} // namespace kiln::codegen
