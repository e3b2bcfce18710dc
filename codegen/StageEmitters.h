#pragma once
// The emitters of each stage kind (internal to codegen): each writes the static functions a
// stage needs and the statements that run it inside the kernel function.
#include <functional>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "codegen/KernelEmitter.h"

namespace kiln::codegen {

struct KernelText {
  /// Static functions (row functions, epilogues), in order.
  std::string functions;
  /// Statements of the kernel function after the context is set up, in order.
  std::vector<std::string> body;
  /// Operands the statements read prepacked.
  std::vector<PackedWeight> packedOperands;
};

/// Work below this many elements runs on the calling thread: handing it to the pool costs
/// more than it saves.
inline constexpr int64_t kMinParallelElements = 32768;

/// The statement running row function `fn` over [0, rows), each row `rowElements` elements
/// each costing `elementCost` (stageElementCost): a direct call for small work, else
/// rt->parallel_for with a grain of about kMinParallelElements / 2 element costs.
std::string runRows(const std::string &fn, int64_t rows, int64_t rowElements, int64_t elementCost = 1);

/// What one element of `stage`'s domain costs, in units of a plain elementwise op's element
/// (what kMinParallelElements counts): 1, plus kMathCallCost for every op computed for it
/// whose generated code calls a math function (exp, tanh, erf, pow, ...: its spelling in
/// ir/ElementwiseOps.def calls std:: or a kiln_ helper).
inline constexpr int64_t kMathCallCost = 8;
int64_t stageElementCost(const Stage &stage);

/// A Loop stage (or, with `zero` set, a contraction over an empty inner dim whose result
/// `zero` is all zeros, lowered as a loop over its epilogue).
void emitLoopStage(KernelEmitter &emitter, int stage, KernelText &out, const ir::Value *zero = nullptr);
void emitRowsStage(KernelEmitter &emitter, int stage, KernelText &out);
/// A reduction's accumulator in generated code: its C type and initial value (float sums and
/// products in double, as the reference evaluator computes them; integers in int64).
struct ReductionAccumulator {
  std::string type, init;
};
ReductionAccumulator reductionAccumulator(ir::OpKind op, DType dtype);

/// The statement folding `x` into the lane accumulator `acc` of a vectorised sum, product, max
/// or min (row and column forms). A float max/min keeps a NaN flag `nan` apart from its
/// compare-and-select, so that the lanes become one compare-and-blend each (a select on
/// `x > m || x != x` does not vectorise); the caller turns a flagged lane into NaN.
std::string foldStatement(const ir::Node &node, const std::string &acc, const std::string &nan, const std::string &x);

/// Whether `value` is computed from any of `targets` (a walk up its producers).
bool computedFrom(const ir::Value *value, const std::set<const ir::Value *> &targets);

/// A stage's reductions grouped, in body order, into passes over the rows: a reduction joins
/// the current pass unless it reads one of the pass's results, or `alone` holds for it or for
/// the pass's first reduction (row and column forms).
std::vector<std::vector<const ir::Node *>> reductionPasses(const std::vector<const ir::Node *> &reductions,
                                                           const std::function<bool(const ir::Node &)> &alone);
/// Whether Rows stage `stage` suits the column form (codegen/EmitColumnReduction.cpp): its
/// innermost dim is kept and at least one block of lanes wide, and it has only sum, prod, max
/// and min reductions. emitRowsStage makes the choice.
bool columnReductionFits(const Stage &stage);
/// Emits a fitting Rows stage in the column form; false (nothing written) when an operand is
/// read strided along the innermost dim, which the row form reads better.
bool emitColumnReductionStage(KernelEmitter &emitter, int stage, KernelText &out);
void emitGemmStage(KernelEmitter &emitter, int stage, KernelText &out);
void emitConvStage(KernelEmitter &emitter, int stage, KernelText &out);
void emitPoolStage(KernelEmitter &emitter, int stage, KernelText &out);
/// A Recurrence stage: one call of rt->recurrence (codegen/EmitRecurrence.cpp).
void emitRecurrenceStage(KernelEmitter &emitter, int stage, KernelText &out);
void emitQuantizedProductStage(KernelEmitter &emitter, int stage, KernelText &out);

/// The output coordinates of the tile element (batch, row, col) a library kernel hands to an
/// epilogue.
using CoordsOf = std::function<std::vector<Index>(IndexArena &, const Index &batch, const Index &row, const Index &col)>;

/// Writes the epilogue (a kiln_epilogue_fn) of contraction stage `stage` over `batches` output
/// matrices of `rows` x `cols`, and returns its name, or "NULL" when the stage stores nothing
/// but the tile itself (codegen/EmitContraction.cpp).
std::string emitEpilogue(KernelEmitter &emitter, int stage, KernelText &out, int64_t batches, int64_t rows,
                         int64_t cols, const CoordsOf &coordsOf);

/// emitEpilogue for a stage whose output y is [N, C, spatial...] and whose library kernel hands
/// image n over as a C x (spatial extents' product) matrix (conv2d, qconv2d, conv_transpose).
std::string emitChannelPlaneEpilogue(KernelEmitter &emitter, int stage, KernelText &out, const Shape &y);

} // namespace kiln::codegen
