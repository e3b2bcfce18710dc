#pragma once
// Shrinking a failing fuzz case to a smaller graph that fails the same way, for a reproducer a
// person can read.
#include "tests/fuzz/compile/DifferentialCheck.h"

namespace kiln::fuzz {

/// Rounds of: candidates built from the current graph (one output kept alone; one node
/// bypassed, its result replaced by an operand of the same type; one value cut off into a new
/// graph input), dead code removed from each, all checked in one compile; the smallest
/// candidate that still fails with `outcome` becomes current. Stops when no candidate fails
/// that way or after `maxRounds`. Returns the last failing case (`failing` itself when nothing
/// smaller fails).
CheckCase shrinkCase(const CheckCase &failing, Outcome outcome, const CheckOptions &options, int maxRounds = 12);

} // namespace kiln::fuzz
