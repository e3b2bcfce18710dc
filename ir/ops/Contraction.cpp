// PLACEHOLDER: to be replaced by the real Contraction family semantics.
#include "ir/ops/Common.h"
namespace kiln::ir {
OpDef defineMatMul() { OpDef d; d.infer = [](const std::vector<TensorType>&, const AttrMap&) -> std::vector<TensorType> { fail("not implemented yet"); }; return d; }
OpDef defineConv() { OpDef d; d.infer = [](const std::vector<TensorType>&, const AttrMap&) -> std::vector<TensorType> { fail("not implemented yet"); }; return d; }
OpDef defineMaxPool() { OpDef d; d.infer = [](const std::vector<TensorType>&, const AttrMap&) -> std::vector<TensorType> { fail("not implemented yet"); }; return d; }
OpDef defineAvgPool() { OpDef d; d.infer = [](const std::vector<TensorType>&, const AttrMap&) -> std::vector<TensorType> { fail("not implemented yet"); }; return d; }
}
