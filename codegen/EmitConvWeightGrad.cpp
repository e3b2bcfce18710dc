// ConvWeightGrad stages: conv_weight_grad (ir/ops/ConvGrad.cpp), conv's weight gradient
//   gw[co][ci][t] = sum_n sum_o g[n][co][o] * x[n][grp*C/groups + ci][o*stride + t*dilation - padBegin],
// lowered like the forward conv: im2col of x, then one matrix product per group.
//
// f32: per chunk of images, a generated im2col writes cols[c*K + t][i*P + o] (K kernel taps,
// P = output plane, i the image within the chunk; zero where the tap reads padding), rows
// contiguous in o as the forward conv's columns are. The chunk's images thus sit side by side
// along the GEMM's inner dim, and with g copied into the same order, gbuf[co][i*P + o], one
// rt->gemm per chunk (a batch over the groups) computes
//   gw_grp = gbuf_grp (Cout/groups x images*P) * cols_grpᵀ (images*P x C/groups*K)
// reading gbuf in place and cols transposed (its packing transposes 16x16 blocks in registers).
// The GEMM ABI has no beta, so with several chunks every chunk after the first goes into a
// scratch matrix that is added to gw (gw is small next to the columns). A chunk of one image
// reads g in place.
// The columns are K times x, so chunks keep them under kMaxColumnFloats, as conv_transpose does.
//
// f32 with one group, no depth (2-D and 1-D convolutions), more than one tap and 16 or more
// channels on one side calls
// rt->conv2d_weight_grad instead, which transposes x and g to channels-last once and
// accumulates each tap's outer products in registers (runtime/kernels/Conv2dWeightGrad.cpp):
// no columns, no packing. In ResNet-18's training step (batch 8, 1 thread) that took the weight
// gradients from 223 to 177 ms; the 64-channel 56x56 layers from 17 to 11 ms each. A 1x1
// kernel's columns are x itself (strided), so the GEMM path keeps those (0.7 against 1.1 ms),
// and so it does when neither channel count fills a 16-lane vector (LeNet-5's first layer,
// 1 -> 6 channels: 0.8 against 1.4 ms).
//
// Other float dtypes (f64, for gradient checks): a loop nest in double, parallel over output
// channels, in the reference evaluator's order (image, channel, tap), so f64 results match it.
#include <algorithm>

#include "codegen/GenericContraction.h"
#include "codegen/ScalarOps.h"
#include "core/Error.h"

namespace kiln::codegen {

namespace {

// 16 MiB of columns per chunk: below glibc's largest mmap threshold, so a freed chunk is reused.
constexpr int64_t kMaxColumnFloats = int64_t{4} << 20;

// The node's geometry lifted to three spatial dims: in = x's plane, out = g's plane, kernel from
// weight_shape (the verifier already checked that they agree).
WindowGeometry weightGradGeometry(const ir::Node &node) {
  const Shape &ws = node.output()->shape();
  return liftedWindow(node, node.input(0)->shape(), node.input(1)->shape(), std::vector<int64_t>(ws.begin() + 2, ws.end()),
                      node.attrInt("groups"));
}

std::string typedPointer(KernelEmitter &e, const StridedAccess &access, const std::string &type) {
  return fmt::format("((const {} *){} + {})", type, e.kernelAddress(access.buffer), access.offset);
}

// Loops over the kernel taps declaring `tap` and, per lifted dim, off<d> and the valid output
// range [<d>0, <d>1) of the tap (positions whose input o*stride + off lies inside x).
std::string openTapLoops(const WindowGeometry &g, const std::string &range, const std::string &indent) {
  std::string text = fmt::format("{0}for (int64_t kd = 0; kd < {1}; ++kd)\n{0}for (int64_t kh = 0; kh < {2}; ++kh)\n"
                                 "{0}for (int64_t kw = 0; kw < {3}; ++kw) {{\n",
                                 indent, g.kernel[0], g.kernel[1], g.kernel[2]);
  text += fmt::format("{}  const int64_t tap = (kd * {} + kh) * {} + kw;\n", indent, g.kernel[1], g.kernel[2]);
  const char *names[3] = {"d", "h", "w"}, *tapNames[3] = {"kd", "kh", "kw"};
  for (int d = 0; d < WindowGeometry::kDims; ++d) {
    text += fmt::format("{0}  const int64_t off{1} = {2} * {3} - {4};\n{0}  int64_t {1}0, {1}1;\n", indent, names[d],
                        tapNames[d], g.dilation[d], g.padBegin[d]);
    text += fmt::format("{}  {}(off{}, {}, {}, {}, &{}0, &{}1);\n", indent, range, names[d], g.stride[d], g.in[d],
                        g.out[d], names[d], names[d]);
  }
  return text;
}

// im2col over items q = i * C + c of the chunk starting at image a->image0.
std::string im2colFunction(const WindowGeometry &g, const std::string &fn, const std::string &args,
                           const std::string &range) {
  int64_t taps = g.kernelSize(), outPlane = g.outPlane();
  std::string text = fmt::format("static void {}(void *vargs, int64_t begin, int64_t end) {{\n", fn);
  text += fmt::format("  const {0} *a = (const {0} *)vargs;\n  const int64_t kld = a->images * {1};\n", args, outPlane);
  text += "  for (int64_t q = begin; q < end; ++q) {\n";
  text += fmt::format("    const int64_t i = q / {0}, c = q % {0};\n", g.inChannels);
  text += fmt::format("    const float *__restrict xp = a->x + ((a->image0 + i) * {} + c) * {};\n", g.inChannels,
                      g.inPlane());
  text += openTapLoops(g, range, "    ");
  text += fmt::format("      float *__restrict row = a->cols + (c * {} + tap) * kld + i * {};\n", taps, outPlane);
  text += fmt::format("      for (int64_t pd = 0; pd < {}; ++pd)\n", g.out[0]);
  text += fmt::format("        for (int64_t ph = 0; ph < {}; ++ph) {{\n", g.out[1]);
  text += fmt::format("          float *__restrict dst = row + (pd * {} + ph) * {};\n", g.out[1], g.out[2]);
  text += "          int64_t pw = 0;\n";
  text += "          if (pd >= d0 && pd < d1 && ph >= h0 && ph < h1) {\n";
  text += fmt::format("            const int64_t base = ((pd * {} + offd) * {} + ph * {} + offh) * {} + offw;\n",
                      g.stride[0], g.in[1], g.stride[1], g.in[2]);
  text += "            for (; pw < w0; ++pw) dst[pw] = 0.0f;\n";
  text += fmt::format("            for (; pw < w1; ++pw) dst[pw] = xp[base + pw * {}];\n", g.stride[2]);
  text += "          }\n";
  text += fmt::format("          for (; pw < {}; ++pw) dst[pw] = 0.0f;\n", g.out[2]);
  text += "        }\n    }\n  }\n}\n\n";
  return text;
}

// f32: the chunked im2col + GEMM described at the top.
void emitGemmWeightGrad(KernelEmitter &e, const Stage &stage, int stageIndex, const WindowGeometry &g,
                        KernelText &out) {
  int64_t groups = g.groups, taps = g.kernelSize(), outPlane = g.outPlane();
  int64_t outPerGroup = g.outChannels / groups, rowsPerGroup = g.inChannels / groups * taps;
  int64_t weightFloats = g.outChannels * rowsPerGroup;
  int64_t columnsPerImage = g.inChannels * taps * outPlane;
  int64_t chunk = std::clamp<int64_t>(kMaxColumnFloats / std::max<int64_t>(columnsPerImage, 1), 1, g.batch);
  bool chunked = chunk < g.batch;
  auto bytes = [](int64_t floats) { return (floats * 4 + 63) / 64 * 64; };

  std::string args = fmt::format("{}_s{}_args", e.prefix(), stageIndex);
  std::string im2col = fmt::format("{}_s{}_im2col", e.prefix(), stageIndex);
  std::string range = fmt::format("{}_s{}_range", e.prefix(), stageIndex);
  out.functions +=
      fmt::format("struct {} {{\n  const float *x;\n  float *cols;\n  int64_t image0, images;\n}};\n\n", args);
  out.functions += stridedRangeFunction(range);
  out.functions += im2colFunction(g, im2col, args, range);

  std::string x = typedPointer(e, stage.anchorOperands[0], "float");
  std::string gr = typedPointer(e, stage.anchorOperands[1], "float");
  std::string text = fmt::format("{{\n  float *y = (float *){};\n  const float *gr = {};\n",
                                 e.kernelAddress(stage.tileBuffer), gr);
  text += fmt::format("  {} args;\n  memset(&args, 0, sizeof args);\n  args.x = {};\n", args, x);
  text += fmt::format("  float *cols = (float *)aligned_alloc(64, {});\n  if (!cols) abort();\n  args.cols = cols;\n",
                      bytes(chunk * columnsPerImage));
  if (chunk > 1)
    text += fmt::format("  float *gbuf = (float *)aligned_alloc(64, {});\n  if (!gbuf) abort();\n",
                        bytes(chunk * g.outChannels * outPlane));
  if (chunked)
    text += fmt::format("  float *partial = (float *)aligned_alloc(64, {});\n  if (!partial) abort();\n",
                        bytes(weightFloats));
  text += "  kiln_gemm_args gm;\n  memset(&gm, 0, sizeof gm);\n";
  text += fmt::format("  gm.m = {}; gm.n = {}; gm.batch = {}; gm.trans_b = 1;\n", outPerGroup, rowsPerGroup, groups);
  text += fmt::format("  gm.ldc = {}; gm.stride_c = {};\n", rowsPerGroup, outPerGroup * rowsPerGroup);
  text += fmt::format("  for (int64_t n0 = 0; n0 < {0}; n0 += {1}) {{\n", g.batch, chunk);
  text += fmt::format("    const int64_t images = {0} - n0 < {1} ? {0} - n0 : {1};\n", g.batch, chunk);
  text += fmt::format("    const int64_t kld = images * {};\n", outPlane);
  text += "    args.image0 = n0; args.images = images;\n";
  text += fmt::format("    if (images * {0} < {1}) {2}(&args, 0, images * {3});\n"
                      "    else rt->parallel_for(rt, images * {3}, 1, {2}, &args);\n",
                      columnsPerImage, kMinParallelElements, im2col, g.inChannels);
  text += fmt::format("    const float *ga = gr + n0 * {};\n", g.outChannels * outPlane);
  if (chunk > 1) {
    text += "    if (images > 1) {\n";
    text += fmt::format("      for (int64_t co = 0; co < {}; ++co)\n", g.outChannels);
    text += "        for (int64_t i = 0; i < images; ++i)\n";
    text += fmt::format("          memcpy(gbuf + co * kld + i * {0}, gr + ((n0 + i) * {1} + co) * {0}, {2});\n",
                        outPlane, g.outChannels, outPlane * 4);
    text += "      ga = gbuf;\n    }\n";
  }
  text += fmt::format("    gm.k = kld; gm.a = ga; gm.lda = kld; gm.stride_a = {} * kld;\n", outPerGroup);
  text += fmt::format("    gm.b = cols; gm.ldb = kld; gm.stride_b = {} * kld;\n", rowsPerGroup);
  text += fmt::format("    gm.c = {};\n    rt->gemm(rt, &gm);\n", chunked ? "n0 == 0 ? y : partial" : "y");
  if (chunked)
    text += fmt::format("    if (n0 != 0)\n      for (int64_t q = 0; q < {}; ++q) y[q] += partial[q];\n", weightFloats);
  text += "  }\n  free(cols);\n";
  if (chunk > 1)
    text += "  free(gbuf);\n";
  if (chunked)
    text += "  free(partial);\n";
  text += "}";
  out.body.push_back(text);
}

// f32, one group, depth 1: the precompiled direct kernel.
void emitRuntimeWeightGrad(KernelEmitter &e, const Stage &stage, const WindowGeometry &g, KernelText &out) {
  std::string text = "{\n  kiln_conv2d_weight_grad_args g;\n  memset(&g, 0, sizeof g);\n";
  text += fmt::format("  g.n = {}; g.c = {}; g.h = {}; g.w = {};\n", g.batch, g.inChannels, g.in[1], g.in[2]);
  text += fmt::format("  g.k = {}; g.r = {}; g.s = {}; g.oh = {}; g.ow = {};\n", g.outChannels, g.kernel[1],
                      g.kernel[2], g.out[1], g.out[2]);
  text += fmt::format("  g.stride_h = {}; g.stride_w = {}; g.pad_top = {}; g.pad_left = {};\n", g.stride[1],
                      g.stride[2], g.padBegin[1], g.padBegin[2]);
  text += fmt::format("  g.dilation_h = {}; g.dilation_w = {};\n", g.dilation[1], g.dilation[2]);
  text += fmt::format("  g.x = {};\n  g.dy = {};\n", typedPointer(e, stage.anchorOperands[0], "float"),
                      typedPointer(e, stage.anchorOperands[1], "float"));
  text += fmt::format("  g.dw = (float *){};\n  rt->conv2d_weight_grad(rt, &g);\n}}", e.kernelAddress(stage.tileBuffer));
  out.body.push_back(text);
}

// Other float dtypes: per output channel, the reference's loops in double.
void emitLoopWeightGrad(KernelEmitter &e, const Stage &stage, int stageIndex, const WindowGeometry &g,
                        KernelText &out) {
  std::string type = cType(stage.anchor->output()->dtype());
  int64_t inPerGroup = g.inChannels / g.groups, outPerGroup = g.outChannels / g.groups, taps = g.kernelSize();
  std::string fn = fmt::format("{}_s{}_channels", e.prefix(), stageIndex);
  std::string range = fmt::format("{}_s{}_range", e.prefix(), stageIndex);
  std::string args = fmt::format("{}_s{}_args", e.prefix(), stageIndex);
  out.functions += fmt::format("struct {0} {{\n  const {1} *x, *g;\n  {1} *y;\n}};\n\n", args, type);
  out.functions += stridedRangeFunction(range);
  std::string text = fmt::format("static void {}(void *vargs, int64_t begin, int64_t end) {{\n", fn);
  text += fmt::format("  const {0} *a = (const {0} *)vargs;\n", args);
  text += "  for (int64_t co = begin; co < end; ++co) {\n";
  text += fmt::format("    const int64_t grp = co / {};\n", outPerGroup);
  text += fmt::format("    for (int64_t q = 0; q < {0}; ++q) a->y[co * {0} + q] = 0;\n", inPerGroup * taps);
  text += fmt::format("    for (int64_t n = 0; n < {}; ++n)\n", g.batch);
  text += fmt::format("    for (int64_t ci = 0; ci < {}; ++ci) {{\n", inPerGroup);
  text += fmt::format("      const {} *xp = a->x + (n * {} + grp * {} + ci) * {};\n", type, g.inChannels, inPerGroup,
                      g.inPlane());
  text += fmt::format("      const {} *gp = a->g + (n * {} + co) * {};\n", type, g.outChannels, g.outPlane());
  text += openTapLoops(g, range, "      ");
  text += "        double sum = 0.0;\n";
  text += "        for (int64_t pd = d0; pd < d1; ++pd)\n          for (int64_t ph = h0; ph < h1; ++ph) {\n";
  text += fmt::format("            const int64_t base = ((pd * {} + offd) * {} + ph * {} + offh) * {} + offw;\n",
                      g.stride[0], g.in[1], g.stride[1], g.in[2]);
  text += fmt::format("            const {} *grow = gp + (pd * {} + ph) * {};\n", type, g.out[1], g.out[2]);
  text += "            for (int64_t pw = w0; pw < w1; ++pw)\n";
  text += fmt::format("              sum += (double)grow[pw] * (double)xp[base + pw * {}];\n", g.stride[2]);
  text += "          }\n";
  text += fmt::format("        a->y[(co * {} + ci) * {} + tap] += ({})sum;\n", inPerGroup, taps, type);
  text += "      }\n    }\n  }\n}\n\n";
  out.functions += text;
  std::string body = fmt::format("{{\n  {} args;\n  args.x = {};\n  args.g = {};\n", args,
                                 typedPointer(e, stage.anchorOperands[0], type),
                                 typedPointer(e, stage.anchorOperands[1], type));
  body += fmt::format("  args.y = ({} *){};\n", type, e.kernelAddress(stage.tileBuffer));
  int64_t channelWork = g.batch * inPerGroup * taps * g.outPlane();
  body += fmt::format("  if ({0} * {1} < {2}) {3}(&args, 0, {0});\n"
                      "  else rt->parallel_for(rt, {0}, 1, {3}, &args);\n}}",
                      g.outChannels, channelWork, kMinParallelElements, fn);
  out.body.push_back(body);
}

} // namespace

void emitConvWeightGradStage(KernelEmitter &e, int stageIndex, KernelText &out) {
  const Stage &stage = e.plan().stages.at(static_cast<size_t>(stageIndex));
  const ir::Node &node = *stage.anchor;
  for (const Store &store : stage.stores)
    if (store.value != node.output() || store.buffer != stage.tileBuffer)
      throw StrategyMismatch("a conv_weight_grad stage stores only its own value");
  const Shape &ws = node.output()->shape();
  if (numElements(ws) == 0)
    return;
  DType dtype = node.output()->dtype();
  if (numElements(node.input(0)->shape()) == 0 || numElements(node.input(1)->shape()) == 0) {
    // No images (or no positions): every weight is an empty sum.
    out.body.push_back(fmt::format("memset({}, 0, {});", e.kernelAddress(stage.tileBuffer),
                                   numElements(ws) * static_cast<int64_t>(dtypeSize(dtype))));
    return;
  }
  WindowGeometry g = weightGradGeometry(node);
  bool planar = g.in[0] == 1 && g.out[0] == 1 && g.kernel[0] == 1 && g.padBegin[0] == 0;
  bool fillsVectors = std::max(g.inChannels, g.outChannels) >= 16;
  if (dtype == DType::F32 && g.groups == 1 && planar && g.kernelSize() > 1 && fillsVectors)
    emitRuntimeWeightGrad(e, stage, g, out);
  else if (dtype == DType::F32)
    emitGemmWeightGrad(e, stage, stageIndex, g, out);
  else
    emitLoopWeightGrad(e, stage, stageIndex, g, out);
}

} // namespace kiln::codegen
