#pragma once
// What the int8 kernel tests (qgemm, qconv2d) ask of an output beyond its f32 value: the post
// ops (a bias and a clip as kiln_post_ops) and the requantisation of kiln_quantized_output,
// computed here as generated code's div, nearbyint, add and saturating cast (kiln_sat, through
// a double) compute them.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "runtime/KernelAbi.h"

namespace kiln::runtime::kernels::test {

/// Where a test's outputs go: f32 through its epilogue (which adds the bias), or with the bias
/// and the clip as kiln_post_ops, then f32 into the output or requantised to u8 or s8 bytes;
/// the residual ones add an addend after the bias, then keep f32 (and requantise to u8); the
/// residual-bytes ones read it as u8 (s8) bytes dequantized and requantise to u8 only.
enum class Output { Epilogue, PostOps, U8, S8, ResidualF32, ResidualU8, ResidualBytesU8, ResidualBytesS8 };

inline bool addsBytesResidual(Output o) { return o == Output::ResidualBytesU8 || o == Output::ResidualBytesS8; }
inline bool addsResidual(Output o) { return o == Output::ResidualF32 || o == Output::ResidualU8 || addsBytesResidual(o); }
inline bool requantises(Output o) {
  return o == Output::U8 || o == Output::S8 || o == Output::ResidualU8 || addsBytesResidual(o);
}
inline bool keepsF32(Output o) { return !requantises(o) || o == Output::ResidualU8; }

/// The residual's bytes at output element `at` (as u8; an s8 residual reads them as int8_t),
/// and their scale and zero point: scaled so that some sums saturate.
inline uint8_t addendByteAt(int64_t at) { return static_cast<uint8_t>(at * 37 % 251); }
constexpr float kAddendScale = 0.0173f;
inline float addendZero(Output o) { return o == Output::ResidualBytesS8 ? -3.0f : 119.0f; }

/// The residual addend of output element `at`: the bytes dequantized as generated code does,
/// (q - zero) * scale, rounded to f32 before it is added.
inline float addendAt(int64_t at, Output o = Output::ResidualF32) {
  if (!addsBytesResidual(o))
    return 0.0625f * static_cast<float>(at * 7 % 37) - 1.0f;
  const uint8_t byte = addendByteAt(at);
  const float value = o == Output::ResidualBytesS8 ? static_cast<float>(static_cast<int8_t>(byte)) : static_cast<float>(byte);
  volatile float product = (value - addendZero(o)) * kAddendScale; // no fused multiply-add with the sum
  return product;
}

constexpr float kClipLo = -0.75f, kClipHi = 1.5f;          // the post ops' clip
constexpr float kOutScale = 0.004f;                         // narrow enough that some saturate
inline float outZero(Output output) { return output == Output::S8 ? -9.0f : 71.0f; }

inline float clipped(float v) { return std::min(std::max(v, kClipLo), kClipHi); }

/// The buffers a test's outputs need beyond its f32 one (a bias per channel, the addends, the
/// bytes, 0xA5 until written), with the call's arguments pointed at them as `output` asks.
struct OutputBuffers {
  std::vector<float> biases, addends;
  std::vector<uint8_t> q, addendBytes;

  /// `args`: a kiln_qgemm_args or kiln_qconv2d_args; `channels` biases from biasOf(channel),
  /// `elements` outputs laid out as the f32 output.
  template <typename Args, typename BiasOf>
  OutputBuffers(Args &args, Output output, int64_t channels, size_t elements, BiasOf biasOf)
      : biases(static_cast<size_t>(channels)), addends(elements), q(elements, 0xA5), addendBytes(elements) {
    for (int64_t i = 0; i < channels; ++i)
      biases[static_cast<size_t>(i)] = biasOf(i);
    for (size_t at = 0; at < elements; ++at)
      addends[at] = addendAt(static_cast<int64_t>(at)), addendBytes[at] = addendByteAt(static_cast<int64_t>(at));
    if (output != Output::Epilogue) {
      args.epilogue = nullptr, args.epilogue_ctx = nullptr;
      args.post.bias = biases.data(), args.post.activation = KILN_ACTIVATION_CLIP;
      args.post.lo = kClipLo, args.post.hi = kClipHi;
    }
    if (requantises(output))
      args.quantized = {q.data(), output == Output::S8, kOutScale, outZero(output), keepsF32(output)};
    if (addsBytesResidual(output))
      args.addend_q = {addendBytes.data(), output == Output::ResidualBytesS8, kAddendScale, addendZero(output)};
    else if (addsResidual(output))
      args.addend = addends.data();
  }
};

inline uint8_t requantised(float v, Output output) {
  const bool isSigned = output == Output::S8;
  const double r = static_cast<double>(std::nearbyint(v / kOutScale) + outZero(output));
  const double lo = isSigned ? -128 : 0, hi = isSigned ? 127 : 255;
  if (r != r)
    return 0;
  const double clamped = r <= lo ? lo : (r >= hi ? hi : r);
  return isSigned ? static_cast<uint8_t>(static_cast<int8_t>(clamped)) : static_cast<uint8_t>(clamped);
}

} // namespace kiln::runtime::kernels::test
