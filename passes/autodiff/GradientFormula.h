#pragma once
// The Gradient column of ir/ElementwiseOps.def: a unary op's input gradient written as a small
// formula, built here into ops. Grammar (usual precedence, left to right):
//   formula := sum [compare sum]            compare: > < >= <= == != (a bool value)
//   sum     := product {(+ | -) product}
//   product := factor {(* | /) factor}
//   factor  := - number | - factor | number | g | x | y | name(formula) | (formula)
// g is the upstream gradient, x the operand and y the result; a number is a scalar of x's dtype
// (`-0.5` one negative constant, `-y` a neg op); name is cast (a bool as 0/1 of x's dtype) or
// any op of the table by mnemonic. Each operator builds exactly one op, in the order written, so
// a formula fixes the backward graph as a hand-written rule would.
#include <string_view>

#include "ir/Builder.h"

namespace kiln::passes::autodiff {

/// The values a formula's names stand for.
struct FormulaValues {
  ir::Value *g; // the upstream gradient
  ir::Value *x; // the forward operand
  ir::Value *y; // the forward result
};

/// Builds `formula` at the builder's insertion point and returns its value. A malformed formula
/// is a kiln::Error naming `op`, the formula and the column where parsing stopped.
ir::Value *buildGradientFormula(ir::Builder &b, ir::OpKind op, std::string_view formula, const FormulaValues &values);

} // namespace kiln::passes::autodiff
