#pragma once
// The counter-based stream behind random_uniform (ir/ops/Random.cpp documents the formulas).
// Generated code spells the same arithmetic (codegen/ScalarOps.cpp's prelude); these are the
// reference evaluator's.
#include <cstdint>

namespace kiln::ir::random {

/// The golden-ratio increment of splitmix64.
constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ull;

/// splitmix64's output function.
uint64_t mix(uint64_t z);
/// The stream's state for one (seed, offset) pair.
uint64_t streamKey(int64_t seed, int64_t offset);
/// The 64 random bits of element `index` of the stream.
uint64_t elementBits(uint64_t key, int64_t index);
/// The top 24 bits as a float in [0, 1).
float unitF32(uint64_t bits);
/// The top 53 bits as a double in [0, 1).
double unitF64(uint64_t bits);
/// An f32 offset as an integer: truncated, saturating, NaN as 0.
int64_t offsetOf(double value);

} // namespace kiln::ir::random
