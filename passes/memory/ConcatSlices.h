#pragma once
// Concatenation without copies. When every dim of a concat's result before its axis is 1 (a
// batch-1 channel concat in NCHW, a [1, n] row), each operand is one contiguous byte range of
// the result, right after the operands before it. The memory plan (passes/memory/PlanMemory.h,
// ReuseKind::ConcatSlice) can then place each operand's buffer at its range inside the
// concat's buffer: every producer writes its slice directly and the concat runs no kernel.
// OpenVINO's CPU plugin does this for batch-1 channel concats, Glow for an InsertTensor whose
// source has one writer; DenseNet's blocks and GoogLeNet's branches are the cases that matter.
//
// This file holds what the concat node alone decides; what depends on the plan's other
// decisions (an operand already a slice of another concat, and where) is the planner's. Fusion
// asks it too (concatStandsAlone): such a concat joins no kernel (passes/fusion/FusionRules.cpp,
// rule 4), where it would be a select between its operands for every element read, and costs
// nothing alone.
#include <cstdint>
#include <optional>
#include <vector>

#include "ir/Graph.h"

namespace kiln::passes {

/// For a concat whose operands are contiguous slices of its result (every result dim before
/// the axis is 1), each operand's byte offset inside the result, in operand order; else
/// nullopt (not a concat, or the operands interleave).
std::optional<std::vector<int64_t>> concatSliceOffsets(const ir::Node &node);

/// Whether the memory plan may lay the operands of `node` out as slices of its result, as far
/// as the node alone decides: its operands are contiguous slices (concatSliceOffsets) each
/// starting at a multiple of `alignment` bytes; the result and every operand are non-empty
/// intermediates (computed by a node, not a graph input, parameter, constant or graph output);
/// and no operand appears twice.
bool concatMayBeSlices(const ir::Graph &graph, const ir::Node &node, int64_t alignment);

/// Whether fusion should leave `node` a node of its own, for memory planning to lay out over
/// its operands: concatMayBeSlices, and every operand is written by a node that stores it
/// anyway, seen through views (reshape, squeeze, unsqueeze, flatten of an intermediate of its
/// size): a computing or opaque op, or a concat that stands alone. An operand that is a slice,
/// permute or other copy of another value would need a copy kernel of its own, where in a
/// kernel with the concat it is index arithmetic (ShuffleNet's split halves).
bool concatStandsAlone(const ir::Graph &graph, const ir::Node &node, int64_t alignment);

} // namespace kiln::passes
