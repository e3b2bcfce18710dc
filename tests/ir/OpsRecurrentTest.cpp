// rnn_sequence, gru_sequence and lstm_sequence (ir/ops/Recurrent.h): the reference evaluation
// against one step of each cell written out here from ONNX's formulas; the unrolled form (the
// decomposition autodiff differentiates) against the reference over every attribute; the text
// form; and the errors inference gives for operands and attributes that do not fit.
#include <gtest/gtest.h>

#include <cmath>

#include "ir/Parser.h"
#include "ir/Printer.h"
#include "ir/ops/Recurrent.h"
#include "tests/ir/OpTestUtil.h"

namespace kiln::test {
namespace {

using ir::OpKind;

double sigmoid(double x) { return 1 / (1 + std::exp(-x)); }

ir::AttrMap attrsOf(const std::string &direction, ir::AttrMap more = {}) {
  more["direction"] = direction;
  return more;
}

std::vector<Tensor> evalOp(OpKind op, const std::vector<Tensor> &in, const ir::AttrMap &attrs) {
  ir::AttrMap complete = ir::completeAttrs(op, attrs);
  std::vector<TensorType> types;
  for (const Tensor &t : in)
    types.push_back(t.type());
  return ir::evaluateOp(op, in, complete, ir::inferTypes(op, types, complete));
}

TEST(OpsRecurrent, OneUnitStepsByHand) {
  // One unit, one batch entry, two steps: each cell's formulas with the numbers in place.
  const double x0 = 0.3, x1 = -0.7, h0 = 0.2, c0 = -0.4;
  {
    // RNN: h_t = tanh(xw_t + r h_{t-1} + rb)
    auto out = evalOp(OpKind::RnnSequence,
                      {f32s({2, 1, 1}, {x0, x1}), f32s({1, 1, 1}, {0.5}), f32s({1, 1}, {0.1}), f32s({1, 1, 1}, {h0})},
                      attrsOf("forward"));
    double h1 = std::tanh(x0 + 0.5 * h0 + 0.1), h2 = std::tanh(x1 + 0.5 * h1 + 0.1);
    expectValues(out[0], {h1, h2}, 1e-6);
    expectValues(out[1], {h2}, 1e-6);
  }
  {
    // GRU (gates z, r, h), reversed: the last step runs first.
    const double xz = 0.1, xr = -0.2, xh = 0.4, rz = 0.3, rr = -0.6, rh = 0.8, bz = 0.05, br = -0.1, bh = 0.2;
    for (bool linearBeforeReset : {false, true}) {
      auto out = evalOp(OpKind::GruSequence,
                        {f32s({1, 1, 3}, {xz, xr, xh}), f32s({1, 3, 1}, {rz, rr, rh}), f32s({1, 3}, {bz, br, bh}),
                         f32s({1, 1, 1}, {h0})},
                        attrsOf("reverse", {{"linear_before_reset", int64_t{linearBeforeReset}}}));
      double z = sigmoid(xz + rz * h0 + bz), r = sigmoid(xr + rr * h0 + br);
      double candidate = linearBeforeReset ? std::tanh(xh + r * (rh * h0 + bh)) : std::tanh(xh + rh * (r * h0) + bh);
      double h = (1 - z) * candidate + z * h0;
      expectValues(out[0], {h}, 1e-6);
    }
  }
  {
    // LSTM (gates i, o, f, c) with peepholes (i, o, f).
    const double xi = 0.2, xo = -0.1, xf = 0.5, xc = -0.3, ri = 0.4, ro = 0.1, rf = -0.2, rc = 0.7;
    const double pi = 0.3, po = -0.5, pf = 0.2;
    auto out = evalOp(OpKind::LstmSequence,
                      {f32s({1, 1, 4}, {xi, xo, xf, xc}), f32s({1, 4, 1}, {ri, ro, rf, rc}), f32s({1, 4}, {0, 0, 0, 0}),
                       f32s({1, 1, 1}, {h0}), f32s({1, 1, 1}, {c0}), f32s({1, 3}, {pi, po, pf})},
                      attrsOf("forward"));
    double i = sigmoid(xi + ri * h0 + pi * c0), f = sigmoid(xf + rf * h0 + pf * c0);
    double c = f * c0 + i * std::tanh(xc + rc * h0);
    double o = sigmoid(xo + ro * h0 + po * c);
    expectValues(out[0], {o * std::tanh(c)}, 1e-6);
    expectValues(out[2], {c}, 1e-6);
  }
}

struct Case {
  OpKind op;
  std::string direction;
  ir::AttrMap attrs;
  bool peepholes = false;
  int64_t steps = 4;
};

/// The unrolled form, evaluated op by op, against the reference evaluation.
void expectUnrolledMatches(const Case &c) {
  const int64_t B = 3, H = 5, G = ir::ops::gateCount(ir::ops::cellOf(c.op));
  const int64_t D = c.direction == "bidirectional" ? 2 : 1;
  std::vector<Tensor> in{randomTensor(f32({c.steps, B, D * G * H}), 1), randomTensor(f32({D, G * H, H}), 2),
                         randomTensor(f32({D, G * H}), 3), randomTensor(f32({D, B, H}), 4)};
  if (c.op == OpKind::LstmSequence) {
    in.push_back(randomTensor(f32({D, B, H}), 5));
    if (c.peepholes)
      in.push_back(randomTensor(f32({D, 3 * H}), 6));
  }
  ir::AttrMap attrs = c.attrs;
  attrs["direction"] = c.direction;
  std::vector<Tensor> want = evalOp(c.op, in, attrs);
  std::vector<TensorType> types;
  for (const Tensor &t : in)
    types.push_back(t.type());
  std::unique_ptr<ir::Graph> unrolled = ir::decompositionGraph(c.op, types, ir::completeAttrs(c.op, attrs));
  ir::verify(*unrolled);
  for (const ir::Node *node : unrolled->nodes())
    EXPECT_NE(ir::opTraits(node->op()).family, "Recurrent") << "the unrolled form holds no recurrence";
  std::vector<Tensor> got = ir::evaluate(*unrolled, in);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_TRUE(near(got[i], want[i], 1e-5, 1e-6)) << "output " << i;
}

TEST(OpsRecurrent, UnrolledFormMatchesTheReference) {
  std::vector<int64_t> lengths{4, 0, 2};
  for (std::string direction : {"forward", "reverse", "bidirectional"}) {
    SCOPED_TRACE(direction);
    expectUnrolledMatches({OpKind::RnnSequence, direction, {}});
    expectUnrolledMatches({OpKind::RnnSequence, direction, {{"lengths", lengths}, {"clip", 0.5}}});
    for (int64_t linearBeforeReset : {0, 1}) {
      expectUnrolledMatches({OpKind::GruSequence, direction, {{"linear_before_reset", linearBeforeReset}}});
      expectUnrolledMatches(
          {OpKind::GruSequence, direction, {{"linear_before_reset", linearBeforeReset}, {"lengths", lengths}}});
    }
    expectUnrolledMatches({OpKind::LstmSequence, direction, {}});
    expectUnrolledMatches({OpKind::LstmSequence, direction, {{"clip", 0.4}, {"lengths", lengths}}, true});
    expectUnrolledMatches({OpKind::LstmSequence, direction, {{"input_forget", int64_t{1}}}, true});
  }
  // Every other activation, with its parameters.
  expectUnrolledMatches({OpKind::LstmSequence, "bidirectional",
                         {{"activations", std::string("HardSigmoid,Softsign,Relu,LeakyRelu,ScaledTanh,Affine")},
                          {"activation_alpha", std::vector<double>{0.3, 0, 0, 0.2, 0.9, 1.5}},
                          {"activation_beta", std::vector<double>{0.4, 0, 0, 0, 1.2, -0.1}}}});
  expectUnrolledMatches({OpKind::GruSequence, "forward",
                         {{"activations", std::string("ThresholdedRelu,Elu")},
                          {"activation_alpha", std::vector<double>{0.1, 0.7}},
                          {"activation_beta", std::vector<double>{0, 0}}}});
  expectUnrolledMatches({OpKind::RnnSequence, "forward", {{"activations", std::string("Softplus")}}});
  // No steps: y is empty and the states are the initial ones.
  expectUnrolledMatches({OpKind::LstmSequence, "bidirectional", {}, false, 0});
}

TEST(OpsRecurrent, UnrollingIsBounded) {
  // A length far beyond real models' (a dim that may come with no data behind it) is refused
  // before thousands of nodes are built.
  std::vector<TensorType> types{f32({5000, 1, 1}), f32({1, 1, 1}), f32({1, 1}), f32({1, 1, 1})};
  ir::AttrMap attrs = ir::completeAttrs(OpKind::RnnSequence, {});
  EXPECT_EQ(ir::inferTypes(OpKind::RnnSequence, types, attrs)[0], f32({5000, 1, 1, 1})); // the op itself is fine
  EXPECT_ERROR(ir::decompositionGraph(OpKind::RnnSequence, types, attrs), "5000 steps are more than kiln unrolls (4096)");
}

TEST(OpsRecurrent, ResultTypesAndTextForm) {
  std::vector<TensorType> types{f32({7, 2, 2 * 4 * 3}), f32({2, 12, 3}), f32({2, 12}), f32({2, 2, 3}), f32({2, 2, 3})};
  ir::AttrMap attrs = ir::completeAttrs(OpKind::LstmSequence, attrsOf("bidirectional"));
  std::vector<TensorType> out = ir::inferTypes(OpKind::LstmSequence, types, attrs);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0], f32({7, 2, 2, 3}));
  EXPECT_EQ(out[1], f32({2, 2, 3}));
  EXPECT_EQ(out[2], f32({2, 2, 3}));
  // Printed and parsed back, the attributes survive.
  ir::Graph graph("recurrences");
  std::vector<ir::Value *> in;
  for (const TensorType &type : types)
    in.push_back(graph.addInput(type));
  ir::Builder b(graph);
  std::vector<ir::Value *> lstm =
      b.createMulti(OpKind::LstmSequence, in,
                    attrsOf("bidirectional", {{"lengths", ints({7, 3})},
                                              {"activations", std::string("Sigmoid,Tanh,Tanh,HardSigmoid,Tanh,Relu")}}));
  std::vector<ir::Value *> gru = b.createMulti(
      OpKind::GruSequence, {graph.addInput(f32({7, 2, 9})), graph.addInput(f32({1, 9, 3})), graph.addInput(f32({1, 9})),
                            graph.addInput(f32({1, 2, 3}))},
      attrsOf("reverse", {{"linear_before_reset", int64_t{1}}, {"clip", 2.5}}));
  graph.setOutputs({lstm[0], lstm[2], gru[1]});
  std::string text = ir::printGraph(graph);
  EXPECT_NE(text.find("lstm_sequence("), std::string::npos) << text;
  EXPECT_EQ(ir::printGraph(*ir::parseGraph(text)), text);
}

TEST(OpsRecurrent, OperandsAndAttributesThatDoNotFitAreErrors) {
  auto infer = [](OpKind op, std::vector<TensorType> types, ir::AttrMap attrs) {
    ir::inferTypes(op, types, ir::completeAttrs(op, attrs));
  };
  std::vector<TensorType> gru{f32({5, 2, 9}), f32({1, 9, 3}), f32({1, 9}), f32({1, 2, 3})};
  EXPECT_ERROR(infer(OpKind::GruSequence, gru, attrsOf("sideways")), "direction must be forward, reverse or");
  EXPECT_ERROR(infer(OpKind::GruSequence, gru, attrsOf("bidirectional")), "r must be f32[2,9,3]");
  EXPECT_ERROR(infer(OpKind::GruSequence, {f32({5, 2, 8}), gru[1], gru[2], gru[3]}, attrsOf("forward")),
               "xw must be f32[5,2,9]");
  EXPECT_ERROR(infer(OpKind::GruSequence, {gru[0], gru[1], f32({9}), gru[3]}, attrsOf("forward")), "rb must be");
  EXPECT_ERROR(infer(OpKind::GruSequence, {gru[0], gru[1], gru[2], f32({1, 3, 3})}, attrsOf("forward")),
               "h0 must be f32[1,2,3]");
  EXPECT_ERROR(infer(OpKind::GruSequence, gru, attrsOf("forward", {{"lengths", ints({5})}})),
               "lengths has 1 entries for a batch of 2");
  EXPECT_ERROR(infer(OpKind::GruSequence, gru, attrsOf("forward", {{"lengths", ints({5, 6})}})), "outside [0, 5]");
  EXPECT_ERROR(infer(OpKind::GruSequence, gru, attrsOf("forward", {{"clip", -1.0}})), "clip must be >= 0");
  EXPECT_ERROR(infer(OpKind::GruSequence, gru, attrsOf("forward", {{"activations", std::string("Sigmoid")}})),
               "'activations' needs 2 names (2 per direction), got 1");
  EXPECT_ERROR(infer(OpKind::GruSequence, gru, attrsOf("forward", {{"activations", std::string("Sigmoid,Gelu")}})),
               "activation 'Gelu' is not one of the recurrent activations");
  EXPECT_ERROR(infer(OpKind::GruSequence, gru,
                     attrsOf("forward", {{"activations", std::string("Sigmoid,Tanh")},
                                         {"activation_alpha", std::vector<double>{1.0}}})),
               "'activation_alpha' needs one value per activation (2), got 1");
  EXPECT_ERROR(infer(OpKind::GruSequence, gru, attrsOf("forward", {{"linear_before_reset", int64_t{2}}})),
               "linear_before_reset");
  std::vector<TensorType> lstm{f32({5, 2, 12}), f32({1, 12, 3}), f32({1, 12}), f32({1, 2, 3}), f32({1, 2, 3}),
                               f32({1, 6})};
  EXPECT_ERROR(infer(OpKind::LstmSequence, lstm, attrsOf("forward")), "p must be f32[1,9]");
  EXPECT_ERROR(infer(OpKind::LstmSequence, {f32({5, 2, 12}), lstm[1], lstm[2], lstm[3], f32({1, 2, 4})},
                     attrsOf("forward")),
               "c0 must be f32[1,2,3]");
  EXPECT_ERROR(infer(OpKind::RnnSequence, {TensorType{DType::I64, {5, 2, 3}}, f32({1, 3, 3}), f32({1, 3}),
                                           f32({1, 2, 3})},
                     attrsOf("forward")),
               "xw must be a float");
}

} // namespace
} // namespace kiln::test
