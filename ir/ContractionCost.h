#pragma once
// What a graph's contractions cost: multiply-adds of matmul, linear, conv, conv_transpose and
// the recurrences, from their operand and result types, and the weight bytes a run reads.
// Compile-time decisions weigh work against bytes with it (codegen::chooseBatchTile: how much
// work one read of the weights must buy).
#include "ir/Graph.h"

namespace kiln::ir {

/// Multiply-adds `node` computes if it is a matmul, linear, conv, conv_transpose or a
/// recurrence (its steps' products with the recurrent weights) of static shapes; 0 for any
/// other op (elementwise work is memory traffic, not arithmetic).
double multiplyAdds(const Node &node);

/// The sum over the graph's nodes (kernel bodies included).
double multiplyAdds(const Graph &graph);

/// Bytes of weights one run reads: every parameter and constant once, and a recurrence's
/// recurrent weights once more per step after the first (each step's product reads them).
double weightTraffic(const Graph &graph);

} // namespace kiln::ir
