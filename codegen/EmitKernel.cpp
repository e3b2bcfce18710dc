// One unit to one kernel function: plan its stages (the strategy, or per-op when the strategy
// meets a body it cannot express), emit each stage, and wrap them with the context and the
// temporaries' allocation.
#include <algorithm>

#include "codegen/EmitDirect.h"
#include "codegen/EmitModel.h"
#include "codegen/GenericContraction.h"
#include "codegen/ScalarOps.h"
#include "codegen/StageEmitters.h"
#include "core/Error.h"

namespace kiln::codegen {

void emitConvWeightGradStage(KernelEmitter &emitter, int stage, KernelText &out); // EmitConvWeightGrad.cpp

namespace {

KernelText emitStages(const KernelPlan &plan, const Unit &unit, const std::string &prefix, bool restrictPointers) {
  int operands = 0;
  for (const KernelBuffer &buffer : plan.buffers)
    operands += buffer.kind == KernelBuffer::Kind::Operand;
  KernelEmitter emitter(plan, prefix, restrictPointers, operands);
  emitter.setSoleWeightOperands(unit.soleWeightOperands);
  emitter.setExactConvolutions(unit.exactConvolutions);
  emitter.setPrecision(unit.precision);
  if (unit.accumulatedOperand >= 0)
    emitter.setAccumulatedAdd(passes::accumulatedAdd(*unit.body, unit.accumulatedOperand));
  KernelText text;
  for (size_t s = 0; s < plan.stages.size(); ++s) {
    int stage = static_cast<int>(s);
    switch (plan.stages[s].kind) {
    case StageKind::Loop: emitLoopStage(emitter, stage, text); break;
    case StageKind::Rows: emitRowsStage(emitter, stage, text); break;
    case StageKind::Gemm: emitGemmStage(emitter, stage, text); break;
    case StageKind::Conv: emitConvStage(emitter, stage, text); break;
    case StageKind::Pool: emitPoolStage(emitter, stage, text); break;
    case StageKind::Direct: emitDirectStage(emitter, stage, text); break;
    case StageKind::Generic: emitGenericStage(emitter, stage, text); break;
    case StageKind::ConvTranspose: emitConvTransposeStage(emitter, stage, text); break;
    case StageKind::ConvWeightGrad: emitConvWeightGradStage(emitter, stage, text); break;
    case StageKind::Recurrence: emitRecurrenceStage(emitter, stage, text); break;
    case StageKind::QuantizedProduct: emitQuantizedProductStage(emitter, stage, text); break;
    }
  }
  return text;
}

std::string constantArrays(const KernelPlan &plan, const std::string &prefix) {
  std::string text;
  for (const KernelBuffer &buffer : plan.buffers) {
    if (buffer.kind != KernelBuffer::Kind::Constant)
      continue;
    std::vector<std::string> values;
    for (int64_t i = 0; i < buffer.constant.numElements(); ++i)
      values.push_back(elementLiteral(buffer.constant, i));
    if (values.empty())
      values.push_back(literal(buffer.type.dtype, 0));
    text += fmt::format("static const {} {}_c{}[{}] = {{{}}};\n", cType(buffer.type.dtype), prefix, buffer.index,
                        values.size(), fmt::join(values, ", "));
  }
  return text;
}

} // namespace

KernelSource emitKernel(const Unit &unit, const std::string &prefix, const std::string &symbol,
                        bool restrictPointers) {
  KernelPlan plan;
  KernelText text;
  try {
    plan = planKernel(unit, false);
    text = emitStages(plan, unit, prefix, restrictPointers);
  } catch (const StrategyMismatch &) {
    plan = planKernel(unit, true);
    try {
      text = emitStages(plan, unit, prefix, restrictPointers);
    } catch (const StrategyMismatch &mismatch) {
      fail("codegen: internal error lowering {} op by op: {}", unit.nodeLabel, mismatch.what());
    }
  }
  KernelSource source;
  source.symbol = symbol;
  source.strategy = plan.strategy;
  source.packedOperands = text.packedOperands;
  std::string &out = source.text;
  out += fmt::format("// {}: {}{}\n", unit.nodeLabel, plan.strategy,
                     unit.rule.empty() ? "" : fmt::format(" (rule \"{}\")", unit.rule));
  out += constantArrays(plan, prefix);
  out += fmt::format("struct {}_ctx {{\n  void *const *buffers;\n  void *temps[{}];\n  int64_t batch0;\n}};\n\n", prefix,
                     std::max(plan.numTemps, 1));
  out += text.functions;
  out += fmt::format("extern \"C\" void {}(const kiln_rt *rt, void *const *buffers) {{\n", symbol);
  out += fmt::format("  {}_ctx ctx;\n  ctx.buffers = buffers;\n  ctx.batch0 = 0;\n  (void)rt;\n", prefix);
  for (const KernelBuffer &buffer : plan.buffers) {
    if (buffer.kind != KernelBuffer::Kind::Temp)
      continue;
    // 64-byte aligned, like the arena, so the temporaries vectorise the same way.
    int64_t bytes = (static_cast<int64_t>(buffer.type.byteSize()) + 63) / 64 * 64;
    out += fmt::format("  ctx.temps[{}] = aligned_alloc(64, {});\n", buffer.index, std::max<int64_t>(bytes, 64));
    out += fmt::format("  if (!ctx.temps[{}]) abort();\n", buffer.index);
  }
  for (const std::string &statement : text.body) {
    std::string indented = "  ";
    for (char ch : statement) {
      indented += ch;
      if (ch == '\n')
        indented += "  ";
    }
    out += indented + "\n";
  }
  for (const KernelBuffer &buffer : plan.buffers)
    if (buffer.kind == KernelBuffer::Kind::Temp)
      out += fmt::format("  free(ctx.temps[{}]);\n", buffer.index);
  out += "}\n\n";
  return source;
}

} // namespace kiln::codegen
