// Emitters of the composites the importer and the nn API produce, which the pipeline
// decomposes into primitives before fusion: softmax and log_softmax, the norms (batch, layer,
// instance, lrn), the activations, linear, the losses and the optimizer updates.
#include <algorithm>
#include <cmath>

#include "tests/fuzz/compile/Generator.h"

namespace kiln::fuzz {

namespace {

GenValue floatValueOfRank(Gen &gen, int minRank, int maxRank) {
  return gen.fromPool(
      [&](const GenValue &v) { return isFloat(v.dtype()) && v.rank() >= minRank && v.rank() <= maxRank; },
      [&] { return gen.leaf(gen.floatType, gen.randomShape(minRank, maxRank), InputDomain::Kind::Signed); });
}

GenValue perChannel(Gen &gen, const GenValue &x, InputDomain::Kind kind) {
  return gen.ofType(x.dtype(), {x.shape()[1]}, kind);
}

/// A symmetric bound of `limit` on a result whose precise range is not worth tracking.
GenValue loose(Gen &gen, GenValue value, double limit) {
  value.lo = -limit, value.hi = limit, value.fracBits = -1;
  return gen.add(value);
}

std::string lossReduction(Gen &gen) { return gen.oneOf<std::string>({"mean", "sum", "none"}); }

} // namespace

void emitNormalization(Gen &gen, OpKind op) {
  double epsilon = gen.oneOf<double>({1e-5, 1e-3, 0.1});
  switch (op) {
  case OpKind::Softmax:
  case OpKind::LogSoftmax: {
    GenValue x = gen.tame(floatValueOfRank(gen, 1, 4), 8);
    auto rank = x.rank();
    GenValue y = gen.emit(op, {x}, {{"axis", gen.between(-rank, rank - 1)}}, 0, 0, -1);
    if (op == OpKind::Softmax)
      y.lo = 0, y.hi = 1, gen.add(y);
    else
      loose(gen, y, 2 * x.maxAbs() + std::log(static_cast<double>(std::max<int64_t>(x.numElements(), 1))));
    return;
  }
  case OpKind::LayerNorm: {
    GenValue x = floatValueOfRank(gen, 1, 4);
    auto rank = x.rank();
    int64_t axis = gen.between(-rank, rank - 1);
    Shape normalized(x.shape().begin() + (axis < 0 ? axis + rank : axis), x.shape().end());
    std::vector<GenValue> operands{x};
    if (gen.chance(70)) {
      operands.push_back(gen.ofType(x.dtype(), normalized));
      if (gen.chance(70))
        operands.push_back(gen.ofType(x.dtype(), normalized));
    }
    double bound = std::sqrt(static_cast<double>(std::max<int64_t>(numElements(normalized), 1))) * 4 + 4;
    loose(gen, gen.emit(op, operands, {{"axis", axis}, {"epsilon", epsilon}}, 0, 0, -1), bound);
    return;
  }
  case OpKind::BatchNorm: {
    GenValue x = floatValueOfRank(gen, 2, 5);
    if (gen.chance(35)) {
      // What fold-batch-norm folds: a conv on known weights (plus a per-channel bias) read by
      // nothing but a batch_norm on known statistics.
      DType dtype = gen.floatType == DType::F64 ? DType::F64 : DType::F32;
      int64_t channels = gen.between(1, 4), outChannels = gen.between(1, 5), k = gen.between(1, 3);
      GenValue image = gen.noHalf(gen.ofType(dtype, {gen.between(1, 2), channels, gen.between(k, 8), gen.between(k, 8)}));
      GenValue weight = gen.known(dtype, {outChannels, channels, k, k}, InputDomain::Kind::Signed);
      double bound = static_cast<double>(channels * k * k) * image.maxAbs() * weight.maxAbs();
      x = gen.emit(OpKind::Conv, {image, weight}, {}, -bound, bound, -1);
      if (gen.chance(50)) {
        GenValue bias = gen.known(dtype, {outChannels, 1, 1}, InputDomain::Kind::Signed);
        x = gen.emit(OpKind::Add, {x, bias}, {}, x.lo + bias.lo, x.hi + bias.hi, -1);
      }
      std::vector<GenValue> operands{x};
      for (InputDomain::Kind kind : {InputDomain::Kind::Signed, InputDomain::Kind::Signed, InputDomain::Kind::Signed,
                                     InputDomain::Kind::Positive})
        operands.push_back(gen.known(dtype, {outChannels}, kind));
      double scaled = (x.maxAbs() + 2) * 2 / std::sqrt(0.25 + epsilon) + 2;
      loose(gen, gen.emit(op, operands, {{"epsilon", epsilon}}, 0, 0, -1), scaled);
      return;
    }
    std::vector<GenValue> operands{x, perChannel(gen, x, InputDomain::Kind::Signed), perChannel(gen, x, InputDomain::Kind::Signed),
                                   perChannel(gen, x, InputDomain::Kind::Signed), perChannel(gen, x, InputDomain::Kind::Positive)};
    if (!(operands[4].lo > 0)) // the variance must be positive
      operands[4] = gen.atLeast(operands[4], 0.25);
    double bound = (x.maxAbs() + operands[3].maxAbs()) * operands[1].maxAbs() / std::sqrt(operands[4].lo + epsilon) +
                   operands[2].maxAbs();
    loose(gen, gen.emit(op, operands, {{"epsilon", epsilon}}, 0, 0, -1), bound);
    return;
  }
  case OpKind::InstanceNorm: {
    GenValue x = floatValueOfRank(gen, 3, 5);
    std::vector<GenValue> operands{x, perChannel(gen, x, InputDomain::Kind::Signed), perChannel(gen, x, InputDomain::Kind::Signed)};
    double count = static_cast<double>(std::max<int64_t>(numElements(Shape(x.shape().begin() + 2, x.shape().end())), 1));
    double bound = std::sqrt(count) * operands[1].maxAbs() + operands[2].maxAbs();
    loose(gen, gen.emit(op, operands, {{"epsilon", epsilon}}, 0, 0, -1), bound);
    return;
  }
  case OpKind::Lrn: {
    GenValue x = gen.noHalf(floatValueOfRank(gen, 2, 4)); // its avg_pool takes no 16-bit floats
    ir::AttrMap attrs{{"size", gen.between(1, 5)}, {"alpha", gen.oneOf<double>({1e-4, 0.5})},
                      {"beta", gen.oneOf<double>({0.75, 0.5, 1.0})}, {"bias", gen.oneOf<double>({1.0, 2.0})}};
    loose(gen, gen.emit(op, {x}, attrs, 0, 0, -1), x.maxAbs());
    return;
  }
  default: return;
  }
}

void emitActivation(Gen &gen, OpKind op) {
  // Activations that jump (thresholded_relu at alpha, shrink at lambd, hardmax at ties) need
  // exact operands; the others are continuous, but their gradients jump at their kinks, so the
  // attributes that place a kink are dyadic (alpha * x + beta on the grid lands on the kink
  // exactly in both, where 0.2 * x + 0.5 computed with and without a fused multiply-add may
  // land on either side of it).
  bool jumps = op == OpKind::ThresholdedRelu || op == OpKind::Shrink || op == OpKind::Hardmax;
  GenValue x = jumps ? gen.exactOperand() : gen.floatOperand();
  if (op != OpKind::Shrink)
    x = gen.asFloat(x);
  if (op == OpKind::HardSwish) // its kinks at +-3 come from x / 6 + 0.5, which is not dyadic
    x = gen.tame(x, 2.5);
  double m = x.maxAbs();
  ir::AttrMap attrs;
  switch (op) {
  case OpKind::Gelu: attrs["approximate"] = gen.oneOf<std::string>({"none", "tanh"}); break;
  case OpKind::Elu:
  case OpKind::Celu: attrs["alpha"] = gen.oneOf<double>({1.0, 0.5, 2.0}); break;
  case OpKind::LeakyRelu: attrs["alpha"] = gen.oneOf<double>({0.01, 0.2, 1.5}); break;
  case OpKind::HardSigmoid:
    attrs["alpha"] = gen.oneOf<double>({0.125, 0.25, 0.5});
    attrs["beta"] = gen.oneOf<double>({0.5, 0.25});
    break;
  case OpKind::ThresholdedRelu: attrs["alpha"] = gen.gridValue(-1, 1.5); break;
  case OpKind::Shrink:
    attrs["lambd"] = isFloat(x.dtype()) ? gen.gridValue(0, 1) : static_cast<double>(gen.between(0, 2));
    attrs["bias"] = isFloat(x.dtype()) ? gen.gridValue(-1, 1) : static_cast<double>(gen.between(-2, 2));
    break;
  case OpKind::Hardmax: {
    if (x.rank() == 0)
      x = gen.reshape(x, {1});
    attrs["axis"] = gen.between(-x.rank(), x.rank() - 1);
    GenValue y = gen.emit(op, {x}, attrs, 0, 1, 0);
    gen.add(y);
    return;
  }
  case OpKind::PRelu: {
    GenValue slope = gen.ofType(x.dtype(), gen.broadcastableTo(x.shape()));
    loose(gen, gen.emit(op, {x, slope}, {}, 0, 0, -1), m * std::max(1.0, slope.maxAbs()));
    return;
  }
  default: break;
  }
  if (op == OpKind::HardSigmoid) {
    gen.add(gen.emit(op, {x}, attrs, 0, 1, -1));
    return;
  }
  if (op == OpKind::Shrink) {
    double bound = m + std::fabs(std::get<double>(attrs["bias"]));
    GenValue y = gen.emit(op, {x}, attrs, -bound, bound, x.fracBits < 0 ? -1 : std::max(x.fracBits, 3));
    gen.add(y);
    return;
  }
  loose(gen, gen.emit(op, {x}, attrs, 0, 0, -1), 2.2 * m + 2);
}

void emitLinear(Gen &gen, OpKind op) {
  GenValue x = gen.fromPool([](const GenValue &v) { return isFloat(v.dtype()) && v.rank() >= 1 && v.rank() <= 3; },
                            [&] { return gen.leaf(gen.floatType, gen.randomShape(1, 3), InputDomain::Kind::Signed); });
  x = gen.noHalf(x); // its matmul takes no 16-bit floats
  int64_t in = x.shape().back(), out = gen.between(1, 8);
  std::vector<GenValue> operands{x, gen.ofType(x.dtype(), {out, in})};
  if (gen.chance(60))
    operands.push_back(gen.ofType(x.dtype(), {out}));
  double bound = static_cast<double>(std::max<int64_t>(in, 1)) * x.maxAbs() * operands[1].maxAbs() +
                 (operands.size() > 2 ? operands[2].maxAbs() : 0);
  int bits = x.fracBits < 0 || operands[1].fracBits < 0 ? -1 : x.fracBits + operands[1].fracBits;
  if (operands.size() > 2 && operands[2].fracBits < 0)
    bits = -1;
  gen.add(gen.emit(op, operands, {}, -bound, bound, bits));
}

void emitLoss(Gen &gen, OpKind op) {
  std::string reduction = lossReduction(gen);
  switch (op) {
  case OpKind::MseLoss: {
    GenValue prediction = gen.floatOperand();
    GenValue target = gen.ofType(prediction.dtype(), prediction.shape());
    double d = prediction.maxAbs() + target.maxAbs();
    GenValue y = gen.emit(op, {prediction, target}, {{"reduction", reduction}}, 0, 0, -1);
    loose(gen, y, d * d * (reduction == "sum" ? static_cast<double>(std::max<int64_t>(prediction.numElements(), 1)) : 1.0));
    return;
  }
  case OpKind::CrossEntropy:
  case OpKind::NllLoss: {
    int64_t n = gen.between(1, 6), classes = gen.between(1, 6);
    Shape shape{n, classes}, targetShape{n};
    if (op == OpKind::NllLoss && gen.chance(30))
      for (int64_t extra = gen.between(1, 2); extra > 0; --extra) {
        int64_t dim = gen.between(1, 3);
        shape.push_back(dim);
        targetShape.push_back(dim);
      }
    GenValue logits = gen.tame(gen.ofType(gen.floatType, shape), 8);
    GenValue labels = gen.input(gen.chance(30) ? DType::I32 : DType::I64, targetShape, InputDomain::Kind::Index, {classes});
    std::vector<GenValue> operands{logits, labels};
    ir::AttrMap attrs{{"reduction", reduction}};
    if (op == OpKind::NllLoss) {
      if (gen.chance(40))
        operands.push_back(gen.ofType(gen.floatType, {classes}, InputDomain::Kind::Positive));
      if (gen.chance(30))
        attrs["ignore_index"] = gen.between(-classes, classes - 1);
    }
    double bound = 2 * logits.maxAbs() + std::log(static_cast<double>(classes)) + 1;
    if (operands.size() > 2)
      bound *= operands[2].maxAbs() / std::max(operands[2].lo, 0.125);
    if (reduction == "sum")
      bound *= static_cast<double>(numElements(targetShape));
    loose(gen, gen.emit(op, operands, attrs, 0, 0, -1), bound);
    return;
  }
  default: return;
  }
}

void emitOptimizer(Gen &gen, OpKind op) {
  GenValue param = gen.floatOperand();
  DType dtype = param.dtype();
  const Shape &shape = param.shape();
  GenValue grad = gen.ofType(dtype, shape);
  GenValue lr = gen.scalarConstant(dtype, gen.oneOf<double>({0.5, 0.125, 0.01}));
  double bound = param.maxAbs() + 4 * grad.maxAbs() + 4;
  if (op == OpKind::SgdUpdate) {
    double momentum = gen.chance(50) ? 0.0 : gen.oneOf<double>({0.9, 0.5});
    bool nesterov = momentum > 0 && gen.chance(40);
    ir::AttrMap attrs{{"momentum", momentum}, {"weight_decay", gen.oneOf<double>({0.0, 0.0, 0.01})},
                      {"nesterov", int64_t(nesterov)}};
    if (!nesterov && momentum > 0 && gen.chance(30))
      attrs["dampening"] = 0.25;
    std::vector<GenValue> operands{param, grad, lr};
    if (momentum > 0) {
      GenValue buffer = gen.ofType(dtype, shape);
      operands.push_back(buffer);
      operands.push_back(gen.scalarConstant(dtype, static_cast<double>(gen.between(1, 3))));
      bound += 2 * buffer.maxAbs();
    }
    std::vector<Var> outs = gen.emitMulti(op, operands, attrs);
    for (const Var &out : outs) {
      GenValue value = param;
      value.var = out;
      loose(gen, value, bound);
    }
    return;
  }
  GenValue expAvg = gen.ofType(dtype, shape);
  GenValue expAvgSq = gen.atLeast(gen.ofType(dtype, shape, InputDomain::Kind::Positive), 0.25);
  GenValue step = gen.scalarConstant(dtype, static_cast<double>(gen.between(1, 4)));
  ir::AttrMap attrs{{"beta1", gen.oneOf<double>({0.9, 0.0, 0.5})}, {"beta2", gen.oneOf<double>({0.999, 0.9})},
                    {"eps", gen.oneOf<double>({1e-3, 0.1})}, {"weight_decay", gen.oneOf<double>({0.0, 0.01})},
                    {"decoupled", int64_t(gen.pick(2))}};
  std::vector<Var> outs = gen.emitMulti(op, {param, grad, expAvg, expAvgSq, lr, step}, attrs);
  for (const Var &out : outs) {
    GenValue value = param;
    value.var = out;
    loose(gen, value, bound + expAvg.maxAbs() + expAvgSq.maxAbs() + 100);
  }
}

} // namespace kiln::fuzz
