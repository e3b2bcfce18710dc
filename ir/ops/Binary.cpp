// Elementwise binary ops with numpy broadcasting. Both operands have one dtype: kiln does no
// implicit promotion, frontends insert casts. Float operands are computed in double and rounded
// once to the output dtype (exact for f32: double holds every f32 sum, product and quotient
// before the final rounding). Integer operands are computed exactly in int64 and stored with
// Tensor::setInt, which wraps, so i32/i8/u8 overflow wraps as it does in C and numpy; i64
// overflow wraps too (computed in uint64, where it is defined).
#include <cmath>
#include <limits>

#include "ir/ops/Common.h"

namespace kiln::ir {

using namespace ops;

namespace {

/// Which operand dtypes an op accepts and what it returns.
enum class Kind {
  Arithmetic, // numeric operands (not bool); the result has the operand dtype
  Ordering,   // numeric operands; bool result (lt le gt ge)
  Equality,   // any dtype, bool included; bool result (eq ne)
  Logical,    // bool operands; bool result (and or xor)
};

std::vector<TensorType> inferBinary(Kind kind, const std::vector<TensorType> &in) {
  DType dtype = commonDType(in);
  Shape shape = broadcastShapes(in[0].shape, in[1].shape);
  switch (kind) {
  case Kind::Arithmetic:
    if (dtype == DType::Bool)
      fail("needs numeric operands, got bool");
    return {TensorType{dtype, shape}};
  case Kind::Ordering:
    if (dtype == DType::Bool)
      fail("needs numeric operands, got bool");
    break;
  case Kind::Equality: break;
  case Kind::Logical:
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

// One OpDef per (kind, float function, integer function); as in Unary.cpp, capture-free lambdas
// convert to the plain function pointers OpDef stores.
template <Kind kind, FloatFn floatFn, IntFn intFn> OpDef binaryDef() {
  OpDef def;
  def.infer = [](const std::vector<TensorType> &in, const AttrMap &) { return inferBinary(kind, in); };
  def.eval = [](const std::vector<Tensor> &in, const AttrMap &, const std::vector<TensorType> &out) {
    return std::vector<Tensor>{evalBinary(in, out[0], floatFn, intFn)};
  };
  return def;
}

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Unsigned arithmetic wraps modulo 2^64; converting back gives the two's-complement result.
int64_t wrap(uint64_t value) { return static_cast<int64_t>(value); }

double fAdd(double a, double b) { return a + b; }
int64_t iAdd(int64_t a, int64_t b) { return wrap(static_cast<uint64_t>(a) + static_cast<uint64_t>(b)); }
double fSub(double a, double b) { return a - b; }
int64_t iSub(int64_t a, int64_t b) { return wrap(static_cast<uint64_t>(a) - static_cast<uint64_t>(b)); }
double fMul(double a, double b) { return a * b; }
int64_t iMul(int64_t a, int64_t b) { return wrap(static_cast<uint64_t>(a) * static_cast<uint64_t>(b)); }

double fDiv(double a, double b) { return a / b; }
// C and ONNX semantics: the quotient truncates toward zero.
int64_t iDiv(int64_t a, int64_t b) {
  if (b == 0)
    fail("div: integer division by zero");
  if (b == -1) // INT64_MIN / -1 traps in hardware; as a wrapping negation it is INT64_MIN
    return wrap(0 - static_cast<uint64_t>(a));
  return a / b;
}

double fPow(double a, double b) { return std::pow(a, b); }
// Exact: square-and-multiply in wrapping arithmetic equals repeated multiplication modulo 2^64,
// and narrowing that to a smaller integer type gives its own wrapped product.
int64_t iPow(int64_t base, int64_t exponent) {
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

// NaN in either operand gives NaN, like torch.maximum / numpy.maximum.
double fMax(double a, double b) { return std::isnan(a) || std::isnan(b) ? kNaN : (a > b ? a : b); }
int64_t iMax(int64_t a, int64_t b) { return a > b ? a : b; }
double fMin(double a, double b) { return std::isnan(a) || std::isnan(b) ? kNaN : (a < b ? a : b); }
int64_t iMin(int64_t a, int64_t b) { return a < b ? a : b; }

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

// Comparisons: NaN compares unequal to everything, itself included (IEEE).
double fEq(double a, double b) { return a == b; }
int64_t iEq(int64_t a, int64_t b) { return a == b; }
double fNe(double a, double b) { return a != b; }
int64_t iNe(int64_t a, int64_t b) { return a != b; }
double fLt(double a, double b) { return a < b; }
int64_t iLt(int64_t a, int64_t b) { return a < b; }
double fLe(double a, double b) { return a <= b; }
int64_t iLe(int64_t a, int64_t b) { return a <= b; }
double fGt(double a, double b) { return a > b; }
int64_t iGt(int64_t a, int64_t b) { return a > b; }
double fGe(double a, double b) { return a >= b; }
int64_t iGe(int64_t a, int64_t b) { return a >= b; }

int64_t iAnd(int64_t a, int64_t b) { return a != 0 && b != 0; }
int64_t iOr(int64_t a, int64_t b) { return a != 0 || b != 0; }
int64_t iXor(int64_t a, int64_t b) { return (a != 0) != (b != 0); }
double noFloat(double, double) { return 0; } // unreachable: inference requires bool operands

} // namespace

OpDef defineAdd() { return binaryDef<Kind::Arithmetic, fAdd, iAdd>(); }
OpDef defineSub() { return binaryDef<Kind::Arithmetic, fSub, iSub>(); }
OpDef defineMul() { return binaryDef<Kind::Arithmetic, fMul, iMul>(); }
OpDef defineDiv() { return binaryDef<Kind::Arithmetic, fDiv, iDiv>(); }
OpDef definePow() { return binaryDef<Kind::Arithmetic, fPow, iPow>(); }
OpDef defineMax() { return binaryDef<Kind::Arithmetic, fMax, iMax>(); }
OpDef defineMin() { return binaryDef<Kind::Arithmetic, fMin, iMin>(); }
OpDef defineEq() { return binaryDef<Kind::Equality, fEq, iEq>(); }
OpDef defineNe() { return binaryDef<Kind::Equality, fNe, iNe>(); }
OpDef defineLt() { return binaryDef<Kind::Ordering, fLt, iLt>(); }
OpDef defineLe() { return binaryDef<Kind::Ordering, fLe, iLe>(); }
OpDef defineGt() { return binaryDef<Kind::Ordering, fGt, iGt>(); }
OpDef defineGe() { return binaryDef<Kind::Ordering, fGe, iGe>(); }
OpDef defineAnd() { return binaryDef<Kind::Logical, noFloat, iAnd>(); }
OpDef defineOr() { return binaryDef<Kind::Logical, noFloat, iOr>(); }
OpDef defineXor() { return binaryDef<Kind::Logical, noFloat, iXor>(); }

// mod is the one binary op with an attribute: `fmod` picks the sign convention (ONNX Mod).
OpDef defineMod() {
  OpDef def;
  def.attrs = {intAttr("fmod", 0)};
  def.infer = [](const std::vector<TensorType> &in, const AttrMap &attrs) {
    int64_t fmodFlag = attrInt(attrs, "fmod");
    if (fmodFlag != 0 && fmodFlag != 1)
      fail("attribute 'fmod' must be 0 (floored) or 1 (truncated), got {}", fmodFlag);
    return inferBinary(Kind::Arithmetic, in);
  };
  def.eval = [](const std::vector<Tensor> &in, const AttrMap &attrs, const std::vector<TensorType> &out) {
    bool truncated = attrInt(attrs, "fmod") == 1;
    return std::vector<Tensor>{truncated ? evalBinary(in, out[0], fModTruncated, iModTruncated)
                                         : evalBinary(in, out[0], fModFloored, iModFloored)};
  };
  return def;
}

} // namespace kiln::ir
