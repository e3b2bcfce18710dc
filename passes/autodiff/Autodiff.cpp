// appendGradients, in stages:
//  1. Forward reach: walking the nodes in order, the float values that depend on some wrt value.
//  2. Backward reach: walking in reverse from the loss, the values the loss depends on. A node
//     is on a gradient path when it reads a value of (1) and produces a value of (2); no other
//     node gets a gradient rule applied, so unrelated parts of the graph cost nothing and may
//     hold ops without rules.
//  3. Reverse sweep: seeded with d loss / d loss = 1, each node on a path (in reverse order, so
//     all uses of its outputs have contributed) turns its outputs' gradients into its inputs'
//     with its rule; contributions to one value are summed.
// Gradients live in a map keyed by value pointer, used for lookup only: iteration order always
// comes from the node list, so the built graph is deterministic.
#include "passes/autodiff/Autodiff.h"

#include <unordered_map>
#include <unordered_set>

#include "core/Error.h"
#include "ir/Builder.h"
#include "passes/autodiff/GradientRules.h"

namespace kiln::passes::autodiff {

using namespace ir;

namespace {

std::string describeNode(const Node &node, size_t position) {
  std::vector<TensorType> types;
  for (Value *input : node.inputs())
    types.push_back(input->type());
  std::string name = node.output()->name().empty() ? "" : " %" + node.output()->name();
  return fmt::format("node #{}{} {}", position, name, describeCall(node.op(), types));
}

bool carriesGradient(const Value *value) { return isFloat(value->dtype()); }

} // namespace

std::vector<Value *> appendGradients(Graph &graph, Value *loss, const std::vector<Value *> &wrt) {
  if (loss == nullptr || loss->graph() != &graph)
    fail("autodiff: the loss is not a value of graph @{}", graph.name());
  if (!carriesGradient(loss) || loss->type().numElements() != 1)
    fail("autodiff: the loss must be a single float element, got {}", (loss->type()).toString());
  for (size_t i = 0; i < wrt.size(); ++i) {
    if (wrt[i] == nullptr || wrt[i]->graph() != &graph)
      fail("autodiff: wrt value {} is not a value of graph @{}", i, graph.name());
    if (!carriesGradient(wrt[i]))
      fail("autodiff: wrt value {} has type {}; only float values have gradients", i, (wrt[i]->type()).toString());
  }
  const std::vector<Node *> forward = graph.nodes();

  // 1. Float values that depend on a wrt value.
  std::unordered_set<const Value *> dependsOnWrt(wrt.begin(), wrt.end());
  for (const Node *node : forward) {
    bool reads = false;
    for (const Value *input : node->inputs())
      reads = reads || dependsOnWrt.count(input) != 0;
    if (reads)
      for (const Value *output : node->outputs())
        if (carriesGradient(output))
          dependsOnWrt.insert(output);
  }
  // 2. Values the loss depends on; nodes on a path between the two.
  std::unordered_set<const Value *> feedsLoss{loss};
  std::unordered_set<const Node *> onPath;
  for (auto it = forward.rbegin(); it != forward.rend(); ++it) {
    const Node *node = *it;
    bool feeds = false, reads = false;
    for (const Value *output : node->outputs())
      feeds = feeds || feedsLoss.count(output) != 0;
    if (!feeds)
      continue;
    for (const Value *input : node->inputs()) {
      feedsLoss.insert(input);
      reads = reads || dependsOnWrt.count(input) != 0;
    }
    if (reads)
      onPath.insert(node);
  }

  // 3. The reverse sweep.
  Builder b(graph);
  b.setInsertionPoint(nullptr);
  std::unordered_map<const Value *, Value *> grads;
  Value *one = b.scalar(loss->dtype(), 1.0);
  grads[loss] = loss->rank() == 0 ? one : b.create(OpKind::Broadcast, {one}, {{"shape", loss->shape()}});
  for (size_t position = forward.size(); position-- > 0;) {
    const Node &node = *forward[position];
    if (onPath.count(&node) == 0)
      continue;
    std::vector<Value *> gradOutputs;
    bool any = false;
    for (Value *output : node.outputs()) {
      auto found = grads.find(output);
      any = any || found != grads.end();
      if (found != grads.end())
        gradOutputs.push_back(found->second);
      else
        gradOutputs.push_back(carriesGradient(output) ? zerosOf(b, output->type()) : nullptr);
    }
    if (!any)
      continue; // its outputs reach the loss only through non-differentiable ops
    GradientRule rule = gradientRule(node.op());
    switch (rule.kind) {
    case GradKind::NotDifferentiable:
      continue;
    case GradKind::DecomposeFirst:
      if (isComposite(node.op()))
        fail("autodiff: {} is a composite op; run the decompose pass before autodiff", describeNode(node, position));
      fail("autodiff: {} is differentiated through its unrolled form; run the decompose pass for autodiff first "
           "(createDecomposeForAutodiffPass)",
           describeNode(node, position));
    case GradKind::Unsupported:
      fail("autodiff: no gradient rule for op '{}' at {}", node.opName(), describeNode(node, position));
    case GradKind::Rule:
      break;
    }
    std::vector<Value *> inputGrads = rule.fn(b, node, gradOutputs);
    for (size_t i = 0; i < node.numInputs(); ++i) {
      Value *input = node.input(i);
      if (i >= inputGrads.size() || inputGrads[i] == nullptr || dependsOnWrt.count(input) == 0)
        continue;
      if (inputGrads[i]->type() != input->type())
        fail("autodiff: internal error, the rule of '{}' gave operand {} a gradient of type {}, expected {} ({})",
             node.opName(), i, (inputGrads[i]->type()).toString(), (input->type()).toString(),
             describeNode(node, position));
      Value *&sum = grads[input];
      sum = sum == nullptr ? inputGrads[i] : b.create(OpKind::Add, {sum, inputGrads[i]});
    }
  }

  std::vector<Value *> result;
  for (Value *value : wrt) {
    auto found = grads.find(value);
    result.push_back(found != grads.end() ? found->second : zerosOf(b, value->type()));
  }
  return result;
}

} // namespace kiln::passes::autodiff
