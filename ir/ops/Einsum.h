#pragma once
// The terms of an einsum equation, for passes that rewrite einsums into other ops
// (passes/simplify/EinsumToMatmul.cpp); ir/ops/Einsum.cpp defines the semantics.
#include <optional>
#include <string>
#include <vector>

namespace kiln::ir {

/// An equation's operand terms and output term, one letter per dim.
struct EinsumLetterTerms {
  std::vector<std::string> inputs;
  std::string output;
};

/// The terms of a valid `equation`, the implicit output ("ij,jk": the letters that occur once,
/// in ASCII order) written out. nullopt when a term uses "..." (its dims depend on the
/// operands' ranks). Malformed equations are a kiln::Error, as einsum's inference reports them.
std::optional<EinsumLetterTerms> einsumLetterTerms(const std::string &equation);

} // namespace kiln::ir
