// C++ expressions for elementwise ops (see ScalarOps.h for the semantics they follow).
#include "codegen/ScalarOps.h"

#include <cmath>
#include <limits>

#include "core/Error.h"
#include "ir/ElementwiseOps.h"
#include "ir/Printer.h"

namespace kiln::codegen {

using ir::OpKind;

bool isHalfFloat(DType dtype) { return dtype == DType::F16 || dtype == DType::BF16; }

std::string cType(DType dtype) {
  switch (dtype) {
  case DType::F32:
  case DType::F16:
  case DType::BF16: return "float";
  case DType::F64: return "double";
  case DType::I64: return "int64_t";
  case DType::I32: return "int32_t";
  case DType::I8: return "int8_t";
  case DType::U8: return "uint8_t";
  case DType::Bool: return "bool";
  }
  fail("codegen: internal error: unknown dtype {}", static_cast<int>(dtype));
}

std::string storageType(DType dtype) { return isHalfFloat(dtype) ? "uint16_t" : cType(dtype); }

std::string widenExpression(DType dtype, const std::string &element) {
  if (!isHalfFloat(dtype))
    return element;
  return fmt::format("kiln_{}_to_f32({})", dtypeName(dtype), element);
}

std::string narrowExpression(DType dtype, const std::string &value) {
  if (!isHalfFloat(dtype))
    return value;
  return fmt::format("kiln_f32_to_{}({})", dtypeName(dtype), value);
}

std::string roundExpression(DType dtype, const std::string &value) {
  if (!isHalfFloat(dtype))
    return value;
  return fmt::format("kiln_round_{}({})", dtypeName(dtype), value);
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
  case DType::F32:
  case DType::F16:
  case DType::BF16: return floatLiteral(tensor.getDouble(index), true); // a 16-bit value is exact in float
  case DType::F64: return floatLiteral(tensor.getDouble(index), false);
  case DType::Bool: return tensor.getInt(index) != 0 ? "true" : "false";
  case DType::I64:
  case DType::I32:
  case DType::I8:
  case DType::U8: return fmt::format("(({}){})", cType(dtype), intLiteral(tensor.getInt(index)));
  }
  fail("codegen: internal error: unknown dtype {}", static_cast<int>(dtype));
}

namespace {

// A row of ir/ElementwiseOps.def spelled for an operand `a` of `dtype` (its float, f32 or integer
// spelling), with a result of C++ type `type`.
std::string unaryExpression(const ir::UnaryOpRow &row, DType dtype, const std::string &a, const std::string &type) {
  bool floating = isFloat(dtype);
  std::string_view spelling = !floating                                           ? row.intSpelling
                              : dtype == DType::F32 && !row.f32Spelling.empty() ? row.f32Spelling
                                                                                : row.spelling;
  if (spelling.empty())
    fail("codegen: internal error: {} has no spelling for {}", ir::opName(row.op), dtypeName(dtype));
  std::string one = floating ? literal(dtype, 1.0) : "1";
  return fmt::format(fmt::runtime(spelling), fmt::arg("x", a), fmt::arg("type", type), fmt::arg("one", one));
}

// A binary row of ir/ElementwiseOps.def spelled for operands `a` and `b` of `dtype`.
std::string binaryExpression(const ir::BinaryOpRow &row, DType dtype, const std::string &a, const std::string &b,
                             const std::string &type) {
  std::string_view spelling = isFloat(dtype) ? row.spelling : row.intSpelling;
  if (spelling.empty())
    fail("codegen: internal error: {} has no spelling for {}", ir::opName(row.op), dtypeName(dtype));
  return fmt::format(fmt::runtime(spelling), fmt::arg("a", a), fmt::arg("b", b), fmt::arg("type", type));
}

// mod, the binary op with an attribute: fmod=1 truncates (C's fmod), fmod=0 floors (Python's %).
std::string modExpression(const ir::Node &node, DType dtype, const std::string &a, const std::string &b,
                          const std::string &type) {
  bool floating = isFloat(dtype);
  if (node.attrInt("fmod") == 1)
    return floating ? fmt::format("std::fmod({}, {})", a, b) : fmt::format("(({})kiln_imod_trunc({}, {}))", type, a, b);
  return floating ? fmt::format("kiln_fmod_floor({}, {})", a, b) : fmt::format("(({})kiln_imod_floor({}, {}))", type, a, b);
}

std::string castExpression(DType from, DType to, const std::string &a) {
  if (from == to)
    return a;
  // To f16/bf16 through float, as Tensor::setDouble does (and the evaluator's integer casts:
  // an int64 is rounded to float once).
  if (isHalfFloat(to))
    return roundExpression(to, from == DType::F32 || isHalfFloat(from) ? a : fmt::format("((float){})", a));
  std::string type = cType(to);
  if (to == DType::Bool)
    return fmt::format("({} != 0)", a);
  if (isFloat(from) && !isFloat(to))
    return fmt::format("kiln_sat<{}>((double){})", type, a);
  // A select, not a conversion: GCC 12 does not vectorise a loop that converts a bool (the
  // ReLU mask of a training step's forward GEMM epilogue ran scalar, 3 ms of 9 ms).
  if (from == DType::Bool)
    return fmt::format("({} ? ({})1 : ({})0)", a, type, type);
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

// An op on f16/bf16 operands (floats holding values of the dtype; see ScalarOps.h), computed
// as `half` says; spell(dtype, operands, type) spells the op on operands of dtype.
template <typename Spell>
std::string halfExpression(ir::HalfPrecision half, DType out, const std::vector<std::string> &operands, Spell spell) {
  switch (half) {
  case ir::HalfPrecision::Exact: return spell(DType::F32, operands, cType(out));
  case ir::HalfPrecision::Rounded: return roundExpression(out, spell(DType::F32, operands, "float"));
  case ir::HalfPrecision::Wide: {
    std::vector<std::string> wide;
    for (const std::string &operand : operands)
      wide.push_back(fmt::format("((double){})", operand));
    return roundExpression(out, fmt::format("((float){})", spell(DType::F64, wide, "double")));
  }
  }
  fail("codegen: internal error: unknown half precision {}", static_cast<int>(half));
}

/// For pow(x, n) with n a constant 2, 3 or 4 (GELU's tanh form cubes x), n; else 0.
int smallIntegerPower(const ir::Node &node) {
  const ir::Node *exponent = node.input(1)->producer();
  if (!exponent || exponent->op() != OpKind::Constant)
    return 0;
  const Tensor &value = exponent->attrTensor("value");
  if (value.numElements() != 1)
    return 0;
  const double n = value.getDouble(0);
  return n == 2.0 || n == 3.0 || n == 4.0 ? static_cast<int>(n) : 0;
}

/// x^n of an f32 x as products in double: x*x is exact there, and so is every product up to
/// the last, which rounds once, as the evaluator's std::pow in double does (to the last bit but
/// for ties of a libm that is not correctly rounded); then once to f32. A call of powf per
/// element does not vectorise: GPT-2's tanh GELU cubed each of its FFN activations so.
std::string productPower(const std::string &x, int n) {
  const std::string d = fmt::format("((double){})", x);
  return n == 2 ? fmt::format("((float)({0} * {0}))", d)
         : n == 3 ? fmt::format("((float)({0} * {0} * {0}))", d)
                  : fmt::format("((float)(({0} * {0}) * ({0} * {0})))", d);
}

} // namespace

std::string scalarExpression(const ir::Node &node, const std::vector<std::string> &operands) {
  DType out = node.output()->dtype();
  std::string type = cType(out);
  OpKind op = node.op();
  DType in = node.input(0)->dtype();
  bool half = isHalfFloat(in);
  if (const ir::UnaryOpRow *row = ir::unaryOpRow(op)) {
    auto spell = [row](DType dtype, const std::vector<std::string> &x, const std::string &t) {
      return unaryExpression(*row, dtype, x[0], t);
    };
    return half ? halfExpression(row->half, out, operands, spell) : spell(in, operands, type);
  }
  if (op == OpKind::Pow && in == DType::F32 && node.input(1)->dtype() == DType::F32)
    if (const int n = smallIntegerPower(node))
      return productPower(operands[0], n);
  if (const ir::BinaryOpRow *row = ir::binaryOpRow(op)) {
    auto spell = [row](DType dtype, const std::vector<std::string> &x, const std::string &t) {
      return binaryExpression(*row, dtype, x[0], x[1], t);
    };
    return half ? halfExpression(row->half, out, operands, spell) : spell(in, operands, type);
  }
  if (op == OpKind::Mod) { // f16/bf16 as the evaluator computes it: in double
    auto spell = [&node](DType dtype, const std::vector<std::string> &x, const std::string &t) {
      return modExpression(node, dtype, x[0], x[1], t);
    };
    return half ? halfExpression(ir::HalfPrecision::Wide, out, operands, spell) : spell(in, operands, type);
  }
  if (op == OpKind::Where)
    return fmt::format("({} ? {} : {})", operands[0], operands[1], operands[2]);
  if (op == OpKind::Cast)
    return castExpression(in, out, operands[0]);
  if (op == OpKind::Clip) // exact for f16/bf16: the bounds are literals of the dtype
    return clipExpression(node, out, operands[0], type);
  // OpLoweringTest spells every op that codegen/OpLowering.h lowers as Scalar, so this is a
  // codegen bug, never a user's graph.
  fail("codegen: internal error: {} is not an elementwise op", node.opName());
}

std::string randomKeyExpression(const ir::Node &node, const std::string &offset) {
  std::string seed = intLiteral(node.attrInt("seed"));
  if (offset.empty())
    return fmt::format("kiln_random_key({}, 0)", seed);
  if (node.input(0)->dtype() == DType::I64)
    return fmt::format("kiln_random_key({}, {})", seed, offset);
  // An f32 offset counts as an integer: truncated, saturating, NaN as 0 (ir/ops/Random.cpp).
  return fmt::format("kiln_random_key({}, kiln_sat<int64_t>((double){}))", seed, offset);
}

std::string randomUnitExpression(DType dtype, const std::string &key, const std::string &index) {
  if (dtype != DType::F32 && dtype != DType::F64)
    fail("codegen: internal error: random_uniform of {}", dtypeName(dtype));
  return fmt::format("kiln_random_{}({}, {})", dtypeName(dtype), key, index);
}

std::string preludeHelpers() {
  return R"(// Helpers: integer arithmetic wraps (computed in uint64) and never traps; float max/min
// give NaN for a NaN operand (the evaluator's quiet NaN, sign included); float-to-integer
// casts saturate; index helpers keep every load in bounds.
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
template <typename F> static inline F kiln_fmax(F a, F b) {
  return (a != a || b != b) ? std::numeric_limits<F>::quiet_NaN() : (a > b ? a : b);
}
template <typename F> static inline F kiln_fmin(F a, F b) {
  return (a != a || b != b) ? std::numeric_limits<F>::quiet_NaN() : (a < b ? a : b);
}
template <typename F> static inline F kiln_fclip(F x, F lo, F hi) { return x != x ? x : std::min(std::max(x, lo), hi); }
template <typename F> static inline F kiln_fsign(F x) { return x != x ? x : (F)((x > 0) - (x < 0)); }
template <typename F> static inline F kiln_fmod_floor(F a, F b) {
  F r = std::fmod(a, b);
  if (r == 0) return std::copysign((F)0, b);
  return ((r < 0) != (b < 0)) ? r + b : r;
}
// floor and ceil through nearbyint, which GCC 12 vectorises (floorf and ceilf it does not,
// without -fno-trapping-math: a QDQ epilogue's floor left its loop scalar): the nearest
// integer, moved down by one where it lies above x; ceil as -floor(-x). Exact for every float: NaN, the infinities and
// the sign of zero come out as std::floor's and std::ceil's.
template <typename F> static inline F kiln_floor(F x) {
  const F r = std::nearbyint(x);
  return r > x ? r - (F)1 : r;
}
template <typename F> static inline F kiln_ceil(F x) { return -kiln_floor(-x); } // -0.7 to -0, not +0
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
// erf (GELU's hot path: FFN epilogues of every transformer): two polynomials, no division and
// no exp, so one vector of 16 costs ~28 FMA-class instructions. |x| < 2: x P(u), P of degree 9
// in u = x^2/2 - 1 (Chebyshev interpolation of erf(x)/x over x^2 in [0, 4]); 2 <= |x| < 3.92:
// 1 - Q(v), Q of degree 10 interpolating erfc over [2, 3.92] (v maps it onto [-1, 1]); beyond,
// erfc < 2.6e-8 rounds away and erf is +-1. Measured over every 7th float in [6e-8, 6]
// against double erf: relative error below 1.6e-7 (the A&S 7.1.26 form used before reached
// 6.2e-7), and 1.4x faster.
static inline float kiln_erff(float x) {
  float ax = x < 0 ? -x : x;
  float u = x * x * 0.5f - 1.0f;
  float near = 0.674933255f + u * (-0.261111856f + u * (0.119478881f + u * (-0.048662737f + u * (0.0171303954f +
               u * (-0.0052352082f + u * (0.00139938062f + u * (-0.000334217271f + u * (7.82454372e-05f +
               u * -1.49933358e-05f))))))));
  near = x * near;
  float v = ax * (1.0f / 0.96f) - (2.96f / 0.96f);
  float tail = 2.83823174e-05f + v * (-0.000169599865f + v * (0.000482131611f + v * (-0.000862705638f +
               v * (0.00107574905f + v * (-0.00097614649f + v * (0.00066689396f + v * (-0.000345551234f +
               v * (0.000102883649f + v * (1.51444237e-05f + v * -1.71577431e-05f)))))))));
  float far = ax < 3.92f ? 1.0f - tail : 1.0f;
  far = x < 0 ? -far : far;
  return ax < 2.0f ? near : (x != x ? x : far);
}
// log and log1p for f32 that the compiler can vectorise (libm's are calls: Mish's softplus,
// log1p(exp(-|x|)), ran one call per element, 1.7x ORT's time). In double, then rounded once:
// u = 2^e m with m in [sqrt(1/2), sqrt 2), log u = e log 2 + 2 atanh(s), s = (m - 1)/(m + 1),
// |s| < 0.172, by its odd series to s^15 (truncation ~1e-14): the f32 result is the correctly
// rounded one but for ties within 1e-14. log1p takes 1 + x in double, exact for |x| >= 2^-12
// and within 2^-53 above 2^29, and its own series below 2^-12, where 1 + x loses x's bits.
static inline double kiln_log_positive(double u) {
  int64_t bits;
  std::memcpy(&bits, &u, sizeof bits);
  int64_t e = ((bits >> 52) & 0x7ff) - 1023, mantissa = (bits & 0xfffffffffffffLL) | 0x3ff0000000000000LL;
  double m;
  std::memcpy(&m, &mantissa, sizeof m);
  // Every select below is between values already computed: a conditional division or
  // product is control flow GCC does not vectorise (it may trap).
  bool big = m > 1.4142135623730951;
  double halved = m * 0.5;
  int64_t next = e + 1;
  m = big ? halved : m;
  e = big ? next : e;
  double s = (m - 1.0) / (m + 1.0), s2 = s * s;
  double p = s * (2.0 + s2 * (2.0 / 3 + s2 * (2.0 / 5 + s2 * (2.0 / 7 + s2 * (2.0 / 9 + s2 * (2.0 / 11 + s2 * (2.0 / 13 + s2 * (2.0 / 15))))))));
  return (double)e * 0.6931471805599453 + p;
}
static inline float kiln_logf(float x) {
  float result = (float)kiln_log_positive((double)x); // meaningless for x <= 0, inf and NaN:
  result = x == 0 ? -__builtin_inff() : result;       // they are chosen here
  result = x < 0 ? -__builtin_nanf("") : result;       // glibc's sign, which the evaluator keeps
  result = x == __builtin_inff() ? x : result;
  return x != x ? x : result;
}
static inline float kiln_log1pf(float x) {
  double d = (double)x;
  double series = d * (1.0 + d * (-0.5 + d * (1.0 / 3 + d * (-0.25 + d * 0.2))));
  double logarithm = kiln_log_positive(1.0 + d);
  bool tiny = (d > -0x1p-12) & (d < 0x1p-12);
  float result = (float)(tiny ? series : logarithm);
  result = x == -1.0f ? -__builtin_inff() : result;
  result = x < -1.0f ? -__builtin_nanf("") : result;
  result = x == __builtin_inff() ? x : result;
  return x != x ? x : result;
}
// f16 and bf16 as float: conversions bit-identical to core/Tensor.cpp's halfToFloat,
// floatToHalf, bfloat16ToFloat and floatToBFloat16 (round to nearest even, overflow to inf,
// NaN to the quiet NaN of its sign), written as selects between branch-free candidates so
// that loops over them vectorise; no compiler half-float types are needed.
static inline float kiln_bits_to_f32(uint32_t bits) { float f; std::memcpy(&f, &bits, sizeof f); return f; }
static inline uint32_t kiln_f32_to_bits(float f) { uint32_t bits; std::memcpy(&bits, &f, sizeof bits); return bits; }
static inline float kiln_f16_to_f32(uint16_t h) {
  uint32_t magnitude = (uint32_t)(h & 0x7fffu) << 13, exponent = magnitude & 0x0f800000u;
  uint32_t normal = magnitude + 0x38000000u;  // exponent bias 15 -> 127
  // Inf and NaN: exponent 31 -> 255, payload kept; NaN quiet, as the evaluator's trip
  // through double leaves every widened value.
  uint32_t special = (magnitude + 0x70000000u) | (magnitude > 0x0f800000u ? 0x00400000u : 0u);
  // Zero and subnormals: 2^-14 (1 + m/1024) - 2^-14 is exactly 2^-14 m/1024.
  uint32_t tiny = kiln_f32_to_bits(kiln_bits_to_f32(magnitude + 0x38800000u) - 6.103515625e-05f);
  uint32_t bits = exponent == 0x0f800000u ? special : (exponent == 0 ? tiny : normal);
  return kiln_bits_to_f32(bits | ((uint32_t)(h & 0x8000u) << 16));
}
static inline uint16_t kiln_f32_to_f16(float f) {
  uint32_t x = kiln_f32_to_bits(f), sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
  // Normal: rebias and round the 13 dropped bits to nearest even; a carry into the exponent is
  // the right rounding, up to inf.
  uint32_t normal = (ax - 0x38000000u + 0x0fffu + ((ax >> 13) & 1u)) >> 13;
  // Below 2^-14: adding 0.5 rounds (to nearest even) to a multiple of 2^-24, the subnormal
  // step, which then lies in the low mantissa bits.
  uint32_t subnormal = kiln_f32_to_bits(kiln_bits_to_f32(ax) + 0.5f) - 0x3f000000u;
  uint32_t huge = ax > 0x7f800000u ? 0x7e00u : 0x7c00u; // NaN, else inf (from 65536 up)
  uint32_t bits = ax >= 0x47800000u ? huge : (ax < 0x38800000u ? subnormal : normal);
  return (uint16_t)(bits | sign);
}
static inline float kiln_round_f16(float f) { return kiln_f16_to_f32(kiln_f32_to_f16(f)); }
static inline float kiln_bf16_to_f32(uint16_t b) {
  uint32_t bits = (uint32_t)b << 16;
  return kiln_bits_to_f32((bits & 0x7fffffffu) > 0x7f800000u ? bits | 0x00400000u : bits); // NaN quiet
}
static inline uint16_t kiln_f32_to_bf16(float f) {
  uint32_t x = kiln_f32_to_bits(f);
  uint32_t rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
  return (uint16_t)((x & 0x7fffffffu) > 0x7f800000u ? ((x >> 16) | 0x40u) : rounded);
}
static inline float kiln_round_bf16(float f) { return kiln_bf16_to_f32(kiln_f32_to_bf16(f)); }
// random_uniform's stream (ir/ops/Random.cpp): splitmix64 keyed by (seed, offset), element i
// its (i+1)-th output, the top 24 (f32) or 53 (f64) bits scaled into [0, 1).
static inline uint64_t kiln_mix64(uint64_t z) {
  z ^= z >> 30; z *= 0xBF58476D1CE4E5B9ull;
  z ^= z >> 27; z *= 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
static const uint64_t kiln_golden = 0x9E3779B97F4A7C15ull;
static inline uint64_t kiln_random_key(int64_t seed, int64_t offset) {
  return kiln_mix64(kiln_mix64((uint64_t)seed + kiln_golden) + ((uint64_t)offset + 1) * kiln_golden);
}
static inline float kiln_random_f32(uint64_t key, int64_t i) {
  return (float)(kiln_mix64(key + ((uint64_t)i + 1) * kiln_golden) >> 40) * 0x1.0p-24f;
}
static inline double kiln_random_f64(uint64_t key, int64_t i) {
  return (double)(kiln_mix64(key + ((uint64_t)i + 1) * kiln_golden) >> 11) * 0x1.0p-53;
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
