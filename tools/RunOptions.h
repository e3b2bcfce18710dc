#pragma once
// kiln-run's command line: its options, its help text, and which mode they select. A mode is
// one function (tools/RunCommands.h) in its own file; adding one means a RunMode value, the
// flags that select and configure it in parseRunOptions, and a case in kiln-run.cpp.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "codegen/CompileModel.h"
#include "codegen/Precision.h"
#include "core/SymbolicDim.h"
#include "tools/ToolCommon.h"

namespace kiln::tools {

enum class RunMode {
  Graph,       // FILE.kir or FILE.onnx: compiled (or on the reference evaluator) and run
  Model,       // MODEL.so: a model kiln-compile wrote, run with no compiler and no graph
  Conformance, // --onnx-test DIR...: ONNX backend test folders
};

struct RunOptions {
  RunMode mode = RunMode::Graph;
  std::vector<std::string> paths; // the graph or model file, or the --onnx-test folders
  std::vector<Binding> inputs, params, outputs, checks;
  DimBindings dims; // --dim NAME=N: extents of the graph's symbolic dims
  std::optional<double> rtol, atol;
  uint64_t seed = 0;
  bool help = false;
  bool onnxTest = false;
  bool compiled = false; // --onnx-test --compiled
  int batch = 100;       // models per translation unit with --compiled
  std::string listPassing;
  int jobs = 1;
  std::string pipeline, passList;
  bool bisectPasses = false;
  bool reference = false;
  int threads = 0;     // 0: the runtime's default pool
  int bench = 0;       // timed runs after the first
  std::string profile; // --profile: where the Chrome trace goes
  codegen::ContractionPrecision precision = codegen::ContractionPrecision::F32; // --precision
  bool precisionGiven = false;
  /// --batch-tile: codegen::CompileOptions::batchTile (auto, off, or rows per tile)
  int64_t batchTile = codegen::CompileOptions::kBatchTileAuto;
  bool comparePrecision = false; // --compare-precision: precision's outputs against f32's
  bool perLayer = false;         // --per-layer: and every contraction's output
  std::string quantizedModel;    // --compare-quantized FILE: FILE's outputs against the graph's (f32)

  double rtolOr(double fallback) const { return rtol.value_or(fallback); }
  double atolOr(double fallback) const { return atol.value_or(fallback); }
};

/// Parses and checks kiln-run's arguments (argv[0] is the program); kiln::Error for any
/// unknown flag, bad value or combination that does not apply to the selected mode.
RunOptions parseRunOptions(int argc, char **argv);

/// A compiled model: named *.so, or an ELF file whatever its name (a graph file is text).
bool isSharedObject(const std::string &path);

/// kiln-run --help.
extern const char *const kRunUsage;

} // namespace kiln::tools
