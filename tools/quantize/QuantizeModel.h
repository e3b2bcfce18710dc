#pragma once
// kiln-quantize's rewrite of an fp32 ONNX model into a static QDQ model, the standard form that
// kiln and ONNX Runtime both run: every Conv, MatMul and Gemm whose weight is a float
// initializer gets
//   - its activation input (input 0) through QuantizeLinear -> DequantizeLinear with one
//     per-tensor scale and zero point from the calibrated range (u8 asymmetric, or s8
//     symmetric with zero point 0), one pair per tensor shared by all its consumers;
//   - its weight stored as an s8 initializer with per-channel symmetric scales max|w|/127
//     (zero points 0, values in [-127, 127]) and a per-axis DequantizeLinear: axis 0 for Conv
//     ([M, C/g, kH, kW]) and for Gemm with transB=1 ([N, K]), axis 1 for MatMul and Gemm with
//     transB=0 ([K, N]);
//   - its bias left in float (an int32 bias with scale sx*sw, as ORT writes, would tie the file
//     to one activation scale per bias and gains nothing on kiln's float decomposition).
// An Add that reads one of those activation tensors (a residual connection: ResNet's skip,
// MobileNetV2's inverted residual) reads it through the same DequantizeLinear, as ONNX
// Runtime's quantizer quantizes Add's inputs: the tensor then lives only as bytes, and the
// layer that writes it need not keep its f32 value for the Add (kiln adds the bytes,
// dequantized, in the int8 product's registers: kiln_quantized_addend). The Add's other
// input and its output stay float. Without `quantizeResiduals` Adds read their inputs in float. Everything else stays float. Per-axis DequantizeLinear needs opset 13, so a model below 13
// is refused rather than raised (ops such as Squeeze, Split and ReduceSum changed form at 13).
#include <map>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

namespace kiln::tools {

enum class ActivationType { U8, S8 };

/// The fp32 range calibration measured for one tensor.
struct ActivationRange {
  float min = 0, max = 0;
};

/// Scale and zero point of one activation tensor: u8 covers [min(lo, 0), max(hi, 0)] with a
/// zero point that represents 0 exactly; s8 is symmetric (zero point 0) over max(|lo|, |hi|).
/// An empty range (all zeros) gets scale 1.
struct ActivationQuantization {
  float scale = 1;
  int zeroPoint = 0;
};
ActivationQuantization activationQuantization(ActivationRange range, ActivationType type);

/// The tensors whose ranges quantizeModel needs: input 0 of every node it quantises, in node
/// order without repeats. Throws kiln::Error when the model's opset is below 13 or no node
/// can be quantised.
std::vector<std::string> activationsToCalibrate(const onnx::ModelProto &model);

struct QuantizeReport {
  int quantizedNodes = 0;
  /// Inputs of Add nodes that now read an activation through its DequantizeLinear.
  int dequantizedResiduals = 0;
  /// The op types left in float with their node counts (Q/DQ nodes the model already had
  /// included), sorted by op type.
  std::map<std::string, int> floatOps;
};

/// Rewrites `model` in place as described above; `ranges` must hold every tensor
/// activationsToCalibrate names. External weight data resolves under `modelDir`; the
/// quantised weights are written inline.
QuantizeReport quantizeModel(onnx::ModelProto &model, const std::string &modelDir,
                             const std::map<std::string, ActivationRange> &ranges, ActivationType type,
                             bool quantizeResiduals = true);

} // namespace kiln::tools
