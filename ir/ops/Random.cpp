// Random numbers as a pure function of (seed, offset, element index): a counter-based stream,
// so the reference evaluator and generated code (codegen/ScalarOps.cpp spells the same
// arithmetic in C++) produce bit-identical values, any element can be computed on its own
// (the op fuses into its consumers like any elementwise op), and the same op evaluated twice
// gives the same numbers.
//
//   random_uniform(offset?) {shape, dtype = f32, seed = 0} -> dtype[shape], values in [0, 1)
//     offset: an optional rank-0 i64 or f32 tensor (0 when absent; an f32 is truncated to an
//             integer, saturating, NaN as 0). A training step passes a counter here so that
//             each step draws fresh numbers without a recompile (frontend/GraphBuilder.h).
//     mix(z)  = splitmix64's finaliser: z ^= z >> 30; z *= 0xBF58476D1CE4E5B9;
//               z ^= z >> 27; z *= 0x94D049BB133111EB; z ^= z >> 31  (all mod 2^64)
//     key     = mix(mix(seed + G) + (offset + 1) * G),  G = 0x9E3779B97F4A7C15
//     bits(i) = mix(key + (i + 1) * G)  for the row-major linear index i: splitmix64's
//               (i+1)-th output from state `key`
//     f32: (bits >> 40) * 2^-24;  f64: (bits >> 11) * 2^-53  (exact, so never 1.0)
//   Not differentiable (a source of values, like iota).
#include "ir/ops/Random.h"

#include <cmath>

#include "ir/ops/Common.h"

namespace kiln::ir {

using namespace ops;

namespace random {

uint64_t mix(uint64_t z) {
  z ^= z >> 30;
  z *= 0xBF58476D1CE4E5B9ull;
  z ^= z >> 27;
  z *= 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t streamKey(int64_t seed, int64_t offset) {
  return mix(mix(static_cast<uint64_t>(seed) + kGolden) + (static_cast<uint64_t>(offset) + 1) * kGolden);
}

uint64_t elementBits(uint64_t key, int64_t index) { return mix(key + (static_cast<uint64_t>(index) + 1) * kGolden); }

float unitF32(uint64_t bits) { return static_cast<float>(bits >> 40) * 0x1.0p-24f; }

double unitF64(uint64_t bits) { return static_cast<double>(bits >> 11) * 0x1.0p-53; }

int64_t streamSeed(int64_t seed, int64_t drawn) {
  if (drawn == 0)
    return seed;
  return static_cast<int64_t>(mix(static_cast<uint64_t>(seed) + static_cast<uint64_t>(drawn) * kGolden));
}

int64_t offsetOf(double value) {
  if (std::isnan(value))
    return 0;
  // Saturating, as codegen's kiln_sat<int64_t>((double)x): 2^63 itself is out of range.
  if (value <= -9223372036854775808.0)
    return INT64_MIN;
  if (value >= 9223372036854775808.0)
    return INT64_MAX;
  return static_cast<int64_t>(value);
}

} // namespace random

OpDef defineRandomUniform() {
  OpDef def;
  def.attrs = {intsAttr("shape"), dtypeAttr("dtype", DType::F32), intAttr("seed", 0)};
  def.infer = [](const std::vector<TensorType> &inputs, const AttrMap &attrs) {
    TensorType type{attrDType(attrs, "dtype"), attrInts(attrs, "shape")};
    if (type.dtype != DType::F32 && type.dtype != DType::F64)
      fail("random_uniform produces f32 or f64, not {}", dtypeName(type.dtype));
    for (int64_t d : type.shape)
      if (d < 0)
        fail("random_uniform: negative dimension in shape {}", shapeToString(type.shape));
    elementCount(type.shape, "shape");
    if (!inputs.empty() &&
        (inputs[0].rank() != 0 || (inputs[0].dtype != DType::I64 && inputs[0].dtype != DType::F32)))
      fail("random_uniform: the offset must be an i64 or f32 scalar (rank 0), got {}", inputs[0].toString());
    return std::vector<TensorType>{type};
  };
  def.eval = [](const std::vector<Tensor> &inputs, const AttrMap &attrs, const std::vector<TensorType> &out) {
    int64_t offset = 0;
    if (!inputs.empty())
      offset = inputs[0].dtype() == DType::I64 ? inputs[0].getInt(0) : random::offsetOf(inputs[0].getDouble(0));
    uint64_t key = random::streamKey(attrInt(attrs, "seed"), offset);
    Tensor y(out[0]);
    bool single = y.dtype() == DType::F32;
    for (int64_t i = 0; i < y.numElements(); ++i) {
      uint64_t bits = random::elementBits(key, i);
      y.setDouble(i, single ? static_cast<double>(random::unitF32(bits)) : random::unitF64(bits));
    }
    return std::vector<Tensor>{y};
  };
  return def;
}

} // namespace kiln::ir
