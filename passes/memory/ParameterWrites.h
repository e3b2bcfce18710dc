#pragma once
// A training step writes each parameter's new value over the old one, in place (the step binds
// the output to the parameter's own tensor: runtime/TrainingStep.h). This header is what the
// passes that make that sound (isolate-parameter-writes, order-parameter-writes) and codegen's
// check of the result (codegen::checkInPlaceUpdates) share: which outputs overwrite which
// parameter, who reads a parameter, and which reads and kernels are safe.
//
// Which outputs: a graph output named like one of the graph's parameters (`return %loss,
// %w1 as "fc.weight"`) holds that parameter's new value. buildTrainingGraph names them so
// (passes/autodiff/TrainingGraph.h), so the passes read what they need from the IR alone, and
// `kiln-dump --pipeline=training` on a printed training graph does what a training step
// compiles.
#include <string>
#include <vector>

#include "ir/Graph.h"

namespace kiln::passes {

/// Output `output` of a graph holds the new value of the parameter called `param`.
struct ParameterWrite {
  std::string param;
  size_t output = 0;
};

/// Every output named like a parameter of `graph` (by its "name" attribute), in output order.
/// A parameter that dce removed (nothing read it) is no longer found: nothing can read it
/// before its write either.
std::vector<ParameterWrite> parameterWrites(const ir::Graph &graph);

/// The value of the parameter called `name`, or nullptr.
ir::Value *findParam(const ir::Graph &graph, const std::string &name);

/// The nodes reading `param`'s buffer: its users and, through reshapes (which may alias their
/// operand's buffer), their users.
std::vector<ir::Node *> readersOf(const ir::Value *param);

/// Ops a kernel computes in a stage of their own (a contraction, a reduction loop, an opaque
/// op), whose result codegen may park in one of the kernel's result buffers before the stages
/// after it run: a contraction's tile goes to the first stored buffer when its own value is not
/// stored. Parameters and constants compute nothing and are not staged.
bool isStagedOp(ir::OpKind op);
/// Whether the body of `kernel` holds a staged op.
bool hasStagedOps(const ir::Node &kernel);

/// Whether `writer` (a kernel, or a single primitive) reads `param` only at the element it
/// writes: only elementwise, broadcast and reshape ops reach from it, each keeping the element
/// count, so element i of the parameter contributes to element i of the results only.
bool readsOnlyElementwise(const ir::Node &writer, const ir::Value *param);

} // namespace kiln::passes
