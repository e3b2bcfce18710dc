// Generic stages (codegen/GenericContraction.h): matmul, conv, conv_transpose and pooling as
// generated loop nests over contiguous operands, for the dtypes and attributes the runtime's f32
// library kernels do not take. Einsum lives in EmitEinsum.cpp.
//
// Numerics follow the reference evaluator (ir/ops/Contraction.cpp, Pooling.cpp): the same
// summation order (matmul i-k-j, conv channel by channel and tap by tap), f64 accumulating in
// double, integers in wrapping 64-bit arithmetic narrowed to their width at every step (the low
// bits of a wrapping sum do not depend on when it is narrowed). Parallel over output rows
// (matmul) or output planes (conv family, pooling): no two threads write one element.
#include <algorithm>

#include "codegen/GenericContraction.h"
#include "codegen/ScalarOps.h"
#include "core/Error.h"
#include "ir/ops/Window.h"

namespace kiln::codegen {

using ir::OpKind;

void emitEinsumStage(KernelEmitter &emitter, int stage, KernelText &out); // EmitEinsum.cpp

namespace {

bool isPool(OpKind op) { return op == OpKind::MaxPool || op == OpKind::AvgPool; }

// rt->pool2d knows only the leading pads: with count_include_pad it agrees with kiln's
// semantics only while no window reaches past the trailing padding (see EmitContraction.cpp).
bool poolNeedsTrailingPads(const ir::Node &pool) {
  if (pool.op() != OpKind::AvgPool || pool.attrInt("count_include_pad") == 0)
    return false;
  WindowGeometry g = windowGeometry(pool);
  for (int d = 0; d < WindowGeometry::kDims; ++d) {
    int64_t lastEnd = (g.out[d] - 1) * g.stride[d] - g.padBegin[d] + (g.kernel[d] - 1) * g.dilation[d] + 1;
    if (lastEnd > g.in[d] + std::min(g.padBegin[d], g.padEnd[d]))
      return true;
  }
  return false;
}

// `acc += a * b` on values of `dtype`: wrapping for integers.
std::string multiplyAdd(DType dtype, const std::string &acc, const std::string &a, const std::string &b) {
  if (isFloat(dtype))
    return fmt::format("{} += {} * {};", acc, a, b);
  return fmt::format("{0} = ({1})((uint64_t){0} + (uint64_t){2} * (uint64_t){3});", acc, cType(dtype), a, b);
}

std::string operandPointer(KernelEmitter &e, const StridedAccess &access) {
  return fmt::format("({} + {})", e.pointer(access.buffer), access.offset);
}

// Wraps `body` (the lines of one loop over [begin, end)) into a row function and runs it.
void finishRowFunction(KernelEmitter &e, int stageIndex, KernelText &out, const std::string &suffix,
                       const std::string &body, int64_t rows, int64_t rowWork) {
  std::string fn = fmt::format("{}_s{}_{}", e.prefix(), stageIndex, suffix);
  e.line(body);
  out.functions += fmt::format("static void {}(void *vctx, int64_t begin, int64_t end) {{\n{}}}\n\n", fn,
                               e.endFunction());
  out.body.push_back(runRows(fn, rows, rowWork));
}

void emitGenericMatMul(KernelEmitter &e, int stageIndex, KernelText &out) {
  const Stage &stage = e.plan().stages.at(static_cast<size_t>(stageIndex));
  const ir::Node &matmul = *stage.anchor;
  DType dtype = matmul.output()->dtype();
  Shape aShape = matmul.input(0)->shape(), bShape = matmul.input(1)->shape();
  bool aVector = aShape.size() == 1, bVector = bShape.size() == 1;
  if (aVector)
    aShape.insert(aShape.begin(), 1);
  if (bVector)
    bShape.push_back(1);
  int64_t m = aShape[aShape.size() - 2], k = aShape.back(), n = bShape.back();
  const Shape &outShape = matmul.output()->shape();
  Shape batchShape(outShape.begin(), outShape.end() - (aVector ? 0 : 1) - (bVector ? 0 : 1));
  // Per batch dim, the element step of each operand (0 where it broadcasts).
  auto batchCoefs = [&](const Shape &shape) {
    std::vector<int64_t> coefs(batchShape.size(), 0), strides = contiguousStrides(shape);
    size_t operandBatch = shape.size() - 2, offset = batchShape.size() - operandBatch;
    for (size_t d = 0; d < operandBatch; ++d)
      coefs[d + offset] = shape[d] > 1 ? strides[d] : 0;
    return coefs;
  };
  std::vector<int64_t> aCoefs = batchCoefs(aShape), bCoefs = batchCoefs(bShape);
  e.beginFunction(stageIndex);
  std::string a = operandPointer(e, stage.anchorOperands[0]), b = operandPointer(e, stage.anchorOperands[1]);
  std::string y = e.pointer(stage.tileBuffer), type = cType(dtype);
  std::string body = "for (int64_t r = begin; r < end; ++r) {\n";
  body += fmt::format("  const int64_t bt = r / {0}, i = r % {0};\n  int64_t aoff = i * {1}, boff = 0, t = bt;\n", m, k);
  body += "  (void)t; (void)bt;\n";
  for (size_t d = batchShape.size(); d-- > 0;) {
    if (aCoefs[d] != 0 || bCoefs[d] != 0)
      body += fmt::format("  aoff += (t % {0}) * {1}; boff += (t % {0}) * {2};\n", batchShape[d], aCoefs[d], bCoefs[d]);
    body += fmt::format("  t /= {};\n", batchShape[d]);
  }
  body += fmt::format("  {0} *__restrict o = {1} + r * {2};\n  for (int64_t j = 0; j < {2}; ++j) o[j] = 0;\n", type, y, n);
  body += fmt::format("  for (int64_t q = 0; q < {}; ++q) {{\n", k);
  body += fmt::format("    const {0} aik = {1}[aoff + q];\n    const {0} *__restrict brow = {2} + boff + q * {3};\n", type,
                      a, b, n);
  body += fmt::format("    for (int64_t j = 0; j < {}; ++j) {}\n  }}\n}}", n, multiplyAdd(dtype, "o[j]", "aik", "brow[j]"));
  finishRowFunction(e, stageIndex, out, "matmul", body, numElements(batchShape) * m, k * n);
}

// conv gathers (output position p reads input p*stride + off), conv_transpose scatters (input
// position p feeds output p*stride + off): one loop nest per output plane (n, co), over the
// group's input channels, the kernel taps, and the positions of the side that is not strided.
void emitGenericConvFamily(KernelEmitter &e, int stageIndex, KernelText &out) {
  const Stage &stage = e.plan().stages.at(static_cast<size_t>(stageIndex));
  const ir::Node &conv = *stage.anchor;
  bool scatter = conv.op() == OpKind::ConvTranspose;
  DType dtype = conv.output()->dtype();
  WindowGeometry g = windowGeometry(conv);
  int64_t inPerGroup = g.inChannels / g.groups, outPerGroup = g.outChannels / g.groups;
  std::string range = fmt::format("{}_s{}_range", e.prefix(), stageIndex);
  out.functions += stridedRangeFunction(range);
  e.beginFunction(stageIndex);
  std::string x = operandPointer(e, stage.anchorOperands[0]), w = operandPointer(e, stage.anchorOperands[1]);
  std::string y = e.pointer(stage.tileBuffer), type = cType(dtype);
  const int64_t *dense = scatter ? g.in : g.out, *strided = scatter ? g.out : g.in;
  std::string body = "for (int64_t p = begin; p < end; ++p) {\n";
  body += fmt::format("  const int64_t n = p / {0}, co = p % {0}, grp = co / {1}, m = co % {1};\n  (void)m;\n",
                      g.outChannels, outPerGroup);
  body += fmt::format("  {0} *__restrict yp = {1} + p * {2};\n  for (int64_t q = 0; q < {2}; ++q) yp[q] = 0;\n", type, y,
                      g.outPlane());
  body += fmt::format("  for (int64_t cl = 0; cl < {}; ++cl) {{\n", inPerGroup);
  body += fmt::format("    const {0} *__restrict xp = {1} + (n * {2} + grp * {3} + cl) * {4};\n", type, x, g.inChannels,
                      inPerGroup, g.inPlane());
  if (scatter)
    body += fmt::format("    const {} *wk = {} + ((grp * {} + cl) * {} + m) * {};\n", type, w, inPerGroup, outPerGroup,
                        g.kernelSize());
  else
    body += fmt::format("    const {} *wk = {} + (co * {} + cl) * {};\n", type, w, inPerGroup, g.kernelSize());
  body += fmt::format("    for (int64_t kd = 0; kd < {}; ++kd)\n    for (int64_t kh = 0; kh < {}; ++kh)\n"
                      "    for (int64_t kw = 0; kw < {}; ++kw) {{\n",
                      g.kernel[0], g.kernel[1], g.kernel[2]);
  body += fmt::format("      const {} wt = wk[(kd * {} + kh) * {} + kw];\n", type, g.kernel[1], g.kernel[2]);
  const char *names[3] = {"d", "h", "w"};
  const char *taps[3] = {"kd", "kh", "kw"};
  for (int d = 0; d < 3; ++d) {
    body += fmt::format("      const int64_t off{0} = {1} * {2} - {3};\n      int64_t {0}0, {0}1;\n", names[d], taps[d],
                        g.dilation[d], g.padBegin[d]);
    body += fmt::format("      {}(off{}, {}, {}, {}, &{}0, &{}1);\n", range, names[d], g.stride[d], strided[d], dense[d],
                        names[d], names[d]);
  }
  body += "      for (int64_t pd = d0; pd < d1; ++pd) {\n";
  body += fmt::format("        const int64_t sd = pd * {} + offd;\n", g.stride[0]);
  body += "        for (int64_t ph = h0; ph < h1; ++ph) {\n";
  body += fmt::format("          const int64_t sh = ph * {} + offh;\n", g.stride[1]);
  if (scatter) {
    body += fmt::format("          const {} *__restrict xrow = xp + (pd * {} + ph) * {};\n", type, g.in[1], g.in[2]);
    body += fmt::format("          {} *__restrict yrow = yp + (sd * {} + sh) * {} + offw;\n", type, g.out[1], g.out[2]);
    body += fmt::format("          for (int64_t pw = w0; pw < w1; ++pw) {}\n",
                        multiplyAdd(dtype, fmt::format("yrow[pw * {}]", g.stride[2]), "wt", "xrow[pw]"));
  } else {
    body += fmt::format("          const {} *__restrict xrow = xp + (sd * {} + sh) * {} + offw;\n", type, g.in[1], g.in[2]);
    body += fmt::format("          {} *__restrict yrow = yp + (pd * {} + ph) * {};\n", type, g.out[1], g.out[2]);
    body += fmt::format("          for (int64_t pw = w0; pw < w1; ++pw) {}\n",
                        multiplyAdd(dtype, "yrow[pw]", "wt", fmt::format("xrow[pw * {}]", g.stride[2])));
  }
  body += "        }\n      }\n    }\n  }\n}";
  finishRowFunction(e, stageIndex, out, scatter ? "conv_transpose" : "conv", body, g.batch * g.outChannels,
                    inPerGroup * g.kernelSize() * std::max(g.inPlane(), g.outPlane()));
}

// Pooling per plane (n, c): each output position's window, clipped to the input along each
// dim (the taps inside [0, in)) and, for count_include_pad, to the padded extent.
void emitGenericPool(KernelEmitter &e, int stageIndex, KernelText &out) {
  const Stage &stage = e.plan().stages.at(static_cast<size_t>(stageIndex));
  const ir::Node &pool = *stage.anchor;
  bool isMax = pool.op() == OpKind::MaxPool;
  bool countIncludePad = !isMax && pool.attrInt("count_include_pad") != 0;
  DType dtype = pool.output()->dtype();
  WindowGeometry g = windowGeometry(pool);
  std::string taps = fmt::format("{}_s{}_taps", e.prefix(), stageIndex);
  // Taps t in [0, kernel) with base + t*dilation in [lo, hi) (both differences positive where divided).
  out.functions += fmt::format(
      "static inline void {}(int64_t base, int64_t dilation, int64_t kernel, int64_t lo, int64_t hi, int64_t *first, "
      "int64_t *last) {{\n  const int64_t f = base >= lo ? 0 : (lo - base + dilation - 1) / dilation;\n"
      "  const int64_t l = base >= hi ? 0 : std::min<int64_t>(kernel, (hi - base + dilation - 1) / dilation);\n"
      "  *first = std::min(f, l);\n  *last = l;\n}}\n\n",
      taps);
  e.beginFunction(stageIndex);
  std::string x = operandPointer(e, stage.anchorOperands[0]), y = e.pointer(stage.tileBuffer), type = cType(dtype);
  std::string body = "for (int64_t p = begin; p < end; ++p) {\n";
  body += fmt::format("  const {} *__restrict xp = {} + p * {};\n  {} *__restrict yp = {} + p * {};\n", type, x,
                      g.inPlane(), type, y, g.outPlane());
  const char *names[3] = {"d", "h", "w"};
  for (int d = 0; d < 3; ++d) {
    std::string pad = std::string(static_cast<size_t>(2 * d + 2), ' ');
    body += fmt::format("{0}for (int64_t o{1} = 0; o{1} < {2}; ++o{1}) {{\n", pad, names[d], g.out[d]);
    body += fmt::format("{0}  const int64_t base{1} = o{1} * {2} - {3};\n{0}  int64_t {1}0, {1}1, {1}p0, {1}p1;\n", pad,
                        names[d], g.stride[d], g.padBegin[d]);
    body += fmt::format("{0}  {1}(base{2}, {3}, {4}, 0, {5}, &{2}0, &{2}1);\n", pad, taps, names[d], g.dilation[d],
                        g.kernel[d], g.in[d]);
    body += fmt::format("{0}  {1}(base{2}, {3}, {4}, {5}, {6}, &{2}p0, &{2}p1);\n{0}  (void){2}p0; (void){2}p1;\n", pad,
                        taps, names[d], g.dilation[d], g.kernel[d], -g.padBegin[d], g.in[d] + g.padEnd[d]);
  }
  std::string accumulatorInit, update, result;
  if (isMax) {
    std::string lowest = isFloat(dtype) ? fmt::format("-std::numeric_limits<{}>::infinity()", type)
                                        : fmt::format("std::numeric_limits<{}>::lowest()", type);
    body += fmt::format("        {} best = {};\n", type, lowest);
    update = isFloat(dtype) ? "if (v > best || v != v) best = v;" : "if (v > best) best = v;";
    result = "best";
  } else {
    body += "        double sum = 0;\n";
    update = "sum += (double)v;";
    std::string count = countIncludePad ? "(double)(dp1 - dp0) * (double)(hp1 - hp0) * (double)(wp1 - wp0)"
                                        : "(double)((d1 - d0) * (h1 - h0) * (w1 - w0))";
    result = fmt::format("(count > 0 ? ({})(sum / count) : std::numeric_limits<{}>::quiet_NaN())", type, type);
    body += fmt::format("        const double count = {};\n", count);
  }
  body += "        for (int64_t td = d0; td < d1; ++td)\n        for (int64_t th = h0; th < h1; ++th)\n"
          "        for (int64_t tw = w0; tw < w1; ++tw) {\n";
  body += fmt::format("          const {} v = xp[((based + td * {}) * {} + baseh + th * {}) * {} + "
                      "basew + tw * {}];\n",
                      type, g.dilation[0], g.in[1], g.dilation[1], g.in[2], g.dilation[2]);
  body += fmt::format("          {}\n        }}\n", update);
  body += fmt::format("        yp[(od * {} + oh) * {} + ow] = {};\n", g.out[1], g.out[2], result);
  body += "      }\n    }\n  }\n}";
  finishRowFunction(e, stageIndex, out, isMax ? "max_pool" : "avg_pool", body, g.batch * g.inChannels,
                    g.outPlane() * g.kernelSize());
}

} // namespace

WindowGeometry liftedWindow(const ir::Node &node, const Shape &x, const Shape &y, const std::vector<int64_t> &kernel,
                            int64_t groups) {
  const int64_t spatial = static_cast<int64_t>(x.size()) - 2;
  const size_t lifted = WindowGeometry::kDims - static_cast<size_t>(spatial);
  WindowGeometry g;
  g.batch = x[0];
  g.inChannels = x[1];
  g.outChannels = y[1];
  g.groups = groups;
  // avg_pool has no dilations: they are 1, as an absent attribute of the others means.
  auto perDim = [&](const char *name) {
    return node.hasAttr(name) ? ir::ops::perSpatialDim(node.attrs(), name, spatial, 1, 1)
                              : std::vector<int64_t>(static_cast<size_t>(spatial), 1);
  };
  std::vector<int64_t> strides = perDim("strides"), dilations = perDim("dilations");
  std::vector<int64_t> pads = node.hasAttr("pads") ? ir::ops::spatialPads(node.attrs(), spatial)
                                                   : std::vector<int64_t>(static_cast<size_t>(2 * spatial), 0);
  for (size_t d = 0; d < static_cast<size_t>(spatial); ++d) {
    size_t l = lifted + d;
    g.in[l] = x[2 + d];
    g.out[l] = y[2 + d];
    g.kernel[l] = kernel[d];
    g.stride[l] = strides[d];
    g.dilation[l] = dilations[d];
    g.padBegin[l] = pads[d];
    g.padEnd[l] = pads[static_cast<size_t>(spatial) + d];
  }
  return g;
}

WindowGeometry windowGeometry(const ir::Node &node) {
  const Shape &x = node.input(0)->shape();
  const int64_t spatial = static_cast<int64_t>(x.size()) - 2;
  if (isPool(node.op()))
    return liftedWindow(node, x, node.output()->shape(), ir::ops::perSpatialDim(node.attrs(), "kernel", spatial, 1, 1), 1);
  const Shape &w = node.input(1)->shape();
  return liftedWindow(node, x, node.output()->shape(), std::vector<int64_t>(w.begin() + 2, w.end()),
                      node.attrInt("groups"));
}

std::string stridedRangeFunction(const std::string &name) {
  return fmt::format("static inline void {}(int64_t off, int64_t stride, int64_t size, int64_t count, int64_t *first, "
                     "int64_t *last) {{\n  const int64_t f = off >= 0 ? 0 : (-off + stride - 1) / stride;\n"
                     "  const int64_t limit = size - 1 - off;\n"
                     "  const int64_t l = limit < 0 ? 0 : std::min<int64_t>(count, limit / stride + 1);\n"
                     "  *first = std::min(f, l);\n  *last = l;\n}}\n\n",
                     name);
}

bool needsGenericStage(const ir::Node &node) {
  DType dtype = node.output()->dtype();
  switch (node.op()) {
  case OpKind::MatMul: return dtype != DType::F32;
  case OpKind::Conv: return dtype != DType::F32 || node.input(0)->rank() > 4;
  case OpKind::ConvTranspose: return dtype != DType::F32;
  case OpKind::MaxPool: // the runtime's pool2d takes f32, and u8 and s8 for max pooling
    return (dtype != DType::F32 && dtype != DType::U8 && dtype != DType::I8) || node.input(0)->rank() > 4;
  case OpKind::AvgPool: return dtype != DType::F32 || node.input(0)->rank() > 4 || poolNeedsTrailingPads(node);
  case OpKind::Einsum: return true;
  default: return false;
  }
}

bool genericStageSupports(const ir::Node &node) {
  switch (node.op()) {
  case OpKind::MatMul:
  case OpKind::Einsum: return true;
  case OpKind::Conv:
  case OpKind::ConvTranspose:
  case OpKind::MaxPool:
  case OpKind::AvgPool: return node.input(0)->rank() >= 3 && node.input(0)->rank() <= 5;
  default: return false;
  }
}

void emitGenericStage(KernelEmitter &e, int stageIndex, KernelText &out) {
  const Stage &stage = e.plan().stages.at(static_cast<size_t>(stageIndex));
  const ir::Node &anchor = *stage.anchor;
  for (const Store &store : stage.stores)
    if (store.value != anchor.output() || store.buffer != stage.tileBuffer)
      throw StrategyMismatch("a generic contraction stores only its own value");
  if (numElements(anchor.output()->shape()) == 0)
    return;
  switch (anchor.op()) {
  case OpKind::MatMul: emitGenericMatMul(e, stageIndex, out); return;
  case OpKind::Conv:
  case OpKind::ConvTranspose: emitGenericConvFamily(e, stageIndex, out); return;
  case OpKind::MaxPool:
  case OpKind::AvgPool: emitGenericPool(e, stageIndex, out); return;
  case OpKind::Einsum: emitEinsumStage(e, stageIndex, out); return;
  default: break;
  }
  fail("codegen: internal error: {} is not a generic contraction", anchor.opName());
}

} // namespace kiln::codegen
