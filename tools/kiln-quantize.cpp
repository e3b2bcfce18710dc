// kiln-quantize: turns an fp32 ONNX model into a static QDQ model (s8 per-channel weights, u8 or
// s8 activations) calibrated on the inputs given, which kiln and ONNX Runtime both run
// (tools/quantize/QuantizeModel.h says what it writes, tools/quantize/QuantizeCalibration.h how
// it calibrates).
// Every error is one line "kiln-quantize: MESSAGE" and exit status 1.
#include <fstream>
#include <iostream>

#include "core/Error.h"
#include "frontend/onnx/OnnxLoad.h"
#include "frontend/onnx/OnnxTensor.h"
#include "tools/ToolCommon.h"
#include "tools/quantize/QuantizeCalibration.h"
#include "tools/quantize/QuantizeModel.h"

using namespace kiln;
using namespace kiln::tools;

namespace {

constexpr const char *kUsage = R"(usage: kiln-quantize MODEL.onnx --calibrate NAME=FILE.npy ... -o MODEL.int8.onnx [options]

Writes MODEL.int8.onnx, MODEL.onnx as a static QDQ model: every Conv, MatMul and Gemm whose
weight is a float initializer reads its weight through DequantizeLinear from s8 values with
per-channel symmetric scales (max|w|/127), and its activation input through a
QuantizeLinear -> DequantizeLinear pair whose scale and zero point come from the ranges the
fp32 model (compiled by kiln) shows on the calibration inputs. An Add reading such an
activation (a residual connection) reads it through the same DequantizeLinear, so that the
tensor lives as bytes only. Biases and every other op stay float; the ops left in float are
listed on stdout. The model needs opset 13 or later.

options:
  --calibrate NAME=FILE   calibration data for graph input NAME (.npy or ONNX .pb); repeat it
                          for more runs. A file whose leading dim is a multiple n > 1 of the
                          input's static leading dim (32 images for a batch-1 model) is n runs
  -o, --output FILE       the quantized model to write
  --activations u8|s8     u8: asymmetric, zero point from the range (default); s8: symmetric,
                          zero point 0
  --method minmax|percentile|entropy
                          minmax: the full range seen (default); percentile: the range clipped
                          at the --percentile-th percentile of |x| (2048-bin histogram); entropy:
                          clipped where 128 levels lose least (KL divergence, TensorRT's method)
  --percentile P          default 99.999
  --float-residuals       Adds read their inputs in float, not through the DequantizeLinear
                          of a quantized activation: a residual stream then keeps f32 where its
                          rounding costs more than its bytes (BERT-base: SNR 41.8 -> 46.7 dB
                          against f32, at the same speed in kiln; ResNet-50 runs 5-7% slower)
  --help                  print this help
)";

struct QuantizeCommand {
  std::string modelPath, outputPath;
  std::map<std::string, std::vector<std::string>> calibrationFiles;
  ActivationType activations = ActivationType::U8;
  CalibrationOptions calibration;
  bool floatResiduals = false;
  bool help = false;
};

QuantizeCommand parseCommand(int argc, char **argv) {
  QuantizeCommand command;
  FlagParser parser;
  parser.addSwitch("--help", [&] { command.help = true; });
  parser.addSwitch("-h", [&] { command.help = true; });
  parser.addSwitch("--float-residuals", [&] { command.floatResiduals = true; });
  parser.addOption("--calibrate", [&](const std::string &flag, const std::string &value) {
    Binding binding = parseBinding(flag, value);
    command.calibrationFiles[binding.name].push_back(binding.path);
  });
  auto output = [&](const std::string &flag, const std::string &value) { command.outputPath = nonEmpty(flag, value); };
  parser.addOption("-o", output);
  parser.addOption("--output", output);
  parser.addOption("--activations", [&](const std::string &flag, const std::string &value) {
    if (value != "u8" && value != "s8")
      fail("{} takes u8 or s8, not '{}'", flag, value);
    command.activations = value == "u8" ? ActivationType::U8 : ActivationType::S8;
  });
  parser.addOption("--method", [&](const std::string &flag, const std::string &value) {
    static const std::map<std::string, CalibrationMethod> methods = {{"minmax", CalibrationMethod::MinMax},
                                                                     {"percentile", CalibrationMethod::Percentile},
                                                                     {"entropy", CalibrationMethod::Entropy}};
    auto method = methods.find(value);
    if (method == methods.end())
      fail("{} takes minmax, percentile or entropy, not '{}'", flag, value);
    command.calibration.method = method->second;
  });
  parser.addOption("--percentile", [&](const std::string &flag, const std::string &value) {
    double p = parseTolerance(flag, value);
    if (p <= 0 || p > 100)
      fail("{} takes a percentile in (0, 100], not '{}'", flag, value);
    command.calibration.percentile = p;
  });
  std::vector<std::string> paths = parser.parse(argc, argv);
  if (command.help)
    return command;
  if (paths.size() != 1)
    fail("give one model file (usage: kiln-quantize MODEL.onnx --calibrate NAME=FILE.npy -o OUT.onnx; see --help)");
  command.modelPath = paths[0];
  if (command.outputPath.empty())
    fail("no output file given (-o MODEL.int8.onnx)");
  if (command.calibrationFiles.empty())
    fail("no calibration data given (--calibrate NAME=FILE.npy)");
  return command;
}

std::string floatOpList(const std::map<std::string, int> &floatOps) {
  std::string list;
  for (const auto &[op, count] : floatOps)
    list += (list.empty() ? "" : ", ") + op + " x" + std::to_string(count);
  return list.empty() ? "(none)" : list;
}

int quantizeCommand(int argc, char **argv) {
  QuantizeCommand command = parseCommand(argc, argv);
  if (command.help) {
    std::cout << kUsage;
    return 0;
  }
  onnx::ModelProto model;
  std::string modelDir = frontend::modelDirOf(command.modelPath);
  try {
    frontend::parseOnnxModel(frontend::readFileLimited(command.modelPath, (uint64_t{1} << 31) - 1, "ONNX model"),
                             model);
  } catch (const Error &e) {
    fail("{}: {}", command.modelPath, oneLine(e.what()));
  }
  std::vector<std::string> activations = activationsToCalibrate(model);

  std::map<std::string, std::vector<Tensor>> files;
  for (const auto &[name, paths] : command.calibrationFiles)
    for (const auto &path : paths) {
      try {
        files[name].push_back(readTensorFile(path));
      } catch (const Error &e) {
        fail("{}: {}", path, oneLine(e.what()));
      }
    }
  std::vector<CalibrationRun> runs = calibrationRuns(model, files);
  std::map<std::string, ActivationRange> ranges = calibrate(model, modelDir, activations, runs, command.calibration);
  QuantizeReport report = quantizeModel(model, modelDir, ranges, command.activations, !command.floatResiduals);

  std::ofstream out(command.outputPath, std::ios::binary);
  if (!out || !model.SerializeToOstream(&out) || !out.flush())
    fail("cannot write '{}'", command.outputPath);
  std::cout << "quantized " << report.quantizedNodes << " nodes (" << activations.size()
            << " activation tensors calibrated on " << runs.size() << " runs), wrote " << command.outputPath << "\n";
  if (report.dequantizedResiduals > 0)
    std::cout << "Add inputs reading a quantized activation: " << report.dequantizedResiduals << "\n";
  std::cout << "left in float: " << floatOpList(report.floatOps) << "\n";
  return 0;
}

} // namespace

int main(int argc, char **argv) { return runTool("kiln-quantize", [&] { return quantizeCommand(argc, argv); }); }
