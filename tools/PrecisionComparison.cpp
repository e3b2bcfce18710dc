#include "tools/PrecisionComparison.h"

#include <cmath>
#include <iostream>
#include <limits>

#include "codegen/CompileModel.h"
#include "core/Error.h"
#include "runtime/ThreadPool.h"

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

int comparePrecision(std::unique_ptr<ir::Graph> graph, const RunOptions &options, const std::vector<Tensor> &inputs,
                     const ir::ParamValues &params, const std::vector<std::string> &names) {
  codegen::CompileOptions compileOptions;
  compileOptions.params = params;
  if (options.threads > 0)
    compileOptions.runtime.pool = std::make_shared<runtime::ThreadPool>(options.threads);
  // The f32 model shares the graph's weights; the low-precision one takes the graph.
  runtime::Executable reference = codegen::compile(*graph, compileOptions);
  compileOptions.precision = options.precision;
  runtime::Executable low = codegen::compile(std::move(graph), compileOptions);
  const std::vector<Tensor> want = reference.run(inputs), got = low.run(inputs);
  std::cout << fmt::format("precision {} against f32, one run on the same inputs:\n",
                           codegen::contractionPrecisionName(options.precision));
  for (size_t i = 0; i < want.size(); ++i) {
    if (!isFloat(want[i].dtype())) {
      const bool same = want[i].toDoubles() == got[i].toDoubles();
      std::cout << fmt::format("  {} {}: {}\n", names.at(i), want[i].type().toString(),
                               same ? "equal (not a float output)" : "DIFFERENT (not a float output)");
      continue;
    }
    std::cout << fmt::format("  {} {}: {}\n", names.at(i), want[i].type().toString(),
                             describePrecisionError(precisionError(want[i], got[i])));
  }
  return 0;
}

} // namespace kiln::tools
