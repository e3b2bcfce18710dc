#pragma once
// Helpers the rules of simplify-algebra (passes/simplify/AlgebraicSimplify.cpp and its rule files) match
// and build with.
#include <optional>
#include <vector>

#include "ir/Builder.h"

namespace kiln::passes::simplify {

// ---- matching -----------------------------------------------------------------------------

/// The tensor of a constant node's value; nullptr for any other producer.
const Tensor *constantOf(const ir::Value *value);
/// The value every element of a constant holds, bit for bit: at least one element, all equal
/// with the same sign (so [0.0, -0.0] is no splat: dividing by it gives +inf and -inf), NaN
/// never. Returned as a double, which holds any float element and small integers exactly.
std::optional<double> splatValue(const ir::Value *value);
/// A constant with at least one element, every one equal to `x` in value (0.0 matches -0.0:
/// the identities accept a change in the sign of a zero, see AlgebraicSimplify.h).
bool isAll(const ir::Value *value, double x);
/// The value's producer when it is an `op` node, else nullptr.
ir::Node *producerIf(const ir::Value *value, ir::OpKind op);
/// numpy broadcasting of several shapes; nullopt when they do not broadcast.
std::optional<Shape> broadcastAll(const std::vector<Shape> &shapes);
/// numpy broadcast_to: `from` right-aligned against `to`, each dim 1 or equal.
bool broadcastsTo(const Shape &from, const Shape &to);
/// A permute's perm with negative axes made positive.
std::vector<int64_t> normalizedPerm(const ir::Node *permute);
bool isIdentityPerm(const std::vector<int64_t> &perm);

// ---- building -----------------------------------------------------------------------------

/// `replacement` with the root's output type: itself when the types match, broadcast when only
/// its shape is smaller (x + zeros[4,3] with x f32[3] is x broadcast to [4,3]: a rule never
/// changes an output's type), nullptr when neither works.
ir::Value *keepType(ir::Builder &b, ir::Value *replacement, const ir::Node *root);
/// A rank-0 constant holding element 0 of `t`, copied exactly (an i64 above 2^53 included).
ir::Value *scalarFrom(ir::Builder &b, const Tensor &t);

} // namespace kiln::passes::simplify
