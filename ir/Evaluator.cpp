#include "ir/Evaluator.h"

#include <unordered_map>
#include <unordered_set>

#include "core/Error.h"
#include "ir/Builder.h"
#include "ir/SymbolicShapes.h"

namespace kiln::ir {

std::unique_ptr<Graph> decompositionGraph(OpKind op, const std::vector<TensorType> &inputs,
                                          const AttrMap &attrs) {
  auto graph = std::make_unique<Graph>(std::string(opName(op)));
  std::vector<Value *> args;
  for (size_t i = 0; i < inputs.size(); ++i)
    args.push_back(graph->addInput(inputs[i], fmt::format("in{}", i)));
  Builder builder(*graph);
  graph->setOutputs(opDef(op).decompose(builder, args, completeAttrs(op, attrs)));
  return graph;
}

std::vector<Tensor> evaluateOp(OpKind op, const std::vector<Tensor> &inputs, const AttrMap &attrs,
                               const std::vector<TensorType> &outputTypes) {
  const OpDef &def = opDef(op);
  if (op == OpKind::Kernel)
    fail("kernel: a kernel's meaning is its body; evaluate the node (evaluateNode) or its graph");
  if (opTraits(op).tier == OpTier::Composite) {
    std::vector<TensorType> inputTypes;
    for (auto &t : inputs)
      inputTypes.push_back(t.type());
    auto graph = decompositionGraph(op, inputTypes, attrs);
    return evaluate(*graph, inputs);
  }
  if (!def.eval)
    fail("{}: op has no reference evaluation", opName(op));
  std::vector<Tensor> outputs = def.eval(inputs, attrs, outputTypes);
  if (outputs.size() != outputTypes.size())
    fail("{}: reference evaluation returned {} outputs, expected {}", opName(op), outputs.size(),
         outputTypes.size());
  for (size_t i = 0; i < outputs.size(); ++i)
    if (outputs[i].type() != outputTypes[i])
      fail("{}: reference evaluation returned {} for output {}, expected {}", opName(op),
           outputs[i].type().toString(), i, outputTypes[i].toString());
  return outputs;
}

std::vector<Tensor> evaluateNode(const Node &node, const std::vector<Tensor> &inputs) {
  std::vector<TensorType> outputTypes;
  for (size_t i = 0; i < node.numOutputs(); ++i)
    outputTypes.push_back(node.output(i)->type());
  if (node.op() != OpKind::Kernel)
    return evaluateOp(node.op(), inputs, node.attrs(), outputTypes);
  if (!node.body())
    fail("kernel: the node has no body to evaluate");
  // Bodies hold no kernels (the verifier checks it), so this recursion is one level deep.
  std::vector<Tensor> outputs = evaluate(*node.body(), inputs);
  if (outputs.size() != outputTypes.size())
    fail("kernel: its body returns {} values, the node has {} results", outputs.size(), outputTypes.size());
  for (size_t i = 0; i < outputs.size(); ++i)
    if (outputs[i].type() != outputTypes[i])
      fail("kernel: its body returns {} for result {}, the node declares {}", outputs[i].type().toString(), i,
           outputTypes[i].toString());
  return outputs;
}

std::vector<Tensor> evaluate(const Graph &graph, const std::vector<Tensor> &inputs, const ParamValues &params) {
  if (inputs.size() != graph.inputs().size())
    fail("graph @{} takes {} inputs, got {}", graph.name(), graph.inputs().size(), inputs.size());
  if (!isStaticGraph(graph)) { // a symbolic graph runs at the sizes its inputs have
    std::vector<std::optional<Shape>> shapes;
    for (const Tensor &input : inputs)
      shapes.push_back(input.shape());
    return evaluate(*bindSymbols(graph, bindingsFromShapes(graph, shapes)), inputs, params);
  }
  std::unordered_map<const Value *, Tensor> env;
  // Remaining uses per value, so intermediates are freed after their last use: the evaluator
  // must handle ResNet-50 and BERT without holding every activation.
  std::unordered_map<const Value *, size_t> remaining;
  auto bind = [&](const Value *value, Tensor tensor) {
    remaining[value] = value->uses().size();
    env[value] = std::move(tensor);
  };
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Value *input = graph.inputs()[i];
    if (!inputs[i].defined() || inputs[i].type() != input->type())
      fail("graph @{}: input {} ('{}') expects {}, got {}", graph.name(), i, input->name(),
           input->type().toString(), inputs[i].defined() ? inputs[i].type().toString() : "nothing");
    bind(input, inputs[i]);
  }
  for (const Node *node : graph.nodes()) {
    std::vector<Tensor> args;
    for (const Value *input : node->inputs())
      args.push_back(env.at(input));
    std::vector<TensorType> outputTypes;
    for (size_t i = 0; i < node->numOutputs(); ++i)
      outputTypes.push_back(node->output(i)->type());
    std::vector<Tensor> results;
    if (node->op() == OpKind::Kernel) {
      results = evaluateNode(*node, args);
    } else if (node->op() == OpKind::Param) {
      const std::string &name = node->attrString("name");
      auto given = params.find(name);
      if (given != params.end()) {
        if (given->second.type() != outputTypes[0])
          fail("parameter '{}' expects {}, got {}", name, outputTypes[0].toString(),
               given->second.type().toString());
        results.push_back(given->second);
      } else if (node->attrTensor("value").defined()) {
        results.push_back(node->attrTensor("value"));
      } else {
        fail("parameter '{}' has no value", name);
      }
    } else {
      results = evaluateOp(node->op(), args, node->attrs(), outputTypes);
    }
    args.clear();
    for (const Value *input : node->inputs())
      if (--remaining[input] == 0 && !graph.isOutput(input))
        env.erase(input);
    for (size_t i = 0; i < results.size(); ++i)
      bind(node->output(i), std::move(results[i]));
  }
  // An output that returns a graph input, a parameter or constant as it is, or a value an
  // earlier output returned, would share its storage with the caller's tensor, the graph's
  // attribute or that output (Tensor copies share storage): each gets a copy, as a compiled
  // model's output gets a buffer of its own.
  std::vector<Tensor> outputs;
  std::unordered_set<const Value *> returned;
  for (const Value *output : graph.outputs()) {
    const Node *producer = output->producer();
    bool shared = !producer || producer->op() == OpKind::Param || producer->op() == OpKind::Constant ||
                  !returned.insert(output).second;
    outputs.push_back(shared ? env.at(output).clone() : env.at(output));
  }
  return outputs;
}

} // namespace kiln::ir
