#pragma once
// Reverse-mode gradient rules, one per primitive op, in one table (gradientRule). A rule gets
// the forward node (its inputs and outputs are the forward values, available to the backward
// graph) and the upstream gradient of each output, and builds with ir::Builder the gradient of
// each input. Rules are written for primitives only: composites are decomposed before autodiff
// runs (passes/decompose/Decompose.h), so the table marks them "decompose first".
//
// Conventions every rule keeps:
//  - a gradient has exactly its forward value's type (dtype and shape); broadcasting in the
//    forward op is undone by summing over the broadcast axes (sumToShape);
//  - nullptr means "no gradient" for that input: integer or bool operands, indices, conditions;
//  - where a function has no derivative at isolated points (relu at 0, max at ties, abs at 0)
//    the rule picks PyTorch's convention: relu'(0) = 0, ties split the gradient evenly.
#include <vector>

#include "ir/Builder.h"

namespace kiln::passes::autodiff {

/// Builds the input gradients of `node` (one per input; nullptr for none) from the upstream
/// gradients of its outputs. gradOutputs has one entry per output; a float output that received
/// no gradient gets zeros, an integer or bool output nullptr.
using GradFn = std::vector<ir::Value *> (*)(ir::Builder &b, const ir::Node &node,
                                            const std::vector<ir::Value *> &gradOutputs);

enum class GradKind {
  Rule,              // `fn` builds the input gradients
  NotDifferentiable, // zero almost everywhere or integer-valued (floor, sign, argmax, eq): contributes nothing
  DecomposeFirst,    // a composite, or a recurrence (its unrolled form): autodiff runs on decomposed graphs only
  Unsupported,       // a primitive without a rule yet: an error if it lies on a gradient path
};

struct GradientRule {
  GradKind kind;
  GradFn fn = nullptr;
};

/// The rule for `op` (a switch over every OpKind, so a new op without an entry does not compile).
GradientRule gradientRule(ir::OpKind op);

// ---- helpers shared by the rule families (GradientRules.cpp) ----------------------------------

/// Sums `grad` over the axes along which a value of `shape` was broadcast to grad's shape
/// (numpy rules: leading axes and size-1 axes), giving a value of `shape`.
ir::Value *sumToShape(ir::Builder &b, ir::Value *grad, const Shape &shape);
/// A value of `type` filled with zeros (a broadcast scalar, not a materialised constant).
ir::Value *zerosOf(ir::Builder &b, const TensorType &type);
/// A bool tensor as 0/1 of `dtype`.
ir::Value *maskAs(ir::Builder &b, ir::Value *cond, DType dtype);
/// The gradient of a linear "gather by index map" op: `indexMap` (i64, grad's shape) holds for
/// every output element the flat index of the input element it copies, or inputType's element
/// count for a fill element. The result sums grad into those positions: a value of inputType.
ir::Value *scatterByIndexMap(ir::Builder &b, ir::Value *grad, const Tensor &indexMap, const TensorType &inputType);

// ---- rule families ------------------------------------------------------------------------------

// GradElementwise.cpp
/// A row of ir/ElementwiseOps.def with a Gradient formula.
std::vector<ir::Value *> gradTableRow(ir::Builder &b, const ir::Node &node,
                                      const std::vector<ir::Value *> &gradOutputs);
std::vector<ir::Value *> gradMod(ir::Builder &b, const ir::Node &node, const std::vector<ir::Value *> &gradOutputs);
std::vector<ir::Value *> gradWhere(ir::Builder &b, const ir::Node &node, const std::vector<ir::Value *> &gradOutputs);
std::vector<ir::Value *> gradCast(ir::Builder &b, const ir::Node &node, const std::vector<ir::Value *> &gradOutputs);
std::vector<ir::Value *> gradClip(ir::Builder &b, const ir::Node &node, const std::vector<ir::Value *> &gradOutputs);

// GradReduce.cpp
std::vector<ir::Value *> gradReduce(ir::Builder &b, const ir::Node &node, const std::vector<ir::Value *> &gradOutputs);
std::vector<ir::Value *> gradCumSum(ir::Builder &b, const ir::Node &node, const std::vector<ir::Value *> &gradOutputs);
std::vector<ir::Value *> gradTopK(ir::Builder &b, const ir::Node &node, const std::vector<ir::Value *> &gradOutputs);

// GradMovement.cpp
std::vector<ir::Value *> gradMovement(ir::Builder &b, const ir::Node &node, const std::vector<ir::Value *> &gradOutputs);
std::vector<ir::Value *> gradIndexing(ir::Builder &b, const ir::Node &node, const std::vector<ir::Value *> &gradOutputs);

// GradContraction.cpp
std::vector<ir::Value *> gradMatMul(ir::Builder &b, const ir::Node &node, const std::vector<ir::Value *> &gradOutputs);
std::vector<ir::Value *> gradConv(ir::Builder &b, const ir::Node &node, const std::vector<ir::Value *> &gradOutputs);
std::vector<ir::Value *> gradConvTranspose(ir::Builder &b, const ir::Node &node,
                                           const std::vector<ir::Value *> &gradOutputs);
std::vector<ir::Value *> gradPool(ir::Builder &b, const ir::Node &node, const std::vector<ir::Value *> &gradOutputs);

} // namespace kiln::passes::autodiff
