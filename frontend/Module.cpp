#include "frontend/Module.h"

#include <cmath>
#include <set>

#include "core/Error.h"
#include "core/ShapeMath.h"
#include "ir/ops/Random.h"

namespace kiln::frontend::nn {

double Generator::uniform(double low, double high) {
  // 53 random bits scaled into [0, 1): std::uniform_real_distribution's algorithm is left to
  // the library, and initial weights should not change with the standard library.
  double unit = static_cast<double>(engine_() >> 11) * 0x1.0p-53;
  return low + (high - low) * unit;
}

int64_t Generator::streamSeed() {
  ++streams_;
  return static_cast<int64_t>(ir::random::mix(ir::random::mix(seed_) + streams_ * ir::random::kGolden) >> 1);
}

Generator &defaultGenerator() {
  static Generator generator(0);
  return generator;
}

void manualSeed(uint64_t seed) { defaultGenerator().seed(seed); }

Tensor uniformTensor(const TensorType &type, double low, double high, Generator &generator) {
  Tensor t(type);
  for (int64_t i = 0; i < t.numElements(); ++i)
    t.setDouble(i, generator.uniform(low, high));
  return t;
}

Tensor fullTensor(const TensorType &type, double value) {
  Tensor t(type);
  for (int64_t i = 0; i < t.numElements(); ++i)
    t.setDouble(i, value);
  return t;
}

double defaultInitBound(const Shape &weightShape) {
  int64_t fanIn = weightShape.empty() ? 1 : elementCount(weightShape, 1, weightShape.size(), "weight shape");
  return fanIn > 0 ? 1.0 / std::sqrt(static_cast<double>(fanIn)) : 0.0;
}

Var Module::operator()(const Var &input) {
  try {
    return forward(input);
  } catch (const Error &e) {
    std::string message = e.what();
    if (message.rfind("in module ", 0) == 0) // an inner module already named itself
      throw;
    throw Error(fmt::format("in module {}: {}", describe(), message));
  }
}

std::string Module::describe() const {
  return path_.empty() ? typeName_ : fmt::format("'{}' ({})", path_, typeName_);
}

void Module::train(bool training) {
  training_ = training;
  for (auto &[name, child] : children_)
    child->train(training);
}

void Module::checkNewName(const std::string &name) const {
  if (name.empty() || name.find('.') != std::string::npos)
    fail("{}: '{}' is not a valid parameter or module name (non-empty, no '.')", describe(), name);
  for (const Entry &entry : tensors_)
    if (entry.name == name)
      fail("{}: '{}' is already registered", describe(), name);
  for (const auto &child : children_)
    if (child.first == name)
      fail("{}: '{}' is already registered", describe(), name);
}

void Module::registerParameter(const std::string &name, Tensor value) {
  checkNewName(name);
  tensors_.push_back({name, std::move(value), false});
}

void Module::registerBuffer(const std::string &name, Tensor value) {
  checkNewName(name);
  tensors_.push_back({name, std::move(value), true});
}

void Module::registerModule(const std::string &name, std::shared_ptr<Module> module) {
  checkNewName(name);
  if (!module)
    fail("{}: child module '{}' is null", describe(), name);
  module->setPath(path_.empty() ? name : path_ + "." + name);
  children_.emplace_back(name, std::move(module));
}

void Module::setPath(std::string path) {
  path_ = std::move(path);
  for (auto &[name, child] : children_)
    child->setPath(path_ + "." + name);
}

template <typename Self, typename Fn> void Module::forEachEntry(Self &self, const std::string &prefix, Fn &&fn) {
  // PyTorch's state_dict order: a module's parameters, then its buffers, then its children.
  for (bool buffers : {false, true})
    for (auto &entry : self.tensors_)
      if (entry.isBuffer == buffers)
        fn(prefix + entry.name, entry);
  for (auto &[name, child] : self.children_)
    forEachEntry(static_cast<Self &>(*child), prefix + name + ".", fn);
}

NamedTensors Module::collect(bool parameters, bool buffers) const {
  NamedTensors out;
  forEachEntry(*this, "", [&](const std::string &name, const Entry &entry) {
    if (entry.isBuffer ? buffers : parameters)
      out.emplace_back(name, entry.value);
  });
  return out;
}

NamedTensors Module::namedParameters() const { return collect(true, false); }
NamedTensors Module::namedBuffers() const { return collect(false, true); }
NamedTensors Module::stateDict() const { return collect(true, true); }

int64_t Module::numParameters() const {
  int64_t total = 0;
  for (const auto &[name, value] : namedParameters())
    total = checkedAdd(total, value.numElements(), "parameter count");
  return total;
}

void Module::loadStateDict(const std::map<std::string, Tensor> &state, bool strict) {
  // Check everything before changing anything, so a failed load leaves the module as it was.
  std::set<std::string> known;
  std::vector<std::pair<Entry *, Tensor>> updates;
  forEachEntry(*this, "", [&](const std::string &name, Entry &entry) {
    known.insert(name);
    auto given = state.find(name);
    if (given == state.end()) {
      if (strict)
        fail("loadStateDict ({}): missing '{}' ({})", describe(), name, entry.value.type().toString());
      return;
    }
    if (!given->second.defined() || given->second.type() != entry.value.type())
      fail("loadStateDict ({}): '{}' has type {}, the module's is {}", describe(), name,
           given->second.defined() ? given->second.type().toString() : "undefined", entry.value.type().toString());
    updates.emplace_back(&entry, given->second.clone());
  });
  if (strict)
    for (const auto &[name, value] : state)
      if (!known.count(name))
        fail("loadStateDict ({}): unexpected '{}'", describe(), name);
  for (auto &[entry, value] : updates)
    entry->value = std::move(value);
}

const Tensor &Module::tensor(const std::string &localName) const {
  for (const Entry &entry : tensors_)
    if (entry.name == localName)
      return entry.value;
  fail("{}: has no parameter or buffer '{}'", describe(), localName);
}

bool Module::hasTensor(const std::string &localName) const {
  for (const Entry &entry : tensors_)
    if (entry.name == localName)
      return true;
  return false;
}

Var Module::tensorVar(const Var &like, const std::string &localName) const {
  std::string name = path_.empty() ? localName : path_ + "." + localName;
  return like.builder().param(name, tensor(localName));
}

Sequential::Sequential(std::initializer_list<std::shared_ptr<Module>> modules) : Module("Sequential") {
  for (const auto &module : modules)
    add(module);
}

Sequential &Sequential::add(std::shared_ptr<Module> module) {
  registerModule(std::to_string(size()), std::move(module));
  return *this;
}

const std::shared_ptr<Module> &Sequential::operator[](size_t index) const {
  if (index >= size())
    fail("Sequential: index {} is out of range for {} modules", index, size());
  return namedChildren()[index].second;
}

Var Sequential::forward(const Var &input) {
  Var x = input;
  for (const auto &[name, module] : namedChildren())
    x = (*module)(x);
  return x;
}

} // namespace kiln::frontend::nn
