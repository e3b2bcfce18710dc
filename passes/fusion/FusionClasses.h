#pragma once
// The op classes fusion works with (passes/fusion/FusionRules.cpp, rules 1-4), shared with the
// fusion report (passes/fusion/FusionReport.cpp). Internal to passes/.
#include "ir/Graph.h"

namespace kiln::passes::fusion {

/// What a node is to fusion, from the Fusion column of ir/Ops.def: a source (parameter,
/// constant), an elementwise op, a movement op (index arithmetic), a reduction, a contraction
/// (matmul, conv) or opaque (its own kernel: pooling, scatter, a composite, a formed kernel).
enum class OpClass { Source, Elementwise, Movement, Reduction, Contraction, Opaque };

OpClass classify(const ir::Node &node);

} // namespace kiln::passes::fusion
