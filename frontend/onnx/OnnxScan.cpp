// The unsupported-feature scan and the coverage report built on it.
#include "frontend/onnx/OnnxScan.h"

#include <map>
#include <unordered_map>

#include "frontend/onnx/OnnxImporter.h"
#include "frontend/onnx/OnnxLoad.h"
#include "frontend/onnx/OnnxOpTable.h"
#include "frontend/onnx/OnnxTensor.h"

namespace kiln::frontend {

namespace {

bool isDefaultDomain(const std::string &domain) { return domain.empty() || domain == "ai.onnx"; }

bool isControlFlow(const std::string &opType) {
  return opType == "If" || opType == "Loop" || opType == "Scan" || opType == "SequenceMap";
}

/// Element types ONNX declares or inferred for value names (value_info, inputs, outputs).
std::unordered_map<std::string, int32_t> declaredElemTypes(const onnx::GraphProto &graph) {
  std::unordered_map<std::string, int32_t> types;
  auto add = [&](const onnx::ValueInfoProto &info) {
    if (info.type().has_tensor_type() && info.type().tensor_type().elem_type() != onnx::TensorProto::UNDEFINED)
      types[info.name()] = info.type().tensor_type().elem_type();
  };
  for (const auto &info : graph.value_info())
    add(info);
  for (const auto &info : graph.output())
    add(info);
  return types;
}

} // namespace

std::string describeNode(const onnx::NodeProto &node, int index) {
  if (!node.name().empty())
    return fmt::format("node '{}' ({})", node.name(), node.op_type());
  if (node.output_size() > 0)
    return fmt::format("node #{} ({}, output '{}')", index, node.op_type(), node.output(0));
  return fmt::format("node #{} ({})", index, node.op_type());
}

ModelScan scanModel(const onnx::ModelProto &model, int64_t opset) {
  const onnx::GraphProto &graph = model.graph();
  std::unordered_map<std::string, int32_t> elemTypes = declaredElemTypes(graph);
  ModelScan scan;
  for (int i = 0; i < graph.node_size(); ++i) {
    const onnx::NodeProto &node = graph.node(i);
    NodeScan result;
    result.index = i;
    bool defaultDomain = isDefaultDomain(node.domain());
    result.opType = defaultDomain ? node.op_type() : node.domain() + ":" + node.op_type();
    const OnnxOpEntry *entry = defaultDomain ? findOnnxOp(node.op_type()) : nullptr;
    result.knownOpType = entry != nullptr;
    if (!defaultDomain) {
      result.problems.push_back(fmt::format("ops of domain '{}' are not supported", node.domain()));
    } else if (!entry) {
      result.problems.push_back(isControlFlow(node.op_type())
                                    ? fmt::format("control flow ({}) is not supported", node.op_type())
                                    : fmt::format("kiln has no mapping for op type '{}'", node.op_type()));
    } else if (entry->check) {
      try {
        entry->check(node, opset, result.problems);
      } catch (const Error &e) {
        result.problems.push_back(e.what());
      }
    }
    for (const std::string &output : node.output()) {
      auto it = elemTypes.find(output);
      if (it != elemTypes.end() && !dtypeFromOnnx(it->second))
        result.problems.push_back(
            fmt::format("output '{}' has type {}, which kiln cannot represent", output, onnxTypeName(it->second)));
    }
    scan.nodes.push_back(std::move(result));
  }
  for (const auto &init : graph.initializer())
    if (!dtypeFromOnnx(init.data_type()))
      scan.otherProblems.push_back(fmt::format("initializer '{}' has type {}, which kiln cannot represent", init.name(),
                                               onnxTypeName(init.data_type())));
  for (const auto &input : graph.input())
    if (input.type().has_tensor_type() && !dtypeFromOnnx(input.type().tensor_type().elem_type()))
      scan.otherProblems.push_back(fmt::format("graph input '{}' has type {}, which kiln cannot represent",
                                               input.name(), onnxTypeName(input.type().tensor_type().elem_type())));
  return scan;
}

std::string unsupportedSummary(const onnx::ModelProto &model, const ModelScan &scan) {
  std::vector<std::string> lines = scan.otherProblems;
  size_t badNodes = 0;
  for (const NodeScan &node : scan.nodes) {
    if (node.problems.empty())
      continue;
    ++badNodes;
    lines.push_back(fmt::format("{}: {}", describeNode(model.graph().node(node.index), node.index),
                                fmt::join(node.problems, ", ")));
  }
  if (lines.empty())
    return "";
  return fmt::format("kiln cannot import {} node(s){}: {}", badNodes,
                     scan.otherProblems.empty() ? "" : " and some values", fmt::join(lines, "; "));
}

bool OnnxCoverage::fullySupported() const {
  if (!otherProblems.empty())
    return false;
  for (const OnnxOpCoverage &op : ops)
    if (!op.supported || !op.problems.empty())
      return false;
  return true;
}

OnnxCoverage onnxCoverage(const std::string &path, const OnnxImportOptions &options) {
  try {
    onnx::ModelProto model;
    int64_t opset = parseOnnxModelAnyOpset(readFileLimited(path, options.maxFileBytes, "ONNX model"), model);
    // No ONNX shape inference here: its functions trust the model, and coverage reports are
    // asked for exactly the models that kiln has not validated.
    ModelScan scan = scanModel(model, opset);
    OnnxCoverage coverage;
    coverage.opset = opset;
    coverage.nodeCount = static_cast<int64_t>(scan.nodes.size());
    coverage.otherProblems = scan.otherProblems;
    if (opset < kMinOnnxOpset || opset > kMaxOnnxOpset)
      coverage.otherProblems.push_back(
          fmt::format("opset {} is outside the opsets kiln imports ({} to {})", opset, kMinOnnxOpset, kMaxOnnxOpset));
    std::map<std::string, OnnxOpCoverage> byType;
    for (const NodeScan &node : scan.nodes) {
      OnnxOpCoverage &op = byType[node.opType];
      op.opType = node.opType;
      op.count += 1;
      op.supported = node.knownOpType;
      if (node.knownOpType)
        for (const std::string &problem : node.problems)
          op.problems.push_back(
              fmt::format("{}: {}", describeNode(model.graph().node(node.index), node.index), problem));
    }
    for (auto &[type, op] : byType)
      coverage.ops.push_back(std::move(op));
    return coverage;
  } catch (const Error &e) {
    fail("{}: {}", path, e.what());
  }
}

} // namespace kiln::frontend
