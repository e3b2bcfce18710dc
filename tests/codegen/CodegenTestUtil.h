#pragma once
// Shared helpers of the codegen tests: compile a graph, run it on random inputs and compare
// with the reference evaluator (the oracle).
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "codegen/CompileModel.h"
#include "ir/Graph.h"

namespace kiln::codegen::test {

/// Compile options for tests: a compile cache folder of their own under the temp folder, so
/// a second run of the tests loads instead of compiling.
CompileOptions testOptions();

/// Inputs for `graph`: randomTensor per input, seeded with `seed` + the input's position.
std::vector<Tensor> randomInputs(const ir::Graph &graph, uint64_t seed);

/// Compiles `graph`, runs it on `inputs` and expects every output to match the reference
/// evaluator within rtol/atol. Returns the lowered model (for inspecting the strategies).
void expectMatchesReference(const ir::Graph &graph, const std::vector<Tensor> &inputs,
                            const CompileOptions &options = testOptions(), double rtol = 1e-4,
                            double atol = 1e-5);

/// Compiles `graph`, runs it on `inputs` and expects every output to hold exactly the
/// reference evaluator's bytes (the first few differing elements are reported as bit patterns).
void expectBitIdentical(const ir::Graph &graph, const std::vector<Tensor> &inputs);

/// A small trainable model: nn Linear(6, 8) -> ReLU -> Linear(8, 3) on input x f32[5, 6], its
/// weights drawn after frontend::nn::manualSeed(seed).
std::unique_ptr<ir::Graph> smallMlp(uint64_t seed);

/// The strategies of every launch of `graph` lowered with `options`, in launch order.
std::vector<std::string> launchStrategies(const ir::Graph &graph, const CompileOptions &options = testOptions());

/// testOptions() running on a pool of `threads` threads.
CompileOptions withThreads(int threads);

/// How often `text` occurs in the C++ generated for `graph` (a marker a stage emitter writes).
int countInSource(const ir::Graph &graph, const std::string &text, const CompileOptions &options = testOptions());

} // namespace kiln::codegen::test
