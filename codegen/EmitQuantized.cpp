// Quantized product stages: qmatmul (ir/ops/Quantize.cpp) as one call of the runtime's int8
// GEMM (rt->qgemm, runtime/kernels/QGemm.cpp) over contiguous operands (the planner copies any
// other view first), with the kernel group's elementwise tail (bias, activation, the next
// layer's quantize_linear) as the epilogue on each tile while it is in cache (as gemm's:
// emitEpilogue, codegen/EmitContraction.cpp). Its scale and zero point operands are read from their buffers at run
// time; an i8 weight that only this kernel reads, straight from the weight, is packed into
// qgemm's quads once at load (KILN_PACK_QGEMM_B), any other B on every call.
#include "codegen/IndexExpr.h"
#include "codegen/StageEmitters.h"
#include "core/Error.h"
#include "runtime/KernelAbi.h"

namespace kiln::codegen {

void emitQuantizedProductStage(KernelEmitter &e, int stageIndex, KernelText &out) {
  const Stage &stage = e.plan().stages.at(static_cast<size_t>(stageIndex));
  const ir::Node &node = *stage.anchor;
  const Shape &b = node.input(1)->shape();
  const int64_t k = b[0], n = b[1], m = node.output()->type().numElements() / n;
  auto address = [&](size_t i) {
    const StridedAccess &access = stage.anchorOperands.at(i);
    return fmt::format("(const char *){} + {}", e.kernelAddress(access.buffer),
                       access.offset * static_cast<int64_t>(dtypeSize(node.input(i)->dtype())));
  };
  // Rows are every [.., M] index of the output, flattened: its tail's coordinates unflatten them.
  Shape rowShape(node.output()->shape().begin(), node.output()->shape().end() - 1);
  std::string epilogue = emitEpilogue(e, stageIndex, out, 1, m, n,
                                      [&](IndexArena &arena, const Index &, const Index &row, const Index &col) {
                                        std::vector<Index> coords = unflattenIndex(arena, row, rowShape);
                                        coords.push_back(col);
                                        return coords;
                                      });
  const std::string result = fmt::format("(float *){}", e.kernelAddress(stage.tileBuffer));
  const StridedAccess &weights = stage.anchorOperands.at(1);
  const bool packed = weights.offset == 0 && e.isSoleWeightOperand(weights.buffer) &&
                      node.input(1)->isGraphInput() && node.input(1)->uses().size() == 1;
  if (packed)
    out.packedOperands.push_back(
        {e.plan().buffers.at(static_cast<size_t>(weights.buffer)).index, KILN_PACK_QGEMM_B, k, n, n, 1});
  const bool aSigned = node.input(0)->dtype() == DType::I8;
  std::string text = "{\n  kiln_qgemm_args g;\n  memset(&g, 0, sizeof g);\n";
  text += fmt::format("  g.m = {}; g.n = {}; g.k = {};\n", m, n, k);
  text += fmt::format("  g.a = {}; g.lda = {}; g.a_signed = {};\n", address(0), k, aSigned ? 1 : 0);
  text += fmt::format("  g.a_scale = *(const float *)({});\n", address(2));
  text += fmt::format("  g.a_zero = (int32_t)*(const {} *)({});\n", aSigned ? "int8_t" : "uint8_t", address(3));
  text += fmt::format("  g.b = (const int8_t *)({}); g.b_packed = {}; g.ldb = {};\n", address(1), packed ? 1 : 0, n);
  text += fmt::format("  g.b_scales = (const float *)({}); g.b_per_column = {};\n", address(4),
                      node.input(4)->rank() == 1 ? 1 : 0);
  text += fmt::format("  g.c = {}; g.ldc = {};\n", result, n);
  text += fmt::format("  g.epilogue = {}; g.epilogue_ctx = &ctx;\n  ctx.batch0 = 0;\n", epilogue);
  text += "  rt->qgemm(rt, &g);\n}";
  out.body.push_back(text);
}

} // namespace kiln::codegen
