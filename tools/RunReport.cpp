// Binding inputs, reporting outputs, --bench and --profile (see RunReport.h).
#include "tools/RunReport.h"

#include <algorithm>
#include <chrono>
#include <iostream>

#include "core/Error.h"
#include "core/SymbolicDim.h"
#include "runtime/Npy.h"
#include "runtime/Profiler.h"

namespace kiln::tools {

std::vector<Tensor> bindInputs(const std::vector<runtime::TensorSpec> &inputs, const RunOptions &options,
                               const std::map<std::string, Tensor> &given, const std::string &owner) {
  std::vector<std::string> names;
  for (const runtime::TensorSpec &input : inputs)
    names.push_back(input.name);
  std::vector<Tensor> bound(inputs.size());
  for (const Binding &binding : options.inputs) {
    auto it = std::find(names.begin(), names.end(), binding.name);
    if (it == names.end())
      fail("unknown input '{}'; {} has inputs: {}", binding.name, owner, joinNames(names));
    size_t index = static_cast<size_t>(it - names.begin());
    if (bound[index].defined())
      fail("input '{}' is given twice", binding.name);
    auto read = given.find(binding.name);
    Tensor tensor = read != given.end() ? read->second : readTensorFile(binding.path);
    // A symbolic dim (a model that serves every batch) takes the file's extent.
    if (tensor.dtype() != inputs[index].type.dtype || !shapeFits(tensor.shape(), inputs[index].type.shape))
      fail("input '{}' expects {}, but {} holds {}", binding.name, inputs[index].type.toString(), binding.path,
           tensor.type().toString());
    bound[index] = tensor;
  }
  // Random inputs take their symbolic dims' extents from --dim, else from the inputs given.
  DimBindings extents = options.dims;
  for (size_t i = 0; i < inputs.size(); ++i)
    for (size_t d = 0; bound[i].defined() && d < inputs[i].type.shape.size(); ++d)
      if (std::optional<std::string> symbol = dimSymbolName(inputs[i].type.shape[d]))
        extents.emplace(*symbol, bound[i].shape()[d]);
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (bound[i].defined())
      continue;
    TensorType type{inputs[i].type.dtype,
                    evaluateShape(inputs[i].type.shape, extents,
                                  fmt::format("input '{}' (give it with --input, or its dims with --dim)", names[i]))};
    checkFitsInMemory(type, fmt::format("input '{}'", names[i]));
    bound[i] = randomTensor(type, options.seed + i);
  }
  return bound;
}

std::string inputTypesOf(const std::vector<runtime::TensorSpec> &specs, const std::vector<Tensor> &inputs) {
  std::string text;
  for (size_t i = 0; i < specs.size() && i < inputs.size(); ++i)
    text += fmt::format("{}{} {}", i ? ", " : "", specs[i].name, inputs[i].type().toString());
  return text;
}

OutputRequests::OutputRequests(std::vector<std::string> names, const RunOptions &options, const std::string &whose)
    : names_(std::move(names)), whose_(whose) {
  for (const Binding &binding : options.outputs)
    find(binding.name, "--output");
  for (const Binding &binding : options.checks)
    expected_.emplace_back(find(binding.name, "--check"), readTensorFile(binding.path));
}

size_t OutputRequests::find(const std::string &name, const std::string &flag) const {
  auto it = std::find(names_.begin(), names_.end(), name);
  if (it == names_.end())
    fail("{}: unknown output '{}'; {} outputs are: {}", flag, name, whose_, joinNames(names_));
  return static_cast<size_t>(it - names_.begin());
}

int OutputRequests::report(const std::vector<Tensor> &outputs, const RunOptions &options) const {
  for (size_t i = 0; i < outputs.size() && i < names_.size(); ++i)
    std::cout << names_[i] << ": " << tensorSummary(outputs[i]) << "\n";
  for (const Binding &binding : options.outputs)
    runtime::writeNpy(binding.path, outputs.at(find(binding.name, "--output")));
  int status = 0;
  double rtol = options.rtolOr(1e-4), atol = options.atolOr(1e-5);
  for (const auto &[index, want] : expected_) {
    Comparison comparison = compareTensors(outputs.at(index), want, rtol, atol);
    if (comparison.ok) {
      std::cout << fmt::format("check {}: ok (max abs error {:.3g}, max rel error {:.3g})\n", names_[index],
                               comparison.maxAbsError, comparison.maxRelError);
    } else {
      std::cout << std::flush;
      std::cerr << fmt::format("kiln-run: check {} failed: {}\n", names_[index], comparison.message);
      status = 1;
    }
  }
  return status;
}

int64_t weightBytesOf(const runtime::Executable &executable) {
  int64_t bytes = 0;
  for (const runtime::TensorSpec &weight : executable.weights())
    bytes += static_cast<int64_t>(weight.type.byteSize());
  return bytes;
}

namespace {

/// --profile: the trace file and the table of the kernels that took longest.
void writeProfile(const runtime::Executable &executable, const std::string &path, int runs) {
  const runtime::Profiler &profiler = executable.profiler();
  profiler.writeChromeTrace(path);
  std::cout << fmt::format("profile: {} launches over {} run{}, trace written to {}\n", profiler.events().size(),
                           runs, runs == 1 ? "" : "s", path);
  std::cout << profiler.formatTopKernels(10);
}

double median(std::vector<double> times) {
  std::sort(times.begin(), times.end());
  size_t n = times.size();
  return n % 2 ? times[n / 2] : (times[n / 2 - 1] + times[n / 2]) / 2;
}

} // namespace

int runAndReport(const RunTarget &target, const OutputRequests &requests, const RunOptions &options) {
  runtime::Executable *executable = target.executable;
  bool profile = !options.profile.empty();
  if (profile && !executable)
    std::cerr << "kiln-run: note: nothing ran compiled, so there is no profile to write\n";
  profile = profile && executable;
  if (profile) { // profile the one run, or (with --bench) only the timed ones
    executable->profiler().clear();
    executable->setProfiling(options.bench == 0);
  }
  std::vector<Tensor> outputs;
  target.run(outputs);
  int status = requests.report(outputs, options);
  if (options.bench == 0) {
    if (profile)
      writeProfile(*executable, options.profile, 1);
    return status;
  }

  if (profile)
    executable->setProfiling(true);
  std::vector<double> times;
  for (int i = 0; i < options.bench; ++i) {
    auto start = std::chrono::steady_clock::now();
    target.run(outputs);
    times.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  if (profile) {
    executable->setProfiling(false);
    writeProfile(*executable, options.profile, options.bench);
  }
  if (!target.inputTypes.empty())
    std::cout << fmt::format("inputs {}\n", target.inputTypes);
  if (!target.batchTiling.empty())
    std::cout << fmt::format("batch_tiling {}\n", target.batchTiling);
  std::cout << fmt::format("bench: {} runs on the {}\n", times.size(), target.description);
  std::cout << fmt::format("min_ms {:.4f}\n", *std::min_element(times.begin(), times.end()));
  std::cout << fmt::format("arena_bytes {}\n", target.arenaBytes);
  std::cout << fmt::format("weight_bytes {}\n", target.weightBytes);
  std::cout << fmt::format("peak_rss_bytes {}\n", peakResidentBytes());
  if (target.loadMs >= 0)
    std::cout << fmt::format("load_ms {:.1f}\n", target.loadMs);
  if (target.compileMs >= 0)
    std::cout << fmt::format("compile_ms {:.1f}\n", target.compileMs);
  std::cout << fmt::format("median_ms {:.4f}\n", median(times));
  return status;
}

} // namespace kiln::tools
