#pragma once
// The op catalogue: every op of ir/Ops.def described in one line, for people (`kiln-dump
// --list-ops`) and for checking the table against itself (tests/golden/list-ops.kir).
#include <string>

namespace kiln::ir {

/// One line per op of ir/Ops.def, in table order: its name, tier, fusion kind and family in
/// columns as wide as their longest entry. A composite's line ends with "decomposes into: "
/// and the primitives its decomposition builds on small example inputs, nested composites
/// expanded, sorted and comma-separated, or "?" when no example builds.
std::string formatOpCatalogue();

} // namespace kiln::ir
