// buildTrainingGraph, in stages:
//  1. Clone the forward graph, check the optimizer spec and resolve the trained parameters.
//  2. Append the loss on the chosen output (adding the target or labels input) and make it the
//     graph's output (with the buffers' new values), then decompose: autodiff differentiates primitives only, and
//     the recurrences through their unrolled form (createDecomposeForAutodiffPass). The loss
//     is re-read from the outputs afterwards, since decomposition replaces the composite's value.
//  3. appendGradients for the trained parameters the loss depends on.
//  4. Add the `lr` and `step` inputs and, per parameter, its state parameters (zeros) and its
//     update node, appended last so that it follows every other reader of what it overwrites.
//  5. Outputs: loss, new parameters, new states, new buffers, each named after the parameter
//     it overwrites; verify.
#include "passes/autodiff/TrainingGraph.h"

#include <cmath>
#include <map>
#include <set>
#include <unordered_set>

#include "core/Error.h"
#include "ir/Builder.h"
#include "ir/Verifier.h"
#include "ir/ops/Random.h"
#include "passes/autodiff/Autodiff.h"
#include "passes/decompose/Decompose.h"
#include "passes/simplify/DeadCodeElimination.h"

namespace kiln::passes::autodiff {

using namespace ir;

namespace {

void checkOptimizer(const OptimizerSpec &spec) {
  auto nonNegative = [](double value, const char *what) {
    if (!(value >= 0.0) || std::isinf(value))
      fail("training graph: {} must be a finite value >= 0, got {}", what, value);
  };
  nonNegative(spec.lr, "the learning rate");
  nonNegative(spec.weightDecay, "weight_decay");
  if (spec.kind == OptimizerKind::Sgd) {
    nonNegative(spec.momentum, "momentum");
    nonNegative(spec.dampening, "dampening");
    if (spec.nesterov && (spec.momentum <= 0.0 || spec.dampening != 0.0))
      fail("training graph: nesterov momentum requires momentum > 0 and dampening 0 (as torch.optim.SGD)");
    return;
  }
  for (double beta : {spec.beta1, spec.beta2})
    if (!(beta >= 0.0 && beta < 1.0))
      fail("training graph: Adam betas must be in [0, 1), got ({}, {})", spec.beta1, spec.beta2);
  nonNegative(spec.eps, "eps");
}

/// The parameters to train, as param values of `graph`, in the order asked (graph order by
/// default, without the frozen ones).
std::vector<Value *> resolveParams(const Graph &graph, const std::vector<std::string> &names,
                                   const std::vector<std::string> &frozen) {
  std::map<std::string, Value *> byName;
  for (Node *param : graph.params())
    byName[param->attrString("name")] = param->output();
  std::set<std::string> frozenNames;
  for (const std::string &name : frozen) {
    if (!byName.count(name))
      fail("training graph: graph @{} has no parameter '{}' to freeze", graph.name(), name);
    frozenNames.insert(name);
  }
  if (!frozen.empty() && !names.empty())
    fail("training graph: give the parameters to train or the ones to freeze, not both");
  std::vector<Value *> all;
  for (Node *param : graph.params())
    if (isFloat(param->output()->dtype()) && !frozenNames.count(param->attrString("name")))
      all.push_back(param->output());
  if (names.empty())
    return all;
  std::vector<Value *> chosen;
  std::set<std::string> seen;
  for (const std::string &name : names) {
    auto it = byName.find(name);
    if (it == byName.end())
      fail("training graph: graph @{} has no parameter '{}'", graph.name(), name);
    if (!isFloat(it->second->dtype()))
      fail("training graph: parameter '{}' has type {}; only float parameters can be trained", name,
           it->second->type().toString());
    if (!seen.insert(name).second)
      fail("training graph: parameter '{}' is listed twice", name);
    chosen.push_back(it->second);
  }
  return chosen;
}

/// The forward outputs holding the buffers' new values; checks each against its parameter.
std::vector<Value *> resolveBuffers(const Graph &graph, const std::vector<BufferWrite> &buffers) {
  std::vector<Value *> values;
  std::set<std::string> written;
  for (const BufferWrite &buffer : buffers) {
    Value *output = nullptr;
    for (size_t i = 0; i < graph.outputs().size(); ++i)
      if (graph.outputName(i) == buffer.output)
        output = graph.outputs()[i];
    if (!output)
      fail("training graph: buffer write of '{}': graph @{} has no output named '{}'", buffer.param, graph.name(),
           buffer.output);
    Value *param = nullptr;
    for (Node *node : graph.params())
      if (node->attrString("name") == buffer.param)
        param = node->output();
    if (!param)
      fail("training graph: buffer write from output '{}': graph @{} has no parameter '{}'", buffer.output,
           graph.name(), buffer.param);
    if (output->type() != param->type())
      fail("training graph: output '{}' has type {}, but the parameter '{}' it writes has type {}", buffer.output,
           output->type().toString(), buffer.param, param->type().toString());
    if (!written.insert(buffer.param).second)
      fail("training graph: parameter '{}' is written by two buffer writes", buffer.param);
    values.push_back(output);
  }
  return values;
}

/// The graph's random offset when no buffer write advances it: a graph that draws random
/// numbers (Dropout in training mode) but came without its writes (an ONNX import, a traced
/// graph saved as text) must still draw fresh ones each step, so the step adds the write
/// GraphBuilder::randomOffset records, offset + 1.
Value *unwrittenRandomOffset(const Graph &graph, const std::set<std::string> &written) {
  if (written.count(random::kOffsetParam))
    return nullptr;
  for (Node *node : graph.params())
    if (node->attrString("name") == random::kOffsetParam)
      return node->output()->type() == TensorType{DType::I64, {}} ? node->output() : nullptr;
  return nullptr;
}

Value *lossOutput(const Graph &graph, const LossSpec &spec) {
  const std::vector<Value *> &outputs = graph.outputs();
  if (!spec.outputName.empty()) {
    for (size_t i = 0; i < outputs.size(); ++i)
      if (graph.outputName(i) == spec.outputName)
        return outputs[i];
    fail("training graph: graph @{} has no output named '{}'", graph.name(), spec.outputName);
  }
  if (spec.output >= outputs.size())
    fail("training graph: the loss reads output {}, but graph @{} has {} outputs", spec.output, graph.name(),
         outputs.size());
  return outputs[spec.output];
}

void requireFreeInputName(const Graph &graph, const std::string &name) {
  for (Value *input : graph.inputs())
    if (input->name() == name)
      fail("training graph: graph @{} already has an input named '{}', which the training graph adds", graph.name(),
           name);
}

Value *appendLoss(Graph &graph, Builder &b, Value *prediction, const LossSpec &spec, int64_t &targetInput,
                  bool perElement = false);

/// The loss as LossSpec::sampleWeights defines it: each sample's loss, weighted by the weights
/// input (added, its position in `weightInput`), summed.
Value *appendWeightedLoss(Graph &graph, Builder &b, Value *prediction, const LossSpec &spec, int64_t &targetInput,
                          int64_t &weightInput) {
  if (spec.kind == LossKind::Value)
    fail("training graph: a Value loss is one value for the whole batch; it has no loss per sample to weight");
  if (prediction->rank() == 0)
    fail("training graph: weighting the loss per sample needs a batch on axis 0 of the loss's output, got {}",
         prediction->type().toString());
  Value *elements = appendLoss(graph, b, prediction, spec, targetInput, /*perElement=*/true);
  // Per sample: the mean (the sum, for sum) over its elements; class losses are one per sample.
  if (elements->rank() > 1) {
    std::vector<int64_t> rowAxes;
    for (int64_t axis = 1; axis < elements->rank(); ++axis)
      rowAxes.push_back(axis);
    elements = b.create(spec.kind == LossKind::Sum ? OpKind::ReduceSum : OpKind::ReduceMean, {elements},
                        {{"axes", rowAxes}, {"keepdims", int64_t(0)}});
  }
  requireFreeInputName(graph, spec.weightName);
  weightInput = static_cast<int64_t>(graph.inputs().size());
  Value *weights = graph.addInput(TensorType{elements->dtype(), {elements->shape()[0]}}, spec.weightName);
  return b.create(OpKind::ReduceSum, {b.create(OpKind::Mul, {elements, weights})},
                  {{"axes", std::vector<int64_t>{}}, {"keepdims", int64_t(0)}});
}

/// Appends the loss on `prediction`; adds the target input when the kind takes one. With
/// `perElement`, the loss of each element unreduced (the prediction itself for mean and sum;
/// for cross-entropy and nll, 0 at an ignored label).
Value *appendLoss(Graph &graph, Builder &b, Value *prediction, const LossSpec &spec, int64_t &targetInput,
                  bool perElement) {
  if (!isFloat(prediction->dtype()))
    fail("training graph: the loss needs a float output, got {}", prediction->type().toString());
  bool classes = spec.kind == LossKind::CrossEntropy || spec.kind == LossKind::Nll;
  if (spec.ignoreIndex && !classes)
    fail("training graph: only the cross-entropy and nll losses can ignore a label value");
  auto addTarget = [&](TensorType type) {
    requireFreeInputName(graph, spec.targetName);
    targetInput = static_cast<int64_t>(graph.inputs().size());
    return graph.addInput(std::move(type), spec.targetName);
  };
  AttrMap allAxes{{"axes", std::vector<int64_t>{}}, {"keepdims", int64_t(0)}};
  // Unreduced when asked; else the ops' default, the mean.
  AttrMap reduction = perElement ? AttrMap{{"reduction", std::string("none")}} : AttrMap{};
  switch (spec.kind) {
  case LossKind::Value:
    if (prediction->type().numElements() != 1)
      fail("training graph: a Value loss must hold one element, got {}", prediction->type().toString());
    if (perElement)
      fail("training graph: a Value loss is one value for the whole batch, with no loss per element");
    return prediction;
  case LossKind::Mean:
    return perElement ? prediction : b.create(OpKind::ReduceMean, {prediction}, allAxes);
  case LossKind::Sum:
    return perElement ? prediction : b.create(OpKind::ReduceSum, {prediction}, allAxes);
  case LossKind::Mse:
    return b.create(OpKind::MseLoss, {prediction, addTarget(prediction->type())}, reduction);
  case LossKind::CrossEntropy:
  case LossKind::Nll: {
    if (prediction->rank() != 2)
      fail("training graph: a {} loss needs [N, C] scores, got {}",
           spec.kind == LossKind::Nll ? "nll" : "cross-entropy", prediction->type().toString());
    Value *labels = addTarget(TensorType{DType::I64, {prediction->shape()[0]}});
    if (spec.ignoreIndex) {
      // cross_entropy has no ignore_index; it is nll_loss of log_softmax, which has.
      Value *logProbs = spec.kind == LossKind::Nll
                            ? prediction
                            : b.create(OpKind::LogSoftmax, {prediction}, {{"axis", int64_t(1)}});
      return b.create(OpKind::NllLoss, {logProbs, labels},
                      {{"reduction", std::string(perElement ? "none" : "mean")}, {"ignore_index", *spec.ignoreIndex}});
    }
    return b.create(spec.kind == LossKind::Nll ? OpKind::NllLoss : OpKind::CrossEntropy, {prediction, labels},
                    reduction);
  }
  }
  fail("training graph: unknown loss kind");
}

/// Every value `loss` is computed from, itself included.
std::unordered_set<const Value *> valuesReaching(const Value *loss) {
  std::unordered_set<const Value *> seen{loss};
  std::vector<const Value *> work{loss};
  while (!work.empty()) {
    const Node *producer = work.back()->producer();
    work.pop_back();
    if (!producer)
      continue;
    for (const Value *input : producer->inputs())
      if (seen.insert(input).second)
        work.push_back(input);
  }
  return seen;
}

/// lr and step in `dtype` (the graph takes them as f32), cast once per dtype.
struct Hyper {
  Builder &b;
  Value *lr, *step;
  std::map<DType, std::pair<Value *, Value *>> cast;

  std::pair<Value *, Value *> in(DType dtype) {
    if (dtype == DType::F32)
      return {lr, step};
    auto it = cast.find(dtype);
    if (it != cast.end())
      return it->second;
    auto to = [&](Value *v) { return b.create(OpKind::Cast, {v}, {{"to", dtype}}); };
    return cast[dtype] = {to(lr), to(step)};
  }
};

/// What appendOptimizer appends: the new values of the parameters, then of their states, and
/// the updates naming them (outputs still 0).
struct OptimizerUpdates {
  std::vector<Value *> values;
  std::vector<ParamUpdate> updates;
};

/// Adds the `lr` and `step` inputs and, per parameter of `trained` (with its gradient in
/// `grads`), its state parameters (zeros, named "<param>.<state>") and its update node.
OptimizerUpdates appendOptimizer(Graph &graph, Builder &b, const std::vector<Value *> &trained,
                                 const std::vector<Value *> &grads, const OptimizerSpec &optimizer,
                                 std::set<std::string> &paramNames) {
  for (const char *name : {"lr", "step"})
    requireFreeInputName(graph, name);
  Value *lr = graph.addInput(TensorType{DType::F32, {}}, "lr");
  Value *step = graph.addInput(TensorType{DType::F32, {}}, "step");
  Hyper hyper{b, lr, step, {}};

  std::vector<Value *> newParams, newStates;
  std::vector<ParamUpdate> paramUpdates, stateUpdates;
  for (size_t i = 0; i < trained.size(); ++i) {
    Value *param = trained[i];
    const std::string &name = param->producer()->attrString("name");
    auto [lrT, stepT] = hyper.in(param->dtype());
    auto state = [&](const std::string &suffix) {
      std::string stateName = name + "." + suffix;
      if (!paramNames.insert(stateName).second)
        fail("training graph: optimizer state '{}' is already a parameter of graph @{}", stateName, graph.name());
      stateUpdates.push_back(ParamUpdate{stateName, 0, true, name});
      return b.param(stateName, param->type(), Tensor(param->type()));
    };
    std::vector<Value *> outputs;
    if (optimizer.kind == OptimizerKind::Sgd) {
      AttrMap attrs{{"momentum", optimizer.momentum},
                    {"dampening", optimizer.dampening},
                    {"nesterov", int64_t(optimizer.nesterov ? 1 : 0)},
                    {"weight_decay", optimizer.weightDecay}};
      std::vector<Value *> operands{param, grads[i], lrT};
      if (optimizer.momentum != 0.0) {
        operands.push_back(state("momentum_buffer"));
        operands.push_back(stepT);
      }
      outputs = b.createMulti(OpKind::SgdUpdate, operands, attrs);
    } else {
      AttrMap attrs{{"beta1", optimizer.beta1},
                    {"beta2", optimizer.beta2},
                    {"eps", optimizer.eps},
                    {"weight_decay", optimizer.weightDecay},
                    {"decoupled", int64_t(optimizer.kind == OptimizerKind::AdamW ? 1 : 0)}};
      Value *expAvg = state("exp_avg");
      Value *expAvgSq = state("exp_avg_sq");
      outputs = b.createMulti(OpKind::AdamUpdate, {param, grads[i], expAvg, expAvgSq, lrT, stepT}, attrs);
    }
    paramUpdates.push_back(ParamUpdate{name, 0, false, name});
    newParams.push_back(outputs[0]);
    newStates.insert(newStates.end(), outputs.begin() + 1, outputs.end());
  }
  OptimizerUpdates result;
  result.values = newParams;
  result.values.insert(result.values.end(), newStates.begin(), newStates.end());
  result.updates = paramUpdates;
  result.updates.insert(result.updates.end(), stateUpdates.begin(), stateUpdates.end());
  return result;
}

} // namespace

OptimizerSpec OptimizerSpec::sgd(double lr, double momentum, bool nesterov, double weightDecay, double dampening) {
  OptimizerSpec spec;
  spec.kind = OptimizerKind::Sgd;
  spec.lr = lr;
  spec.momentum = momentum;
  spec.nesterov = nesterov;
  spec.weightDecay = weightDecay;
  spec.dampening = dampening;
  return spec;
}

OptimizerSpec OptimizerSpec::adam(double lr, double beta1, double beta2, double eps, double weightDecay) {
  OptimizerSpec spec;
  spec.kind = OptimizerKind::Adam;
  spec.lr = lr;
  spec.beta1 = beta1;
  spec.beta2 = beta2;
  spec.eps = eps;
  spec.weightDecay = weightDecay;
  return spec;
}

OptimizerSpec OptimizerSpec::adamw(double lr, double beta1, double beta2, double eps, double weightDecay) {
  OptimizerSpec spec = adam(lr, beta1, beta2, eps, weightDecay);
  spec.kind = OptimizerKind::AdamW;
  return spec;
}

std::vector<std::string> TrainingGraph::trainedParams() const {
  std::vector<std::string> names;
  for (const ParamUpdate &update : updates)
    if (!update.isState)
      names.push_back(update.name);
  return names;
}

TrainingGraph buildTrainingGraph(const Graph &forward, const LossSpec &loss, const OptimizerSpec &optimizer,
                                 const std::vector<std::string> &params, const std::vector<BufferWrite> &buffers,
                                 const std::vector<std::string> &frozen) {
  // 1.
  checkOptimizer(optimizer);
  TrainingGraph result;
  result.graph = forward.clone();
  Graph &graph = *result.graph;
  std::vector<Value *> bufferValues = resolveBuffers(graph, buffers);
  std::vector<Value *> trained = resolveParams(graph, params, frozen);
  std::set<std::string> paramNames, bufferNames;
  for (Node *param : graph.params())
    paramNames.insert(param->attrString("name"));
  for (const BufferWrite &buffer : buffers)
    bufferNames.insert(buffer.param);
  std::vector<Value *> notBuffers;
  for (Value *param : trained) {
    const std::string &name = param->producer()->attrString("name");
    if (!bufferNames.count(name))
      notBuffers.push_back(param);
    else if (!params.empty())
      fail("training graph: parameter '{}' is both trained and written by a buffer write", name);
  }
  trained = notBuffers;
  Builder b(graph);
  std::vector<std::string> bufferParams;
  for (const BufferWrite &buffer : buffers)
    bufferParams.push_back(buffer.param);
  if (Value *offset = unwrittenRandomOffset(graph, bufferNames)) {
    bufferValues.push_back(b.create(OpKind::Add, {offset, b.scalar(DType::I64, 1)}));
    bufferParams.push_back(random::kOffsetParam);
  }

  // 2. The buffers' new values ride along as outputs, which decomposition keeps up to date.
  Value *prediction = lossOutput(graph, loss);
  std::vector<Value *> kept{loss.sampleWeights
                                ? appendWeightedLoss(graph, b, prediction, loss, result.targetInput, result.weightInput)
                                : appendLoss(graph, b, prediction, loss, result.targetInput)};
  kept.insert(kept.end(), bufferValues.begin(), bufferValues.end());
  graph.setOutputs(kept);
  {
    PassContext context;
    createDecomposeForAutodiffPass()->run(graph, context);
  }
  Value *lossValue = graph.outputs()[0];
  bufferValues.assign(graph.outputs().begin() + 1, graph.outputs().end());

  // A parameter the loss does not read gets no update at all, as torch.optim skips a parameter
  // whose grad is None (no weight decay, no momentum, no Adam step).
  std::unordered_set<const Value *> reached = valuesReaching(lossValue);
  std::vector<Value *> used;
  for (Value *param : trained) {
    if (reached.count(param))
      used.push_back(param);
    else if (!params.empty())
      fail("training graph: the loss does not depend on parameter '{}'", param->producer()->attrString("name"));
  }
  trained = used;

  // 3.
  std::vector<Value *> grads = appendGradients(graph, lossValue, trained);
  result.gradients = grads;

  // 4.
  result.lrInput = graph.inputs().size();
  result.stepInput = result.lrInput + 1;
  OptimizerUpdates optimized = appendOptimizer(graph, b, trained, grads, optimizer, paramNames);

  // 5.
  std::vector<Value *> graphOutputs{lossValue};
  graphOutputs.insert(graphOutputs.end(), optimized.values.begin(), optimized.values.end());
  graphOutputs.insert(graphOutputs.end(), bufferValues.begin(), bufferValues.end());
  graph.setOutputs(graphOutputs);
  result.updates = optimized.updates;
  for (const std::string &buffer : bufferParams)
    result.updates.push_back(ParamUpdate{buffer, 0, true, buffer});
  for (size_t i = 0; i < result.updates.size(); ++i) {
    result.updates[i].output = i + 1;
    graph.setOutputName(i + 1, result.updates[i].name);
  }
  verify(graph);
  return result;
}

SplitTrainingGraph buildSplitTrainingGraph(const Graph &forward, const LossSpec &loss, const OptimizerSpec &optimizer,
                                           const std::vector<std::string> &params,
                                           const std::vector<BufferWrite> &buffers,
                                           const std::vector<std::string> &frozen) {
  SplitTrainingGraph split;
  split.whole = buildTrainingGraph(forward, loss, optimizer, params, buffers, frozen);
  const TrainingGraph &whole = split.whole;

  // The gradient part: the whole graph returning each update's gradient operand instead of the
  // update; dce then drops the updates and the optimizer states only they read.
  split.gradients = whole.graph->clone();
  Graph &gradients = *split.gradients;
  std::vector<Value *> outputs{gradients.outputs()[0]};
  std::vector<std::string> names{""};
  std::vector<const ParamUpdate *> trained;
  for (const ParamUpdate &update : whole.updates)
    if (!update.isState) {
      outputs.push_back(gradients.outputs()[update.output]->producer()->input(1));
      names.push_back(update.name + ".grad");
      trained.push_back(&update);
    }
  for (const ParamUpdate &update : whole.updates)
    if (update.isState && update.param == update.name) { // a buffer, not an optimizer state
      split.gradientWrites.push_back(ParamUpdate{update.name, outputs.size(), true, update.name});
      outputs.push_back(gradients.outputs()[update.output]);
      names.push_back(update.name);
    }
  gradients.setOutputs(outputs);
  for (size_t i = 0; i < names.size(); ++i)
    gradients.setOutputName(i, names[i]);
  {
    PassContext context;
    createDeadCodeEliminationPass()->run(gradients, context);
  }
  verify(gradients);

  // The update part: the gradients as inputs, the trained parameters with their values.
  split.update = std::make_unique<Graph>(whole.graph->name() + "_update");
  Graph &update = *split.update;
  Builder b(update);
  std::vector<Value *> paramValues, gradientInputs;
  std::set<std::string> paramNames;
  for (const ParamUpdate *param : trained) {
    const Node *source = nullptr;
    for (const Node *node : whole.graph->params())
      if (node->attrString("name") == param->name)
        source = node;
    const TensorType &type = source->output()->type();
    gradientInputs.push_back(update.addInput(type, param->name + ".grad"));
    paramValues.push_back(b.param(param->name, type, source->attrTensor("value")));
    paramNames.insert(param->name);
  }
  OptimizerUpdates optimized = appendOptimizer(update, b, paramValues, gradientInputs, optimizer, paramNames);
  update.setOutputs(optimized.values);
  split.updateWrites = optimized.updates;
  for (size_t i = 0; i < split.updateWrites.size(); ++i) {
    split.updateWrites[i].output = i;
    update.setOutputName(i, split.updateWrites[i].name);
  }
  verify(update);
  return split;
}

std::unique_ptr<Graph> buildEvaluationGraph(const Graph &forward, const LossSpec &loss) {
  std::unique_ptr<Graph> graph = forward.clone();
  Builder b(*graph);
  Value *prediction = lossOutput(*graph, loss);
  int64_t targetInput = -1;
  Value *losses = appendLoss(*graph, b, prediction, loss, targetInput, /*perElement=*/true);
  graph->setOutputs({losses, prediction});
  graph->setOutputName(0, "losses");
  graph->setOutputName(1, "output");
  {
    PassContext context; // drops what only the buffer writes read
    createDeadCodeEliminationPass()->run(*graph, context);
  }
  verify(*graph);
  return graph;
}

} // namespace kiln::passes::autodiff
