#pragma once
// Ops that codegen lowers as a whole (internal to codegen), and the indexed loads of
// gather_elements and gather_nd.
//
// A Direct stage (StageKind::Direct) runs one node as a loop nest written for that op over
// contiguous buffers: scatter_elements and scatter_add (one parallel row per value of the dims
// before the axis - an element's target differs from its own coordinates only along the axis,
// so rows never collide - and in update order within a row), scatter_nd (serial, in update
// order; in both, repeated indices combine as the reference evaluator combines them), cumsum
// and topk (one parallel row per line along the axis), resize (nearest: parallel rows of
// copies; linear and cubic: separable passes in double with weight tables computed at compile
// time), max_pool_grad (one parallel row per (n, c) plane, codegen/EmitPoolGrad.cpp). Values
// are combined as the reference does (ir/ops/GatherScatter.cpp, Sequence.cpp, Resize.cpp,
// PoolGrad.cpp): floats in double and rounded once, integers wrapping.
//
// Indices: generated code cannot report an error, so an index outside [-dim, dim) (which the
// reference evaluator rejects) is clamped into the axis after negative ones wrap (the same rule
// as gather): no generated kernel reads or writes out of bounds.
#include <vector>

#include "codegen/StageEmitters.h"

namespace kiln::codegen {

/// Emits the Direct stage `stage` (its anchor is the node it runs).
void emitDirectStage(KernelEmitter &emitter, int stage, KernelText &out);

/// gather_elements / gather_nd output element at `coords`, as an indirect load from data
/// (inlined into Loop, Rows and epilogue code like gather).
Scalar gatherElementsLoad(KernelEmitter &emitter, const ir::Node &node, const std::vector<Index> &coords);
Scalar gatherNdLoad(KernelEmitter &emitter, const ir::Node &node, const std::vector<Index> &coords);

namespace direct {

/// What one Direct op's row function needs: the function it fills (begun by the caller), and
/// the buffers of the node's operands and outputs.
struct DirectOp {
  KernelEmitter &e;
  const ir::Node &node;
  std::vector<int> inputs;  // buffer per node input
  std::vector<int> outputs; // buffer per node output
  std::string fn;           // the row function's name (for its tables)
};

/// The work split of a row function: rows handed to runRows, and elements per row.
struct RowSplit {
  int64_t rows = 1;
  int64_t rowElements = 1;
  /// Written before the row function's name (e.g. a GCC attribute); usually empty.
  std::string attributes;
};

/// Each writes the body of the row function `op.fn(vctx, begin, end)` and any file-scope
/// tables it needs into `tables`.
RowSplit emitScatterElements(DirectOp &op, std::string &tables);
RowSplit emitScatterNd(DirectOp &op, std::string &tables);
RowSplit emitCumSum(DirectOp &op, std::string &tables);
RowSplit emitTopK(DirectOp &op, std::string &tables);
RowSplit emitResize(DirectOp &op, std::string &tables);
RowSplit emitMaxPoolGrad(DirectOp &op, std::string &tables);

using Emitter = RowSplit (*)(DirectOp &op, std::string &tables);
/// The emitter of `op`, an op codegen/OpLowering.h lowers as Direct; nullptr for any other op
/// (OpLoweringTest checks that every Direct op has one).
Emitter emitterOf(ir::OpKind op);

/// `dims`, `strides` etc. as a C++ initializer list "{a, b, c}".
std::string intList(const std::vector<int64_t> &values);

} // namespace direct

} // namespace kiln::codegen
