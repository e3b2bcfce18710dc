#pragma once
// nn modules: objects that hold parameters and, when called on a Var, record their
// computation into that Var's graph (tracing). Parameters become named `param` nodes that
// carry their current values, named as PyTorch's state_dict names them ("fc1.weight",
// "features.0.bias"), so weights can be exchanged with PyTorch by name.
//
// Initial values come from a seeded generator (manualSeed, like torch.manual_seed) with
// PyTorch's default initialisation schemes; the numbers themselves differ from torch's, the
// distributions do not.
#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "frontend/GraphBuilder.h"

namespace kiln::frontend::nn {

/// A reproducible random source for parameter initialisation.
class Generator {
public:
  explicit Generator(uint64_t seed = 0) : engine_(seed), seed_(seed) {}
  void seed(uint64_t seed) {
    engine_.seed(seed);
    seed_ = seed;
    streams_ = 0;
  }
  /// A draw from U[low, high), computed the same way on every platform.
  double uniform(double low, double high);
  /// A seed for a random stream (Dropout's): the k-th since seeding is a hash of (seed, k).
  /// Counted apart from uniform()'s draws, so adding a Dropout does not change the initial
  /// weights of the layers after it.
  int64_t streamSeed();

private:
  std::mt19937_64 engine_;
  uint64_t seed_ = 0;
  uint64_t streams_ = 0;
};

/// The generator modules use unless given another; seeded with 0 at start.
Generator &defaultGenerator();
/// Reseeds the default generator.
void manualSeed(uint64_t seed);

/// A tensor of `type` with elements drawn from U[low, high).
Tensor uniformTensor(const TensorType &type, double low, double high, Generator &generator = defaultGenerator());
/// A tensor of `type` with every element `value`.
Tensor fullTensor(const TensorType &type, double value);
/// PyTorch's fan-in of a Linear or Conv weight [out, in/groups, kernel...]: in/groups * kernel
/// elements. Its default init (kaiming_uniform with a = sqrt(5)) and the bias init are both
/// U(-1/sqrt(fanIn), 1/sqrt(fanIn)); this returns that bound (0 when fanIn is 0).
double defaultInitBound(const Shape &weightShape);

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

class Module {
public:
  explicit Module(std::string typeName) : typeName_(std::move(typeName)) {}
  virtual ~Module() = default;
  Module(const Module &) = delete;
  Module &operator=(const Module &) = delete;

  /// Records the module's computation on `input` into input's graph.
  virtual Var forward(const Var &input) = 0;
  /// forward, with any kiln::Error prefixed by this module's name and type (the innermost
  /// module names itself; the op and shapes from the core builder stay in the message).
  Var operator()(const Var &input);

  const std::string &typeName() const { return typeName_; }
  /// The dotted name under the module it was registered in ("features.0"); "" for a root.
  /// Graph parameters are named path + "." + local name.
  const std::string &path() const { return path_; }

  /// Training mode (the default, as in PyTorch) or inference mode, for this module and all
  /// modules below it. Only Dropout and BatchNorm2d behave differently.
  void train(bool training = true);
  void eval() { train(false); }
  bool isTraining() const { return training_; }

  /// Trainable parameters, named relative to this module, in PyTorch's order (own ones in
  /// registration order, then each child's).
  NamedTensors namedParameters() const;
  /// Buffers (running statistics), in the same order.
  NamedTensors namedBuffers() const;
  /// Parameters and buffers as PyTorch's state_dict orders them.
  NamedTensors stateDict() const;
  /// Replaces values by name; every tensor must keep its type. With `strict`, missing and
  /// unexpected names are errors too.
  void loadStateDict(const std::map<std::string, Tensor> &state, bool strict = true);
  int64_t numParameters() const;
  const std::vector<std::pair<std::string, std::shared_ptr<Module>>> &namedChildren() const { return children_; }

  /// This module's own parameter or buffer by local name ("weight").
  const Tensor &tensor(const std::string &localName) const;
  bool hasTensor(const std::string &localName) const;

protected:
  void registerParameter(const std::string &name, Tensor value);
  void registerBuffer(const std::string &name, Tensor value);
  void registerModule(const std::string &name, std::shared_ptr<Module> module);
  /// The parameter or buffer `localName` as a param node of the graph `like` belongs to
  /// (created on first use, shared by later calls).
  Var tensorVar(const Var &like, const std::string &localName) const;
  /// "'features.0' (Conv2d)" or "Conv2d" for a root: how errors name the module.
  std::string describe() const;

private:
  struct Entry {
    std::string name;
    Tensor value;
    bool isBuffer;
  };
  void setPath(std::string path);
  /// Calls fn(qualified name, entry) for every parameter and buffer of `self` and the modules
  /// below it, in state_dict order; `Self` is Module or const Module (defined in Module.cpp).
  template <typename Self, typename Fn> static void forEachEntry(Self &self, const std::string &prefix, Fn &&fn);
  NamedTensors collect(bool parameters, bool buffers) const;
  void checkNewName(const std::string &name) const;

  std::string typeName_;
  std::string path_;
  bool training_ = true;
  std::vector<Entry> tensors_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
};

/// Applies its children in order; they are named "0", "1", ... as in PyTorch.
class Sequential : public Module {
public:
  Sequential() : Module("Sequential") {}
  Sequential(std::initializer_list<std::shared_ptr<Module>> modules);
  /// Appends a module (named by its position) and returns *this.
  Sequential &add(std::shared_ptr<Module> module);
  size_t size() const { return namedChildren().size(); }
  const std::shared_ptr<Module> &operator[](size_t index) const;
  Var forward(const Var &input) override;
};

} // namespace kiln::frontend::nn
