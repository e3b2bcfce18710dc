#include "ir/ElementwiseOps.h"

#include <array>

namespace kiln::ir {

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
  static const std::array<const UnaryOpRow *, kNumOps> byOp = [] {
    std::array<const UnaryOpRow *, kNumOps> table{};
    for (const UnaryOpRow &row : unaryOpRows())
      table[static_cast<size_t>(row.op)] = &row;
    return table;
  }();
  return byOp[static_cast<size_t>(op)];
}

} // namespace kiln::ir
