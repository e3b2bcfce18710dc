// Walks both graphs in lockstep and maps each value of `a` to its counterpart in `b`, so an
// operand matches when it refers to the corresponding value, whatever its name. Kernel bodies
// are compared the same way, each with its own value mapping (bodies are isolated from above).
#include "ir/GraphEquality.h"

#include <unordered_map>

#include <fmt/format.h>

#include "ir/Printer.h"

namespace kiln::ir {

namespace {

/// graphDifference, where a kernel body's own graph name (which the text form does not
/// carry) is left out of the comparison.
std::string difference(const Graph &a, const Graph &b, bool compareNames, bool compareGraphName) {
  if (compareNames && compareGraphName && a.name() != b.name())
    return fmt::format("graph names differ: @{} vs @{}", a.name(), b.name());
  if (a.inputs().size() != b.inputs().size())
    return fmt::format("input counts differ: {} vs {}", a.inputs().size(), b.inputs().size());
  std::unordered_map<const Value *, const Value *> counterpart;
  auto compareValue = [&](const Value *va, const Value *vb, const std::string &what) -> std::string {
    if (va->type() != vb->type())
      return fmt::format("{}: types differ: {} vs {}", what, va->type().toString(), vb->type().toString());
    if (compareNames && va->name() != vb->name())
      return fmt::format("{}: names differ: '{}' vs '{}'", what, va->name(), vb->name());
    counterpart[va] = vb;
    return "";
  };
  for (size_t i = 0; i < a.inputs().size(); ++i)
    if (auto diff = compareValue(a.inputs()[i], b.inputs()[i], fmt::format("input {}", i)); !diff.empty())
      return diff;

  std::vector<Node *> nodesA = a.nodes(), nodesB = b.nodes();
  if (nodesA.size() != nodesB.size())
    return fmt::format("node counts differ: {} vs {}", nodesA.size(), nodesB.size());
  auto sameOperand = [&](const Value *va, const Value *vb) {
    auto it = counterpart.find(va);
    return it != counterpart.end() && it->second == vb;
  };
  for (size_t n = 0; n < nodesA.size(); ++n) {
    const Node &na = *nodesA[n], &nb = *nodesB[n];
    std::string where = fmt::format("node {} ({})", n, na.opName());
    if (na.op() != nb.op())
      return fmt::format("{}: ops differ: {} vs {}", where, na.opName(), nb.opName());
    if (na.numInputs() != nb.numInputs())
      return fmt::format("{}: operand counts differ: {} vs {}", where, na.numInputs(), nb.numInputs());
    for (size_t i = 0; i < na.numInputs(); ++i)
      if (!sameOperand(na.input(i), nb.input(i)))
        return fmt::format("{}: operand {} refers to different values", where, i);
    if (!attrMapsEqual(na.attrs(), nb.attrs())) {
      for (const auto &[name, value] : na.attrs()) {
        auto other = nb.attrs().find(name);
        if (other == nb.attrs().end())
          return fmt::format("{}: attribute '{}' is missing from the second graph", where, name);
        if (!attributesEqual(value, other->second))
          return fmt::format("{}: attribute '{}' differs: {} vs {}", where, name,
                             formatAttribute(value, {16, true}), formatAttribute(other->second, {16, true}));
      }
      return fmt::format("{}: the second graph has extra attributes", where);
    }
    if (na.numOutputs() != nb.numOutputs())
      return fmt::format("{}: output counts differ: {} vs {}", where, na.numOutputs(), nb.numOutputs());
    for (size_t i = 0; i < na.numOutputs(); ++i)
      if (auto diff = compareValue(na.output(i), nb.output(i), fmt::format("{} output {}", where, i)); !diff.empty())
        return diff;
    if (!na.body() != !nb.body())
      return fmt::format("{}: only the {} graph's node has a body", where, na.body() ? "first" : "second");
    // Bodies nest one level in a verified graph, so this recursion stays shallow.
    if (na.body())
      if (auto diff = difference(*na.body(), *nb.body(), compareNames, false); !diff.empty())
        return fmt::format("{}: body: {}", where, diff);
  }
  if (a.outputs().size() != b.outputs().size())
    return fmt::format("output counts differ: {} vs {}", a.outputs().size(), b.outputs().size());
  for (size_t i = 0; i < a.outputs().size(); ++i) {
    if (!sameOperand(a.outputs()[i], b.outputs()[i]))
      return fmt::format("returned value {} differs", i);
    if (compareNames && a.outputName(i) != b.outputName(i))
      return fmt::format("output {} is named '{}' vs '{}'", i, a.outputName(i), b.outputName(i));
  }
  return "";
}

} // namespace

std::string graphDifference(const Graph &a, const Graph &b, bool compareNames) {
  return difference(a, b, compareNames, true);
}

} // namespace kiln::ir
