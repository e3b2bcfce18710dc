// Kernel groups: the unit fusion forms and codegen lowers to one kernel. A `kernel` node owns
// a body graph (Node::body()) whose inputs are the node's operands and whose outputs are its
// results, so its meaning is its body, not a function of operand types and attributes: the
// op has no inference and no evaluation of its own. The verifier checks a kernel against its
// body, the evaluator runs the body, and kernels are made by ir::outlineKernel
// (ir/KernelOutline.h) or the parser, never by the Builder.
#include "ir/ops/Common.h"

namespace kiln::ir {

using namespace ops;

OpDef defineKernel() {
  OpDef def;
  // The fusion rule that formed the group ("elementwise", "contraction+epilogue", ...): codegen
  // picks its lowering strategy from it, and dumps show why the ops were grouped.
  def.attrs = {stringAttr("rule", std::string())};
  def.infer = [](const std::vector<TensorType> &, const AttrMap &) -> std::vector<TensorType> {
    fail("a kernel's result types are those of its body; kernels are made by ir::outlineKernel, "
         "not inferred");
  };
  return def;
}

} // namespace kiln::ir
