// Recurrence stages: rnn_sequence, gru_sequence and lstm_sequence (ir/ops/Recurrent.h) as one
// call of the runtime's recurrent kernel (rt->recurrence, runtime/kernels/Recurrence.cpp), which
// runs the whole time loop. Its operands are contiguous buffers (the planner copies any other
// view first); recurrent weights that only this kernel reads, straight from the weight, are
// packed into the kernel's gate blocks once at load (KILN_PACK_RECURRENT_GATES).
#include "codegen/EmitDirect.h"
#include "codegen/ScalarOps.h"
#include "codegen/StageEmitters.h"
#include "core/Error.h"
#include "ir/ops/Recurrent.h"
#include "runtime/KernelAbi.h"

namespace kiln::codegen {

namespace {

int32_t abiCell(ir::ops::CellKind cell) {
  switch (cell) {
  case ir::ops::CellKind::Rnn: return KILN_CELL_RNN;
  case ir::ops::CellKind::Gru: return KILN_CELL_GRU;
  case ir::ops::CellKind::Lstm: return KILN_CELL_LSTM;
  }
  return KILN_CELL_LSTM;
}

int32_t abiActivation(ir::ops::CellActivation kind) {
  using ir::ops::CellActivation;
  switch (kind) {
  case CellActivation::Sigmoid: return KILN_ACT_SIGMOID;
  case CellActivation::Tanh: return KILN_ACT_TANH;
  case CellActivation::Relu: return KILN_ACT_RELU;
  case CellActivation::LeakyRelu: return KILN_ACT_LEAKY_RELU;
  case CellActivation::ThresholdedRelu: return KILN_ACT_THRESHOLDED_RELU;
  case CellActivation::Elu: return KILN_ACT_ELU;
  case CellActivation::Softsign: return KILN_ACT_SOFTSIGN;
  case CellActivation::Softplus: return KILN_ACT_SOFTPLUS;
  case CellActivation::HardSigmoid: return KILN_ACT_HARD_SIGMOID;
  case CellActivation::Affine: return KILN_ACT_AFFINE;
  case CellActivation::ScaledTanh: return KILN_ACT_SCALED_TANH;
  }
  return KILN_ACT_TANH;
}

} // namespace

void emitRecurrenceStage(KernelEmitter &e, int stageIndex, KernelText &out) {
  const Stage &stage = e.plan().stages.at(static_cast<size_t>(stageIndex));
  const ir::Node &node = *stage.anchor;
  std::vector<TensorType> inputs;
  for (const ir::Value *input : node.inputs())
    inputs.push_back(input->type());
  const ir::ops::Recurrence r = ir::ops::readRecurrence(node.op(), inputs, node.attrs());
  auto operand = [&](size_t i) {
    const StridedAccess &access = stage.anchorOperands.at(i);
    return fmt::format("(const float *){} + {}", e.kernelAddress(access.buffer), access.offset);
  };
  auto result = [&](size_t i) {
    for (const Store &store : stage.stores)
      if (store.value == node.output(i))
        return fmt::format("(float *){}", e.kernelAddress(store.buffer));
    fail("codegen: internal error: result {} of {} has no buffer", i, node.opName());
  };
  // The recurrent weights straight from a weight only this kernel reads: packed at load.
  const StridedAccess &weights = stage.anchorOperands.at(1);
  const bool packed = weights.offset == 0 && e.isSoleWeightOperand(weights.buffer) &&
                      node.input(1)->isGraphInput() && node.input(1)->uses().size() == 1;
  if (packed)
    out.packedOperands.push_back({e.plan().buffers.at(static_cast<size_t>(weights.buffer)).index,
                                  KILN_PACK_RECURRENT_GATES, r.directions, r.hidden, r.gates, 0});

  std::string text = "{\n  kiln_recurrence_args g;\n  memset(&g, 0, sizeof g);\n";
  text += fmt::format("  g.cell = {}; g.directions = {}; g.reverse = {};\n", abiCell(r.cell), r.directions,
                      r.reverse ? 1 : 0);
  text += fmt::format("  g.linear_before_reset = {}; g.input_forget = {}; g.r_layout = {};\n",
                      r.linearBeforeReset ? 1 : 0, r.inputForget ? 1 : 0,
                      packed ? "KILN_RECURRENCE_R_GATE_BLOCKS" : "KILN_RECURRENCE_R_PLAIN");
  text += fmt::format("  g.steps = {}; g.batch = {}; g.hidden = {}; g.clip = {};\n", r.steps, r.batch, r.hidden,
                      literal(DType::F32, r.clip));
  for (int64_t d = 0; d < r.directions; ++d)
    for (int64_t i = 0; i < r.functionsPerDirection(); ++i) {
      const ir::ops::CellFunction &f = r.function(d, i);
      text += fmt::format("  g.functions[{0}][{1}].kind = {2}; g.functions[{0}][{1}].alpha = {3}; "
                          "g.functions[{0}][{1}].beta = {4};\n",
                          d, i, abiActivation(f.kind), literal(DType::F32, f.alpha), literal(DType::F32, f.beta));
    }
  text += fmt::format("  g.xw = {};\n  g.r = {};\n  g.rb = {};\n  g.h0 = {};\n", operand(0), operand(1), operand(2),
                      operand(3));
  if (r.cell == ir::ops::CellKind::Lstm) {
    text += fmt::format("  g.c0 = {};\n", operand(4));
    if (r.peepholes)
      text += fmt::format("  g.peepholes = {};\n", operand(5));
  }
  if (!r.lengths.empty())
    text += fmt::format("  static const int64_t lengths[] = {};\n  g.lengths = lengths;\n", direct::intList(r.lengths));
  text += fmt::format("  g.y = {};\n  g.h_n = {};\n", result(0), result(1));
  if (r.cell == ir::ops::CellKind::Lstm)
    text += fmt::format("  g.c_n = {};\n", result(2));
  text += "  rt->recurrence(rt, &g);\n}";
  out.body.push_back(text);
}

} // namespace kiln::codegen
