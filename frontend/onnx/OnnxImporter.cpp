// The import driver, in stages (nothing is built before the checks of stages 1-3):
//   1. read the file under the size limit and parse it (OnnxLoad.cpp);
//   2. structural checks ONNX's checker lacks, then the unsupported-feature scan: every node
//      kiln cannot import, reported in one error;
//   3. static input shapes and ONNX's checker;
//   4. initializers (known values, parameters on first use) and graph inputs;
//   5. each node in order through its mapping function. A node whose operands are all known
//      is mapped into a scratch graph and evaluated with the reference evaluator, so shape
//      arithmetic becomes known tensors instead of nodes;
//   6. graph outputs; ONNX's strict shape inference, now that kiln has validated every op's
//      shapes (ONNX 1.12's inference functions crash on some invalid models), with every
//      value's type checked against kiln's; parameters hoisted, dead nodes removed, the graph
//      verified.
#include "frontend/onnx/OnnxImporter.h"

#include <climits>
#include <set>
#include <unordered_map>

#include "core/ShapeMath.h"
#include "core/SymbolicDim.h"
#include "frontend/onnx/OnnxLoad.h"
#include "frontend/onnx/OnnxOpTable.h"
#include "frontend/onnx/OnnxPayloads.h"
#include "frontend/onnx/OnnxSymbolic.h"
#include "frontend/onnx/OnnxTensor.h"
#include "frontend/onnx/OnnxUnsupported.h"
#include "ir/Evaluator.h"
#include "ir/SymbolicShapes.h"
#include "ir/Verifier.h"

namespace kiln::frontend {

namespace {

/// Folding evaluates at import time; past this many elements in one fold the ops stay in
/// the graph (a ConstantOfShape of a large shape costs nothing until it runs).
constexpr int64_t kMaxFoldElements = int64_t{1} << 22;

/// Static types ONNX's shape inference found, to cross-check kiln's by value name.
using InferredTypes = std::unordered_map<std::string, const onnx::TypeProto_Tensor *>;

InferredTypes inferredTypes(const onnx::GraphProto &graph) {
  InferredTypes types;
  for (const auto &info : graph.value_info())
    if (info.type().has_tensor_type())
      types[info.name()] = &info.type().tensor_type();
  for (const auto &info : graph.output())
    if (info.type().has_tensor_type())
      types[info.name()] = &info.type().tensor_type();
  return types;
}

/// Fails when ONNX inferred a dtype or a fully static shape for `name` that differs from
/// kiln's: either the model is inconsistent or a mapping is wrong, and both must not pass.
void crossCheck(const InferredTypes &inferred, const std::string &name, const TensorType &type) {
  auto it = inferred.find(name);
  if (it == inferred.end())
    return;
  const onnx::TypeProto_Tensor &onnxType = *it->second;
  std::optional<DType> dtype = dtypeFromOnnx(onnxType.elem_type());
  if (dtype && *dtype != type.dtype)
    fail("value '{}' is {} in kiln but {} by ONNX's type inference", name, type.toString(), dtypeName(*dtype));
  if (!onnxType.has_shape())
    return;
  Shape shape;
  for (const auto &dim : onnxType.shape().dim()) {
    if (!dim.has_dim_value())
      return;
    shape.push_back(dim.dim_value());
  }
  if (shape != type.shape)
    fail("value '{}' has shape {} in kiln but {} by ONNX's shape inference", name, shapeToString(type.shape),
         shapeToString(shape));
}

/// ONNX 1.12's pooling inference ignores the ceil_mode rule that drops a last window starting
/// in the right padding (kiln, PyTorch and later ONNX apply it), and its STFT inference takes
/// onesided's default as 0 instead of 1, so those shapes may differ.
bool hasKnownInferenceGap(const onnx::NodeProto &node) {
  if (node.op_type() == "STFT")
    return !OnnxAttrs(node).has("onesided");
  return (node.op_type() == "MaxPool" || node.op_type() == "AveragePool") &&
         OnnxAttrs(node).getInt("ceil_mode", 0) != 0;
}

/// Directs the context's building into a scratch graph for the lifetime of the guard.
class ScratchScope {
public:
  ScratchScope(ImportContext &ctx, ir::Graph &scratch) : ctx_(ctx) { ctx_.setScratch(&scratch); }
  ~ScratchScope() { ctx_.setScratch(nullptr); }
  ScratchScope(const ScratchScope &) = delete;
  ScratchScope &operator=(const ScratchScope &) = delete;

private:
  ImportContext &ctx_;
};

/// Maps the node into a scratch graph and evaluates it; false when it is too large to fold.
bool tryFold(ImportContext &ctx, const OnnxOpEntry &entry, const onnx::NodeProto &node) {
  ir::Graph scratch("fold");
  std::vector<ir::Value *> outputs;
  {
    ScratchScope scope(ctx, scratch);
    outputs = entry.map(ctx, node);
  }
  int64_t elements = 0;
  for (ir::Node *n : scratch.nodes())
    for (ir::Value *v : n->outputs()) {
      elements = checkedAdd(elements, v->type().numElements(), "folded element count");
      if (elements > kMaxFoldElements)
        return false;
    }
  std::vector<std::pair<std::string, ir::Value *>> named;
  for (int k = 0; k < node.output_size() && k < static_cast<int>(outputs.size()); ++k)
    if (!node.output(k).empty())
      named.emplace_back(node.output(k), outputs[k]);
  std::vector<ir::Value *> values;
  for (auto &entryPair : named)
    values.push_back(entryPair.second);
  scratch.setOutputs(values);
  std::vector<Tensor> tensors = ir::evaluate(scratch, {});
  for (size_t k = 0; k < named.size(); ++k)
    ctx.defineKnown(named[k].first, tensors[k]);
  return true;
}

void mapNode(ImportContext &ctx, const onnx::NodeProto &node) {
  for (const std::string &input : node.input())
    if (!input.empty() && !ctx.lookup(input))
      fail("input '{}' is not produced by an earlier node, a graph input or an initializer (ONNX requires nodes "
           "in topological order, so this is a cycle or a missing value)",
           input);
  for (const std::string &output : node.output())
    if (!output.empty() && ctx.lookup(output))
      fail("output '{}' is already defined; ONNX values are assigned exactly once", output);
  const OnnxOpEntry *entry = findOnnxOp(node.op_type());
  if (!entry) // the scan reports these first; kept for safety
    fail("kiln has no mapping for op type '{}'", node.op_type());

  bool folded = foldDimValues(ctx, node) ||
                (ctx.canFold(node) && !isTrainingDropout(ctx, node) && tryFold(ctx, *entry, node));
  if (!folded) {
    std::vector<ir::Value *> outputs = entry->map(ctx, node);
    for (int k = 0; k < node.output_size(); ++k) {
      const std::string &name = node.output(k);
      if (name.empty())
        continue;
      if (k >= static_cast<int>(outputs.size()) || !outputs[k])
        fail("output {} ('{}') is not supported", k, name);
      if (outputs[k]->name().empty() && !outputs[k]->isGraphInput())
        outputs[k]->setName(name);
      ctx.defineValue(name, outputs[k]);
    }
  } else {
    for (const std::string &name : node.output())
      if (!name.empty() && !ctx.lookup(name))
        fail("output '{}' is not supported", name);
  }
  // Every value's type is within kiln's size limit (ir::inferTypes refuses results past it);
  // checked again here, where the node is named, for values a mapping defined without a node.
  for (const std::string &name : node.output())
    if (!name.empty())
      checkShapeWithinLimit(ctx.lookup(name)->type.shape, "shape");
}

/// The same for the values inside each mapping (checked once the graph is complete).
void checkElementCounts(const ir::Graph &graph) {
  for (const ir::Node *node : graph.nodes())
    for (const ir::Value *output : node->outputs())
      checkShapeWithinLimit(output->type().shape, "shape");
}

/// Removes nodes whose results nobody uses (folded constants, unused optional outputs),
/// last first so that whole dead chains go in one pass.
void removeDeadNodes(ir::Graph &graph) {
  std::vector<ir::Node *> nodes = graph.nodes();
  for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) {
    bool used = false;
    for (ir::Value *output : (*it)->outputs())
      used = used || output->hasUses();
    if (!used)
      graph.eraseNode(*it);
  }
}

std::unique_ptr<ir::Graph> importModel(onnx::ModelProto &model, int64_t opset, LiftedPayloads payloads,
                                       const OnnxImportOptions &options, const std::string &modelDir) {
  checkModelStructure(model, modelDir);
  // The scan runs before ONNX's checker, which would stop at the first unknown op type.
  std::string unsupported = unsupportedSummary(model, scanModel(model, opset));
  if (!unsupported.empty())
    throw Error(unsupported);
  resolveInputShapes(model, options);
  runOnnxChecker(model, modelDir);

  const onnx::GraphProto &onnxGraph = model.graph();
  auto graph = std::make_unique<ir::Graph>(onnxGraph.name().empty() ? "main" : onnxGraph.name());
  ImportContext ctx(*graph, opset, modelDir);
  // A lifted payload moves into its tensor (which then owns the bytes alone). The proto keeps
  // the data of the others: ONNX's shape inference reads small initializers later.
  if (!payloads.empty() && payloads.size() != static_cast<size_t>(onnxGraph.initializer_size()))
    fail("internal error: {} initializers, but {} entries of lifted raw_data", onnxGraph.initializer_size(),
         payloads.size());
  for (int i = 0; i < onnxGraph.initializer_size(); ++i) {
    const onnx::TensorProto &init = onnxGraph.initializer(i);
    Tensor lifted = static_cast<size_t>(i) < payloads.size() ? std::move(payloads[i]) : Tensor();
    ctx.defineInitializer(init.name(),
                          decodeTensorProto(init, modelDir, fmt::format("initializer '{}'", init.name()), std::move(lifted)));
  }
  for (const auto &input : onnxGraph.input()) {
    if (ctx.lookup(input.name())) // an initializer listed as an input (IR < 4 style): a parameter
      continue;
    const onnx::TypeProto_Tensor &tensor = input.type().tensor_type();
    // Held dtype: an int16/uint16/uint32/uint64 input is widened (the scan refused every op
    // that could wrap around in its ONNX type).
    TensorType type{heldDType(tensor.elem_type(), fmt::format("graph input '{}'", input.name())), {}};
    for (const auto &dim : tensor.shape().dim()) // resolveInputShapes left only values and symbols
      type.shape.push_back(dim.has_dim_param() ? symbolDim(dim.dim_param()) : dim.dim_value());
    Tensor known;
    if (auto given = options.inputValues.find(input.name()); given != options.inputValues.end()) {
      known = given->second;
      if (known.type() != type)
        fail("the import options give graph input '{}' a value of type {}, but the input is {}", input.name(),
             known.type().toString(), type.toString());
    }
    ctx.defineInput(input.name(), graph->addInput(type, input.name()), known);
  }
  for (const auto &[name, value] : options.inputValues) {
    const OnnxValue *entry = ctx.lookup(name);
    if (!entry || !entry->value || !entry->value->isGraphInput())
      fail("the import options give a value for '{}', which is not a graph input", name);
  }
  const bool symbolicInputs = !ir::isStaticGraph(*graph);
  for (int i = 0; i < onnxGraph.node_size(); ++i) {
    const onnx::NodeProto &node = onnxGraph.node(i);
    try {
      if (symbolicInputs) {
        checkSymbolicOperands(ctx, node);
        checkDimValuedOperands(ctx, node);
      }
      mapNode(ctx, node);
    } catch (const Error &e) {
      fail("{}: {}", describeNode(node, i), e.what());
    }
  }
  for (const auto &output : onnxGraph.output()) {
    if (!ctx.lookup(output.name()))
      fail("graph output '{}' is not produced by any node, input or initializer", output.name());
    // The declared name goes with the output, not its value: an Identity maps to its operand,
    // so `Identity(y2) -> y` returns the value y2, and one value may be returned twice.
    graph->addOutput(ctx.materialize(output.name()), output.name());
  }

  // Every op's shapes are valid now (kiln checked them), so ONNX's inference can run safely;
  // any value where it disagrees with kiln is reported.
  runOnnxShapeInference(model);
  InferredTypes inferred = inferredTypes(model.graph());
  for (int i = 0; i < onnxGraph.node_size(); ++i)
    for (const std::string &name : onnxGraph.node(i).output())
      if (!name.empty() && !hasKnownInferenceGap(onnxGraph.node(i))) {
        try {
          crossCheck(inferred, name, ctx.lookup(name)->type);
        } catch (const Error &e) {
          fail("{}: {}", describeNode(onnxGraph.node(i), i), e.what());
        }
      }

  ctx.hoistParams();
  removeDeadNodes(*graph);
  checkElementCounts(*graph);
  ir::verify(*graph);
  return graph;
}

/// Runs `body`, prefixing every error with `source` once and turning stray library
/// exceptions into kiln::Error.
template <typename Body> auto withSource(const std::string &source, Body body) {
  try {
    return body();
  } catch (const Error &e) {
    fail("{}: {}", source, e.what());
  } catch (const std::bad_alloc &) {
    fail("{}: out of memory while importing", source);
  } catch (const std::exception &e) {
    fail("{}: internal error while importing: {}", source, e.what());
  }
}

} // namespace

std::unique_ptr<ir::Graph> importOnnxBytes(const std::string &bytes, const OnnxImportOptions &options,
                                           const std::string &sourceName) {
  return withSource(sourceName, [&] {
    if (bytes.size() > options.maxFileBytes)
      fail("{} bytes, more than the limit of {}", bytes.size(), options.maxFileBytes);
    LiftedPayloads payloads;
    std::optional<std::string> skeleton = splitOnnxBytes(bytes, payloads);
    onnx::ModelProto model;
    int64_t opset = parseOnnxModel(skeleton ? *skeleton : bytes, model);
    return importModel(model, opset, std::move(payloads), options, options.baseDir);
  });
}

std::unique_ptr<ir::Graph> importOnnxFile(const std::string &path, const OnnxImportOptions &options) {
  return withSource(path, [&] {
    LiftedPayloads payloads;
    onnx::ModelProto model;
    int64_t opset = parseOnnxModel(readOnnxFileSplit(path, options.maxFileBytes, payloads), model);
    return importModel(model, opset, std::move(payloads), options, modelDirOf(path));
  });
}

namespace {

/// The declared inputs (initializers left out) and outputs of a parsed model.
OnnxDeclaredValues declaredValues(const onnx::ModelProto &model) {
  const onnx::GraphProto &graph = model.graph();
  std::set<std::string> initializers;
  for (const onnx::TensorProto &init : graph.initializer())
    initializers.insert(init.name());
  auto typeOf = [](const onnx::ValueInfoProto &value, const std::string &role, const std::string &prefix) {
    std::string what = fmt::format("graph {} '{}'", role, value.name());
    if (!value.type().has_tensor_type() || !value.type().tensor_type().has_shape())
      fail("{} declares no tensor type with a shape", what);
    const onnx::TypeProto_Tensor &tensor = value.type().tensor_type();
    TensorType type{heldDType(tensor.elem_type(), what), {}};
    for (int d = 0; d < tensor.shape().dim_size(); ++d) {
      const auto &dim = tensor.shape().dim(d);
      if (dim.has_dim_value())
        type.shape.push_back(dim.dim_value());
      else if (dim.has_dim_param() && isValidSymbolName(dim.dim_param()))
        type.shape.push_back(symbolDim(dim.dim_param()));
      else
        type.shape.push_back(symbolDim(fmt::format("{}_d{}", prefix, d))); // any extent
    }
    return type;
  };
  OnnxDeclaredValues declared;
  for (const onnx::ValueInfoProto &input : graph.input())
    if (!initializers.count(input.name()))
      declared.inputs.emplace_back(input.name(), typeOf(input, "input", fmt::format("in{}", declared.inputs.size())));
  for (const onnx::ValueInfoProto &output : graph.output())
    declared.outputs.emplace_back(output.name(),
                                  typeOf(output, "output", fmt::format("out{}", declared.outputs.size())));
  return declared;
}

} // namespace

OnnxDeclaredValues onnxDeclaredValuesOfFile(const std::string &path, uint64_t maxFileBytes) {
  return withSource(path, [&] {
    LiftedPayloads payloads; // the weights' bytes are not needed
    onnx::ModelProto model;
    parseOnnxModel(readOnnxFileSplit(path, maxFileBytes, payloads), model);
    return declaredValues(model);
  });
}

OnnxDeclaredValues onnxDeclaredValuesOfBytes(const std::string &bytes, const std::string &sourceName) {
  return withSource(sourceName, [&] {
    LiftedPayloads payloads;
    std::optional<std::string> skeleton = splitOnnxBytes(bytes, payloads);
    onnx::ModelProto model;
    parseOnnxModel(skeleton ? *skeleton : bytes, model);
    return declaredValues(model);
  });
}

namespace {

/// The body of both TensorProto readers; errors do not name the source yet.
Tensor decodeSerializedTensor(const std::string &bytes, const std::string &baseDir) {
  onnx::TensorProto proto;
  if (bytes.size() > static_cast<size_t>(INT_MAX) || !proto.ParseFromString(bytes))
    fail("not a valid ONNX TensorProto (malformed or truncated)");
  return decodeTensorProto(proto, baseDir, proto.name().empty() ? "the tensor" : "tensor '" + proto.name() + "'");
}

} // namespace

Tensor readTensorProtoFile(const std::string &path, uint64_t maxFileBytes) {
  return withSource(path, [&] {
    return decodeSerializedTensor(readFileLimited(path, maxFileBytes, "tensor file"), modelDirOf(path));
  });
}

Tensor readTensorProtoBytes(const std::string &bytes, const std::string &baseDir, const std::string &sourceName) {
  return withSource(sourceName, [&] { return decodeSerializedTensor(bytes, baseDir); });
}

} // namespace kiln::frontend
