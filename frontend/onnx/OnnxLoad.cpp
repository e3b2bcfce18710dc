// Parsing and validating an ONNX model. Protobuf parses under a total-size limit and its
// recursion limit; the subgraph depth is checked iteratively before ONNX's checker (which
// recurses) sees the model. The checker and shape inference run with kiln's schema registry
// (OnnxSchemas.cpp), which adds the opset-18 operator revisions an older ONNX library lacks.
#include "frontend/onnx/OnnxLoad.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <onnx/checker.h>
#include <onnx/shape_inference/implementation.h>

#include <climits>
#include <filesystem>
#include <set>

#include "core/Error.h"
#include "core/ShapeMath.h"
#include "core/SymbolicDim.h"
#include "frontend/onnx/OnnxSchemas.h"
#include "frontend/onnx/OnnxTensor.h"

namespace kiln::frontend {

namespace {

bool isDefaultDomain(const std::string &domain) { return domain.empty() || domain == "ai.onnx"; }

/// ONNX's messages span lines ("==> Context: ..."); kiln's errors are one line.
std::string oneLine(std::string text) {
  for (char &c : text)
    if (c == '\n' || c == '\r')
      c = ' ';
  while (text.find("  ") != std::string::npos)
    text.replace(text.find("  "), 2, " ");
  return text;
}

int64_t parseAndReadOpset(const std::string &bytes, onnx::ModelProto &model) {
  if (bytes.size() > static_cast<size_t>(INT_MAX))
    fail("larger than protobuf can parse (2 GiB)");
  google::protobuf::io::ArrayInputStream raw(bytes.data(), static_cast<int>(bytes.size()));
  google::protobuf::io::CodedInputStream coded(&raw);
  coded.SetTotalBytesLimit(INT_MAX);
  // Protobuf's own recursion limit bounds message nesting (and so subgraph depth) while parsing.
  coded.SetRecursionLimit(100);
  if (!model.ParseFromCodedStream(&coded) || !coded.ConsumedEntireMessage())
    fail("not a valid ONNX model: the protobuf data is malformed, truncated or nested too deeply");
  if (model.ir_version() <= 0)
    fail("not an ONNX model (no ir_version)");
  if (model.ir_version() < 3)
    fail("ONNX IR version {} is older than 3 (the first with opset imports)", model.ir_version());
  if (model.ir_version() > onnx::IR_VERSION)
    fail("ONNX IR version {} is newer than this ONNX library's {}", model.ir_version(),
         static_cast<int64_t>(onnx::IR_VERSION));
  if (!model.has_graph())
    fail("the model has no graph");
  std::optional<int64_t> opset;
  for (const auto &import : model.opset_import()) {
    if (!isDefaultDomain(import.domain()))
      continue;
    if (opset)
      fail("the default ONNX domain is imported twice");
    opset = import.version();
  }
  if (!opset)
    fail("no opset of the default ONNX domain is imported");
  return *opset;
}

void checkSubgraphDepth(const onnx::GraphProto &root) {
  // Explicit stack: the depth comes from the file, so no recursion here.
  std::vector<std::pair<const onnx::GraphProto *, int>> pending{{&root, 0}};
  while (!pending.empty()) {
    auto [graph, depth] = pending.back();
    pending.pop_back();
    if (depth > kMaxSubgraphDepth)
      fail("subgraphs are nested more than {} levels deep", kMaxSubgraphDepth);
    for (const auto &node : graph->node())
      for (const auto &attr : node.attribute()) {
        if (attr.has_g())
          pending.push_back({&attr.g(), depth + 1});
        for (const auto &g : attr.graphs())
          pending.push_back({&g, depth + 1});
      }
  }
}

} // namespace

int64_t parseOnnxModelAnyOpset(const std::string &bytes, onnx::ModelProto &model) {
  int64_t opset = parseAndReadOpset(bytes, model);
  checkSubgraphDepth(model.graph());
  return opset;
}

int64_t parseOnnxModel(const std::string &bytes, onnx::ModelProto &model) {
  int64_t opset = parseOnnxModelAnyOpset(bytes, model);
  if (opset > kMaxOnnxOpset)
    fail("opset {} of the default ONNX domain is newer than kiln supports ({} to {})", opset, kMinOnnxOpset,
         kMaxOnnxOpset);
  if (opset < kMinOnnxOpset)
    fail("opset {} of the default ONNX domain is older than kiln supports ({} to {})", opset, kMinOnnxOpset,
         kMaxOnnxOpset);
  return opset;
}

std::string modelDirOf(const std::string &path) {
  std::filesystem::path parent = std::filesystem::path(path).parent_path();
  return parent.empty() ? std::string(".") : parent.string();
}

void checkModelStructure(const onnx::ModelProto &model, const std::string &modelDir) {
  const onnx::GraphProto &graph = model.graph();
  if (graph.sparse_initializer_size() > 0)
    fail("sparse initializers are not supported");
  std::set<std::string> initializers, inputs;
  for (const auto &init : graph.initializer()) {
    if (init.name().empty())
      fail("an initializer has no name");
    if (!initializers.insert(init.name()).second)
      fail("initializer '{}' is defined twice", init.name());
    if (init.data_location() == onnx::TensorProto::EXTERNAL) {
      std::string location;
      for (const auto &entry : init.external_data())
        if (entry.key() == "location")
          location = entry.value();
      resolveExternalLocation(modelDir, location, fmt::format("initializer '{}'", init.name()));
    }
  }
  for (const auto &input : graph.input())
    if (!inputs.insert(input.name()).second)
      fail("graph input '{}' is declared twice", input.name());
}

void resolveInputShapes(onnx::ModelProto &model, const OnnxImportOptions &options) {
  onnx::GraphProto &graph = *model.mutable_graph();
  std::set<std::string> initializers;
  for (const auto &init : graph.initializer())
    initializers.insert(init.name());
  std::set<std::string> seen;
  for (onnx::ValueInfoProto &input : *graph.mutable_input()) {
    seen.insert(input.name());
    if (initializers.count(input.name())) // a parameter with a default value, not an input
      continue;
    if (!input.type().has_tensor_type())
      fail("graph input '{}' is not a tensor", input.name());
    onnx::TypeProto_Tensor &tensor = *input.mutable_type()->mutable_tensor_type();
    auto given = options.inputShapes.find(input.name());
    Shape shape;
    if (given != options.inputShapes.end()) {
      shape = given->second;
      if (tensor.has_shape() && tensor.shape().dim_size() != static_cast<int>(shape.size()))
        fail("graph input '{}' has rank {}, but the options give shape {}", input.name(), tensor.shape().dim_size(),
             shapeToString(shape));
    } else if (!tensor.has_shape()) {
      fail("graph input '{}' has no declared shape; give one in the import options", input.name());
    }
    for (int d = 0; tensor.has_shape() && d < tensor.shape().dim_size(); ++d) {
      const auto &dim = tensor.shape().dim(d);
      std::optional<int64_t> value;
      if (dim.has_dim_value())
        value = dim.dim_value();
      else if (dim.has_dim_param() && options.dimParams.count(dim.dim_param()))
        value = options.dimParams.at(dim.dim_param());
      if (given != options.inputShapes.end()) {
        if (dim.has_dim_value() && dim.dim_value() != shape[d])
          fail("graph input '{}' declares dim {} as {}, but the options give shape {}", input.name(), d,
               dim.dim_value(), shapeToString(shape));
        continue;
      }
      if (!value && options.keepSymbolicDims && dim.has_dim_param()) {
        if (!isValidSymbolName(dim.dim_param()))
          fail("graph input '{}' has a symbolic dim {} named '{}', which kiln cannot name a symbol (an "
               "identifier is needed); give its value in the import options",
               input.name(), d, dim.dim_param());
        value = symbolDim(dim.dim_param());
      }
      if (!value)
        fail("graph input '{}' has a symbolic dim {} ('{}'); kiln needs static shapes: give its shape or the value "
             "of '{}' in the import options",
             input.name(), d, dim.dim_param(), dim.dim_param());
      shape.push_back(*value);
    }
    for (int64_t dim : shape)
      if (dim < 0 && !isSymbolicDim(dim))
        fail("graph input '{}' has a negative dim in {}", input.name(), shapeToString(shape));
    try {
      checkShapeWithinLimit(shape, "shape");
    } catch (const Error &e) {
      fail("graph input '{}': {}", input.name(), e.what());
    }
    tensor.mutable_shape()->clear_dim();
    for (int64_t dim : shape) {
      if (std::optional<std::string> symbol = dimSymbolName(dim))
        tensor.mutable_shape()->add_dim()->set_dim_param(*symbol);
      else
        tensor.mutable_shape()->add_dim()->set_dim_value(dim);
    }
  }
  for (const auto &[name, shape] : options.inputShapes)
    if (!seen.count(name))
      fail("the import options give a shape for '{}', which is not a graph input", name);
}

void runOnnxChecker(const onnx::ModelProto &model, const std::string &modelDir) {
  const onnx::ISchemaRegistry &registry = onnxSchemaRegistry();
  try {
    onnx::checker::CheckerContext ctx;
    ctx.set_ir_version(static_cast<int>(model.ir_version()));
    std::unordered_map<std::string, int> imports;
    for (const auto &import : model.opset_import())
      imports[import.domain()] = static_cast<int>(import.version());
    ctx.set_opset_imports(imports);
    ctx.set_schema_registry(&registry);
    ctx.set_model_dir(modelDir);
    onnx::checker::LexicalScopeContext lexical;
    onnx::checker::check_graph(model.graph(), ctx, lexical);
    if (model.functions_size() > 0)
      onnx::checker::check_model_local_functions(model, ctx, lexical);
  } catch (const onnx::checker::ValidationError &e) {
    fail("not a valid ONNX model: {}", oneLine(e.what()));
  } catch (const std::exception &e) {
    fail("not a valid ONNX model: {}", oneLine(e.what()));
  }
}

void runOnnxShapeInference(onnx::ModelProto &model) {
  try {
    // Strict: a node whose shapes cannot be inferred is an error. Data propagation stays off:
    // kiln has folded the Shape subgraphs already, and fewer ONNX code paths see the file.
    onnx::shape_inference::InferShapes(model, &onnxSchemaRegistry(), onnx::ShapeInferenceOptions(false, 1, false));
  } catch (const onnx::InferenceError &e) {
    fail("ONNX shape inference failed: {}", oneLine(e.what()));
  } catch (const std::exception &e) {
    fail("ONNX shape inference failed: {}", oneLine(e.what()));
  }
}

} // namespace kiln::frontend
