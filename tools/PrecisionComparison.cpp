#include "tools/PrecisionComparison.h"

#include <algorithm>
#include <cmath>
#include <iostream>
#include <limits>

#include <map>

#include "codegen/CompileModel.h"
#include "core/Error.h"
#include "runtime/ThreadPool.h"
#include "tools/GraphLoading.h"

namespace kiln::tools {

PrecisionError precisionError(const Tensor &reference, const Tensor &low) {
  if (reference.shape() != low.shape())
    fail("compare precision: outputs of different shapes ({} and {})", reference.type().toString(), low.type().toString());
  if (!isFloat(reference.dtype()) || !isFloat(low.dtype()))
    fail("compare precision: {} is not a float output", reference.type().toString());
  const std::vector<double> want = reference.toDoubles(), got = low.toDoubles();
  PrecisionError error;
  double sumError = 0, sumMagnitude = 0, signal = 0, noise = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double difference = std::fabs(got[i] - want[i]);
    error.maxError = std::max(error.maxError, difference);
    error.maxMagnitude = std::max(error.maxMagnitude, std::fabs(want[i]));
    sumError += difference;
    sumMagnitude += std::fabs(want[i]);
    signal += want[i] * want[i];
    noise += difference * difference;
  }
  error.meanRelError = sumMagnitude > 0 ? sumError / sumMagnitude : (sumError > 0 ? INFINITY : 0.0);
  error.snrDb = noise > 0 ? 10 * std::log10(signal / noise) : std::numeric_limits<double>::infinity();
  const Shape &shape = reference.shape();
  if (shape.size() >= 2 && shape.back() >= 2) {
    const int64_t width = shape.back();
    error.rows = reference.numElements() / width;
    for (int64_t row = 0; row < error.rows; ++row) {
      auto argmax = [&](const std::vector<double> &values) {
        int64_t best = 0;
        for (int64_t j = 1; j < width; ++j)
          if (values[row * width + j] > values[row * width + best])
            best = j;
        return best;
      };
      error.agreeingRows += argmax(want) == argmax(got);
    }
  }
  return error;
}

std::string describePrecisionError(const PrecisionError &e) {
  std::string text =
      fmt::format("max error {:.2e} ({:.2e} of max |f32| {:.3g}), mean relative error {:.2e}, SNR {:.1f} dB",
                  e.maxError, e.maxMagnitude > 0 ? e.maxError / e.maxMagnitude : 0.0, e.maxMagnitude, e.meanRelError,
                  e.snrDb);
  if (e.rows > 0)
    text += fmt::format(", top-1 agreement {}/{} rows ({:.1f}%)", e.agreeingRows, e.rows,
                        100.0 * static_cast<double>(e.agreeingRows) / static_cast<double>(e.rows));
  return text;
}

namespace {

/// The ops whose outputs --per-layer compares: the contractions, where bf16 multiplies.
bool isLayer(const ir::Node &node) {
  switch (node.op()) {
  case ir::OpKind::MatMul:
  case ir::OpKind::Linear:
  case ir::OpKind::Conv:
  case ir::OpKind::ConvTranspose:
    return isFloat(node.output()->type().dtype);
  default:
    return false;
  }
}

/// The value a layer's output is known by: its own, or, when unnamed and read only by an add
/// (an imported Conv or Gemm's bias), that add's, which carries the ONNX node's output name.
ir::Value *layerValue(ir::Node &node) {
  ir::Value *value = node.output();
  if (value->name().empty() && value->uses().size() == 1) {
    ir::Node *user = value->uses().front().user;
    if (user->op() == ir::OpKind::Add && user->output()->type() == value->type() && !user->output()->name().empty())
      return user->output();
  }
  return value;
}

/// The graph's layers (isLayer), in graph order, with their labels: "conv %name" ("conv #3"
/// for an unnamed value).
std::vector<std::pair<ir::Value *, std::string>> layersOf(ir::Graph &graph) {
  std::vector<std::pair<ir::Value *, std::string>> layers;
  for (ir::Node *node : graph.nodes()) {
    if (!isLayer(*node))
      continue;
    ir::Value *value = layerValue(*node);
    const std::string &name = value->name();
    layers.emplace_back(value, fmt::format("{} {}", node->opName(),
                                           name.empty() ? fmt::format("#{}", layers.size()) : "%" + name));
  }
  return layers;
}

/// Each of `values` an output of `graph` too, after its own outputs.
void exposeValues(ir::Graph &graph, const std::vector<ir::Value *> &values) {
  for (size_t i = 0; i < values.size(); ++i)
    graph.addOutput(values[i], fmt::format("kiln_layer_{}", i));
}

/// One line per output of `got` against `want` (the first names.size()), then, for the layers
/// after them, one line each, the layer of the lowest SNR and the steepest SNR drop.
void reportErrors(const std::vector<Tensor> &want, const std::vector<Tensor> &got, const std::vector<std::string> &names,
                  const std::vector<std::string> &layers) {
  for (size_t i = 0; i < names.size(); ++i) {
    if (!isFloat(want[i].dtype())) {
      const bool same = want[i].toDoubles() == got[i].toDoubles();
      std::cout << fmt::format("  {} {}: {}\n", names.at(i), want[i].type().toString(),
                               same ? "equal (not a float output)" : "DIFFERENT (not a float output)");
      continue;
    }
    std::cout << fmt::format("  {} {}: {}\n", names.at(i), want[i].type().toString(),
                             describePrecisionError(precisionError(want[i], got[i])));
  }
  if (layers.empty())
    return;
  // Each layer's output as it comes out of the layer: its error is that of every layer
  // before it, so the layer where the SNR falls most is the one that loses the most.
  std::cout << fmt::format("per layer ({} contractions, in graph order):\n", layers.size());
  std::vector<double> snr;
  for (size_t l = 0; l < layers.size(); ++l) {
    const size_t at = names.size() + l;
    PrecisionError error = precisionError(want[at], got[at]);
    error.rows = 0; // a layer's last axis (a feature map's width) has no classes to agree on
    std::cout << fmt::format("  {} {} {}: {}\n", l, layers[l], want[at].type().toString(), describePrecisionError(error));
    snr.push_back(error.snrDb);
  }
  const size_t lowest = static_cast<size_t>(std::min_element(snr.begin(), snr.end()) - snr.begin());
  std::cout << fmt::format("lowest SNR: layer {} {} ({:.1f} dB)\n", lowest, layers[lowest], snr[lowest]);
  size_t steepest = 0;
  for (size_t l = 1; l < snr.size(); ++l)
    if (steepest == 0 || snr[l - 1] - snr[l] > snr[steepest - 1] - snr[steepest])
      steepest = l;
  if (steepest > 0 && std::isfinite(snr[steepest - 1] - snr[steepest]) && snr[steepest - 1] > snr[steepest])
    std::cout << fmt::format("largest SNR drop: layer {} {} ({:.1f} dB below layer {})\n", steepest, layers[steepest],
                             snr[steepest - 1] - snr[steepest], steepest - 1);
}

codegen::CompileOptions compileOptionsFor(const RunOptions &options, const ir::ParamValues &params) {
  codegen::CompileOptions compileOptions;
  compileOptions.params = params;
  if (options.threads > 0)
    compileOptions.runtime.pool = std::make_shared<runtime::ThreadPool>(options.threads);
  return compileOptions;
}

} // namespace

int comparePrecision(std::unique_ptr<ir::Graph> graph, const RunOptions &options, const std::vector<Tensor> &inputs,
                     const ir::ParamValues &params, const std::vector<std::string> &names) {
  std::vector<std::string> labels;
  if (options.perLayer) {
    std::vector<ir::Value *> values;
    for (auto &[value, label] : layersOf(*graph))
      values.push_back(value), labels.push_back(label);
    exposeValues(*graph, values);
  }
  codegen::CompileOptions compileOptions = compileOptionsFor(options, params);
  // The f32 model shares the graph's weights; the low-precision one takes the graph.
  runtime::Executable reference = codegen::compile(*graph, compileOptions);
  compileOptions.precision = options.precision;
  runtime::Executable low = codegen::compile(std::move(graph), compileOptions);
  const std::vector<Tensor> want = reference.run(inputs), got = low.run(inputs);
  std::cout << fmt::format("precision {} against f32, one run on the same inputs:\n",
                           codegen::contractionPrecisionName(options.precision));
  reportErrors(want, got, names, labels);
  return 0;
}

int compareQuantized(std::unique_ptr<ir::Graph> graph, const RunOptions &options, const std::vector<Tensor> &inputs,
                     const ir::ParamValues &params, const std::vector<std::string> &names) {
  std::map<std::string, Tensor> given;
  std::unique_ptr<ir::Graph> quantized =
      loadGraph({options.quantizedModel, options.inputs, {}, options.dims, true}, given);
  // The same inputs must fit both models, and the outputs must correspond.
  const std::vector<runtime::TensorSpec> specs = inputSpecs(*graph), quantizedSpecs = inputSpecs(*quantized);
  for (size_t i = 0; i < std::max(specs.size(), quantizedSpecs.size()); ++i)
    if (i >= specs.size() || i >= quantizedSpecs.size() || specs[i].name != quantizedSpecs[i].name ||
        specs[i].type != quantizedSpecs[i].type)
      fail("--compare-quantized: '{}' has other inputs than the model: {} against {}", options.quantizedModel,
           i < quantizedSpecs.size() ? quantizedSpecs[i].name + " " + quantizedSpecs[i].type.toString() : "none",
           i < specs.size() ? specs[i].name + " " + specs[i].type.toString() : "none");
  const std::vector<std::string> quantizedNames = outputNames(*quantized);
  if (quantizedNames.size() != names.size())
    fail("--compare-quantized: '{}' has {} outputs, the model {}", options.quantizedModel, quantizedNames.size(),
         names.size());
  // Layers: the model's contractions whose value the quantized model names too (kiln-quantize
  // keeps the float model's value names).
  std::vector<std::string> labels;
  if (options.perLayer) {
    std::map<std::string, ir::Value *> named;
    for (ir::Node *node : quantized->nodes())
      for (ir::Value *output : node->outputs())
        if (!output->name().empty())
          named.emplace(output->name(), output);
    std::vector<ir::Value *> values, quantizedValues;
    for (auto &[value, label] : layersOf(*graph)) {
      auto it = named.find(value->name());
      if (value->name().empty() || it == named.end() || it->second->type() != value->type())
        continue;
      values.push_back(value), quantizedValues.push_back(it->second), labels.push_back(label);
    }
    exposeValues(*graph, values);
    exposeValues(*quantized, quantizedValues);
  }
  const ir::ParamValues quantizedParams = bindParams(*quantized, options.params, options.seed, true);
  runtime::Executable reference = codegen::compile(std::move(graph), compileOptionsFor(options, params));
  runtime::Executable low = codegen::compile(std::move(quantized), compileOptionsFor(options, quantizedParams));
  const std::vector<Tensor> want = reference.run(inputs), got = low.run(inputs);
  std::cout << fmt::format("'{}' against the model (f32), one run on the same inputs:\n", options.quantizedModel);
  reportErrors(want, got, names, labels);
  return 0;
}

} // namespace kiln::tools
