#pragma once
// The unsupported-feature scan: one pass over a model that finds every node kiln cannot
// import (unknown op type or domain, an attribute value the mapping cannot express, a dtype
// kiln lacks) without building anything, so that the importer reports all of them at once
// and coverage reports can list them per op type.
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

namespace kiln::frontend {

struct NodeScan {
  int index = 0;
  std::string opType; // "Conv", or "domain:Op" outside the default domain
  bool knownOpType = false;
  std::vector<std::string> problems; // empty: the node maps (as far as a scan can tell)
};

struct ModelScan {
  std::vector<NodeScan> nodes;
  std::vector<std::string> otherProblems; // graph inputs and initializers of unsupported dtypes
};

ModelScan scanModel(const onnx::ModelProto &model, int64_t opset);

/// "node 'conv1' (Conv)", or "node #3 (Relu, output 'y')" for an unnamed node.
std::string describeNode(const onnx::NodeProto &node, int index);

/// The scan's problems as one message, or "" when there are none.
std::string unsupportedSummary(const onnx::ModelProto &model, const ModelScan &scan);

} // namespace kiln::frontend
