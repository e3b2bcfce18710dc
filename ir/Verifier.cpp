#include "ir/Verifier.h"

#include <algorithm>
#include <unordered_set>

#include "core/Error.h"
#include "core/ShapeMath.h"
#include "ir/Builder.h"

namespace kiln::ir {

namespace {

std::string where(const Graph &graph, size_t index, const Node *node) {
  return fmt::format("graph @{}: node {} ({})", graph.name(), index, node->opName());
}

void checkUseLists(const Graph &graph, const Value *value, const std::string &what) {
  for (const Use &use : value->uses()) {
    if (use.user->graph() != &graph || use.operandIndex < 0 ||
        static_cast<size_t>(use.operandIndex) >= use.user->numInputs() ||
        use.user->input(static_cast<size_t>(use.operandIndex)) != value)
      fail("graph @{}: {} has a dangling use by a {} node", graph.name(), what, use.user->opName());
  }
}

/// Checks a kernel node against its body and returns the body's result types, which the
/// node's outputs must have. The body is verified as a graph of its own; it holds no kernel
/// (checked first), so this recursion is one level deep.
std::vector<TensorType> checkKernel(const Node &kernel, const std::vector<TensorType> &operandTypes) {
  const Graph *body = kernel.body();
  if (!body)
    fail("the kernel has no body");
  if (body->parentNode() != &kernel)
    fail("the kernel's body does not point back to it");
  if (body->inputs().size() != operandTypes.size())
    fail("the body takes {} inputs, the kernel has {} operands", body->inputs().size(), operandTypes.size());
  for (size_t i = 0; i < operandTypes.size(); ++i)
    if (body->inputs()[i]->type() != operandTypes[i])
      fail("body input {} has type {}, operand {} has type {}", i, body->inputs()[i]->type().toString(), i,
           operandTypes[i].toString());
  size_t index = 0;
  for (const Node *node : body->nodes()) {
    if (node->op() == OpKind::Param)
      fail("body node {} is a param; parameters stay outside a kernel, as its operands", index);
    if (node->op() == OpKind::Kernel)
      fail("body node {} is a kernel; kernels do not nest", index);
    ++index;
  }
  if (body->outputs().empty())
    fail("the body returns nothing; a kernel has at least one result");
  try {
    verify(*body);
  } catch (const Error &e) {
    fail("body: {}", e.what());
  }
  std::vector<TensorType> types;
  for (const Value *output : body->outputs())
    types.push_back(output->type());
  return types;
}

} // namespace

void verify(const Graph &graph) {
  std::unordered_set<const Value *> defined;
  for (const Value *input : graph.inputs()) {
    if (input->graph() != &graph || !input->isGraphInput())
      fail("graph @{}: input '{}' does not belong to the graph", graph.name(), input->name());
    try {
      checkShapeWithinLimit(input->type().shape, "shape"); // kiln's size limit (core/ShapeMath.h)
    } catch (const Error &e) {
      fail("graph @{}: input '{}': {}", graph.name(), input->name(), e.what());
    }
    defined.insert(input);
    checkUseLists(graph, input, fmt::format("input '{}'", input->name()));
  }
  size_t index = 0;
  for (const Node *node : graph.nodes()) {
    std::vector<TensorType> inputTypes;
    for (size_t i = 0; i < node->numInputs(); ++i) {
      const Value *input = node->input(i);
      if (!defined.count(input)) {
        if (input->graph() != &graph)
          fail("{}: operand {} belongs to another graph{}", where(graph, index, node), i,
               graph.parentNode() ? " (a kernel body may use only its own inputs and values)" : "");
        fail("{}: operand {} is not defined before its use", where(graph, index, node), i);
      }
      const auto &uses = input->uses();
      if (std::count(uses.begin(), uses.end(), Use{const_cast<Node *>(node), static_cast<int>(i)}) != 1)
        fail("{}: operand {} is missing from its value's use list", where(graph, index, node), i);
      inputTypes.push_back(input->type());
    }
    bool kernel = node->op() == OpKind::Kernel;
    std::vector<TensorType> expected;
    try {
      AttrMap complete = completeAttrs(node->op(), node->attrs());
      if (!attrMapsEqual(complete, node->attrs()))
        fail("attributes are incomplete");
      if (kernel) {
        expected = checkKernel(*node, inputTypes);
      } else {
        if (node->body())
          fail("only kernel nodes have a body");
        expected = inferTypes(node->op(), inputTypes, node->attrs());
      }
    } catch (const Error &e) {
      throw Error(fmt::format("{}: {}", where(graph, index, node), e.what()));
    }
    const char *source = kernel ? "its body returns" : "inference gives";
    if (expected.size() != node->numOutputs())
      fail("{}: has {} outputs, {} {}", where(graph, index, node), node->numOutputs(), source, expected.size());
    for (size_t i = 0; i < expected.size(); ++i) {
      const Value *output = node->output(i);
      if (output->type() != expected[i])
        fail("{}: output {} has type {}, {} {}", where(graph, index, node), i, output->type().toString(), source,
             expected[i].toString());
      if (output->producer() != node || output->outputIndex() != static_cast<int>(i))
        fail("{}: output {} does not point back to its node", where(graph, index, node), i);
      checkUseLists(graph, output, fmt::format("node {} output {}", index, i));
      defined.insert(output);
    }
    ++index;
  }
  for (size_t i = 0; i < graph.outputs().size(); ++i)
    if (!defined.count(graph.outputs()[i]))
      fail("graph @{}: returned value {} is not defined in the graph", graph.name(), i);
}

} // namespace kiln::ir
