// Gemm, Conv and Pool stages: calls of the runtime's precompiled kernels (rt->gemm,
// rt->conv2d, rt->pool2d), with a generated epilogue for the group's elementwise tail.
//
// The epilogue runs on each finished output tile while it is in cache: for every element it
// reads the contraction's value from the tile (an override, so the tail's expressions see it
// as the anchor's value at exactly the output coordinates), computes the other stored values
// from the group's operands at the same coordinates, writes them to their buffers and finally
// writes the tile's own value in place. Matmul batches whose layout one stride cannot describe
// (broadcast over some batch dims only) become one library call per batch; `batch0` in the
// context carries the batch number into the epilogue.
#include <algorithm>
#include <functional>

#include "codegen/ContractionPostOps.h"
#include "codegen/ScalarOps.h"
#include "codegen/StageEmitters.h"
#include "core/Error.h"
#include "ir/ops/Window.h"
#include "runtime/kernels/Kernels.h"

namespace kiln::codegen {

using ir::OpKind;

// Writes the epilogue function for `stage` and returns its name, or "NULL" when the stage
// stores nothing but the tile itself (also used by codegen/EmitConvTranspose.cpp).
std::string emitEpilogue(KernelEmitter &e, int stageIndex, KernelText &out, int64_t batches, int64_t rows,
                         int64_t cols, const CoordsOf &coordsOf) {
  const Stage &stage = e.plan().stages.at(static_cast<size_t>(stageIndex));
  const ir::Value *anchor = stage.anchor->output();
  bool needed = false;
  for (const Store &store : stage.stores)
    needed = needed || !(store.value == anchor && store.buffer == stage.tileBuffer);
  if (!needed)
    return "NULL";
  std::string fn = fmt::format("{}_s{}_epilogue", e.prefix(), stageIndex);
  e.beginFunction(stageIndex);
  Index batch = e.declareIndex("c->batch0 + batch", batches, "t");
  e.open("for (int64_t q0 = 0; q0 < rows; ++q0)");
  Index row = e.declareIndex("row0 + q0", rows, "t");
  e.line("float *trow = tile + q0 * ld;");
  e.openIndependent("for (int64_t q1 = 0; q1 < cols; ++q1)"); // each column its own elements
  Index col = e.declareIndex("col0 + q1", cols, "t");
  std::vector<Index> coords = coordsOf(e.arena(), batch, row, col);
  e.setOverride(anchor, coords, e.declare(DType::F32, "trow[q1]", e.depth()));
  // A convolution that accumulated into the residual r: X + r is the tile's X.
  if (const passes::AccumulatedAdd &sum = e.accumulatedAdd(); sum.add && stage.anchor->op() == OpKind::Conv)
    e.setOverride(sum.add->output(), coords, e.value(sum.rest, coords));
  std::string tileValue;
  for (const Store &store : stage.stores) {
    if (store.value == anchor && store.buffer == stage.tileBuffer)
      continue;
    Scalar value = e.value(store.value, coords);
    if (store.buffer == stage.tileBuffer)
      tileValue = value.code; // written last: the tile is the anchor's value until then
    else
      e.store(store, coords, value);
  }
  if (!tileValue.empty())
    e.line(fmt::format("trow[q1] = {};", tileValue));
  e.close();
  e.close();
  out.functions += fmt::format("static void {}(void *vctx, float *tile, int64_t ld, int64_t batch, int64_t row0, "
                               "int64_t col0, int64_t rows, int64_t cols) {{\n  (void)rows;\n{}}}\n\n",
                               fn, e.endFunction());
  return fn;
}

namespace {

/// Whether operand 1 of `node` (a matmul's B, a convolution's weights) is one of the body's
/// inputs that nothing else reads: reached from the input through single-use movement ops (a
/// permute folded into the access) only.
bool weightReadOnlyBy(const ir::Node &node) {
  const ir::Value *value = node.input(1);
  auto isMovement = [](const ir::Node &node) { // the ops of ir/ops/Movement*.cpp
    std::string_view family = ir::opTraits(node.op()).family;
    return family == "Movement" || family == "MovementRegion";
  };
  while (value->producer() && isMovement(*value->producer()) && value->uses().size() == 1)
    value = value->producer()->input(0);
  return value->isGraphInput() && value->uses().size() == 1;
}

} // namespace

void emitGemmStage(KernelEmitter &e, int stageIndex, KernelText &out) {
  const Stage &stage = e.plan().stages.at(static_cast<size_t>(stageIndex));
  const ir::Node &matmul = *stage.anchor;
  const Shape &outShape = matmul.output()->shape();
  // Operands as matrices: a vector is a row of `a` or a column of `b`, with stride 0 across.
  Shape aShape = matmul.input(0)->shape(), bShape = matmul.input(1)->shape();
  StridedAccess a = stage.anchorOperands[0], b = stage.anchorOperands[1];
  bool aVector = aShape.size() == 1, bVector = bShape.size() == 1;
  if (aVector) {
    aShape.insert(aShape.begin(), 1);
    a.strides.insert(a.strides.begin(), 0);
  }
  if (bVector) {
    bShape.push_back(1);
    b.strides.push_back(0);
  }
  int64_t m = aShape[aShape.size() - 2], k = aShape.back(), n = bShape.back();
  Shape batchShape(outShape.begin(), outShape.end() - (aVector ? 0 : 1) - (bVector ? 0 : 1));
  int64_t batches = numElements(batchShape);
  if (m * n * batches == 0)
    return;
  if (k == 0) { // an empty sum: the product is all zeros
    emitLoopStage(e, stageIndex, out, matmul.output());
    return;
  }
  auto batchCoefs = [&](const Shape &shape, const StridedAccess &access) {
    std::vector<int64_t> coefs(batchShape.size(), 0);
    size_t operandBatch = shape.size() - 2, offset = batchShape.size() - operandBatch;
    for (size_t d = 0; d < operandBatch; ++d)
      coefs[d + offset] = shape[d] > 1 ? access.strides[d] : 0;
    return coefs;
  };
  std::vector<int64_t> aCoefs = batchCoefs(aShape, a), bCoefs = batchCoefs(bShape, b);
  std::optional<int64_t> aBatch = uniformBatchStride(aCoefs, batchShape), bBatch = uniformBatchStride(bCoefs, batchShape);

  // Layouts: row-major when the last dim is unit-stride, else transposed (the planner made
  // sure one of the two holds).
  int64_t sRowA = a.strides[aShape.size() - 2], sColA = a.strides.back();
  bool transA = !((k <= 1 || sColA == 1) && (m <= 1 || sRowA >= k));
  int64_t lda = transA ? (k > 1 ? sColA : m) : (m > 1 ? sRowA : k);
  int64_t sRowB = b.strides[bShape.size() - 2], sColB = b.strides.back();
  bool transB = !((n <= 1 || sColB == 1) && (k <= 1 || sRowB >= n));
  int64_t ldb = transB ? (n > 1 ? sColB : k) : (k > 1 ? sRowB : n);
  // A weight only this matmul reads is read as the GEMM's B panels, which the runtime packs
  // once at load (kiln_weight_packing), so no call packs it: that was ~12% of BERT-base's time.
  const bool packB = !bVector && n % runtime::kernels::kGemmBPanelWidth == 0 && b.offset == 0 &&
                     (!bBatch || *bBatch == 0) && e.isSoleWeightOperand(b.buffer) && weightReadOnlyBy(matmul) &&
                     e.plan().buffers.at(static_cast<size_t>(b.buffer)).type.numElements() == k * n;
  // In bf16, stored as bf16 pair panels: half the bytes, and no call rounds them again.
  const bool bf16 = e.precision() == ContractionPrecision::Bf16;
  if (packB)
    out.packedOperands.push_back({e.plan().buffers.at(static_cast<size_t>(b.buffer)).index,
                                  bf16 ? KILN_PACK_GEMM_B_PAIR_PANELS_BF16 : KILN_PACK_GEMM_B_PANELS, k, n, sRowB, sColB});

  // One B for every batch and A's batches one after another, row-major: the batches are the
  // row blocks of one taller GEMM (an RNN's input projection over every step, a linear layer
  // over [batch, seq, d]), which the GEMM tiles and threads as a whole instead of as many small
  // ones (16 rows each for an LSTM of batch 16: half the FMA rate).
  const bool rowsOfOneGemm = batches > 1 && !aVector && !transA && aBatch && bBatch && *bBatch == 0 &&
                             *aBatch == m * lda;
  const int64_t gemmRows = rowsOfOneGemm ? batches * m : m, gemmBatches = rowsOfOneGemm ? 1 : batches;
  Shape rowShape = batchShape; // a folded row's coordinates: its batch's, then its own row
  rowShape.push_back(m);
  // A bias per column (a linear layer's) and an activation go to the GEMM as post ops.
  const std::optional<ContractionPostOps> post =
      aVector || bVector ? std::nullopt : matchPostOps(e, stageIndex, outShape.size() - 1);
  std::string epilogue = post ? "NULL" : emitEpilogue(e, stageIndex, out, gemmBatches, gemmRows, n,
                                      [&](IndexArena &arena, const Index &bt, const Index &row, const Index &col) {
                                        std::vector<Index> coords;
                                        if (rowsOfOneGemm) {
                                          coords = unflattenIndex(arena, row, rowShape);
                                        } else {
                                          coords = unflattenIndex(arena, bt, batchShape);
                                          if (!aVector)
                                            coords.push_back(row);
                                        }
                                        if (!bVector)
                                          coords.push_back(col);
                                        return coords;
                                      });
  std::string text = "{\n  kiln_gemm_args g;\n  memset(&g, 0, sizeof g);\n";
  text += fmt::format("  g.m = {}; g.n = {}; g.k = {};\n", gemmRows, n, k);
  text += fmt::format("  g.lda = {}; g.trans_a = {}; g.ldb = {}; g.trans_b = {}; g.ldc = {};\n", lda, transA ? 1 : 0,
                      ldb, transB ? 1 : 0, n);
  text += fmt::format("  g.epilogue = {}; g.epilogue_ctx = &ctx;\n", epilogue);
  if (post)
    text += postOpsArguments(e, *post);
  if (packB)
    text += bf16 ? "  g.b_layout = KILN_GEMM_B_PAIR_PANELS_BF16;\n" : "  g.b_layout = KILN_GEMM_B_PANELS;\n";
  if (bf16)
    text += "  g.precision = KILN_PRECISION_BF16;\n";
  std::string aBase = fmt::format("(const float *){} + {}", e.kernelAddress(a.buffer), a.offset);
  std::string bBase = fmt::format("(const float *){} + {}", e.kernelAddress(b.buffer), b.offset);
  std::string cBase = fmt::format("(float *){}", e.kernelAddress(stage.tileBuffer));
  if (aBatch && bBatch) {
    text += fmt::format("  g.batch = {}; g.stride_a = {}; g.stride_b = {}; g.stride_c = {};\n", gemmBatches,
                        *aBatch, *bBatch, m * n);
    text += fmt::format("  g.a = {}; g.b = {}; g.c = {};\n", aBase, bBase, cBase);
    text += "  ctx.batch0 = 0;\n  rt->gemm(rt, &g);\n}";
  } else {
    IndexArena arena;
    Index bt = arena.var("bb", batches, 0);
    std::vector<Index> coords = unflattenIndex(arena, bt, batchShape);
    Index aOffset = IndexArena::constant(0), bOffset = IndexArena::constant(0);
    for (size_t d = 0; d < coords.size(); ++d) {
      aOffset = arena.add(aOffset, arena.scale(coords[d], aCoefs[d]));
      bOffset = arena.add(bOffset, arena.scale(coords[d], bCoefs[d]));
    }
    text += fmt::format("  g.batch = 1;\n  for (int64_t bb = 0; bb < {}; ++bb) {{\n", batches);
    text += fmt::format("    g.a = {} + {};\n    g.b = {} + {};\n", aBase, arena.code(aOffset), bBase,
                        arena.code(bOffset));
    text += fmt::format("    g.c = {} + bb * {};\n    ctx.batch0 = bb;\n    rt->gemm(rt, &g);\n  }}\n}}", cBase, m * n);
  }
  out.body.push_back(text);
}

std::string emitChannelPlaneEpilogue(KernelEmitter &e, int stageIndex, KernelText &out, const Shape &y) {
  const Shape spatial(y.begin() + 2, y.end());
  return emitEpilogue(e, stageIndex, out, y[0], y[1], numElements(spatial),
                      [&](IndexArena &arena, const Index &bt, const Index &row, const Index &col) {
                        std::vector<Index> coords{bt, row};
                        for (const Index &c : unflattenIndex(arena, col, spatial))
                          coords.push_back(c);
                        return coords;
                      });
}

void emitConvStage(KernelEmitter &e, int stageIndex, KernelText &out) {
  const Stage &stage = e.plan().stages.at(static_cast<size_t>(stageIndex));
  const ir::Node &conv = *stage.anchor;
  const Shape &x = conv.input(0)->shape(), &w = conv.input(1)->shape(), &y = conv.output()->shape();
  size_t spatial = x.size() - 2;
  bool oneD = spatial == 1;
  std::vector<int64_t> strides = ir::ops::perSpatialDim(conv.attrs(), "strides", spatial, 1, 1);
  std::vector<int64_t> dilations = ir::ops::perSpatialDim(conv.attrs(), "dilations", spatial, 1, 1);
  std::vector<int64_t> pads = ir::ops::spatialPads(conv.attrs(), spatial);
  int64_t groups = conv.attrInt("groups");
  if (numElements(y) == 0)
    return;
  if (w[1] == 0) { // no input channels: every output is an empty sum
    emitLoopStage(e, stageIndex, out, conv.output());
    return;
  }
  int64_t ow = y.back();
  // A bias per output channel and an activation go to conv2d as post ops.
  const std::optional<ContractionPostOps> post = matchPostOps(e, stageIndex, 1);
  std::string epilogue = post ? "NULL" : emitChannelPlaneEpilogue(e, stageIndex, out, y);
  const StridedAccess &xs = stage.anchorOperands[0], &ws = stage.anchorOperands[1];
  // The arguments as the generated call sets them (pointers aside), also what the runtime's
  // Winograd gate reads.
  kiln_conv2d_args shape{};
  shape.n = x[0], shape.c = x[1], shape.h = oneD ? 1 : x[2], shape.w = x.back();
  shape.k = w[0], shape.r = oneD ? 1 : w[2], shape.s = w.back(), shape.oh = oneD ? 1 : y[2], shape.ow = ow;
  shape.stride_h = oneD ? 1 : strides[0], shape.stride_w = strides.back();
  shape.pad_top = oneD ? 0 : pads[0], shape.pad_left = pads[spatial - 1];
  shape.dilation_h = oneD ? 1 : dilations[0], shape.dilation_w = dilations.back(), shape.groups = groups;
  // Weights only this convolution reads, of a layer the runtime computes with Winograd, are
  // transformed once at load rather than on every call (ResNet-50's 3x3 256-channel layers
  // spent ~0.25 ms of ~1.5 on it at one thread).
  const KernelBuffer &weightBuffer = e.plan().buffers.at(static_cast<size_t>(ws.buffer));
  // Every packing at load reads the buffer as plain w[k][c][r][s]: the convolution must read it
  // so (a 1 x 1 kernel's taps step by anything), and nothing else may read it.
  const bool storableWeights = !oneD && ws.offset == 0 && ws.rowMajor(w) && e.isSoleWeightOperand(ws.buffer) &&
                               weightReadOnlyBy(conv) && weightBuffer.type.numElements() == numElements(w);
  // The gates below read the precision: in bf16, the runtime computes GEMM convolutions and
  // F(2x2, 3x3) with stored weights in bf16, and prefers F(2x2, 3x3) in bf16 to F(4x4, 3x3) in
  // f32 (whose transforms would amplify bf16's rounding to ~4%).
  shape.exact = e.exactConvolutions();
  const bool bf16 = !e.exactConvolutions() && e.precision() == ContractionPrecision::Bf16;
  if (bf16)
    shape.precision = KILN_PRECISION_BF16;
  const int winogradTile = e.exactConvolutions() ? 0 : runtime::kernels::convWinogradTile(shape, storableWeights);
  const bool winogradWeights = storableWeights && winogradTile != 0;
  // In bf16, F(2x2, 3x3)'s transformed weights are stored in bf16 too, and its products are
  // bf16's.
  const bool bf16Winograd = bf16 && winogradTile == 2;
  if (winogradWeights)
    out.packedOperands.push_back({weightBuffer.index,
                                  winogradTile == 4 ? KILN_PACK_CONV_WINOGRAD_F4
                                                    : (bf16Winograd ? KILN_PACK_CONV_WINOGRAD_F2_BF16 : KILN_PACK_CONV_WINOGRAD_F2),
                                  w[0], w[1], 0, 0});
  // Likewise weights of a convolution the runtime computes tap by tap (most taps reading
  // padding): laid out tap-major once at load, not gathered from w[k][c][r][s] on every call
  // (DeepLabV3's ASPP: ~0.3 ms per layer, a tenth of it).
  const bool tapMajorWeights = storableWeights && !winogradWeights && runtime::kernels::convSparseTaps(shape);
  if (tapMajorWeights)
    out.packedOperands.push_back({weightBuffer.index, KILN_PACK_CONV_TAP_MAJOR, w[0], w[1], shape.r, shape.s});
  // In bf16, weights of a convolution the runtime computes as a GEMM are stored as bf16 panels
  // at load: no call rounds them again (ResNet-50's 1x1 layers on 7x7 maps spent ~a quarter of
  // their time on it).
  const bool bf16Panels =
      storableWeights && !winogradWeights && !tapMajorWeights && runtime::kernels::convBf16Panels(shape);
  if (bf16Panels)
    out.packedOperands.push_back({weightBuffer.index, KILN_PACK_CONV_BF16_PANELS, w[0], w[1] * shape.r * shape.s,
                                  shape.groups, 0});
  // Likewise weights of a convolution the runtime computes by direct pixel tiles: W^T's panels
  // stored at load, not packed on every call (Inception-v3's 1x7 and 7x1 layers at 17x17: 1 MB
  // of weights each).
  const bool directPanels = storableWeights && !winogradWeights && !tapMajorWeights && !bf16Panels &&
                            runtime::kernels::convDirectPanels(shape);
  if (directPanels)
    out.packedOperands.push_back(
        {weightBuffer.index, KILN_PACK_CONV_DIRECT_PANELS, w[0], w[1] * shape.r * shape.s, 0, 0});
  std::string text = "{\n  kiln_conv2d_args g;\n  memset(&g, 0, sizeof g);\n";
  text += fmt::format("  g.n = {}; g.c = {}; g.h = {}; g.w = {};\n", shape.n, shape.c, shape.h, shape.w);
  text += fmt::format("  g.k = {}; g.r = {}; g.s = {}; g.oh = {}; g.ow = {};\n", shape.k, shape.r, shape.s, shape.oh,
                      shape.ow);
  text += fmt::format("  g.stride_h = {}; g.stride_w = {}; g.pad_top = {}; g.pad_left = {};\n", shape.stride_h,
                      shape.stride_w, shape.pad_top, shape.pad_left);
  text += fmt::format("  g.dilation_h = {}; g.dilation_w = {}; g.groups = {};\n", shape.dilation_h,
                      shape.dilation_w, shape.groups);
  text += fmt::format("  g.x = (const float *){} + {};\n", e.kernelAddress(xs.buffer), xs.offset);
  text += fmt::format("  g.weights = (const float *){} + {};\n", e.kernelAddress(ws.buffer), ws.offset);
  text += fmt::format("  g.y = (float *){};\n", e.kernelAddress(stage.tileBuffer));
  if (winogradWeights)
    text += fmt::format("  g.weights_layout = KILN_CONV_WEIGHTS_WINOGRAD_F{}{};\n", winogradTile,
                        bf16Winograd ? "_BF16" : "");
  if (tapMajorWeights)
    text += "  g.weights_layout = KILN_CONV_WEIGHTS_TAP_MAJOR;\n";
  if (bf16Panels)
    text += "  g.weights_layout = KILN_CONV_WEIGHTS_BF16_PANELS;\n";
  if (directPanels)
    text += "  g.weights_layout = KILN_CONV_WEIGHTS_DIRECT_PANELS;\n";
  if (e.exactConvolutions())
    text += "  g.exact = 1;\n";
  else if (e.precision() == ContractionPrecision::Bf16)
    text += "  g.precision = KILN_PRECISION_BF16;\n";
  if (e.accumulatedAdd().add) {
    // The output was planned over the residual (passes/fusion/AccumulatedOperand.h): conv2d adds onto
    // it, which only the tile being the kernel's result and a pointwise convolution allow.
    if (e.plan().buffers.at(static_cast<size_t>(stage.tileBuffer)).kind != KernelBuffer::Kind::Result ||
        !runtime::kernels::convCanAccumulate(shape))
      fail("codegen: internal error: a convolution planned to accumulate into its residual cannot");
    text += "  g.accumulate = 1;\n";
  }
  if (post)
    text += postOpsArguments(e, *post);
  text += fmt::format("  g.epilogue = {}; g.epilogue_ctx = &ctx;\n  ctx.batch0 = 0;\n  rt->conv2d(rt, &g);\n}}",
                      epilogue);
  out.body.push_back(text);
}

void emitPoolStage(KernelEmitter &e, int stageIndex, KernelText &out) {
  const Stage &stage = e.plan().stages.at(static_cast<size_t>(stageIndex));
  const ir::Node &pool = *stage.anchor;
  const Shape &x = pool.input(0)->shape(), &y = pool.output()->shape();
  size_t spatial = x.size() - 2;
  bool oneD = spatial == 1, isMax = pool.op() == OpKind::MaxPool;
  std::vector<int64_t> kernel = pool.attrInts("kernel");
  if (kernel.size() == 1 && spatial == 2)
    kernel.push_back(kernel[0]);
  std::vector<int64_t> strides = ir::ops::perSpatialDim(pool.attrs(), "strides", spatial, 1, 1);
  std::vector<int64_t> dilations = isMax ? ir::ops::perSpatialDim(pool.attrs(), "dilations", spatial, 1, 1) : std::vector<int64_t>(spatial, 1);
  std::vector<int64_t> pads = ir::ops::spatialPads(pool.attrs(), spatial);
  bool countIncludePad = !isMax && pool.attrInt("count_include_pad") != 0;
  if (numElements(y) == 0)
    return;
  // rt->pool2d knows only the leading pads and takes the padded extent to end at in + pad_begin;
  // with count_include_pad that agrees with kiln's semantics only while no window reaches past
  // either end's padding (asymmetric pads, ceil_mode).
  for (size_t d = 0; countIncludePad && d < spatial; ++d) {
    int64_t lastEnd = (y[2 + d] - 1) * strides[d] - pads[d] + (kernel[d] - 1) * dilations[d] + 1;
    if (lastEnd > x[2 + d] + std::min(pads[d], pads[spatial + d]))
      fail("codegen: op avg_pool with count_include_pad and windows past the trailing padding is not supported "
           "yet (kernel {})",
           e.prefix());
  }
  std::string text = "{\n  kiln_pool2d_args g;\n  memset(&g, 0, sizeof g);\n";
  text += fmt::format("  g.n = {}; g.c = {}; g.h = {}; g.w = {}; g.oh = {}; g.ow = {};\n", x[0], x[1],
                      oneD ? 1 : x[2], x.back(), oneD ? 1 : y[2], y.back());
  text += fmt::format("  g.kernel_h = {}; g.kernel_w = {}; g.stride_h = {}; g.stride_w = {};\n", oneD ? 1 : kernel[0],
                      kernel.back(), oneD ? 1 : strides[0], strides.back());
  text += fmt::format("  g.pad_top = {}; g.pad_left = {}; g.dilation_h = {}; g.dilation_w = {};\n",
                      oneD ? 0 : pads[0], pads[spatial - 1], oneD ? 1 : dilations[0], dilations.back());
  text += fmt::format("  g.is_max = {}; g.count_include_pad = {};\n", isMax ? 1 : 0, countIncludePad ? 1 : 0);
  const StridedAccess &xs = stage.anchorOperands[0];
  const DType dtype = pool.output()->dtype();
  if (dtype == DType::F32) {
    text += fmt::format("  g.x = (const float *){} + {};\n", e.kernelAddress(xs.buffer), xs.offset);
    text += fmt::format("  g.y = (float *){};\n", e.kernelAddress(stage.tileBuffer));
  } else { // u8 or s8 max pooling (needsGenericStage sends the others to loops)
    text += fmt::format("  g.element = {};\n", dtype == DType::U8 ? "KILN_POOL_U8" : "KILN_POOL_S8");
    text += fmt::format("  g.x_bytes = (const uint8_t *){} + {};\n", e.kernelAddress(xs.buffer), xs.offset);
    text += fmt::format("  g.y_bytes = {};\n", e.kernelAddress(stage.tileBuffer));
  }
  text += "  rt->pool2d(rt, &g);\n}";
  out.body.push_back(text);
}

} // namespace kiln::codegen
