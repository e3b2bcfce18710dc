#pragma once
// Reading a graph for a tool (kiln-run, kiln-compile): a .kir file or an ONNX model, its
// parameters bound from files or drawn at random, and the passes --pipeline/--passes select.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/SymbolicDim.h"
#include "ir/Evaluator.h"
#include "ir/Graph.h"
#include "passes/PassManager.h"
#include "runtime/Executable.h"
#include "tools/ToolCommon.h"

namespace kiln::tools {

/// How to read the graph file.
struct GraphSource {
  std::string path;                     // FILE.kir, or FILE.onnx
  std::vector<Binding> inputs;          // ONNX: inputs read first, fixing shapes and values
  std::map<std::string, Shape> inputShapes; // ONNX: static shapes for inputs by name
  DimBindings dims;                         // extents of symbolic dims (kiln-run --dim)
  bool keepSymbolicDims = false;            // ONNX: dim_params nothing fixes become symbols
  /// Return the graph symbolic when its one symbol is the batch of a batch-separable graph
  /// (ir/BatchTiling.h) and nothing binds it: one compile then serves every batch size
  /// (kiln-compile). Implies keepSymbolicDims.
  bool keepBatchSymbol = false;
};

/// Loads the graph. For an ONNX model, the given inputs are read into `given` first: the model
/// is specialised to them (their shapes fix symbolic dims, their values serve where kiln needs
/// an operand at import time, sound because the same values are bound when the graph runs).
/// Dims still symbolic after that (a .kir graph's, or with keepSymbolicDims ONNX dim_params no
/// input fixed) are bound with `dims` and the given inputs' shapes (ir::bindSymbols), so the
/// graph returned is static; a symbol left without an extent is a kiln::Error asking for
/// --dim. An ONNX model that cannot import with symbols (a Shape of a symbolic dim) imports
/// with `dims` fixed instead.
std::unique_ptr<ir::Graph> loadGraph(const GraphSource &source, std::map<std::string, Tensor> &given);

/// Parameter values from --param files; parameters with neither a file nor a value of their
/// own are drawn at random when `randomMissing` (parameter i of the graph with seed
/// seed + number of inputs + i, after the inputs), else left out.
ir::ParamValues bindParams(const ir::Graph &graph, const std::vector<Binding> &files, uint64_t seed,
                           bool randomMissing);

/// The passes --pipeline or --passes select (`fallback`, a pipeline, when neither is given).
passes::PassManager selectPasses(const std::string &pipeline, const std::string &passList, const std::string &fallback);

/// Output names: the returned value's name, or "output<i>" (as compiled models name them).
std::vector<std::string> outputNames(const ir::Graph &graph);
/// The graph's inputs by name and type.
std::vector<runtime::TensorSpec> inputSpecs(const ir::Graph &graph);

} // namespace kiln::tools
