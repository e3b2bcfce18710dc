#pragma once
// simplify-algebra: local algebraic identities (x+0, x*1, neg(neg(x)), permute of permute,
// reshape chains, no-op broadcasts, casts and slices, the scale and power idioms of PyTorch
// exports, and a quantize of a dequantize with the same known scale), applied from a table of
// named rules to a fixed point in one run.
//
// Before: a verified graph. After: a verified graph whose outputs keep their types and their
// values. "Values" means bit for bit, with three stated exceptions, each taken on purpose and
// each the same trade XLA's algebraic simplifier makes:
//   - the sign of a zero result: x + 0.0 and 0.0 - x turn a -0.0 into +0.0 (equal under ==);
//   - reciprocal(reciprocal(x)) -> x for f32/f64 returns the exact x where the original rounds
//     twice (at most 1 ulp away) or, with |x| outside about [2^-128, 2^126] for f32, passes
//     through an overflowed or subnormal 1/x;
//   - pow(x, 0.5) -> sqrt(x) gives NaN instead of +inf for x = -inf.
// Rewrites that would change a value elsewhere are not made: x*0 and x-x only for integers
// (floats: NaN and inf), div by a constant becomes a multiply only for powers of two.
// Nodes a rewrite leaves without users (the rewritten node, constants and parameters that
// only it read) are erased. Statistics: one counter per rule, "rule <name>".
#include <memory>

#include "passes/Pass.h"

namespace kiln::passes {

std::unique_ptr<Pass> createAlgebraicSimplifyPass();

} // namespace kiln::passes
