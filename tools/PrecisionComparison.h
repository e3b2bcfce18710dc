#pragma once
// kiln-run --compare-precision: a graph compiled in a lower precision (bf16 contractions)
// against the same graph in f32, on the same inputs, output by output; --compare-quantized: a
// second model, the graph's quantized form (a QDQ model on int8 kernels), against the graph.
#include <memory>
#include <string>
#include <vector>

#include "core/Tensor.h"
#include "ir/Evaluator.h"
#include "ir/Graph.h"
#include "tools/RunOptions.h"

namespace kiln::tools {

/// How far `low` lies from `reference` (same shape, floats).
struct PrecisionError {
  double maxError = 0;      // largest |low - reference|
  double maxMagnitude = 0;  // largest |reference|
  double meanRelError = 0;  // mean |low - reference| / mean |reference| (0 when both are 0)
  double snrDb = 0;         // 10 log10(sum reference^2 / sum (low - reference)^2); inf when equal
  /// Rows of the last axis (outputs of two dims or more whose last has two elements or more),
  /// and how many of them have their largest element at the same index: top-1 agreement.
  int64_t rows = 0, agreeingRows = 0;
};

/// kiln::Error when the shapes differ or the outputs are not floats.
PrecisionError precisionError(const Tensor &reference, const Tensor &low);

/// "max error 2.1e-03 (6.0e-04 of max |f32| 3.52), mean relative error 8.1e-04, SNR 55.2 dB,
/// top-1 agreement 7/8 rows (87.5%)".
std::string describePrecisionError(const PrecisionError &error);

/// Compiles `graph` in f32 and in options.precision, runs both on `inputs`, and prints one
/// line per output; with options.perLayer, one more per contraction (matmul, linear, conv,
/// conv_transpose) whose output it compares too, the layer of the lowest SNR and the one whose
/// SNR falls most below the layer's before it. Returns the exit status (0).
int comparePrecision(std::unique_ptr<ir::Graph> graph, const RunOptions &options, const std::vector<Tensor> &inputs,
                     const ir::ParamValues &params, const std::vector<std::string> &names);

/// Loads options.quantizedModel (whose inputs must be the graph's, by name and type, and whose
/// outputs correspond to the graph's in order), compiles both, runs both on `inputs` and prints
/// the same lines as comparePrecision; with options.perLayer, for the graph's contractions
/// whose value the quantized model names too. Returns the exit status (0).
int compareQuantized(std::unique_ptr<ir::Graph> graph, const RunOptions &options, const std::vector<Tensor> &inputs,
                     const ir::ParamValues &params, const std::vector<std::string> &names);

} // namespace kiln::tools
