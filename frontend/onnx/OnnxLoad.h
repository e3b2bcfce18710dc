#pragma once
// Loading an ONNX model before any mapping: parsing under limits, the opset and structure
// checks kiln needs, static input shapes, and ONNX's own checker and shape inference. Each
// step throws kiln::Error whose message does not yet name the file (the public entry points
// add that prefix once).
#include <string>

#include <onnx/onnx_pb.h>

#include "frontend/onnx/OnnxImporter.h"

namespace kiln::frontend {

/// The default-domain opsets kiln maps. Opsets 1-6 differ from 7 in few ops (legacy
/// broadcasting attributes, a few attributes that later became inputs); the mappings that
/// care read ctx.opset().
inline constexpr int64_t kMinOnnxOpset = 1;
inline constexpr int64_t kMaxOnnxOpset = 18;
/// Subgraphs (If/Loop/Scan bodies) nested deeper than this are refused before any check
/// that would recurse into them.
inline constexpr int kMaxSubgraphDepth = 16;

/// Parses a serialized ModelProto (refusing malformed, truncated or over-nested input) and
/// returns the default-domain opset after checking it is one kiln maps.
int64_t parseOnnxModel(const std::string &bytes, onnx::ModelProto &model);

/// Like parseOnnxModel, but accepts any opset (for coverage reports).
int64_t parseOnnxModelAnyOpset(const std::string &bytes, onnx::ModelProto &model);

/// The model's folder as the external-data root: the file's parent for files.
std::string modelDirOf(const std::string &path);

/// Checks what ONNX's checker does not: unique value names among inputs and initializers,
/// safe external-data locations, bounded subgraph nesting.
void checkModelStructure(const onnx::ModelProto &model, const std::string &modelDir);

/// Rewrites every graph input's shape to a static one (declared dims, options.inputShapes,
/// options.dimParams); a dim left symbolic is an error naming the input and the dim, unless
/// options.keepSymbolicDims keeps it as a dim_param (a kiln symbol of that name).
void resolveInputShapes(onnx::ModelProto &model, const OnnxImportOptions &options);

/// Runs ONNX's checker, turning its exceptions into kiln::Error.
void runOnnxChecker(const onnx::ModelProto &model, const std::string &modelDir);

/// Runs ONNX's strict shape inference, which fills the model's value_info. ONNX 1.12's
/// inference functions trust their inputs (a Conv whose input rank is below the weight's
/// crashes them), so the importer runs this only on a model kiln has already mapped, that
/// is validated every op's shapes itself.
void runOnnxShapeInference(onnx::ModelProto &model);

} // namespace kiln::frontend
