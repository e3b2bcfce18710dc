// ConvTranspose stages (codegen/GenericContraction.h): f32 conv_transpose as GEMM + col2im.
//
// conv_transpose scatters: input position i and kernel tap t feed output i*stride + t*dilation -
// padBegin, with weight w[c][m][t] (w is [C, Cout/groups, kernel...]). Per image and group the
// products of all taps are one matrix product,
//   cols[m*K + t][i] = sum_c w[c][m*K + t] * x[c][i]      (Wᵀ·x, K kernel taps, i the input plane)
// which rt->gemm computes at library speed (on the weights transposed per group). A generated
// col2im then adds every tap's row of the columns into its output plane at the tap's offset,
// with the tap's valid input range computed once so the innermost loop has no bounds checks
// (contiguous for stride 1). While a plane is still in cache the fused epilogue (bias,
// activation) runs on it: the plane is the tile (batch n, row co, one row of outPlane columns)
// that a conv epilogue would see. No two threads ever write one output plane.
//
// rt->gemm reads a transposed A several times slower than a row-major one (41 against 171
// GFLOP/s for the columns of a 64-channel 56x56 image), so the weights are first transposed
// per group into wt[g][m*K + t][c] (as large as the weights, a fraction of the work).
//
// The columns are K times the input, so images go through in chunks whose columns stay under
// kMaxColumnFloats: one parallel gemm per chunk (a batch over its images for one group, over
// the groups per image otherwise), then the parallel col2im over the chunk's planes. (Blocks of
// a few output channels whose columns stay in L2, each its own single-threaded gemm and col2im,
// measured no faster: the repeated packing of x ate the cache savings.)
//
// Special cases: a 1x1 kernel with unit strides, no padding and one group needs no col2im at
// all (y[n] = Wᵀ·x[n] is one batched gemm with the epilogue on its tiles); with at most
// kMaxScatterChannels input channels per group (depthwise) the gemm's inner dim is too short to
// pay for the columns: each plane is scattered straight from x, tap by tap (3.7 against about
// 13 GFLOP/s for a depthwise 64-channel 56x56 batch of 8).
#include <algorithm>

#include "codegen/GenericContraction.h"
#include "core/Error.h"

namespace kiln::codegen {

namespace {

// 16 MiB of columns per chunk of images: below glibc's largest mmap threshold (32 MiB), so a
// freed chunk is reused by the next call instead of faulting in fresh pages every time.
constexpr int64_t kMaxColumnFloats = int64_t{4} << 20;
constexpr int64_t kMaxScatterChannels = 4;

std::string floatPointer(KernelEmitter &e, const StridedAccess &access) {
  return fmt::format("((const float *){} + {})", e.kernelAddress(access.buffer), access.offset);
}

// Statements adding every tap of one source into plane `yp`: `source` is the tap's input plane
// (an expression of `tap`, the flat tap index), `factor` multiplies each element ("" or "wt * "
// with `wt` from `weight`, also an expression of `tap`).
std::string tapLoops(const WindowGeometry &g, const std::string &range, const std::string &source,
                     const std::string &weight, const std::string &indent) {
  std::string text = fmt::format("{0}for (int64_t kd = 0; kd < {1}; ++kd)\n{0}for (int64_t kh = 0; kh < {2}; ++kh)\n"
                                 "{0}for (int64_t kw = 0; kw < {3}; ++kw) {{\n",
                                 indent, g.kernel[0], g.kernel[1], g.kernel[2]);
  text += fmt::format("{}  const int64_t tap = (kd * {} + kh) * {} + kw;\n", indent, g.kernel[1], g.kernel[2]);
  text += fmt::format("{}  const float *__restrict src = {};\n", indent, source);
  if (!weight.empty())
    text += fmt::format("{}  const float wt = {};\n", indent, weight);
  const char *names[3] = {"d", "h", "w"}, *tapNames[3] = {"kd", "kh", "kw"};
  for (int d = 0; d < WindowGeometry::kDims; ++d) {
    text += fmt::format("{0}  const int64_t off{1} = {2} * {3} - {4};\n{0}  int64_t {1}0, {1}1;\n", indent, names[d],
                        tapNames[d], g.dilation[d], g.padBegin[d]);
    text += fmt::format("{}  {}(off{}, {}, {}, {}, &{}0, &{}1);\n", indent, range, names[d], g.stride[d], g.out[d],
                        g.in[d], names[d], names[d]);
  }
  text += fmt::format("{}  for (int64_t pd = d0; pd < d1; ++pd) {{\n", indent);
  text += fmt::format("{}    const int64_t sd = pd * {} + offd;\n", indent, g.stride[0]);
  text += fmt::format("{}    for (int64_t ph = h0; ph < h1; ++ph) {{\n", indent);
  text += fmt::format("{}      const int64_t sh = ph * {} + offh;\n", indent, g.stride[1]);
  text += fmt::format("{}      const float *__restrict xrow = src + (pd * {} + ph) * {};\n", indent, g.in[1], g.in[2]);
  text += fmt::format("{}      float *__restrict yrow = yp + (sd * {} + sh) * {} + offw;\n", indent, g.out[1], g.out[2]);
  text += fmt::format("{}      for (int64_t pw = w0; pw < w1; ++pw) yrow[pw * {}] += {}xrow[pw];\n", indent,
                      g.stride[2], weight.empty() ? "" : "wt * ");
  text += fmt::format("{0}    }}\n{0}  }}\n{0}}}\n", indent);
  return text;
}

// Zeroes plane `yp` (output image n, channel co).
std::string zeroPlane(const WindowGeometry &g, const std::string &indent) {
  return fmt::format("{0}float *__restrict yp = a->y + (n * {1} + co) * {2};\n"
                     "{0}for (int64_t q = 0; q < {2}; ++q) yp[q] = 0.0f;\n",
                     indent, g.outChannels, g.outPlane());
}

std::string callEpilogue(const WindowGeometry &g, const std::string &epilogue, const std::string &indent) {
  if (epilogue == "NULL")
    return "";
  return fmt::format("{}{}((void *)a->ctx, yp, {}, n, co, 0, 1, {});\n", indent, epilogue, g.outPlane(), g.outPlane());
}

// Over planes p = (image - image0) * Cout + co: from the chunk's columns (`fromColumns`), or
// scattered from x and the weights.
std::string planeFunction(const WindowGeometry &g, const std::string &fn, const std::string &args,
                          const std::string &range, const std::string &epilogue, bool fromColumns) {
  int64_t taps = g.kernelSize();
  int64_t inPerGroup = g.inChannels / g.groups, outPerGroup = g.outChannels / g.groups;
  std::string text = fmt::format("static void {}(void *vargs, int64_t begin, int64_t end) {{\n", fn);
  text += fmt::format("  const {0} *a = (const {0} *)vargs;\n", args);
  text += "  for (int64_t p = begin; p < end; ++p) {\n";
  text += fmt::format("    const int64_t n = a->image0 + p / {0}, co = p % {0};\n", g.outChannels);
  text += zeroPlane(g, "    ");
  if (fromColumns) {
    text += fmt::format("    const float *__restrict cp = a->cols + p * {};\n", taps * g.inPlane());
    text += tapLoops(g, range, fmt::format("cp + tap * {}", g.inPlane()), "", "    ");
  } else {
    text += fmt::format("    const int64_t grp = co / {0}, m = co % {0};\n", outPerGroup);
    text += fmt::format("    for (int64_t cl = 0; cl < {}; ++cl) {{\n", inPerGroup);
    text += fmt::format("      const float *__restrict xp = a->x + (n * {} + grp * {} + cl) * {};\n", g.inChannels,
                        inPerGroup, g.inPlane());
    text += fmt::format("      const float *wk = a->w + ((grp * {} + cl) * {} + m) * {};\n", inPerGroup, outPerGroup,
                        taps);
    text += tapLoops(g, range, "xp", "wk[tap]", "      ");
    text += "    }\n";
  }
  text += callEpilogue(g, epilogue, "    ");
  text += "  }\n}\n\n";
  return text;
}

} // namespace

void emitConvTransposeStage(KernelEmitter &e, int stageIndex, KernelText &out) {
  const Stage &stage = e.plan().stages.at(static_cast<size_t>(stageIndex));
  const ir::Node &node = *stage.anchor;
  const Shape &xShape = node.input(0)->shape(), &yShape = node.output()->shape();
  if (numElements(yShape) == 0)
    return;
  if (numElements(xShape) == 0) { // no input channels or positions: every output is an empty sum
    emitLoopStage(e, stageIndex, out, node.output());
    return;
  }
  WindowGeometry g = windowGeometry(node);
  int64_t groups = g.groups, inPerGroup = g.inChannels / groups, outPerGroup = g.outChannels / groups;
  int64_t taps = g.kernelSize(), inPlane = g.inPlane(), outPlane = g.outPlane();
  std::string epilogue = emitChannelPlaneEpilogue(e, stageIndex, out, yShape);
  std::string x = floatPointer(e, stage.anchorOperands[0]), w = floatPointer(e, stage.anchorOperands[1]);
  std::string y = fmt::format("(float *){}", e.kernelAddress(stage.tileBuffer));
  bool direct = taps == 1 && groups == 1;
  for (int d = 0; d < WindowGeometry::kDims; ++d)
    direct = direct && g.stride[d] == 1 && g.padBegin[d] == 0 && g.out[d] == g.in[d];
  bool scatter = inPerGroup <= kMaxScatterChannels && !direct;

  std::string args = fmt::format("{}_s{}_args", e.prefix(), stageIndex);
  std::string planes = fmt::format("{}_s{}_planes", e.prefix(), stageIndex);
  std::string range = fmt::format("{}_s{}_range", e.prefix(), stageIndex);
  out.functions += fmt::format("struct {} {{\n  const kiln_rt *rt;\n  const {} *ctx;\n  const float *cols, *x, *w, *wt;\n"
                               "  float *y;\n  int64_t image0;\n}};\n\n",
                               args, e.contextType());
  if (!direct) {
    out.functions += stridedRangeFunction(range);
    out.functions += planeFunction(g, planes, args, range, epilogue, !scatter);
  }
  int64_t planeWork = taps * std::max(inPlane, outPlane) * (scatter ? inPerGroup : 1);
  auto runPlanes = [&](const std::string &count) {
    return fmt::format("if ({0} * {1} < {2}) {3}(&args, 0, {0});\n  else rt->parallel_for(rt, {0}, 1, {3}, &args);\n",
                       count, planeWork, kMinParallelElements, planes);
  };
  std::string text = fmt::format("{{\n  ctx.batch0 = 0;\n  {} args;\n  memset(&args, 0, sizeof args);\n", args);
  text += fmt::format("  args.rt = rt; args.ctx = &ctx; args.x = {}; args.w = {}; args.y = {};\n", x, w, y);
  if (scatter) {
    text += "  " + runPlanes(std::to_string(g.batch * g.outChannels)) + "}";
    out.body.push_back(text);
    return;
  }

  // wt[grp][j][c] = w[grp * inPerGroup + c][j] for j < outPerGroup * taps.
  int64_t rowLength = outPerGroup * taps, weightFloats = g.inChannels * rowLength;
  text += fmt::format("  float *wt = (float *)aligned_alloc(64, {});\n  if (!wt) abort();\n  args.wt = wt;\n",
                      (weightFloats * 4 + 63) / 64 * 64);
  // In 16 x 16 blocks, whose source and destination lines stay in L1. Element by element, each
  // store landed inPerGroup floats from the last, on a new line and often a new page: ResNet-18's
  // input gradient of its 256 -> 512 stride-2 layer at batch 8 took 13.3 ms on one core, 7.3 in
  // blocks (ConvTransposeTest's ThroughputOnResNetShapes).
  text += fmt::format("  for (int64_t grp = 0; grp < {}; ++grp)\n    for (int64_t c0 = 0; c0 < {}; c0 += 16)\n", groups,
                      inPerGroup);
  text += fmt::format("      for (int64_t j0 = 0; j0 < {0}; j0 += 16)\n        for (int64_t c = c0; c < (c0 + 16 < {1} ? c0 + 16 : {1}); ++c)\n"
                      "          for (int64_t j = j0; j < (j0 + 16 < {0} ? j0 + 16 : {0}); ++j)\n"
                      "            wt[(grp * {0} + j) * {1} + c] = {2}[(grp * {1} + c) * {0} + j];\n",
                      rowLength, inPerGroup, w);
  text += "  kiln_gemm_args g;\n  memset(&g, 0, sizeof g);\n";
  if (direct) {
    text += fmt::format("  g.m = {}; g.n = {}; g.k = {}; g.batch = {};\n", g.outChannels, inPlane, g.inChannels, g.batch);
    text += fmt::format("  g.a = wt; g.lda = {}; g.stride_a = 0;\n", g.inChannels);
    text += fmt::format("  g.b = {}; g.ldb = {}; g.stride_b = {};\n", x, inPlane, g.inChannels * inPlane);
    text += fmt::format("  g.c = {}; g.ldc = {}; g.stride_c = {};\n", y, inPlane, g.outChannels * inPlane);
    text += fmt::format("  g.epilogue = {}; g.epilogue_ctx = &ctx;\n  rt->gemm(rt, &g);\n  free(wt);\n}}", epilogue);
    out.body.push_back(text);
    return;
  }

  int64_t columnsPerImage = g.outChannels * taps * inPlane;
  int64_t chunk = std::clamp<int64_t>(kMaxColumnFloats / std::max<int64_t>(columnsPerImage, 1), 1, g.batch);
  text += fmt::format("  float *cols = (float *)aligned_alloc(64, {});\n  if (!cols) abort();\n",
                      (chunk * columnsPerImage * 4 + 63) / 64 * 64);
  text += fmt::format("  g.m = {}; g.n = {}; g.k = {};\n", outPerGroup * taps, inPlane, inPerGroup);
  text += fmt::format("  g.lda = {}; g.ldb = {}; g.ldc = {};\n  args.cols = cols;\n", inPerGroup, inPlane, inPlane);
  text += fmt::format("  for (int64_t n0 = 0; n0 < {0}; n0 += {1}) {{\n", g.batch, chunk);
  text += fmt::format("    const int64_t images = {0} - n0 < {1} ? {0} - n0 : {1};\n", g.batch, chunk);
  if (groups == 1) {
    text += fmt::format("    g.batch = images; g.a = wt; g.stride_a = 0;\n");
    text += fmt::format("    g.b = {} + n0 * {}; g.stride_b = {};\n", x, g.inChannels * inPlane, g.inChannels * inPlane);
    text += fmt::format("    g.c = cols; g.stride_c = {};\n    rt->gemm(rt, &g);\n", columnsPerImage);
  } else {
    text += "    for (int64_t i = 0; i < images; ++i) {\n";
    text += fmt::format("      g.batch = {}; g.a = wt; g.stride_a = {};\n", groups, inPerGroup * outPerGroup * taps);
    text += fmt::format("      g.b = {} + (n0 + i) * {}; g.stride_b = {};\n", x, g.inChannels * inPlane, inPerGroup * inPlane);
    text += fmt::format("      g.c = cols + i * {}; g.stride_c = {};\n      rt->gemm(rt, &g);\n    }}\n", columnsPerImage,
                        outPerGroup * taps * inPlane);
  }
  text += "    args.image0 = n0;\n    " + runPlanes(fmt::format("images * {}", g.outChannels));
  text += "  }\n  free(cols);\n  free(wt);\n}";
  out.body.push_back(text);
}

} // namespace kiln::codegen
