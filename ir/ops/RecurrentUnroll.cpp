// The unrolled form of the recurrent ops (ir/ops/Recurrent.h): every step of every direction
// as a handful of primitives, the decomposition that autodiff differentiates (the inference
// pipeline keeps the op whole for the runtime's recurrent kernel). Per step and direction:
//   - the step's input projections are a slice of xw, h R^T + Rb one matmul and an add;
//   - the gates are slices of those, and the cell's formulas (ONNX's operator definitions,
//     quoted at each cell below) act on them, pre-activations clipped to `clip`;
//   - with lengths, a step past a batch entry's length keeps its state and outputs 0.
// The results are concats of the steps' states in time order.
#include "ir/Builder.h"
#include "ir/ops/DecomposeHelpers.h"
#include "ir/ops/Recurrent.h"

namespace kiln::ir::ops {

namespace {

/// Every step becomes a handful of nodes, so the sequence length (a dim of xw, which may come
/// with no data behind it) is bounded before unrolling; far above real models' lengths.
constexpr int64_t kMaxUnrolledSteps = 4096;

Value *slice(Builder &b, Value *x, int64_t axis, int64_t begin, int64_t end) {
  return b.create(OpKind::Slice, {x},
                  {{"starts", std::vector<int64_t>{begin}},
                   {"ends", std::vector<int64_t>{end}},
                   {"axes", std::vector<int64_t>{axis}},
                   {"steps", std::vector<int64_t>{1}}});
}

Value *scaled(Builder &b, Value *x, double factor) { return binary(b, OpKind::Mul, x, constantLike(b, x, factor)); }

/// f(x) with kiln's ops, as applyCellFunction defines it.
Value *activate(Builder &b, const CellFunction &f, Value *x) {
  switch (f.kind) {
  case CellActivation::Sigmoid: return unary(b, OpKind::Sigmoid, x);
  case CellActivation::Tanh: return unary(b, OpKind::Tanh, x);
  case CellActivation::Relu: return unary(b, OpKind::Relu, x);
  case CellActivation::Softsign: return unary(b, OpKind::Softsign, x);
  case CellActivation::Softplus: return unary(b, OpKind::Softplus, x);
  case CellActivation::LeakyRelu: return b.create(OpKind::LeakyRelu, {x}, {{"alpha", f.alpha}});
  case CellActivation::ThresholdedRelu: return b.create(OpKind::ThresholdedRelu, {x}, {{"alpha", f.alpha}});
  case CellActivation::Elu: return b.create(OpKind::Elu, {x}, {{"alpha", f.alpha}});
  case CellActivation::HardSigmoid:
    return b.create(OpKind::HardSigmoid, {x}, {{"alpha", f.alpha}, {"beta", f.beta}});
  case CellActivation::Affine: return binary(b, OpKind::Add, scaled(b, x, f.alpha), constantLike(b, x, f.beta));
  case CellActivation::ScaledTanh: return scaled(b, unary(b, OpKind::Tanh, scaled(b, x, f.beta)), f.alpha);
  }
  return x;
}

/// Direction d of a per-direction operand: [D, ...] sliced to [...].
Value *forDirection(Builder &b, Value *v, int64_t d) {
  Shape rest(v->shape().begin() + 1, v->shape().end());
  return reshape(b, slice(b, v, 0, d, d + 1), rest);
}

class Unroller {
public:
  Unroller(Builder &b, const Recurrence &r, const std::vector<Value *> &in) : b_(b), r_(r), in_(in) {}

  /// Runs direction d: `outputs` gets the step outputs ([1, B, 1, H]) in time order, h and c
  /// the final states ([B, H]).
  void run(int64_t d, std::vector<Value *> &outputs, Value *&h, Value *&c) {
    const int64_t H = r_.hidden, G = r_.gates, width = G * H;
    Value *recurrence = b_.create(OpKind::Permute, {forDirection(b_, in_[1], d)}, {{"perm", std::vector<int64_t>{1, 0}}});
    Value *bias = forDirection(b_, in_[2], d);
    Value *peephole = r_.peepholes ? forDirection(b_, in_[5], d) : nullptr;
    h = forDirection(b_, in_[3], d);
    c = r_.cell == CellKind::Lstm ? forDirection(b_, in_[4], d) : nullptr;
    auto f = [&](int64_t index, Value *x) { return activate(b_, r_.function(d, index), x); };
    outputs.assign(static_cast<size_t>(r_.steps), nullptr);
    for (int64_t k = 0; k < r_.steps; ++k) {
      int64_t t = r_.backwards(d) ? r_.steps - 1 - k : k;
      Value *x = reshape(b_, slice(b_, slice(b_, in_[0], 0, t, t + 1), 2, d * width, (d + 1) * width), {r_.batch, width});
      Value *hr = binary(b_, OpKind::Add, b_.create(OpKind::MatMul, {h, recurrence}), bias);
      auto gate = [&](Value *v, int64_t index) { return slice(b_, v, 1, index * H, (index + 1) * H); };
      Value *nextH = nullptr, *nextC = nullptr;
      if (r_.cell == CellKind::Rnn) {
        // Ht = f(Xt*(Wi^T) + Ht-1*(Ri^T) + Wbi + Rbi)
        nextH = f(0, clipped(binary(b_, OpKind::Add, x, hr)));
      } else if (r_.cell == CellKind::Gru) {
        // zt = f(Xt*(Wz^T) + Ht-1*(Rz^T) + Wbz + Rbz), rt likewise;
        // ht = g(Xt*(Wh^T) + (rt (.) Ht-1)*(Rh^T) + Rbh + Wbh), or with linear_before_reset
        // ht = g(Xt*(Wh^T) + (rt (.) (Ht-1*(Rh^T) + Rbh)) + Wbh); Ht = (1 - zt) (.) ht + zt (.) Ht-1
        Value *z = f(0, clipped(binary(b_, OpKind::Add, gate(x, 0), gate(hr, 0))));
        Value *reset = f(0, clipped(binary(b_, OpKind::Add, gate(x, 1), gate(hr, 1))));
        Value *candidate;
        if (r_.linearBeforeReset) {
          candidate = binary(b_, OpKind::Add, gate(x, 2), binary(b_, OpKind::Mul, reset, gate(hr, 2)));
        } else {
          Value *rh = b_.create(OpKind::MatMul, {binary(b_, OpKind::Mul, reset, h), slice(b_, recurrence, 1, 2 * H, 3 * H)});
          rh = binary(b_, OpKind::Add, rh, slice(b_, bias, 0, 2 * H, 3 * H));
          candidate = binary(b_, OpKind::Add, gate(x, 2), rh);
        }
        Value *hTilde = f(1, clipped(candidate));
        Value *keep = binary(b_, OpKind::Mul, z, h);
        Value *oneMinusZ = binary(b_, OpKind::Sub, constantLike(b_, z, 1), z);
        nextH = binary(b_, OpKind::Add, binary(b_, OpKind::Mul, oneMinusZ, hTilde), keep);
      } else {
        // it = f(Xt*(Wi^T) + Ht-1*(Ri^T) + Pi (.) Ct-1 + Wbi + Rbi), ft likewise with Pf,
        // ct = g(Xt*(Wc^T) + Ht-1*(Rc^T) + Wbc + Rbc), Ct = ft (.) Ct-1 + it (.) ct,
        // ot = f(Xt*(Wo^T) + Ht-1*(Ro^T) + Po (.) Ct + Wbo + Rbo), Ht = ot (.) h(Ct). Gates: i, o, f, c.
        Value *all = binary(b_, OpKind::Add, x, hr);
        auto peep = [&](int64_t index, Value *state) {
          return peephole ? binary(b_, OpKind::Mul, slice(b_, peephole, 0, index * H, (index + 1) * H), state) : nullptr;
        };
        auto withPeep = [&](Value *pre, Value *p) { return p ? binary(b_, OpKind::Add, pre, p) : pre; };
        Value *i = f(0, clipped(withPeep(gate(all, 0), peep(0, c))));
        Value *forget = r_.inputForget ? binary(b_, OpKind::Sub, constantLike(b_, i, 1), i)
                                       : f(0, clipped(withPeep(gate(all, 2), peep(2, c))));
        Value *cTilde = f(1, clipped(gate(all, 3)));
        nextC = binary(b_, OpKind::Add, binary(b_, OpKind::Mul, forget, c), binary(b_, OpKind::Mul, i, cTilde));
        Value *o = f(0, clipped(withPeep(gate(all, 1), peep(1, nextC))));
        nextH = binary(b_, OpKind::Mul, o, f(2, nextC));
      }
      Value *y = nextH;
      if (!r_.lengths.empty()) {
        // Entries whose sequence has ended keep their state and output 0.
        Tensor live(DType::Bool, {r_.batch, 1});
        for (int64_t n = 0; n < r_.batch; ++n)
          live.setInt(n, t < r_.lengths[static_cast<size_t>(n)] ? 1 : 0);
        Value *mask = b_.constant(live);
        nextH = select(b_, mask, nextH, h);
        if (nextC)
          nextC = select(b_, mask, nextC, c);
        y = select(b_, mask, y, constantLike(b_, y, 0));
      }
      h = nextH;
      if (nextC)
        c = nextC;
      outputs[static_cast<size_t>(t)] = reshape(b_, y, {1, r_.batch, 1, H});
    }
  }

private:
  Value *clipped(Value *x) {
    return r_.clip > 0 ? b_.create(OpKind::Clip, {x}, {{"min", -r_.clip}, {"max", r_.clip}}) : x;
  }

  Builder &b_;
  const Recurrence &r_;
  const std::vector<Value *> &in_;
};

} // namespace

std::vector<Value *> unrollRecurrence(Builder &b, OpKind op, const std::vector<Value *> &in, const AttrMap &attrs) {
  std::vector<TensorType> types;
  for (const Value *v : in)
    types.push_back(v->type());
  Recurrence r = readRecurrence(op, types, attrs);
  if (r.steps > kMaxUnrolledSteps)
    fail("{} steps are more than kiln unrolls ({}): a recurrence runs unrolled for training and off f32",
         r.steps, kMaxUnrolledSteps);
  Unroller unroller(b, r, in);
  std::vector<std::vector<Value *>> stepOutputs(static_cast<size_t>(r.directions));
  std::vector<Value *> finalH, finalC;
  for (int64_t d = 0; d < r.directions; ++d) {
    Value *h = nullptr, *c = nullptr;
    unroller.run(d, stepOutputs[static_cast<size_t>(d)], h, c);
    finalH.push_back(reshape(b, h, {1, r.batch, r.hidden}));
    if (c)
      finalC.push_back(reshape(b, c, {1, r.batch, r.hidden}));
  }
  auto join = [&](const std::vector<Value *> &parts, int64_t axis) {
    return parts.size() == 1 ? parts[0] : b.create(OpKind::Concat, parts, {{"axis", axis}});
  };
  // y [T, B, D, H]: each step's directions side by side, then the steps; no steps, no data.
  Value *y;
  if (r.steps == 0) {
    y = b.create(OpKind::Broadcast, {constantLike(b, in[0], 0)},
                 {{"shape", Shape{0, r.batch, r.directions, r.hidden}}});
  } else {
    std::vector<Value *> perStep;
    for (int64_t t = 0; t < r.steps; ++t) {
      std::vector<Value *> dirs;
      for (int64_t d = 0; d < r.directions; ++d)
        dirs.push_back(stepOutputs[static_cast<size_t>(d)][static_cast<size_t>(t)]);
      perStep.push_back(join(dirs, 2));
    }
    y = join(perStep, 0);
  }
  std::vector<Value *> results{y, join(finalH, 0)};
  if (!finalC.empty())
    results.push_back(join(finalC, 0));
  return results;
}

} // namespace kiln::ir::ops
