// PLACEHOLDER: to be replaced by the real Indexing family semantics.
#include "ir/ops/Common.h"
namespace kiln::ir {
OpDef defineGather() { OpDef d; d.infer = [](const std::vector<TensorType>&, const AttrMap&) -> std::vector<TensorType> { fail("not implemented yet"); }; return d; }
OpDef defineScatterAdd() { OpDef d; d.infer = [](const std::vector<TensorType>&, const AttrMap&) -> std::vector<TensorType> { fail("not implemented yet"); }; return d; }
OpDef defineIota() { OpDef d; d.infer = [](const std::vector<TensorType>&, const AttrMap&) -> std::vector<TensorType> { fail("not implemented yet"); }; return d; }
}
