// PLACEHOLDER: to be replaced by the real Loss family semantics.
#include "ir/ops/Common.h"
namespace kiln::ir {
OpDef defineMseLoss() { OpDef d; d.infer = [](const std::vector<TensorType>&, const AttrMap&) -> std::vector<TensorType> { fail("not implemented yet"); }; return d; }
OpDef defineCrossEntropy() { OpDef d; d.infer = [](const std::vector<TensorType>&, const AttrMap&) -> std::vector<TensorType> { fail("not implemented yet"); }; return d; }
}
