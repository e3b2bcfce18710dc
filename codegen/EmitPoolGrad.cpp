// max_pool_grad as a Direct stage (see EmitDirect.h; the op is defined in ir/ops/PoolGrad.cpp).
// One parallel row per (n, c) plane: a window reads and writes only its own plane, so rows never
// collide. Within a row the plane's gradient starts at zero, then each window, in row-major
// order, counts the taps equal to its y (its ties) and adds g / ties to each tie's position; a
// window without ties (all padding, or a NaN max) adds nothing. Every bound is a compile-time
// constant; taps outside the input (padding, or a ceil_mode window past the end) are skipped by
// a test emitted only along the dims whose windows can reach outside.
//
// Accumulation matches the reference's double sums rounded once:
//   - windows that cannot overlap (stride >= dilated kernel along every dim with more than one
//     window, e.g. LeNet's 2x2 stride 2): an element receives at most one share, computed in
//     double and stored rounded once, so every tap is written directly (its share or zero) and
//     the plane is zeroed first only when some element is no window's tap;
//   - f64 with overlapping windows: in the output itself (double, windows in the reference's
//     order);
//   - f32 with overlapping windows (ResNet's 3x3 stride 2): a double scratch plane per row,
//     allocated once per call of the row function, rounded to float at the end of the row.
//     In 2-D, a row of windows counts its ties together, in a loop over the windows that the
//     compiler vectorises (emitOverlapping2d): ResNet-18's pool gradient at batch 8 went from
//     24 to 7 ms on one core.
// In every case the result is bit for bit the reference evaluator's.
#include "codegen/EmitDirect.h"

#include <algorithm>

#include "codegen/ScalarOps.h"
#include "core/ShapeMath.h"
#include "ir/ops/Window.h"

namespace kiln::codegen::direct {

namespace {

struct PoolGradDim {
  int64_t in = 1, out = 1, kernel = 1, stride = 1, dilation = 1, padBegin = 0;
  // Whether some window's tap lies outside [0, in): only then is a bounds test emitted.
  bool reachesOutside() const {
    int64_t last = (out - 1) * stride - padBegin + (kernel - 1) * dilation;
    return padBegin > 0 || last >= in;
  }
  // Whether two windows along this dim can share an input position.
  bool overlaps() const { return out > 1 && stride < (kernel - 1) * dilation + 1; }
  // Whether every input position is a tap of some window (then no element needs zeroing first).
  bool coversInput() const {
    std::vector<bool> covered(static_cast<size_t>(in), false);
    for (int64_t o = 0; o < out; ++o)
      for (int64_t k = 0; k < kernel; ++k) {
        int64_t i = o * stride - padBegin + k * dilation;
        if (i >= 0 && i < in)
          covered[static_cast<size_t>(i)] = true;
      }
    return std::find(covered.begin(), covered.end(), false) == covered.end();
  }
};

std::vector<PoolGradDim> poolGradDims(const ir::Node &node) {
  const Shape &xs = node.input(0)->shape(), &ys = node.input(1)->shape();
  int64_t spatial = static_cast<int64_t>(xs.size()) - 2;
  const ir::AttrMap &attrs = node.attrs();
  std::vector<int64_t> kernel = ir::ops::perSpatialDim(attrs, "kernel", spatial, 1, 1);
  std::vector<int64_t> strides = ir::ops::perSpatialDim(attrs, "strides", spatial, 1, 1);
  std::vector<int64_t> dilations = ir::ops::perSpatialDim(attrs, "dilations", spatial, 1, 1);
  std::vector<int64_t> pads = ir::ops::spatialPads(attrs, spatial);
  std::vector<PoolGradDim> dims;
  for (int64_t d = 0; d < spatial; ++d) {
    auto ud = static_cast<size_t>(d);
    dims.push_back({xs[2 + ud], ys[2 + ud], kernel[ud], strides[ud], dilations[ud], pads[ud]});
  }
  return dims;
}

/// Emits the loops over one window's taps (window coordinates o0, o1, ...), skipping taps
/// outside the input, with `statement` (reading the tap's plane position p) innermost.
void emitTapLoops(KernelEmitter &e, const std::vector<PoolGradDim> &dims, const std::string &pad,
                  const std::string &statement) {
  std::string position;
  std::string indent = pad;
  for (size_t d = 0; d < dims.size(); ++d) {
    const PoolGradDim &dim = dims[d];
    e.line(fmt::format("{0}for (int64_t k{1} = 0; k{1} < {2}; ++k{1}) {{", indent, d, dim.kernel));
    e.line(fmt::format("{}  const int64_t i{} = o{} * {} + k{} * {} - {};", indent, d, d, dim.stride, d, dim.dilation,
                       dim.padBegin));
    if (dim.reachesOutside())
      e.line(fmt::format("{0}  if (i{1} < 0 || i{1} >= {2}) continue;", indent, d, dim.in));
    position = d == 0 ? "i0" : fmt::format("({}) * {} + i{}", position, dim.in, d);
    indent += "  ";
  }
  e.line(fmt::format("{}const int64_t p = {};", indent, position));
  e.line(indent + statement);
  for (size_t d = dims.size(); d-- > 0;)
    e.line(pad + std::string(2 * d, ' ') + "}");
}

/// Every window in row-major order, each counting its ties and then adding its share to them
/// (in place for f64, into the double plane `acc` for f32), or, for disjoint windows, writing
/// each tap once.
void emitWindows(KernelEmitter &e, const std::vector<PoolGradDim> &dims, const std::string &type, bool overlapping,
                 bool scratch) {
  std::string indent = "  ";
  for (size_t d = 0; d < dims.size(); ++d) {
    e.line(fmt::format("{0}for (int64_t o{1} = 0; o{1} < {2}; ++o{1}) {{", indent, d, dims[d].out));
    indent += "  ";
  }
  std::string window = "o0";
  for (size_t d = 1; d < dims.size(); ++d)
    window = fmt::format("({}) * {} + o{}", window, dims[d].out, d);
  e.line(fmt::format("{}const int64_t w = {};", indent, window));
  e.line(fmt::format("{}const {} m = yp[w];", indent, type));
  // Selects rather than branches: which tap holds the maximum is data, and a mispredicted branch
  // per window cost more than the whole window's work (0.81 ms against 0.15 ms on LeNet-5's
  // first pool, batch 64). A window without ties (all padding, or a NaN max) selects no tap.
  if (overlapping) {
    // The last tie is remembered, so that the usual window, with one tie, adds its share to
    // one position rather than a select to every tap (ResNet-18's pool gradient at batch 8:
    // 38 ms with the select on every tap). Several ties take the second loop, in tap order.
    std::string target = scratch ? "acc" : "dp";
    e.line(indent + "int64_t ties = 0, last = 0;");
    const std::string count = "const bool tie = xp[p] == m; last = tie ? p : last; ties += tie;";
    emitTapLoops(e, dims, indent, count);
    e.line(indent + "if (ties == 0) continue; // all padding, or a NaN max");
    e.line(fmt::format("{}const double share = (double)gp[w] / (double)ties;", indent));
    e.line(fmt::format("{}if (ties == 1) {{ {}[last] += share; continue; }}", indent, target));
    emitTapLoops(e, dims, indent, fmt::format("if (xp[p] == m) {}[p] += share;", target));
  } else {
    e.line(indent + "int64_t ties = 0;");
    emitTapLoops(e, dims, indent, "ties += xp[p] == m;");
    // 0.0 + share: the reference adds the share to a +0.0, which turns a -0.0 share into +0.0.
    e.line(fmt::format("{}const {} share = ({})(0.0 + (double)gp[w] / (double)(ties > 0 ? ties : 1));", indent, type,
                       type));
    emitTapLoops(e, dims, indent, fmt::format("dp[p] = xp[p] == m ? share : ({})0;", type));
  }
  for (size_t d = dims.size(); d-- > 0;)
    e.line("  " + std::string(2 * d, ' ') + "}");
}

/// f32 overlapping 2-D windows (ResNet's 3x3 stride 2), one row of windows at a time, in two
/// loops: the first counts each window's ties and remembers its last tie, tap by tap across
/// the whole row, reading the input row through a copy padded with NaN (which equals nothing,
/// so padding never ties and no tap needs a bounds test): a loop over windows that the
/// compiler vectorises. The second, in window order, adds each window's share to its one tie,
/// or (rarely) to each of several. Shares reach each position in the reference's order.
void emitOverlapping2d(KernelEmitter &e, const std::vector<PoolGradDim> &dims) {
  const PoolGradDim &h = dims[0], &w = dims[1];
  const int64_t padded = (w.out - 1) * w.stride + (w.kernel - 1) * w.dilation + 1;
  e.line(fmt::format("  for (int64_t o0 = 0; o0 < {}; ++o0) {{", h.out));
  e.line(fmt::format("    int32_t ties[{0}]; int64_t last[{0}];", w.out));
  e.line(fmt::format("    for (int64_t o1 = 0; o1 < {}; ++o1) {{ ties[o1] = 0; last[o1] = 0; }}", w.out));
  e.line(fmt::format("    const float *mrow = yp + o0 * {};", w.out));
  e.line(fmt::format("    for (int64_t k0 = 0; k0 < {}; ++k0) {{", h.kernel));
  e.line(fmt::format("      const int64_t i0 = o0 * {} + k0 * {} - {};", h.stride, h.dilation, h.padBegin));
  e.line(fmt::format("      if (i0 < 0 || i0 >= {}) continue;", h.in));
  e.line(fmt::format("      float row[{}];", padded));
  e.line(fmt::format("      for (int64_t j = 0; j < {}; ++j) {{ const int64_t c = j - {}; row[j] = c >= 0 && c < {} ? "
                     "xp[i0 * {} + c] : __builtin_nanf(\"\"); }}",
                     padded, w.padBegin, w.in, w.in));
  e.line(fmt::format("      for (int64_t k1 = 0; k1 < {}; ++k1)", w.kernel));
  e.line(fmt::format("        for (int64_t o1 = 0; o1 < {}; ++o1) {{", w.out));
  e.line(fmt::format("          const bool tie = row[o1 * {0} + k1 * {1}] == mrow[o1];", w.stride, w.dilation));
  e.line(fmt::format("          last[o1] = tie ? i0 * {} + o1 * {} + k1 * {} - {} : last[o1];", w.in, w.stride,
                     w.dilation, w.padBegin));
  e.line("          ties[o1] += tie;");
  e.line("        }");
  e.line("    }");
  e.line(fmt::format("    for (int64_t o1 = 0; o1 < {}; ++o1) {{", w.out));
  e.line("      if (ties[o1] == 0) continue; // all padding, or a NaN max");
  e.line(fmt::format("      const int64_t w = o0 * {} + o1;", w.out));
  e.line("      const float m = yp[w];");
  e.line("      const double share = (double)gp[w] / (double)ties[o1];");
  e.line("      if (ties[o1] == 1) { acc[last[o1]] += share; continue; }");
  emitTapLoops(e, dims, "      ", "if (xp[p] == m) acc[p] += share;");
  e.line("    }");
  e.line("  }");
}

} // namespace

RowSplit emitMaxPoolGrad(DirectOp &op, std::string &) {
  KernelEmitter &e = op.e;
  const ir::Value *x = op.node.input(0);
  std::vector<PoolGradDim> dims = poolGradDims(op.node);
  int64_t inPlane = 1, outPlane = 1, taps = 1;
  bool overlapping = false, covering = true;
  for (const PoolGradDim &dim : dims) {
    inPlane = checkedMul(inPlane, dim.in, "input plane");
    outPlane = checkedMul(outPlane, dim.out, "output plane");
    taps = checkedMul(taps, dim.kernel, "window taps");
    overlapping = overlapping || dim.overlaps();
    covering = covering && dim.coversInput(); // windows are products of per-dim ranges
  }
  int64_t planes = numElements(x->shape()) / std::max<int64_t>(inPlane, 1);
  std::string type = cType(x->dtype());
  bool scratch = x->dtype() == DType::F32 && overlapping;
  std::string xs = e.pointer(op.inputs.at(0)), ys = e.pointer(op.inputs.at(1)), gs = e.pointer(op.inputs.at(2));
  std::string dx = e.pointer(op.outputs.at(0));
  e.line(fmt::format("// max_pool_grad: {} planes of {} inputs, {} windows of {} taps ({})", planes, inPlane, outPlane,
                     taps, scratch ? "double scratch" : overlapping ? "accumulated in place" : "disjoint windows"));
  if (scratch) {
    e.line(fmt::format("double *acc = (double *)malloc(sizeof(double) * {});", inPlane));
    e.line("if (!acc) abort();");
  }
  e.line("for (int64_t r = begin; r < end; ++r) {");
  e.line(fmt::format("  const {} *xp = {} + r * {};", type, xs, inPlane));
  e.line(fmt::format("  const {} *yp = {} + r * {};", type, ys, outPlane));
  e.line(fmt::format("  const {} *gp = {} + r * {};", type, gs, outPlane));
  e.line(fmt::format("  {} *dp = {} + r * {};", type, dx, inPlane));
  // Disjoint windows write each of their taps once, so only positions no window reads need a
  // zero first; overlapping ones accumulate into a zeroed plane.
  if (overlapping || !covering)
    e.line(fmt::format("  for (int64_t s = 0; s < {}; ++s) {}[s] = 0;", inPlane, scratch ? "acc" : "dp"));
  // The row form keeps a row of windows' counts and a padded input row on the stack: bounded
  // so that a very wide image cannot overflow a worker's stack (about 64 KiB at the limit).
  constexpr int64_t kMaxRowWindows = 4096;
  if (scratch && dims.size() == 2 && dims[1].out <= kMaxRowWindows &&
      (dims[1].out - 1) * dims[1].stride + (dims[1].kernel - 1) * dims[1].dilation < 2 * kMaxRowWindows) {
    emitOverlapping2d(e, dims);
  } else {
    emitWindows(e, dims, type, overlapping, scratch);
  }
  if (scratch)
    e.line(fmt::format("  for (int64_t s = 0; s < {}; ++s) dp[s] = (float)acc[s];", inPlane));
  e.line("}");
  if (scratch)
    e.line("free(acc);");
  return {planes, inPlane + outPlane * taps, ""};
}

} // namespace kiln::codegen::direct
