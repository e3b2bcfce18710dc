#pragma once
// The ONNX importer: turns an .onnx model (opsets 1-18 of the default domain) into a kiln IR
// graph. Loading is defensive: the file size is checked before parsing, the model goes through
// ONNX's checker and shape inference, every unsupported node is reported in one error, and
// every problem a file can cause is a kiln::Error that names the file and the node or value.
//
// Initializers become parameters (with their values); ONNX `Constant` nodes and everything
// computable from constants at import time (Shape subgraphs, Range, ...) are folded, so inputs
// that kiln needs static (Reshape's shape, Slice's starts, Pad's pads) become attributes.
// The importer lives in its own library (kiln_onnx) so that the rest of the frontend builds
// without protobuf.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ir/Graph.h"

namespace kiln::frontend {

struct OnnxImportOptions {
  /// Full static shapes for graph inputs, by input name; they replace the model's declared
  /// shape (which must agree on every static dim).
  std::map<std::string, Shape> inputShapes;
  /// Values for symbolic dims by their dim_param name ("batch" -> 1), applied to every input.
  std::map<std::string, int64_t> dimParams;
  /// Keep the dim_params that neither dimParams nor inputShapes fix as symbolic dims
  /// (core/SymbolicDim.h), so the graph serves every size (ir::bindSymbols makes it static);
  /// otherwise such a dim is an error asking for its value. A dim_param that is not an
  /// identifier, a dim with neither value nor name, and ops whose mapping does not take
  /// symbols (frontend/onnx/OnnxSymbolic.h) are errors naming the input or node.
  bool keepSymbolicDims = false;
  /// Values of graph inputs fixed in advance, by input name, as a compile specialised to
  /// them: where a mapping needs a static operand (a shape, axes, pads, TopK's K) that is a
  /// graph input, it reads the value here, and shape arithmetic on integer scalars and short
  /// vectors is folded through. The input stays a graph input and must be bound to the same
  /// value when the graph runs. This is how ONNX's backend tests, which pass such operands
  /// as inputs, import.
  std::map<std::string, Tensor> inputValues;
  /// Files larger than this are refused before parsing (protobuf cannot parse past 2 GiB).
  uint64_t maxFileBytes = (uint64_t{1} << 31) - 1;
  /// The folder that external-data locations are relative to, for importOnnxBytes (files
  /// use their own folder). Empty: a model with external data is refused.
  std::string baseDir;
};

/// Imports the model in `path`. Throws kiln::Error naming the file and what is wrong.
std::unique_ptr<ir::Graph> importOnnxFile(const std::string &path, const OnnxImportOptions &options = {});

/// Imports a serialized ModelProto; `sourceName` names it in errors.
std::unique_ptr<ir::Graph> importOnnxBytes(const std::string &bytes, const OnnxImportOptions &options = {},
                                           const std::string &sourceName = "<onnx bytes>");

/// A model's graph inputs and outputs as it declares them: dtypes as kiln holds them, each
/// dim_param a symbol, a dim with neither value nor name a symbol of its own ("out_d1", from
/// the value's position). What a caller needs to take inputs of any size before the model is
/// imported at one.
struct OnnxDeclaredValues {
  std::vector<std::pair<std::string, TensorType>> inputs, outputs;
};

/// The declarations of the model `path` (or of the serialized `bytes`); the model is parsed,
/// not imported. kiln::Error naming the file for a model that does not parse, or a value with
/// no declared type or rank.
OnnxDeclaredValues onnxDeclaredValuesOfFile(const std::string &path, uint64_t maxFileBytes = (uint64_t{1} << 31) - 1);
OnnxDeclaredValues onnxDeclaredValuesOfBytes(const std::string &bytes, const std::string &sourceName = "<onnx bytes>");

/// How well kiln covers one op type of a model.
struct OnnxOpCoverage {
  std::string opType; // "Conv"; a node outside the default domain reads "domain:Op"
  int64_t count = 0;  // nodes of this type
  bool supported = false;
  /// Attributes, values or dtypes of these nodes that kiln cannot express, one line each
  /// ("node 'pool1': storage_order=1 is not supported"); empty when every node maps.
  std::vector<std::string> problems;
};

struct OnnxCoverage {
  int64_t opset = 0; // of the default domain
  int64_t nodeCount = 0;
  std::vector<OnnxOpCoverage> ops; // sorted by op type
  /// Problems not tied to one op type: graph inputs or initializers of a dtype kiln lacks.
  std::vector<std::string> otherProblems;
  /// True when every op type is supported and nothing above names a problem.
  bool fullySupported() const;
};

/// Reports every op type in the model with its count and whether kiln supports it. Only
/// parses and scans: it works on models with symbolic shapes that would not import yet.
OnnxCoverage onnxCoverage(const std::string &path, const OnnxImportOptions &options = {});

/// Reads a serialized ONNX TensorProto (the `input_0.pb` / `output_0.pb` files of the ONNX
/// backend test data sets). External data is resolved relative to the file's folder.
Tensor readTensorProtoFile(const std::string &path, uint64_t maxFileBytes = (uint64_t{1} << 31) - 1);

/// Decodes a serialized TensorProto held in memory; external data resolves under `baseDir`
/// (empty: a tensor with external data is refused). `sourceName` names it in errors.
Tensor readTensorProtoBytes(const std::string &bytes, const std::string &baseDir = "",
                            const std::string &sourceName = "<tensor bytes>");

} // namespace kiln::frontend
