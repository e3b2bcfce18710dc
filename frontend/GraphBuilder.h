#pragma once
// The user-facing graph API. A GraphBuilder owns the graph under construction; a Var is a
// symbolic tensor in it. Free functions (frontend/Math.h, Movement.h, Functional.h)
// and operator overloads create ops through GraphBuilder::op, which goes through the core
// ir::Builder: every op is type-checked when it is created, so a shape or dtype mistake is a
// kiln::Error thrown at the call that made it, naming the op and its operand types.
//
//   GraphBuilder gb("mlp");
//   Var x = gb.input("x", DType::F32, {8, 4});
//   Var w = gb.param("w", randomTensor({DType::F32, {3, 4}}, 0));
//   Var y = relu(linear(x, w)) * 2.0;
//   std::unique_ptr<ir::Graph> graph = gb.finish({y});
//
// Modules traced in training mode also record buffer writes (BatchNorm2d's running statistics,
// Dropout's random offset): finish() appends their new values as extra outputs after the
// caller's, and bufferWrites() lists them for TrainingOptions::buffers.
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/SymbolicDim.h"
#include "ir/BufferWrite.h"
#include "ir/Builder.h"
#include "ir/Graph.h"

namespace kiln::frontend {

class GraphBuilder;

/// A forward output that overwrites a parameter on every training step (TrainingOptions::buffers).
using ir::BufferWrite;

/// A symbolic tensor: one value of a graph under construction, with the builder it belongs to.
/// Cheap to copy. A default-constructed Var is undefined; optional arguments (a bias, a norm's
/// weight) take it to mean "none". A Var must not outlive its GraphBuilder.
class Var {
public:
  Var() = default;
  Var(ir::Value *value, GraphBuilder *builder) : value_(value), builder_(builder) {}

  bool defined() const { return value_ != nullptr; }
  /// The IR value; throws kiln::Error for an undefined Var.
  ir::Value *value() const;
  GraphBuilder &builder() const;

  const TensorType &type() const { return value()->type(); }
  const Shape &shape() const { return value()->shape(); }
  DType dtype() const { return value()->dtype(); }
  int64_t rank() const { return value()->rank(); }
  int64_t numElements() const { return type().numElements(); }
  /// Size of one dimension; a negative axis counts from the end.
  int64_t dim(int64_t axis) const;

  /// The value's name ("" when unnamed). Graph outputs and tools refer to values by it.
  const std::string &name() const { return value()->name(); }
  /// Names the value; the name must be an identifier not used by another value of the graph.
  Var &setName(const std::string &name);

private:
  ir::Value *value_ = nullptr;
  GraphBuilder *builder_ = nullptr;
};

class GraphBuilder {
public:
  explicit GraphBuilder(std::string graphName = "main");
  GraphBuilder(const GraphBuilder &) = delete;
  GraphBuilder &operator=(const GraphBuilder &) = delete;
  ~GraphBuilder();

  /// A graph input; inputs are bound in the order they are declared. Its shape may hold
  /// symbolic dims, so the graph serves every size: gb.input("x", DType::F32, {gb.dim("N"), 3}).
  Var input(const std::string &name, DType dtype, Shape shape);
  Var input(const std::string &name, const TensorType &type);
  /// The symbolic dim `name` (core/SymbolicDim.h) for input shapes: the same name is the same
  /// size in every input. A name that is not an identifier is a kiln::Error.
  static int64_t dim(const std::string &name) { return symbolDim(name); }

  /// A parameter carrying `init` as its initial value. Asking again for the same name with the
  /// same tensor returns the same Var, so a module called twice shares its weights; the same
  /// name with another tensor is an error.
  Var param(const std::string &name, const Tensor &init);
  /// A parameter without an initial value; its value is supplied at evaluation time.
  Var param(const std::string &name, const TensorType &type);

  Var constant(const Tensor &value);
  /// A rank-0 constant.
  Var scalar(double value, DType dtype = DType::F32);
  /// A tensor of `shape` whose elements are their index along `axis` (0, 1, 2, ...).
  Var iota(Shape shape, int64_t axis, DType dtype = DType::I64);

  /// Creates one node of `op` on `inputs` (checked by the core builder) and returns its only
  /// output. Every frontend function ends here.
  Var op(ir::OpKind op, const std::vector<Var> &inputs, ir::AttrMap attrs = {});
  /// The same for ops with several outputs (split).
  std::vector<Var> opMulti(ir::OpKind op, const std::vector<Var> &inputs, ir::AttrMap attrs = {});

  /// Buffers: parameters that a traced forward pass updates rather than an optimizer trains
  /// (BatchNorm's running statistics, the random offset). Records that `newValue` is the next
  /// value of `param` (a Var from param(), of the same type). finish() appends every recorded
  /// new value as an extra graph output after the caller's outputs (named "next.<param>" unless
  /// the value already has a name), and bufferWrites() lists the (output, param) pairs for
  /// TrainingOptions::buffers, so that a compiled training step writes them back in place:
  ///   auto graph = gb.finish({model(x)});
  ///   TrainingOptions options;
  ///   options.buffers = gb.bufferWrites();
  /// Writing a parameter again replaces its earlier write (a later update is computed from the
  /// earlier one through currentValue, as a module called twice updates its statistics twice).
  void writeBuffer(const Var &param, const Var &newValue);
  /// What `param` holds at this point of the trace: its pending new value, else itself.
  Var currentValue(const Var &param) const;
  /// The buffer writes finish() added, in the order first recorded; empty before finish().
  const std::vector<BufferWrite> &bufferWrites() const { return bufferWrites_; }

  /// Numbers uniform in [0, 1) (f32 or f64): a random_uniform op (ir/ops/Random.cpp) reading
  /// randomOffset(). Every call draws its own stream: the op's seed is `seed` for the first
  /// call with that seed on this builder and a mix of `seed` and k for the k-th call after it.
  Var randomUniform(Shape shape, int64_t seed, DType dtype = DType::F32);
  /// The graph's random offset: the i64 scalar parameter "rng_offset" (initial value 0),
  /// created on first use together with its buffer write rng_offset + 1. A training step given
  /// bufferWrites() therefore draws fresh numbers on every step with no recompile and no extra
  /// input, and saves the offset with its parameters; evaluating the traced graph itself
  /// draws the same numbers every time (the parameter's value is the offset).
  Var randomOffset();

  /// Ends construction: sets the graph's outputs (then the buffers' new values, see
  /// writeBuffer), verifies the graph and hands it over. The builder accepts no further calls
  /// afterwards.
  std::unique_ptr<ir::Graph> finish(const std::vector<Var> &outputs);
  /// The same, naming each output value first.
  std::unique_ptr<ir::Graph> finish(const std::vector<std::pair<std::string, Var>> &namedOutputs);

  /// The graph so far, for inspection; throws after finish().
  const ir::Graph &graph() const;
  bool finished() const { return graph_ == nullptr; }
  const std::string &graphName() const { return graphName_; }

  /// Gives `value` (of this builder's graph) a unique name; used by Var::setName.
  void nameValue(ir::Value *value, const std::string &name);

private:
  /// Throws unless the builder is still open; `what` names the call for the message.
  void requireOpen(std::string_view what) const;
  /// Checks that `var` is a defined value of this builder; `what` and `index` name it in errors.
  ir::Value *operand(const Var &var, std::string_view what, size_t index) const;
  Var addParam(const std::string &name, const TensorType &type, const Tensor &init);

  std::string graphName_;
  std::unique_ptr<ir::Graph> graph_;
  std::unique_ptr<ir::Builder> builder_; // refers to *graph_
  std::map<std::string, Var> params_;
  std::set<std::string> valueNames_;
  /// Pending buffer writes (param name, new value), in the order first recorded.
  std::vector<std::pair<std::string, Var>> pendingWrites_;
  std::vector<BufferWrite> bufferWrites_;
  /// How many random streams each seed has given (randomUniform).
  std::map<int64_t, int64_t> streamsDrawn_;
};

} // namespace kiln::frontend
