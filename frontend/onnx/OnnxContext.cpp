// ImportContext and OnnxAttrs: operand lookup, lazy materialisation of initializers and
// known values, and typed attribute reads.
#include "frontend/onnx/OnnxContext.h"

#include "frontend/onnx/OnnxSymbolic.h"

#include <algorithm>

namespace kiln::frontend {

// ---- OnnxAttrs ----------------------------------------------------------------------------

const onnx::AttributeProto *OnnxAttrs::find(const std::string &name) const {
  for (const auto &attr : node_.attribute())
    if (attr.name() == name)
      return &attr;
  return nullptr;
}

const onnx::AttributeProto &OnnxAttrs::expect(const onnx::AttributeProto &attr,
                                              onnx::AttributeProto::AttributeType type) const {
  if (attr.type() != type)
    fail("attribute '{}' must be of type {}, got {}", attr.name(), onnx::AttributeProto::AttributeType_Name(type),
         onnx::AttributeProto::AttributeType_IsValid(attr.type())
             ? onnx::AttributeProto::AttributeType_Name(attr.type())
             : std::string("an unknown type"));
  return attr;
}

std::optional<int64_t> OnnxAttrs::optInt(const std::string &name) const {
  const onnx::AttributeProto *attr = find(name);
  if (!attr)
    return std::nullopt;
  return expect(*attr, onnx::AttributeProto::INT).i();
}

int64_t OnnxAttrs::getInt(const std::string &name, int64_t fallback) const { return optInt(name).value_or(fallback); }

double OnnxAttrs::getFloat(const std::string &name, double fallback) const {
  const onnx::AttributeProto *attr = find(name);
  return attr ? expect(*attr, onnx::AttributeProto::FLOAT).f() : fallback;
}

std::string OnnxAttrs::getString(const std::string &name, const std::string &fallback) const {
  const onnx::AttributeProto *attr = find(name);
  return attr ? expect(*attr, onnx::AttributeProto::STRING).s() : fallback;
}

std::optional<std::vector<int64_t>> OnnxAttrs::optInts(const std::string &name) const {
  const onnx::AttributeProto *attr = find(name);
  if (!attr)
    return std::nullopt;
  const auto &ints = expect(*attr, onnx::AttributeProto::INTS).ints();
  return std::vector<int64_t>(ints.begin(), ints.end());
}

std::vector<int64_t> OnnxAttrs::getInts(const std::string &name, std::vector<int64_t> fallback) const {
  return optInts(name).value_or(std::move(fallback));
}

std::vector<double> OnnxAttrs::getFloats(const std::string &name, std::vector<double> fallback) const {
  const onnx::AttributeProto *attr = find(name);
  if (!attr)
    return fallback;
  const auto &floats = expect(*attr, onnx::AttributeProto::FLOATS).floats();
  return std::vector<double>(floats.begin(), floats.end());
}

const onnx::TensorProto *OnnxAttrs::getTensor(const std::string &name) const {
  const onnx::AttributeProto *attr = find(name);
  return attr ? &expect(*attr, onnx::AttributeProto::TENSOR).t() : nullptr;
}

// ---- ImportContext ------------------------------------------------------------------------

namespace {

/// The most elements a fixed-value graph input may have and still be folded through.
constexpr int64_t kMaxShapeLikeElements = 64;

/// An integer or bool scalar or short vector: what shape arithmetic computes with.
bool isShapeLike(const TensorType &type) {
  return !isFloat(type.dtype) && type.rank() <= 1 && type.numElements() <= kMaxShapeLikeElements;
}

} // namespace

ImportContext::ImportContext(ir::Graph &graph, int64_t opset, std::string modelDir)
    : graph_(graph), opset_(opset), modelDir_(std::move(modelDir)) {
  mainBuilder_.emplace(graph_);
  builder_ = &*mainBuilder_;
}

int ImportContext::numInputs(const onnx::NodeProto &node) const {
  int n = node.input_size();
  while (n > 0 && node.input(n - 1).empty())
    --n;
  return n;
}

bool ImportContext::hasInput(const onnx::NodeProto &node, int i) const {
  return i >= 0 && i < node.input_size() && !node.input(i).empty();
}

const OnnxValue &ImportContext::operand(const onnx::NodeProto &node, int i) const {
  if (!hasInput(node, i))
    fail("input {} is required but missing", i);
  const OnnxValue *entry = lookup(node.input(i));
  if (!entry)
    fail("input {} '{}' is not produced by an earlier node, a graph input or an initializer", i, node.input(i));
  return *entry;
}

ir::Value *ImportContext::input(const onnx::NodeProto &node, int i) {
  const OnnxValue &entry = operand(node, i);
  return materialize(node.input(i), entry);
}

const TensorType &ImportContext::inputType(const onnx::NodeProto &node, int i) const { return operand(node, i).type; }

std::optional<Tensor> ImportContext::knownInput(const onnx::NodeProto &node, int i) const {
  const OnnxValue &entry = operand(node, i);
  if (!entry.known.defined())
    return std::nullopt;
  return entry.known;
}

Tensor ImportContext::staticInput(const onnx::NodeProto &node, int i, const std::string &what) const {
  std::optional<Tensor> known = knownInput(node, i);
  if (!known)
    fail("input {} ('{}', the {}) must be known at import time - a constant, an initializer or computed from "
         "them and from static shapes - but it depends on graph inputs",
         i, node.input(i), what);
  return *known;
}

std::vector<int64_t> ImportContext::staticInts(const onnx::NodeProto &node, int i, const std::string &what) const {
  Tensor value = staticInput(node, i, what);
  if (value.rank() > 1 || isFloat(value.dtype()) || value.dtype() == DType::Bool)
    fail("the {} (input {}) must be an integer scalar or 1-D tensor, got {}", what, i, value.type().toString());
  std::vector<int64_t> ints;
  for (int64_t k = 0; k < value.numElements(); ++k)
    ints.push_back(value.getInt(k));
  return ints;
}

double ImportContext::staticScalar(const onnx::NodeProto &node, int i, const std::string &what) const {
  Tensor value = staticInput(node, i, what);
  if (value.numElements() != 1)
    fail("the {} (input {}) must hold one element, got {}", what, i, value.type().toString());
  return value.getDouble(0);
}

ir::Value *ImportContext::op(ir::OpKind op, const std::vector<ir::Value *> &inputs, ir::AttrMap attrs) {
  return builder_->create(op, inputs, std::move(attrs));
}

std::vector<ir::Value *> ImportContext::opMulti(ir::OpKind op, const std::vector<ir::Value *> &inputs,
                                                ir::AttrMap attrs) {
  return builder_->createMulti(op, inputs, std::move(attrs));
}

ir::Value *ImportContext::constant(const Tensor &value) { return builder_->constant(value); }

ir::Value *ImportContext::scalarLike(const ir::Value *like, double value) {
  return builder_->scalar(like->dtype(), value);
}

// ---- definitions --------------------------------------------------------------------------

void ImportContext::defineInput(const std::string &name, ir::Value *value, const Tensor &known) {
  defineValue(name, value);
  values_[name].known = known;
}

void ImportContext::defineInitializer(const std::string &name, const Tensor &value) {
  OnnxValue entry;
  entry.known = value;
  entry.type = value.type();
  entry.isInitializer = true;
  values_[name] = entry;
  initializerOrder_.push_back(name);
}

void ImportContext::defineValue(const std::string &name, ir::Value *value) {
  OnnxValue entry;
  entry.value = value;
  entry.type = value->type();
  // A mapper that computed a constant (Shape, Size) made it known for later static reads.
  if (value->producer() && value->producer()->op() == ir::OpKind::Constant) {
    entry.known = value->producer()->attrTensor("value");
    // One holding a symbolic dim (Shape of a symbolic input) stays known only, for the ops
    // that move it or read it as dims; materialize() refuses it as a tensor of the graph.
    if (holdsSymbolicDims(entry.known) && !value->hasUses() && !scratch_) {
      value->graph()->eraseNode(value->producer());
      entry.value = nullptr;
    }
  }
  values_[name] = entry;
}

void ImportContext::defineKnown(const std::string &name, const Tensor &value) {
  OnnxValue entry;
  entry.known = value;
  entry.type = value.type();
  values_[name] = entry;
}

const OnnxValue *ImportContext::lookup(const std::string &name) const {
  auto it = values_.find(name);
  return it == values_.end() ? nullptr : &it->second;
}

bool ImportContext::canFold(const onnx::NodeProto &node) const {
  for (int i = 0; i < node.input_size(); ++i) {
    if (node.input(i).empty())
      continue;
    const OnnxValue *entry = lookup(node.input(i));
    if (!entry || !entry->known.defined() || (entry->isInitializer && isFloat(entry->type.dtype)))
      return false;
    if (entry->value && entry->value->isGraphInput() && !isShapeLike(entry->type))
      return false;
  }
  return true;
}

ir::Value *ImportContext::materialize(const std::string &name) {
  const OnnxValue *entry = lookup(name);
  if (!entry)
    fail("value '{}' is not defined", name);
  return materialize(name, *entry);
}

ir::Value *ImportContext::materialize(const std::string &name, const OnnxValue &entry) {
  if (scratch_) {
    auto it = scratchValues_.find(name);
    if (it != scratchValues_.end())
      return it->second;
    if (!entry.known.defined())
      fail("internal error: folding a node whose input '{}' is not known", name);
    ir::Value *value = scratchBuilder_->constant(entry.known);
    scratchValues_[name] = value;
    return value;
  }
  if (entry.value)
    return entry.value;
  // A symbolic dim's value may move through folded shape computations and come back as a dim
  // (frontend/onnx/OnnxSymbolic.h), but a tensor of the graph would hold its encoding.
  if (holdsSymbolicDims(entry.known))
    fail("'{}' holds a symbolic dim (from a Shape of a symbolic input), which a tensor of the graph cannot hold "
         "yet; fix the dims (kiln-run --dim, or input shapes) to import this model",
         name);
  OnnxValue &stored = values_.at(name);
  stored.value =
      entry.isInitializer ? mainBuilder_->param(name, entry.type, entry.known) : mainBuilder_->constant(entry.known);
  stored.value->setName(name);
  return stored.value;
}

void ImportContext::setScratch(ir::Graph *scratch) {
  scratch_ = scratch;
  scratchValues_.clear();
  if (scratch) {
    scratchBuilder_.emplace(*scratch);
    builder_ = &*scratchBuilder_;
  } else {
    scratchBuilder_.reset();
    builder_ = &*mainBuilder_;
  }
}

ir::Value *ImportContext::randomOffset() {
  if (randomOffset_)
    return randomOffset_;
  if (lookup(ir::random::kOffsetParam))
    fail("the model has a value named '{}', the name kiln gives the random offset of Dropout in training mode",
         ir::random::kOffsetParam);
  randomOffset_ = mainBuilder_->param(ir::random::kOffsetParam, TensorType{DType::I64, {}}, Tensor::scalar(DType::I64, 0));
  return randomOffset_;
}

void ImportContext::hoistParams() {
  std::vector<ir::Node *> params;
  for (const std::string &name : initializerOrder_) {
    const OnnxValue &entry = values_.at(name);
    if (entry.value && entry.value->producer() && entry.value->producer()->op() == ir::OpKind::Param)
      params.push_back(entry.value->producer());
  }
  if (randomOffset_)
    params.push_back(randomOffset_->producer());
  // Moving each to the front, last first, leaves them at the top in initializer order.
  for (auto it = params.rbegin(); it != params.rend(); ++it)
    if (*it != graph_.firstNode())
      graph_.moveBefore(*it, graph_.firstNode());
}

} // namespace kiln::frontend
