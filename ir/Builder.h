#pragma once
// The core builder: the only way nodes are created by frontends and decompositions. It checks
// arity and attributes against the op's schema, fills attribute defaults, runs type inference,
// and inserts the node at its insertion point. Any problem is a kiln::Error naming the op and
// its input types, raised at the call that caused it.
#include "ir/Graph.h"

namespace kiln::ir {

class Builder {
public:
  explicit Builder(Graph &graph) : graph_(graph) {}

  Graph &graph() const { return graph_; }
  /// New nodes go before `before`; nullptr (the default) appends at the end.
  void setInsertionPoint(Node *before) { insertBefore_ = before; }
  Node *insertionPoint() const { return insertBefore_; }

  /// Creates a node and returns its outputs.
  std::vector<Value *> createMulti(OpKind op, const std::vector<Value *> &inputs, AttrMap attrs = {});
  /// Creates a single-output node and returns its output.
  Value *create(OpKind op, const std::vector<Value *> &inputs, AttrMap attrs = {});
  /// Same as createMulti but returns the node.
  Node *createNode(OpKind op, const std::vector<Value *> &inputs, AttrMap attrs = {});

  Value *constant(const Tensor &value);
  /// A rank-0 constant.
  Value *scalar(DType dtype, double value);
  /// A parameter; `init` (optional) holds its initial value.
  Value *param(const std::string &name, const TensorType &type, const Tensor &init = Tensor());

private:
  Graph &graph_;
  Node *insertBefore_ = nullptr;
};

/// Checks attributes against the op's schema: rejects unknown names and wrong kinds (an int
/// where a float is declared is converted), fills defaults, and requires required ones.
AttrMap completeAttrs(OpKind op, AttrMap attrs);

/// Runs the op's inference with the same checks as the builder (arity, attributes, and every
/// operand and result type within kiln's size limit, core/ShapeMath.h); errors name the op
/// and input types. Symbolic operand dims reach only ops whose inference handles them
/// (ir/SymbolicShapes.h); any other op refuses them. Used by the builder, the verifier and
/// the parser.
std::vector<TensorType> inferTypes(OpKind op, const std::vector<TensorType> &inputs, const AttrMap &attrs);

/// "matmul(f32[2,3], f32[4,5])": how errors name a call.
std::string describeCall(OpKind op, const std::vector<TensorType> &inputs);

} // namespace kiln::ir
