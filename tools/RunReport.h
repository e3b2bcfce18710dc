#pragma once
// What kiln-run does around one run, whatever runs it (a graph compiled now, a model compiled
// ahead of time, the reference evaluator): bind the inputs, report the outputs (summaries,
// --output files, --check comparisons), and time further runs (--bench) with optional
// per-kernel profiling (--profile).
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "runtime/Executable.h"
#include "tools/RunOptions.h"

namespace kiln::tools {

/// The inputs bound to tensors, in `inputs`' order: --input files (already read into `given`
/// by name, or read here), else random, input i drawn with seed options.seed + i. `owner`
/// names the graph or model in errors ("graph @g").
std::vector<Tensor> bindInputs(const std::vector<runtime::TensorSpec> &inputs, const RunOptions &options,
                               const std::map<std::string, Tensor> &given, const std::string &owner);

/// The --output and --check requests, checked against the output names and with the expected
/// files read when constructed, so that a typo fails before a long run.
class OutputRequests {
public:
  /// `whose` names the outputs' owner in errors ("the graph's").
  OutputRequests(std::vector<std::string> names, const RunOptions &options, const std::string &whose);

  /// Prints one summary line per output, writes the --output files and compares the --check
  /// ones; returns the exit status (1 when a check failed, each failure one line on stderr).
  int report(const std::vector<Tensor> &outputs, const RunOptions &options) const;

private:
  size_t find(const std::string &name, const std::string &flag) const;

  std::vector<std::string> names_;
  std::string whose_;
  std::vector<std::pair<size_t, Tensor>> expected_;
};

/// One way of running the model, for runAndReport.
struct RunTarget {
  std::string description;                         // "compiled model (4 threads)"
  int64_t arenaBytes = 0, weightBytes = 0;
  std::string batchTiling; // codegen::chooseBatchTile's reason; "" when not compiled from a graph
  std::string inputTypes;  // "x f32[5,3], z f32[5,3]": the sizes the runs take (inputTypesOf)
  /// Wall time of reading the model (ONNX import or IR parse) and of compiling it (passes,
  /// codegen and the system compiler, or the disk cache's load); negative when not measured.
  double loadMs = -1, compileMs = -1;
  runtime::Executable *executable = nullptr;       // what --profile times; null: nothing to time
  std::function<void(std::vector<Tensor> &)> run;  // one run; fills `outputs` or reuses them
};

/// The run (profiled when --profile is given without --bench), its report, then with --bench
/// the timed runs (profiled with --profile), the profile's top-kernels table and trace, and the
/// bench lines ending with median_ms. Returns the report's exit status.
int runAndReport(const RunTarget &target, const OutputRequests &requests, const RunOptions &options);

/// "x f32[5,3], z f32[5,3]": each input's name and the type of the tensor bound to it.
std::string inputTypesOf(const std::vector<runtime::TensorSpec> &specs, const std::vector<Tensor> &inputs);

/// The bytes of `executable`'s weights as it declares them.
int64_t weightBytesOf(const runtime::Executable &executable);

} // namespace kiln::tools
