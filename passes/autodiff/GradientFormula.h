#pragma once
// The Gradient column of ir/ElementwiseOps.def: an op's input gradients written as small
// formulas, built here into ops. Grammar (usual precedence, left to right):
//   gradient := {name = formula ;} formula {; formula}   one result per operand, in order
//   formula  := sum [compare sum]          compare: > < >= <= == != (a bool value)
//   sum      := product {(+ | -) product}
//   product  := factor {(* | /) factor}
//   factor   := - number | - factor | number | name | name(formula {, formula}) | (formula)
// The names are g (the upstream gradient), the operands (x for a unary op; a and b for a
// binary one), y (the result) and the gradient's own definitions. A number is a scalar of the
// first operand's dtype (`-0.5` one negative constant, `-y` a neg op). A call is cast (a bool
// as 0/1 of the first operand's dtype), where(cond, t, f), or any op of the table by mnemonic
// with its number of arguments. Each operator builds exactly one op, in the order written, so a
// formula fixes the backward graph as a hand-written rule would.
#include <string_view>
#include <vector>

#include "ir/Builder.h"

namespace kiln::passes::autodiff {

/// The values a formula's names stand for.
struct FormulaValues {
  ir::Value *g;                      // the upstream gradient
  std::vector<ir::Value *> operands; // the forward operands: x, or a and b
  ir::Value *y;                      // the forward result
};

/// Builds `gradient` at the builder's insertion point and returns one value per operand. A
/// malformed gradient is a kiln::Error naming `op`, the text and the column where reading stopped.
std::vector<ir::Value *> buildGradientFormula(ir::Builder &b, ir::OpKind op, std::string_view gradient,
                                              const FormulaValues &values);

} // namespace kiln::passes::autodiff
