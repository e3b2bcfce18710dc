#pragma once
// The differential check of kiln-fuzz-compile and its regression tests: compile graphs through
// the inference pipeline (several to one translation unit), run them on their fuzz inputs
// (tests/fuzz/compile/InputDomains.h) and compare every output with the reference evaluator,
// within a tolerance per dtype; and the gradient graph of a forward graph (autodiff applied to
// a weighted sum of its float outputs), whose compiled gradients are checked the same way.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "codegen/CxxCompiler.h"
#include "core/Tensor.h"
#include "ir/Graph.h"

namespace kiln::fuzz {

/// One graph to check.
struct CheckCase {
  std::string label; // "seed 12", "seed 12 gradient", a reproducer's file name
  uint64_t seed = 0; // the generator seed it came from (0 when it has none)
  uint64_t inputSeed = 0;
  bool gradient = false;
  /// Run the pipeline's fuse pass (off: every primitive is its own kernel).
  bool fuse = true;
  /// > 0: compiled in batch tiles of this many rows (codegen::CompileOptions::batchTile), the
  /// runtime running the graph's batch as tiles; 0: as kiln chooses.
  int64_t batchTile = 0;
  std::shared_ptr<const ir::Graph> graph;
};

enum class Outcome {
  Match,          // every output within tolerance
  Mismatch,       // an output differs from the reference
  CompileError,   // lowering, the C++ compiler or loading failed with an error that is not "unsupported"
  RunError,       // the compiled model threw when run
  Unsupported,    // codegen says it does not lower an op on a dtype yet (a documented kiln::Error)
  ReferenceError, // the reference evaluator rejected the case: a generator bug, not the compiler's
};
std::string_view outcomeName(Outcome outcome);
/// Mismatch, CompileError and RunError: what the fuzzer reports and keeps.
bool isFailure(Outcome outcome);

/// The same forward case compiled in batch tiles of one row, when its graph is
/// batch-separable (ir/BatchTiling.h) with a static batch of more than one row; else none.
std::optional<CheckCase> batchTileCase(const CheckCase &forward);

struct CheckResult {
  Outcome outcome = Outcome::Match;
  std::string message;
};

struct CheckOptions {
  codegen::CompilerOptions compiler;
};

/// The tolerance of an output of `dtype`, relative to the output's scale (its largest
/// magnitude, at least 1): |got - want| <= rtol * scale. Integer and bool outputs are exact.
double relativeTolerance(DType dtype);
/// The tolerance of the least precise float dtype any value of `graph` has: an f64 output
/// computed in f32 and converted carries f32's rounding.
double graphTolerance(const ir::Graph &graph);

/// "" when every output matches its reference, else which output differs and how. A float
/// output is compared with the larger of its dtype's tolerance and `floorTolerance`.
std::string compareOutputs(const std::vector<Tensor> &got, const std::vector<Tensor> &want,
                           double floorTolerance = 0);

/// Checks every case: the reference first, then each case is lowered, the lowered ones are
/// compiled together (when that fails, one by one, to find which fail), loaded, run and
/// compared. One result per case, in order.
std::vector<CheckResult> checkCases(const std::vector<CheckCase> &cases, const CheckOptions &options);

/// The gradient graph of `forward`: decomposed, L = sum over its float outputs of
/// reduce_sum(output * R) (f16 and bf16 ones converted to f32 first) with fixed grid weights R
/// (from `seed`), and the gradients of L with respect to every float graph input (but the wild
/// ones, whose NaNs would spread) and parameter as its outputs. nullptr, with the
/// reason in `whyNot`, when there is nothing to differentiate or autodiff has no rule for an op
/// on the way.
std::unique_ptr<ir::Graph> gradientGraph(const ir::Graph &forward, uint64_t seed, std::string &whyNot);

/// A reproducer: `graph` as .kir (every tensor printed, so it parses back) after a header of
/// comments naming its seed, input seed, fuse flag and the failure.
std::string reproducerText(const CheckCase &checkCase, const CheckResult &result);
/// Reads a reproducer written by reproducerText (its header, then the graph).
CheckCase readReproducer(const std::string &path);

} // namespace kiln::fuzz
