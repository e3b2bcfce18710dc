#pragma once
// From a kernel group (or a single node) to a loop-nest description: the stages one generated
// kernel runs, each with its iteration domain, the values it stores, and for library-backed
// stages the operand layouts.
//
// A *unit* is what one generated kernel function computes: the body of a `kernel` node, or a
// scratch body holding one plain node. Its buffers are the unit's operands (in operand order),
// its results, and temporaries for values a later stage must read from memory.
//
// Stages (one loop nest each, run in order):
//  - Loop: one loop over `domain`, the shape of the values it stores; every value it needs is
//    computed inline per element, movement ops become index arithmetic (codegen/IndexExpr.h),
//    pad/concat become clamped loads with selects, gather an indirect load. The outer dims are
//    flattened into a parallel row index and the last dim is the contiguous inner loop (the
//    last two dims walked in tiles when an operand is read transposed).
//  - Rows: a row kernel for reductions over the same axes of the same `domain`: the kept dims
//    are the parallel rows, the reduced dims the inner loops; each reduction is one pass over
//    the row (long passes with sixteen accumulator lanes, so they vectorise), then the
//    elementwise tail stores the values over the whole domain and the per-row values
//    (softmax, layernorm: one kernel); a pass operand the tail needs again and that takes a
//    transcendental (softmax's exponentials) is kept per row for it.
//  - Gemm / Conv: rt->gemm or rt->conv2d on the anchor, with a generated epilogue that stores
//    every value of the stage per output element of each tile.
//  - Pool: rt->pool2d.
//  - Generic: matmul/conv/conv_transpose/pooling/einsum the library lacks (other dtypes, 3-D,
//    every einsum) as a generated loop nest; ConvTranspose: f32 conv_transpose as rt->gemm +
//    generated col2im with the epilogue (codegen/GenericContraction.h).
//  - ConvWeightGrad: conv_weight_grad as im2col + rt->gemm (codegen/EmitConvWeightGrad.cpp).
//  - Direct: one whole op as a loop nest written for it (scatter*, cumsum, topk, resize; codegen/EmitDirect.h).
//  - Recurrence: rnn/gru/lstm_sequence as one call of rt->recurrence over contiguous operands
//    (codegen/EmitRecurrence.cpp).
//  - QuantizedProduct: qmatmul (qconv) as one call of rt->qgemm (rt->qconv2d) over contiguous operands, its
//    group's elementwise tail as the epilogue (codegen/EmitQuantized.cpp).
//
// Loop order: the innermost loop always runs along the last dim of the stored values, so
// stores are contiguous; loads that broadcast hoist out of the loops they do not depend on
// (codegen/KernelEmitter.h).
//
// Strategies (chosen from the body's ops; the kernel's `rule` is advisory): elementwise (one
// Loop stage per distinct stored shape), rows, contraction (operands that are not strided views
// of a buffer are first materialised by Loop stages), and per-op, the fallback that gives every
// node its own stage with temporaries in between. A strategy that meets a body it cannot
// express (a reduction read at another row, an epilogue that changes layout) throws
// StrategyMismatch and the unit is lowered per op, which is always possible for supported ops.
//
// Not supported (a kiln::Error naming op, dtype and node): composite ops (run `decompose`
// first), f16/bf16 values of ops that are neither computed inline nor reductions (matmul,
// conv, pooling, the direct ops). Elsewhere f16/bf16 are stored as 16-bit patterns and
// computed in float, bit-identical to the reference evaluator (codegen/ScalarOps.h).
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "codegen/IndexExpr.h"
#include "codegen/Precision.h"
#include "ir/Graph.h"

namespace kiln::codegen {

/// Thrown by a strategy that cannot express a body; the caller falls back to per-op lowering.
class StrategyMismatch : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// The graph a unit computes, with its operands' bindings.
struct Unit {
  /// The kernel's body, or `owned` for a single node.
  const ir::Graph *body = nullptr;
  std::unique_ptr<ir::Graph> owned;
  /// The kernel's rule attribute ("" for a single node).
  std::string rule;
  /// Per body input: a constant to inline instead of a buffer (undefined: a buffer operand).
  std::vector<Tensor> inlinedOperands;
  /// For messages: the node this unit lowers, as `%name` or `#index`.
  std::string nodeLabel;
  /// Per operand buffer: whether it holds a weight (parameter or constant) that only this unit
  /// reads, which the runtime may therefore store in another layout (a matmul's B as prepacked
  /// panels). Set by the model emitter, which sees the whole graph; empty means none.
  std::vector<bool> soleWeightOperands;
  /// Convolutions without Winograd (EmitOptions::exactConvolutions). Set by the model emitter.
  bool exactConvolutions = false;
  /// EmitOptions::precision. Set by the model emitter.
  ContractionPrecision precision = ContractionPrecision::F32;
  /// The body input (operand) whose buffer the memory plan gave this unit's result, for the
  /// unit's convolution to accumulate into (passes/fusion/AccumulatedOperand.h); -1 for none.
  int accumulatedOperand = -1;
};

/// An operand a kernel reads repacked (kiln_weight_packing): for KILN_PACK_GEMM_B_PANELS, in
/// gemm's prepacked B layout, runtime::kernels::packGemmB(data, k, n, strideK, strideN); for
/// KILN_PACK_CONV_WINOGRAD_F2 and _F4, as conv2d's transformed weights of a k x n x 3 x 3
/// convolution, runtime::kernels::packWinogradWeights(data, k, n, 2 or 4).
struct PackedWeight {
  int operand = 0;
  int32_t kind = 0; // kiln_weight_packing_kind
  int64_t k = 0, n = 0, strideK = 0, strideN = 0;
};

/// A kernel node as a unit (operands that are constants of at most kMaxInlinedConstantElements
/// elements are inlined).
Unit unitForKernel(const ir::Node &kernel, const std::string &label);
/// A plain node as a unit: a scratch body holding a copy of it; small constant operands are
/// copied into the body.
Unit unitForNode(const ir::Node &node, const std::string &label);
/// A unit that copies `value` (an input, a parameter, a constant or an output already written)
/// into a result buffer.
Unit unitForCopy(const ir::Value &value, const std::string &label);
/// The outer values that become the unit's operand buffers, in order (inlined ones skipped).
std::vector<const ir::Value *> unitOperandValues(const ir::Node &node);

enum class StageKind {
  Loop, Rows, Gemm, Conv, Pool, Direct, Generic, ConvTranspose, ConvWeightGrad, Recurrence, QuantizedProduct
};

struct KernelBuffer {
  enum class Kind { Operand, Result, Temp, Constant };
  Kind kind = Kind::Temp;
  int index = 0;     // operand/result number, temp number, or constant number
  TensorType type;
  Tensor constant;   // Kind::Constant
  int producedByStage = -1; // -1: available before the first stage
};

struct Store {
  const ir::Value *value = nullptr;
  int buffer = 0;
};

/// A strided view of a buffer: element (c0, c1, ...) lives at offset + sum(strides[d] * cd).
struct StridedAccess {
  int buffer = 0;
  int64_t offset = 0;
  std::vector<int64_t> strides;

  /// Whether the view reads a tensor of `shape` row-major (offset aside). A dimension of
  /// size 1 is never stepped, so its stride (often 0) does not matter.
  bool rowMajor(const Shape &shape) const;
};

struct Stage {
  StageKind kind = StageKind::Loop;
  Shape domain;
  std::vector<bool> reduced;                  // Rows: per domain dim
  std::vector<const ir::Node *> reductions;   // Rows, in body order
  const ir::Node *anchor = nullptr;           // Gemm, Conv, Pool, Direct, Generic, ConvTranspose, Recurrence, QuantizedProduct
  std::vector<StridedAccess> anchorOperands;  // Gemm, Conv, Pool, Recurrence, QuantizedProduct: the anchor's operands
  int tileBuffer = -1;                        // Gemm, Conv: where the library writes
  std::vector<Store> stores;
};

struct KernelPlan {
  std::string strategy;
  std::vector<KernelBuffer> buffers;
  std::vector<Stage> stages;
  /// Body inputs, constants, and values stored by some stage, each with its buffer.
  std::map<const ir::Value *, int> bufferOf;
  int numTemps = 0;
};

/// Plans `unit`'s stages: the strategy its ops call for, or per-op when `perOp`.
/// Throws kiln::Error for an unsupported op or dtype.
KernelPlan planKernel(const Unit &unit, bool perOp);

/// Throws kiln::Error unless codegen can lower `node` (op and dtypes).
void checkSupported(const ir::Node &node, const std::string &label);

/// The coordinates of operand `operand` of `node` read to compute output `output` at `coords`,
/// for ops that only re-index (elementwise with broadcasting, reshape, permute, broadcast,
/// slice, split); nullopt for any other op.
std::optional<std::vector<Index>> operandCoords(IndexArena &arena, const ir::Node &node, size_t operand,
                                                size_t output, const std::vector<Index> &coords);

/// If `value` is a chain of re-indexing ops over a value with a buffer in `plan` (stored before
/// stage `stage`), its strided layout over that buffer.
std::optional<StridedAccess> stridedAccess(const KernelPlan &plan, int stage, const ir::Value &value);

} // namespace kiln::codegen
