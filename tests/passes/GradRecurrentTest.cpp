// Gradients through the recurrences (rnn_sequence, gru_sequence, lstm_sequence), which autodiff
// differentiates in their unrolled form: decomposed for autodiff first, as the training graph
// does, every operand's gradient matches finite differences of the reference evaluation, for
// every cell, direction, lengths, clipping and peepholes. Without that decomposition autodiff
// says what to do instead of giving a wrong or missing gradient.
#include <gtest/gtest.h>

#include "ir/Builder.h"
#include "passes/autodiff/Autodiff.h"
#include "tests/ErrorMatchers.h"
#include "tests/passes/GradCheck.h"

namespace kiln::test {
namespace {

using ir::OpKind;

TensorType f64(Shape shape) { return {DType::F64, std::move(shape)}; }

/// Every result of the recurrence, flattened and joined, so that each one reaches the loss.
GradBuildFn recurrence(OpKind op, ir::AttrMap attrs) {
  return [op, attrs](ir::Builder &b, const std::vector<ir::Value *> &in) {
    std::vector<ir::Value *> parts;
    for (ir::Value *out : b.createMulti(op, in, attrs))
      parts.push_back(b.create(OpKind::Reshape, {out}, {{"shape", Shape{out->type().numElements()}}}));
    return b.create(OpKind::Concat, parts, {{"axis", int64_t{0}}});
  };
}

/// The operand types of a recurrence with 2 steps, batch 2 and hidden size 3.
std::vector<GradInput> operands(OpKind op, int64_t directions, bool peepholes = false) {
  const int64_t T = 2, B = 2, H = 3, G = op == OpKind::RnnSequence ? 1 : op == OpKind::GruSequence ? 3 : 4;
  std::vector<GradInput> in{{f64({T, B, directions * G * H})}, {f64({directions, G * H, H})},
                            {f64({directions, G * H})}, {f64({directions, B, H})}};
  if (op == OpKind::LstmSequence) {
    in.push_back({f64({directions, B, H})});
    if (peepholes)
      in.push_back({f64({directions, 3 * H})});
  }
  return in;
}

TEST(GradRecurrent, EveryCellAndDirection) {
  for (std::string direction : {"forward", "reverse", "bidirectional"}) {
    SCOPED_TRACE(direction);
    int64_t D = direction == "bidirectional" ? 2 : 1;
    ir::AttrMap attrs{{"direction", direction}};
    expectGradientsMatch(operands(OpKind::RnnSequence, D), recurrence(OpKind::RnnSequence, attrs), 1, true);
    for (int64_t linearBeforeReset : {0, 1}) {
      ir::AttrMap gru = attrs;
      gru["linear_before_reset"] = linearBeforeReset;
      expectGradientsMatch(operands(OpKind::GruSequence, D), recurrence(OpKind::GruSequence, gru), 2, true);
    }
    expectGradientsMatch(operands(OpKind::LstmSequence, D), recurrence(OpKind::LstmSequence, attrs), 3, true);
  }
}

TEST(GradRecurrent, LengthsClipAndPeepholes) {
  // The clip bound sits outside the pre-activations' range, so no gradient meets its kink.
  ir::AttrMap attrs{{"direction", std::string("bidirectional")}, {"lengths", std::vector<int64_t>{2, 1}}, {"clip", 50.0}};
  expectGradientsMatch(operands(OpKind::LstmSequence, 2, true), recurrence(OpKind::LstmSequence, attrs), 4, true);
  expectGradientsMatch(operands(OpKind::GruSequence, 2), recurrence(OpKind::GruSequence, attrs), 5, true);
}

TEST(GradRecurrent, WithoutTheUnrolledFormAutodiffSaysWhatToDo) {
  ir::Graph graph("lstm");
  std::vector<ir::Value *> in;
  for (const GradInput &operand : operands(OpKind::LstmSequence, 1))
    in.push_back(graph.addInput(operand.type));
  ir::Builder b(graph);
  ir::Value *loss = b.create(OpKind::ReduceSum, {b.createMulti(OpKind::LstmSequence, in)[1]});
  expectErrorContaining([&] { passes::autodiff::appendGradients(graph, loss, {in[0]}); },
                        "is differentiated through its unrolled form; run the decompose pass for autodiff first");
}

} // namespace
} // namespace kiln::test
