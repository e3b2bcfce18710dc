// ONNX import of RNN, GRU and LSTM (one rnn_sequence, gru_sequence or lstm_sequence node each,
// after the input projection): every direction, layout, sequence lengths, clipping, peepholes
// and GRU's linear_before_reset, against a reference written here step by step from the ONNX
// operator definitions.
#include <cmath>
#include <functional>

#include "OnnxTestModel.h"

using namespace kiln;
using namespace kiln::onnxtest;

namespace {

using Vec = std::vector<double>;

double sigmoid(double x) { return 1 / (1 + std::exp(-x)); }

struct Config {
  std::string op = "RNN"; // RNN, GRU or LSTM
  std::string direction = "forward";
  int64_t layout = 0;
  bool linearBeforeReset = false, peepholes = false, lengths = false;
  double clip = 0;
};

constexpr int64_t kSteps = 3, kBatch = 2, kInput = 2, kHidden = 2;

int64_t gatesOf(const std::string &op) { return op == "RNN" ? 1 : op == "GRU" ? 3 : 4; }

/// Deterministic small weights in [-0.5, 0.5).
Tensor weights(const Shape &shape, int salt) {
  std::vector<double> v(static_cast<size_t>(numElements(shape)));
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = ((static_cast<int>(i) * 7 + salt * 13) % 17) / 17.0 - 0.5;
  return Tensor::fromDoubles(DType::F32, shape, v);
}

struct Result {
  Tensor y, yh, yc;
};

/// The ONNX definitions, one batch entry and one step at a time. x is [steps, batch, input].
Result reference(const Config &c, const Tensor &x, const Tensor &w, const Tensor &r, const Tensor &b, const Tensor &p,
                 const std::vector<int64_t> &lengths) {
  int64_t dirs = c.direction == "bidirectional" ? 2 : 1, g = gatesOf(c.op), H = kHidden;
  Result out{Tensor(DType::F32, {kSteps, dirs, kBatch, H}), Tensor(DType::F32, {dirs, kBatch, H}),
             Tensor(DType::F32, {dirs, kBatch, H})};
  auto clip = [&](double v) { return c.clip > 0 ? std::clamp(v, -c.clip, c.clip) : v; };
  for (int64_t d = 0; d < dirs; ++d)
    for (int64_t n = 0; n < kBatch; ++n) {
      Vec h(H, 0), cell(H, 0);
      bool reverse = c.direction == "reverse" || d == 1;
      for (int64_t k = 0; k < kSteps; ++k) {
        int64_t t = reverse ? kSteps - 1 - k : k;
        if (t >= lengths[n])
          continue; // past the end: state kept, output 0
        // pre[j] for gate row j: x W^T + Wb (+ h R^T + Rb, except GRU's candidate rows).
        auto xw = [&](int64_t j) {
          double s = b.getDouble(d * 2 * g * H + j);
          for (int64_t i = 0; i < kInput; ++i)
            s += x.getDouble((t * kBatch + n) * kInput + i) * w.getDouble((d * g * H + j) * kInput + i);
          return s;
        };
        auto hr = [&](int64_t j, const Vec &state) {
          double s = b.getDouble(d * 2 * g * H + g * H + j);
          for (int64_t i = 0; i < H; ++i)
            s += state[i] * r.getDouble((d * g * H + j) * H + i);
          return s;
        };
        Vec next(H), nextCell = cell;
        for (int64_t j = 0; j < H; ++j) {
          if (c.op == "RNN") {
            next[j] = std::tanh(clip(xw(j) + hr(j, h)));
          } else if (c.op == "GRU") {
            double z = sigmoid(clip(xw(j) + hr(j, h)));
            double reset = sigmoid(clip(xw(H + j) + hr(H + j, h)));
            double candidate;
            if (c.linearBeforeReset) {
              candidate = xw(2 * H + j) + reset * hr(2 * H + j, h);
            } else {
              Vec gated(H);
              for (int64_t i = 0; i < H; ++i)
                gated[i] = sigmoid(clip(xw(H + i) + hr(H + i, h))) * h[i];
              candidate = xw(2 * H + j) + hr(2 * H + j, gated);
            }
            next[j] = (1 - z) * std::tanh(clip(candidate)) + z * h[j];
          } else {
            double peep[3] = {0, 0, 0};
            for (int q = 0; q < 3 && c.peepholes; ++q)
              peep[q] = p.getDouble(d * 3 * H + q * H + j);
            double i = sigmoid(clip(xw(j) + hr(j, h) + peep[0] * cell[j]));
            double f = sigmoid(clip(xw(2 * H + j) + hr(2 * H + j, h) + peep[2] * cell[j]));
            double cc = std::tanh(clip(xw(3 * H + j) + hr(3 * H + j, h)));
            nextCell[j] = f * cell[j] + i * cc;
            double o = sigmoid(clip(xw(H + j) + hr(H + j, h) + peep[1] * nextCell[j]));
            next[j] = o * std::tanh(nextCell[j]);
          }
        }
        h = next;
        cell = nextCell;
        for (int64_t j = 0; j < H; ++j)
          out.y.setDouble(((t * dirs + d) * kBatch + n) * H + j, h[j]);
      }
      for (int64_t j = 0; j < H; ++j) {
        out.yh.setDouble((d * kBatch + n) * H + j, h[j]);
        out.yc.setDouble((d * kBatch + n) * H + j, cell[j]);
      }
    }
  return out;
}

/// [a, b, c, ...] with dims 0 and 1 swapped.
Tensor swap01(const Tensor &t) {
  Shape s = t.shape();
  std::swap(s[0], s[1]);
  Tensor out(t.dtype(), s);
  int64_t inner = t.numElements() / (s[0] * s[1]);
  for (int64_t i = 0; i < s[1]; ++i)
    for (int64_t j = 0; j < s[0]; ++j)
      for (int64_t k = 0; k < inner; ++k)
        out.setDouble((j * s[1] + i) * inner + k, t.getDouble((i * s[0] + j) * inner + k));
  return out;
}

void check(const Config &c) {
  int64_t dirs = c.direction == "bidirectional" ? 2 : 1, g = gatesOf(c.op);
  Tensor x = weights({kSteps, kBatch, kInput}, 1), w = weights({dirs, g * kHidden, kInput}, 2);
  Tensor r = weights({dirs, g * kHidden, kHidden}, 3), b = weights({dirs, 2 * g * kHidden}, 4);
  Tensor p = weights({dirs, 3 * kHidden}, 5);
  std::vector<int64_t> lengths = c.lengths ? std::vector<int64_t>{kSteps, 1} : std::vector<int64_t>{kSteps, kSteps};
  Result want = reference(c, x, w, r, b, p, lengths);

  ModelBuilder m(14);
  bool batchFirst = c.layout == 1;
  m.input("x", DType::F32, batchFirst ? Shape{kBatch, kSteps, kInput} : Shape{kSteps, kBatch, kInput});
  m.initializer("w", w);
  m.initializer("r", r);
  m.initializer("b", b);
  m.initializer("lens", Tensor::fromDoubles(DType::I32, {kBatch}, {double(lengths[0]), double(lengths[1])}));
  m.initializer("p", p);
  std::vector<std::string> inputs{"x", "w", "r", "b", c.lengths ? "lens" : ""};
  if (c.peepholes)
    inputs.insert(inputs.end(), {"", "", "p"});
  std::vector<std::string> outputs{"y", "yh"};
  if (c.op == "LSTM")
    outputs.push_back("yc");
  auto &node = m.node(c.op, inputs, outputs, "cell");
  setInt(node, "hidden_size", kHidden);
  setString(node, "direction", c.direction);
  setInt(node, "layout", c.layout);
  if (c.clip > 0)
    setFloat(node, "clip", static_cast<float>(c.clip));
  if (c.linearBeforeReset)
    setInt(node, "linear_before_reset", 1);
  Shape yShape = batchFirst ? Shape{kBatch, kSteps, dirs, kHidden} : Shape{kSteps, dirs, kBatch, kHidden};
  Shape stateShape = batchFirst ? Shape{kBatch, dirs, kHidden} : Shape{dirs, kBatch, kHidden};
  m.output("y", DType::F32, yShape);
  m.output("yh", DType::F32, stateShape);
  if (c.op == "LSTM")
    m.output("yc", DType::F32, stateShape);
  ir::OpKind recurrence = c.op == "RNN"   ? ir::OpKind::RnnSequence
                          : c.op == "GRU" ? ir::OpKind::GruSequence
                                          : ir::OpKind::LstmSequence;
  EXPECT_EQ(countOps(*import(m), recurrence), 1) << "one node for the whole sequence";
  auto out = run(m, {batchFirst ? swap01(x) : x});
  if (batchFirst) {            // [batch, steps, dirs, hidden] and [batch, dirs, hidden]
    Tensor y = swap01(out[0]); // [steps, batch, dirs, hidden]
    Tensor back(DType::F32, {kSteps, dirs, kBatch, kHidden});
    for (int64_t t = 0; t < kSteps; ++t)
      for (int64_t n = 0; n < kBatch; ++n)
        for (int64_t d = 0; d < dirs; ++d)
          for (int64_t j = 0; j < kHidden; ++j)
            back.setDouble(((t * dirs + d) * kBatch + n) * kHidden + j,
                           y.getDouble(((t * kBatch + n) * dirs + d) * kHidden + j));
    out[0] = back;
    out[1] = swap01(out[1]);
  }
  expectClose(out[0], want.y.toDoubles(), 1e-5);
  expectClose(out[1], want.yh.toDoubles(), 1e-5);
  if (c.op == "LSTM")
    expectClose(out[2], want.yc.toDoubles(), 1e-5);
}

TEST(OnnxImportRecurrent, RnnDirectionsLayoutAndLengths) {
  for (std::string direction : {"forward", "reverse", "bidirectional"}) {
    SCOPED_TRACE(direction);
    Config c;
    c.direction = direction;
    check(c);
    c.lengths = true;
    check(c);
  }
  Config batchFirst;
  batchFirst.layout = 1;
  batchFirst.clip = 0.3;
  check(batchFirst);
}

TEST(OnnxImportRecurrent, GruResetBeforeAndAfterTheLinearMap) {
  for (bool linearBeforeReset : {false, true}) {
    SCOPED_TRACE(linearBeforeReset);
    Config c;
    c.op = "GRU";
    c.linearBeforeReset = linearBeforeReset;
    check(c);
    c.direction = "bidirectional";
    c.lengths = true;
    check(c);
  }
}

TEST(OnnxImportRecurrent, LstmPeepholesClipAndCellOutput) {
  Config c;
  c.op = "LSTM";
  check(c);
  c.peepholes = true;
  c.clip = 0.2;
  check(c);
  c.direction = "reverse";
  c.lengths = true;
  c.layout = 1;
  check(c);
}

TEST(OnnxImportRecurrent, ActivationParametersGoToTheirFunctions) {
  // ONNX lists alpha and beta only for the functions that take them, in order; the op has one
  // of each per function.
  ModelBuilder m(14);
  m.input("x", DType::F32, {kSteps, kBatch, kInput});
  m.initializer("w", weights({1, 3 * kHidden, kInput}, 1));
  m.initializer("r", weights({1, 3 * kHidden, kHidden}, 2));
  auto &node = m.node("GRU", {"x", "w", "r"}, {"y"}, "gru");
  setInt(node, "hidden_size", kHidden);
  onnx::AttributeProto *names = node.add_attribute();
  names->set_name("activations");
  names->set_type(onnx::AttributeProto::STRINGS);
  names->add_strings("HardSigmoid");
  names->add_strings("LeakyRelu");
  setFloats(node, "activation_alpha", {0.25f, 0.125f});
  setFloats(node, "activation_beta", {0.75f});
  m.output("y", DType::F32, {kSteps, 1, kBatch, kHidden});
  auto graph = import(m);
  const ir::Node *gru = findOp(*graph, ir::OpKind::GruSequence);
  ASSERT_NE(gru, nullptr);
  EXPECT_EQ(gru->attrString("activations"), "HardSigmoid,LeakyRelu");
  EXPECT_EQ(ir::attrFloats(gru->attrs(), "activation_alpha"), (std::vector<double>{0.25, 0.125}));
  EXPECT_EQ(ir::attrFloats(gru->attrs(), "activation_beta"), (std::vector<double>{0.75, 0}));
}

TEST(OnnxImportRecurrent, MismatchedWeightsAreAnError) {
  ModelBuilder m(14);
  m.input("x", DType::F32, {kSteps, kBatch, kInput});
  m.initializer("w", weights({1, 3, kInput}, 1)); // an LSTM needs 4 * hidden rows
  m.initializer("r", weights({1, 3, kHidden}, 2));
  setInt(m.node("LSTM", {"x", "w", "r"}, {"", "yh"}, "lstm"), "hidden_size", kHidden);
  m.output("yh", DType::F32, {1, kBatch, kHidden});
  expectError([&] { import(m); }, {"node 'lstm' (LSTM)", "do not fit"});
}

} // namespace
