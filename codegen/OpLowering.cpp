#include "codegen/OpLowering.h"

namespace kiln::codegen {

using ir::OpKind;

Lowering loweringOf(OpKind op) {
  switch (op) {
  case OpKind::Param:
  case OpKind::Constant: return Lowering::Source;

#define UNARY_OP(Enum, ...) case OpKind::Enum:
#include "ir/ElementwiseOps.def"
#define BINARY_OP(Enum, ...) case OpKind::Enum:
#include "ir/ElementwiseOps.def"
  case OpKind::Mod:
  case OpKind::Where:
  case OpKind::Cast:
  case OpKind::Clip: return Lowering::Scalar;

  case OpKind::Reshape:
  case OpKind::Permute:
  case OpKind::Broadcast:
  case OpKind::Slice:
  case OpKind::Pad:
  case OpKind::Concat:
  case OpKind::Split:
  case OpKind::Gather:
  case OpKind::GatherElements:
  case OpKind::GatherNd:
  case OpKind::Iota:
  case OpKind::RandomUniform: return Lowering::Index;

  case OpKind::ReduceSum:
  case OpKind::ReduceMax:
  case OpKind::ReduceMin:
  case OpKind::ReduceProd:
  case OpKind::ArgMax:
  case OpKind::ArgMin: return Lowering::Reduction;

  case OpKind::MatMul:
  case OpKind::Conv:
  case OpKind::ConvTranspose:
  case OpKind::Einsum:
  case OpKind::QMatMul:
  case OpKind::QConv: return Lowering::Contraction;
  case OpKind::MaxPool:
  case OpKind::AvgPool: return Lowering::Pool;
  case OpKind::ConvWeightGrad: return Lowering::WeightGrad;

  case OpKind::ScatterAdd:
  case OpKind::ScatterElements:
  case OpKind::ScatterNd:
  case OpKind::CumSum:
  case OpKind::TopK:
  case OpKind::Resize:
  case OpKind::MaxPoolGrad: return Lowering::Direct;

  case OpKind::RnnSequence:
  case OpKind::GruSequence:
  case OpKind::LstmSequence: return Lowering::Recurrence;

  case OpKind::Kernel: return Lowering::Group;

  // Every composite, from Ops.def's tier column: decomposed before codegen.
#include "ir/CompositeOpCases.inc"
    return Lowering::Decomposed;
  }
  return Lowering::Decomposed; // unreachable for valid enum values
}

std::string_view loweringName(Lowering lowering) {
  switch (lowering) {
  case Lowering::Source: return "source";
  case Lowering::Scalar: return "scalar";
  case Lowering::Index: return "index";
  case Lowering::Reduction: return "reduction";
  case Lowering::Contraction: return "contraction";
  case Lowering::Pool: return "pool";
  case Lowering::WeightGrad: return "weight-grad";
  case Lowering::Direct: return "direct";
  case Lowering::Recurrence: return "recurrence";
  case Lowering::Group: return "group";
  case Lowering::Decomposed: return "decomposed";
  }
  return "?";
}

} // namespace kiln::codegen
