#pragma once
// How codegen lowers each op: one exhaustive switch over OpKind (loweringOf), so an op added to
// ir/Ops.def without a decision here is a compile error (-Werror=switch), and the planner's
// questions (is it inlinable, a reduction, a direct stage, ...) all read this one table.
// OpLoweringTest walks every op and checks that each lowering has what it needs (a scalar
// spelling for every dtype a Scalar op accepts, an emitter for every Direct op).
#include <string_view>

#include "ir/Op.h"

namespace kiln::codegen {

enum class Lowering {
  Source,      // param, constant: a buffer, no code
  Scalar,      // an elementwise op: one C++ expression per element (codegen/ScalarOps.h)
  Index,       // movement, indexing, iota and random_uniform: computed inline by index arithmetic
  Reduction,   // a row (or column) reduction stage
  Contraction, // matmul, conv, conv_transpose, einsum, qmatmul, qconv: a library-backed or generic stage
  Pool,        // max_pool, avg_pool
  WeightGrad,  // conv_weight_grad: im2col + gemm, or loops
  Direct,      // a loop nest of its own per op (codegen/EmitDirect.h)
  Recurrence,  // rnn/gru/lstm_sequence: the runtime's recurrent kernel, the time loop inside
  Group,       // a fusion kernel group: its body is lowered, op by op
  Decomposed,  // a composite: never reaches codegen
};

/// The lowering of `op`.
Lowering loweringOf(ir::OpKind op);
std::string_view loweringName(Lowering lowering);

/// A Scalar or Index op: computed inside the loop of the stage that reads it.
inline bool isInlinable(ir::OpKind op) {
  Lowering lowering = loweringOf(op);
  return lowering == Lowering::Scalar || lowering == Lowering::Index;
}

} // namespace kiln::codegen
