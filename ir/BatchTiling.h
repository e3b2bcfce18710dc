#pragma once
// Batch tiling: proving that a graph treats the rows of its batch independently, and the copy
// of it that computes a tile of those rows.
//
// A graph is *batch-separable* when every graph input that carries the batch holds it on axis
// 0, every output holds it on axis 0, and row i of every output is computed from row i of the
// batch inputs alone (and from weights and the inputs that do not carry the batch). Then
// running the graph compiled for T rows on each run of T rows of the inputs gives exactly the
// rows the whole-batch graph gives: the runtime may run a batch of any multiple of T as tiles
// (runtime/Executable.h), one after another with the whole thread pool each, or side by side
// with one thread each, so that one thread's tile stays in its own core's caches. The same
// mechanism lets one compile serve every size of a symbolic batch (issue 26).
//
// The proof walks the graph once, giving each value the axis that carries the batch (or none),
// with a rule per op (a broadcast of a value without the batch to the batch's extent makes
// identical rows, so its result carries the batch too): an op is separable when it computes along the batch axis position by
// position (elementwise with broadcasting, convolution and pooling over axis 0, a matmul whose
// batch lies in M, N or a broadcast dim, a reduction, softmax or normalisation over other axes,
// a reshape that keeps the rows whole, permute, concat and split along other axes, ...). Any
// op without a rule, or a rule that fails, makes the graph not separable, with the reason.
//
// The batch extent: a symbolic dim that is the whole axis 0 of the first input (f32[N,...]),
// or, for a static graph, axis 0 of the first input; every input whose axis 0 has that extent
// carries the batch. (A static input whose axis 0 merely equals it by chance is then treated as
// per-row too; the proof still holds for the graph as written, so tiles compute the same rows.)
#include <map>
#include <memory>
#include <string>

#include "ir/Graph.h"

namespace kiln::ir {

/// Where a value holds the batch: axis `axis`, whose extent is outer * batch * inner, the
/// batch's row r being entries [(o * batch + r) * inner, ... + inner) of it for every o <
/// outer. Merged dims put it there: attention's [S, N*heads, D] has inner = heads, the
/// [S*N, E] of its projections outer = S, Swin's windows [N*windows, 49, C] inner = windows.
/// A tile of T rows has extent outer * T * inner there.
struct BatchAxis {
  int64_t axis = 0;
  int64_t outer = 1;
  int64_t inner = 1;
  bool operator==(const BatchAxis &other) const {
    return axis == other.axis && outer == other.outer && inner == other.inner;
  }
  bool operator!=(const BatchAxis &other) const { return !(*this == other); }
  /// The axis' extent at `rows` rows of the batch.
  int64_t extentAt(int64_t rows) const;
};

struct BatchAxes {
  /// True when the graph is batch-separable; else `reason` says which op or value is not.
  bool separable = false;
  std::string reason;
  /// The batch extent: a constant, or a symbolic dim (core/SymbolicDim.h).
  int64_t extent = 0;
  /// Where every value that carries the batch holds it (values absent carry none).
  std::map<const Value *, BatchAxis> axisOf;
};

/// Which values of `graph` carry the batch, and whether the graph is batch-separable. A graph
/// without inputs, or whose first input has rank 0, is not.
BatchAxes findBatchAxes(const Graph &graph);

/// Whether one compile of `graph` serves every batch size: its inputs' one symbol is the
/// batch (axis 0 of its first input), appearing nowhere but on axis 0 of the inputs that
/// carry the batch, and the graph is batch-separable.
bool servesEveryBatch(const Graph &graph);

/// A copy of `graph` (batch-separable: findBatchAxes says so) computing `tile` rows: every
/// batch axis' extent becomes `tile`, with the dims attributes that spell it (reshape's and
/// broadcast's `shape`, resize's `sizes`) rewritten, every type re-inferred and checked to be
/// the original with only its batch axis changed, and the copy verified. kiln::Error when the
/// graph is not separable or the copy does not infer as expected (a squeeze that would drop a
/// tile of one row, say), naming the node.
std::unique_ptr<Graph> retileBatch(const Graph &graph, int64_t tile);

} // namespace kiln::ir
