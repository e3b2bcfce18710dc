#pragma once
// Helpers shared by the composite op families (Activation.cpp, NN.cpp, NormLoss.cpp):
// Builder shorthands, so decompositions read like the formulas they implement; the checks their
// inference shares; and the `reduction` attribute of the losses ("mean", "sum" or "none", as in
// PyTorch).
#include "ir/Builder.h"
#include "ir/ops/Common.h"

namespace kiln::ir::ops {

// ---- builder shorthands ---------------------------------------------------------------------

Value *unary(Builder &b, OpKind op, Value *x);
Value *binary(Builder &b, OpKind op, Value *lhs, Value *rhs);
/// A scalar constant of `like`'s dtype, so no op promotes.
Value *constantLike(Builder &b, Value *like, double value);
/// where(cond, ifTrue, ifFalse).
Value *select(Builder &b, Value *cond, Value *ifTrue, Value *ifFalse);
Value *reshape(Builder &b, Value *x, Shape shape);

/// A per-channel vector [C] viewed as [C, 1, ...], so it broadcasts along axis 1 of `x`
/// ([N, C, ...]); unchanged when x has rank 2.
Value *perChannel(Builder &b, Value *vector, Value *x);

// ---- inference checks -----------------------------------------------------------------------

void requireFloat(const TensorType &type, std::string_view what);

/// Each of in[1], in[2], ... must be [C] for the input in[0] = [N, C, ...]; names[i] names in[i + 1].
void requirePerChannelInputs(const std::vector<TensorType> &in, const std::vector<const char *> &names);

/// The `epsilon` attribute must be >= 0 (NaN is rejected too).
void requireEpsilon(const AttrMap &attrs);

// ---- loss reductions ------------------------------------------------------------------------

enum class LossReduction { Mean, Sum, None };

/// The `reduction` attribute.
LossReduction readLossReduction(const AttrMap &attrs);

/// The loss's type: the unreduced losses' type for "none", else a scalar of their dtype.
TensorType reducedLossType(const TensorType &perElement, LossReduction reduction);

/// Reduces the unreduced losses over every dim: their mean, their sum, or themselves ("none").
Value *applyLossReduction(Builder &b, Value *losses, LossReduction reduction);

} // namespace kiln::ir::ops
