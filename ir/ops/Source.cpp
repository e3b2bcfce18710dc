// Sources: parameters (named, trainable, optionally carrying an initial value) and constants.
#include "ir/ops/Common.h"

namespace kiln::ir {

using namespace ops;

OpDef defineParam() {
  OpDef def;
  def.attrs = {stringAttr("name"), dtypeAttr("dtype"), intsAttr("shape"), optionalTensorAttr("value")};
  def.infer = [](const std::vector<TensorType> &, const AttrMap &attrs) {
    TensorType type{attrDType(attrs, "dtype"), attrInts(attrs, "shape")};
    for (int64_t d : type.shape)
      if (d < 0)
        fail("param '{}': negative dimension in {}", attrString(attrs, "name"), shapeToString(type.shape));
    const Tensor &value = attrTensor(attrs, "value");
    if (value.defined() && value.type() != type)
      fail("param '{}': value has type {}, declared {}", attrString(attrs, "name"),
           value.type().toString(), type.toString());
    if (attrString(attrs, "name").empty())
      fail("param needs a non-empty name");
    return std::vector<TensorType>{type};
  };
  // The evaluator binds parameters itself (from the caller's values or the initial value).
  return def;
}

OpDef defineConstant() {
  OpDef def;
  def.attrs = {{"value", AttrKind::Tensor, std::nullopt}};
  def.infer = [](const std::vector<TensorType> &, const AttrMap &attrs) {
    const Tensor &value = attrTensor(attrs, "value");
    if (!value.defined())
      fail("constant has no value");
    return std::vector<TensorType>{value.type()};
  };
  def.eval = [](const std::vector<Tensor> &, const AttrMap &attrs, const std::vector<TensorType> &) {
    return std::vector<Tensor>{attrTensor(attrs, "value")};
  };
  return def;
}

} // namespace kiln::ir
