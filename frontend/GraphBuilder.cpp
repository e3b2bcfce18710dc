#include "frontend/GraphBuilder.h"

#include <cctype>

#include "core/Error.h"
#include "core/ShapeMath.h"
#include "ir/Verifier.h"
#include "ir/ops/Random.h"

namespace kiln::frontend {

namespace {

// Value names appear in IR text as %name, where a leading digit would collide with the
// printer's numbering of unnamed values; so a name is an identifier, dots allowed after the
// first character (as in "fc1.out").
void checkValueName(const std::string &name, std::string_view what) {
  bool ok = !name.empty() && (std::isalpha(static_cast<unsigned char>(name[0])) || name[0] == '_');
  for (char c : name)
    ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.');
  if (!ok)
    fail("{}: '{}' is not a valid name (letters, digits, '_' and '.', not starting with a digit)", what,
         name);
}

} // namespace

ir::Value *Var::value() const {
  if (!value_)
    fail("use of an undefined Var (a default-constructed Var stands for 'no tensor')");
  return value_;
}

GraphBuilder &Var::builder() const {
  if (!builder_)
    fail("use of an undefined Var (a default-constructed Var stands for 'no tensor')");
  return *builder_;
}

int64_t Var::dim(int64_t axis) const {
  return shape()[static_cast<size_t>(normalizeAxis(axis, rank(), fmt::format("dim of {}", type().toString())))];
}

Var &Var::setName(const std::string &name) {
  builder().nameValue(value(), name);
  return *this;
}

GraphBuilder::GraphBuilder(std::string graphName)
    : graphName_(std::move(graphName)), graph_(std::make_unique<ir::Graph>(graphName_)),
      builder_(std::make_unique<ir::Builder>(*graph_)) {}

GraphBuilder::~GraphBuilder() = default;

void GraphBuilder::requireOpen(std::string_view what) const {
  if (!graph_)
    fail("{}: graph @{} is already finished; start a new GraphBuilder", what, graphName_);
}

const ir::Graph &GraphBuilder::graph() const {
  requireOpen("graph()");
  return *graph_;
}

ir::Value *GraphBuilder::operand(const Var &var, std::string_view what, size_t index) const {
  if (!var.defined())
    fail("{}: operand {} is undefined", what, index);
  if (&var.builder() != this)
    fail("{}: operand {} ({}) belongs to another GraphBuilder (@{}), not @{}", what, index,
         var.type().toString(), var.builder().graphName(), graphName_);
  return var.value();
}

void GraphBuilder::nameValue(ir::Value *value, const std::string &name) {
  requireOpen("setName");
  if (value->graph() != graph_.get())
    fail("setName('{}'): the value belongs to another graph", name);
  if (value->name() == name)
    return;
  checkValueName(name, "setName");
  if (valueNames_.count(name))
    fail("setName: the name '{}' is already used by another value of graph @{}", name, graphName_);
  valueNames_.erase(value->name());
  valueNames_.insert(name);
  value->setName(name);
}

Var GraphBuilder::input(const std::string &name, DType dtype, Shape shape) {
  return input(name, TensorType{dtype, std::move(shape)});
}

Var GraphBuilder::input(const std::string &name, const TensorType &type) {
  requireOpen(fmt::format("input '{}'", name));
  checkValueName(name, "input");
  if (valueNames_.count(name))
    fail("input '{}': the name is already used in graph @{}", name, graphName_);
  // No negative dim, and kiln's size limit; symbolic dims (GraphBuilder::dim) are allowed.
  checkShapeWithinLimit(type.shape, fmt::format("input '{}': shape", name));
  valueNames_.insert(name);
  return Var(graph_->addInput(type, name), this);
}

Var GraphBuilder::addParam(const std::string &name, const TensorType &type, const Tensor &init) {
  requireOpen(fmt::format("param '{}'", name));
  auto existing = params_.find(name);
  if (existing != params_.end()) {
    const Tensor &held = existing->second.value()->producer()->attrTensor("value");
    bool sameTensor = held.defined() == init.defined() && existing->second.type() == type &&
                      (!init.defined() || held.data() == init.data());
    if (!sameTensor)
      fail("param '{}': graph @{} already has a parameter of that name holding another tensor", name,
           graphName_);
    return existing->second;
  }
  Var var(builder_->param(name, type, init), this);
  params_.emplace(name, var);
  return var;
}

Var GraphBuilder::param(const std::string &name, const Tensor &init) {
  if (!init.defined())
    fail("param '{}': the initial value is undefined; pass a TensorType instead", name);
  return addParam(name, init.type(), init);
}

Var GraphBuilder::param(const std::string &name, const TensorType &type) {
  return addParam(name, type, Tensor());
}

Var GraphBuilder::constant(const Tensor &value) {
  requireOpen("constant");
  return Var(builder_->constant(value), this);
}

Var GraphBuilder::scalar(double value, DType dtype) { return constant(Tensor::scalar(dtype, value)); }

Var GraphBuilder::iota(Shape shape, int64_t axis, DType dtype) {
  return op(ir::OpKind::Iota, {}, {{"shape", std::move(shape)}, {"axis", axis}, {"dtype", dtype}});
}

Var GraphBuilder::op(ir::OpKind op, const std::vector<Var> &inputs, ir::AttrMap attrs) {
  std::vector<Var> outputs = opMulti(op, inputs, std::move(attrs));
  if (outputs.size() != 1)
    fail("{}: produces {} outputs where one was expected", ir::opName(op), outputs.size());
  return outputs[0];
}

std::vector<Var> GraphBuilder::opMulti(ir::OpKind op, const std::vector<Var> &inputs, ir::AttrMap attrs) {
  requireOpen(ir::opName(op));
  std::vector<ir::Value *> values;
  for (size_t i = 0; i < inputs.size(); ++i)
    values.push_back(operand(inputs[i], ir::opName(op), i));
  // The core builder's kiln::Error already names the op and the operand types; it propagates
  // unchanged to the user's call.
  std::vector<Var> outputs;
  for (ir::Value *value : builder_->createMulti(op, values, std::move(attrs)))
    outputs.emplace_back(value, this);
  return outputs;
}

namespace {

/// The parameter a Var stands for: its param node's name; kiln::Error otherwise.
const std::string &paramName(const Var &var, std::string_view what) {
  const ir::Node *producer = var.value()->producer();
  if (!producer || producer->op() != ir::OpKind::Param)
    fail("{}: expects a parameter (a Var from GraphBuilder::param), got a value of type {}", what,
         var.type().toString());
  return producer->attrString("name");
}

} // namespace

void GraphBuilder::writeBuffer(const Var &param, const Var &newValue) {
  requireOpen("writeBuffer");
  const std::string &name = paramName(param, "writeBuffer");
  ir::Value *value = operand(newValue, fmt::format("writeBuffer of '{}'", name), 1);
  operand(param, fmt::format("writeBuffer of '{}'", name), 0);
  if (value->type() != param.type())
    fail("writeBuffer: the new value of parameter '{}' has type {}, the parameter {}", name,
         value->type().toString(), param.type().toString());
  for (auto &[written, pending] : pendingWrites_)
    if (written == name) {
      pending = newValue;
      return;
    }
  pendingWrites_.emplace_back(name, newValue);
}

Var GraphBuilder::currentValue(const Var &param) const {
  requireOpen("currentValue");
  const std::string &name = paramName(param, "currentValue");
  for (const auto &[written, pending] : pendingWrites_)
    if (written == name)
      return pending;
  return param;
}

Var GraphBuilder::randomOffset() {
  requireOpen("randomOffset");
  auto existing = params_.find(ir::random::kOffsetParam);
  if (existing != params_.end())
    return existing->second;
  Var offset = param(ir::random::kOffsetParam, Tensor::scalar(DType::I64, 0));
  writeBuffer(offset, op(ir::OpKind::Add, {offset, scalar(1, DType::I64)}));
  return offset;
}

Var GraphBuilder::randomUniform(Shape shape, int64_t seed, DType dtype) {
  requireOpen("randomUniform");
  // A module traced twice into one graph draws two independent masks.
  int64_t streamSeed = ir::random::streamSeed(seed, streamsDrawn_[seed]++);
  return op(ir::OpKind::RandomUniform, {randomOffset()},
            {{"shape", std::move(shape)}, {"dtype", dtype}, {"seed", streamSeed}});
}

std::unique_ptr<ir::Graph> GraphBuilder::finish(const std::vector<Var> &outputs) {
  requireOpen("finish");
  std::vector<ir::Value *> values;
  for (size_t i = 0; i < outputs.size(); ++i)
    values.push_back(operand(outputs[i], "finish", i));
  // The buffers' new values ride along as extra outputs, by name (buildTrainingGraph finds
  // them so); a value the caller named keeps its name.
  std::vector<BufferWrite> writes;
  for (const auto &[param, pending] : pendingWrites_) {
    ir::Value *value = pending.value();
    if (value->name().empty()) {
      // A prefix, since a parameter name may start with a digit ("0.running_mean").
      std::string name = "next." + param;
      for (int k = 1; valueNames_.count(name); ++k)
        name = fmt::format("next{}.{}", k, param);
      nameValue(value, name);
    }
    values.push_back(value);
    writes.push_back(BufferWrite{value->name(), param});
  }
  graph_->setOutputs(values);
  ir::verify(*graph_);
  builder_.reset();
  params_.clear();
  pendingWrites_.clear();
  bufferWrites_ = std::move(writes);
  return std::move(graph_);
}

std::unique_ptr<ir::Graph> GraphBuilder::finish(const std::vector<std::pair<std::string, Var>> &namedOutputs) {
  std::vector<Var> outputs;
  for (size_t i = 0; i < namedOutputs.size(); ++i) {
    const auto &[name, var] = namedOutputs[i];
    nameValue(operand(var, "finish", i), name);
    outputs.push_back(var);
  }
  return finish(outputs);
}

} // namespace kiln::frontend
