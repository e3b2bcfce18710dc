#pragma once
// kiln-quantize's calibration: runs the fp32 model, compiled by kiln with the tensors to
// calibrate added as graph outputs, over the calibration inputs and reduces what those tensors
// hold to one range each.
//   - min-max: the smallest and largest value seen (ORT's MinMax without moving average);
//   - percentile: a second pass histograms |x| in `bins` bins over [0, max|x|] and clips the
//     range at the `percentile`-th percentile of |x| (ORT's Percentile: 2048 bins, 99.999),
//     so that rare outliers do not widen the quantisation step of every other value;
//   - entropy: the same histogram, clipped where quantising it to `entropyLevels` levels
//     diverges least from it (KL divergence; tools/quantize/QuantizeHistogram.h).
#include <map>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

#include "core/Tensor.h"
#include "tools/quantize/QuantizeModel.h"

namespace kiln::tools {

enum class CalibrationMethod { MinMax, Percentile, Entropy };

struct CalibrationOptions {
  CalibrationMethod method = CalibrationMethod::MinMax;
  double percentile = 99.999;
  int bins = 2048;
  int entropyLevels = 128;
};

/// The inputs of one run of the model, by graph input name.
using CalibrationRun = std::map<std::string, Tensor>;

/// Turns the calibration files, by graph input name, into runs: file k of every input makes
/// run k, and a file whose leading dim is a multiple n > 1 of the input's static leading dim
/// (a batch of samples for a model of batch 1) is split into n runs. Throws kiln::Error naming
/// the input for a name the model lacks, an input with no file, or inputs whose files make
/// different numbers of runs.
std::vector<CalibrationRun> calibrationRuns(const onnx::ModelProto &model,
                                            const std::map<std::string, std::vector<Tensor>> &files);

/// The fp32 range of every tensor in `tensors` over all `runs` (a graph input's range is read
/// from the runs directly). The model is compiled once per distinct set of input shapes.
std::map<std::string, ActivationRange> calibrate(const onnx::ModelProto &model, const std::string &modelDir,
                                                 const std::vector<std::string> &tensors,
                                                 const std::vector<CalibrationRun> &runs,
                                                 const CalibrationOptions &options);

} // namespace kiln::tools
