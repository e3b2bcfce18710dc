// Recurrent ONNX ops: RNN, GRU and LSTM, unrolled over their static sequence length into
// matmuls and elementwise ops (kiln has no recurrent op; every step is a handful of ops, and
// the sequence length is part of kiln's static shapes). Per direction:
//   - the input projection X W^T + Wb is one matmul over every step at once;
//   - each step adds H R^T + Rb, splits the gates and applies the cell's formulas (ONNX's
//     operator definitions, quoted at each cell below), pre-activations clipped to `clip`;
//   - with sequence_lens, a step past a batch entry's length keeps its state and outputs 0.
// Outputs: Y [seq, dirs, batch, hidden] (layout 1: [batch, seq, dirs, hidden]), Y_h and, for
// LSTM, Y_c [dirs, batch, hidden] (layout 1: [batch, dirs, hidden]).
#include <algorithm>
#include <functional>

#include "core/ShapeMath.h"
#include "frontend/onnx/OnnxOpTable.h"

namespace kiln::frontend {

using ir::OpKind;

namespace {

/// Every step becomes a handful of nodes, so the sequence length (a dim of X, which may come
/// with no data behind it) is bounded before unrolling; far above real models' lengths.
constexpr int64_t kMaxUnrolledSteps = 4096;

enum class Cell { Rnn, Gru, Lstm };

/// One activation of the `activations` attribute with its alpha and beta.
struct Activation {
  std::string name;
  double alpha = 0, beta = 0;
};

ir::Value *slice(ImportContext &ctx, ir::Value *x, int64_t axis, int64_t begin, int64_t end) {
  return ctx.op(OpKind::Slice, {x},
                {{"starts", std::vector<int64_t>{begin}},
                 {"ends", std::vector<int64_t>{end}},
                 {"axes", std::vector<int64_t>{axis}},
                 {"steps", std::vector<int64_t>{1}}});
}

ir::Value *scaled(ImportContext &ctx, ir::Value *x, double factor) {
  return ctx.op(OpKind::Mul, {x, ctx.scalarLike(x, factor)});
}

ir::Value *activate(ImportContext &ctx, const Activation &f, ir::Value *x) {
  const std::string &n = f.name;
  if (n == "Tanh")
    return ctx.op(OpKind::Tanh, {x});
  if (n == "Sigmoid")
    return ctx.op(OpKind::Sigmoid, {x});
  if (n == "Relu")
    return ctx.op(OpKind::Relu, {x});
  if (n == "Softsign")
    return ctx.op(OpKind::Softsign, {x});
  if (n == "Softplus")
    return ctx.op(OpKind::Softplus, {x});
  if (n == "LeakyRelu")
    return ctx.op(OpKind::LeakyRelu, {x}, {{"alpha", f.alpha}});
  if (n == "ThresholdedRelu")
    return ctx.op(OpKind::ThresholdedRelu, {x}, {{"alpha", f.alpha}});
  if (n == "Elu")
    return ctx.op(OpKind::Elu, {x}, {{"alpha", f.alpha}});
  if (n == "HardSigmoid")
    return ctx.op(OpKind::HardSigmoid, {x}, {{"alpha", f.alpha}, {"beta", f.beta}});
  if (n == "Affine")
    return ctx.op(OpKind::Add, {scaled(ctx, x, f.alpha), ctx.scalarLike(x, f.beta)});
  if (n == "ScaledTanh")
    return scaled(ctx, ctx.op(OpKind::Tanh, {scaled(ctx, x, f.beta)}), f.alpha);
  fail("activation '{}' is not supported", n);
}

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

struct Recurrence {
  Cell cell;
  int64_t steps = 0, batch = 0, hidden = 0, gates = 1, directions = 1;
  bool reverseOnly = false, linearBeforeReset = false, inputForget = false;
  double clip = 0;              // 0: no clipping
  std::vector<int64_t> lengths; // per batch entry; empty: every entry runs every step
};

/// One direction's weights and state, all [.., batch, hidden]-shaped operands already sliced.
struct Direction {
  ir::Value *inputProjection; // [steps, batch, gates * hidden], X W^T + Wb
  ir::Value *recurrence;      // [hidden, gates * hidden], R^T
  ir::Value *recurrenceBias;  // [gates * hidden] or nullptr
  ir::Value *peephole;        // [3 * hidden] (LSTM) or nullptr
  ir::Value *h, *c;           // initial states [batch, hidden]; c only for LSTM
  std::vector<Activation> f;  // this direction's activations
};

ir::Value *clipped(ImportContext &ctx, const Recurrence &r, ir::Value *x) {
  return r.clip > 0 ? ctx.op(OpKind::Clip, {x}, {{"min", -r.clip}, {"max", r.clip}}) : x;
}

/// Runs one direction: `outputs` gets the step outputs in time order, `d` the final states.
void runDirection(ImportContext &ctx, const Recurrence &r, Direction &d, std::vector<ir::Value *> &outputs) {
  int64_t H = r.hidden;
  outputs.assign(static_cast<size_t>(r.steps), nullptr);
  for (int64_t k = 0; k < r.steps; ++k) {
    int64_t t = r.reverseOnly ? r.steps - 1 - k : k;
    ir::Value *x = reshapeTo(ctx, slice(ctx, d.inputProjection, 0, t, t + 1), {r.batch, r.gates * H});
    ir::Value *hr = ctx.op(OpKind::MatMul, {d.h, d.recurrence});
    if (d.recurrenceBias)
      hr = ctx.op(OpKind::Add, {hr, d.recurrenceBias});
    auto gate = [&](ir::Value *v, int64_t index) { return slice(ctx, v, 1, index * H, (index + 1) * H); };
    ir::Value *h = nullptr, *c = nullptr;
    if (r.cell == Cell::Rnn) {
      // Ht = f(Xt*(Wi^T) + Ht-1*(Ri^T) + Wbi + Rbi)
      h = activate(ctx, d.f[0], clipped(ctx, r, ctx.op(OpKind::Add, {x, hr})));
    } else if (r.cell == Cell::Gru) {
      // zt = f(Xt*(Wz^T) + Ht-1*(Rz^T) + Wbz + Rbz), rt likewise;
      // ht = g(Xt*(Wh^T) + (rt (.) Ht-1)*(Rh^T) + Rbh + Wbh), or with linear_before_reset
      // ht = g(Xt*(Wh^T) + (rt (.) (Ht-1*(Rh^T) + Rbh)) + Wbh); Ht = (1 - zt) (.) ht + zt (.) Ht-1
      ir::Value *z = activate(ctx, d.f[0], clipped(ctx, r, ctx.op(OpKind::Add, {gate(x, 0), gate(hr, 0)})));
      ir::Value *reset = activate(ctx, d.f[0], clipped(ctx, r, ctx.op(OpKind::Add, {gate(x, 1), gate(hr, 1)})));
      ir::Value *candidate;
      if (r.linearBeforeReset) {
        candidate = ctx.op(OpKind::Add, {gate(x, 2), ctx.op(OpKind::Mul, {reset, gate(hr, 2)})});
      } else {
        ir::Value *rh =
            ctx.op(OpKind::MatMul, {ctx.op(OpKind::Mul, {reset, d.h}), slice(ctx, d.recurrence, 1, 2 * H, 3 * H)});
        if (d.recurrenceBias)
          rh = ctx.op(OpKind::Add, {rh, slice(ctx, d.recurrenceBias, 0, 2 * H, 3 * H)});
        candidate = ctx.op(OpKind::Add, {gate(x, 2), rh});
      }
      ir::Value *hTilde = activate(ctx, d.f[1], clipped(ctx, r, candidate));
      ir::Value *keep = ctx.op(OpKind::Mul, {z, d.h});
      ir::Value *oneMinusZ = ctx.op(OpKind::Sub, {ctx.scalarLike(z, 1), z});
      h = ctx.op(OpKind::Add, {ctx.op(OpKind::Mul, {oneMinusZ, hTilde}), keep});
    } else {
      // it = f(Xt*(Wi^T) + Ht-1*(Ri^T) + Pi (.) Ct-1 + Wbi + Rbi), ft likewise with Pf,
      // ct = g(Xt*(Wc^T) + Ht-1*(Rc^T) + Wbc + Rbc), Ct = ft (.) Ct-1 + it (.) ct,
      // ot = f(Xt*(Wo^T) + Ht-1*(Ro^T) + Po (.) Ct + Wbo + Rbo), Ht = ot (.) h(Ct). Gates: i, o, f, c.
      ir::Value *all = ctx.op(OpKind::Add, {x, hr});
      auto peep = [&](int64_t index, ir::Value *state) {
        return d.peephole ? ctx.op(OpKind::Mul, {slice(ctx, d.peephole, 0, index * H, (index + 1) * H), state})
                          : nullptr;
      };
      auto withPeep = [&](ir::Value *pre, ir::Value *p) { return p ? ctx.op(OpKind::Add, {pre, p}) : pre; };
      ir::Value *i = activate(ctx, d.f[0], clipped(ctx, r, withPeep(gate(all, 0), peep(0, d.c))));
      ir::Value *f = r.inputForget ? ctx.op(OpKind::Sub, {ctx.scalarLike(i, 1), i})
                                   : activate(ctx, d.f[0], clipped(ctx, r, withPeep(gate(all, 2), peep(2, d.c))));
      ir::Value *cTilde = activate(ctx, d.f[1], clipped(ctx, r, gate(all, 3)));
      c = ctx.op(OpKind::Add, {ctx.op(OpKind::Mul, {f, d.c}), ctx.op(OpKind::Mul, {i, cTilde})});
      ir::Value *o = activate(ctx, d.f[0], clipped(ctx, r, withPeep(gate(all, 1), peep(1, c))));
      h = ctx.op(OpKind::Mul, {o, activate(ctx, d.f[2], c)});
    }
    ir::Value *y = h;
    if (!r.lengths.empty()) {
      // Entries whose sequence has ended keep their state and output 0.
      Tensor live(DType::Bool, {r.batch, 1});
      for (int64_t b = 0; b < r.batch; ++b)
        live.setInt(b, t < r.lengths[b] ? 1 : 0);
      ir::Value *mask = ctx.constant(live);
      h = ctx.op(OpKind::Where, {mask, h, d.h});
      if (c)
        c = ctx.op(OpKind::Where, {mask, c, d.c});
      y = ctx.op(OpKind::Where, {mask, y, ctx.scalarLike(y, 0)});
    }
    d.h = h;
    if (c)
      d.c = c;
    outputs[static_cast<size_t>(t)] = reshapeTo(ctx, y, {1, 1, r.batch, H});
  }
}

/// Fails unless operand `what` has shape `want`: the mapping slices operands by these dims.
void expectShape(const ir::Value *v, const Shape &want, const char *what) {
  if (v->shape() != want)
    fail("{} must have shape {}, got {}", what, shapeToString(want), shapeToString(v->shape()));
}

/// Direction `dir` of a per-direction operand: [dirs, ...] sliced to [...]. Callers have
/// checked the leading dim.
ir::Value *forDirection(ImportContext &ctx, ir::Value *v, int64_t dir) {
  Shape rest(v->shape().begin() + 1, v->shape().end());
  return reshapeTo(ctx, slice(ctx, v, 0, dir, dir + 1), rest);
}

std::vector<ir::Value *> mapRecurrent(ImportContext &ctx, const onnx::NodeProto &node, Cell cell) {
  OnnxAttrs attrs(node);
  Recurrence r;
  r.cell = cell;
  r.gates = cell == Cell::Rnn ? 1 : cell == Cell::Gru ? 3 : 4;
  std::string direction = attrs.getString("direction", "forward");
  if (direction != "forward" && direction != "reverse" && direction != "bidirectional")
    fail("direction must be forward, reverse or bidirectional, got '{}'", direction);
  r.directions = direction == "bidirectional" ? 2 : 1;
  bool batchFirst = ctx.opset() >= 14 && attrs.getInt("layout", 0) != 0;
  ir::Value *x = ctx.input(node, 0), *w = ctx.input(node, 1), *rec = ctx.input(node, 2);
  if (x->rank() != 3 || w->rank() != 3 || rec->rank() != 3)
    fail("X, W and R must be 3-D, got {}, {} and {}", shapeToString(x->shape()), shapeToString(w->shape()),
         shapeToString(rec->shape()));
  if (batchFirst)
    x = permute(ctx, x, {1, 0, 2});
  r.steps = x->shape()[0];
  r.batch = x->shape()[1];
  if (r.steps > kMaxUnrolledSteps)
    fail("sequence length {} is longer than kiln unrolls ({} steps)", r.steps, kMaxUnrolledSteps);
  r.hidden = attrs.getInt("hidden_size", rec->shape()[2]);
  // R's last dim is the hidden size; checked first, so that it is a dim within kiln's limit
  // (2^48) and the products with the gate count (at most 4) below cannot overflow.
  if (r.hidden != rec->shape()[2] || w->shape()[0] != r.directions ||
      w->shape()[1] != checkedMul(r.gates, r.hidden, "gates * hidden_size") ||
      rec->shape() != Shape{r.directions, r.gates * r.hidden, r.hidden})
    fail("W {} and R {} do not fit {} direction(s) of {} gate(s) with hidden size {}", shapeToString(w->shape()),
         shapeToString(rec->shape()), r.directions, r.gates, r.hidden);
  r.clip = attrs.getFloat("clip", 0);
  r.linearBeforeReset = cell == Cell::Gru && attrs.getInt("linear_before_reset", 0) != 0;
  r.inputForget = cell == Cell::Lstm && attrs.getInt("input_forget", 0) != 0;
  if (ctx.hasInput(node, 4)) {
    r.lengths = ctx.staticInts(node, 4, "sequence_lens");
    if (static_cast<int64_t>(r.lengths.size()) != r.batch)
      fail("sequence_lens has {} entries for a batch of {}", r.lengths.size(), r.batch);
  }
  // The optional operands, checked before they are sliced per direction.
  if (ctx.hasInput(node, 3))
    expectShape(ctx.input(node, 3), {r.directions, 2 * r.gates * r.hidden}, "B");
  for (int input : {5, 6})
    if (ctx.hasInput(node, input) && (input == 5 || cell == Cell::Lstm))
      expectShape(ctx.input(node, input),
                  batchFirst ? Shape{r.batch, r.directions, r.hidden} : Shape{r.directions, r.batch, r.hidden},
                  input == 5 ? "initial_h" : "initial_c");
  if (cell == Cell::Lstm && ctx.hasInput(node, 7))
    expectShape(ctx.input(node, 7), {r.directions, 3 * r.hidden}, "P");
  std::vector<Activation> activations = readActivations(node, cell, r.directions);
  size_t perDirection = activations.size() / static_cast<size_t>(r.directions);

  auto stateOrZeros = [&](int input, int64_t dir) {
    if (ctx.hasInput(node, input)) {
      ir::Value *state = ctx.input(node, input);
      if (batchFirst) // [batch, dirs, hidden] -> [dirs, batch, hidden]
        state = permute(ctx, state, {1, 0, 2});
      return forDirection(ctx, state, dir);
    }
    return broadcastTo(ctx, ctx.scalarLike(x, 0), {r.batch, r.hidden});
  };
  std::vector<std::vector<ir::Value *>> stepOutputs(static_cast<size_t>(r.directions));
  std::vector<ir::Value *> finalH, finalC;
  for (int64_t dir = 0; dir < r.directions; ++dir) {
    Direction d;
    d.inputProjection = ctx.op(OpKind::MatMul, {x, permute(ctx, forDirection(ctx, w, dir), {1, 0})});
    d.recurrence = permute(ctx, forDirection(ctx, rec, dir), {1, 0});
    d.recurrenceBias = nullptr;
    if (ctx.hasInput(node, 3)) {
      ir::Value *bias = forDirection(ctx, ctx.input(node, 3), dir); // [Wb, Rb]
      int64_t width = r.gates * r.hidden;
      d.inputProjection = ctx.op(OpKind::Add, {d.inputProjection, slice(ctx, bias, 0, 0, width)});
      d.recurrenceBias = slice(ctx, bias, 0, width, 2 * width);
    }
    d.peephole = cell == Cell::Lstm && ctx.hasInput(node, 7) ? forDirection(ctx, ctx.input(node, 7), dir) : nullptr;
    d.h = stateOrZeros(5, dir);
    d.c = cell == Cell::Lstm ? stateOrZeros(6, dir) : nullptr;
    d.f.assign(activations.begin() + dir * perDirection, activations.begin() + (dir + 1) * perDirection);
    Recurrence directed = r;
    directed.reverseOnly = direction == "reverse" || dir == 1;
    runDirection(ctx, directed, d, stepOutputs[dir]);
    finalH.push_back(reshapeTo(ctx, d.h, {1, r.batch, r.hidden}));
    if (d.c)
      finalC.push_back(reshapeTo(ctx, d.c, {1, r.batch, r.hidden}));
  }
  // Y [steps, dirs, batch, hidden]: each step's directions side by side, then the steps.
  std::vector<ir::Value *> perStep;
  for (int64_t t = 0; t < r.steps; ++t) {
    std::vector<ir::Value *> dirs;
    for (int64_t dir = 0; dir < r.directions; ++dir)
      dirs.push_back(stepOutputs[dir][static_cast<size_t>(t)]);
    perStep.push_back(dirs.size() == 1 ? dirs[0] : ctx.op(OpKind::Concat, dirs, {{"axis", int64_t{1}}}));
  }
  auto join = [&](const std::vector<ir::Value *> &parts, int64_t axis) {
    return parts.size() == 1 ? parts[0] : ctx.op(OpKind::Concat, parts, {{"axis", axis}});
  };
  ir::Value *y = r.steps > 0 ? join(perStep, 0) : nullptr;
  ir::Value *yh = join(finalH, 0), *yc = finalC.empty() ? nullptr : join(finalC, 0);
  if (batchFirst) {
    y = y ? permute(ctx, y, {2, 0, 1, 3}) : nullptr;
    yh = permute(ctx, yh, {1, 0, 2});
    yc = yc ? permute(ctx, yc, {1, 0, 2}) : nullptr;
  }
  if (hasOutput(node, 0) && !y)
    fail("the Y output of a sequence of length 0 is not supported");
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
