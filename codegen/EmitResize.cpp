// resize as a Direct stage (see EmitDirect.h). Shapes and attributes are static, so the
// sampling along each axis (which input positions each output position reads, with which
// weights) is computed here, with the reference evaluator's rules and arithmetic
// (ir/ops/Resize.cpp), and emitted as tables:
//   - nearest: per axis, the input offset (index * stride) of every output position; rows of
//     the output are filled in parallel, each element one copy, bit for bit;
//   - linear and cubic: per axis a list of (index, weight) taps per output position; the
//     kernel resamples a double copy of the input axis by axis (skipping axes that map
//     identically; the leading such axes make independent slices, resampled in parallel),
//     dst += weight * src in tap order from 0, exactly as the reference, with
//     floating-point contraction off so that no FMA changes the rounding; then rounds once to
//     the output dtype (integers truncate and saturate);
//   - f32 linear over the last two axes (bilinear upsampling of NCHW images, any coordinate
//     mode; either axis may be identity): in f32, each (n, c) plane resampled along W for the
//     input rows the output reads, then every output row one blend of two of those rows, which
//     vectorises. It agrees with the exact path to f32 rounding, not to the bit: the double
//     passes ran at 5.6 ns an output, 21% of an LR-ASPP segmentation model's time.
#include <algorithm>
#include <cmath>

#include "codegen/EmitDirect.h"
#include "codegen/ScalarOps.h"
#include "core/ShapeMath.h"

namespace kiln::codegen::direct {

namespace {

enum class Mode { Nearest, Linear, Cubic };

struct Tap {
  int64_t index;
  double weight;
};

struct Sampling {
  Mode mode = Mode::Nearest;
  std::string coordinates, rounding;
  double cubicA = -0.75;
  bool excludeOutside = false;
};

double sourceCoordinate(const Sampling &s, double x, int64_t in, double scale) {
  double outputWidth = scale * double(in);
  if (s.coordinates == "asymmetric")
    return x / scale;
  if (s.coordinates == "align_corners")
    return outputWidth == 1 ? 0.0 : x * double(in - 1) / (outputWidth - 1);
  if (s.coordinates == "pytorch_half_pixel")
    return outputWidth == 1 ? -0.5 : (x + 0.5) / scale - 0.5;
  return (x + 0.5) / scale - 0.5; // half_pixel
}

bool pickUpper(const std::string &rounding, double ratio) {
  if (rounding == "round_prefer_ceil")
    return ratio >= 0.5;
  if (rounding == "floor")
    return false;
  if (rounding == "ceil")
    return true;
  return ratio > 0.5; // round_prefer_floor
}

// The taps of output position x: an integral source coordinate takes base = x_ori - 1 with
// ratio 1 (the reference's left-neighbour convention); zero-weight taps are dropped and the
// rest clamped to the edge.
std::vector<Tap> sampleTaps(const Sampling &s, double x, int64_t in, double scale) {
  double source = std::clamp(sourceCoordinate(s, x, in, scale), -1.0, double(in));
  double floorValue = std::floor(source);
  auto base = static_cast<int64_t>(floorValue);
  double ratio = source - floorValue;
  if (ratio == 0) {
    base -= 1;
    ratio = 1;
  }
  std::vector<Tap> taps;
  if (s.mode == Mode::Nearest) {
    taps.push_back({ratio == 1 || pickUpper(s.rounding, ratio) ? base + 1 : base, 1.0});
  } else if (s.mode == Mode::Linear) {
    taps.push_back({base, 1 - ratio});
    taps.push_back({base + 1, ratio});
  } else {
    double a = s.cubicA, r = ratio, t = 1 - ratio;
    taps.push_back({base - 1, ((a * (r + 1) - 5 * a) * (r + 1) + 8 * a) * (r + 1) - 4 * a});
    taps.push_back({base, ((a + 2) * r - (a + 3)) * r * r + 1});
    taps.push_back({base + 1, ((a + 2) * t - (a + 3)) * t * t + 1});
    taps.push_back({base + 2, ((a * (t + 1) - 5 * a) * (t + 1) + 8 * a) * (t + 1) - 4 * a});
  }
  if (s.excludeOutside && s.mode != Mode::Nearest) {
    double sum = 0;
    for (Tap &tap : taps) {
      if (tap.index < 0 || tap.index >= in)
        tap.weight = 0;
      sum += tap.weight;
    }
    for (Tap &tap : taps)
      tap.weight /= sum;
  }
  std::vector<Tap> kept;
  for (Tap tap : taps) {
    if (tap.weight == 0)
      continue;
    tap.index = std::clamp<int64_t>(tap.index, 0, in - 1);
    kept.push_back(tap);
  }
  return kept;
}

std::string doubleLiteral(double value) {
  if (std::isnan(value))
    return "std::numeric_limits<double>::quiet_NaN()";
  if (std::isinf(value))
    return value > 0 ? "std::numeric_limits<double>::infinity()" : "-std::numeric_limits<double>::infinity()";
  return fmt::format("{}", value); // shortest round-trip form
}


std::string floatList(const std::vector<double> &values) {
  std::vector<std::string> parts;
  for (double value : values)
    parts.push_back(literal(DType::F32, value));
  return fmt::format("{{{}}}", fmt::join(parts, ", "));
}

/// Per output position along one axis: two input positions and their weights (a single tap
/// is paired with itself at weight 0).
struct TwoTaps {
  std::vector<int64_t> first, second;
  std::vector<double> firstWeight, secondWeight;
};

TwoTaps twoTaps(const std::vector<std::vector<Tap>> &positions) {
  TwoTaps t;
  for (const std::vector<Tap> &taps : positions) {
    const Tap a = taps.empty() ? Tap{0, 0.0} : taps[0], b = taps.size() > 1 ? taps[1] : Tap{a.index, 0.0};
    t.first.push_back(a.index);
    t.second.push_back(b.index);
    t.firstWeight.push_back(a.weight);
    t.secondWeight.push_back(b.weight);
  }
  return t;
}

/// The f32 bilinear rows (see the top of the file), or an empty split when `node` is not one:
/// f32, linear, every axis before the last two mapped identically, at most two taps a position.
RowSplit emitPlaneBilinear(DirectOp &op, std::string &tables, const std::vector<std::vector<std::vector<Tap>>> &taps,
                           const std::vector<bool> &identity) {
  const Shape &inShape = op.node.input(0)->shape(), &outShape = op.node.output()->shape();
  const size_t rank = inShape.size();
  if (op.node.output()->dtype() != DType::F32 || op.node.input(0)->dtype() != DType::F32 || rank < 2)
    return {0, 0, ""};
  // A leading axis must map each position to itself; pytorch_half_pixel maps an axis of size 1
  // through two taps at 0 with weights 1/2, which is the identity too.
  for (size_t d = 0; d + 2 < rank; ++d) {
    if (identity[d])
      continue;
    if (outShape[d] != inShape[d])
      return {0, 0, ""};
    for (int64_t p = 0; p < outShape[d]; ++p) {
      double sum = 0;
      for (const Tap &tap : taps[d][static_cast<size_t>(p)]) {
        if (tap.index != p)
          return {0, 0, ""};
        sum += tap.weight;
      }
      if (sum != 1)
        return {0, 0, ""};
    }
  }
  for (size_t d = rank - 2; d < rank; ++d)
    for (const std::vector<Tap> &position : taps[d])
      if (position.size() > 2)
        return {0, 0, ""};
  const int64_t H = inShape[rank - 2], W = inShape[rank - 1], OH = outShape[rank - 2], OW = outShape[rank - 1];
  const int64_t planes = elementCount(inShape, 0, rank - 2, "input");
  TwoTaps y = twoTaps(taps[rank - 2]), x = twoTaps(taps[rank - 1]);
  // The input rows any output row reads, ascending; y's taps become slots among them.
  std::vector<int64_t> slotOf(static_cast<size_t>(H), -1), rowsRead;
  for (const std::vector<int64_t> *rows : {&y.first, &y.second})
    for (int64_t row : *rows)
      slotOf[static_cast<size_t>(row)] = 0;
  for (int64_t row = 0; row < H; ++row)
    if (slotOf[static_cast<size_t>(row)] == 0) {
      slotOf[static_cast<size_t>(row)] = static_cast<int64_t>(rowsRead.size());
      rowsRead.push_back(row);
    }
  for (std::vector<int64_t> *rows : {&y.first, &y.second})
    for (int64_t &row : *rows)
      row = slotOf[static_cast<size_t>(row)];
  const std::string &f = op.fn;
  tables += fmt::format("static const int64_t {}_rows[{}] = {};\n", f, rowsRead.size(), intList(rowsRead));
  tables += fmt::format("static const int64_t {}_y0[{}] = {};\n", f, OH, intList(y.first));
  tables += fmt::format("static const int64_t {}_y1[{}] = {};\n", f, OH, intList(y.second));
  tables += fmt::format("static const float {}_wy0[{}] = {};\n", f, OH, floatList(y.firstWeight));
  tables += fmt::format("static const float {}_wy1[{}] = {};\n", f, OH, floatList(y.secondWeight));
  tables += fmt::format("static const int64_t {}_x0[{}] = {};\n", f, OW, intList(x.first));
  tables += fmt::format("static const int64_t {}_x1[{}] = {};\n", f, OW, intList(x.second));
  tables += fmt::format("static const float {}_wx0[{}] = {};\n", f, OW, floatList(x.firstWeight));
  tables += fmt::format("static const float {}_wx1[{}] = {};\n", f, OW, floatList(x.secondWeight));
  KernelEmitter &e = op.e;
  const std::string in = e.pointer(op.inputs.at(0)), out = e.pointer(op.outputs.at(0));
  const int64_t used = static_cast<int64_t>(rowsRead.size());
  e.line(fmt::format("float *across = (float *)malloc(sizeof(float) * {});", checkedMul(used, OW, "resize scratch")));
  e.line("if (!across) abort();");
  e.line("for (int64_t r = begin; r < end; ++r) {");
  e.line(fmt::format("  const float *plane = {} + r * {};", in, checkedMul(H, W, "resize plane")));
  e.line(fmt::format("  for (int64_t u = 0; u < {}; ++u) {{", used));
  e.line(fmt::format("    const float *row = plane + {}_rows[u] * {};", f, W));
  e.line(fmt::format("    float *to = across + u * {};", OW));
  e.line(fmt::format("    for (int64_t x = 0; x < {0}; ++x) to[x] = {1}_wx0[x] * row[{1}_x0[x]] + {1}_wx1[x] * row[{1}_x1[x]];",
                     OW, f));
  e.line("  }");
  e.line(fmt::format("  for (int64_t y = 0; y < {}; ++y) {{", OH));
  e.line(fmt::format("    const float *a = across + {0}_y0[y] * {1}, *b = across + {0}_y1[y] * {1};", f, OW));
  e.line(fmt::format("    const float wa = {0}_wy0[y], wb = {0}_wy1[y];", f));
  e.line(fmt::format("    float *o = {} + (r * {} + y) * {};", out, OH, OW));
  e.line(fmt::format("    for (int64_t x = 0; x < {}; ++x) o[x] = wa * a[x] + wb * b[x];", OW));
  e.line("  }");
  e.line("}");
  e.line("free(across);");
  return {planes, checkedMul(OH, OW, "resize plane"), ""};
}
} // namespace

RowSplit emitResize(DirectOp &op, std::string &tables) {
  KernelEmitter &e = op.e;
  const ir::Node &node = op.node;
  const ir::Value *x = node.input(0);
  const Shape &inShape = x->shape(), &outShape = node.output()->shape();
  size_t rank = inShape.size();
  Sampling s;
  const std::string &mode = node.attrString("mode");
  s.mode = mode == "linear" ? Mode::Linear : mode == "cubic" ? Mode::Cubic : Mode::Nearest;
  s.coordinates = node.attrString("coordinate_transformation_mode");
  s.rounding = node.attrString("nearest_mode");
  s.cubicA = node.attrFloat("cubic_coeff_a");
  s.excludeOutside = node.attrInt("exclude_outside") == 1;
  std::vector<double> scales = ir::attrFloats(node.attrs(), "scales");
  if (scales.empty())
    for (size_t d = 0; d < rank; ++d)
      scales.push_back(double(outShape[d]) / double(inShape[d])); // no axis is empty here
  std::vector<std::vector<std::vector<Tap>>> taps(rank);
  for (size_t d = 0; d < rank; ++d)
    for (int64_t p = 0; p < outShape[d]; ++p)
      taps[d].push_back(sampleTaps(s, double(p), inShape[d], scales[d]));
  std::string in = e.pointer(op.inputs.at(0)), out = e.pointer(op.outputs.at(0));
  std::string type = cType(node.output()->dtype());

  if (s.mode == Mode::Nearest) {
    std::vector<int64_t> strides = contiguousStrides(inShape);
    for (size_t d = 0; d < rank; ++d) {
      std::vector<int64_t> offsets;
      for (const std::vector<Tap> &position : taps[d])
        offsets.push_back(position.front().index * strides[d]);
      tables += fmt::format("static const int64_t {}_o{}[{}] = {};\n", op.fn, d, std::max<size_t>(offsets.size(), 1),
                            intList(offsets));
    }
    if (rank == 0) {
      e.line(fmt::format("{}[0] = {}[0];", out, in));
      return {1, 1, ""};
    }
    int64_t width = outShape.back(), rows = numElements(outShape) / width;
    e.line("for (int64_t r = begin; r < end; ++r) {");
    e.line("  int64_t rest = r, from = 0;");
    for (size_t d = rank - 1; d-- > 0;) {
      e.line(fmt::format("  from += {}_o{}[rest % {}];", op.fn, d, outShape[d]));
      e.line(fmt::format("  rest /= {};", outShape[d]));
    }
    e.line(fmt::format("  for (int64_t w = 0; w < {}; ++w) {}[r * {} + w] = {}[from + {}_o{}[w]];", width, out, width,
                       in, op.fn, rank - 1));
    e.line("}");
    return {rows, width, ""};
  }

  // Axes that map identically are skipped (as the reference skips them: resampling them would
  // turn -0 into +0). The leading ones split the tensor into independent slices, which are the
  // parallel rows; each row resamples its slice axis by axis between two scratch buffers.
  std::vector<bool> identity(rank, true);
  for (size_t d = 0; d < rank; ++d) {
    identity[d] = outShape[d] == inShape[d];
    for (int64_t p = 0; identity[d] && p < outShape[d]; ++p) {
      const std::vector<Tap> &position = taps[d][static_cast<size_t>(p)];
      identity[d] = position.size() == 1 && position[0].index == p && position[0].weight == 1;
    }
  }
  if (s.mode == Mode::Linear)
    if (RowSplit planes = emitPlaneBilinear(op, tables, taps, identity); planes.rows > 0)
      return planes;
  size_t first = 0;
  while (first < rank && identity[first])
    ++first;
  int64_t rows = elementCount(inShape, 0, first, "input");
  Shape shape(inShape.begin() + static_cast<std::ptrdiff_t>(first), inShape.end()); // the slice, pass by pass
  int64_t inSlice = numElements(shape);
  int64_t outSlice = numElements(Shape(outShape.begin() + static_cast<std::ptrdiff_t>(first), outShape.end()));
  int64_t scratch = inSlice;
  DType dtype = node.output()->dtype();
  std::string rounded = isFloat(dtype) ? fmt::format("({})cur[n]", type) : fmt::format("kiln_sat<{}>(cur[n])", type);
  std::vector<std::string> passes;
  for (size_t d = first; d < rank; ++d) {
    if (identity[d])
      continue;
    std::vector<int64_t> starts{0}, indices;
    std::vector<std::string> weights;
    for (const std::vector<Tap> &position : taps[d]) {
      for (const Tap &tap : position) {
        indices.push_back(tap.index);
        weights.push_back(doubleLiteral(tap.weight));
      }
      starts.push_back(static_cast<int64_t>(indices.size()));
    }
    if (weights.empty())
      weights.push_back("0");
    tables += fmt::format("static const int64_t {}_t{}[{}] = {};\n", op.fn, d, starts.size(), intList(starts));
    tables += fmt::format("static const int64_t {}_i{}[{}] = {};\n", op.fn, d, std::max<size_t>(indices.size(), 1),
                          intList(indices));
    tables +=
        fmt::format("static const double {}_w{}[{}] = {{{}}};\n", op.fn, d, weights.size(), fmt::join(weights, ", "));
    size_t local = d - first;
    // `shape` mixes resized and input dims, so its products are checked like any other shape's.
    int64_t outer = elementCount(shape, 0, local, "resize pass");
    int64_t inner = elementCount(shape, local + 1, shape.size(), "resize pass");
    int64_t from = shape[local], to = outShape[d];
    shape[local] = to;
    scratch = std::max(scratch, checkedMul(checkedMul(outer, to, "resize scratch"), inner, "resize scratch"));
    std::string pass;
    pass += fmt::format("    for (int64_t n = 0; n < {}; ++n) next[n] = 0;\n", outer * to * inner);
    pass += fmt::format("    for (int64_t o = 0; o < {}; ++o)\n", outer);
    pass += fmt::format("      for (int64_t p = 0; p < {}; ++p) {{\n", to);
    pass += fmt::format("        double *dst = next + (o * {} + p) * {};\n", to, inner);
    pass += fmt::format("        for (int64_t t = {0}_t{1}[p]; t < {0}_t{1}[p + 1]; ++t) {{\n", op.fn, d);
    pass += fmt::format("          const double w = {}_w{}[t];\n", op.fn, d);
    pass += fmt::format("          const double *src = cur + (o * {} + {}_i{}[t]) * {};\n", from, op.fn, d, inner);
    pass += fmt::format("          for (int64_t i = 0; i < {}; ++i) dst[i] += w * src[i];\n", inner);
    pass += "        }\n      }\n";
    pass += "    { double *swap = cur; cur = next; next = swap; }";
    passes.push_back(pass);
  }
  e.line(fmt::format(
      "double *cur = (double *)malloc(sizeof(double) * {0}), *next = (double *)malloc(sizeof(double) * {0});",
      std::max<int64_t>(scratch, 1)));
  e.line("if (!cur || !next) abort();");
  e.line("for (int64_t r = begin; r < end; ++r) {");
  e.line(fmt::format("  for (int64_t n = 0; n < {}; ++n) cur[n] = (double){}[r * {} + n];", inSlice, in, inSlice));
  for (const std::string &pass : passes) {
    e.line("  {");
    e.line(pass);
    e.line("  }");
  }
  e.line(fmt::format("  for (int64_t n = 0; n < {}; ++n) {}[r * {} + n] = {};", outSlice, out, outSlice, rounded));
  e.line("}");
  e.line("free(cur);");
  e.line("free(next);");
  return {rows, std::max<int64_t>(scratch, 1), "__attribute__((optimize(\"fp-contract=off\"))) "};
}

} // namespace kiln::codegen::direct
