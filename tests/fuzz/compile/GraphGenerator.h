#pragma once
// Random valid graphs for differential testing of the compiler (kiln-fuzz-compile and its
// regression tests): elementwise chains with broadcasting and mixed dtypes, reductions over
// random axes, movement, indexing, matmul, convolutions and pooling with random geometry,
// einsum, resize, the norms, activations, losses and optimizer updates.
//
// A case is a pure function of its seed: the same seed builds the same graph on every machine
// (the generator maps raw std::mt19937_64 output to integers itself, as the standard
// distributions differ between libraries). Each case is built around one op of the table
// (generatorOps()[mixSeed(seed) % size], so consecutive seeds cover every op) with a few random
// ops before and after it. Inputs are named for the values they take (InputDomains.h), chosen
// so that the reference evaluator's results are well-conditioned.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ir/Graph.h"

namespace kiln::fuzz {

struct GeneratedCase {
  uint64_t seed = 0;
  std::unique_ptr<ir::Graph> graph;
  /// The op the case was built around.
  ir::OpKind focus = ir::OpKind::Add;
  /// Emitters that gave up part way (their op's inference rejected what they asked for): a
  /// generator weakness worth a look when it is frequent, not a compiler bug.
  int rejectedSteps = 0;
};

/// The case of `seed`.
GeneratedCase generateCase(uint64_t seed);

/// Every op the generator can build directly, in table order (composites included).
std::vector<ir::OpKind> generatorOps();

/// The ops codegen lowers: every primitive of ir/Ops.def but the kernel groups fusion forms.
std::vector<ir::OpKind> loweredOps();

} // namespace kiln::fuzz
