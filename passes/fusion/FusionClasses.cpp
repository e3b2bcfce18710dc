// What each node is to fusion (passes/fusion/FusionClasses.h), and which movement ops are free
// views.
#include "passes/fusion/FusionClasses.h"

#include "passes/fusion/FusionAnalysis.h"

namespace kiln::passes {

bool isFreeView(const ir::Node &node) {
  switch (node.op()) {
  case ir::OpKind::Reshape:
  case ir::OpKind::Squeeze:
  case ir::OpKind::Unsqueeze:
  case ir::OpKind::Flatten: return true;
  default: return false;
  }
}

namespace fusion {

OpClass classify(const ir::Node &node) {
  const ir::OpTraits &traits = ir::opTraits(node.op());
  if (traits.tier == ir::OpTier::Source)
    return OpClass::Source;
  // A composite's primitives are unknown until decompose runs; a kernel is already a group.
  if (traits.tier == ir::OpTier::Composite || node.op() == ir::OpKind::Kernel)
    return OpClass::Opaque;
  switch (traits.fusion) {
  case ir::FusionKind::Elementwise: return OpClass::Elementwise;
  // `broadcast` is the one Broadcast-kind op that computes nothing: it is index arithmetic.
  case ir::FusionKind::Broadcast: return node.op() == ir::OpKind::Broadcast ? OpClass::Movement : OpClass::Elementwise;
  case ir::FusionKind::Injective: return OpClass::Movement;
  case ir::FusionKind::Reduction: return OpClass::Reduction;
  case ir::FusionKind::OutFusable: return OpClass::Contraction;
  case ir::FusionKind::Opaque: return OpClass::Opaque;
  }
  return OpClass::Opaque;
}

} // namespace fusion

} // namespace kiln::passes
