#include "ir/Graph.h"

#include <algorithm>

#include "core/Error.h"
#include "core/ShapeMath.h"

namespace kiln::ir {

static void removeUse(Value *value, Node *user, int operandIndex) {
  auto &uses = const_cast<std::vector<Use> &>(value->uses());
  auto it = std::find(uses.begin(), uses.end(), Use{user, operandIndex});
  if (it != uses.end())
    uses.erase(it);
}

bool Value::hasUses() const { return !uses_.empty() || graph_->isOutput(this); }

void Value::replaceAllUsesWith(Value *other) {
  if (other == this)
    return;
  // setInput edits uses_, so iterate over a copy.
  std::vector<Use> uses = uses_;
  for (const Use &use : uses)
    use.user->setInput(static_cast<size_t>(use.operandIndex), other);
  for (size_t i = 0; i < graph_->outputs().size(); ++i)
    if (graph_->outputs()[i] == this)
      graph_->setOutput(i, other);
}

void Node::setInput(size_t i, Value *value) {
  Value *old = inputs_.at(i);
  if (old == value)
    return;
  removeUse(old, this, static_cast<int>(i));
  inputs_[i] = value;
  value->uses_.push_back(Use{this, static_cast<int>(i)});
}

std::vector<Value *> Node::outputs() const {
  std::vector<Value *> out;
  for (auto &v : outputs_)
    out.push_back(v.get());
  return out;
}

Node::~Node() = default; // here, where Graph is complete, so body_ can be destroyed

void Node::setBody(std::unique_ptr<Graph> body) {
  if (body_)
    body_->parentNode_ = nullptr;
  body_ = std::move(body);
  if (body_)
    body_->parentNode_ = this;
}

Node *Node::prev() const {
  if (position_ == graph_->nodes_.begin())
    return nullptr;
  return std::prev(position_)->get();
}

Node *Node::next() const {
  auto it = std::next(position_);
  return it == graph_->nodes_.end() ? nullptr : it->get();
}

Value *Graph::addInput(TensorType type, std::string name) {
  try {
    checkShapeWithinLimit(type.shape, "shape"); // kiln's size limit (core/ShapeMath.h), where the type enters
  } catch (const Error &e) {
    fail("graph @{}: input '{}': {}", name_, name, e.what());
  }
  inputValues_.emplace_back(new Value(this, std::move(type), nullptr, -1));
  Value *value = inputValues_.back().get();
  value->setName(std::move(name));
  inputRefs_.push_back(value);
  return value;
}

void Graph::eraseInput(Value *input) {
  if (input->hasUses())
    fail("cannot erase graph input '{}': it still has uses", input->name());
  inputRefs_.erase(std::remove(inputRefs_.begin(), inputRefs_.end(), input), inputRefs_.end());
  inputValues_.erase(std::remove_if(inputValues_.begin(), inputValues_.end(),
                                    [&](auto &v) { return v.get() == input; }),
                     inputValues_.end());
}

Node *Graph::createNode(OpKind op, const std::vector<Value *> &inputs, AttrMap attrs,
                        const std::vector<TensorType> &outputTypes, Node *before) {
  std::unique_ptr<Node> node(new Node(this, op));
  Node *raw = node.get();
  raw->attrs_ = std::move(attrs);
  raw->inputs_ = inputs;
  for (size_t i = 0; i < inputs.size(); ++i)
    inputs[i]->uses_.push_back(Use{raw, static_cast<int>(i)});
  for (size_t i = 0; i < outputTypes.size(); ++i)
    raw->outputs_.emplace_back(new Value(this, outputTypes[i], raw, static_cast<int>(i)));
  auto where = before ? before->position_ : nodes_.end();
  raw->position_ = nodes_.insert(where, std::move(node));
  return raw;
}

void Graph::eraseNode(Node *node) {
  for (auto &output : node->outputs_)
    if (output->hasUses())
      fail("cannot erase {} node: its output is still used", node->opName());
  for (size_t i = 0; i < node->inputs_.size(); ++i)
    removeUse(node->inputs_[i], node, static_cast<int>(i));
  nodes_.erase(node->position_);
}

void Graph::moveBefore(Node *node, Node *anchor) {
  auto where = anchor ? anchor->position_ : nodes_.end();
  nodes_.splice(where, nodes_, node->position_);
}

void Graph::cloneNodes(const std::vector<const Node *> &nodes,
                       std::unordered_map<const Value *, Value *> &mapping, Node *before) {
  for (const Node *node : nodes) {
    std::vector<Value *> inputs;
    for (Value *input : node->inputs()) {
      auto it = mapping.find(input);
      Value *mapped = it != mapping.end() ? it->second : input;
      if (mapped->graph() != this)
        fail("cloning a {} node: operand comes from another graph and is not mapped", node->opName());
      inputs.push_back(mapped);
    }
    std::vector<TensorType> types;
    for (auto &output : node->outputs_)
      types.push_back(output->type());
    Node *copy = createNode(node->op(), inputs, node->attrs(), types, before);
    if (node->body())
      copy->setBody(node->body()->clone());
    for (size_t i = 0; i < types.size(); ++i) {
      copy->output(i)->setName(node->output(i)->name());
      mapping[node->output(i)] = copy->output(i);
    }
  }
}

std::unique_ptr<Graph> Graph::clone() const {
  auto copy = std::make_unique<Graph>(name_);
  std::unordered_map<const Value *, Value *> mapping;
  for (Value *input : inputRefs_)
    mapping[input] = copy->addInput(input->type(), input->name());
  std::vector<const Node *> order;
  for (auto &node : nodes_)
    order.push_back(node.get());
  copy->cloneNodes(order, mapping);
  for (size_t i = 0; i < outputs_.size(); ++i)
    copy->addOutput(mapping.at(outputs_[i]), outputNames_[i]);
  return copy;
}

std::vector<Node *> Graph::nodes() const {
  std::vector<Node *> out;
  out.reserve(nodes_.size());
  for (auto &node : nodes_)
    out.push_back(node.get());
  return out;
}

std::vector<Node *> Graph::params() const {
  std::vector<Node *> out;
  for (auto &node : nodes_)
    if (node->op() == OpKind::Param)
      out.push_back(node.get());
  return out;
}

const std::string &Graph::outputName(size_t i) const {
  const std::string &own = outputNames_.at(i);
  return own.empty() ? outputs_[i]->name() : own;
}

void Graph::setOutputs(std::vector<Value *> outputs) {
  outputs_ = std::move(outputs);
  outputNames_.assign(outputs_.size(), std::string());
}

void Graph::setOutput(size_t i, Value *value) {
  if (outputNames_.at(i).empty())
    outputNames_[i] = outputs_[i]->name();
  outputs_[i] = value;
}

void Graph::addOutput(Value *value, std::string name) {
  outputs_.push_back(value);
  outputNames_.push_back(std::move(name));
}

bool Graph::isOutput(const Value *value) const {
  return std::find(outputs_.begin(), outputs_.end(), value) != outputs_.end();
}

} // namespace kiln::ir
