// Opset-18 schemas for ONNX libraries that stop at opset 17. They state the operators'
// interfaces as the ONNX 1.13 specification does (inputs, optional inputs, attributes, type
// constraints) so that the checker validates opset-18 models instead of rejecting their new
// operand forms; their type inference only propagates the element type, and kiln computes
// every shape itself anyway.
#include "frontend/onnx/OnnxSchemas.h"

#include <map>

#include <onnx/defs/shape_inference.h>

namespace kiln::frontend {

namespace {

constexpr int kShimOpset = 18;

void propagateToAllOutputs(onnx::InferenceContext &ctx) {
  for (size_t i = 0; i < ctx.getNumOutputs(); ++i)
    onnx::propagateElemTypeFromInputToOutput(ctx, 0, i);
}

onnx::OpSchema reduceSchema(const std::string &name) {
  onnx::OpSchema schema;
  schema.SetName(name)
      .SetDomain(onnx::ONNX_DOMAIN)
      .SinceVersion(kShimOpset)
      .Attr("keepdims", "Keep the reduced dimensions.", onnx::AttributeProto::INT, static_cast<int64_t>(1))
      .Attr("noop_with_empty_axes", "Empty axes: identity instead of reducing all.", onnx::AttributeProto::INT,
            static_cast<int64_t>(0))
      .Input(0, "data", "Input tensor.", "T")
      .Input(1, "axes", "Axes to reduce.", "tensor(int64)", onnx::OpSchema::Optional)
      .Output(0, "reduced", "Reduced tensor.", "T")
      .TypeConstraint("T", onnx::OpSchema::all_numeric_types_with_bfloat(), "Numeric tensors.")
      .TypeAndShapeInferenceFunction(propagateToAllOutputs);
  schema.Finalize();
  return schema;
}

onnx::OpSchema splitSchema() {
  onnx::OpSchema schema;
  schema.SetName("Split")
      .SetDomain(onnx::ONNX_DOMAIN)
      .SinceVersion(kShimOpset)
      .Attr("axis", "Axis to split on.", onnx::AttributeProto::INT, static_cast<int64_t>(0))
      .Attr("num_outputs", "Number of (nearly) equal chunks.", onnx::AttributeProto::INT, false)
      .Input(0, "input", "Tensor to split.", "T")
      .Input(1, "split", "Chunk sizes.", "tensor(int64)", onnx::OpSchema::Optional)
      .Output(0, "outputs", "The chunks.", "T", onnx::OpSchema::Variadic)
      .TypeConstraint("T", onnx::OpSchema::all_tensor_types_with_bfloat(), "Any tensor type.")
      .TypeAndShapeInferenceFunction(propagateToAllOutputs);
  schema.Finalize();
  return schema;
}

onnx::OpSchema padSchema() {
  onnx::OpSchema schema;
  schema.SetName("Pad")
      .SetDomain(onnx::ONNX_DOMAIN)
      .SinceVersion(kShimOpset)
      .Attr("mode", "constant, reflect or edge.", onnx::AttributeProto::STRING, std::string("constant"))
      .Input(0, "data", "Input tensor.", "T")
      .Input(1, "pads", "Pads per axis, begins then ends.", "tensor(int64)")
      .Input(2, "constant_value", "Fill value.", "T", onnx::OpSchema::Optional)
      .Input(3, "axes", "Axes the pads apply to.", "Tind", onnx::OpSchema::Optional)
      .Output(0, "output", "Padded tensor.", "T")
      .TypeConstraint("T", onnx::OpSchema::all_tensor_types_with_bfloat(), "Any tensor type.")
      .TypeConstraint("Tind", {"tensor(int32)", "tensor(int64)"}, "Axis indices.")
      .TypeAndShapeInferenceFunction(propagateToAllOutputs);
  schema.Finalize();
  return schema;
}

onnx::OpSchema mishSchema() {
  onnx::OpSchema schema;
  schema.SetName("Mish")
      .SetDomain(onnx::ONNX_DOMAIN)
      .SinceVersion(kShimOpset)
      .Input(0, "X", "Input tensor.", "T")
      .Output(0, "Y", "x * tanh(softplus(x)).", "T")
      .TypeConstraint("T", {"tensor(float16)", "tensor(float)", "tensor(double)"}, "Float tensors.")
      .TypeAndShapeInferenceFunction(onnx::propagateShapeAndTypeFromFirstInput);
  schema.Finalize();
  return schema;
}

onnx::OpSchema resizeSchema() {
  onnx::OpSchema schema;
  schema.SetName("Resize")
      .SetDomain(onnx::ONNX_DOMAIN)
      .SinceVersion(kShimOpset)
      .Attr("mode", "nearest, linear or cubic.", onnx::AttributeProto::STRING, std::string("nearest"))
      .Attr("coordinate_transformation_mode", "How output coordinates map to input ones.", onnx::AttributeProto::STRING,
            std::string("half_pixel"))
      .Attr("nearest_mode", "Rounding of nearest.", onnx::AttributeProto::STRING, std::string("round_prefer_floor"))
      .Attr("cubic_coeff_a", "The cubic kernel's a.", onnx::AttributeProto::FLOAT, -0.75f)
      .Attr("exclude_outside", "Zero weight outside the input.", onnx::AttributeProto::INT, static_cast<int64_t>(0))
      .Attr("extrapolation_value", "Fill outside (tf_crop_and_resize).", onnx::AttributeProto::FLOAT, 0.0f)
      .Attr("antialias", "Antialiasing filter when downsampling.", onnx::AttributeProto::INT, static_cast<int64_t>(0))
      .Attr("axes", "The axes that scales or sizes refer to.", onnx::AttributeProto::INTS, false)
      .Attr("keep_aspect_ratio_policy", "stretch, not_larger or not_smaller.", onnx::AttributeProto::STRING,
            std::string("stretch"))
      .Input(0, "X", "Input tensor.", "T1")
      .Input(1, "roi", "Regions of interest (tf_crop_and_resize).", "T2", onnx::OpSchema::Optional)
      .Input(2, "scales", "Scale per axis.", "tensor(float)", onnx::OpSchema::Optional)
      .Input(3, "sizes", "Output size per axis.", "tensor(int64)", onnx::OpSchema::Optional)
      .Output(0, "Y", "Resized tensor.", "T1")
      .TypeConstraint("T1", onnx::OpSchema::all_tensor_types_with_bfloat(), "Any tensor type.")
      .TypeConstraint("T2", {"tensor(float16)", "tensor(float)", "tensor(double)"}, "Float tensors.")
      .TypeAndShapeInferenceFunction(propagateToAllOutputs);
  schema.Finalize();
  return schema;
}

const std::map<std::string, onnx::OpSchema> &opset18Shims() {
  // Built on first use (a function-local static, not a global constructor).
  static const std::map<std::string, onnx::OpSchema> shims = [] {
    std::map<std::string, onnx::OpSchema> map;
    for (const char *name : {"ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceMax", "ReduceMean",
                             "ReduceMin", "ReduceProd", "ReduceSumSquare"})
      map.emplace(name, reduceSchema(name));
    map.emplace("Split", splitSchema());
    map.emplace("Pad", padSchema());
    map.emplace("Mish", mishSchema());
    map.emplace("Resize", resizeSchema());
    return map;
  }();
  return shims;
}

class KilnSchemaRegistry final : public onnx::ISchemaRegistry {
public:
  const onnx::OpSchema *GetSchema(const std::string &key, const int maxInclusiveVersion,
                                  const std::string &domain) const override {
    if (maxInclusiveVersion >= kShimOpset && onnxLibraryMaxOpset() < kShimOpset &&
        (domain.empty() || domain == "ai.onnx")) {
      auto it = opset18Shims().find(key);
      if (it != opset18Shims().end())
        return &it->second;
    }
    return onnx::OpSchemaRegistry::Instance()->GetSchema(key, maxInclusiveVersion, domain);
  }
};

} // namespace

int onnxLibraryMaxOpset() {
  const auto &ranges = onnx::OpSchemaRegistry::DomainToVersionRange::Instance().Map();
  auto it = ranges.find(onnx::ONNX_DOMAIN);
  return it == ranges.end() ? 0 : it->second.second;
}

const onnx::ISchemaRegistry &onnxSchemaRegistry() {
  static const KilnSchemaRegistry registry;
  return registry;
}

} // namespace kiln::frontend
