// Quantized product stages: qmatmul and qconv (ir/ops/Quantize.cpp) as one call of the
// runtime's int8 GEMM (rt->qgemm, runtime/kernels/QGemm.cpp) or convolution (rt->qconv2d,
// runtime/kernels/QConv2d.cpp) over contiguous operands (the planner copies any other view
// first), with the kernel group's elementwise tail (bias, activation, the next layer's
// quantize_linear) applied in registers as the kernel stores each tile when it is only those
// (matchQuantizedStore, matchPostOps: ContractionPostOps.h), else as a generated epilogue on
// each tile while it is in cache (as gemm's and conv's: emitEpilogue, EmitContraction.cpp).
// Scale and zero point operands are read from their buffers at run time; an i8 weight that only this kernel reads, straight from the
// weight, is packed once at load (KILN_PACK_QGEMM_B, KILN_PACK_QCONV_WEIGHTS), any other on
// every call.
#include "codegen/ContractionPostOps.h"
#include "codegen/IndexExpr.h"
#include "codegen/StageEmitters.h"
#include "core/Error.h"
#include "ir/ops/Window.h" // perSpatialDim, spatialPads
#include "runtime/KernelAbi.h"
#include "runtime/kernels/Kernels.h" // qconvChannelQuadRows

namespace kiln::codegen {

namespace {

/// The address of the anchor's operand `i` in the generated code.
std::string operandAddress(KernelEmitter &e, const Stage &stage, size_t i) {
  const StridedAccess &access = stage.anchorOperands.at(i);
  return fmt::format("(const char *){} + {}", e.kernelAddress(access.buffer),
                     access.offset * static_cast<int64_t>(dtypeSize(stage.anchor->input(i)->dtype())));
}

/// Whether the anchor's weight (operand 1) is read by this kernel alone, whole, straight from
/// the weight: then the runtime packs it at load.
bool weightPackable(KernelEmitter &e, const Stage &stage) {
  const StridedAccess &weights = stage.anchorOperands.at(1);
  const ir::Value &value = *stage.anchor->input(1);
  return weights.offset == 0 && e.isSoleWeightOperand(weights.buffer) && value.isGraphInput() &&
         value.uses().size() == 1;
}

/// Whether the product's f32 tiles feed only the epilogue (a temporary of a one-stage kernel,
/// such as a product whose epilogue quantizes it): then the runtime keeps each tile in a
/// small buffer instead of writing the whole f32 product to memory (MobileNetV2's expand layers
/// wrote 4.8 MB each so and read none of it back).
bool tileOnlyFeedsEpilogue(KernelEmitter &e, const Stage &stage) {
  return e.plan().stages.size() == 1 &&
         e.plan().buffers.at(static_cast<size_t>(stage.tileBuffer)).kind == KernelBuffer::Kind::Temp;
}

/// The call's epilogue arguments: when the stage's epilogue is only a bias, a residual, an
/// activation and perhaps the next layer's quantize_linear, those as the call's post ops,
/// addend and quantized output, which the kernel applies in registers, and no epilogue
/// (`channelDim`: the output dim a bias varies along); otherwise the generated epilogue
/// `generated` writes.
template <typename Generate>
std::string epilogueArguments(KernelEmitter &e, int stageIndex, size_t channelDim, Generate generated) {
  const Stage &stage = e.plan().stages.at(static_cast<size_t>(stageIndex));
  if (std::optional<QuantizedStore> store = matchQuantizedStore(e, stageIndex, channelDim))
    return quantizedStoreArguments(e, *store);
  if (std::optional<ContractionPostOps> post = matchPostOps(e, stageIndex, channelDim, true))
    return postOpsArguments(e, *post);
  std::string text = fmt::format("  g.epilogue = {}; g.epilogue_ctx = &ctx;\n  ctx.batch0 = 0;\n", generated());
  if (tileOnlyFeedsEpilogue(e, stage))
    text += "  g.tile_in_scratch = 1;\n";
  return text;
}

void emitQMatMul(KernelEmitter &e, int stageIndex, KernelText &out) {
  const Stage &stage = e.plan().stages.at(static_cast<size_t>(stageIndex));
  const ir::Node &node = *stage.anchor;
  const Shape &b = node.input(1)->shape();
  const int64_t k = b[0], n = b[1], m = node.output()->type().numElements() / n;
  auto address = [&](size_t i) { return operandAddress(e, stage, i); };
  // Rows are every [.., M] index of the output, flattened: its tail's coordinates unflatten them.
  Shape rowShape(node.output()->shape().begin(), node.output()->shape().end() - 1);
  const std::string epilogue = epilogueArguments(e, stageIndex, rowShape.size(), [&] {
    return emitEpilogue(e, stageIndex, out, 1, m, n,
                        [&](IndexArena &arena, const Index &, const Index &row, const Index &col) {
                          std::vector<Index> coords = unflattenIndex(arena, row, rowShape);
                          coords.push_back(col);
                          return coords;
                        });
  });
  const std::string result = fmt::format("(float *){}", e.kernelAddress(stage.tileBuffer));
  const bool packed = weightPackable(e, stage);
  if (packed)
    out.packedOperands.push_back(
        {e.plan().buffers.at(static_cast<size_t>(stage.anchorOperands[1].buffer)).index, KILN_PACK_QGEMM_B, k, n, n, 1});
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
  text += epilogue + "  rt->qgemm(rt, &g);\n}";
  out.body.push_back(text);
}

void emitQConv(KernelEmitter &e, int stageIndex, KernelText &out) {
  const Stage &stage = e.plan().stages.at(static_cast<size_t>(stageIndex));
  const ir::Node &node = *stage.anchor;
  const Shape &x = node.input(0)->shape(), &w = node.input(1)->shape(), &y = node.output()->shape();
  if (numElements(y) == 0)
    return;
  auto address = [&](size_t i) { return operandAddress(e, stage, i); };
  const std::vector<int64_t> strides = ir::ops::perSpatialDim(node.attrs(), "strides", 2, 1, 1);
  const std::vector<int64_t> dilations = ir::ops::perSpatialDim(node.attrs(), "dilations", 2, 1, 1);
  const std::vector<int64_t> pads = ir::ops::spatialPads(node.attrs(), 2);
  const std::string epilogue =
      epilogueArguments(e, stageIndex, 1, [&] { return emitChannelPlaneEpilogue(e, stageIndex, out, y); });
  // The call's geometry, which the kernel's route (and so the weights' packed order) depends on.
  kiln_qconv2d_args shape{};
  shape.n = x[0], shape.c = x[1], shape.h = x[2], shape.w = x[3], shape.k = w[0], shape.r = w[2], shape.s = w[3];
  shape.oh = y[2], shape.ow = y[3], shape.stride_h = strides[0], shape.stride_w = strides[1];
  shape.pad_top = pads[0], shape.pad_left = pads[1], shape.dilation_h = dilations[0];
  shape.dilation_w = dilations[1], shape.groups = node.attrInt("groups");
  const bool channelQuads = runtime::kernels::qconvChannelQuadRows(shape);
  const bool packed = weightPackable(e, stage);
  if (packed)
    out.packedOperands.push_back({e.plan().buffers.at(static_cast<size_t>(stage.anchorOperands[1].buffer)).index,
                                  KILN_PACK_QCONV_WEIGHTS, w[0], w[1], w[2] * w[3], channelQuads ? 1 : 0});
  const bool xSigned = node.input(0)->dtype() == DType::I8;
  std::string text = "{\n  kiln_qconv2d_args g;\n  memset(&g, 0, sizeof g);\n";
  text += fmt::format("  g.n = {}; g.c = {}; g.h = {}; g.w = {};\n", shape.n, shape.c, shape.h, shape.w);
  text += fmt::format("  g.k = {}; g.r = {}; g.s = {}; g.oh = {}; g.ow = {};\n", shape.k, shape.r, shape.s, shape.oh,
                      shape.ow);
  text += fmt::format("  g.stride_h = {}; g.stride_w = {}; g.pad_top = {}; g.pad_left = {};\n", shape.stride_h,
                      shape.stride_w, shape.pad_top, shape.pad_left);
  text += fmt::format("  g.dilation_h = {}; g.dilation_w = {}; g.groups = {};\n", shape.dilation_h, shape.dilation_w,
                      shape.groups);
  text += fmt::format("  g.x = {}; g.x_signed = {};\n", address(0), xSigned ? 1 : 0);
  text += fmt::format("  g.x_scale = *(const float *)({});\n", address(2));
  text += fmt::format("  g.x_zero = (int32_t)*(const {} *)({});\n", xSigned ? "int8_t" : "uint8_t", address(3));
  text += fmt::format("  g.weights = (const int8_t *)({}); g.weights_packed = {};\n", address(1),
                      packed ? (channelQuads ? 2 : 1) : 0);
  text += fmt::format("  g.w_scales = (const float *)({}); g.w_per_channel = {};\n", address(4),
                      node.input(4)->rank() == 1 ? 1 : 0);
  text += fmt::format("  g.y = (float *){};\n", e.kernelAddress(stage.tileBuffer));
  text += epilogue + "  rt->qconv2d(rt, &g);\n}";
  out.body.push_back(text);
}

} // namespace

void emitQuantizedProductStage(KernelEmitter &e, int stageIndex, KernelText &out) {
  if (e.plan().stages.at(static_cast<size_t>(stageIndex)).anchor->op() == ir::OpKind::QConv)
    emitQConv(e, stageIndex, out);
  else
    emitQMatMul(e, stageIndex, out);
}

} // namespace kiln::codegen
