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
// float-to-integer casts truncate and saturate, NaN becoming 0; float max/min give NaN when
// either operand is NaN.
//
// f16 and bf16 are storage types: buffers hold their 16-bit patterns (uint16_t), loads widen
// them to float, and a value of either dtype is a float holding a value of that dtype exactly
// (every op result is rounded to it, round to nearest even as core/Tensor.cpp's floatToHalf and
// floatToBFloat16 do), so stores narrow exactly. The results are bit-identical to the
// evaluator's (double, rounded to float, then to the 16-bit dtype): +, -, *, / and sqrt are
// computed in float, because rounding their exact result to double and then to float equals
// rounding it to float once (double has more than 2 * 24 + 2 bits); the other math functions
// call the same double function as the evaluator and round the same way.
#include <string>
#include <vector>

#include "ir/Graph.h"

namespace kiln::codegen {

/// f16 or bf16: stored as uint16_t bit patterns, computed in float.
bool isHalfFloat(DType dtype);

/// The C++ type of a value of `dtype` in generated expressions and variables ("float",
/// "int64_t", "bool", ...; "float" for f16 and bf16).
std::string cType(DType dtype);
/// The C++ element type of a buffer of `dtype`: "uint16_t" for f16 and bf16, else cType.
std::string storageType(DType dtype);
/// The value of the buffer element `element` (of storageType) as a cType expression.
std::string widenExpression(DType dtype, const std::string &element);
/// The buffer element (of storageType) holding `value` (a cType expression).
std::string narrowExpression(DType dtype, const std::string &value);
/// `value`, a float expression, rounded to a value of `dtype` (f16, bf16; else unchanged).
std::string roundExpression(DType dtype, const std::string &value);

/// A literal of `dtype` with the value `value` (converted as Tensor::setDouble would), of
/// cType(dtype).
std::string literal(DType dtype, double value);
/// Element `index` of `tensor` as an exact literal of cType(its dtype).
std::string elementLiteral(const Tensor &tensor, int64_t index);

/// The expression computing `node`'s output (an elementwise op: unary, binary, where, cast,
/// clip) from its operands' expressions, of the output's C++ type (for f16 and bf16 outputs
/// already rounded to the dtype).
std::string scalarExpression(const ir::Node &node, const std::vector<std::string> &operands);

/// random_uniform (ir/ops/Random.cpp): the uint64_t key of `node`'s stream (its seed) at the
/// offset expression `offset` (of the offset input's dtype; "" when the op has no offset input).
std::string randomKeyExpression(const ir::Node &node, const std::string &offset);
/// Element `index` (an int64_t expression) of the stream `key` as a value of `dtype` (f32, f64)
/// in [0, 1), bit-identical to the evaluator's.
std::string randomUnitExpression(DType dtype, const std::string &key, const std::string &index);

/// The helper functions every generated translation unit starts with (wrapping integer
/// arithmetic, NaN-propagating max/min, saturating casts, index clamps, f16/bf16 conversions,
/// random_uniform's counter-based stream).
std::string preludeHelpers();

} // namespace kiln::codegen
