// Calibration of the activation ranges kiln-quantize needs (see QuantizeCalibration.h).
#include "tools/quantize/QuantizeCalibration.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>

#include "codegen/CompileModel.h"
#include "core/Error.h"
#include "frontend/onnx/OnnxImporter.h"
#include "frontend/onnx/OnnxLoad.h"
#include "tools/quantize/QuantizeHistogram.h"

namespace kiln::tools {

namespace {

std::set<std::string> initializerNames(const onnx::GraphProto &graph) {
  std::set<std::string> names;
  for (const auto &init : graph.initializer())
    names.insert(init.name());
  return names;
}

/// The graph inputs a caller binds (initializers listed as inputs excluded).
std::vector<const onnx::ValueInfoProto *> boundInputs(const onnx::GraphProto &graph) {
  std::set<std::string> inits = initializerNames(graph);
  std::vector<const onnx::ValueInfoProto *> inputs;
  for (const auto &input : graph.input())
    if (!inits.count(input.name()))
      inputs.push_back(&input);
  return inputs;
}

/// `tensor` cut along its leading dim into pieces of `extent`.
std::vector<Tensor> splitLeading(const Tensor &tensor, int64_t extent) {
  Shape shape = tensor.shape();
  int64_t pieces = shape[0] / extent;
  shape[0] = extent;
  std::vector<Tensor> out;
  size_t bytes = tensor.byteSize() / pieces;
  for (int64_t i = 0; i < pieces; ++i) {
    Tensor piece(tensor.dtype(), shape);
    std::memcpy(piece.data(), static_cast<const char *>(tensor.data()) + i * bytes, bytes);
    out.push_back(piece);
  }
  return out;
}

/// Every calibrated tensor's values in one run, by name.
using RunValues = std::map<std::string, Tensor>;

/// Compiles the model with `tensors` as extra outputs (once per set of input shapes, kept in
/// `compiled` for the next pass) and calls `visit` with each run's values of those tensors.
template <typename Visit>
void forEachRun(const onnx::ModelProto &model, const std::string &modelDir, const std::vector<std::string> &tensors,
                const std::vector<CalibrationRun> &runs, std::map<std::string, runtime::Executable> &compiled,
                Visit visit) {
  onnx::ModelProto probed = model;
  std::set<std::string> outputs;
  for (const auto &output : probed.graph().output())
    outputs.insert(output.name());
  std::set<std::string> inputs;
  for (const auto *input : boundInputs(probed.graph()))
    inputs.insert(input->name());
  // A graph output must declare its type, rank included: ONNX's shape inference gives it.
  onnx::ModelProto inferred = model;
  frontend::runOnnxShapeInference(inferred);
  std::map<std::string, const onnx::ValueInfoProto *> valueInfo;
  for (const auto &info : inferred.graph().value_info())
    valueInfo[info.name()] = &info;
  for (const auto &name : tensors) {
    if (outputs.count(name) || inputs.count(name))
      continue;
    auto info = valueInfo.find(name);
    if (info == valueInfo.end() || !info->second->type().tensor_type().has_shape())
      fail("calibration: ONNX shape inference gives no shape for tensor '{}'", name);
    *probed.mutable_graph()->add_output() = *info->second;
  }
  std::string bytes = probed.SerializeAsString();

  for (const auto &run : runs) {
    std::string key;
    frontend::OnnxImportOptions importOptions;
    importOptions.baseDir = modelDir;
    for (const auto &[name, tensor] : run) {
      key += name + shapeToString(tensor.shape()) + ";";
      importOptions.inputShapes[name] = tensor.shape();
    }
    auto it = compiled.find(key);
    if (it == compiled.end())
      it = compiled.emplace(key, codegen::compile(frontend::importOnnxBytes(bytes, importOptions, "the model"))).first;
    std::map<std::string, Tensor> results = it->second.run(run);
    RunValues values;
    for (const auto &name : tensors) {
      auto found = inputs.count(name) ? run.find(name) : results.find(name);
      if (found == (inputs.count(name) ? run.end() : results.end()))
        fail("calibration: tensor '{}' is not among the compiled model's outputs", name);
      if (found->second.dtype() != DType::F32)
        fail("calibration: tensor '{}' is {}, not f32", name, found->second.type().toString());
      values[name] = found->second;
    }
    visit(values);
  }
}

} // namespace

std::vector<CalibrationRun> calibrationRuns(const onnx::ModelProto &model,
                                            const std::map<std::string, std::vector<Tensor>> &files) {
  std::vector<const onnx::ValueInfoProto *> inputs = boundInputs(model.graph());
  std::vector<std::string> inputNames;
  for (const auto *input : inputs)
    inputNames.push_back(input->name());
  for (const auto &[name, tensors] : files)
    if (std::find(inputNames.begin(), inputNames.end(), name) == inputNames.end()) {
      std::string known;
      for (const auto &n : inputNames)
        known += (known.empty() ? "" : ", ") + n;
      fail("--calibrate names '{}', which is not an input of the model (its inputs: {})", name, known);
    }
  std::vector<CalibrationRun> runs;
  for (const auto *input : inputs) {
    auto files_ = files.find(input->name());
    if (files_ == files.end())
      fail("input '{}' has no --calibrate file", input->name());
    const auto &dims = input->type().tensor_type().shape().dim();
    std::vector<Tensor> pieces;
    for (const Tensor &tensor : files_->second) {
      bool split = tensor.rank() == dims.size() && tensor.rank() > 0 && dims[0].has_dim_value() &&
                   dims[0].dim_value() > 0 && tensor.shape()[0] > dims[0].dim_value() &&
                   tensor.shape()[0] % dims[0].dim_value() == 0;
      for (Tensor &piece : split ? splitLeading(tensor, dims[0].dim_value()) : std::vector<Tensor>{tensor})
        pieces.push_back(piece);
    }
    if (runs.empty())
      runs.resize(pieces.size());
    if (pieces.size() != runs.size())
      fail("input '{}' has calibration data for {} runs, the first input for {}", input->name(), pieces.size(),
           runs.size());
    for (size_t i = 0; i < pieces.size(); ++i)
      runs[i][input->name()] = pieces[i];
  }
  return runs;
}

std::map<std::string, ActivationRange> calibrate(const onnx::ModelProto &model, const std::string &modelDir,
                                                 const std::vector<std::string> &tensors,
                                                 const std::vector<CalibrationRun> &runs,
                                                 const CalibrationOptions &options) {
  std::map<std::string, ActivationRange> ranges;
  for (const auto &name : tensors)
    ranges[name] = {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity()};
  std::map<std::string, runtime::Executable> compiled;
  forEachRun(model, modelDir, tensors, runs, compiled, [&](const RunValues &values) {
    for (const auto &[name, tensor] : values) {
      const float *x = tensor.dataAs<float>();
      auto [lo, hi] = std::minmax_element(x, x + tensor.numElements());
      if (tensor.numElements() == 0)
        continue;
      if (!std::isfinite(*lo) || !std::isfinite(*hi))
        fail("calibration: tensor '{}' holds a non-finite value", name);
      ranges[name].min = std::min(ranges[name].min, *lo);
      ranges[name].max = std::max(ranges[name].max, *hi);
    }
  });
  for (auto &[name, range] : ranges)
    if (range.min > range.max)
      range = {0, 0};
  if (options.method == CalibrationMethod::MinMax)
    return ranges;

  std::map<std::string, std::vector<double>> histograms;
  for (const auto &name : tensors)
    histograms[name].assign(options.bins, 0);
  forEachRun(model, modelDir, tensors, runs, compiled, [&](const RunValues &values) {
    for (const auto &[name, tensor] : values) {
      float bound = std::max(-ranges[name].min, ranges[name].max);
      if (bound <= 0)
        continue;
      std::vector<double> &histogram = histograms[name];
      const float *x = tensor.dataAs<float>();
      for (int64_t i = 0; i < tensor.numElements(); ++i) {
        auto bin = static_cast<int64_t>(std::fabs(x[i]) / bound * options.bins);
        histogram[std::min<int64_t>(bin, options.bins - 1)] += 1;
      }
    }
  });
  for (auto &[name, range] : ranges) {
    float bound = std::max(-range.min, range.max);
    const std::vector<double> &histogram = histograms[name];
    if (bound <= 0)
      continue;
    int clipBins = options.method == CalibrationMethod::Percentile ? percentileClipBins(histogram, options.percentile)
                                                                   : entropyClipBins(histogram, options.entropyLevels);
    float clip = bound * float(clipBins) / float(options.bins);
    range.min = std::max(range.min, -clip);
    range.max = std::min(range.max, clip);
  }
  return ranges;
}

} // namespace kiln::tools
