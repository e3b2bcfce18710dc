// The compile path and the shape-keyed compile cache (see Compile.h).
#include "codegen/Compile.h"

#include <algorithm>

#include "ir/Error.h"
#include "passes/PassManager.h"
#include "passes/Pipelines.h"

namespace kiln::codegen {

LoweredModel lowerGraph(const ir::Graph &graph, const CompileOptions &options) {
  LoweredModel lowered;
  lowered.graph = graph.clone();
  passes::PassManager manager;
  std::vector<std::string> names = options.passes;
  if (names.empty()) {
    // The plan is made below with the options codegen relies on, whatever the pipeline says.
    for (std::string_view name : passes::findPipeline("inference").passes)
      if (name != "plan-memory" && (options.fuse || name != "fuse"))
        names.emplace_back(name);
  }
  manager.addPasses(names);
  passes::PassContext context;
  manager.run(*lowered.graph, context);
  lowered.plan = passes::planMemory(*lowered.graph);
  lowered.model = emitModel(*lowered.graph, lowered.plan);
  return lowered;
}

LoweredModel lowerPrepared(const ir::Graph &graph) {
  LoweredModel lowered;
  lowered.graph = graph.clone();
  lowered.plan = passes::planMemory(*lowered.graph);
  lowered.model = emitModel(*lowered.graph, lowered.plan);
  return lowered;
}

std::vector<Tensor> collectWeights(const LoweredModel &lowered, const ir::ParamValues &params) {
  std::vector<Tensor> weights;
  for (const WeightInfo &weight : lowered.model.weights) {
    const ir::Node *source = weight.value->producer();
    if (source->op() == ir::OpKind::Constant) {
      weights.push_back(source->attrTensor("value"));
      continue;
    }
    auto given = params.find(weight.name);
    Tensor value = given != params.end() ? given->second : source->attrTensor("value");
    if (!value.defined())
      fail("codegen: parameter '{}' has no value (give one in CompileOptions::params)", weight.name);
    if (value.type() != weight.value->type())
      fail("codegen: the value of parameter '{}' has type {}, the graph declares {}", weight.name,
           value.type().toString(), weight.value->type().toString());
    weights.push_back(value);
  }
  return weights;
}

runtime::Executable compile(const ir::Graph &graph, const CompileOptions &options) {
  LoweredModel lowered = lowerGraph(graph, options);
  std::vector<Tensor> weights = collectWeights(lowered, options.params);
  CompiledObject object = compileSource(lowered.model.source, options.compiler);
  return runtime::Executable::load(object.soPath, std::move(weights), options.runtime);
}

namespace {

std::string signatureKey(const std::vector<TensorType> &types) {
  std::string key;
  for (const TensorType &type : types)
    key += type.toString() + ";";
  return key;
}

int64_t executableBytes(const runtime::Executable &executable) {
  int64_t bytes = executable.arenaBytes();
  for (const runtime::TensorSpec &weight : executable.weights())
    bytes += static_cast<int64_t>(weight.type.byteSize());
  return bytes;
}

} // namespace

CompileCache::CompileCache(GraphBuilder build, CompileOptions options, int64_t byteLimit)
    : build_(std::move(build)), options_(std::move(options)), byteLimit_(byteLimit) {}

std::shared_ptr<const runtime::Executable> CompileCache::get(const std::vector<TensorType> &inputTypes) {
  std::string key = signatureKey(inputTypes);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = index_.find(key);
    if (it != index_.end()) {
      entries_.splice(entries_.begin(), entries_, it->second);
      ++hits_;
      return it->second->executable;
    }
  }
  // Compiled outside the lock: a compile takes seconds, and other signatures may be served
  // meanwhile. Two threads missing on one signature both compile; the disk cache makes the
  // second a load, and the first to finish is kept.
  std::unique_ptr<ir::Graph> graph = build_(inputTypes);
  if (!graph)
    fail("codegen: the compile cache's graph builder returned no graph for inputs {}", key);
  auto executable = std::make_shared<const runtime::Executable>(compile(*graph, options_));
  int64_t bytes = executableBytes(*executable);
  std::lock_guard<std::mutex> lock(mutex_);
  ++compiles_;
  auto it = index_.find(key);
  if (it != index_.end())
    return it->second->executable;
  entries_.push_front({key, executable, bytes});
  index_[key] = entries_.begin();
  bytes_ += bytes;
  // Evict from the back, never the entry just added (callers hold executables by shared_ptr,
  // so an evicted one lives on while it is in use).
  while (bytes_ > byteLimit_ && entries_.size() > 1) {
    bytes_ -= entries_.back().bytes;
    index_.erase(entries_.back().key);
    entries_.pop_back();
  }
  return executable;
}

std::vector<Tensor> CompileCache::run(const std::vector<Tensor> &inputs) {
  std::vector<TensorType> types;
  for (const Tensor &input : inputs)
    types.push_back(input.type());
  return get(types)->run(inputs);
}

int64_t CompileCache::compiles() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return compiles_;
}

int64_t CompileCache::hits() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return hits_;
}

size_t CompileCache::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return entries_.size();
}

int64_t CompileCache::bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return bytes_;
}

} // namespace kiln::codegen
