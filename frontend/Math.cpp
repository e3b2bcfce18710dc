#include "frontend/Math.h"

#include <limits>

#include "core/Error.h"
#include "ir/ElementwiseOps.h"

namespace kiln::frontend {

using ir::OpKind;

namespace {

// Promotion categories: bool < integers < floats.
int category(DType dtype) { return dtype == DType::Bool ? 0 : isInteger(dtype) ? 1 : 2; }

Var floatOperand(const Var &x) { return isFloat(x.dtype()) ? x : cast(x, DType::F32); }

/// A row of ir/ElementwiseOps.def on `x`, converted first to the kind of operand the row takes.
Var tableUnary(OpKind op, const Var &x) {
  switch (ir::unaryOpRow(op)->domain) {
  case ir::UnaryDomain::FloatOnly:
  case ir::UnaryDomain::FloatToBool: {
    Var operand = floatOperand(x);
    return operand.builder().op(op, {operand});
  }
  case ir::UnaryDomain::BoolOnly: {
    Var operand = cast(x, DType::Bool);
    return operand.builder().op(op, {operand});
  }
  case ir::UnaryDomain::Numeric: break;
  }
  return x.builder().op(op, {x});
}

/// Both operands converted to their promoted dtype; checks they share a builder first so that
/// the error names the op rather than a cast.
std::pair<Var, Var> promoted(std::string_view what, const Var &a, const Var &b) {
  if (!a.defined() || !b.defined())
    fail("{}: operand {} is undefined", what, a.defined() ? 1 : 0);
  if (&a.builder() != &b.builder())
    fail("{}({}, {}): the operands belong to different GraphBuilders", what, a.type().toString(),
         b.type().toString());
  DType common = promoteTypes(a.dtype(), b.dtype());
  return {cast(a, common), cast(b, common)};
}

/// A binary row of ir/ElementwiseOps.def on `a` and `b`, converted as its ApiOperands column says.
Var tableBinary(OpKind op, const Var &a, const Var &b) {
  auto [x, y] = promoted(ir::opName(op), a, b);
  switch (ir::binaryOpRow(op)->apiOperands) {
  case ir::ApiOperands::Promoted: break;
  case ir::ApiOperands::PromotedToFloat: return x.builder().op(op, {floatOperand(x), floatOperand(y)});
  }
  return x.builder().op(op, {x, y});
}

Var floorMod(const Var &a, const Var &b) {
  auto [x, y] = promoted("mod", a, b);
  return x.builder().op(OpKind::Mod, {x, y});
}

Var reduce(OpKind op, const Var &x, std::vector<int64_t> axes, bool keepdims) {
  return x.builder().op(op, {x}, {{"axes", std::move(axes)}, {"keepdims", int64_t{keepdims}}});
}

Var argReduce(OpKind op, const Var &x, int64_t axis, bool keepdims) {
  return x.builder().op(op, {x}, {{"axis", axis}, {"keepdims", int64_t{keepdims}}});
}

Var boolAsCount(const Var &x) { return x.dtype() == DType::Bool ? cast(x, DType::I64) : x; }

Var logical(OpKind op, const Var &a, const Var &b) {
  Var x = cast(a, DType::Bool), y = cast(b, DType::Bool);
  return x.builder().op(op, {x, y});
}

} // namespace

DType promoteTypes(DType a, DType b) {
  if (a == b)
    return a;
  int ca = category(a), cb = category(b);
  if (ca != cb)
    return ca > cb ? a : b;
  // Same category, different types: the wider one; equal widths (i8/u8, f16/bf16) need a type
  // that holds both, the next wider one kiln has.
  if (dtypeSize(a) != dtypeSize(b))
    return dtypeSize(a) > dtypeSize(b) ? a : b;
  return ca == 1 ? DType::I32 : DType::F32;
}

DType scalarOperandType(DType tensor, Scalar::Kind kind) {
  int scalarCategory = kind == Scalar::Kind::Bool ? 0 : kind == Scalar::Kind::Int ? 1 : 2;
  if (scalarCategory <= category(tensor))
    return tensor;
  return scalarCategory == 1 ? DType::I64 : DType::F32;
}

Var scalarLike(const Var &like, Scalar value) {
  return like.builder().scalar(value.value, scalarOperandType(like.dtype(), value.kind));
}

Var cast(const Var &x, DType dtype) {
  if (x.dtype() == dtype)
    return x;
  return x.builder().op(OpKind::Cast, {x}, {{"to", dtype}});
}

#define UNARY_OP(Enum, mnemonic, apiName, ...)                                                      \
  Var apiName(const Var &x) { return tableUnary(OpKind::Enum, x); }
#include "ir/ElementwiseOps.def"

// Each binary function in its three forms; the scalar forms turn the scalar into a constant
// of the type it takes next to the tensor, then share the tensor-tensor path.
#define KILN_DEFINE_BINARY(name, body)                                                                \
  Var name(const Var &a, const Var &b) { return body(a, b); }                                         \
  Var name(const Var &a, Scalar b) { return body(a, scalarLike(a, b)); }                              \
  Var name(Scalar a, const Var &b) { return body(scalarLike(b, a), b); }

#define KILN_LOGICAL(kind) [](const Var &x, const Var &y) { return logical(OpKind::kind, x, y); }

#define BINARY_OP(Enum, mnemonic, apiName, ...)                                                     \
  KILN_DEFINE_BINARY(apiName, [](const Var &x, const Var &y) { return tableBinary(OpKind::Enum, x, y); })
#include "ir/ElementwiseOps.def"
// mod has an attribute (fmod), so it is no row of the table: the default, floored as Python's %.
KILN_DEFINE_BINARY(mod, floorMod)
KILN_DEFINE_BINARY(logicalAnd, KILN_LOGICAL(And))
KILN_DEFINE_BINARY(logicalOr, KILN_LOGICAL(Or))
KILN_DEFINE_BINARY(logicalXor, KILN_LOGICAL(Xor))

#undef KILN_LOGICAL
#undef KILN_DEFINE_BINARY

Var where(const Var &cond, const Var &x, const Var &y) {
  auto [a, b] = promoted("where", x, y);
  return a.builder().op(OpKind::Where, {cond, a, b});
}

Var where(const Var &cond, const Var &x, Scalar y) { return where(cond, x, scalarLike(x, y)); }
Var where(const Var &cond, Scalar x, const Var &y) { return where(cond, scalarLike(y, x), y); }

Var clamp(const Var &x, std::optional<double> min, std::optional<double> max) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  return x.builder().op(OpKind::Clip, {x}, {{"min", min.value_or(-kInf)}, {"max", max.value_or(kInf)}});
}

Var sum(const Var &x, std::vector<int64_t> axes, bool keepdims) {
  return reduce(OpKind::ReduceSum, boolAsCount(x), std::move(axes), keepdims);
}

Var mean(const Var &x, std::vector<int64_t> axes, bool keepdims) {
  return reduce(OpKind::ReduceMean, floatOperand(x), std::move(axes), keepdims);
}

Var prod(const Var &x, std::vector<int64_t> axes, bool keepdims) {
  return reduce(OpKind::ReduceProd, boolAsCount(x), std::move(axes), keepdims);
}

Var max(const Var &x, std::vector<int64_t> axes, bool keepdims) {
  return reduce(OpKind::ReduceMax, x, std::move(axes), keepdims);
}

Var min(const Var &x, std::vector<int64_t> axes, bool keepdims) {
  return reduce(OpKind::ReduceMin, x, std::move(axes), keepdims);
}

Var argmax(const Var &x, int64_t axis, bool keepdims) { return argReduce(OpKind::ArgMax, x, axis, keepdims); }

Var argmin(const Var &x, int64_t axis, bool keepdims) { return argReduce(OpKind::ArgMin, x, axis, keepdims); }

} // namespace kiln::frontend
