#pragma once
// Rules of simplify-algebra (passes/simplify/AlgebraicSimplify.cpp) about zero padding, kept apart so
// that the rule table's file stays one screenful of identities. Each takes a node and returns
// its replacement (built with `b` just before the node) or nullptr.
#include "ir/Builder.h"

namespace kiln::passes::simplify {

/// pad with every pad 0 is its operand.
ir::Value *padNothing(ir::Builder &b, ir::Node *n);

/// add(pad(a), pad(b)), both zero-padded along the same single axis into adjacent ranges, is
/// pad(concat(a, b)): autodiff sums the gradients of slices that split a value (a fused QKV
/// projection's Q, K and V) as padded copies, which one kernel then read through three clamped
/// selects per element (7% of BERT-mini's training step). Exact: each element adds a zero.
ir::Value *addAdjacentPads(ir::Builder &b, ir::Node *n);

/// avg_pool(pad(x)) of a zero pad of the spatial dims, the pool itself unpadded, is avg_pool(x)
/// with those pads and count_include_pad: every tap of the padded copy counted, as the pads'
/// zeros do (PyTorch's exporter writes count_include_pad pools so: Inception-v3's nine branch
/// pools were a pad copy each, then a pool whose windows no library path took whole). Exact: the
/// same taps summed, the same divisor. Kept only where the result's type is the pool's (a
/// ceil-mode window starting in the trailing pad would be dropped by the folded form).
ir::Value *avgPoolOfZeroPad(ir::Builder &b, ir::Node *n);

} // namespace kiln::passes::simplify
