#pragma once
// The reference evaluator: runs any verified graph op by op on host tensors. It is the oracle
// of every numerics test, so it favours obvious correctness over speed: primitives evaluate
// through their family's reference code (floats in double, integers in int64), composites
// through their decomposition, so a composite's meaning is defined exactly once. A kernel
// node evaluates its body on its operands.
#include <map>

#include "ir/Graph.h"

namespace kiln::ir {

/// Values for parameters that carry no initial value, by parameter name. A parameter with an
/// initial value uses it unless this map overrides it.
using ParamValues = std::map<std::string, Tensor>;

/// Runs `graph` on `inputs` (one per graph input, in order) and returns its outputs, each a
/// tensor of its own (sharing storage with no input, parameter value or other output).
/// Throws kiln::Error if an input's type differs from the graph's or a parameter has no value.
/// A graph with symbolic dims (ir/SymbolicShapes.h) is bound to its inputs' shapes first
/// (inputs that disagree on a symbol's extent are a kiln::Error naming both).
std::vector<Tensor> evaluate(const Graph &graph, const std::vector<Tensor> &inputs,
                             const ParamValues &params = {});

/// Evaluates one op on concrete inputs: a primitive directly, a composite by decomposing it
/// into a scratch graph and evaluating that. A kernel's meaning is its body, which an op
/// alone does not carry: kernels go through evaluateNode (or evaluate on the graph).
std::vector<Tensor> evaluateOp(OpKind op, const std::vector<Tensor> &inputs, const AttrMap &attrs,
                               const std::vector<TensorType> &outputTypes);

/// Evaluates one non-source node on concrete operand values: a kernel node by evaluating its
/// body, any other node through evaluateOp. (Passes that fold nodes use this, so kernels need
/// no special case there.)
std::vector<Tensor> evaluateNode(const Node &node, const std::vector<Tensor> &inputs);

/// Builds the decomposition of a composite node as a standalone graph whose inputs are the
/// node's operand types (used by the evaluator and by tools that show decompositions).
std::unique_ptr<Graph> decompositionGraph(OpKind op, const std::vector<TensorType> &inputs, const AttrMap &attrs);

} // namespace kiln::ir
