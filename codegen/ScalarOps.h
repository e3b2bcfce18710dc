#pragma once
// The C++ spelling of kiln's elementwise ops, literals and types in generated code.
//
// Semantics follow the reference evaluator (ir/ops/Unary.cpp, Binary.cpp, Elementwise.cpp)
// with two deliberate differences, both because generated code cannot throw:
//  - f32 is computed in f32 (the evaluator computes in double and rounds once), so results
//    differ in the last bits; the tests compare with a relative tolerance.
//  - integer division or modulo by zero gives 0 and a negative integer exponent gives 0 (the
//    evaluator reports an error).
// Integer arithmetic wraps (computed in uint64, narrowed by conversion) as in the evaluator;
// float-to-integer casts truncate and saturate, NaN becoming 0.
#include <string>
#include <vector>

#include "ir/Graph.h"

namespace kiln::codegen {

/// The C++ element type of `dtype` ("float", "int64_t", "bool", ...); kiln::Error for f16/bf16.
std::string cType(DType dtype);

/// A literal of `dtype` with the value `value` (converted as Tensor::setDouble would).
std::string literal(DType dtype, double value);
/// Element `index` of `tensor` as an exact literal of its dtype.
std::string elementLiteral(const Tensor &tensor, int64_t index);

/// The expression computing `node`'s output (an elementwise op: unary, binary, where, cast,
/// clip) from its operands' expressions, of the output's C++ type.
std::string scalarExpression(const ir::Node &node, const std::vector<std::string> &operands);

/// The helper functions every generated translation unit starts with (wrapping integer
/// arithmetic, NaN-propagating max/min, saturating casts, index clamps).
std::string preludeHelpers();

} // namespace kiln::codegen
