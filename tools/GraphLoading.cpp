// Reading a graph for a tool (see GraphLoading.h).
#include "tools/GraphLoading.h"

#include "core/Error.h"
#include "frontend/onnx/OnnxImporter.h"
#include "ir/BatchTiling.h"
#include "ir/Parser.h"
#include "ir/SymbolicShapes.h"

namespace kiln::tools {

namespace {

/// The static graph: `graph` bound with `dims` and the given inputs' shapes, when it has
/// symbols (but for a lone batch symbol that GraphSource::keepBatchSymbol keeps).
std::unique_ptr<ir::Graph> bindToStatic(std::unique_ptr<ir::Graph> graph, const std::map<std::string, Tensor> &given,
                                        const DimBindings &dims, bool keepBatchSymbol = false) {
  if (ir::isStaticGraph(*graph) && dims.empty())
    return graph;
  if (keepBatchSymbol && dims.empty() && given.empty() && ir::servesEveryBatch(*graph))
    return graph;
  std::map<std::string, Shape> shapes;
  for (const auto &[name, tensor] : given)
    shapes[name] = tensor.shape();
  return ir::bindSymbols(*graph, ir::bindingsFromShapes(*graph, shapes, dims));
}

} // namespace

std::unique_ptr<ir::Graph> loadGraph(const GraphSource &source, std::map<std::string, Tensor> &given) {
  if (!endsWith(source.path, ".onnx")) {
    if (!source.inputShapes.empty())
      fail("--input-shape applies to ONNX models; '{}' is a graph with static shapes", source.path);
    std::unique_ptr<ir::Graph> graph = ir::parseGraphFile(source.path);
    if (ir::isStaticGraph(*graph) && source.dims.empty())
      return graph;
    for (const Binding &binding : source.inputs) // their shapes bind the graph's symbols
      if (!given.count(binding.name))            // (bindInputs reports one given twice)
        given[binding.name] = readTensorFile(binding.path);
    return bindToStatic(std::move(graph), given, source.dims, source.keepBatchSymbol);
  }
  frontend::OnnxImportOptions importOptions;
  importOptions.inputShapes = source.inputShapes;
  for (const Binding &binding : source.inputs) {
    if (given.count(binding.name))
      fail("input '{}' is given twice", binding.name);
    given[binding.name] = readTensorFile(binding.path);
  }
  // A name that is not an input is refused by the importer, naming it.
  for (const auto &[name, tensor] : given) {
    importOptions.inputShapes[name] = tensor.shape();
    importOptions.inputValues[name] = tensor;
  }
  importOptions.keepSymbolicDims = source.keepSymbolicDims || source.keepBatchSymbol;
  std::unique_ptr<ir::Graph> graph;
  try {
    graph = frontend::importOnnxFile(source.path, importOptions);
  } catch (const Error &) {
    if (source.dims.empty())
      throw;
    // A mapping that needs the extents (a Shape folded at import): specialise at import.
    importOptions.keepSymbolicDims = false;
    importOptions.dimParams = source.dims;
    return frontend::importOnnxFile(source.path, importOptions);
  }
  return bindToStatic(std::move(graph), given, source.dims, source.keepBatchSymbol);
}

ir::ParamValues bindParams(const ir::Graph &graph, const std::vector<Binding> &files, uint64_t seed,
                           bool randomMissing) {
  std::map<std::string, TensorType> types;
  std::vector<std::string> names;
  for (const ir::Node *param : graph.params()) {
    const std::string &name = param->attrString("name");
    types[name] = param->output()->type();
    names.push_back(name);
  }
  ir::ParamValues values;
  for (const Binding &binding : files) {
    auto it = types.find(binding.name);
    if (it == types.end())
      fail("unknown parameter '{}'; graph @{} has parameters: {}", binding.name, graph.name(), joinNames(names));
    if (values.count(binding.name))
      fail("parameter '{}' is given twice", binding.name);
    Tensor tensor = readTensorFile(binding.path);
    if (tensor.type() != it->second)
      fail("parameter '{}' expects {}, but {} holds {}", binding.name, it->second.toString(), binding.path,
           tensor.type().toString());
    values[binding.name] = tensor;
  }
  if (!randomMissing)
    return values;
  uint64_t next = seed + graph.inputs().size();
  for (const ir::Node *param : graph.params()) {
    const std::string &name = param->attrString("name");
    if (!values.count(name) && !param->attrTensor("value").defined()) {
      checkFitsInMemory(types[name], fmt::format("parameter '{}'", name));
      values[name] = randomTensor(types[name], next);
    }
    ++next;
  }
  return values;
}

passes::PassManager selectPasses(const std::string &pipeline, const std::string &passList, const std::string &fallback) {
  passes::PassManager manager;
  if (!passList.empty())
    manager.addPasses(passes::splitPassList(passList));
  else
    manager.addPipeline(pipeline.empty() ? fallback : pipeline);
  return manager;
}

std::vector<std::string> outputNames(const ir::Graph &graph) {
  std::vector<std::string> names;
  for (size_t i = 0; i < graph.outputs().size(); ++i) {
    const std::string &name = graph.outputName(i);
    names.push_back(name.empty() ? fmt::format("output{}", i) : name);
  }
  return names;
}

std::vector<runtime::TensorSpec> inputSpecs(const ir::Graph &graph) {
  std::vector<runtime::TensorSpec> specs;
  for (const ir::Value *input : graph.inputs())
    specs.push_back({input->name(), input->type()});
  return specs;
}

} // namespace kiln::tools
