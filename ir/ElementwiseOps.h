#pragma once
// The data columns of ir/ElementwiseOps.def, the table of plain elementwise ops, for the layers
// that expand them at run time: codegen spells an op from them, autodiff builds its gradient,
// the graph API converts its operands, the ONNX importer maps an op type onto it. (ir itself
// expands the reference columns at compile time, in ir/ops/Unary.cpp and Binary.cpp.)
#include <string_view>
#include <vector>

#include "ir/Op.h"

namespace kiln::ir {

/// Which operand dtypes a unary op accepts and what it returns (the Domain column).
enum class UnaryDomain {
  FloatOnly,   // a float operand; the result has its dtype
  Numeric,     // any dtype but bool; the result has its dtype
  BoolOnly,    // a bool operand and result
  FloatToBool, // a float operand; a bool result
};

/// Which operand dtypes a binary op accepts (both have one dtype) and what it returns.
enum class BinaryDomain {
  Arithmetic, // numeric operands (not bool); the result has their dtype
  Ordering,   // numeric operands; a bool result (lt le gt ge)
  Equality,   // any dtype, bool included; a bool result (eq ne)
  Logical,    // bool operands and result (and or xor)
};

/// How the graph API converts a binary op's operands (the ApiOperands column).
enum class ApiOperands {
  Promoted,        // to their common dtype (frontend::promoteTypes)
  PromotedToFloat, // to their common dtype, then integer and bool to f32 (torch's true division)
};

/// How generated code computes an op on f16 or bf16 operands (the Half column).
enum class HalfPrecision {
  Exact,   // in float: the result is exact (an operand, a value with fewer bits, or bool)
  Rounded, // in float, then rounded to the dtype: correctly rounded, as through double
  Wide,    // in double, then rounded: as the evaluator computes it
};

/// One unary row of the table: everything but the reference functions.
struct UnaryOpRow {
  OpKind op;
  std::string_view apiName;     // the graph API function (frontend/Math.h)
  UnaryDomain domain;
  std::string_view spelling;    // generated C++ for float operands: a format of {x}, {type}, {one}
  std::string_view f32Spelling; // for f32 operands where it differs, else empty
  std::string_view intSpelling; // for integer and bool operands; empty for float-only ops
  HalfPrecision half;
  std::string_view gradient;    // a formula of g, x, y; empty: no gradient
  std::string_view onnxName;    // the ONNX op type that is exactly this op, or empty
};

/// One binary row of the table: everything but the reference functions.
struct BinaryOpRow {
  OpKind op;
  std::string_view apiName; // the graph API function (frontend/Math.h), with scalar forms
  BinaryDomain domain;
  ApiOperands apiOperands;
  std::string_view spelling;    // generated C++ for float operands: a format of {a}, {b}, {type}
  std::string_view intSpelling; // for integer and bool operands; empty where inference rejects them
  HalfPrecision half;
  std::string_view gradient; // "dA; dB" of g, a, b, y (after "name = formula;" definitions); empty: none
  std::string_view onnxName; // the ONNX op type that is exactly this op, or empty
};

/// Every unary row, in table order.
const std::vector<UnaryOpRow> &unaryOpRows();
/// The unary row of `op`, or nullptr when `op` is not a unary row of the table.
const UnaryOpRow *unaryOpRow(OpKind op);

/// Every binary row, in table order.
const std::vector<BinaryOpRow> &binaryOpRows();
/// The binary row of `op`, or nullptr when `op` is not a binary row of the table.
const BinaryOpRow *binaryOpRow(OpKind op);

} // namespace kiln::ir
