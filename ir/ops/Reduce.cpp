// PLACEHOLDER: to be replaced by the real Reduce family semantics.
#include "ir/ops/Common.h"
namespace kiln::ir {
OpDef defineReduceSum() { OpDef d; d.infer = [](const std::vector<TensorType>&, const AttrMap&) -> std::vector<TensorType> { fail("not implemented yet"); }; return d; }
OpDef defineReduceMax() { OpDef d; d.infer = [](const std::vector<TensorType>&, const AttrMap&) -> std::vector<TensorType> { fail("not implemented yet"); }; return d; }
OpDef defineReduceMin() { OpDef d; d.infer = [](const std::vector<TensorType>&, const AttrMap&) -> std::vector<TensorType> { fail("not implemented yet"); }; return d; }
OpDef defineReduceProd() { OpDef d; d.infer = [](const std::vector<TensorType>&, const AttrMap&) -> std::vector<TensorType> { fail("not implemented yet"); }; return d; }
OpDef defineReduceMean() { OpDef d; d.infer = [](const std::vector<TensorType>&, const AttrMap&) -> std::vector<TensorType> { fail("not implemented yet"); }; return d; }
OpDef defineArgMax() { OpDef d; d.infer = [](const std::vector<TensorType>&, const AttrMap&) -> std::vector<TensorType> { fail("not implemented yet"); }; return d; }
OpDef defineArgMin() { OpDef d; d.infer = [](const std::vector<TensorType>&, const AttrMap&) -> std::vector<TensorType> { fail("not implemented yet"); }; return d; }
}
