// Rewrites an fp32 ONNX model as a static QDQ model (see QuantizeModel.h).
#include "tools/quantize/QuantizeModel.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <set>

#include "core/Error.h"
#include "frontend/onnx/OnnxTensor.h"

namespace kiln::tools {

namespace {

int64_t defaultDomainOpset(const onnx::ModelProto &model) {
  for (const auto &import : model.opset_import())
    if (import.domain().empty() || import.domain() == "ai.onnx")
      return import.version();
  return 0;
}

const onnx::TensorProto *findInitializer(const onnx::GraphProto &graph, const std::string &name) {
  for (const auto &init : graph.initializer())
    if (init.name() == name)
      return &init;
  return nullptr;
}

int64_t intAttribute(const onnx::NodeProto &node, const std::string &name, int64_t fallback) {
  for (const auto &attr : node.attribute())
    if (attr.name() == name)
      return attr.i();
  return fallback;
}

/// The per-channel axis of the node's weight (input 1) when the node is quantised: a Conv,
/// MatMul or Gemm in the default domain whose weight is a float initializer of the rank the
/// op takes. nullopt leaves the node in float.
std::optional<int> weightAxis(const onnx::GraphProto &graph, const onnx::NodeProto &node) {
  if (!node.domain().empty() && node.domain() != "ai.onnx")
    return std::nullopt;
  if (node.input_size() < 2)
    return std::nullopt;
  const onnx::TensorProto *weight = findInitializer(graph, node.input(1));
  if (!weight || weight->data_type() != onnx::TensorProto::FLOAT)
    return std::nullopt;
  if (node.op_type() == "Conv" && weight->dims_size() >= 3)
    return 0;
  if (node.op_type() == "MatMul" && weight->dims_size() == 2)
    return 1;
  if (node.op_type() == "Gemm" && weight->dims_size() == 2)
    return intAttribute(node, "transB", 0) ? 0 : 1;
  return std::nullopt;
}

/// Names not yet used by any tensor of the graph, so inserted tensors never shadow one.
class NameAllocator {
public:
  explicit NameAllocator(const onnx::GraphProto &graph) {
    for (const auto &init : graph.initializer())
      used_.insert(init.name());
    for (const auto &value : graph.input())
      used_.insert(value.name());
    for (const auto &node : graph.node())
      for (const auto &output : node.output())
        used_.insert(output);
  }
  std::string fresh(const std::string &base) {
    std::string name = base;
    for (int i = 1; used_.count(name); ++i)
      name = base + "_" + std::to_string(i);
    used_.insert(name);
    return name;
  }

private:
  std::set<std::string> used_;
};

onnx::TensorProto rawTensor(const std::string &name, int32_t dataType, const std::vector<int64_t> &dims,
                            const void *bytes, size_t byteCount) {
  onnx::TensorProto proto;
  proto.set_name(name);
  proto.set_data_type(dataType);
  for (int64_t dim : dims)
    proto.add_dims(dim);
  proto.set_raw_data(std::string(static_cast<const char *>(bytes), byteCount));
  return proto;
}

onnx::NodeProto qdqNode(const std::string &opType, const std::string &name, const std::vector<std::string> &inputs,
                        const std::string &output, std::optional<int64_t> axis) {
  onnx::NodeProto node;
  node.set_op_type(opType);
  node.set_name(name);
  for (const auto &input : inputs)
    node.add_input(input);
  node.add_output(output);
  if (axis) {
    auto *attr = node.add_attribute();
    attr->set_name("axis");
    attr->set_type(onnx::AttributeProto::INT);
    attr->set_i(*axis);
  }
  return node;
}

/// What replaces one float weight: the s8 initializer, its scales and zero points, and the
/// DequantizeLinear node that yields the float tensor the op reads.
struct QuantizedWeight {
  std::vector<onnx::TensorProto> initializers;
  onnx::NodeProto dequantize;
  std::string dequantized;
};

QuantizedWeight quantizeWeight(const onnx::TensorProto &proto, int axis, const std::string &modelDir,
                               NameAllocator &names) {
  Tensor weight = frontend::decodeTensorProto(proto, modelDir, "weight '" + proto.name() + "'");
  const Shape &shape = weight.shape();
  int64_t channels = shape[axis];
  int64_t inner = 1;
  for (size_t d = axis + 1; d < shape.size(); ++d)
    inner *= shape[d];
  int64_t count = weight.numElements();
  const float *w = weight.dataAs<float>();
  auto channelOf = [&](int64_t i) { return (i / inner) % channels; };

  std::vector<float> scales(channels, 0.0f);
  for (int64_t i = 0; i < count; ++i)
    scales[channelOf(i)] = std::max(scales[channelOf(i)], std::fabs(w[i]));
  for (float &scale : scales)
    scale = scale > 0 ? scale / 127.0f : 1.0f; // an all-zero channel quantises to zeros exactly
  std::vector<int8_t> values(count);
  for (int64_t i = 0; i < count; ++i) {
    // Round half to even, as QuantizeLinear does; |w| <= 127 * scale keeps it in [-127, 127].
    float q = std::nearbyint(w[i] / scales[channelOf(i)]);
    values[i] = static_cast<int8_t>(std::clamp(q, -127.0f, 127.0f));
  }
  std::vector<int8_t> zeroPoints(channels, 0);
  std::vector<int64_t> dims(proto.dims().begin(), proto.dims().end());

  QuantizedWeight out;
  std::string quantized = names.fresh(proto.name() + "_quantized");
  std::string scaleName = names.fresh(proto.name() + "_scale");
  std::string zeroName = names.fresh(proto.name() + "_zero_point");
  out.dequantized = names.fresh(proto.name() + "_dequantized");
  out.initializers.push_back(rawTensor(quantized, onnx::TensorProto::INT8, dims, values.data(), values.size()));
  out.initializers.push_back(
      rawTensor(scaleName, onnx::TensorProto::FLOAT, {channels}, scales.data(), scales.size() * sizeof(float)));
  out.initializers.push_back(rawTensor(zeroName, onnx::TensorProto::INT8, {channels}, zeroPoints.data(), channels));
  out.dequantize = qdqNode("DequantizeLinear", out.dequantized, {quantized, scaleName, zeroName}, out.dequantized, axis);
  return out;
}

} // namespace

ActivationQuantization activationQuantization(ActivationRange range, ActivationType type) {
  float lo = std::min(range.min, 0.0f), hi = std::max(range.max, 0.0f);
  ActivationQuantization q;
  if (type == ActivationType::S8) {
    float bound = std::max(-lo, hi);
    q.scale = bound > 0 ? bound / 127.0f : 1.0f;
    q.zeroPoint = 0;
    return q;
  }
  if (hi - lo <= 0)
    return q;
  q.scale = (hi - lo) / 255.0f;
  q.zeroPoint = static_cast<int>(std::clamp(std::nearbyint(-lo / q.scale), 0.0f, 255.0f));
  return q;
}

std::vector<std::string> activationsToCalibrate(const onnx::ModelProto &model) {
  int64_t opset = defaultDomainOpset(model);
  if (opset < 13)
    fail("the model's opset is {}; per-channel DequantizeLinear needs opset 13 or later (convert the model first)",
         opset);
  std::vector<std::string> names;
  for (const auto &node : model.graph().node()) {
    if (!weightAxis(model.graph(), node))
      continue;
    if (findInitializer(model.graph(), node.input(0)))
      continue; // a constant first operand: nothing to calibrate (kept in float)
    if (std::find(names.begin(), names.end(), node.input(0)) == names.end())
      names.push_back(node.input(0));
  }
  if (names.empty())
    fail("the model has no Conv, MatMul or Gemm with a float initializer as its weight: nothing to quantize");
  return names;
}

QuantizeReport quantizeModel(onnx::ModelProto &model, const std::string &modelDir,
                             const std::map<std::string, ActivationRange> &ranges, ActivationType type,
                             bool quantizeResiduals) {
  std::vector<std::string> activations = activationsToCalibrate(model);
  onnx::GraphProto &graph = *model.mutable_graph();
  NameAllocator names(graph);

  // Which weights get replaced, and how many nodes read each (a float initializer that some
  // node still reads in float stays).
  std::map<std::string, int> floatReaders;
  for (const auto &node : graph.node())
    for (int i = 0; i < node.input_size(); ++i)
      if (findInitializer(graph, node.input(i)))
        floatReaders[node.input(i)]++;

  std::map<std::string, std::string> dequantizedActivation, dequantizedWeight;
  std::vector<onnx::TensorProto> newInitializers;
  std::vector<onnx::NodeProto> nodes;
  QuantizeReport report;
  for (const auto &original : graph.node()) {
    onnx::NodeProto node = original;
    std::optional<int> axis = weightAxis(graph, node);
    bool activationQuantized =
        axis && std::find(activations.begin(), activations.end(), node.input(0)) != activations.end();
    if (!activationQuantized) {
      report.floatOps[node.domain().empty() ? node.op_type() : node.domain() + ":" + node.op_type()]++;
      nodes.push_back(node);
      continue;
    }
    const std::string &x = node.input(0);
    if (!dequantizedActivation.count(x)) {
      auto range = ranges.find(x);
      if (range == ranges.end())
        fail("no calibrated range for tensor '{}'", x);
      ActivationQuantization q = activationQuantization(range->second, type);
      std::string scaleName = names.fresh(x + "_scale"), zeroName = names.fresh(x + "_zero_point");
      std::string quantized = names.fresh(x + "_quantized"), dequantized = names.fresh(x + "_dequantized");
      newInitializers.push_back(rawTensor(scaleName, onnx::TensorProto::FLOAT, {}, &q.scale, sizeof(float)));
      if (type == ActivationType::U8) {
        uint8_t zp = static_cast<uint8_t>(q.zeroPoint);
        newInitializers.push_back(rawTensor(zeroName, onnx::TensorProto::UINT8, {}, &zp, 1));
      } else {
        int8_t zp = static_cast<int8_t>(q.zeroPoint);
        newInitializers.push_back(rawTensor(zeroName, onnx::TensorProto::INT8, {}, &zp, 1));
      }
      nodes.push_back(qdqNode("QuantizeLinear", quantized, {x, scaleName, zeroName}, quantized, std::nullopt));
      nodes.push_back(qdqNode("DequantizeLinear", dequantized, {quantized, scaleName, zeroName}, dequantized,
                              std::nullopt));
      dequantizedActivation[x] = dequantized;
    }
    const std::string w = node.input(1);
    if (!dequantizedWeight.count(w)) {
      QuantizedWeight q = quantizeWeight(*findInitializer(graph, w), *axis, modelDir, names);
      for (auto &init : q.initializers)
        newInitializers.push_back(std::move(init));
      nodes.push_back(q.dequantize);
      dequantizedWeight[w] = q.dequantized;
    }
    node.set_input(0, dequantizedActivation[x]);
    node.set_input(1, dequantizedWeight[w]);
    floatReaders[w]--;
    report.quantizedNodes++;
    nodes.push_back(node);
  }

  // Add nodes read the activations quantized before them through their DequantizeLinear
  // (never one later in the node list, which would break its topological order).
  std::map<std::string, size_t> dequantizedAt;
  for (size_t i = 0; i < nodes.size(); ++i) {
    onnx::NodeProto &node = nodes[i];
    if (node.op_type() == "DequantizeLinear" && node.output_size() == 1)
      dequantizedAt[node.output(0)] = i;
    if (!quantizeResiduals || node.op_type() != "Add" || !node.domain().empty())
      continue;
    for (int input = 0; input < node.input_size(); ++input) {
      auto dequantized = dequantizedActivation.find(node.input(input));
      if (dequantized != dequantizedActivation.end() && dequantizedAt.count(dequantized->second)) {
        node.set_input(input, dequantized->second);
        report.dequantizedResiduals++;
      }
    }
  }

  graph.clear_node();
  for (auto &node : nodes)
    *graph.add_node() = std::move(node);
  // Drop the float weights nothing reads any more (and their graph-input entries, which
  // models of IR version < 4 carry for every initializer).
  auto unread = [&](const std::string &name) {
    auto it = floatReaders.find(name);
    return dequantizedWeight.count(name) && it != floatReaders.end() && it->second == 0;
  };
  auto *inits = graph.mutable_initializer();
  inits->erase(std::remove_if(inits->begin(), inits->end(), [&](const auto &init) { return unread(init.name()); }),
               inits->end());
  auto *inputs = graph.mutable_input();
  inputs->erase(std::remove_if(inputs->begin(), inputs->end(), [&](const auto &input) { return unread(input.name()); }),
                inputs->end());
  for (auto &init : newInitializers)
    *graph.add_initializer() = std::move(init);
  return report;
}

} // namespace kiln::tools
