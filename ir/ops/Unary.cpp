// Elementwise unary ops: the rows of ir/ElementwiseOps.def. Float inputs are computed in double
// and rounded to the output dtype; ops that make sense on integers (neg, abs, sign, relu,
// rounding) compute them exactly.
#include <cmath>

#include "ir/ElementwiseOps.h"
#include "ir/ops/Common.h"

namespace kiln::ir {

using namespace ops;

namespace {

std::vector<TensorType> inferUnary(UnaryDomain domain, const std::vector<TensorType> &in) {
  DType dtype = in[0].dtype;
  switch (domain) {
  case UnaryDomain::FloatOnly:
  case UnaryDomain::FloatToBool:
    if (!isFloat(dtype))
      fail("needs a floating-point operand, got {}", dtypeName(dtype));
    break;
  case UnaryDomain::Numeric:
    if (dtype == DType::Bool)
      fail("needs a numeric operand, got bool");
    break;
  case UnaryDomain::BoolOnly:
    if (dtype != DType::Bool)
      fail("needs a bool operand, got {}", dtypeName(dtype));
    break;
  }
  return {TensorType{domain == UnaryDomain::FloatToBool ? DType::Bool : dtype, in[0].shape}};
}

// One OpDef per (domain, float function, integer function) triple. Lambdas without captures
// convert to the plain function pointers OpDef stores, so each op gets its own instantiation.
template <UnaryDomain domain, double (*floatFn)(double), int64_t (*intFn)(int64_t)> OpDef unaryDef() {
  OpDef def;
  def.infer = [](const std::vector<TensorType> &in, const AttrMap &) { return inferUnary(domain, in); };
  def.eval = [](const std::vector<Tensor> &in, const AttrMap &, const std::vector<TensorType> &out) {
    return std::vector<Tensor>{mapElements(
        in, out[0], [](const std::vector<double> &x) { return floatFn(x[0]); },
        [](const std::vector<int64_t> &x) { return intFn(x[0]); })};
  };
  return def;
}

// Each row's references as functions (the one of the kind inference rejects is never called).
#define UNARY_OP(Enum, mnemonic, apiName, domain, floatRef, intRef, ...)                                  \
  double referenceFloat##Enum([[maybe_unused]] double x) { return floatRef; }                                 \
  int64_t referenceInt##Enum([[maybe_unused]] int64_t x) { return intRef; }
#include "ir/ElementwiseOps.def"

} // namespace

#define UNARY_OP(Enum, mnemonic, apiName, domain, ...)                                                    \
  OpDef define##Enum() { return unaryDef<UnaryDomain::domain, referenceFloat##Enum, referenceInt##Enum>(); }
#include "ir/ElementwiseOps.def"

} // namespace kiln::ir
