// fold-batch-norm, in stages (the formulas and what is required are in FoldBatchNorm.h):
//  1. Match: each batch_norm, in graph order, walks up its input - through at most one add
//     whose other operand varies only along the channel axis - to a conv, a linear or a rank-2
//     matmul. Every value on the way must be read by the next node alone: another reader
//     would still need the unnormalised result.
//  2. Read: the weight, the biases and the batch_norm's four vectors must be known (a constant
//     or a parameter with a value, through a short chain of views evaluated by the reference
//     evaluator, so an ONNX Gemm's permute(B) or a reshaped conv bias qualify).
//  3. Fold in f64, then round once to the dtype: the output channel c owns the weight slice
//     w[c, ...] for conv and linear ([Cout, ...] layouts) and the column w[:, c] for matmul.
//  4. Rewrite before the batch_norm: the same contraction on the new weight, with the new bias
//     as linear's third operand or as an add of a [C,1,...] constant; the batch_norm's uses move
//     there, and the nodes that fed only the old chain are erased.
#include "passes/simplify/FoldBatchNorm.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "ir/Builder.h"
#include "ir/Evaluator.h"

namespace kiln::passes {

using ir::Node;
using ir::OpKind;
using ir::Value;

namespace {

/// The parts of one foldable batch_norm.
struct Match {
  Node *batchNorm = nullptr;
  Node *contraction = nullptr;       // conv, linear or matmul
  std::vector<Value *> biases;       // linear's own bias and the add's operand, each per channel
  bool weightRowsAreChannels = true; // conv and linear: [C, ...]; matmul: [K, C]
};

/// True when `user` is the only reader of `value` (the graph's return counts as a reader).
bool onlyReadBy(const Value *value, const Node *user) {
  if (value->graph()->isOutput(value))
    return false;
  for (const ir::Use &use : value->uses())
    if (use.user != user)
      return false;
  return !value->uses().empty();
}

/// True when an operand of this shape, broadcast against `out` ([N, C, ...]), varies at most
/// along axis 1: every aligned dim is 1 except axis 1, which is 1 or C.
bool isPerChannel(const Shape &operand, const Shape &out) {
  if (operand.size() > out.size())
    return false;
  size_t offset = out.size() - operand.size();
  for (size_t d = 0; d < operand.size(); ++d) {
    size_t axis = offset + d;
    if (operand[d] != 1 && !(axis == 1 && operand[d] == out[1]))
      return false;
  }
  return true;
}

bool isContraction(const Node *node) {
  switch (node->op()) {
  case OpKind::Conv: return true;
  // Rank 2 only: batch_norm normalises axis 1, which is the output features only there.
  case OpKind::Linear: return node->output()->rank() == 2;
  case OpKind::MatMul: return node->input(0)->rank() == 2 && node->input(1)->rank() == 2;
  default: return false;
  }
}

/// Why a batch_norm is not folded, as its statistics counter; nullopt when it is not a
/// candidate at all (its input comes from no contraction).
using Skip = std::optional<std::string>;

/// Stage 1: fills `match` or says why not.
bool matchChain(Node *batchNorm, Match &match, Skip &skip) {
  match.batchNorm = batchNorm;
  Value *input = batchNorm->input(0);
  Node *producer = input->producer();
  if (!producer)
    return false;
  if (producer->op() == OpKind::Add) {
    Node *add = producer;
    for (int i = 0; i < 2; ++i) {
      Node *candidate = add->input(i)->producer();
      Value *other = add->input(1 - i);
      if (candidate && isContraction(candidate) && candidate->output()->type() == add->output()->type() &&
          isPerChannel(other->shape(), add->output()->shape())) {
        if (!onlyReadBy(input, batchNorm) || !onlyReadBy(candidate->output(), add)) {
          skip = "batch norms skipped: producer has other users";
          return false;
        }
        match.contraction = candidate;
        match.biases.push_back(other);
        break;
      }
    }
    if (!match.contraction)
      return false;
  } else if (isContraction(producer)) {
    if (!onlyReadBy(input, batchNorm)) {
      skip = "batch norms skipped: producer has other users";
      return false;
    }
    match.contraction = producer;
  } else {
    return false;
  }
  if (match.contraction->op() == OpKind::Linear && match.contraction->numInputs() == 3)
    match.biases.push_back(match.contraction->input(2));
  match.weightRowsAreChannels = match.contraction->op() != OpKind::MatMul;
  if (input->shape()[1] == 0) // no channels, nothing to fold
    return false;
  return true;
}

bool isViewOrCast(OpKind op) {
  switch (op) {
  case OpKind::Reshape:
  case OpKind::Permute:
  case OpKind::Broadcast:
  case OpKind::Squeeze:
  case OpKind::Unsqueeze:
  case OpKind::Flatten:
  case OpKind::Cast: return true;
  default: return false;
  }
}

/// Stage 2: the value of `value` when it is known at compile time.
std::optional<Tensor> knownValue(const Value *value) {
  constexpr int kMaxChain = 8; // what frontends put between a weight and its use is 1 or 2 ops
  std::vector<const Node *> chain;
  const Value *current = value;
  for (int depth = 0;; ++depth) {
    const Node *producer = current->producer();
    if (!producer || depth > kMaxChain)
      return std::nullopt;
    if (producer->op() == OpKind::Constant || producer->op() == OpKind::Param) {
      const Tensor &source = producer->attrTensor("value"); // a param without a value: undefined
      if (!source.defined())
        return std::nullopt;
      Tensor result = source;
      for (auto it = chain.rbegin(); it != chain.rend(); ++it)
        result = ir::evaluateOp((*it)->op(), {result}, (*it)->attrs(), {(*it)->output()->type()})[0];
      return result;
    }
    if (!isViewOrCast(producer->op()))
      return std::nullopt;
    chain.push_back(producer);
    current = producer->input(0);
  }
}

/// A per-channel operand's value for each of `channels` channels (it holds 1 or C elements).
std::vector<double> perChannelValues(const Tensor &value, int64_t channels) {
  std::vector<double> out(static_cast<size_t>(channels));
  for (int64_t c = 0; c < channels; ++c)
    out[static_cast<size_t>(c)] = value.getDouble(value.numElements() == 1 ? 0 : c);
  return out;
}

/// Stage 3's result.
struct Folded {
  Tensor weight;
  Tensor bias; // [C]
};

/// Stages 2 and 3: the folded weight and bias, or why not.
std::optional<Folded> fold(const Match &match, Skip &skip) {
  Node *bn = match.batchNorm;
  Value *weightOperand = match.contraction->input(1);
  std::optional<Tensor> weight = knownValue(weightOperand);
  std::vector<Tensor> vectors; // scale, shift, mean, var, then the biases
  for (size_t i = 1; i < 5; ++i)
    if (std::optional<Tensor> v = knownValue(bn->input(i)))
      vectors.push_back(*v);
  for (Value *bias : match.biases)
    if (std::optional<Tensor> v = knownValue(bias))
      vectors.push_back(*v);
  if (!weight || vectors.size() != 4 + match.biases.size()) {
    skip = "batch norms skipped: values not known";
    return std::nullopt;
  }

  int64_t channels = bn->input(0)->shape()[1];
  std::vector<double> scale = perChannelValues(vectors[0], channels), shift = perChannelValues(vectors[1], channels),
                      mean = perChannelValues(vectors[2], channels), var = perChannelValues(vectors[3], channels);
  std::vector<double> biasSum(static_cast<size_t>(channels), 0.0);
  for (size_t i = 4; i < vectors.size(); ++i) {
    std::vector<double> bias = perChannelValues(vectors[i], channels);
    for (size_t c = 0; c < biasSum.size(); ++c)
      biasSum[c] += bias[c];
  }

  double epsilon = bn->attrFloat("epsilon");
  std::vector<double> factor(static_cast<size_t>(channels)), newBias(static_cast<size_t>(channels));
  for (size_t c = 0; c < factor.size(); ++c) {
    double denominator = var[c] + epsilon;
    // var + eps <= 0 (or NaN) makes the batch_norm's output inf or NaN in a pattern that
    // depends on x; a folded weight could not reproduce it.
    if (!(denominator > 0) || !std::isfinite(denominator)) {
      skip = "batch norms skipped: variance + epsilon not positive";
      return std::nullopt;
    }
    factor[c] = scale[c] / std::sqrt(denominator);
    newBias[c] = (biasSum[c] - mean[c]) * factor[c] + shift[c];
  }

  Folded folded{Tensor(weight->type()), Tensor::fromDoubles(weight->dtype(), {channels}, newBias)};
  int64_t count = weight->numElements();
  int64_t perChannel = count / channels; // weight rows: [C, ...]
  for (int64_t i = 0; i < count; ++i) {
    int64_t c = match.weightRowsAreChannels ? i / perChannel : i % channels;
    folded.weight.setDouble(i, weight->getDouble(i) * factor[static_cast<size_t>(c)]);
  }
  return folded;
}

/// Erases `root` if nothing uses it, then each producer that thereby lost its last use.
void eraseIfDead(ir::Graph &graph, Node *root) {
  std::vector<Node *> stack{root};
  while (!stack.empty()) {
    Node *node = stack.back();
    stack.pop_back();
    if (node->output()->hasUses())
      continue;
    std::vector<Node *> producers;
    for (Value *input : node->inputs())
      if (Node *producer = input->producer())
        producers.push_back(producer);
    graph.eraseNode(node);
    // A node sits on the stack at most once, so none is popped after it was erased.
    for (Node *producer : producers)
      if (std::find(stack.begin(), stack.end(), producer) == stack.end())
        stack.push_back(producer);
  }
}

/// Stage 4.
void rewrite(ir::Graph &graph, const Match &match, const Folded &folded) {
  Node *bn = match.batchNorm, *contraction = match.contraction;
  ir::Builder b(graph);
  b.setInsertionPoint(bn);
  Value *weight = b.constant(folded.weight);
  Value *x = contraction->input(0);
  Value *result = nullptr;
  if (contraction->op() == OpKind::Linear) {
    result = b.create(OpKind::Linear, {x, weight, b.constant(folded.bias)});
  } else {
    Value *y = b.create(contraction->op(), {x, weight}, contraction->attrs());
    // [C] for a rank-2 result, [C,1,...] for [N,C,spatial...]: numpy broadcasting aligns it.
    Shape biasShape(static_cast<size_t>(y->rank() - 1), 1);
    biasShape[0] = y->shape()[1];
    result = b.create(OpKind::Add, {y, b.constant(folded.bias.reshaped(biasShape))});
  }
  std::string name = bn->output()->name();
  bn->output()->replaceAllUsesWith(result);
  eraseIfDead(graph, bn);
  result->setName(std::move(name)); // a named output keeps its name
}

class FoldBatchNormPass final : public Pass {
public:
  std::string_view name() const override { return "fold-batch-norm"; }

  bool run(ir::Graph &graph, PassContext &context) override {
    std::vector<Node *> batchNorms;
    for (Node *node : graph.nodes())
      if (node->op() == OpKind::BatchNorm && node->output()->hasUses()) // dead ones are dce's
        batchNorms.push_back(node);
    // A fold erases only nodes of its own chain, never another batch_norm.
    bool changed = false;
    for (Node *bn : batchNorms) {
      Match match;
      Skip skip;
      std::optional<Folded> folded;
      if (matchChain(bn, match, skip))
        folded = fold(match, skip);
      if (!folded) {
        if (skip)
          context.stats.add(*skip);
        continue;
      }
      rewrite(graph, match, *folded);
      context.stats.add("batch norms folded");
      changed = true;
    }
    return changed;
  }
};

} // namespace

std::unique_ptr<Pass> createFoldBatchNormPass() { return std::make_unique<FoldBatchNormPass>(); }

} // namespace kiln::passes
