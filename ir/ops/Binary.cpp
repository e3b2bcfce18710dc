// Elementwise binary ops with numpy broadcasting: the rows of ir/ElementwiseOps.def, and mod.
// Both operands have one dtype: kiln does no implicit promotion, frontends insert casts. Float
// operands are computed in double and rounded once to the output dtype (exact for f32: double
// holds every f32 sum, product and quotient before the final rounding). Integer operands are computed exactly in int64 and stored with
// Tensor::setInt, which wraps, so i32/i8/u8 overflow wraps as it does in C and numpy; i64
// overflow wraps too (computed in uint64, where it is defined).
#include <cmath>
#include <limits>

#include "ir/ElementwiseOps.h"
#include "ir/ops/Common.h"

namespace kiln::ir {

using namespace ops;

namespace {

std::vector<TensorType> inferBinary(BinaryDomain domain, const std::vector<TensorType> &in) {
  DType dtype = commonDType(in);
  Shape shape = broadcastShapes(in[0].shape, in[1].shape);
  switch (domain) {
  case BinaryDomain::Arithmetic:
    if (dtype == DType::Bool)
      fail("needs numeric operands, got bool");
    return {TensorType{dtype, shape}};
  case BinaryDomain::Ordering:
    if (dtype == DType::Bool)
      fail("needs numeric operands, got bool");
    break;
  case BinaryDomain::Equality: break;
  case BinaryDomain::Logical:
    if (dtype != DType::Bool)
      fail("needs bool operands, got {}", dtypeName(dtype));
    break;
  }
  return {TensorType{DType::Bool, shape}};
}

using FloatFn = double (*)(double, double);
using IntFn = int64_t (*)(int64_t, int64_t);

Tensor evalBinary(const std::vector<Tensor> &in, const TensorType &out, FloatFn floatFn, IntFn intFn) {
  return mapElements(
      in, out, [floatFn](const std::vector<double> &x) { return floatFn(x[0], x[1]); },
      [intFn](const std::vector<int64_t> &x) { return intFn(x[0], x[1]); });
}

// One OpDef per (domain, float function, integer function); as in Unary.cpp, capture-free
// lambdas convert to the plain function pointers OpDef stores.
template <BinaryDomain domain, FloatFn floatFn, IntFn intFn> OpDef binaryDef() {
  OpDef def;
  def.infer = [](const std::vector<TensorType> &in, const AttrMap &) { return inferBinary(domain, in); };
  def.eval = [](const std::vector<Tensor> &in, const AttrMap &, const std::vector<TensorType> &out) {
    return std::vector<Tensor>{evalBinary(in, out[0], floatFn, intFn)};
  };
  return def;
}

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Unsigned arithmetic wraps modulo 2^64; converting back gives the two's-complement result.
int64_t wrap(uint64_t value) { return static_cast<int64_t>(value); }

// The helpers the rows' integer references call.
int64_t divideTruncating(int64_t a, int64_t b) {
  if (b == 0)
    fail("div: integer division by zero");
  if (b == -1) // INT64_MIN / -1 traps in hardware; as a wrapping negation it is INT64_MIN
    return wrap(0 - static_cast<uint64_t>(a));
  return a / b;
}

// Exact: square-and-multiply in wrapping arithmetic equals repeated multiplication modulo 2^64,
// and narrowing that to a smaller integer type gives its own wrapped product.
int64_t powerWrapping(int64_t base, int64_t exponent) {
  if (exponent < 0)
    fail("pow: negative integer exponent {}", exponent);
  uint64_t result = 1;
  uint64_t factor = static_cast<uint64_t>(base);
  for (; exponent != 0; exponent >>= 1) {
    if (exponent & 1)
      result *= factor;
    factor *= factor;
  }
  return wrap(result);
}

// mod, fmod=1: C's fmod, the remainder takes the dividend's sign.
double fModTruncated(double a, double b) { return std::fmod(a, b); }
int64_t iModTruncated(int64_t a, int64_t b) {
  if (b == 0)
    fail("mod: integer division by zero");
  return b == -1 ? 0 : a % b; // INT64_MIN % -1 traps like the division
}
// mod, fmod=0: Python's and numpy's floored modulo, the remainder takes the divisor's sign.
double fModFloored(double a, double b) {
  double r = std::fmod(a, b);
  if (r == 0)
    return std::copysign(0.0, b);
  return (r < 0) != (b < 0) ? r + b : r; // NaN stays NaN either way
}
int64_t iModFloored(int64_t a, int64_t b) {
  int64_t r = iModTruncated(a, b);
  return r != 0 && (r < 0) != (b < 0) ? r + b : r; // opposite signs: r + b cannot overflow
}

// Each row's references as functions (the one of the kind inference rejects is never called).
#define BINARY_OP(Enum, mnemonic, apiName, domain, symmetry, apiOperands, floatRef, intRef, ...)            \
  double referenceFloat##Enum([[maybe_unused]] double a, [[maybe_unused]] double b) { return floatRef; }       \
  int64_t referenceInt##Enum([[maybe_unused]] int64_t a, [[maybe_unused]] int64_t b) { return intRef; }
#include "ir/ElementwiseOps.def"

} // namespace

#define BINARY_OP(Enum, mnemonic, apiName, domain, ...)                                                   \
  OpDef define##Enum() { return binaryDef<BinaryDomain::domain, referenceFloat##Enum, referenceInt##Enum>(); }
#include "ir/ElementwiseOps.def"

// mod is the one binary op with an attribute: `fmod` picks the sign convention (ONNX Mod).
OpDef defineMod() {
  OpDef def;
  def.attrs = {intAttr("fmod", 0)};
  def.infer = [](const std::vector<TensorType> &in, const AttrMap &attrs) {
    int64_t fmodFlag = attrInt(attrs, "fmod");
    if (fmodFlag != 0 && fmodFlag != 1)
      fail("attribute 'fmod' must be 0 (floored) or 1 (truncated), got {}", fmodFlag);
    return inferBinary(BinaryDomain::Arithmetic, in);
  };
  def.eval = [](const std::vector<Tensor> &in, const AttrMap &attrs, const std::vector<TensorType> &out) {
    bool truncated = attrInt(attrs, "fmod") == 1;
    return std::vector<Tensor>{truncated ? evalBinary(in, out[0], fModTruncated, iModTruncated)
                                         : evalBinary(in, out[0], fModFloored, iModFloored)};
  };
  return def;
}

} // namespace kiln::ir
