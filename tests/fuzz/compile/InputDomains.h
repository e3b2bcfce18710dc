#pragma once
// The values a fuzzed graph runs on. Each graph input's name says where its values come from,
// so that a graph written as .kir (a reproducer) carries everything needed to rebuild its
// inputs: "<domain>_<ordinal>", the domain one of
//   s   signed: floats on the grid of eighths in [-2, 2]; integers in [-8, 8]
//   p   positive: floats on the grid of eighths in [0.25, 2]; integers in [1, 8]
//   n   non-negative: floats on the grid in [0, 2]; integers in [0, 8]
//   u   unrounded: floats uniform in [-1, 1) (off the grid, so every op rounds); integers as s
//   w   wild: as s, with NaN, +inf, -inf and -0.0 mixed in (one element in five)
//   b   bool: fair coins (any dtype: 0 or 1)
//   k<d0>x<d1>...  indices: element j lies in [-dk, dk) with dk = d[j mod count], so an
//       index tuple (gather_nd, scatter_nd) addresses several axes of different sizes
// e.g. "s_0", "p_3", "k5_2", "k4x3_7". The grid keeps sums and products of inputs exact in
// every float dtype up to a magnitude the generator tracks, so that ops which are not
// continuous (floor, comparisons, argmax ties) see the same values in compiled code and in the
// reference evaluator.
#include <cstdint>
#include <string>
#include <vector>

#include "core/Tensor.h"
#include "ir/Graph.h"

namespace kiln::fuzz {

struct InputDomain {
  enum class Kind { Signed, Positive, NonNegative, Unrounded, Wild, Bool, Index };
  Kind kind = Kind::Signed;
  std::vector<int64_t> dims; // Index: the axis sizes the indices address, cycled over the elements
};

/// The input name "<domain>_<ordinal>".
std::string inputName(const InputDomain &domain, int ordinal);
/// The domain an input name encodes; kiln::Error for a name that is not one.
InputDomain parseInputName(const std::string &name);

/// Values of `type` drawn from `domain`; the same (type, domain, seed) gives the same tensor on
/// every machine.
Tensor makeInput(const TensorType &type, const InputDomain &domain, uint64_t seed);
/// One tensor per input of `graph`, from its name, drawn with `seed` mixed with the name (so an
/// input's values do not depend on which other inputs the graph has).
std::vector<Tensor> makeInputs(const ir::Graph &graph, uint64_t seed);

/// splitmix64's finaliser: a well-mixed 64-bit hash of `z` (seeds of sub-streams).
uint64_t mixSeed(uint64_t z);

} // namespace kiln::fuzz
