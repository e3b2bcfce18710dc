#pragma once
// The SSA graph. A Value is produced by exactly one Node (or is a graph input) and knows its
// users; a Node has an op, input values, output values and attributes. Nodes sit in one list
// whose order is a valid execution order (every input defined before its use). All mutation
// goes through Graph and Node methods so that use lists stay right.
//
// A `kernel` node (a fusion group) owns a body: a Graph isolated from above, whose inputs
// correspond 1:1 to the node's operands and whose outputs to the node's results. Bodies hold
// no parameters and no kernels, so nesting is one level deep (the verifier checks this).
#include <list>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "ir/Op.h"

namespace kiln::ir {

class Graph;
class Node;

/// One use of a value: operand `operandIndex` of `user`.
struct Use {
  Node *user;
  int operandIndex;
  bool operator==(const Use &other) const {
    return user == other.user && operandIndex == other.operandIndex;
  }
};

class Value {
public:
  const TensorType &type() const { return type_; }
  DType dtype() const { return type_.dtype; }
  const Shape &shape() const { return type_.shape; }
  int64_t rank() const { return type_.rank(); }

  /// The node that computes this value; nullptr for a graph input.
  Node *producer() const { return producer_; }
  int outputIndex() const { return outputIndex_; }
  bool isGraphInput() const { return producer_ == nullptr; }
  Graph *graph() const { return graph_; }

  /// Optional name (graph inputs, or values named by a frontend); printers fall back to numbers.
  const std::string &name() const { return name_; }
  void setName(std::string name) { name_ = std::move(name); }

  const std::vector<Use> &uses() const { return uses_; }
  /// True if any node or the graph's return uses this value.
  bool hasUses() const;
  /// Redirects every use (node operands and graph outputs) to `other`; the outputs keep their
  /// names (Graph::setOutput).
  void replaceAllUsesWith(Value *other);

  /// Changes the type; only for passes that rewrite a producer, the verifier checks the result.
  void setType(TensorType type) { type_ = std::move(type); }

private:
  friend class Graph;
  friend class Node;
  Value(Graph *graph, TensorType type, Node *producer, int outputIndex)
      : graph_(graph), type_(std::move(type)), producer_(producer), outputIndex_(outputIndex) {}

  Graph *graph_;
  TensorType type_;
  Node *producer_;
  int outputIndex_;
  std::string name_;
  std::vector<Use> uses_;
};

class Node {
public:
  OpKind op() const { return op_; }
  std::string_view opName() const { return ir::opName(op_); }
  Graph *graph() const { return graph_; }

  const std::vector<Value *> &inputs() const { return inputs_; }
  Value *input(size_t i) const { return inputs_.at(i); }
  size_t numInputs() const { return inputs_.size(); }
  /// Replaces operand i, keeping both values' use lists right.
  void setInput(size_t i, Value *value);

  size_t numOutputs() const { return outputs_.size(); }
  Value *output(size_t i = 0) const { return outputs_.at(i).get(); }
  std::vector<Value *> outputs() const;

  const AttrMap &attrs() const { return attrs_; }
  bool hasAttr(const std::string &name) const { return attrs_.count(name) != 0; }
  void setAttr(const std::string &name, Attribute value) { attrs_[name] = std::move(value); }
  void setAttrs(AttrMap attrs) { attrs_ = std::move(attrs); }
  int64_t attrInt(const std::string &name) const { return ir::attrInt(attrs_, name); }
  double attrFloat(const std::string &name) const { return ir::attrFloat(attrs_, name); }
  const std::vector<int64_t> &attrInts(const std::string &name) const {
    return ir::attrInts(attrs_, name);
  }
  const std::string &attrString(const std::string &name) const { return ir::attrString(attrs_, name); }
  const Tensor &attrTensor(const std::string &name) const { return ir::attrTensor(attrs_, name); }

  /// Neighbours in the graph's node list; nullptr at either end.
  Node *prev() const;
  Node *next() const;

  /// The body of a kernel node (nullptr for every other op, and for a kernel under
  /// construction). The node owns it: erasing the node frees it, cloning copies it.
  Graph *body() const { return body_.get(); }
  /// Gives the node `body` (nullptr removes it) and makes the node its parentNode().
  void setBody(std::unique_ptr<Graph> body);

  ~Node();

private:
  friend class Graph;
  Node(Graph *graph, OpKind op) : graph_(graph), op_(op) {}

  Graph *graph_;
  OpKind op_;
  std::vector<Value *> inputs_;
  std::vector<std::unique_ptr<Value>> outputs_;
  AttrMap attrs_;
  std::unique_ptr<Graph> body_;
  std::list<std::unique_ptr<Node>>::iterator position_;
};

class Graph {
public:
  explicit Graph(std::string name = "main") : name_(std::move(name)) {}
  Graph(const Graph &) = delete;
  Graph &operator=(const Graph &) = delete;

  const std::string &name() const { return name_; }
  void setName(std::string name) { name_ = std::move(name); }

  /// A new graph input; a type outside kiln's size limit (core/ShapeMath.h) is a kiln::Error
  /// naming the graph and the input.
  Value *addInput(TensorType type, std::string name = "");
  const std::vector<Value *> &inputs() const { return inputRefs_; }
  /// Removes an unused graph input.
  void eraseInput(Value *input);

  /// The returned values, in order. One value may be returned by several outputs, and an
  /// output may return a graph input or a parameter.
  const std::vector<Value *> &outputs() const { return outputs_; }
  /// Output i's name, the one callers see (kiln-run, a compiled model's signature): its own
  /// name when it has one, else its value's ("" when neither is set). An output has a name of
  /// its own when a model declares one its value does not carry (an ONNX Identity returns its
  /// operand, so `Identity(y2) -> y` returns the value y2 as output y), and keeps it while
  /// passes replace its value.
  const std::string &outputName(size_t i) const;
  void setOutputName(size_t i, std::string name) { outputNames_.at(i) = std::move(name); }
  /// Replaces every output; the new ones go by their values' names.
  void setOutputs(std::vector<Value *> outputs);
  /// Replaces output i's value; the output keeps the name it had (the old value's name
  /// becomes its own when it had none), so a pass that swaps a returned value does not rename
  /// the graph's result.
  void setOutput(size_t i, Value *value);
  void addOutput(Value *value, std::string name = "");

  /// Creates a node without checking it (the Builder checks); it is inserted before `before`,
  /// or at the end when `before` is nullptr. Output values get the given types.
  Node *createNode(OpKind op, const std::vector<Value *> &inputs, AttrMap attrs,
                   const std::vector<TensorType> &outputTypes, Node *before = nullptr);
  /// Removes a node whose outputs are unused (freeing its body); throws kiln::Error otherwise.
  void eraseNode(Node *node);
  /// Moves `node` to just before `anchor` (or to the end when `anchor` is nullptr).
  void moveBefore(Node *node, Node *anchor);

  /// Copies `nodes` (in the given order) before `before`. Operands found in `mapping` are
  /// remapped; others are used as they are. On return `mapping` also maps each cloned node's
  /// outputs to their copies. The source nodes may belong to another graph when every operand
  /// from outside is mapped. Kernel bodies are deep-copied.
  void cloneNodes(const std::vector<const Node *> &nodes,
                  std::unordered_map<const Value *, Value *> &mapping, Node *before = nullptr);
  /// A deep copy of the whole graph (inputs, nodes, kernel bodies, outputs, names).
  std::unique_ptr<Graph> clone() const;

  /// Nodes in execution order, as a snapshot safe to hold while mutating.
  std::vector<Node *> nodes() const;
  size_t numNodes() const { return nodes_.size(); }
  Node *firstNode() const { return nodes_.empty() ? nullptr : nodes_.front().get(); }
  Node *lastNode() const { return nodes_.empty() ? nullptr : nodes_.back().get(); }

  /// Parameter nodes, in order.
  std::vector<Node *> params() const;
  bool isOutput(const Value *value) const;

  /// The kernel node whose body this graph is; nullptr for a top-level graph.
  Node *parentNode() const { return parentNode_; }

private:
  friend class Node;
  std::string name_;
  Node *parentNode_ = nullptr;
  std::vector<std::unique_ptr<Value>> inputValues_;
  std::vector<Value *> inputRefs_;
  std::vector<Value *> outputs_;
  std::vector<std::string> outputNames_; // parallel to outputs_; "" where the value's name holds
  std::list<std::unique_ptr<Node>> nodes_;
};

} // namespace kiln::ir
