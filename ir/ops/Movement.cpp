// PLACEHOLDER: to be replaced by the real Movement family semantics.
#include "ir/ops/Common.h"
namespace kiln::ir {
OpDef defineReshape() { OpDef d; d.infer = [](const std::vector<TensorType>&, const AttrMap&) -> std::vector<TensorType> { fail("not implemented yet"); }; return d; }
OpDef definePermute() { OpDef d; d.infer = [](const std::vector<TensorType>&, const AttrMap&) -> std::vector<TensorType> { fail("not implemented yet"); }; return d; }
OpDef defineBroadcast() { OpDef d; d.infer = [](const std::vector<TensorType>&, const AttrMap&) -> std::vector<TensorType> { fail("not implemented yet"); }; return d; }
OpDef defineSlice() { OpDef d; d.infer = [](const std::vector<TensorType>&, const AttrMap&) -> std::vector<TensorType> { fail("not implemented yet"); }; return d; }
OpDef definePad() { OpDef d; d.infer = [](const std::vector<TensorType>&, const AttrMap&) -> std::vector<TensorType> { fail("not implemented yet"); }; return d; }
OpDef defineConcat() { OpDef d; d.infer = [](const std::vector<TensorType>&, const AttrMap&) -> std::vector<TensorType> { fail("not implemented yet"); }; return d; }
OpDef defineSplit() { OpDef d; d.infer = [](const std::vector<TensorType>&, const AttrMap&) -> std::vector<TensorType> { fail("not implemented yet"); }; return d; }
OpDef defineSqueeze() { OpDef d; d.infer = [](const std::vector<TensorType>&, const AttrMap&) -> std::vector<TensorType> { fail("not implemented yet"); }; return d; }
OpDef defineUnsqueeze() { OpDef d; d.infer = [](const std::vector<TensorType>&, const AttrMap&) -> std::vector<TensorType> { fail("not implemented yet"); }; return d; }
OpDef defineFlatten() { OpDef d; d.infer = [](const std::vector<TensorType>&, const AttrMap&) -> std::vector<TensorType> { fail("not implemented yet"); }; return d; }
}
