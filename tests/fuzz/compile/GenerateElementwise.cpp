// Emitters of the elementwise ops: unary math with its domain guards, binary arithmetic with
// broadcasting, comparisons and logic on exact values, where, cast between every dtype, clip,
// the sources (iota, random_uniform) and NaN/infinity handling.
#include <algorithm>
#include <cmath>
#include <limits>

#include "tests/fuzz/compile/Generator.h"

namespace kiln::fuzz {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

int combinedGrid(const GenValue &a, const GenValue &b) {
  return a.fracBits < 0 || b.fracBits < 0 ? -1 : std::max(a.fracBits, b.fracBits);
}

/// The smallest and largest of f over the corners of [a.lo, a.hi] x [b.lo, b.hi] (right for
/// functions monotone in each argument: +, -, *, /, pow on positive bases).
template <typename F> std::pair<double, double> cornerBounds(const GenValue &a, const GenValue &b, F f) {
  double values[] = {f(a.lo, b.lo), f(a.lo, b.hi), f(a.hi, b.lo), f(a.hi, b.hi)};
  return {*std::min_element(std::begin(values), std::end(values)), *std::max_element(std::begin(values), std::end(values))};
}

} // namespace

void emitUnaryFloat(Gen &gen, OpKind op) {
  GenValue x = gen.floatOperand();
  double lo = -1, hi = 1;
  switch (op) {
  case OpKind::Exp:
  case OpKind::Expm1:
  case OpKind::Sinh:
  case OpKind::Cosh: {
    x = gen.tame(x, 4);
    double m = x.maxAbs();
    if (op == OpKind::Exp)
      lo = std::exp(x.lo), hi = std::exp(x.hi);
    else if (op == OpKind::Expm1)
      lo = std::expm1(x.lo), hi = std::expm1(x.hi);
    else if (op == OpKind::Sinh)
      lo = std::sinh(x.lo), hi = std::sinh(x.hi);
    else
      lo = 1, hi = std::cosh(m);
    break;
  }
  case OpKind::Log:
  case OpKind::Sqrt:
  case OpKind::Rsqrt:
  case OpKind::Reciprocal:
    // Away from 0, where these (or their gradients) blow up and a last-bit difference matters.
    x = gen.atLeast(x, 0.25);
    if (op == OpKind::Log)
      lo = std::log(x.lo), hi = std::log(x.hi);
    else if (op == OpKind::Sqrt)
      lo = std::sqrt(x.lo), hi = std::sqrt(x.hi);
    else if (op == OpKind::Rsqrt)
      lo = 1 / std::sqrt(x.hi), hi = 1 / std::sqrt(x.lo);
    else
      lo = 1 / x.hi, hi = 1 / x.lo;
    break;
  case OpKind::Log1p:
    x = gen.atLeast(x, 0);
    lo = std::log1p(x.lo), hi = std::log1p(x.hi);
    break;
  case OpKind::Tan:
    x = gen.tame(x, 1.2);
    lo = std::tan(x.lo), hi = std::tan(x.hi);
    break;
  case OpKind::Asin:
  case OpKind::Acos:
    x = gen.tame(x, 0.9);
    lo = op == OpKind::Asin ? std::asin(x.lo) : std::acos(x.hi);
    hi = op == OpKind::Asin ? std::asin(x.hi) : std::acos(x.lo);
    break;
  case OpKind::Tanh: lo = std::tanh(x.lo), hi = std::tanh(x.hi); break;
  case OpKind::Sigmoid: lo = 1 / (1 + std::exp(-x.lo)), hi = 1 / (1 + std::exp(-x.hi)); break;
  case OpKind::Erf: lo = std::erf(x.lo), hi = std::erf(x.hi); break;
  case OpKind::Atan: lo = std::atan(x.lo), hi = std::atan(x.hi); break;
  case OpKind::Asinh: lo = std::asinh(x.lo), hi = std::asinh(x.hi); break;
  case OpKind::Acosh: // inside its domain and away from 1, where its gradient blows up
    x = gen.atLeast(x, 1.25);
    lo = std::acosh(x.lo), hi = std::acosh(x.hi);
    break;
  case OpKind::Atanh: // away from +-1, where it and its gradient blow up
    x = gen.tame(x, 0.9);
    lo = std::atanh(x.lo), hi = std::atanh(x.hi);
    break;
  default: break; // sin, cos: [-1, 1]
  }
  gen.add(gen.emit(op, {x}, {}, lo, hi, -1));
}

void emitUnaryNumeric(Gen &gen, OpKind op) {
  switch (op) {
  case OpKind::Neg: {
    GenValue x = gen.numericOperand();
    gen.add(gen.emit(op, {x}, {}, -x.hi, -x.lo, x.fracBits));
    return;
  }
  case OpKind::Abs: {
    GenValue x = gen.numericOperand();
    double lo = x.lo >= 0 ? x.lo : x.hi <= 0 ? -x.hi : 0;
    gen.add(gen.emit(op, {x}, {}, lo, x.maxAbs(), x.fracBits));
    return;
  }
  case OpKind::Relu: {
    GenValue x = gen.numericOperand();
    gen.add(gen.emit(op, {x}, {}, std::max(0.0, x.lo), std::max(0.0, x.hi), x.fracBits));
    return;
  }
  default: break;
  }
  // floor, ceil, round, sign jump at integers (or 0): their operand must be exact.
  GenValue x = gen.exactOperand();
  if (op == OpKind::Sign)
    gen.add(gen.emit(op, {x}, {}, x.lo < 0 ? -1 : x.lo > 0 ? 1 : 0, x.hi > 0 ? 1 : x.hi < 0 ? -1 : 0, 0));
  else
    gen.add(gen.emit(op, {x}, {}, std::floor(x.lo), std::ceil(x.hi), 0));
}

void emitBoolUnary(Gen &gen, OpKind op) {
  if (op == OpKind::Not) {
    gen.add(gen.emit(op, {gen.boolOperand()}, {}, 0, 1, 0));
    return;
  }
  GenValue x = gen.chance(50) ? gen.floatOperand() : gen.input(gen.floatType, gen.randomShape(0, 4), InputDomain::Kind::Wild);
  gen.add(gen.emit(op, {x}, {}, 0, 1, 0));
}

void emitArithmetic(Gen &gen, OpKind op) {
  bool discontinuous = op == OpKind::Mod;
  GenValue a = discontinuous ? gen.exactOperand() : gen.numericOperand();
  DType dtype = a.dtype();
  bool floating = isFloat(dtype);
  switch (op) {
  case OpKind::Add:
  case OpKind::Sub:
  case OpKind::Mul:
  case OpKind::Max:
  case OpKind::Min: {
    GenValue b = gen.chance(8) ? a : gen.partner(dtype, a.shape());
    auto [lo, hi] = cornerBounds(a, b, [op](double x, double y) {
      switch (op) {
      case OpKind::Add: return x + y;
      case OpKind::Sub: return x - y;
      case OpKind::Mul: return x * y;
      case OpKind::Max: return std::max(x, y);
      default: return std::min(x, y);
      }
    });
    if (op == OpKind::Sub) // corners of a - b: lo - hi and hi - lo
      lo = a.lo - b.hi, hi = a.hi - b.lo;
    int bits = op == OpKind::Mul ? (a.fracBits < 0 || b.fracBits < 0 ? -1 : a.fracBits + b.fracBits)
                                 : combinedGrid(a, b);
    gen.add(gen.emit(op, {a, b}, {}, lo, hi, bits));
    return;
  }
  case OpKind::Div: {
    // A divisor away from 0, of either sign.
    GenValue b = gen.atLeast(gen.partner(dtype, a.shape(), InputDomain::Kind::Positive), floating ? 0.25 : 1);
    if (gen.chance(30))
      b = gen.emit(OpKind::Neg, {b}, {}, -b.hi, -b.lo, b.fracBits);
    auto [lo, hi] = cornerBounds(a, b, [](double x, double y) { return x / y; });
    if (!floating) // truncation toward zero stays inside the corners' hull widened to 0
      lo = std::min(lo, 0.0), hi = std::max(hi, 0.0);
    gen.add(gen.emit(op, {a, b}, {}, lo, hi, floating ? -1 : 0));
    return;
  }
  case OpKind::Pow: {
    if (floating) {
      GenValue base = gen.atLeast(a, 0.25);
      GenValue exponent = gen.tame(gen.partner(dtype, a.shape()), 3);
      auto [lo, hi] = cornerBounds(base, exponent, [](double x, double y) { return std::pow(x, y); });
      gen.add(gen.emit(op, {base, exponent}, {}, lo, hi, -1));
    } else {
      GenValue base = gen.emit(OpKind::Clip, {a}, {{"min", -3.0}, {"max", 3.0}}, -3, 3, 0);
      GenValue exponent = gen.atLeast(gen.partner(dtype, a.shape(), InputDomain::Kind::NonNegative), 0);
      exponent = gen.emit(OpKind::Clip, {exponent}, {{"min", 0.0}, {"max", 4.0}}, 0, 4, 0);
      gen.add(gen.emit(op, {base, exponent}, {}, -81, 81, 0));
    }
    return;
  }
  case OpKind::Mod: {
    GenValue b = gen.partner(dtype, a.shape(), InputDomain::Kind::Positive);
    if (!isExact(b))
      b = gen.scalarConstant(dtype, floating ? 0.75 : 3);
    b = gen.atLeast(b, floating ? 0.25 : 1);
    if (gen.chance(30))
      b = gen.emit(OpKind::Neg, {b}, {}, -b.hi, -b.lo, b.fracBits);
    double m = b.maxAbs();
    int64_t truncated = gen.chance(50);
    gen.add(gen.emit(op, {a, b}, {{"fmod", truncated}}, -m, m, combinedGrid(a, b)));
    return;
  }
  default: break;
  }
}

void emitComparison(Gen &gen, OpKind op) {
  bool equality = op == OpKind::Eq || op == OpKind::Ne;
  GenValue a = equality && gen.chance(20) ? gen.boolOperand() : gen.exactOperand();
  GenValue b = gen.chance(10) ? a : gen.partner(a.dtype(), a.shape());
  if (!isExact(b))
    b = gen.scalarConstant(a.dtype(), a.dtype() == DType::Bool ? 1 : 0);
  gen.add(gen.emit(op, {a, b}, {}, 0, 1, 0));
}

void emitLogical(Gen &gen, OpKind op) {
  GenValue a = gen.boolOperand();
  GenValue b = gen.partner(DType::Bool, a.shape(), InputDomain::Kind::Bool);
  gen.add(gen.emit(op, {a, b}, {}, 0, 1, 0));
}

void emitWhere(Gen &gen, OpKind op) {
  GenValue x = gen.chance(10) ? gen.boolOperand() : gen.numericOperand();
  GenValue y = gen.partner(x.dtype(), x.shape());
  GenValue cond = gen.partner(DType::Bool, x.shape(), InputDomain::Kind::Bool);
  if (gen.chance(30) && isExact(x)) // a condition computed in the same kernel
    cond = gen.emit(OpKind::Gt, {x, gen.scalarConstant(x.dtype(), 0)}, {}, 0, 1, 0);
  gen.add(gen.emit(op, {cond, x, y}, {}, std::min(x.lo, y.lo), std::max(x.hi, y.hi), combinedGrid(x, y)));
}

void emitCast(Gen &gen, OpKind) {
  GenValue x = gen.fromPool([](const GenValue &) { return true; }, [&] { return gen.numericOperand(); });
  std::vector<DType> targets = {DType::F32, DType::F64, DType::F16, DType::BF16, DType::I32,
                                DType::I64, DType::I8,  DType::U8,  DType::Bool};
  DType to = gen.oneOf(targets);
  // A float that is not exact must stay a float: truncation or != 0 would amplify its last bit.
  if (isFloat(x.dtype()) && !isFloat(to) && !isExact(x))
    to = gen.oneOf<DType>({DType::F32, DType::F64, DType::F16, DType::BF16});
  if (to == x.dtype())
    to = isFloat(to) ? (to == DType::F32 ? DType::F64 : DType::F32) : DType::F32;
  gen.add(gen.cast(x, to));
}

void emitClip(Gen &gen, OpKind op) {
  GenValue x = gen.numericOperand();
  double min = gen.gridValue(-2, 1), max = min + gen.gridValue(0, 2);
  int form = gen.pick(4);
  if (form == 1)
    min = -kInf;
  else if (form == 2)
    max = kInf;
  if (!isFloat(x.dtype()) && gen.chance(50)) // integer bounds now and then off the integers
    min = std::isfinite(min) ? min + 0.5 : min;
  double lo = std::clamp(x.lo, min, std::max(min, max)), hi = std::clamp(x.hi, min, std::max(min, max));
  int bits = x.fracBits < 0 ? -1 : std::max(x.fracBits, 3);
  gen.add(gen.emit(op, {x}, {{"min", min}, {"max", max}}, std::min(lo, hi), std::max(lo, hi), bits));
}

void emitSource(Gen &gen, OpKind op) {
  Shape shape = gen.randomShape(op == OpKind::Iota ? 1 : 0, 4);
  if (op == OpKind::Iota) {
    auto axis = gen.between(-static_cast<int64_t>(shape.size()), static_cast<int64_t>(shape.size()) - 1);
    DType dtype = gen.oneOf<DType>({DType::I64, DType::I32, DType::F32, DType::F64, gen.floatType, DType::I8});
    int64_t dim = shape[static_cast<size_t>(axis < 0 ? axis + static_cast<int64_t>(shape.size()) : axis)];
    gen.add(gen.emit(op, {}, {{"shape", std::vector<int64_t>(shape)}, {"axis", axis}, {"dtype", dtype}}, 0,
                     static_cast<double>(std::max<int64_t>(dim - 1, 0)), 0));
    return;
  }
  DType dtype = gen.chance(70) ? DType::F32 : DType::F64;
  int bits = dtype == DType::F32 ? 24 : 53;
  auto seed = static_cast<int64_t>(gen.nextSeed() >> gen.pick(64));
  ir::AttrMap attrs{{"shape", std::vector<int64_t>(shape)}, {"dtype", dtype}, {"seed", seed}};
  std::vector<GenValue> offset;
  if (gen.chance(50))
    offset.push_back(gen.input(gen.chance(70) ? DType::I64 : DType::F32, {}, InputDomain::Kind::NonNegative));
  // Bit-identical in both by design, so exact: comparisons on random numbers are safe.
  gen.add(gen.emit(op, offset, attrs, 0, 1 - std::ldexp(1.0, -bits), bits));
}

void emitSpecialValues(Gen &gen, OpKind op) {
  GenValue w = gen.input(gen.floatType, gen.randomShape(1, 3), InputDomain::Kind::Wild);
  if (op == OpKind::IsNan || op == OpKind::IsInf) {
    gen.add(gen.emit(op, {w}, {}, 0, 1, 0));
    return;
  }
  // Everything here keeps the finite elements on the grid in [-2, 2]: only NaN and the
  // infinities need to be replaced before the result joins the pool.
  GenValue y;
  // The bounds of the finite elements of w combined with another operand's.
  auto joined = [&](const GenValue &other) {
    GenValue bounds = other;
    bounds.lo = std::min(-2.0, other.lo), bounds.hi = std::max(2.0, other.hi);
    bounds.fracBits = other.fracBits < 0 ? -1 : std::max(3, other.fracBits);
    return bounds;
  };
  switch (gen.pick(9)) {
  case 0: {
    GenValue b = joined(gen.partner(w.dtype(), w.shape()));
    b.var = gen.emit(gen.chance(50) ? OpKind::Max : OpKind::Min, {w, b}, {}, 0, 0, 0).var;
    y = b;
    break;
  }
  case 1: {
    auto axis = gen.between(0, w.rank() - 1);
    auto count = static_cast<double>(w.shape()[static_cast<size_t>(axis)]);
    OpKind reduce = gen.oneOf<OpKind>({OpKind::ReduceMax, OpKind::ReduceMin, OpKind::ReduceSum});
    if (count == 0 && reduce != OpKind::ReduceSum)
      return;
    y = gen.emit(reduce, {w}, {{"axes", std::vector<int64_t>{axis}}, {"keepdims", int64_t(gen.pick(2))}},
                 -2 * std::max(count, 1.0), 2 * std::max(count, 1.0), 3);
    break;
  }
  case 2: {
    auto axis = gen.between(0, w.rank() - 1);
    if (w.shape()[static_cast<size_t>(axis)] == 0)
      return;
    OpKind arg = gen.chance(50) ? OpKind::ArgMax : OpKind::ArgMin;
    gen.add(gen.emit(arg, {w}, {{"axis", axis}, {"select_last_index", int64_t(gen.pick(2))}}, 0, 16, 0));
    return;
  }
  case 3: gen.add(gen.cast(w, gen.oneOf<DType>({DType::I32, DType::I64, DType::Bool, DType::U8}))); return;
  case 4:
    y = gen.emit(gen.oneOf<OpKind>({OpKind::Relu, OpKind::Abs, OpKind::Neg, OpKind::Sign, OpKind::Floor}), {w}, {},
                 -2, 2, 3);
    break;
  case 5: y = gen.emit(OpKind::Clip, {w}, {{"min", -1.0}, {"max", 1.5}}, -1, 1.5, 3); break;
  case 6: {
    OpKind cmp = gen.oneOf<OpKind>({OpKind::Lt, OpKind::Le, OpKind::Gt, OpKind::Ge, OpKind::Eq, OpKind::Ne});
    GenValue b = gen.partner(w.dtype(), w.shape());
    if (!isExact(b))
      b = gen.scalarConstant(w.dtype(), 0.5);
    gen.add(gen.emit(cmp, {w, b}, {}, 0, 1, 0));
    return;
  }
  case 7:
    y = gen.cast(w, w.dtype() == DType::F64 ? DType::F32 : DType::F64);
    y.lo = -2, y.hi = 2, y.fracBits = 3;
    break;
  default: {
    GenValue b = joined(gen.partner(w.dtype(), w.shape()));
    GenValue cond = gen.partner(DType::Bool, w.shape(), InputDomain::Kind::Bool);
    b.var = gen.emit(OpKind::Where, {cond, w, b}, {}, 0, 0, 0).var;
    y = b;
    break;
  }
  }
  GenValue nan = gen.emit(OpKind::IsNan, {y}, {}, 0, 1, 0);
  GenValue inf = gen.emit(OpKind::IsInf, {y}, {}, 0, 1, 0);
  GenValue special = gen.emit(OpKind::Or, {nan, inf}, {}, 0, 1, 0);
  GenValue zero = gen.scalarConstant(y.dtype(), 0);
  gen.add(gen.emit(OpKind::Where, {special, zero, y}, {}, std::min(y.lo, 0.0), std::max(y.hi, 0.0), y.fracBits));
}

} // namespace kiln::fuzz
