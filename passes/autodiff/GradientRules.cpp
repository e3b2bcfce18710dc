// The gradient rule table and the helpers the rule families share. The table is a switch over
// every OpKind without `default:`, so a primitive added to ir/Ops.def without a decision here
// is a compile error (-Werror=switch), and "no rule yet" is an explicit, greppable entry. The
// composites' cases come from Ops.def's tier column, so they are never listed twice.
#include "passes/autodiff/GradientRules.h"

#include "ir/ElementwiseOps.h"
#include "ir/ops/DecomposeHelpers.h"

namespace kiln::passes::autodiff {

using namespace ir;

namespace {

std::string_view tableRowGradient(OpKind op) {
  if (const UnaryOpRow *row = unaryOpRow(op))
    return row->gradient;
  return binaryOpRow(op)->gradient;
}

} // namespace

GradientRule gradientRule(OpKind op) {
  constexpr GradientRule kNone{GradKind::NotDifferentiable};
  constexpr GradientRule kComposite{GradKind::DecomposeFirst};
  constexpr GradientRule kMissing{GradKind::Unsupported};
  switch (op) {
  case OpKind::Param:
  case OpKind::Constant:
  case OpKind::Iota:
    return kNone; // no inputs
  case OpKind::RandomUniform:
    return kNone; // random numbers: their offset input is a counter, not a differentiable value

  // The rows of ir/ElementwiseOps.def: a Gradient formula, or none (piecewise constant, or a
  // bool result: the derivative is zero wherever it exists, as PyTorch agrees).
#define UNARY_OP(Enum, ...) case OpKind::Enum:
#define BINARY_OP(Enum, ...) case OpKind::Enum:
#include "ir/ElementwiseOps.def"
    return tableRowGradient(op).empty() ? kNone : GradientRule{GradKind::Rule, gradTableRow};
  case OpKind::Mod:
    return {GradKind::Rule, gradMod};
  case OpKind::Where:
    return {GradKind::Rule, gradWhere};
  case OpKind::Cast:
    return {GradKind::Rule, gradCast};
  case OpKind::Clip:
    return {GradKind::Rule, gradClip};

  case OpKind::ReduceSum: case OpKind::ReduceMax: case OpKind::ReduceMin: case OpKind::ReduceProd:
    return {GradKind::Rule, gradReduce};
  case OpKind::ArgMax: case OpKind::ArgMin:
    return kNone; // integer results

  case OpKind::Reshape: case OpKind::Permute: case OpKind::Broadcast: case OpKind::Slice:
  case OpKind::Pad: case OpKind::Concat: case OpKind::Split:
    return {GradKind::Rule, gradMovement};

  case OpKind::Gather: case OpKind::GatherElements: case OpKind::ScatterAdd:
    return {GradKind::Rule, gradIndexing};
  case OpKind::GatherNd: case OpKind::ScatterElements: case OpKind::ScatterNd:
    return kMissing;

  case OpKind::CumSum:
    return {GradKind::Rule, gradCumSum};
  case OpKind::TopK:
    return {GradKind::Rule, gradTopK};

  case OpKind::MatMul:
    return {GradKind::Rule, gradMatMul};
  case OpKind::Conv:
    return {GradKind::Rule, gradConv};
  case OpKind::MaxPool: case OpKind::AvgPool:
    return {GradKind::Rule, gradPool};
  case OpKind::ConvTranspose:
    return {GradKind::Rule, gradConvTranspose};
  case OpKind::Einsum: case OpKind::Resize:
    return kMissing;
  case OpKind::ConvWeightGrad: case OpKind::MaxPoolGrad:
    return kMissing; // second order through conv and max_pool: not supported
  case OpKind::QMatMul:
  case OpKind::QConv:
    return kNone; // its operands are integers (and the pass making it runs for inference only)

  // The recurrences are differentiated through their unrolled form, which the training graph
  // expands before autodiff (createDecomposeForAutodiffPass, passes/decompose/Decompose.h).
  case OpKind::RnnSequence: case OpKind::GruSequence: case OpKind::LstmSequence:
    return kComposite;

  // Every composite, from Ops.def's tier column: autodiff sees them decomposed.
#include "ir/CompositeOpCases.inc"
    return kComposite;

  // Fusion runs after autodiff: a kernel group never needs a gradient.
  case OpKind::Kernel:
    return kMissing;
  }
  return kMissing; // unreachable for valid enum values
}

Value *sumToShape(Builder &b, Value *grad, const Shape &shape) {
  const Shape &from = grad->shape();
  if (from == shape)
    return grad;
  size_t lead = from.size() - shape.size(); // broadcasting never lowers the rank
  std::vector<int64_t> axes;
  for (size_t d = 0; d < from.size(); ++d)
    if (d < lead || (shape[d - lead] == 1 && from[d] != 1))
      axes.push_back(static_cast<int64_t>(d));
  Value *summed = grad;
  if (!axes.empty())
    summed = b.create(OpKind::ReduceSum, {grad}, {{"axes", axes}, {"keepdims", int64_t(1)}});
  return summed->shape() == shape ? summed : ops::reshape(b, summed, shape);
}

Value *zerosOf(Builder &b, const TensorType &type) {
  Value *zero = b.scalar(type.dtype, 0.0);
  if (type.shape.empty())
    return zero;
  return b.create(OpKind::Broadcast, {zero}, {{"shape", type.shape}});
}

Value *maskAs(Builder &b, Value *cond, DType dtype) {
  return b.create(OpKind::Cast, {cond}, {{"to", dtype}});
}

Value *scatterByIndexMap(Builder &b, Value *grad, const Tensor &indexMap, const TensorType &inputType) {
  int64_t count = inputType.numElements();
  int64_t mapped = indexMap.numElements();
  // One spare slot at the end catches fill elements, which have no source; it is sliced off.
  Value *sums = zerosOf(b, TensorType{inputType.dtype, {count + 1}});
  Value *indices = b.constant(indexMap.reshaped({mapped}));
  Value *flatGrad = ops::reshape(b, grad, {mapped});
  sums = b.create(OpKind::ScatterAdd, {sums, indices, flatGrad}, {{"axis", int64_t(0)}});
  Value *used = b.create(OpKind::Slice, {sums},
                         {{"starts", std::vector<int64_t>{0}}, {"ends", std::vector<int64_t>{count}}});
  return ops::reshape(b, used, inputType.shape);
}

} // namespace kiln::passes::autodiff
