#pragma once
// Building a training graph from a forward graph: the loss, its gradients (appendGradients) and
// one optimizer update op per trained parameter (sgd_update, adam_update; ir/ops/Optimizer.cpp).
//
//   Requires: a verified forward graph; the loss spec names a float output of it.
//   Guarantees: the returned graph is verified and holds primitives up to the update ops (the
//   forward part and the loss are decomposed, because autodiff needs primitives; the update ops
//   stay composites so dumps show them). Its inputs are the forward graph's inputs in order,
//   then the loss's target or labels input (mse, cross-entropy, nll), then `lr` and `step`
//   (f32 scalars: the learning rate and the 1-based step count, so a schedule or a resumed run
//   needs no recompile). Its outputs are [loss, new value of each trained param..., new value
//   of each optimizer state..., new value of each buffer...], in the order of `updates`, each
//   new value named after the parameter it overwrites (`return %loss, %w1 as "fc1.weight"`:
//   how the training pipeline's passes know it, passes/memory/ParameterWrites.h). Optimizer
//   state tensors are extra parameters of the graph named "<param>.<state>" ("fc1.weight.momentum_buffer",
//   "fc1.weight.exp_avg", "fc1.weight.exp_avg_sq") with zeros as initial value. Every update
//   node comes after every other node of the graph, so after every other reader of the param
//   or state it overwrites: a runtime may write the new values over the old ones in place.
//   Errors: kiln::Error for an unknown output or parameter name, a non-float or non-scalar
//   loss, a target of the wrong kind, an optimizer spec torch would reject (negative lr,
//   momentum, weight decay, eps, betas outside [0, 1), nesterov without momentum or with
//   dampening), or a graph input already named like one the training graph adds.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ir/BufferWrite.h"
#include "ir/Graph.h"

namespace kiln::passes::autodiff {

/// What the scalar to minimise is, from the forward graph's output `output`.
enum class LossKind {
  Value,        // the output itself (one float element)
  Mean,         // mean of the output's elements
  Sum,          // sum of the output's elements
  Mse,          // mse_loss(output, target) with reduction mean; target: an input like output
  CrossEntropy, // cross_entropy(output [N, C] logits, labels [N] i64 class indices), mean
  Nll,          // nll_loss(output [N, C] log-probabilities, labels [N] i64), mean
};

struct LossSpec {
  /// Implicit from a kind alone: `buildTrainingGraph(g, LossKind::Mean, ...)`.
  LossSpec(LossKind kind = LossKind::Value, size_t output = 0, std::string outputName = "",
           std::string targetName = "target")
      : kind(kind), output(output), outputName(std::move(outputName)), targetName(std::move(targetName)) {}

  LossKind kind = LossKind::Value;
  /// Which forward output: its index, or `outputName` when not empty.
  size_t output = 0;
  std::string outputName;
  /// The name of the input added for the target (Mse) or labels (CrossEntropy, Nll).
  std::string targetName = "target";
  /// CrossEntropy, Nll: samples labelled so add nothing to the loss or its gradients, and the
  /// mean is over the others (torch's ignore_index), so that a short batch padded with such
  /// samples trains as the short batch (runtime/Trainer.h). Unset: every label counts.
  std::optional<int64_t> ignoreIndex;
  /// The loss as a weighted sum over the batch's samples: sum_i w_i * loss_i, where loss_i is
  /// sample i's loss (the mean over its elements for mean and mse, their sum for sum, its
  /// class loss for cross-entropy and nll: 0 at an ignored label) and w the f32[N] input
  /// `weightName`, added after the target. With w_i = 1 / N (sum: 1; ignored labels: 1 / the
  /// samples counted) it is the loss above. So a batch computed as tiles of rows, each padded
  /// with samples of weight 0, sums to the whole batch's loss and gradients (runtime/
  /// TrainingStep.h's batch tiles). The loss's output must hold the batch on axis 0.
  bool sampleWeights = false;
  std::string weightName = "sample_weight";
};

enum class OptimizerKind { Sgd, Adam, AdamW };

/// torch.optim.SGD / Adam / AdamW hyper-parameters (torch's defaults). `lr` is only the
/// initial learning rate: the graph takes it as its `lr` input on every step.
struct OptimizerSpec {
  OptimizerKind kind = OptimizerKind::Sgd;
  double lr = 1e-3;
  // SGD
  double momentum = 0.0;
  double dampening = 0.0;
  bool nesterov = false;
  // SGD, Adam: L2 penalty added to the gradient; AdamW: decoupled decay p *= 1 - lr * wd
  // (torch's AdamW default is 1e-2; set it explicitly).
  double weightDecay = 0.0;
  // Adam, AdamW
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;

  static OptimizerSpec sgd(double lr, double momentum = 0.0, bool nesterov = false, double weightDecay = 0.0,
                           double dampening = 0.0);
  static OptimizerSpec adam(double lr, double beta1 = 0.9, double beta2 = 0.999, double eps = 1e-8,
                            double weightDecay = 0.0);
  static OptimizerSpec adamw(double lr, double beta1 = 0.9, double beta2 = 0.999, double eps = 1e-8,
                             double weightDecay = 1e-2);
};

using ir::BufferWrite;

/// One tensor a training step overwrites: a trained parameter, an optimizer state or a buffer.
struct ParamUpdate {
  std::string name;   // the graph parameter ("fc1.weight", "fc1.weight.exp_avg")
  size_t output = 0;  // the training graph output holding its new value
  bool isState = false; // an optimizer state or a buffer (not trained)
  std::string param;  // for a state, the parameter it belongs to; otherwise its own name
};

struct TrainingGraph {
  std::unique_ptr<ir::Graph> graph;
  /// Trained parameters first (outputs 1..P), then states (outputs P+1..), in output order.
  std::vector<ParamUpdate> updates;
  /// Input positions in `graph`.
  size_t lrInput = 0;
  size_t stepInput = 0;
  /// The target / labels input, or -1 when the loss kind takes none.
  int64_t targetInput = -1;
  /// The sample weights input (LossSpec::sampleWeights), or -1.
  int64_t weightInput = -1;
  /// The gradient of each trained parameter, in the order of `updates` (values of `graph`
  /// feeding the update ops: where a data-parallel all-reduce would go).
  std::vector<ir::Value *> gradients;
  /// The names of the trained parameters, in the order of `updates`.
  std::vector<std::string> trainedParams() const;
};

/// Builds the training graph of `forward` (which is not modified). `params` names the
/// parameters to train; empty: every float parameter of the graph that the loss depends on and
/// that no buffer write names, in graph order (torch.optim skips a parameter whose grad is
/// None; a named parameter the loss does not depend on is an error). `buffers` adds outputs
/// after the optimizer states, one per buffer write, in order, listed in `updates` with
/// isState set; a buffer's writer is a forward node, so it is not ordered after the
/// parameter's other readers here: the training pipeline's order-parameter-writes does that.
/// A graph with the i64 parameter ir::random::kOffsetParam that no buffer write names gets one
/// more, last: offset + 1, so its random ops draw fresh numbers every step. kiln::Error when
/// the output or parameter does not exist, their types differ, or the parameter is trained.
///
/// `frozen` names parameters left out of the default list (with `params` empty): they stay
/// parameters of the graph, read as they are, and since autodiff differentiates only what
/// depends on a trained parameter, nothing of their backward is built (no gradient of a frozen
/// weight, no gradient flowing into layers that only frozen ones follow). kiln::Error for a
/// name that is no parameter, or with `params` given too.
TrainingGraph buildTrainingGraph(const ir::Graph &forward, const LossSpec &loss, const OptimizerSpec &optimizer,
                                 const std::vector<std::string> &params = {},
                                 const std::vector<BufferWrite> &buffers = {},
                                 const std::vector<std::string> &frozen = {});

/// A training step in two graphs, for a caller that acts on the gradients between the backward
/// pass and the update (runtime/TrainingStep.h's split steps: gradient accumulation, averaging
/// across processes).
struct SplitTrainingGraph {
  /// The step in one graph (buildTrainingGraph): its updates, inputs and manifest describe the
  /// split step too.
  TrainingGraph whole;
  /// Forward, loss and backward: the inputs of `whole.graph` (lr and step unused, so that both
  /// take the same inputs), outputs [loss, gradient of each trained parameter ("<name>.grad"),
  /// new value of each buffer (named after it)].
  std::unique_ptr<ir::Graph> gradients;
  /// Its buffer writes, with their outputs in `gradients`.
  std::vector<ParamUpdate> gradientWrites;
  /// The optimizer update: inputs [gradient of each trained parameter ("<name>.grad"), lr,
  /// step], parameters the trained ones (their values as in the forward graph) and their
  /// states (zeros), outputs [new value of each trained parameter, of each state], each named
  /// after the parameter it overwrites.
  std::unique_ptr<ir::Graph> update;
  /// Its writes: the trained parameters and states, in whole.updates' order, outputs from 0.
  std::vector<ParamUpdate> updateWrites;
};

/// buildTrainingGraph's step split at the gradients. kiln::Error as buildTrainingGraph.
SplitTrainingGraph buildSplitTrainingGraph(const ir::Graph &forward, const LossSpec &loss,
                                           const OptimizerSpec &optimizer, const std::vector<std::string> &params = {},
                                           const std::vector<BufferWrite> &buffers = {},
                                           const std::vector<std::string> &frozen = {});

/// The forward graph with the loss of each element, for evaluating a model on held-out data:
/// inputs the forward graph's, then the target or labels as in the training graph; outputs
/// ["losses": the loss unreduced ([N] for cross-entropy and nll, the output's shape for mse,
/// the output itself for mean and sum), "output": the output the loss is taken of]; no buffer
/// is written. kiln::Error for a Value loss (one value for the whole batch), and as
/// buildTrainingGraph for the loss's output and target.
std::unique_ptr<ir::Graph> buildEvaluationGraph(const ir::Graph &forward, const LossSpec &loss);

} // namespace kiln::passes::autodiff
