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
/// The seed of the `drawn`-th stream drawn from `seed` in one graph (drawn counts from 0):
/// `seed` itself first, then a splitmix64 mix of (seed, drawn), so that two dropout masks
/// traced from one seed are independent.
int64_t streamSeed(int64_t seed, int64_t drawn);

/// The graph's random offset: the i64 scalar parameter (initial value 0) that random ops
/// read. A training step advances it by one (passes/autodiff/TrainingGraph.cpp), so each step
/// draws fresh numbers with no extra input; nn modules (frontend::GraphBuilder::randomOffset)
/// and the ONNX importer (Dropout in training mode) create it under this name.
inline constexpr const char *kOffsetParam = "rng_offset";

} // namespace kiln::ir::random
