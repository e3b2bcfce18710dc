#pragma once
// Structural equality of graphs, the check behind every print -> parse round-trip test and
// the parser fuzzer: same name, inputs, node order, ops, attributes (ir::attrMapsEqual, so
// tensors and floats compare bitwise), types, operand wiring, outputs and their names, value
// names and kernel bodies (all of the above, except the body graph's own name, which the text
// form omits).
#include <string>

#include "ir/Graph.h"

namespace kiln::ir {

/// Describes the first difference between `a` and `b` ("node 3 (relu): operand 0 differs"),
/// or returns "" when they are equal. Value, output and graph names are compared only when
/// `compareNames` is set.
std::string graphDifference(const Graph &a, const Graph &b, bool compareNames = true);

inline bool graphsEqual(const Graph &a, const Graph &b, bool compareNames = true) {
  return graphDifference(a, b, compareNames).empty();
}

} // namespace kiln::ir
