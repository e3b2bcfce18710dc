// The generator's state and helpers (declared in Generator.h): randomness, shapes, the value
// pool, operands with known bounds, and the guards that keep values in the domains and
// magnitudes the reference comparison needs.
#include "tests/fuzz/compile/Generator.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/Error.h"

namespace kiln::fuzz {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

int mantissaBits(DType dtype) {
  switch (dtype) {
  case DType::F32: return 24;
  case DType::F64: return 53;
  case DType::F16: return 11;
  case DType::BF16: return 8;
  default: return 63;
  }
}

/// The range of an integer dtype, as doubles.
std::pair<double, double> intRange(DType dtype) {
  switch (dtype) {
  case DType::I64: return {-9.2e18, 9.2e18};
  case DType::I32: return {-2147483648.0, 2147483647.0};
  case DType::I8: return {-128, 127};
  case DType::U8: return {0, 255};
  case DType::Bool: return {0, 1};
  default: return {-kInf, kInf};
  }
}

/// Whether a value of shape `from` broadcasts (numpy rules) to exactly `to`.
bool broadcastsTo(const Shape &from, const Shape &to) {
  if (from.size() > to.size())
    return false;
  size_t offset = to.size() - from.size();
  for (size_t d = 0; d < from.size(); ++d)
    if (from[d] != 1 && from[d] != to[d + offset])
      return false;
  return true;
}

/// The smallest grid (fracBits) that `value` lies on, or -1 when it needs more than 30 bits.
int gridOf(double value) {
  for (int bits = 0; bits <= 30; ++bits)
    if (std::ldexp(value, bits) == std::floor(std::ldexp(value, bits)))
      return bits;
  return -1;
}

} // namespace

double GenValue::maxAbs() const { return std::max(std::fabs(lo), std::fabs(hi)); }

bool isExact(const GenValue &value) {
  if (!isFloat(value.dtype()))
    return true;
  if (value.fracBits < 0 || !std::isfinite(value.lo) || !std::isfinite(value.hi))
    return false;
  return std::ldexp(value.maxAbs(), value.fracBits) < std::ldexp(1.0, mantissaBits(value.dtype()));
}

Gen::Gen(uint64_t seed, frontend::GraphBuilder &builder) : gb(builder), rng_(mixSeed(seed)) {
  int f = pick(100);
  floatType = f < 60 ? DType::F32 : f < 75 ? DType::F64 : f < 87 ? DType::F16 : DType::BF16;
  intType = chance(50) ? DType::I64 : DType::I32;
  large = chance(5);
}

int Gen::pick(int n) { return static_cast<int>(rng_() % static_cast<uint64_t>(n)); }

int64_t Gen::between(int64_t lo, int64_t hi) {
  return lo + static_cast<int64_t>(rng_() % static_cast<uint64_t>(hi - lo + 1));
}

bool Gen::chance(int percent) { return pick(100) < percent; }

double Gen::gridValue(double lo, double hi) {
  auto a = static_cast<int64_t>(std::ceil(lo * 8)), b = static_cast<int64_t>(std::floor(hi * 8));
  return static_cast<double>(between(a, std::max(a, b))) / 8.0;
}

std::vector<int64_t> Gen::permutation(int64_t n) {
  std::vector<int64_t> perm(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    perm[static_cast<size_t>(i)] = i;
  for (int64_t i = n - 1; i > 0; --i)
    std::swap(perm[static_cast<size_t>(i)], perm[static_cast<size_t>(between(0, i))]);
  return perm;
}

Shape Gen::randomShape(int minRank, int maxRank, int64_t maxElements, bool allowEmpty) {
  auto rank = static_cast<size_t>(between(minRank, maxRank));
  Shape shape(rank);
  for (int64_t &dim : shape) {
    int r = pick(100);
    dim = r < 70 ? between(1, 4) : r < 90 ? between(5, 8) : between(9, 16);
    if (large && chance(60))
      dim *= between(2, 12);
  }
  if (large)
    maxElements *= 64;
  if (allowEmpty && rank > 0 && chance(3))
    shape[static_cast<size_t>(pick(static_cast<int>(rank)))] = 0;
  while (numElements(shape) > std::min(maxElements, this->maxElements())) {
    auto largest = std::max_element(shape.begin(), shape.end());
    *largest = (*largest + 1) / 2;
  }
  return shape;
}

Shape Gen::broadcastableTo(const Shape &shape) {
  Shape out = shape;
  for (int64_t &dim : out)
    if (chance(30))
      dim = 1;
  if (!out.empty() && chance(30))
    out.erase(out.begin(), out.begin() + pick(static_cast<int>(out.size()) + 1));
  return out;
}

GenValue Gen::add(GenValue value) {
  if (isFloat(value.dtype()) && std::isfinite(value.maxAbs()) && value.maxAbs() > kMaxMagnitude)
    value = tame(value, kMaxMagnitude);
  if (isInteger(value.dtype()) && value.maxAbs() > 1 << 20) {
    // Wrapped or large integers: clip (exact in both) back to a range casts to floats keep.
    value = emit(OpKind::Clip, {value}, {{"min", -1000.0}, {"max", 1000.0}}, -1000, 1000, 0);
    if (value.dtype() == DType::U8)
      value.lo = 0;
  }
  pool_.push_back(value);
  return value;
}

namespace {

/// What a value of `dtype` drawn from `domain` is known to hold (no var yet).
GenValue boundsOf(DType dtype, const InputDomain &domain) {
  GenValue value;
  bool floatValues = isFloat(dtype) && domain.kind != InputDomain::Kind::Index;
  value.fracBits = floatValues ? 3 : 0;
  switch (domain.kind) {
  case InputDomain::Kind::Signed: value.lo = floatValues ? -2 : -8, value.hi = floatValues ? 2 : 8; break;
  case InputDomain::Kind::Positive: value.lo = floatValues ? 0.25 : 1, value.hi = floatValues ? 2 : 8; break;
  case InputDomain::Kind::NonNegative: value.lo = 0, value.hi = floatValues ? 2 : 8; break;
  case InputDomain::Kind::Unrounded:
    value.lo = floatValues ? -1 : -8, value.hi = floatValues ? 1 : 8;
    value.fracBits = floatValues ? -1 : 0;
    break;
  case InputDomain::Kind::Wild: value.lo = -kInf, value.hi = kInf, value.fracBits = -1; break;
  case InputDomain::Kind::Bool: value.lo = 0, value.hi = 1, value.fracBits = 0; break;
  case InputDomain::Kind::Index: {
    int64_t largest = domain.dims.empty() ? 0 : *std::max_element(domain.dims.begin(), domain.dims.end());
    value.lo = static_cast<double>(-largest), value.hi = static_cast<double>(std::max<int64_t>(largest - 1, 0));
    value.fracBits = 0;
    break;
  }
  }
  if (dtype == DType::Bool)
    value.lo = 0, value.hi = 1;
  if (dtype == DType::U8)
    value.lo = std::max(value.lo, 0.0);
  return value;
}

} // namespace

GenValue Gen::input(DType dtype, const Shape &shape, InputDomain::Kind kind, std::vector<int64_t> indexDims) {
  InputDomain domain{kind, std::move(indexDims)};
  GenValue value = boundsOf(dtype, domain);
  value.var = gb.input(inputName(domain, inputs_++), dtype, shape);
  return value;
}

GenValue Gen::leaf(DType dtype, const Shape &shape, InputDomain::Kind kind, std::vector<int64_t> indexDims) {
  if (kind == InputDomain::Kind::Index || kind == InputDomain::Kind::Wild || chance(80))
    return input(dtype, shape, kind, std::move(indexDims));
  // The same values as a constant (small ones become literals in the generated source, large
  // ones weights) or as an initialised parameter (a weight).
  return known(dtype, shape, kind);
}

GenValue Gen::known(DType dtype, const Shape &shape, InputDomain::Kind kind) {
  InputDomain domain{kind, {}};
  GenValue value = boundsOf(dtype, domain);
  Tensor data = makeInput({dtype, shape}, domain, nextSeed());
  value.var = chance(60) ? gb.constant(data) : gb.param("param_" + std::to_string(params_++), data);
  return value;
}

GenValue Gen::scalarConstant(DType dtype, double v) {
  GenValue value;
  value.var = gb.constant(Tensor::scalar(dtype, v));
  value.lo = value.hi = v;
  value.fracBits = gridOf(v);
  if (dtype == DType::Bool)
    value.lo = value.hi = v != 0;
  return value;
}

GenValue Gen::floatOperand(int maxRank) {
  return fromPool([&](const GenValue &v) { return isFloat(v.dtype()) && v.rank() <= maxRank; },
                  [&] {
                    return leaf(floatType, randomShape(0, maxRank),
                                chance(20) ? InputDomain::Kind::Unrounded : InputDomain::Kind::Signed);
                  });
}

GenValue Gen::numericOperand(int maxRank) {
  return fromPool([&](const GenValue &v) { return v.dtype() != DType::Bool && v.rank() <= maxRank; },
                  [&] {
                    if (chance(30))
                      return leaf(intType, randomShape(0, maxRank), InputDomain::Kind::Signed);
                    return leaf(floatType, randomShape(0, maxRank),
                                chance(20) ? InputDomain::Kind::Unrounded : InputDomain::Kind::Signed);
                  });
}

GenValue Gen::exactOperand(int maxRank) {
  return fromPool(
      [&](const GenValue &v) { return v.dtype() != DType::Bool && v.rank() <= maxRank && isExact(v); },
      [&] { return leaf(chance(30) ? intType : floatType, randomShape(0, maxRank), InputDomain::Kind::Signed); });
}

GenValue Gen::boolOperand() {
  return fromPool([](const GenValue &v) { return v.dtype() == DType::Bool; },
                  [&] {
                    if (chance(50))
                      return leaf(DType::Bool, randomShape(0, 4), InputDomain::Kind::Bool);
                    GenValue a = exactOperand();
                    GenValue b = partner(a.dtype(), a.shape());
                    if (!isExact(b))
                      b = scalarConstant(a.dtype(), 0);
                    OpKind op = oneOf<OpKind>({OpKind::Lt, OpKind::Le, OpKind::Gt, OpKind::Ge, OpKind::Eq, OpKind::Ne});
                    return emit(op, {a, b}, {}, 0, 1, 0);
                  });
}

GenValue Gen::partner(DType dtype, const Shape &shape, InputDomain::Kind kind) {
  if (chance(12)) {
    double v = kind == InputDomain::Kind::Positive ? gridValue(0.25, 2)
               : kind == InputDomain::Kind::NonNegative ? gridValue(0, 2)
                                                        : gridValue(-2, 2);
    if (!isFloat(dtype))
      v = std::round(v * 2);
    return scalarConstant(dtype, v);
  }
  Shape target = broadcastableTo(shape);
  // Now and then a partner that makes the result larger: a new leading dim, or a size-1 dim
  // of `shape` stretched.
  if (chance(10) && numElements(shape) * 3 <= maxElements()) {
    Shape wider = shape;
    auto one = std::find(wider.begin(), wider.end(), 1);
    if (one != wider.end() && chance(50))
      *one = 3;
    else
      wider.insert(wider.begin(), 3);
    target = broadcastableTo(wider);
    if (target.size() < wider.size())
      target = wider;
  }
  return fromPool(
      [&](const GenValue &v) {
        return v.dtype() == dtype && broadcastsTo(v.shape(), shape);
      },
      [&] { return leaf(dtype, target, kind); });
}

GenValue Gen::ofType(DType dtype, const Shape &shape, InputDomain::Kind kind) {
  return fromPool([&](const GenValue &v) { return v.dtype() == dtype && v.shape() == shape; },
                  [&] { return leaf(dtype, shape, kind); });
}

GenValue Gen::emit(OpKind op, const std::vector<GenValue> &operands, ir::AttrMap attrs, double lo, double hi,
                   int fracBits) {
  std::vector<Var> vars;
  for (const GenValue &operand : operands)
    vars.push_back(operand.var);
  GenValue value;
  value.var = gb.op(op, vars, std::move(attrs));
  value.lo = lo, value.hi = hi, value.fracBits = fracBits;
  DType dtype = value.dtype();
  if (dtype == DType::Bool) {
    value.lo = 0, value.hi = 1, value.fracBits = 0;
  } else if (isInteger(dtype)) {
    // Integer arithmetic wraps the same way in both; past the dtype's range the bounds are lost.
    auto [min, max] = intRange(dtype);
    if (!(lo >= min && hi <= max))
      value.lo = min, value.hi = max;
    value.fracBits = 0;
  } else if (fracBits > 60) {
    value.fracBits = -1;
  }
  return value;
}

std::vector<Var> Gen::emitMulti(OpKind op, const std::vector<GenValue> &operands, ir::AttrMap attrs) {
  std::vector<Var> vars;
  for (const GenValue &operand : operands)
    vars.push_back(operand.var);
  return gb.opMulti(op, vars, std::move(attrs));
}

GenValue Gen::scaleByPowerOfTwo(const GenValue &value, int exponent) {
  double factor = std::ldexp(1.0, exponent);
  GenValue scale = scalarConstant(value.dtype(), factor);
  int bits = value.fracBits < 0 ? -1 : std::max(0, value.fracBits - exponent);
  return emit(OpKind::Mul, {value, scale}, {}, value.lo * factor, value.hi * factor, bits);
}

GenValue Gen::tame(const GenValue &value, double limit) {
  if (value.maxAbs() <= limit)
    return value;
  if (!isFloat(value.dtype()))
    return emit(OpKind::Clip, {value}, {{"min", -std::floor(limit)}, {"max", std::floor(limit)}},
                std::max(value.lo, -std::floor(limit)), std::min(value.hi, std::floor(limit)), 0);
  int exponent = -static_cast<int>(std::ceil(std::log2(value.maxAbs() / limit)));
  return scaleByPowerOfTwo(value, exponent);
}

GenValue Gen::atLeast(const GenValue &value, double offset) {
  if (value.lo >= offset && !(offset == 0 && value.lo == 0 && isFloat(value.dtype())))
    return value;
  double absLo = value.lo >= 0 ? value.lo : value.hi <= 0 ? -value.hi : 0;
  GenValue magnitude = emit(OpKind::Abs, {value}, {}, absLo, value.maxAbs(), value.fracBits);
  if (offset == 0)
    return magnitude;
  GenValue shift = scalarConstant(value.dtype(), offset);
  int bits = value.fracBits < 0 || shift.fracBits < 0 ? -1 : std::max(value.fracBits, shift.fracBits);
  return emit(OpKind::Add, {magnitude, shift}, {}, absLo + offset, value.maxAbs() + offset, bits);
}

GenValue Gen::cast(const GenValue &value, DType dtype) {
  if (value.dtype() == dtype)
    return value;
  double lo = value.lo, hi = value.hi;
  int bits = value.fracBits;
  if (!isFloat(dtype)) {
    lo = std::trunc(lo), hi = std::trunc(hi), bits = 0; // emit() widens them when they do not fit
  } else {
    bool exactAfter = bits >= 0 && std::ldexp(value.maxAbs(), bits) < std::ldexp(1.0, mantissaBits(dtype));
    if (!exactAfter)
      bits = -1;
  }
  return emit(OpKind::Cast, {value}, {{"to", dtype}}, lo, hi, bits);
}

GenValue Gen::asFloat(const GenValue &value) { return isFloat(value.dtype()) ? value : cast(value, floatType); }

GenValue Gen::noHalf(const GenValue &value) {
  if (value.dtype() == DType::F16 || value.dtype() == DType::BF16)
    return cast(value, DType::F32);
  return value;
}

GenValue Gen::reshape(const GenValue &value, const Shape &shape) {
  if (value.shape() == shape)
    return value;
  return emit(OpKind::Reshape, {value}, {{"shape", std::vector<int64_t>(shape)}}, value.lo, value.hi,
              value.fracBits);
}

} // namespace kiln::fuzz
