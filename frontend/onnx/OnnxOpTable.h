#pragma once
// The ONNX op mapping table (OnnxOps.def, and the OnnxName column of ir/ElementwiseOps.def) and
// the declarations its family files implement.
// A mapping function builds kiln ops for one ONNX node and returns one value per ONNX output
// it supports (in order; a missing trailing value means that output is unsupported). It may
// throw kiln::Error; the importer adds the node's name and op type to the message.
#include <string>
#include <string_view>
#include <vector>

#include "frontend/onnx/OnnxContext.h"

namespace kiln::frontend {

using OnnxMapFn = std::vector<ir::Value *> (*)(ImportContext &ctx, const onnx::NodeProto &node);
/// Adds one line to `problems` per attribute value (or optional output) of `node` that kiln
/// cannot express; runs before anything is built, so every such node is reported at once.
using OnnxCheckFn = void (*)(const onnx::NodeProto &node, int64_t opset, std::vector<std::string> &problems);

struct OnnxOpEntry {
  std::string_view opType;
  OnnxMapFn map;
  OnnxCheckFn check; // may be null
};

/// The entry for a default-domain op type, or nullptr when kiln has no mapping.
const OnnxOpEntry *findOnnxOp(std::string_view opType);
/// Every supported op type, sorted.
std::vector<std::string_view> supportedOnnxOps();

#define ONNX_OP(OpType, Family, Check)                                                                                 \
  std::vector<ir::Value *> map##OpType(ImportContext &ctx, const onnx::NodeProto &node);
#include "frontend/onnx/OnnxOps.def"

void checkBatchNormalization(const onnx::NodeProto &node, int64_t opset, std::vector<std::string> &problems);
void checkCast(const onnx::NodeProto &node, int64_t opset, std::vector<std::string> &problems);
void checkConstant(const onnx::NodeProto &node, int64_t opset, std::vector<std::string> &problems);
void checkConstantOfShape(const onnx::NodeProto &node, int64_t opset, std::vector<std::string> &problems);
void checkConv(const onnx::NodeProto &node, int64_t opset, std::vector<std::string> &problems);
void checkDepthToSpace(const onnx::NodeProto &node, int64_t opset, std::vector<std::string> &problems);
void checkPad(const onnx::NodeProto &node, int64_t opset, std::vector<std::string> &problems);
void checkPool(const onnx::NodeProto &node, int64_t opset, std::vector<std::string> &problems);
void checkQuantizeLinear(const onnx::NodeProto &node, int64_t opset, std::vector<std::string> &problems);
void checkResize(const onnx::NodeProto &node, int64_t opset, std::vector<std::string> &problems);

// ---- helpers shared by the family files ----

/// The binary kiln op `op` on the node's two inputs; before opset 7, with the node's legacy
/// broadcast attributes (broadcast, axis) resolved into numpy broadcasting.
ir::Value *mapBinaryOp(ImportContext &ctx, const onnx::NodeProto &node, ir::OpKind op);
/// Whether ONNX output `i` of `node` is requested (present with a non-empty name).
bool hasOutput(const onnx::NodeProto &node, int i);
/// `x` reshaped to `shape` (no node when the shape already matches).
ir::Value *reshapeTo(ImportContext &ctx, ir::Value *x, const Shape &shape);
/// `x` broadcast to `shape` (no node when the shape already matches).
ir::Value *broadcastTo(ImportContext &ctx, ir::Value *x, const Shape &shape);
/// `x` with dims permuted by `perm`.
ir::Value *permute(ImportContext &ctx, ir::Value *x, const std::vector<int64_t> &perm);
/// Whether `node` is a Dropout in training mode, which draws random numbers and so is never
/// folded at import time.
bool isTrainingDropout(const ImportContext &ctx, const onnx::NodeProto &node);
/// The kiln dtype of an ONNX element type, failing for one kiln lacks.
DType kilnDType(int64_t onnxType, const std::string &what);

} // namespace kiln::frontend
