#pragma once
// Math on Vars: unary functions, binary functions with numpy broadcasting (from the IR ops)
// and torch-like dtype promotion (done here, by inserting casts), comparisons, logical ops,
// where, cast and clamp, the operator overloads, and reductions.
//
// Promotion: bool < integers < floats; within integers the wider type wins (i8 with u8 gives
// i32, kiln having no i16); within floats the wider type wins (f16 with bf16 gives f32). A
// C++ scalar operand takes the tensor's dtype unless it is of a higher category, as in torch:
// `i32 * 2` is i32, `i32 * 0.5` is f32, `bool + 1` is i64.
#include <optional>
#include <type_traits>

#include "frontend/GraphBuilder.h"

namespace kiln::frontend {

/// The dtype two tensor operands are converted to.
DType promoteTypes(DType a, DType b);

/// A C++ number used as an operand; remembers whether it was written as a bool, an integer or
/// a floating-point value, which decides promotion. The value is held as a double, so integers
/// beyond 2^53 lose their low bits.
struct Scalar {
  enum class Kind { Bool, Int, Float };
  template <typename T, std::enable_if_t<std::is_arithmetic_v<T>, int> = 0>
  Scalar(T v) // NOLINT: implicit on purpose, so that `x * 2.0` and `add(x, 1)` read naturally
      : value(static_cast<double>(v)),
        kind(std::is_same_v<T, bool> ? Kind::Bool : std::is_integral_v<T> ? Kind::Int : Kind::Float) {}
  double value;
  Kind kind;
};

/// The dtype a scalar operand takes next to a tensor of dtype `tensor`.
DType scalarOperandType(DType tensor, Scalar::Kind kind);
/// A scalar as a rank-0 constant of the type it takes next to `like`.
Var scalarLike(const Var &like, Scalar value);

/// Converts to `dtype`; returns `x` itself when it already has that dtype.
Var cast(const Var &x, DType dtype);

// Unary: one function per row of ir/ElementwiseOps.def, named by its ApiName column (neg, abs,
// exp, ..., sinh, ..., floor, sign, logicalNot, isnan, isinf). The float-only functions (exp,
// log, sqrt, trigonometry, isnan, ...) convert integer and bool operands to f32 first, as torch
// does; logicalNot compares a non-bool operand with zero first.
#define UNARY_OP(Enum, mnemonic, apiName, ...) Var apiName(const Var &x);
#include "ir/ElementwiseOps.def"

// Binary, each also with a scalar on either side: one function per binary row of
// ir/ElementwiseOps.def, named by its ApiName column (add, sub, mul, div, pow, maximum, minimum,
// eq, ne, lt, le, gt, ge, bitwiseAnd, bitwiseOr, bitwiseXor). The operands are promoted to
// their common dtype; div is true division, as torch's `/` (integer and bool operands are
// converted to f32); comparisons give bool; the bitwise functions are the IR's and/or/xor, so
// their promoted operands must be bool (the IR has no integer bitwise ops yet).
#define KILN_BINARY_FN(name)                                                                          \
  Var name(const Var &a, const Var &b);                                                               \
  Var name(const Var &a, Scalar b);                                                                   \
  Var name(Scalar a, const Var &b);
#define BINARY_OP(Enum, mnemonic, apiName, ...) KILN_BINARY_FN(apiName)
#include "ir/ElementwiseOps.def"
/// Python's %: the remainder takes the divisor's sign (mod with fmod = 0).
KILN_BINARY_FN(mod)
// Logical ops convert both operands to bool first.
KILN_BINARY_FN(logicalAnd)
KILN_BINARY_FN(logicalOr)
KILN_BINARY_FN(logicalXor)
#undef KILN_BINARY_FN

/// Elementwise select; `cond` must be bool, `x` and `y` are promoted to a common dtype.
Var where(const Var &cond, const Var &x, const Var &y);
Var where(const Var &cond, const Var &x, Scalar y);
Var where(const Var &cond, Scalar x, const Var &y);

/// Clamps to [min, max]; either bound may be omitted.
Var clamp(const Var &x, std::optional<double> min, std::optional<double> max);

// Operators: the arithmetic ones map to add/sub/mul/div/mod, comparisons to eq..ge, & | ^ to
// the bitwise functions and ! to logicalNot.
#define KILN_BINARY_OPERATOR(op, fn)                                                                  \
  inline Var operator op(const Var &a, const Var &b) { return fn(a, b); }                           \
  inline Var operator op(const Var &a, Scalar b) { return fn(a, b); }                               \
  inline Var operator op(Scalar a, const Var &b) { return fn(a, b); }
KILN_BINARY_OPERATOR(+, add)
KILN_BINARY_OPERATOR(-, sub)
KILN_BINARY_OPERATOR(*, mul)
KILN_BINARY_OPERATOR(/, div)
KILN_BINARY_OPERATOR(%, mod)
KILN_BINARY_OPERATOR(==, eq)
KILN_BINARY_OPERATOR(!=, ne)
KILN_BINARY_OPERATOR(<, lt)
KILN_BINARY_OPERATOR(<=, le)
KILN_BINARY_OPERATOR(>, gt)
KILN_BINARY_OPERATOR(>=, ge)
KILN_BINARY_OPERATOR(&, bitwiseAnd)
KILN_BINARY_OPERATOR(|, bitwiseOr)
KILN_BINARY_OPERATOR(^, bitwiseXor)
#undef KILN_BINARY_OPERATOR

inline Var operator-(const Var &x) { return neg(x); }
inline Var operator!(const Var &x) { return logicalNot(x); }

inline Var &operator+=(Var &a, const Var &b) { return a = add(a, b); }
inline Var &operator-=(Var &a, const Var &b) { return a = sub(a, b); }
inline Var &operator*=(Var &a, const Var &b) { return a = mul(a, b); }
inline Var &operator/=(Var &a, const Var &b) { return a = div(a, b); }
inline Var &operator+=(Var &a, Scalar b) { return a = add(a, b); }
inline Var &operator-=(Var &a, Scalar b) { return a = sub(a, b); }
inline Var &operator*=(Var &a, Scalar b) { return a = mul(a, b); }
inline Var &operator/=(Var &a, Scalar b) { return a = div(a, b); }

// Reductions. `axes` may be negative; an empty list reduces over every axis (giving a scalar
// unless keepdims). Dtypes follow torch: sum and prod of bool count in i64, mean of an integer
// or bool tensor is computed in f32.
Var sum(const Var &x, std::vector<int64_t> axes = {}, bool keepdims = false);
Var mean(const Var &x, std::vector<int64_t> axes = {}, bool keepdims = false);
Var prod(const Var &x, std::vector<int64_t> axes = {}, bool keepdims = false);
/// The largest element over `axes` (the elementwise maximum of two Vars is `maximum`).
Var max(const Var &x, std::vector<int64_t> axes = {}, bool keepdims = false);
Var min(const Var &x, std::vector<int64_t> axes = {}, bool keepdims = false);
/// The i64 position of the first largest (smallest) element along `axis`.
Var argmax(const Var &x, int64_t axis, bool keepdims = false);
Var argmin(const Var &x, int64_t axis, bool keepdims = false);

} // namespace kiln::frontend
