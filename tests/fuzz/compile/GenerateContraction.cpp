// Emitters of the contractions and windows: matmul with batch broadcasting and 1-d operands,
// conv / conv_transpose / conv_weight_grad with random shapes, strides, pads, dilations and
// groups (depthwise included) over 1 to 3 spatial dims, max_pool / avg_pool / max_pool_grad,
// einsum with random equations (diagonals, sums, "...", implicit outputs), resize in every
// mode, and the recurrences (rnn/gru/lstm_sequence) in every direction with lengths, clipping
// and peepholes. Matmuls and convolutions get a bias per column or channel and an activation
// now and then (the post-op chains). The library kernels take no 16-bit floats, so those
// operands become f32 first.
#include <algorithm>
#include <cmath>

#include "tests/fuzz/compile/Generator.h"

namespace kiln::fuzz {

namespace {

/// The dtype of a contraction: the case's float dtype (f32 for 16-bit ones, which the library
/// kernels do not take), an integer one now and then.
DType contractionType(Gen &gen, bool allowInt) {
  if (allowInt && gen.chance(15))
    return gen.intType;
  return gen.floatType == DType::F16 || gen.floatType == DType::BF16 ? DType::F32 : gen.floatType;
}

/// An operand of exactly `type`: a pool value of that type now and then, else a new leaf; for
/// an f32 operand of a case computing in f16 or bf16, often such a value converted.
GenValue operandOf(Gen &gen, DType dtype, const Shape &shape) {
  if (dtype == DType::F32 && gen.floatType != dtype && isFloat(gen.floatType) && gen.chance(50))
    return gen.noHalf(gen.ofType(gen.floatType, shape));
  return gen.ofType(dtype, shape);
}

/// The accumulated bound and grid of a sum of `terms` products of a and b.
void productSum(const GenValue &a, const GenValue &b, double terms, double &bound, int &bits) {
  bound = std::max(terms, 1.0) * a.maxAbs() * b.maxAbs();
  bits = a.fracBits < 0 || b.fracBits < 0 ? -1 : a.fracBits + b.fracBits;
}

struct Window {
  int64_t spatial = 2;
  std::vector<int64_t> kernel, strides, dilations, pads, in;
};

/// Kernel, strides, dilations and pads per spatial dim, and input sizes that give at least one
/// output position; `padLimit` bounds the pads relative to the kernel span.
Window randomWindow(Gen &gen, int64_t spatial, bool dilated) {
  Window w;
  w.spatial = spatial;
  w.pads.assign(static_cast<size_t>(2 * spatial), 0);
  for (int64_t d = 0; d < spatial; ++d) {
    int64_t k = gen.chance(10) ? gen.between(4, 5) : gen.between(1, 3);
    int64_t dilation = dilated && gen.chance(25) ? gen.between(2, 3) : 1;
    int64_t span = (k - 1) * dilation + 1;
    int64_t begin = gen.chance(50) ? 0 : gen.between(0, std::min<int64_t>(span - 1, 2));
    int64_t end = gen.chance(50) ? begin : gen.between(0, std::min<int64_t>(span - 1, 2));
    w.kernel.push_back(k);
    w.dilations.push_back(dilation);
    w.strides.push_back(gen.chance(60) ? 1 : gen.between(2, 3));
    w.pads[static_cast<size_t>(d)] = begin;
    w.pads[static_cast<size_t>(spatial + d)] = end;
    int64_t smallest = std::max<int64_t>(1, span - begin - end);
    w.in.push_back(smallest + gen.between(0, spatial == 3 ? 3 : 6) * (gen.large && spatial < 3 ? 4 : 1));
  }
  return w;
}

/// Sets an optional per-dim attribute: written out, written as its default, or left out.
void maybeSet(Gen &gen, ir::AttrMap &attrs, const std::string &name, const std::vector<int64_t> &values,
              int64_t defaultValue) {
  bool isDefault = std::all_of(values.begin(), values.end(), [&](int64_t v) { return v == defaultValue; });
  if (!isDefault || gen.chance(40))
    attrs[name] = values;
}

/// A window's attributes as a conv takes them: each per-dim one set or left out (maybeSet), and
/// groups when there are several (now and then when there is one).
ir::AttrMap windowAttrs(Gen &gen, const Window &w, int64_t groups) {
  ir::AttrMap attrs;
  maybeSet(gen, attrs, "strides", w.strides, 1);
  maybeSet(gen, attrs, "dilations", w.dilations, 1);
  maybeSet(gen, attrs, "pads", w.pads, 0);
  if (groups != 1 || gen.chance(30))
    attrs["groups"] = groups;
  return attrs;
}

int64_t spatialRank(Gen &gen) {
  int r = gen.pick(100);
  return r < 25 ? 1 : r < 85 ? 2 : 3;
}

} // namespace

/// y + bias, broadcast.
GenValue addBias(Gen &gen, const GenValue &y, const GenValue &bias) {
  return gen.emit(OpKind::Add, {y, bias}, {}, y.lo + bias.lo, y.hi + bias.hi,
                  y.fracBits < 0 || bias.fracBits < 0 ? -1 : std::max(y.fracBits, bias.fracBits));
}

/// Now and then, `y` through an activation applied right after its bias: the chains that
/// codegen hands to gemm and conv2d as post ops (codegen/ContractionPostOps.h) when nothing
/// else reads their intermediate values.
GenValue maybeActivation(Gen &gen, const GenValue &y) {
  if (!isFloat(y.dtype()) || !gen.chance(40))
    return y;
  const int r = gen.pick(5);
  if (r == 0)
    return gen.emit(OpKind::Relu, {y}, {}, std::max(0.0, y.lo), std::max(0.0, y.hi), y.fracBits);
  if (r == 1) {
    const double lo = gen.chance(50) ? 0.0 : -0.5, hi = gen.chance(50) ? 6.0 : 0.75;
    return gen.emit(OpKind::Clip, {y}, {{"min", lo}, {"max", hi}}, std::clamp(y.lo, lo, hi), std::clamp(y.hi, lo, hi),
                    y.fracBits);
  }
  if (r == 2)
    return gen.emit(OpKind::Silu, {y}, {}, std::min(-0.3, y.lo), std::max(0.0, y.hi), -1);
  if (r == 3)
    return gen.emit(OpKind::HardSigmoid, {y}, {{"alpha", gen.chance(50) ? 0.2 : 0.5}, {"beta", 0.5}}, 0.0, 1.0, -1);
  return gen.emit(OpKind::HardSwish, {y}, {}, std::min(-0.4, y.lo), std::max(0.0, y.hi), -1);
}

void emitMatMul(Gen &gen, OpKind op) {
  DType dtype = contractionType(gen, true);
  int64_t m = gen.dim(8, 160), k = gen.dim(8, 160), n = gen.dim(8, 160);
  if (gen.chance(5))
    k = 0;
  else if (gen.chance(10))
    n = gen.between(9, 24);
  Shape batch = gen.randomShape(0, 2, 6, false);
  Shape aShape = gen.broadcastableTo(batch), bShape = gen.broadcastableTo(batch);
  bool vectorA = gen.chance(10), vectorB = !vectorA && gen.chance(10);
  if (vectorA)
    aShape = {k};
  else
    aShape.insert(aShape.end(), {m, k});
  if (vectorB)
    bShape = {k};
  else
    bShape.insert(bShape.end(), {k, n});
  GenValue a = gen.noHalf(operandOf(gen, dtype, aShape));
  GenValue b = gen.noHalf(operandOf(gen, dtype, bShape));
  if (gen.chance(20) && bShape.size() >= 2) { // a transposed operand: the library reads it strided
    Shape transposed = bShape;
    std::swap(transposed[transposed.size() - 1], transposed[transposed.size() - 2]);
    std::vector<int64_t> perm;
    for (size_t d = 0; d < bShape.size(); ++d)
      perm.push_back(static_cast<int64_t>(d));
    std::swap(perm[perm.size() - 1], perm[perm.size() - 2]);
    GenValue t = gen.noHalf(operandOf(gen, dtype, transposed));
    b = gen.emit(OpKind::Permute, {t}, {{"perm", perm}}, t.lo, t.hi, t.fracBits);
  }
  double bound;
  int bits;
  productSum(a, b, static_cast<double>(k), bound, bits);
  GenValue y = gen.emit(op, {a, b}, {}, -bound, bound, bits);
  if (isFloat(dtype) && !vectorB && gen.chance(40)) // a bias per column, as a linear layer's
    y = addBias(gen, y, operandOf(gen, dtype, {n}));
  gen.add(maybeActivation(gen, y));
}

void emitConv(Gen &gen, OpKind op) {
  DType dtype = contractionType(gen, false);
  int64_t spatial = spatialRank(gen);
  Window w = randomWindow(gen, spatial, true);
  int64_t batch = gen.between(1, 2);
  int r = gen.pick(100);
  int64_t groups = r < 55 ? 1 : r < 75 ? 2 : r < 85 ? 3 : 0; // 0: depthwise
  int64_t perGroupIn = gen.dim(3, 8), perGroupOut = gen.dim(3, 8);
  if (groups == 0) {
    groups = gen.between(2, 6);
    perGroupIn = 1;
  }
  if (gen.large && op == OpKind::Conv && spatial == 2 && gen.chance(40)) {
    // A deep layer, 3x3 (or 1x1) with stride 1: the runtime's Winograd and direct paths take
    // only such convolutions, with at least 16 channels each way and a few million MACs.
    int64_t k = gen.chance(75) ? 3 : 1;
    w.kernel = {k, k};
    w.strides = {1, 1};
    w.dilations = {1, 1};
    w.pads = gen.chance(70) ? std::vector<int64_t>(4, k / 2) : std::vector<int64_t>(4, 0);
    w.in = {gen.between(12, 32), gen.between(12, 32)};
    groups = 1;
    perGroupIn = gen.between(16, 40);
    perGroupOut = gen.between(16, 40);
    batch = 1;
  }
  int64_t channels = groups * perGroupIn, outChannels = groups * perGroupOut;
  Shape kernelShape(w.kernel.begin(), w.kernel.end());
  ir::AttrMap attrs = windowAttrs(gen, w, groups);
  Shape xShape{batch, channels};
  xShape.insert(xShape.end(), w.in.begin(), w.in.end());
  if (op == OpKind::ConvTranspose) {
    // The input holds the conv's output: its sizes are free; output_padding below the stride.
    std::vector<int64_t> outputPadding;
    for (int64_t d = 0; d < spatial; ++d) {
      int64_t stride = w.strides[static_cast<size_t>(d)], dilation = w.dilations[static_cast<size_t>(d)];
      outputPadding.push_back(gen.chance(70) ? 0 : gen.between(0, std::max(stride, dilation) - 1));
      xShape[static_cast<size_t>(2 + d)] = gen.between(1, spatial == 3 ? 3 : 5);
    }
    maybeSet(gen, attrs, "output_padding", outputPadding, 0);
    Shape weightShape{channels, perGroupOut};
    weightShape.insert(weightShape.end(), kernelShape.begin(), kernelShape.end());
    GenValue x = gen.noHalf(operandOf(gen, dtype, xShape));
    GenValue weight = gen.noHalf(operandOf(gen, dtype, weightShape));
    double bound;
    int bits;
    productSum(x, weight, static_cast<double>(perGroupIn * numElements(kernelShape)), bound, bits);
    GenValue y = gen.emit(op, {x, weight}, attrs, -bound, bound, bits);
    if (y.numElements() > 4 * gen.maxElements())
      return;
    gen.add(y);
    return;
  }
  Shape weightShape{outChannels, perGroupIn};
  weightShape.insert(weightShape.end(), kernelShape.begin(), kernelShape.end());
  GenValue x = gen.noHalf(operandOf(gen, dtype, xShape));
  if (op == OpKind::ConvWeightGrad) {
    // g has the shape conv(x, w) has; the output is the weight's gradient.
    Shape gShape{batch, outChannels};
    for (int64_t d = 0; d < spatial; ++d) {
      size_t i = static_cast<size_t>(d);
      int64_t span = (w.kernel[i] - 1) * w.dilations[i] + 1;
      gShape.push_back((w.in[i] + w.pads[i] + w.pads[i + static_cast<size_t>(spatial)] - span) / w.strides[i] + 1);
    }
    GenValue g = gen.noHalf(operandOf(gen, dtype, gShape));
    attrs["weight_shape"] = std::vector<int64_t>(weightShape);
    double bound;
    int bits;
    productSum(x, g, static_cast<double>(batch * numElements(Shape(gShape.begin() + 2, gShape.end()))), bound, bits);
    gen.add(gen.emit(op, {x, g}, attrs, -bound, bound, bits));
    return;
  }
  GenValue weight = gen.noHalf(operandOf(gen, dtype, weightShape));
  double bound;
  int bits;
  productSum(x, weight, static_cast<double>(perGroupIn * numElements(kernelShape)), bound, bits);
  GenValue y = gen.emit(op, {x, weight}, attrs, -bound, bound, bits);
  if (gen.chance(50)) { // a per-channel bias, which fuses into the convolution's epilogue
    Shape biasShape(static_cast<size_t>(spatial + 1), 1);
    biasShape[0] = outChannels;
    y = addBias(gen, y, operandOf(gen, dtype, biasShape));
  }
  gen.add(maybeActivation(gen, y));
}

void emitPool(Gen &gen, OpKind op) {
  // Max pools of bytes too (what quantized-max-pool makes of a quantized model's pools).
  DType dtype = op == OpKind::MaxPool && gen.chance(25) ? (gen.chance(50) ? DType::U8 : DType::I8)
                                                        : contractionType(gen, false);
  int64_t spatial = spatialRank(gen);
  bool maxPool = op != OpKind::AvgPool;
  Window w = randomWindow(gen, spatial, maxPool);
  Shape xShape{gen.between(1, 2), gen.between(1, 4)};
  xShape.insert(xShape.end(), w.in.begin(), w.in.end());
  ir::AttrMap attrs{{"kernel", w.kernel}};
  maybeSet(gen, attrs, "strides", w.strides, 1);
  maybeSet(gen, attrs, "pads", w.pads, 0);
  if (gen.chance(30))
    attrs["ceil_mode"] = int64_t(1);
  if (maxPool)
    maybeSet(gen, attrs, "dilations", w.dilations, 1);
  else if (gen.chance(50))
    attrs["count_include_pad"] = int64_t(1);
  // max_pool_grad finds the window maxima by comparing x with max_pool(x): x must be exact.
  GenValue x = gen.noHalf(op == OpKind::MaxPoolGrad ? gen.leaf(dtype, xShape, InputDomain::Kind::Signed)
                                                    : operandOf(gen, dtype, xShape));
  if (op == OpKind::AvgPool) {
    gen.add(gen.emit(op, {x}, attrs, std::min(x.lo, 0.0), std::max(x.hi, 0.0), -1));
    return;
  }
  GenValue y = gen.emit(OpKind::MaxPool, {x}, attrs, x.lo, x.hi, x.fracBits);
  if (op == OpKind::MaxPool) {
    gen.add(y);
    return;
  }
  attrs.erase("count_include_pad");
  GenValue g = gen.noHalf(operandOf(gen, dtype, y.shape()));
  double bound = g.maxAbs() * static_cast<double>(numElements(Shape(w.kernel.begin(), w.kernel.end())));
  gen.add(gen.emit(op, {x, y, g}, attrs, -bound, bound, -1));
}

void emitEinsum(Gen &gen, OpKind op) {
  DType dtype = contractionType(gen, true);
  // Letters with sizes; each operand names a few of them (a repeat takes a diagonal), the
  // output a subset of those named (letters left out are summed), in any order.
  int64_t letters = gen.between(1, 5);
  std::vector<char> names;
  std::vector<int64_t> sizes;
  for (int64_t i = 0; i < letters; ++i) {
    names.push_back(gen.chance(15) ? static_cast<char>('A' + i) : static_cast<char>('a' + i));
    sizes.push_back(gen.between(1, 4));
  }
  bool ellipsis = gen.chance(20);
  Shape ellipsisShape = ellipsis ? gen.randomShape(0, 2, 6, false) : Shape{};
  int64_t operands = gen.chance(15) ? 3 : gen.chance(25) ? 1 : 2;
  std::vector<std::string> terms;
  std::vector<GenValue> values;
  std::vector<bool> used(static_cast<size_t>(letters), false);
  for (int64_t k = 0; k < operands; ++k) {
    std::string term;
    Shape shape;
    for (int64_t i : gen.permutation(letters))
      if (gen.chance(55)) {
        term += names[static_cast<size_t>(i)];
        shape.push_back(sizes[static_cast<size_t>(i)]);
        used[static_cast<size_t>(i)] = true;
      }
    if (!term.empty() && gen.chance(10)) { // a repeated letter: the diagonal
      size_t at = static_cast<size_t>(gen.pick(static_cast<int>(term.size())));
      term += term[at];
      shape.push_back(shape[at]);
    }
    if (ellipsis) {
      Shape own = gen.broadcastableTo(ellipsisShape);
      size_t at = static_cast<size_t>(gen.pick(static_cast<int>(term.size()) + 1));
      term.insert(at, "...");
      shape.insert(shape.begin() + static_cast<std::ptrdiff_t>(at), own.begin(), own.end());
    }
    terms.push_back(term);
    values.push_back(gen.noHalf(operandOf(gen, dtype, shape)));
  }
  std::string equation;
  for (size_t k = 0; k < terms.size(); ++k)
    equation += (k ? "," : "") + terms[k];
  if (gen.chance(80)) {
    std::string output = ellipsis && gen.chance(70) ? "..." : "";
    for (int64_t i : gen.permutation(letters))
      if (used[static_cast<size_t>(i)] && gen.chance(50))
        output.insert(static_cast<size_t>(gen.pick(static_cast<int>(output.size()) + 1)), 1, names[static_cast<size_t>(i)]);
    // "..." must stay in one piece: put it back in front when a letter landed inside it.
    if (output.find("...") == std::string::npos && output.find('.') != std::string::npos) {
      output.erase(std::remove(output.begin(), output.end(), '.'), output.end());
      output = "..." + output;
    }
    equation += "->" + output;
  }
  double space = static_cast<double>(numElements(ellipsisShape));
  double bound = 1;
  int bits = 0;
  for (size_t i = 0; i < sizes.size(); ++i)
    space *= static_cast<double>(sizes[i]);
  for (const GenValue &value : values) {
    bound *= value.maxAbs();
    bits = bits < 0 || value.fracBits < 0 ? -1 : bits + value.fracBits;
  }
  if (space > gen.maxElements())
    return;
  gen.add(gen.emit(op, values, {{"equation", equation}}, -bound * space, bound * space, bits));
}

void emitResize(Gen &gen, OpKind op) {
  bool integer = gen.chance(15);
  DType dtype = integer ? gen.intType : contractionType(gen, false);
  Shape shape = gen.randomShape(1, 4, 128, false);
  GenValue x = gen.noHalf(operandOf(gen, dtype, shape));
  // Integers only take nearest: interpolating them truncates, which amplifies the last bit.
  std::string mode = integer ? "nearest" : gen.oneOf<std::string>({"nearest", "linear", "cubic"});
  std::string coordinates =
      gen.oneOf<std::string>({"half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel"});
  std::vector<int64_t> sizes;
  std::vector<double> scales;
  bool withScales = gen.chance(50);
  for (int64_t dim : shape) {
    // The first dims (batch, channels) are usually kept.
    double scale = gen.chance(40) ? 1.0 : gen.oneOf<double>({0.5, 0.75, 1.5, 2.0, 3.0, 1.25});
    int64_t size = std::max<int64_t>(1, static_cast<int64_t>(std::floor(static_cast<double>(dim) * scale)));
    sizes.push_back(size);
    scales.push_back(scale);
  }
  if (numElements(sizes) > gen.maxElements())
    return;
  ir::AttrMap attrs{{"sizes", sizes}, {"mode", mode}, {"coordinate_transformation_mode", coordinates}};
  if (withScales)
    attrs["scales"] = scales;
  if (mode == "nearest")
    attrs["nearest_mode"] = gen.oneOf<std::string>({"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"});
  if (mode == "cubic")
    attrs["cubic_coeff_a"] = gen.oneOf<double>({-0.75, -0.5});
  if (mode != "nearest" && gen.chance(30))
    attrs["exclude_outside"] = int64_t(1);
  if (mode == "nearest") {
    gen.add(gen.emit(op, {x}, attrs, x.lo, x.hi, x.fracBits));
    return;
  }
  // Cubic weights reach outside [0, 1]: the result can overshoot the input's range a little.
  double m = x.maxAbs() * (mode == "cubic" ? 2.0 : 1.0);
  gen.add(gen.emit(op, {x}, attrs, -m, m, -1));
}

void emitRecurrence(Gen &gen, OpKind op) {
  // f32 runs the runtime's recurrent kernel, f64 the unrolled form. Weights are scaled so that
  // h R^T stays within about one unit: the recurrence contracts, and a last-bit difference dies
  // out over the steps.
  const DType dtype = contractionType(gen, false);
  const int64_t gates = op == OpKind::RnnSequence ? 1 : op == OpKind::GruSequence ? 3 : 4;
  const int64_t steps = gen.between(0, gen.large ? 24 : 6), batch = gen.dim(3, 17), hidden = gen.dim(5, 40);
  const std::string direction = gen.oneOf<std::string>({"forward", "reverse", "bidirectional"});
  const int64_t directions = direction == "bidirectional" ? 2 : 1;
  auto operand = [&](const Shape &shape) { return gen.noHalf(operandOf(gen, dtype, shape)); };
  GenValue xw = operand({steps, batch, directions * gates * hidden});
  GenValue r = gen.tame(operand({directions, gates * hidden, hidden}), 1.0 / static_cast<double>(hidden));
  GenValue rb = operand({directions, gates * hidden}), h0 = operand({directions, batch, hidden});
  std::vector<GenValue> operands{xw, r, rb, h0};
  ir::AttrMap attrs{{"direction", direction}};
  if (gen.chance(30))
    attrs["clip"] = gen.gridValue(0.5, 4);
  if (gen.chance(30)) {
    std::vector<int64_t> lengths;
    for (int64_t b = 0; b < batch; ++b)
      lengths.push_back(gen.between(0, steps));
    attrs["lengths"] = lengths;
  }
  // h stays in [-1, 1] (or h0's bounds where an entry never runs); LSTM's c grows by at most
  // one a step.
  double bound = std::max(1.0, h0.maxAbs());
  if (op == OpKind::GruSequence)
    attrs["linear_before_reset"] = int64_t(gen.pick(2));
  if (op == OpKind::LstmSequence) {
    GenValue c0 = operand({directions, batch, hidden});
    operands.push_back(c0);
    if (gen.chance(40))
      operands.push_back(operand({directions, 3 * hidden}));
    if (gen.chance(20))
      attrs["input_forget"] = int64_t(1);
    bound = std::max(bound, c0.maxAbs() + static_cast<double>(steps));
  }
  std::vector<Var> outs = gen.emitMulti(op, operands, attrs);
  for (const Var &out : outs) {
    GenValue value = xw;
    value.var = out;
    value.lo = -bound, value.hi = bound, value.fracBits = -1;
    gen.add(value);
  }
}

/// Now and then, the tail an int8 product's next layer gives it in a QDQ model, which codegen
/// hands the kernel to apply in registers (matchQuantizedStore): a bias along `channelDim`, a
/// residual of the product's shape, ReLU or a clip, then quantize_linear to u8 or i8 with a
/// scale that saturates some values or none. The product then feeds the tail
/// alone; the f32 value before the quantize joins the pool now and then (read elsewhere or an
/// output: the kernel keeps it beside the bytes). Whether it built the tail.
bool quantizedTail(Gen &gen, const GenValue &product, size_t channelDim) {
  if (!gen.chance(60))
    return false;
  const Shape &shape = product.shape();
  GenValue v = product;
  double bound = std::max(std::fabs(v.lo), std::fabs(v.hi));
  if (gen.chance(60)) {
    Shape biasShape(shape.size() - channelDim, 1);
    biasShape[0] = shape[channelDim];
    GenValue bias = gen.chance(50) ? gen.known(DType::F32, biasShape, InputDomain::Kind::Signed)
                                   : gen.leaf(DType::F32, biasShape, InputDomain::Kind::Signed);
    bound += bias.maxAbs();
    v = gen.emit(OpKind::Add, {v, bias}, {}, -bound, bound, -1);
  }
  if (gen.chance(30)) {
    GenValue residual = gen.leaf(DType::F32, shape, InputDomain::Kind::Signed);
    bound += residual.maxAbs();
    v = gen.emit(OpKind::Add, gen.chance(50) ? std::vector<GenValue>{residual, v} : std::vector<GenValue>{v, residual},
                 {}, -bound, bound, -1);
  }
  const int activation = gen.pick(3);
  if (activation == 1)
    v = gen.emit(OpKind::Relu, {v}, {}, 0, bound, -1);
  else if (activation == 2)
    v = gen.emit(OpKind::Clip, {v}, {{"min", -2.0}, {"max", 6.0}}, -2, 6, -1);
  if (shape.size() == 4 && gen.chance(35)) {
    // A max pool before the quantize, which quantized-max-pool moves behind it where it can
    // bound v (a bias or residual that is a graph input leaves the f32 pool in place).
    const int form = gen.pick(3); // 2x2 stride 2; 3x3 stride 2 pad 1; 3x3 stride 1 pad 1
    const int64_t kernel = form == 0 ? 2 : 3, stride = form == 2 ? 1 : 2, pad = form == 0 ? 0 : 1;
    if (shape[2] + 2 * pad >= kernel && shape[3] + 2 * pad >= kernel) {
      ir::AttrMap attrs{{"kernel", std::vector<int64_t>{kernel, kernel}},
                        {"strides", std::vector<int64_t>{stride, stride}},
                        {"pads", std::vector<int64_t>{pad, pad, pad, pad}}};
      v = gen.emit(OpKind::MaxPool, {v}, attrs, v.lo, v.hi, -1);
    }
  }
  const double top = std::max(1.0, std::min(bound, activation == 2 ? 6.0 : bound));
  // A power of two (which simplify-algebra turns into a product) or three quarters of one.
  const double scale = std::exp2(std::ceil(std::log2(top / 128.0)) + static_cast<double>(gen.between(-3, 1))) *
                       (gen.chance(50) ? 1.0 : 0.75);
  const DType dtype = gen.chance(50) ? DType::U8 : DType::I8;
  const int64_t zeroPoint = dtype == DType::U8 ? gen.between(0, 40) : gen.between(-8, 8);
  GenValue zero = gen.scalarConstant(dtype, static_cast<double>(zeroPoint));
  GenValue q = gen.emit(OpKind::QuantizeLinear, {v, gen.scalarConstant(DType::F32, scale), zero}, {},
                        dtype == DType::U8 ? 0 : -128, dtype == DType::U8 ? 255 : 127, 0);
  if (gen.chance(30))
    gen.keepAsOutput(gen.add(v));
  gen.keepAsOutput(gen.add(q));
  return true;
}

void emitQuantizedProduct(Gen &gen, OpKind op) {
  // u8 or i8 rows (batched now and then) times an i8 weight, a zero point inside the
  // activations' range, power-of-two activation scales and a per-column or one weight scale:
  // the int32 sums are exact, and both sides scale them with the same two f32 roundings.
  const DType dtype = gen.chance(50) ? DType::U8 : DType::I8;
  if (op == OpKind::QConv) {
    // A 2-D window of any strides, dilations and pads; one group, a few, or depthwise (which
    // qconv2d runs through exact f32 sums).
    Window w = randomWindow(gen, 2, true);
    const int r = gen.pick(100);
    int64_t groups = r < 60 ? 1 : r < 80 ? 2 : 0, perGroupIn = gen.dim(3, 12), perGroupOut = gen.dim(3, 20);
    if (groups == 0) // depthwise
      groups = gen.between(2, 8), perGroupIn = 1, perGroupOut = 1;
    ir::AttrMap attrs = windowAttrs(gen, w, groups);
    GenValue x = gen.leaf(dtype, {gen.between(1, 2), groups * perGroupIn, w.in[0], w.in[1]},
                          InputDomain::Kind::Signed);
    GenValue weight = gen.leaf(DType::I8, {groups * perGroupOut, perGroupIn, w.kernel[0], w.kernel[1]},
                               InputDomain::Kind::Signed);
    GenValue scale = gen.scalarConstant(DType::F32, gen.chance(50) ? 0.25 : 0.0625);
    GenValue zero = gen.scalarConstant(dtype, static_cast<double>(gen.between(dtype == DType::U8 ? 0 : -5, 5)));
    // Known scales half the time, as a quantized model's are (quantized-max-pool bounds a
    // product only through known scales).
    GenValue channels = gen.chance(60) ? (gen.chance(50) ? gen.known(DType::F32, {groups * perGroupOut},
                                                                     InputDomain::Kind::Positive)
                                                         : gen.leaf(DType::F32, {groups * perGroupOut},
                                                                    InputDomain::Kind::Positive))
                                       : gen.scalarConstant(DType::F32, 0.5);
    const double bound = static_cast<double>(perGroupIn * w.kernel[0] * w.kernel[1]) *
                         (std::max(std::fabs(x.lo), std::fabs(x.hi)) + 128.0) * 128.0 * std::max(1.0, channels.maxAbs());
    GenValue product = gen.emit(op, {x, weight, scale, zero, channels}, attrs, -bound, bound, -1);
    if (!quantizedTail(gen, product, 1))
      gen.add(product);
    return;
  }
  const int64_t m = gen.dim(8, 33), k = gen.dim(20, 70), n = gen.dim(12, 40);
  const Shape shape = gen.chance(30) ? Shape{gen.dim(2, 3), m, k} : Shape{m, k};
  GenValue a = gen.leaf(dtype, shape, InputDomain::Kind::Signed);
  GenValue b = gen.leaf(DType::I8, {k, n}, InputDomain::Kind::Signed);
  GenValue scale = gen.scalarConstant(DType::F32, gen.chance(50) ? 0.25 : 0.0625);
  GenValue zero = gen.scalarConstant(dtype, static_cast<double>(gen.between(dtype == DType::U8 ? 0 : -5, 5)));
  GenValue columns = gen.chance(60) ? gen.leaf(DType::F32, {n}, InputDomain::Kind::Positive)
                                    : gen.scalarConstant(DType::F32, 0.5);
  const double bound = static_cast<double>(k) * (std::max(std::fabs(a.lo), std::fabs(a.hi)) + 128.0) * 128.0 *
                       std::max(1.0, columns.maxAbs());
  GenValue product = gen.emit(op, {a, b, scale, zero, columns}, {}, -bound, bound, -1);
  if (!quantizedTail(gen, product, product.shape().size() - 1))
    gen.add(product);
}

} // namespace kiln::fuzz
