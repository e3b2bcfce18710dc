// C++ expressions for elementwise ops (see ScalarOps.h for the semantics they follow).
#include "codegen/ScalarOps.h"

#include <cmath>
#include <limits>

#include "ir/Error.h"
#include "ir/Printer.h"

namespace kiln::codegen {

using ir::OpKind;

std::string cType(DType dtype) {
  switch (dtype) {
  case DType::F32: return "float";
  case DType::F64: return "double";
  case DType::I64: return "int64_t";
  case DType::I32: return "int32_t";
  case DType::I8: return "int8_t";
  case DType::U8: return "uint8_t";
  case DType::Bool: return "bool";
  case DType::F16:
  case DType::BF16: break;
  }
  fail("codegen: dtype {} is not supported yet", dtypeName(dtype));
}

namespace {

std::string intLiteral(int64_t value) {
  if (value == std::numeric_limits<int64_t>::min())
    return "(-9223372036854775807LL - 1)";
  return value < 0 ? fmt::format("({}LL)", value) : fmt::format("{}LL", value);
}

std::string floatLiteral(double value, bool single) {
  const char *suffix = single ? "f" : "";
  if (std::isnan(value))
    return single ? "__builtin_nanf(\"\")" : "__builtin_nan(\"\")";
  if (std::isinf(value))
    return fmt::format("({}__builtin_inf{}())", value < 0 ? "-" : "", suffix);
  std::string text = single ? ir::formatFloat(static_cast<float>(value)) : ir::formatDouble(value);
  return value < 0 ? "(" + text + suffix + ")" : text + suffix;
}

} // namespace

std::string literal(DType dtype, double value) {
  Tensor scalar = Tensor::scalar(dtype, value);
  return elementLiteral(scalar, 0);
}

std::string elementLiteral(const Tensor &tensor, int64_t index) {
  DType dtype = tensor.dtype();
  switch (dtype) {
  case DType::F32: return floatLiteral(tensor.getDouble(index), true);
  case DType::F64: return floatLiteral(tensor.getDouble(index), false);
  case DType::Bool: return tensor.getInt(index) != 0 ? "true" : "false";
  case DType::I64:
  case DType::I32:
  case DType::I8:
  case DType::U8: return fmt::format("(({}){})", cType(dtype), intLiteral(tensor.getInt(index)));
  case DType::F16:
  case DType::BF16: break;
  }
  fail("codegen: dtype {} is not supported yet", dtypeName(dtype));
}

namespace {

std::string unaryExpression(OpKind op, DType dtype, const std::string &a, const std::string &type) {
  bool floating = isFloat(dtype);
  std::string one = floating ? literal(dtype, 1.0) : "1";
  auto call = [&](const char *fn) { return fmt::format("std::{}({})", fn, a); };
  switch (op) {
  case OpKind::Neg: return floating ? fmt::format("(-{})", a) : fmt::format("(({})kiln_wneg({}))", type, a);
  case OpKind::Abs: return floating ? call("fabs") : fmt::format("(({})kiln_iabs({}))", type, a);
  case OpKind::Exp: return dtype == DType::F32 ? fmt::format("kiln_expf({})", a) : call("exp");
  case OpKind::Expm1: return call("expm1");
  case OpKind::Log: return call("log");
  case OpKind::Log1p: return call("log1p");
  case OpKind::Sqrt: return call("sqrt");
  case OpKind::Rsqrt: return fmt::format("({} / std::sqrt({}))", one, a);
  case OpKind::Reciprocal: return fmt::format("({} / {})", one, a);
  case OpKind::Tanh: return dtype == DType::F32 ? fmt::format("kiln_tanhf({})", a) : call("tanh");
  case OpKind::Sigmoid:
    return fmt::format("({0} / ({0} + {2}(-{1})))", one, a, dtype == DType::F32 ? "kiln_expf" : "std::exp");
  case OpKind::Erf: return dtype == DType::F32 ? fmt::format("kiln_erff({})", a) : call("erf");
  case OpKind::Relu:
    return floating ? fmt::format("(({0} > 0 || {0} != {0}) ? {0} : ({1})0)", a, type)
                    : fmt::format("({0} > 0 ? {0} : ({1})0)", a, type);
  case OpKind::Sin: return call("sin");
  case OpKind::Cos: return call("cos");
  case OpKind::Tan: return call("tan");
  case OpKind::Asin: return call("asin");
  case OpKind::Acos: return call("acos");
  case OpKind::Atan: return call("atan");
  case OpKind::Sinh: return call("sinh");
  case OpKind::Cosh: return call("cosh");
  case OpKind::Floor: return floating ? call("floor") : a;
  case OpKind::Ceil: return floating ? call("ceil") : a;
  case OpKind::Round: return floating ? call("nearbyint") : a;
  case OpKind::Sign:
    return floating ? fmt::format("kiln_fsign({})", a) : fmt::format("(({0})(({1} > 0) - ({1} < 0)))", type, a);
  case OpKind::Not: return fmt::format("(!{})", a);
  case OpKind::IsNan: return fmt::format("({0} != {0})", a);
  case OpKind::IsInf: return fmt::format("((bool)std::isinf({}))", a);
  default: break;
  }
  fail("codegen: internal error: {} is not a unary op", ir::opName(op));
}

std::string binaryExpression(const ir::Node &node, DType dtype, const std::string &a, const std::string &b,
                             const std::string &type) {
  bool floating = isFloat(dtype);
  auto wrapping = [&](const char *fn) { return fmt::format("(({})kiln_{}({}, {}))", type, fn, a, b); };
  auto infix = [&](const char *op) { return fmt::format("({} {} {})", a, op, b); };
  switch (node.op()) {
  case OpKind::Add: return floating ? infix("+") : wrapping("wadd");
  case OpKind::Sub: return floating ? infix("-") : wrapping("wsub");
  case OpKind::Mul: return floating ? infix("*") : wrapping("wmul");
  case OpKind::Div: return floating ? infix("/") : wrapping("idiv");
  case OpKind::Pow: return floating ? fmt::format("std::pow({}, {})", a, b) : wrapping("ipow");
  case OpKind::Max: return floating ? fmt::format("kiln_fmax({}, {})", a, b) : fmt::format("({0} > {1} ? {0} : {1})", a, b);
  case OpKind::Min: return floating ? fmt::format("kiln_fmin({}, {})", a, b) : fmt::format("({0} < {1} ? {0} : {1})", a, b);
  case OpKind::Mod:
    if (node.attrInt("fmod") == 1)
      return floating ? fmt::format("std::fmod({}, {})", a, b) : wrapping("imod_trunc");
    return floating ? fmt::format("kiln_fmod_floor({}, {})", a, b) : wrapping("imod_floor");
  case OpKind::Eq: return infix("==");
  case OpKind::Ne: return infix("!=");
  case OpKind::Lt: return infix("<");
  case OpKind::Le: return infix("<=");
  case OpKind::Gt: return infix(">");
  case OpKind::Ge: return infix(">=");
  case OpKind::And: return infix("&&");
  case OpKind::Or: return infix("||");
  case OpKind::Xor: return infix("!=");
  default: break;
  }
  fail("codegen: internal error: {} is not a binary op", node.opName());
}

std::string castExpression(DType from, DType to, const std::string &a) {
  if (from == to)
    return a;
  std::string type = cType(to);
  if (to == DType::Bool)
    return fmt::format("({} != 0)", a);
  if (isFloat(from) && !isFloat(to))
    return fmt::format("kiln_sat<{}>((double){})", type, a);
  return fmt::format("(({}){})", type, a);
}

std::string clipExpression(const ir::Node &node, DType dtype, const std::string &a, const std::string &type) {
  double lo = node.attrFloat("min"), hi = node.attrFloat("max");
  if (isFloat(dtype))
    return fmt::format("kiln_fclip({}, {}, {})", a, literal(dtype, lo), literal(dtype, hi));
  // Integers clamp to the integers inside [min, max], as the evaluator does.
  auto saturate = [](double value) {
    constexpr double kTwoTo63 = 9223372036854775808.0;
    if (value <= -kTwoTo63)
      return std::numeric_limits<int64_t>::min();
    if (value >= kTwoTo63)
      return std::numeric_limits<int64_t>::max();
    return static_cast<int64_t>(value);
  };
  return fmt::format("(({})std::min<int64_t>(std::max<int64_t>({}, {}), {}))", type, a,
                     intLiteral(saturate(std::ceil(lo))), intLiteral(saturate(std::floor(hi))));
}

} // namespace

std::string scalarExpression(const ir::Node &node, const std::vector<std::string> &operands) {
  DType out = node.output()->dtype();
  std::string type = cType(out);
  OpKind op = node.op();
  if (op == OpKind::Where)
    return fmt::format("({} ? {} : {})", operands[0], operands[1], operands[2]);
  if (op == OpKind::Cast)
    return castExpression(node.input(0)->dtype(), out, operands[0]);
  if (op == OpKind::Clip)
    return clipExpression(node, out, operands[0], type);
  DType in = node.input(0)->dtype();
  if (operands.size() == 1)
    return unaryExpression(op, in, operands[0], type);
  if (operands.size() == 2)
    return binaryExpression(node, in, operands[0], operands[1], type);
  fail("codegen: internal error: {} is not an elementwise op", node.opName());
}

std::string preludeHelpers() {
  return R"(// Helpers: integer arithmetic wraps (computed in uint64) and never traps; float max/min
// propagate NaN; float-to-integer casts saturate; index helpers keep every load in bounds.
static inline int64_t kiln_wadd(int64_t a, int64_t b) { return (int64_t)((uint64_t)a + (uint64_t)b); }
static inline int64_t kiln_wsub(int64_t a, int64_t b) { return (int64_t)((uint64_t)a - (uint64_t)b); }
static inline int64_t kiln_wmul(int64_t a, int64_t b) { return (int64_t)((uint64_t)a * (uint64_t)b); }
static inline int64_t kiln_wneg(int64_t a) { return (int64_t)(0 - (uint64_t)a); }
static inline int64_t kiln_iabs(int64_t a) { return a < 0 ? kiln_wneg(a) : a; }
static inline int64_t kiln_idiv(int64_t a, int64_t b) { return b == 0 ? 0 : (b == -1 ? kiln_wneg(a) : a / b); }
static inline int64_t kiln_imod_trunc(int64_t a, int64_t b) { return (b == 0 || b == -1) ? 0 : a % b; }
static inline int64_t kiln_imod_floor(int64_t a, int64_t b) {
  int64_t r = kiln_imod_trunc(a, b);
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
static inline int64_t kiln_ipow(int64_t base, int64_t exponent) {
  if (exponent < 0) return 0;
  uint64_t result = 1, factor = (uint64_t)base;
  for (; exponent != 0; exponent >>= 1) {
    if (exponent & 1) result *= factor;
    factor *= factor;
  }
  return (int64_t)result;
}
template <typename F> static inline F kiln_fmax(F a, F b) { return (a != a || b != b) ? a + b : (a > b ? a : b); }
template <typename F> static inline F kiln_fmin(F a, F b) { return (a != a || b != b) ? a + b : (a < b ? a : b); }
template <typename F> static inline F kiln_fclip(F x, F lo, F hi) { return x != x ? x : std::min(std::max(x, lo), hi); }
template <typename F> static inline F kiln_fsign(F x) { return x != x ? x : (F)((x > 0) - (x < 0)); }
template <typename F> static inline F kiln_fmod_floor(F a, F b) {
  F r = std::fmod(a, b);
  if (r == 0) return std::copysign((F)0, b);
  return ((r < 0) != (b < 0)) ? r + b : r;
}
template <typename T> static inline T kiln_sat(double v) {
  if (v != v) return 0;
  if (v <= (double)std::numeric_limits<T>::min()) return std::numeric_limits<T>::min();
  if (v >= (double)std::numeric_limits<T>::max()) return std::numeric_limits<T>::max();
  return (T)v;
}
static inline int64_t kiln_clamp_index(int64_t i, int64_t dim) { return i < 0 ? 0 : (i >= dim ? dim - 1 : i); }
static inline int64_t kiln_gather_index(int64_t i, int64_t dim) { return kiln_clamp_index(i < 0 ? i + dim : i, dim); }
static inline int64_t kiln_reflect_index(int64_t i, int64_t dim) {
  return kiln_clamp_index(i < 0 ? -i : (i >= dim ? 2 * (dim - 1) - i : i), dim);
}
// exp and tanh for f32 that the compiler can vectorise (libm's are calls it cannot): exp(x) =
// 2^n exp(r) with n = round(x log2 e), r = x - n ln2 (ln2 split so n*ln2_hi is exact), exp(r)
// by its Taylor series to r^7 (|r| <= ln2/2: truncation below 1e-8 relative), 2^n applied in
// two halves so that results down to the denormals stay exact in range. Within 2 ulp of the
// correctly rounded value; inf, -inf and NaN map as std::exp maps them.
static inline float kiln_pow2i(int32_t n) {
  int32_t bits = (n + 127) << 23;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}
static inline float kiln_expf(float x) {
  float xc = x < -104.0f ? -104.0f : (x > 88.8f ? 88.8f : x);
  float n = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f; // round to nearest
  float r = xc - n * 0.693145751953125f;
  r = r - n * 1.428606765330187045e-06f;
  float p = 1.0f + r * (1.0f + r * (0.5f + r * (1.0f / 6 + r * (1.0f / 24 + r * (1.0f / 120 + r * (1.0f / 720 + r * (1.0f / 5040)))))));
  int32_t ni = (int32_t)n, half = ni / 2;
  float result = p * kiln_pow2i(half) * kiln_pow2i(ni - half);
  result = x > 88.72284f ? __builtin_inff() : result;
  result = x < -103.97208f ? 0.0f : result;
  return x != x ? x : result;
}
// tanh: its odd series near 0 (where 1 - 2/(e^2x + 1) would cancel), else that identity.
static inline float kiln_tanhf(float x) {
  float ax = x < 0 ? -x : x, z = x * x;
  float series = x * (1.0f + z * (-1.0f / 3 + z * (2.0f / 15 + z * (-17.0f / 315 + z * (62.0f / 2835 + z * (-1382.0f / 155925))))));
  float far = 1.0f - 2.0f / (kiln_expf(2.0f * ax) + 1.0f);
  far = x < 0 ? -far : far;
  return ax < 0.25f ? series : far;
}
// erf: its Maclaurin series for |x| < 0.5 (next term below 1e-9), else Abramowitz & Stegun
// 7.1.26, 1 - t(a1 + t(a2 + ...)) e^(-x^2) with t = 1/(1 + p|x|), absolute error below 1.5e-7
// (relative below 3e-7 there, as |erf| > 0.52).
static inline float kiln_erff(float x) {
  float ax = x < 0 ? -x : x, z = x * x;
  float series = 1.1283791670955126f * x *
                 (1.0f + z * (-1.0f / 3 + z * (1.0f / 10 + z * (-1.0f / 42 + z * (1.0f / 216 + z * (-1.0f / 1320 + z * (1.0f / 9360)))))));
  float t = 1.0f / (1.0f + 0.3275911f * ax);
  float poly = t * (0.254829592f + t * (-0.284496736f + t * (1.421413741f + t * (-1.453152027f + t * 1.061405429f))));
  float far = 1.0f - poly * kiln_expf(-z);
  far = x < 0 ? -far : far;
  return ax < 0.5f ? series : far;
}
template <typename T> static inline bool kiln_arg_replaces(T candidate, T best, bool wantMax, bool selectLast) {
  if (best != best) return selectLast && candidate != candidate;
  if (candidate != candidate) return true;
  if (candidate == best) return selectLast;
  return wantMax ? candidate > best : candidate < best;
}
)";
}

} // namespace kiln::codegen
