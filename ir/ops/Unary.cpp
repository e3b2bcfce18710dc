// Elementwise unary ops. Float inputs are computed in double and rounded to the output dtype;
// ops that make sense on integers (neg, abs, sign, relu, rounding) compute them exactly.
#include <cmath>

#include "ir/ops/Common.h"

namespace kiln::ir {

using namespace ops;

namespace {

enum class Domain { FloatOnly, Numeric, BoolOnly, FloatToBool };

std::vector<TensorType> inferUnary(Domain domain, const std::vector<TensorType> &in) {
  DType dtype = in[0].dtype;
  switch (domain) {
  case Domain::FloatOnly:
  case Domain::FloatToBool:
    if (!isFloat(dtype))
      fail("needs a floating-point operand, got {}", dtypeName(dtype));
    break;
  case Domain::Numeric:
    if (dtype == DType::Bool)
      fail("needs a numeric operand, got bool");
    break;
  case Domain::BoolOnly:
    if (dtype != DType::Bool)
      fail("needs a bool operand, got {}", dtypeName(dtype));
    break;
  }
  return {TensorType{domain == Domain::FloatToBool ? DType::Bool : dtype, in[0].shape}};
}

// One OpDef per (domain, float function, integer function) triple. Lambdas without captures
// convert to the plain function pointers OpDef stores, so each op gets its own instantiation.
template <Domain domain, double (*floatFn)(double), int64_t (*intFn)(int64_t)> OpDef unaryDef() {
  OpDef def;
  def.infer = [](const std::vector<TensorType> &in, const AttrMap &) { return inferUnary(domain, in); };
  def.eval = [](const std::vector<Tensor> &in, const AttrMap &, const std::vector<TensorType> &out) {
    return std::vector<Tensor>{mapElements(
        in, out[0], [](const std::vector<double> &x) { return floatFn(x[0]); },
        [](const std::vector<int64_t> &x) { return intFn(x[0]); })};
  };
  return def;
}

int64_t noInt(int64_t) { return 0; } // unreachable: inference rejects integer operands
double fNeg(double x) { return -x; }
// Negation in uint64 so that INT64_MIN wraps to itself (as numpy does) instead of being UB.
int64_t iNeg(int64_t x) { return static_cast<int64_t>(0 - static_cast<uint64_t>(x)); }
double fAbs(double x) { return std::fabs(x); }
int64_t iAbs(int64_t x) { return x < 0 ? iNeg(x) : x; }
double fExp(double x) { return std::exp(x); }
double fExpm1(double x) { return std::expm1(x); }
double fLog(double x) { return std::log(x); }
double fLog1p(double x) { return std::log1p(x); }
double fSqrt(double x) { return std::sqrt(x); }
double fRsqrt(double x) { return 1.0 / std::sqrt(x); }
double fReciprocal(double x) { return 1.0 / x; }
double fTanh(double x) { return std::tanh(x); }
double fSigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
double fErf(double x) { return std::erf(x); }
double fRelu(double x) { return x > 0 ? x : (std::isnan(x) ? x : 0.0); }
int64_t iRelu(int64_t x) { return x > 0 ? x : 0; }
double fSin(double x) { return std::sin(x); }
double fCos(double x) { return std::cos(x); }
double fTan(double x) { return std::tan(x); }
double fAsin(double x) { return std::asin(x); }
double fAcos(double x) { return std::acos(x); }
double fAtan(double x) { return std::atan(x); }
double fSinh(double x) { return std::sinh(x); }
double fCosh(double x) { return std::cosh(x); }
double fFloor(double x) { return std::floor(x); }
double fCeil(double x) { return std::ceil(x); }
// Halves round to even, as in numpy and ONNX (nearbyint uses the default rounding mode).
double fRound(double x) { return std::nearbyint(x); }
int64_t iIdentity(int64_t x) { return x; }
double fSign(double x) { return std::isnan(x) ? x : (x > 0) - (x < 0); }
int64_t iSign(int64_t x) { return (x > 0) - (x < 0); }
int64_t iNot(int64_t x) { return x == 0; }
double fIsNan(double x) { return std::isnan(x) ? 1 : 0; }
double fIsInf(double x) { return std::isinf(x) ? 1 : 0; }
double noFloat(double) { return 0; } // unreachable: inference rejects float operands

} // namespace

OpDef defineNeg() { return unaryDef<Domain::Numeric, fNeg, iNeg>(); }
OpDef defineAbs() { return unaryDef<Domain::Numeric, fAbs, iAbs>(); }
OpDef defineExp() { return unaryDef<Domain::FloatOnly, fExp, noInt>(); }
OpDef defineExpm1() { return unaryDef<Domain::FloatOnly, fExpm1, noInt>(); }
OpDef defineLog() { return unaryDef<Domain::FloatOnly, fLog, noInt>(); }
OpDef defineLog1p() { return unaryDef<Domain::FloatOnly, fLog1p, noInt>(); }
OpDef defineSqrt() { return unaryDef<Domain::FloatOnly, fSqrt, noInt>(); }
OpDef defineRsqrt() { return unaryDef<Domain::FloatOnly, fRsqrt, noInt>(); }
OpDef defineReciprocal() { return unaryDef<Domain::FloatOnly, fReciprocal, noInt>(); }
OpDef defineTanh() { return unaryDef<Domain::FloatOnly, fTanh, noInt>(); }
OpDef defineSigmoid() { return unaryDef<Domain::FloatOnly, fSigmoid, noInt>(); }
OpDef defineErf() { return unaryDef<Domain::FloatOnly, fErf, noInt>(); }
OpDef defineRelu() { return unaryDef<Domain::Numeric, fRelu, iRelu>(); }
OpDef defineSin() { return unaryDef<Domain::FloatOnly, fSin, noInt>(); }
OpDef defineCos() { return unaryDef<Domain::FloatOnly, fCos, noInt>(); }
OpDef defineTan() { return unaryDef<Domain::FloatOnly, fTan, noInt>(); }
OpDef defineAsin() { return unaryDef<Domain::FloatOnly, fAsin, noInt>(); }
OpDef defineAcos() { return unaryDef<Domain::FloatOnly, fAcos, noInt>(); }
OpDef defineAtan() { return unaryDef<Domain::FloatOnly, fAtan, noInt>(); }
OpDef defineSinh() { return unaryDef<Domain::FloatOnly, fSinh, noInt>(); }
OpDef defineCosh() { return unaryDef<Domain::FloatOnly, fCosh, noInt>(); }
OpDef defineFloor() { return unaryDef<Domain::Numeric, fFloor, iIdentity>(); }
OpDef defineCeil() { return unaryDef<Domain::Numeric, fCeil, iIdentity>(); }
OpDef defineRound() { return unaryDef<Domain::Numeric, fRound, iIdentity>(); }
OpDef defineSign() { return unaryDef<Domain::Numeric, fSign, iSign>(); }
OpDef defineNot() { return unaryDef<Domain::BoolOnly, noFloat, iNot>(); }
OpDef defineIsNan() { return unaryDef<Domain::FloatToBool, fIsNan, noInt>(); }
OpDef defineIsInf() { return unaryDef<Domain::FloatToBool, fIsInf, noInt>(); }

} // namespace kiln::ir
