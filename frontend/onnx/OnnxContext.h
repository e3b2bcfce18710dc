#pragma once
// ImportContext: the state the op mappers share while one ONNX graph becomes a kiln graph.
//
// Every ONNX value name maps to what is known about it: an IR value, a tensor known at import
// time (Constant nodes, folded Shape subgraphs), or an initializer, which is known *and*
// becomes a parameter when an op consumes it as data. Known values are materialised as IR
// values only when a mapper asks for them as operands, so a shape computation leaves no nodes
// behind. Mappers read static operands (shapes, axes, pads) with staticInput(); when such an
// operand is not known at import time, that is an unsupported-model error naming the node.
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <onnx/onnx_pb.h>

#include "core/Error.h"
#include "ir/Builder.h"
#include "ir/ops/Random.h"

namespace kiln::frontend {

/// Typed reads of a node's attributes with ONNX defaults. A wrong attribute type is an error
/// naming the attribute (the checker catches most before, this keeps the mappers safe).
class OnnxAttrs {
public:
  explicit OnnxAttrs(const onnx::NodeProto &node) : node_(node) {}

  const onnx::AttributeProto *find(const std::string &name) const;
  bool has(const std::string &name) const { return find(name) != nullptr; }
  int64_t getInt(const std::string &name, int64_t fallback) const;
  std::optional<int64_t> optInt(const std::string &name) const;
  double getFloat(const std::string &name, double fallback) const;
  std::string getString(const std::string &name, const std::string &fallback) const;
  std::vector<int64_t> getInts(const std::string &name, std::vector<int64_t> fallback = {}) const;
  std::optional<std::vector<int64_t>> optInts(const std::string &name) const;
  std::vector<double> getFloats(const std::string &name, std::vector<double> fallback = {}) const;
  /// A tensor attribute, or nullptr when absent.
  const onnx::TensorProto *getTensor(const std::string &name) const;

private:
  const onnx::AttributeProto &expect(const onnx::AttributeProto &attr, onnx::AttributeProto::AttributeType type) const;
  const onnx::NodeProto &node_;
};

/// What one ONNX value name stands for.
struct OnnxValue {
  ir::Value *value = nullptr; // in the main graph; null until materialised
  Tensor known;               // defined when the value is known at import time
  TensorType type;            // of `value` or `known`
  bool isInitializer = false; // becomes a parameter named after it when used as data
};

class ImportContext {
public:
  ImportContext(ir::Graph &graph, int64_t opset, std::string modelDir);

  int64_t opset() const { return opset_; }
  const std::string &modelDir() const { return modelDir_; }
  /// The builder of the graph being built (a scratch graph while folding).
  ir::Builder &builder() { return *builder_; }

  // ---- operands of the node being mapped ----
  /// Number of operands, not counting omitted trailing optional ones.
  int numInputs(const onnx::NodeProto &node) const;
  /// Whether operand i is present (ONNX writes an omitted optional operand as "").
  bool hasInput(const onnx::NodeProto &node, int i) const;
  /// Operand i as an IR value; initializers and known values are materialised on first use.
  ir::Value *input(const onnx::NodeProto &node, int i);
  /// Operand i's type, without materialising it.
  const TensorType &inputType(const onnx::NodeProto &node, int i) const;
  /// Operand i's value when known at import time.
  std::optional<Tensor> knownInput(const onnx::NodeProto &node, int i) const;
  /// Operand i's value, which kiln needs at import time; `what` names it in the error.
  Tensor staticInput(const onnx::NodeProto &node, int i, const std::string &what) const;
  /// A static integer operand of rank <= 1, as a list.
  std::vector<int64_t> staticInts(const onnx::NodeProto &node, int i, const std::string &what) const;
  /// A static one-element operand, as a double.
  double staticScalar(const onnx::NodeProto &node, int i, const std::string &what) const;

  // ---- building ----
  ir::Value *op(ir::OpKind op, const std::vector<ir::Value *> &inputs, ir::AttrMap attrs = {});
  std::vector<ir::Value *> opMulti(ir::OpKind op, const std::vector<ir::Value *> &inputs, ir::AttrMap attrs = {});
  ir::Value *constant(const Tensor &value);
  /// A rank-0 constant of `like`'s dtype.
  ir::Value *scalarLike(const ir::Value *like, double value);

  // ---- random streams (Dropout in training mode) ----
  /// The graph's random offset, the i64 parameter ir::random::kOffsetParam (initial value 0),
  /// created in the main graph on first use; a training step advances it.
  ir::Value *randomOffset();
  /// The seed of the next stream drawn with `seed` (ir::random::streamSeed): two nodes with
  /// one seed draw independent numbers.
  int64_t nextStreamSeed(int64_t seed) { return ir::random::streamSeed(seed, streamsDrawn_[seed]++); }

  // ---- used by the driver ----
  /// A graph input; `known` (may be undefined) is its value fixed at import time.
  void defineInput(const std::string &name, ir::Value *value, const Tensor &known = Tensor());
  void defineInitializer(const std::string &name, const Tensor &value);
  void defineValue(const std::string &name, ir::Value *value);
  void defineKnown(const std::string &name, const Tensor &value);
  const OnnxValue *lookup(const std::string &name) const;
  /// Whether every present operand is known and may be folded: constants, integer or bool
  /// initializers (float ones are weights and stay parameters), and fixed-value graph inputs
  /// that look like shape arithmetic (integer or bool scalars and short vectors; anything
  /// else is data and stays an input, so the graph still computes on it).
  bool canFold(const onnx::NodeProto &node) const;
  /// Materialises `name` in the main graph (graph outputs use this).
  ir::Value *materialize(const std::string &name);
  /// Directs building into `scratch` (folding) or, with nullptr, back to the main graph.
  void setScratch(ir::Graph *scratch);
  /// Moves the parameters to the top of the graph, in initializer order.
  void hoistParams();

private:
  const OnnxValue &operand(const onnx::NodeProto &node, int i) const;
  ir::Value *materialize(const std::string &name, const OnnxValue &entry);

  ir::Graph &graph_;
  int64_t opset_;
  std::string modelDir_;
  std::optional<ir::Builder> mainBuilder_, scratchBuilder_;
  ir::Builder *builder_;
  ir::Graph *scratch_ = nullptr;
  std::unordered_map<std::string, OnnxValue> values_;
  std::unordered_map<std::string, ir::Value *> scratchValues_;
  std::vector<std::string> initializerOrder_;
  ir::Value *randomOffset_ = nullptr;
  std::unordered_map<int64_t, int64_t> streamsDrawn_;
};

} // namespace kiln::frontend
