#pragma once
// The factory of every registered pass, declared from the one table passes/PassRegistry.def, so
// that a pass added to the table without a definition is a link error. What each pass requires
// and guarantees is documented in its own header (passes/simplify/DeadCodeElimination.h, ...).
#include <memory>

#include "passes/Pass.h"

namespace kiln::passes {

#define PASS(Factory, Name, Description) std::unique_ptr<Pass> Factory();
#include "passes/PassRegistry.def"

} // namespace kiln::passes
