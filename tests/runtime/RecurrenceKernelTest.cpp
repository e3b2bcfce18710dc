// kiln::runtime::kernels::recurrence against the reference evaluator's rnn_sequence,
// gru_sequence and lstm_sequence (ir/ops/Recurrent.cpp, ONNX's formulas in double): every cell,
// both directions and bidirectional, batch 1 and larger, hidden sizes that fill whole 16-unit
// blocks and odd ones that do not, lengths, clipping, peepholes, coupled gates, other
// activations, weights plain and packed at load. Each case runs on 1, 2 and 3 threads, which
// take the kernel's three schedules (one thread; directions and rows split; one row's blocks
// split step by step), and must give the same bits on all of them.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "ir/Builder.h"
#include "ir/Evaluator.h"
#include "ir/ops/Recurrent.h"
#include "runtime/kernels/Kernels.h"
#include "tests/runtime/KernelTestRuntime.h"

namespace kiln {
namespace {

using ir::OpKind;
using runtime::kernels::test::makeRuntime;

struct Case {
  OpKind op = OpKind::LstmSequence;
  std::string direction = "forward";
  int64_t steps = 5, batch = 1, hidden = 16;
  bool linearBeforeReset = false, inputForget = false, peepholes = false, lengths = false, packed = true;
  double clip = 0;
  std::string activations; // "" for the defaults
};

std::string describe(const Case &c) {
  return fmt::format("{} {} T{} B{} H{} lbr{} if{} p{} len{} packed{} clip{} '{}'", ir::opName(c.op), c.direction,
                     c.steps, c.batch, c.hidden, c.linearBeforeReset, c.inputForget, c.peepholes, c.lengths, c.packed,
                     c.clip, c.activations);
}

/// Uniform in [-scale, scale).
Tensor uniform(const Shape &shape, double scale, std::mt19937_64 &rng) {
  std::uniform_real_distribution<double> pick(-scale, scale);
  Tensor t(DType::F32, shape);
  for (int64_t i = 0; i < t.numElements(); ++i)
    t.setDouble(i, pick(rng));
  return t;
}

int32_t abiActivation(ir::ops::CellActivation kind) {
  using A = ir::ops::CellActivation;
  switch (kind) {
  case A::Sigmoid: return KILN_ACT_SIGMOID;
  case A::Tanh: return KILN_ACT_TANH;
  case A::Relu: return KILN_ACT_RELU;
  case A::LeakyRelu: return KILN_ACT_LEAKY_RELU;
  case A::ThresholdedRelu: return KILN_ACT_THRESHOLDED_RELU;
  case A::Elu: return KILN_ACT_ELU;
  case A::Softsign: return KILN_ACT_SOFTSIGN;
  case A::Softplus: return KILN_ACT_SOFTPLUS;
  case A::HardSigmoid: return KILN_ACT_HARD_SIGMOID;
  case A::Affine: return KILN_ACT_AFFINE;
  case A::ScaledTanh: return KILN_ACT_SCALED_TANH;
  }
  return -1;
}

void check(const Case &c, uint64_t seed) {
  SCOPED_TRACE(describe(c));
  std::mt19937_64 rng(seed);
  const ir::ops::CellKind cell = ir::ops::cellOf(c.op);
  const int64_t D = c.direction == "bidirectional" ? 2 : 1, G = ir::ops::gateCount(cell), H = c.hidden;
  const double scale = 1.0 / std::sqrt(static_cast<double>(H)); // keeps the gates off saturation
  std::vector<Tensor> in{uniform({c.steps, c.batch, D * G * H}, 1.0, rng), uniform({D, G * H, H}, scale, rng),
                         uniform({D, G * H}, 0.3, rng), uniform({D, c.batch, H}, 0.5, rng)};
  if (cell == ir::ops::CellKind::Lstm) {
    in.push_back(uniform({D, c.batch, H}, 0.5, rng));
    if (c.peepholes)
      in.push_back(uniform({D, 3 * H}, 0.5, rng));
  }
  ir::AttrMap attrs{{"direction", c.direction}, {"clip", c.clip}, {"activations", c.activations}};
  if (c.op == OpKind::GruSequence)
    attrs["linear_before_reset"] = int64_t{c.linearBeforeReset};
  if (c.op == OpKind::LstmSequence)
    attrs["input_forget"] = int64_t{c.inputForget};
  std::vector<int64_t> lengths;
  for (int64_t b = 0; c.lengths && b < c.batch; ++b)
    lengths.push_back((b * 7 + 3) % (c.steps + 1)); // 0 to steps
  attrs["lengths"] = lengths;
  attrs = ir::completeAttrs(c.op, attrs);
  std::vector<TensorType> types;
  for (const Tensor &t : in)
    types.push_back(t.type());
  const std::vector<TensorType> outTypes = ir::inferTypes(c.op, types, attrs);
  const std::vector<Tensor> want = ir::evaluateOp(c.op, in, attrs, outTypes);
  const ir::ops::Recurrence r = ir::ops::readRecurrence(c.op, types, attrs);

  std::vector<float> packed;
  if (c.packed) {
    packed.resize(static_cast<size_t>(runtime::kernels::recurrentWeightFloats(D, G, H)));
    runtime::kernels::packRecurrentWeights(static_cast<const float *>(in[1].data()), D, G, H, packed.data());
  }
  std::vector<std::vector<Tensor>> results;
  for (int threads : {1, 2, 3}) {
    SCOPED_TRACE(threads);
    std::vector<Tensor> got;
    for (const TensorType &type : outTypes)
      got.emplace_back(type);
    kiln_recurrence_args a{};
    a.cell = cell == ir::ops::CellKind::Rnn ? KILN_CELL_RNN : cell == ir::ops::CellKind::Gru ? KILN_CELL_GRU : KILN_CELL_LSTM;
    a.directions = static_cast<int32_t>(D);
    a.reverse = r.reverse;
    a.linear_before_reset = r.linearBeforeReset;
    a.input_forget = r.inputForget;
    a.r_layout = c.packed ? KILN_RECURRENCE_R_GATE_BLOCKS : KILN_RECURRENCE_R_PLAIN;
    a.steps = c.steps, a.batch = c.batch, a.hidden = H;
    a.clip = static_cast<float>(c.clip);
    for (int64_t d = 0; d < D; ++d)
      for (int64_t i = 0; i < r.functionsPerDirection(); ++i) {
        const ir::ops::CellFunction &f = r.function(d, i);
        a.functions[d][i] = {abiActivation(f.kind), static_cast<float>(f.alpha), static_cast<float>(f.beta)};
      }
    auto data = [&](size_t i) { return i < in.size() ? static_cast<const float *>(in[i].data()) : nullptr; };
    a.xw = data(0);
    a.r = c.packed ? packed.data() : data(1);
    a.rb = data(2), a.h0 = data(3);
    if (cell == ir::ops::CellKind::Lstm)
      a.c0 = data(4), a.peepholes = c.peepholes ? data(5) : nullptr;
    a.lengths = lengths.empty() ? nullptr : lengths.data();
    a.y = static_cast<float *>(got[0].data());
    a.h_n = static_cast<float *>(got[1].data());
    a.c_n = got.size() > 2 ? static_cast<float *>(got[2].data()) : nullptr;
    kiln_rt rt = makeRuntime(threads);
    rt.recurrence(&rt, &a);
    for (size_t o = 0; o < want.size(); ++o)
      for (int64_t i = 0; i < want[o].numElements(); ++i) {
        const double expected = want[o].getDouble(i), value = got[o].getDouble(i);
        ASSERT_LE(std::fabs(value - expected), 1e-5 + 1e-4 * std::fabs(expected))
            << "output " << o << " element " << i << ": " << value << ", reference " << expected;
      }
    results.push_back(got);
  }
  for (size_t run = 1; run < results.size(); ++run)
    for (size_t o = 0; o < want.size(); ++o)
      ASSERT_EQ(0, std::memcmp(results[run][o].data(), results[0][o].data(), results[0][o].type().byteSize()))
          << "output " << o << " differs between 1 and " << run + 1 << " threads";
}

TEST(RecurrenceKernel, LstmEveryDirectionBatchAndHiddenSize) {
  uint64_t seed = 1;
  for (std::string direction : {"forward", "reverse", "bidirectional"})
    for (int64_t batch : {1, 3, 16})
      for (int64_t hidden : {16, 37, 128}) {
        Case c;
        c.direction = direction, c.batch = batch, c.hidden = hidden, c.steps = hidden == 128 ? 9 : 6;
        check(c, seed++);
      }
}

TEST(RecurrenceKernel, GruBothResetOrders) {
  uint64_t seed = 100;
  for (bool linearBeforeReset : {true, false})
    for (std::string direction : {"forward", "bidirectional"})
      for (int64_t batch : {1, 5})
        for (int64_t hidden : {7, 64, 105}) {
          Case c;
          c.op = OpKind::GruSequence;
          c.linearBeforeReset = linearBeforeReset, c.direction = direction, c.batch = batch, c.hidden = hidden;
          c.steps = 12;
          check(c, seed++);
        }
}

TEST(RecurrenceKernel, RnnAndPlainWeights) {
  uint64_t seed = 200;
  for (bool packed : {true, false})
    for (int64_t hidden : {1, 33, 200}) {
      Case c;
      c.op = OpKind::RnnSequence;
      c.packed = packed, c.hidden = hidden, c.batch = 2, c.steps = 7, c.direction = "reverse";
      check(c, seed++);
      c.op = OpKind::LstmSequence;
      c.direction = "bidirectional";
      check(c, seed++);
    }
}

TEST(RecurrenceKernel, LengthsClipPeepholesAndCoupledGates) {
  Case lstm;
  lstm.batch = 5, lstm.hidden = 20, lstm.steps = 6, lstm.lengths = true, lstm.clip = 0.7, lstm.peepholes = true;
  for (std::string direction : {"forward", "reverse", "bidirectional"}) {
    lstm.direction = direction;
    check(lstm, 300);
    lstm.inputForget = true;
    check(lstm, 301);
    lstm.inputForget = false;
  }
  Case gru = lstm;
  gru.op = OpKind::GruSequence;
  gru.peepholes = false;
  for (bool linearBeforeReset : {true, false}) {
    gru.linearBeforeReset = linearBeforeReset;
    check(gru, 302);
  }
  Case one = lstm; // one row past its end from the start, split step by step over threads
  one.batch = 1, one.hidden = 128, one.direction = "forward";
  check(one, 303);
}

TEST(RecurrenceKernel, OtherActivations) {
  Case lstm;
  lstm.batch = 3, lstm.hidden = 19, lstm.steps = 5, lstm.direction = "bidirectional";
  lstm.activations = "HardSigmoid,Softsign,Relu,Sigmoid,ScaledTanh,Affine";
  check(lstm, 400);
  Case gru = lstm;
  gru.op = OpKind::GruSequence;
  gru.activations = "LeakyRelu,Elu,ThresholdedRelu,Softplus";
  check(gru, 401);
}

} // namespace
} // namespace kiln
