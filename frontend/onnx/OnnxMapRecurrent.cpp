// Recurrent ONNX ops: RNN, GRU and LSTM, each one rnn_sequence, gru_sequence or lstm_sequence
// node (ir/ops/Recurrent.h), which the runtime runs as one recurrent kernel with the time loop
// inside. The mapping computes what that op takes:
//   - the input projection X W^T + Wb of every step and direction, one matmul (all directions'
//     weights side by side), so that only h R^T is left for the steps;
//   - Rb, the initial states (zeros when absent) and LSTM's peepholes, per direction;
//   - the activations, with ONNX's alpha and beta given per function, and sequence_lens as a
//     static attribute.
// Outputs: Y [seq, dirs, batch, hidden] (layout 1: [batch, seq, dirs, hidden]), a permute of the
// op's y [seq, batch, dirs, hidden] (which torch's own Transpose back to [seq, batch, dirs,
// hidden] cancels), Y_h and, for LSTM, Y_c [dirs, batch, hidden] (layout 1: [batch, dirs,
// hidden]).
#include <algorithm>

#include "core/ShapeMath.h"
#include "frontend/onnx/OnnxOpTable.h"

namespace kiln::frontend {

using ir::OpKind;

namespace {

enum class Cell { Rnn, Gru, Lstm };

/// One activation of the `activations` attribute with its alpha and beta.
struct Activation {
  std::string name;
  double alpha = 0, beta = 0;
};

/// The activations per direction (ONNX lists them for all directions in order), with the
/// defaults of each cell and the alpha/beta defaults of the parametrised ones.
std::vector<Activation> readActivations(const onnx::NodeProto &node, Cell cell, int64_t directions) {
  std::vector<std::string> defaults = cell == Cell::Rnn   ? std::vector<std::string>{"Tanh"}
                                      : cell == Cell::Gru ? std::vector<std::string>{"Sigmoid", "Tanh"}
                                                          : std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"};
  OnnxAttrs attrs(node);
  std::vector<std::string> names;
  if (const onnx::AttributeProto *given = attrs.find("activations"))
    names.assign(given->strings().begin(), given->strings().end());
  else
    for (int64_t d = 0; d < directions; ++d)
      names.insert(names.end(), defaults.begin(), defaults.end());
  if (names.size() != defaults.size() * static_cast<size_t>(directions))
    fail("'activations' needs {} names ({} per direction), got {}", defaults.size() * directions, defaults.size(),
         names.size());
  std::vector<double> alphas = attrs.getFloats("activation_alpha"), betas = attrs.getFloats("activation_beta");
  std::vector<Activation> result;
  size_t nextAlpha = 0, nextBeta = 0;
  for (const std::string &name : names) {
    Activation f{name};
    bool hasAlpha = name == "LeakyRelu" || name == "ThresholdedRelu" || name == "Elu" || name == "HardSigmoid" ||
                    name == "Affine" || name == "ScaledTanh";
    bool hasBeta = name == "HardSigmoid" || name == "Affine" || name == "ScaledTanh";
    double alphaDefault = name == "LeakyRelu" ? 0.01 : name == "HardSigmoid" ? 0.2 : 1.0;
    double betaDefault = name == "HardSigmoid" ? 0.5 : name == "Affine" ? 0.0 : 1.0;
    f.alpha = hasAlpha ? (nextAlpha < alphas.size() ? alphas[nextAlpha++] : alphaDefault) : 0;
    f.beta = hasBeta ? (nextBeta < betas.size() ? betas[nextBeta++] : betaDefault) : 0;
    result.push_back(f);
  }
  return result;
}

/// Fails unless operand `what` has shape `want`: the mapping slices operands by these dims.
void expectShape(const ir::Value *v, const Shape &want, const char *what) {
  if (v->shape() != want)
    fail("{} must have shape {}, got {}", what, shapeToString(want), shapeToString(v->shape()));
}

std::vector<ir::Value *> mapRecurrent(ImportContext &ctx, const onnx::NodeProto &node, Cell cell) {
  OnnxAttrs attrs(node);
  const int64_t gates = cell == Cell::Rnn ? 1 : cell == Cell::Gru ? 3 : 4;
  std::string direction = attrs.getString("direction", "forward");
  if (direction != "forward" && direction != "reverse" && direction != "bidirectional")
    fail("direction must be forward, reverse or bidirectional, got '{}'", direction);
  const int64_t directions = direction == "bidirectional" ? 2 : 1;
  bool batchFirst = ctx.opset() >= 14 && attrs.getInt("layout", 0) != 0;
  ir::Value *x = ctx.input(node, 0), *w = ctx.input(node, 1), *rec = ctx.input(node, 2);
  if (x->rank() != 3 || w->rank() != 3 || rec->rank() != 3)
    fail("X, W and R must be 3-D, got {}, {} and {}", shapeToString(x->shape()), shapeToString(w->shape()),
         shapeToString(rec->shape()));
  if (batchFirst)
    x = permute(ctx, x, {1, 0, 2});
  const int64_t steps = x->shape()[0], batch = x->shape()[1], inputSize = x->shape()[2];
  const int64_t hidden = attrs.getInt("hidden_size", rec->shape()[2]);
  // R's last dim is the hidden size; checked first, so that it is a dim within kiln's limit
  // (2^48) and the products with the gate count (at most 4) and directions below cannot overflow.
  if (hidden != rec->shape()[2] || w->shape()[0] != directions ||
      w->shape()[1] != checkedMul(gates, hidden, "gates * hidden_size") ||
      rec->shape() != Shape{directions, gates * hidden, hidden} || w->shape()[2] != inputSize)
    fail("W {} and R {} do not fit {} direction(s) of {} gate(s) with hidden size {} and input size {}",
         shapeToString(w->shape()), shapeToString(rec->shape()), directions, gates, hidden, inputSize);
  const int64_t width = gates * hidden;
  ir::AttrMap opAttrs{{"direction", direction}, {"clip", static_cast<double>(attrs.getFloat("clip", 0))}};
  if (cell == Cell::Gru)
    opAttrs["linear_before_reset"] = int64_t{attrs.getInt("linear_before_reset", 0) != 0};
  if (cell == Cell::Lstm)
    opAttrs["input_forget"] = int64_t{attrs.getInt("input_forget", 0) != 0};
  if (ctx.hasInput(node, 4)) {
    std::vector<int64_t> lengths = ctx.staticInts(node, 4, "sequence_lens");
    if (static_cast<int64_t>(lengths.size()) != batch)
      fail("sequence_lens has {} entries for a batch of {}", lengths.size(), batch);
    for (int64_t &length : lengths) // ONNX leaves longer ones undefined; every step runs
      length = std::clamp<int64_t>(length, 0, steps);
    opAttrs["lengths"] = lengths;
  }
  // Activations other than the defaults, with one alpha and beta per function (ONNX lists them
  // only for the functions that take them).
  std::vector<Activation> activations = readActivations(node, cell, directions);
  if (attrs.find("activations")) {
    std::vector<std::string> names;
    std::vector<double> alphas, betas;
    for (const Activation &f : activations) {
      names.push_back(f.name);
      alphas.push_back(f.alpha);
      betas.push_back(f.beta);
    }
    opAttrs["activations"] = fmt::format("{}", fmt::join(names, ","));
    opAttrs["activation_alpha"] = alphas;
    opAttrs["activation_beta"] = betas;
  }

  // The optional operands, checked before they are used.
  if (ctx.hasInput(node, 3))
    expectShape(ctx.input(node, 3), {directions, 2 * width}, "B");
  for (int input : {5, 6})
    if (ctx.hasInput(node, input) && (input == 5 || cell == Cell::Lstm))
      expectShape(ctx.input(node, input),
                  batchFirst ? Shape{batch, directions, hidden} : Shape{directions, batch, hidden},
                  input == 5 ? "initial_h" : "initial_c");
  if (cell == Cell::Lstm && ctx.hasInput(node, 7))
    expectShape(ctx.input(node, 7), {directions, 3 * hidden}, "P");

  // xw = X W^T + Wb for every step and direction: [steps, batch, directions * width].
  ir::Value *weights = permute(ctx, reshapeTo(ctx, w, {directions * width, inputSize}), {1, 0});
  ir::Value *xw = ctx.op(OpKind::MatMul, {x, weights});
  ir::Value *recurrentBias;
  if (ctx.hasInput(node, 3)) {
    ir::Value *bias = ctx.input(node, 3); // [dirs, Wb then Rb]
    auto half = [&](int64_t index) {
      return ctx.op(OpKind::Slice, {bias},
                    {{"starts", std::vector<int64_t>{index * width}},
                     {"ends", std::vector<int64_t>{(index + 1) * width}},
                     {"axes", std::vector<int64_t>{1}},
                     {"steps", std::vector<int64_t>{1}}});
    };
    xw = ctx.op(OpKind::Add, {xw, reshapeTo(ctx, half(0), {directions * width})});
    recurrentBias = half(1);
  } else {
    recurrentBias = broadcastTo(ctx, ctx.scalarLike(x, 0), {directions, width});
  }
  auto stateOrZeros = [&](int input) {
    if (!ctx.hasInput(node, input))
      return broadcastTo(ctx, ctx.scalarLike(x, 0), {directions, batch, hidden});
    ir::Value *state = ctx.input(node, input);
    return batchFirst ? permute(ctx, state, {1, 0, 2}) : state; // [batch, dirs, hidden] -> [dirs, batch, hidden]
  };
  std::vector<ir::Value *> operands{xw, rec, recurrentBias, stateOrZeros(5)};
  if (cell == Cell::Lstm) {
    operands.push_back(stateOrZeros(6));
    if (ctx.hasInput(node, 7))
      operands.push_back(ctx.input(node, 7));
  }
  OpKind op = cell == Cell::Rnn ? OpKind::RnnSequence : cell == Cell::Gru ? OpKind::GruSequence : OpKind::LstmSequence;
  std::vector<ir::Value *> results = ctx.opMulti(op, operands, std::move(opAttrs));
  ir::Value *y = results[0], *yh = results[1], *yc = cell == Cell::Lstm ? results[2] : nullptr;
  // y [seq, batch, dirs, hidden] to ONNX's Y; with one direction, moving the dirs dim is a
  // reshape (a view, where a permute would be a copy).
  if (batchFirst)
    y = permute(ctx, y, {1, 0, 2, 3});
  else if (directions == 1)
    y = reshapeTo(ctx, y, {steps, 1, batch, hidden});
  else
    y = permute(ctx, y, {0, 2, 1, 3});
  if (batchFirst) {
    yh = permute(ctx, yh, {1, 0, 2});
    yc = yc ? permute(ctx, yc, {1, 0, 2}) : nullptr;
  }
  std::vector<ir::Value *> outputs{hasOutput(node, 0) ? y : nullptr, yh};
  if (yc)
    outputs.push_back(yc);
  return outputs;
}

} // namespace

std::vector<ir::Value *> mapRNN(ImportContext &ctx, const onnx::NodeProto &node) {
  return mapRecurrent(ctx, node, Cell::Rnn);
}

std::vector<ir::Value *> mapGRU(ImportContext &ctx, const onnx::NodeProto &node) {
  return mapRecurrent(ctx, node, Cell::Gru);
}

std::vector<ir::Value *> mapLSTM(ImportContext &ctx, const onnx::NodeProto &node) {
  return mapRecurrent(ctx, node, Cell::Lstm);
}

} // namespace kiln::frontend
