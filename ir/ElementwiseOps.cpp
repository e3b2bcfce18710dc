#include "ir/ElementwiseOps.h"

#include <array>

namespace kiln::ir {

namespace {

/// The rows of `rows` indexed by op kind (nullptr for the other ops).
template <typename Row> std::array<const Row *, kNumOps> indexByOp(const std::vector<Row> &rows) {
  std::array<const Row *, kNumOps> table{};
  for (const Row &row : rows)
    table[static_cast<size_t>(row.op)] = &row;
  return table;
}

} // namespace

const std::vector<UnaryOpRow> &unaryOpRows() {
  static const std::vector<UnaryOpRow> rows = {
#define UNARY_OP(Enum, mnemonic, apiName, domain, floatRef, intRef, spelling, f32Spelling, intSpelling, half,   \
                 gradient, onnxName)                                                                          \
  {OpKind::Enum, #apiName, UnaryDomain::domain, spelling, f32Spelling, intSpelling, HalfPrecision::half, gradient,  \
   onnxName},
#include "ir/ElementwiseOps.def"
  };
  return rows;
}

const UnaryOpRow *unaryOpRow(OpKind op) {
  static const std::array<const UnaryOpRow *, kNumOps> byOp = indexByOp(unaryOpRows());
  return byOp[static_cast<size_t>(op)];
}

const std::vector<BinaryOpRow> &binaryOpRows() {
  static const std::vector<BinaryOpRow> rows = {
#define BINARY_OP(Enum, mnemonic, apiName, domain, symmetry, apiOperands, floatRef, intRef, spelling, intSpelling,  \
                  half, gradient, onnxName)                                                                       \
  {OpKind::Enum, #apiName, BinaryDomain::domain, ApiOperands::apiOperands, spelling, intSpelling,                  \
   HalfPrecision::half, gradient, onnxName},
#include "ir/ElementwiseOps.def"
  };
  return rows;
}

const BinaryOpRow *binaryOpRow(OpKind op) {
  static const std::array<const BinaryOpRow *, kNumOps> byOp = indexByOp(binaryOpRows());
  return byOp[static_cast<size_t>(op)];
}

} // namespace kiln::ir
