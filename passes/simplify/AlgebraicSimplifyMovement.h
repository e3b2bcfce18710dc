#pragma once
// Rules of simplify-algebra (passes/simplify/AlgebraicSimplify.cpp) about movement (permute, the view
// ops, broadcast, cast, slice) and about the broadcast operands of elementwise ops, kept apart
// so that the rule table's file holds the arithmetic identities. Each takes a node and returns
// its replacement (built with `b` just before the node) or nullptr.
#include "ir/Builder.h"

namespace kiln::passes::simplify {

// Output axis d of the outer permute reads axis outer[d] of the inner one, which reads axis
// inner[outer[d]] of x.
ir::Value *permutePermute(ir::Builder &b, ir::Node *n);

// (A B)^T = B^T A^T over the last two axes: a permute whose innermost axis is the product's
// row axis reads the product column by column; computing the transposed product instead makes
// that read contiguous (and the permute disappears when it was only the swap), while the
// operand transposes fold into the GEMM's strides or into permutes they already are.
// Autodiff's gradient of K in attention is (Q^T dS) permuted back to [batch, tokens, heads,
// dim], which otherwise gathered floats 128 apart in the kernel that joins Q, K and V's
// gradients. Only when the permute is the product's one reader, so nothing is computed twice.
ir::Value *permuteOfMatMul(ir::Builder &b, ir::Node *n);

// A permute that keeps every axis in place is its operand.
ir::Value *permuteIdentity(ir::Builder &b, ir::Node *n);

// reshape, squeeze, unsqueeze and flatten only re-label a row-major buffer, so one that keeps
// the shape is its operand, and a chain of them is one reshape to the last shape.
ir::Value *viewSameShape(ir::Builder &b, ir::Node *n);

ir::Value *viewChain(ir::Builder &b, ir::Node *n);

// A broadcast to its operand's own shape is its operand.
ir::Value *broadcastSameShape(ir::Builder &b, ir::Node *n);

// broadcast_to(broadcast_to(x, s1), s2) = broadcast_to(x, s2): a dim of x is 1 or equals s1's,
// which is 1 or equals s2's.
ir::Value *broadcastBroadcast(ir::Builder &b, ir::Node *n);

// A cast to its operand's own dtype is its operand.
ir::Value *castSameDtype(ir::Builder &b, ir::Node *n);

// A slice that keeps every dim's size takes everything unless it walks an axis of size > 1
// backwards (a reversal): going forward, count == dim forces start 0 and step 1.
ir::Value *sliceEverything(ir::Builder &b, ir::Node *n);

// add(x, broadcast(y)) = add(x, y) when the output shape stays; a splat constant y (say
// f32[1,1] 0.5, or the zeros of an exported full_like) becomes a rank-0 constant.
ir::Value *broadcastIntoConsumer(ir::Builder &b, ir::Node *n);

// A splat constant operand with more than one element becomes a rank-0 constant.
ir::Value *splatOperandToScalar(ir::Builder &b, ir::Node *n);

} // namespace kiln::passes::simplify
