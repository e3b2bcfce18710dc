// The compile path and the shape-keyed compile cache (see CompileModel.h).
#include "codegen/CompileModel.h"

#include <algorithm>
#include <any>
#include <filesystem>
#include <fstream>
#include <set>

#include <unistd.h>

#include "core/Error.h"
#include "core/SymbolicDim.h"
#include "ir/BatchTiling.h"
#include "ir/ContractionCost.h"
#include "ir/SymbolicShapes.h"
#include "runtime/ThreadPool.h"
#include "passes/PassManager.h"
#include "passes/Pipelines.h"

namespace kiln::codegen {

std::vector<std::string> loweringPasses(const CompileOptions &options, const std::string &pipeline) {
  if (!options.passes.empty())
    return options.passes;
  const passes::PipelineInfo &named = passes::findPipeline(options.fuse ? pipeline : pipeline + "-unfused");
  return std::vector<std::string>(named.passes.begin(), named.passes.end());
}

void runLoweringPasses(LoweredModel &lowered, const std::vector<std::string> &names) {
  if (names.empty() || names.back() != "plan-memory")
    fail("codegen: the passes must end with plan-memory, whose memory plan codegen emits (passes: {})",
         fmt::join(names, ", "));
  passes::PassManager manager;
  manager.addPasses(names);
  passes::PassContext context;
  manager.run(*lowered.graph, context);
  lowered.passRecords = manager.records();
  // The pass plans with the default PlanOptions (in-place reuse, views aliased, 64-byte
  // alignment), which is what the emitter expects: it emits aliased views as no-ops.
  lowered.plan = std::move(std::any_cast<passes::MemoryPlan &>(context.analyses.at("memory-plan")));
}

namespace {

// A tile reads the weights once (ir::weightTraffic), so a tile must do enough work per weight
// byte that weight traffic stays a small part of its time: at ~100 GFLOP/s per core and ~25
// GB/s of weights streamed from L3 or memory, 20 multiply-adds per byte is a tenth. Measured at
// one thread, batch 8, tiles of 1 row against the whole batch: MobileNetV2 (21 multiply-adds
// per weight byte and row) 0.94, SqueezeNet 0.87, DenseNet-121 0.94 of the time; MobileNetV3-
// Large (10) 1.05 and a GPT-2 block stack at 64 tokens (~7) 1.12.
constexpr double kMinMultiplyAddsPerWeightByte = 20;

// Below this many bytes, a whole batch's largest activation already stays in cache (a core's
// 1 MiB of L2 and its share of L3), so tiles would buy no locality, only their per-tile costs
// (kernel launches, smaller products): a GPT-2 block stack at batch 8, whose largest value is
// 2 MiB, took 1.06 times as long in tiles of 2 rows at one thread.
constexpr double kCachedActivationBytes = 4 << 20;

/// The bytes of the largest value of the graph that carries the batch (an activation: a
/// weight computed from constants, such as a QDQ model's dequantized 25088 x 4096 classifier
/// of 392 MiB, is none).
double largestActivationBytes(const ir::BatchAxes &axes) {
  double largest = 0;
  for (const auto &[value, axis] : axes.axisOf)
    if (isStaticShape(value->shape()))
      largest = std::max(largest, static_cast<double>(value->type().byteSize()));
  return largest;
}

int64_t smallestDivisorAtLeast(int64_t n, double minimum) {
  for (int64_t d = 1; d < n; ++d)
    if (n % d == 0 && static_cast<double>(d) >= minimum)
      return d;
  return n;
}

/// A static batch of `extent` rows: tiles of the fewest rows that still buy enough work per
/// weight byte, since a small tile keeps each layer's activations in cache where the whole
/// batch's spill to memory (and none when they do not: kCachedActivationBytes). With P
/// threads the tiles run side by side, P of them streaming weights at once, each with a P-th
/// of the bandwidth: P times the rows; and there must be a tile for every thread, else the
/// batch runs whole, each kernel split over the threads.
/// (Recurrences, which read their recurrent weights every step, never tile: at 2 threads
/// their batch of 16 in two tiles took 1.05 and 1.09 times as long as whole.)
int64_t chooseStaticTile(const ir::Graph &graph, const ir::BatchAxes &axes, const CompileOptions &options,
                         const std::function<void(std::string)> &say) {
  const int64_t extent = axes.extent;
  int threads = (options.runtime.pool ? options.runtime.pool : runtime::defaultThreadPool())->numThreads();
  double perRow = ir::multiplyAdds(graph) / static_cast<double>(extent);
  double weights = ir::weightTraffic(graph);
  double minRows = perRow > 0 ? kMinMultiplyAddsPerWeightByte * weights * threads / perRow : 1;
  int64_t tile = smallestDivisorAtLeast(extent, minRows);
  double largest = largestActivationBytes(axes);
  if (tile * threads > extent || largest <= kCachedActivationBytes)
    tile = extent;
  say(fmt::format("{:.1f} multiply-adds per weight byte and row, largest activation {:.1f} MiB, {} thread{}: {}",
                  weights > 0 ? perRow / weights : 0.0, largest / (1 << 20), threads, threads == 1 ? "" : "s",
                  tile >= extent ? fmt::format("whole batch of {}", extent)
                                 : fmt::format("tiles of {} row{}", tile, tile == 1 ? "" : "s")));
  return tile >= extent ? 0 : tile;
}

} // namespace

int64_t chooseBatchTile(const ir::Graph &graph, const CompileOptions &options, std::string *why) {
  auto say = [&](std::string text) {
    if (why)
      *why = std::move(text);
  };
  if (options.batchTile == CompileOptions::kBatchTileOff) {
    say("batch tiling is off");
    return 0;
  }
  ir::BatchAxes axes = ir::findBatchAxes(graph);
  if (!axes.separable) {
    if (options.batchTile > 0)
      fail("codegen: cannot run graph @{} in batch tiles of {}: {}", graph.name(), options.batchTile, axes.reason);
    say(fmt::format("not batch-separable: {}", axes.reason));
    return 0;
  }
  bool symbolic = isSymbolicDim(axes.extent);
  if (options.batchTile > 0) {
    if (!symbolic && axes.extent % options.batchTile != 0)
      fail("codegen: cannot run graph @{} in batch tiles of {}: its batch of {} is not a multiple", graph.name(),
           options.batchTile, axes.extent);
    say(fmt::format("tiles of {} rows (asked for)", options.batchTile));
    return options.batchTile;
  }
  if (symbolic) {
    say(fmt::format("tiles of 1 row: the batch {} is symbolic", dimToString(axes.extent)));
    return 1;
  }
  return chooseStaticTile(graph, axes, options, say);
}

LoweredModel lowerGraph(const ir::Graph &graph, const CompileOptions &options) {
  LoweredModel lowered;
  EmitOptions emit;
  emit.precision = options.precision;
  int64_t tile = chooseBatchTile(graph, options, &lowered.batchTiling);
  if (tile > 0) {
    ir::BatchAxes axes = ir::findBatchAxes(graph);
    try {
      lowered.graph = ir::retileBatch(graph, tile);
    } catch (const Error &) {
      // A static batch tiles only as an optimisation chosen here: if the tile copy fails to
      // infer (a defensive check of findBatchAxes's rules), the batch runs whole.
      if (options.batchTile != CompileOptions::kBatchTileAuto || isSymbolicDim(axes.extent))
        throw;
      lowered.batchTiling += "; the tile copy failed, so the whole batch";
      tile = 0;
    }
    if (tile > 0) {
      if (!ir::isStaticGraph(*lowered.graph))
        fail("codegen: graph @{} has symbolic dims other than its batch {}; bind them first (kiln-run --dim)",
             graph.name(), dimToString(axes.extent));
      emit.batchTiling.tile = tile;
      if (isSymbolicDim(axes.extent)) {
        std::optional<std::string> name = dimSymbolName(axes.extent);
        if (!name)
          fail("codegen: graph @{}'s batch {} is an expression, not one symbol", graph.name(),
               dimToString(axes.extent));
        emit.batchTiling.symbol = *name;
      } else {
        emit.batchTiling.extent = axes.extent;
      }
      for (const ir::Value *input : graph.inputs())
        emit.batchTiling.batchedInputs.push_back(axes.axisOf.count(input) != 0);
    }
  }
  if (tile == 0)
    lowered.graph = graph.clone();
  runLoweringPasses(lowered, loweringPasses(options, "inference"));
  lowered.model = emitModel(*lowered.graph, lowered.plan, options.symbolPrefix, {}, emit);
  return lowered;
}

LoweredModel lowerPrepared(const ir::Graph &graph) {
  LoweredModel lowered;
  lowered.graph = graph.clone();
  runLoweringPasses(lowered, {"plan-memory"});
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

runtime::Executable compileLowered(LoweredModel lowered, const CompileOptions &options) {
  std::vector<Tensor> weights = collectWeights(lowered, options.params);
  CompiledObject object = compileSource(lowered.model.source, options.compiler);
  // Released before loading: a graph holding the weights would keep each plain copy alive
  // beside the packed one the runtime makes.
  lowered = LoweredModel();
  return runtime::Executable::load(object.soPath, std::move(weights), options.runtime);
}

runtime::Executable compile(const ir::Graph &graph, const CompileOptions &options) {
  return compileLowered(lowerGraph(graph, options), options);
}

runtime::Executable compile(std::unique_ptr<ir::Graph> graph, const CompileOptions &options) {
  if (!graph)
    fail("codegen: compile was given no graph");
  // Lowered as compile(const Graph &) lowers (a copy, so the source and its disk cache entry
  // are the same), then the caller's graph goes.
  LoweredModel lowered = lowerGraph(*graph, options);
  graph.reset();
  return compileLowered(std::move(lowered), options);
}

namespace {

// kiln_model_desc::weight_data: each weight starts on a 64-byte boundary (runtime/KernelAbi.h).
constexpr int64_t kAotWeightAlignment = 64;

/// Writes the weights one after another, each padded to the alignment; returns the bytes.
int64_t writeWeightFile(const std::string &path, const std::vector<Tensor> &weights) {
  std::ofstream file(path, std::ios::binary);
  if (!file)
    fail("codegen: cannot write the weights file {}", path);
  static const char zeros[kAotWeightAlignment] = {};
  int64_t offset = 0;
  for (const Tensor &weight : weights) {
    auto bytes = static_cast<int64_t>(weight.byteSize());
    if (bytes > 0)
      file.write(static_cast<const char *>(weight.data()), static_cast<std::streamsize>(bytes));
    offset += bytes;
    int64_t padding = (kAotWeightAlignment - offset % kAotWeightAlignment) % kAotWeightAlignment;
    file.write(zeros, static_cast<std::streamsize>(padding));
    offset += padding;
  }
  if (!file.flush())
    fail("codegen: writing the weights file {} failed", path);
  return offset;
}

/// What an ahead-of-time source adds to the JIT's: the weights as a hidden symbol the
/// assembler fills from `weightsPath` ("" when the model has none), and the exported
/// description, a copy of the emitted one (`innerSymbol`) that points at them.
std::string aotTrailer(const std::string &innerSymbol, const std::string &exportedSymbol, const std::string &weightsPath) {
  std::string text = "\n// ---- ahead of time: the weights, embedded by the assembler ----\n";
  std::string weightData = "NULL";
  if (!weightsPath.empty()) {
    std::string blob = exportedSymbol + "_weight_data";
    std::vector<std::string> lines = {".pushsection .rodata.kiln_weights,\"a\"\n",
                                      ".balign " + std::to_string(kAotWeightAlignment) + "\n",
                                      ".globl " + blob + "\n",
                                      ".hidden " + blob + "\n",
                                      blob + ":\n",
                                      ".incbin " + cString(weightsPath) + "\n",
                                      ".popsection\n"};
    text += "__asm__(\n";
    for (const std::string &line : lines)
      text += "    " + cString(line) + "\n";
    text += ");\n";
    text += fmt::format("extern \"C\" __attribute__((visibility(\"hidden\"))) const unsigned char {}[];\n", blob);
    weightData = blob;
  }
  text += fmt::format("\nextern \"C\" const kiln_model_desc *{}(void) {{\n", exportedSymbol);
  text += fmt::format("  static const kiln_model_desc desc = [] {{\n    kiln_model_desc d = *{}();\n", innerSymbol);
  text += fmt::format("    d.weight_data = {};\n    return d;\n  }}();\n  return &desc;\n}}\n", weightData);
  return text;
}

/// The exported `const char *NAME(void)` functions of AotOptions::exportedStrings.
std::string exportedStringFunctions(const std::map<std::string, std::string> &strings) {
  std::string text;
  for (const auto &[symbol, value] : strings)
    text += fmt::format("\nextern \"C\" const char *{}(void) {{\n  return {};\n}}\n", symbol, cString(value));
  return text;
}

/// Removes a temporary folder when it goes out of scope (errors included).
struct RemoveFolder {
  std::string path;
  ~RemoveFolder() {
    std::error_code error;
    if (!path.empty())
      std::filesystem::remove_all(path, error);
  }
};

/// A compiled model can be written to `outputPath`: a path whose folder exists. Checked before
/// lowering (so a typo fails fast) and again by compileLoweredAheadOfTime for its own callers.
void checkOutputPath(const std::string &outputPath) {
  namespace fs = std::filesystem;
  if (outputPath.empty())
    fail("codegen: no output path for the compiled model");
  fs::path outputFolder = fs::path(outputPath).parent_path();
  if (!outputFolder.empty() && !fs::is_directory(outputFolder))
    fail("codegen: cannot write the compiled model {}: there is no folder {}", outputPath, outputFolder.string());
}

} // namespace

AotModel compileAheadOfTime(const ir::Graph &graph, const std::string &outputPath, const CompileOptions &options,
                            const AotOptions &aot) {
  checkOutputPath(outputPath);
  // The emitted description gets a private prefix; the exported one keeps the caller's.
  CompileOptions innerOptions = options;
  innerOptions.symbolPrefix = options.symbolPrefix + "aot_";
  LoweredModel lowered = lowerGraph(graph, innerOptions);
  std::vector<Tensor> weights = collectWeights(lowered, options.params);
  return compileLoweredAheadOfTime(lowered, weights, outputPath, options, aot);
}

AotModel compileLoweredAheadOfTime(const LoweredModel &lowered, const std::vector<Tensor> &weights,
                                   const std::string &outputPath, const CompileOptions &options,
                                   const AotOptions &aot) {
  return compileLoweredPartsAheadOfTime({{&lowered, weights, options.symbolPrefix + KILN_MODEL_SYMBOL}}, outputPath,
                                        options, aot);
}

AotModel compileLoweredPartsAheadOfTime(const std::vector<AotPart> &parts, const std::string &outputPath,
                                        const CompileOptions &options, const AotOptions &aot) {
  namespace fs = std::filesystem;
  checkOutputPath(outputPath);
  if (parts.empty())
    fail("codegen: an ahead-of-time object needs at least one model");
  std::set<std::string> symbols;
  for (const auto &[symbol, text] : aot.exportedStrings)
    symbols.insert(symbol);
  for (const AotPart &part : parts)
    for (const std::string &symbol : {part.exportedSymbol, part.lowered->model.modelSymbol})
      if (!symbols.insert(symbol).second)
        fail("codegen: the compiled model would define '{}' twice: lower it with another symbol prefix", symbol);
  for (const AotPart &part : parts)
    if (part.weights.size() != part.lowered->model.weights.size())
      fail("codegen: the model has {} weights, {} were given", part.lowered->model.weights.size(), part.weights.size());

  RemoveFolder temporary;
  fs::path buildDir = aot.buildDir;
  if (buildDir.empty()) {
    fs::path output(outputPath);
    fs::path parent = output.parent_path().empty() ? fs::path(".") : output.parent_path();
    buildDir = parent / fmt::format(".{}.kiln-build-{}", output.filename().string(), static_cast<long>(getpid()));
    temporary.path = buildDir.string();
  }
  std::error_code error;
  fs::create_directories(buildDir, error);
  if (error || !fs::is_directory(buildDir))
    fail("codegen: cannot create the build folder {}: {}", buildDir.string(),
         error ? error.message() : "not a folder");
  buildDir = fs::absolute(buildDir); // .incbin must find the weights whatever the compiler's folder

  AotModel model;
  model.soPath = outputPath;
  // The first part's source carries the prelude; the others add their bodies to it.
  std::string source = parts[0].lowered->model.source, trailers;
  for (size_t i = 0; i < parts.size(); ++i) {
    const AotPart &part = parts[i];
    const LoweredModel &lowered = *part.lowered;
    model.numWeights += static_cast<int64_t>(part.weights.size());
    model.numLaunches += static_cast<int64_t>(lowered.model.launches.size());
    model.arenaBytes = std::max(model.arenaBytes, lowered.model.arenaBytes);
    std::string weightsPath;
    if (!part.weights.empty()) {
      weightsPath = (buildDir / (i == 0 ? std::string("weights.bin") : fmt::format("weights{}.bin", i))).string();
      model.weightBytes += writeWeightFile(weightsPath, part.weights);
    }
    if (i > 0)
      source += fmt::format("\n// ==== model @{} ({}) ====\n", lowered.graph->name(), lowered.model.modelSymbol) +
                lowered.model.body;
    trailers += aotTrailer(lowered.model.modelSymbol, part.exportedSymbol, weightsPath);
  }
  std::string sourcePath = (buildDir / "model.cpp").string();
  {
    std::ofstream file(sourcePath, std::ios::binary);
    file << source << trailers << exportedStringFunctions(aot.exportedStrings);
    if (!file.flush())
      fail("codegen: cannot write {}", sourcePath);
  }
  try {
    compileSourceFile(sourcePath, outputPath, options.compiler);
  } catch (const Error &) {
    temporary.path.clear(); // the error names the source: keep it for a look
    throw;
  }
  if (!aot.buildDir.empty())
    model.sourcePath = sourcePath;
  return model;
}

CompiledObject compileLoweredBatch(const std::vector<const LoweredModel *> &models, const CompilerOptions &options) {
  if (models.empty())
    fail("codegen: compileLoweredBatch needs at least one model");
  std::set<std::string> symbols;
  std::string source = fmt::format("// Generated by kiln codegen: a batch of {} models. Do not edit.\n", models.size()) +
                       sourcePrelude();
  for (const LoweredModel *model : models) {
    if (!symbols.insert(model->model.modelSymbol).second)
      fail("codegen: two models of a batch export '{}'; give each its own CompileOptions::symbolPrefix",
           model->model.modelSymbol);
    source += fmt::format("\n// ==== model @{} ({}) ====\n", model->graph->name(), model->model.modelSymbol) +
              model->model.body;
  }
  return compileSource(source, options);
}

std::vector<runtime::Executable> compileBatch(const std::vector<const ir::Graph *> &graphs,
                                              const CompileOptions &options) {
  std::vector<LoweredModel> lowered;
  lowered.reserve(graphs.size());
  for (size_t i = 0; i < graphs.size(); ++i) {
    CompileOptions modelOptions = options;
    modelOptions.symbolPrefix = fmt::format("{}m{}_", options.symbolPrefix, i);
    lowered.push_back(lowerGraph(*graphs[i], modelOptions));
  }
  std::vector<const LoweredModel *> models;
  for (const LoweredModel &model : lowered)
    models.push_back(&model);
  CompiledObject object = compileLoweredBatch(models, options.compiler);
  std::vector<runtime::Executable> executables;
  for (const LoweredModel &model : lowered)
    executables.push_back(runtime::Executable::load(object.soPath, collectWeights(model, options.params),
                                                    options.runtime, model.model.modelSymbol));
  return executables;
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
  auto executable = std::make_shared<const runtime::Executable>(compile(std::move(graph), options_));
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
