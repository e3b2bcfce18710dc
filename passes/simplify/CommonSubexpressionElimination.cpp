// Common subexpression elimination by hashing, in one forward sweep:
//   1. Each node (parameters excepted) gets a hash of its op, its operands (sorted for a
//      commutative op, so add(a, b) and add(b, a) agree) and its attributes (a tensor by its
//      type and bytes, a float by its bits, matching ir::attributesEqual).
//   2. Among the nodes seen before with the same hash, one that computes the same thing
//      (same op, operands, attributes and output types) takes over the node's uses, and the
//      node is erased; otherwise the node is remembered.
// A kernel node (a fusion group) also compares its body, structurally, without names.
// Operands are compared as Value pointers, which is sound because a merged node's uses are
// redirected before any later node is hashed: a chain of duplicates (two equal constants, then
// two equal adds of them) merges link by link in the same sweep. The hash table is only looked
// up, never iterated, so the result does not depend on pointer values: the earlier node of two
// always survives.
#include "passes/simplify/CommonSubexpressionElimination.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <string_view>
#include <unordered_map>

#include "ir/GraphEquality.h"

namespace kiln::passes {

namespace {

void combine(size_t &seed, size_t value) { seed ^= value + 0x9e3779b97f4a7c15ull + (seed << 6) + (seed >> 2); }

size_t hashDouble(double value) {
  uint64_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return std::hash<uint64_t>{}(bits);
}

size_t hashTensor(const Tensor &tensor) {
  size_t seed = std::hash<bool>{}(tensor.defined());
  if (!tensor.defined())
    return seed;
  combine(seed, static_cast<size_t>(tensor.dtype()));
  for (int64_t dim : tensor.shape())
    combine(seed, std::hash<int64_t>{}(dim));
  std::string_view bytes(static_cast<const char *>(tensor.data()), tensor.byteSize());
  combine(seed, std::hash<std::string_view>{}(bytes));
  return seed;
}

size_t hashAttribute(const ir::Attribute &attr) {
  size_t seed = attr.index();
  std::visit(
      [&](const auto &value) {
        using T = std::decay_t<decltype(value)>;
        if constexpr (std::is_same_v<T, int64_t>)
          combine(seed, std::hash<int64_t>{}(value));
        else if constexpr (std::is_same_v<T, double>)
          combine(seed, hashDouble(value));
        else if constexpr (std::is_same_v<T, std::vector<int64_t>>)
          for (int64_t item : value)
            combine(seed, std::hash<int64_t>{}(item));
        else if constexpr (std::is_same_v<T, std::vector<double>>)
          for (double item : value)
            combine(seed, hashDouble(item));
        else if constexpr (std::is_same_v<T, std::string>)
          combine(seed, std::hash<std::string>{}(value));
        else if constexpr (std::is_same_v<T, DType>)
          combine(seed, static_cast<size_t>(value));
        else
          combine(seed, hashTensor(value));
      },
      attr);
  return seed;
}

/// The operands in the order the comparison uses: sorted by address for a commutative op.
std::vector<const ir::Value *> canonicalOperands(const ir::Node *node) {
  std::vector<const ir::Value *> operands(node->inputs().begin(), node->inputs().end());
  if (ir::opTraits(node->op()).flags & ir::kCommutative)
    std::sort(operands.begin(), operands.end(), std::less<const ir::Value *>());
  return operands;
}

size_t hashNode(const ir::Node *node) {
  size_t seed = static_cast<size_t>(node->op());
  for (const ir::Value *operand : canonicalOperands(node))
    combine(seed, std::hash<const ir::Value *>{}(operand));
  for (const auto &[name, value] : node->attrs()) {
    combine(seed, std::hash<std::string>{}(name));
    combine(seed, hashAttribute(value));
  }
  return seed;
}

bool sameComputation(const ir::Node *a, const ir::Node *b) {
  if (a->op() != b->op() || a->numInputs() != b->numInputs() || a->numOutputs() != b->numOutputs())
    return false;
  if (canonicalOperands(a) != canonicalOperands(b) || !ir::attrMapsEqual(a->attrs(), b->attrs()))
    return false;
  // A kernel's computation is its body, which neither the operands nor the attributes show.
  if ((a->body() == nullptr) != (b->body() == nullptr))
    return false;
  if (a->body() && !ir::graphsEqual(*a->body(), *b->body(), /*compareNames=*/false))
    return false;
  // Equal ops, operands and attributes infer equal types; checked anyway, as it is cheap.
  for (size_t i = 0; i < a->numOutputs(); ++i)
    if (a->output(i)->type() != b->output(i)->type())
      return false;
  return true;
}

class CommonSubexpressionElimination : public Pass {
public:
  std::string_view name() const override { return "cse"; }

  bool run(ir::Graph &graph, PassContext &context) override {
    std::unordered_map<size_t, std::vector<ir::Node *>> seen;
    int64_t merged = 0;
    for (ir::Node *node : graph.nodes()) {
      if (node->op() == ir::OpKind::Param)
        continue;
      std::vector<ir::Node *> &candidates = seen[hashNode(node)];
      auto match = std::find_if(candidates.begin(), candidates.end(),
                                [&](const ir::Node *earlier) { return sameComputation(earlier, node); });
      if (match == candidates.end()) {
        candidates.push_back(node);
        continue;
      }
      for (size_t i = 0; i < node->numOutputs(); ++i) {
        ir::Value *duplicate = node->output(i), *survivor = (*match)->output(i);
        // The survivor takes the duplicate's name when it has none, so the text stays readable;
        // a returned duplicate's output keeps its name either way (Graph::setOutput).
        if (survivor->name().empty() && !duplicate->name().empty())
          survivor->setName(duplicate->name());
        duplicate->replaceAllUsesWith(survivor);
      }
      graph.eraseNode(node);
      ++merged;
    }
    context.stats.add("nodes merged", merged);
    return merged > 0;
  }
};

} // namespace

std::unique_ptr<Pass> createCommonSubexpressionEliminationPass() {
  return std::make_unique<CommonSubexpressionElimination>();
}

} // namespace kiln::passes
