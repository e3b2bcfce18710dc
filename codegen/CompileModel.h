#pragma once
// Graph in, runtime::Executable out: the whole compile path.
//
//   clone the graph -> inference pipeline (passes/Pipelines.h: simplify, decompose, fuse, and
//   plan-memory, whose plan codegen emits) -> C++ source (codegen/EmitModel.h)
//   -> shared object (codegen/CxxCompiler.h, cached on disk) -> Executable::load with the weights
//
// Compiles are specialised to the graph's static shapes. CompileCache keeps one executable per
// input shape signature, so serving a new batch size costs one compile (and, thanks to the
// disk cache, a later process only a load).
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "codegen/CxxCompiler.h"
#include "codegen/EmitModel.h"
#include "ir/Evaluator.h"
#include "passes/PassManager.h"
#include "runtime/Executable.h"

namespace kiln::codegen {

struct CompileOptions {
  /// Values for parameters by name; they override the parameters' initial values.
  ir::ParamValues params;
  /// Which named pipeline (passes/Pipelines.cpp) codegen runs: `inference` (a training step:
  /// `training`); off, `inference-unfused` (`training-unfused`), every primitive its own kernel.
  bool fuse = true;
  /// Passes to run instead of the named pipeline, ending with plan-memory (codegen emits the
  /// plan it leaves); empty: the named pipeline.
  std::vector<std::string> passes;
  /// Starts every symbol of the generated source (see emitModel); "" for a model compiled alone.
  std::string symbolPrefix;
  /// What GEMMs and GEMM-computed convolutions multiply in (EmitOptions::precision).
  ContractionPrecision precision = ContractionPrecision::F32;
  /// Batch tiling (ir/BatchTiling.h): the rows of the batch (axis 0 of the inputs) the kernels
  /// compute per run, the runtime running a whole batch as tiles (runtime/Executable.h).
  /// kBatchTileAuto: chooseBatchTile decides, and a graph that is not batch-separable runs
  /// whole; kBatchTileOff: whole; N > 0: tiles of N rows, and a graph that is not separable,
  /// or whose batch is not a multiple of N, is a kiln::Error naming why.
  int64_t batchTile = kBatchTileAuto;
  static constexpr int64_t kBatchTileAuto = 0, kBatchTileOff = -1;
  CompilerOptions compiler;
  runtime::ExecutableOptions runtime;
};

/// The tile lowerGraph compiles `graph` for under `options` (CompileOptions::batchTile), or 0
/// to run it whole; `why`, when given, gets a sentence saying why (LoweredModel::batchTiling,
/// kiln-run --bench's batch_tiling). A symbolic batch is always tiled: one compile then serves
/// every size.
int64_t chooseBatchTile(const ir::Graph &graph, const CompileOptions &options, std::string *why = nullptr);

/// The graph after the pipeline, its memory plan and its C++ source.
struct LoweredModel {
  std::unique_ptr<ir::Graph> graph;
  /// The plan the pipeline's last pass, plan-memory, left for this graph.
  passes::MemoryPlan plan;
  ModelSource model;
  /// One record per pass that ran, in order.
  std::vector<passes::PassRecord> passRecords;
  /// How the batch runs and why (chooseBatchTile's sentence); empty for lowerPrepared.
  std::string batchTiling;
};

/// Runs the pipeline on a copy of `graph` and lowers it to C++ (no compiler involved).
LoweredModel lowerGraph(const ir::Graph &graph, const CompileOptions &options = {});
/// Lowers a copy of `graph` as it is, with plan-memory as its only pass: it must hold only
/// primitives and kernels (what a tool gets after running its own --passes).
LoweredModel lowerPrepared(const ir::Graph &graph);

/// The passes codegen runs for `options`: options.passes, else the named pipeline
/// `pipeline` ("inference", "training") or, with options.fuse off, its `-unfused` variant.
std::vector<std::string> loweringPasses(const CompileOptions &options, const std::string &pipeline);
/// Runs `passes` on lowered.graph and keeps their records in lowered.passRecords and the memory plan
/// the last one, plan-memory, leaves in lowered.plan. kiln::Error, before anything runs, when
/// the list does not end with plan-memory (a plan made before the last pass would not describe
/// the graph codegen emits).
void runLoweringPasses(LoweredModel &lowered, const std::vector<std::string> &passes);

/// The weights of a lowered model in weight order: each parameter's value from
/// options.params or its initial value, then the large constants. kiln::Error naming a
/// parameter that has neither.
std::vector<Tensor> collectWeights(const LoweredModel &lowered, const ir::ParamValues &params);

/// Lowers, compiles (or loads from the disk cache) and loads `graph`. The executable shares
/// the graph's weights: a weight the runtime repacks at load (Executable.h) then lives twice,
/// plain in the graph and packed in the executable, for as long as the caller keeps the graph.
runtime::Executable compile(const ir::Graph &graph, const CompileOptions &options = {});
/// compile() for a graph the caller hands over: it is released once lowered, so that a weight
/// the runtime repacks at load is replaced by its packed copy instead of living beside it
/// (unless options.params holds it too), and the process's peak stays near one copy of the
/// weights.
runtime::Executable compile(std::unique_ptr<ir::Graph> graph, const CompileOptions &options = {});
/// compile()'s second half, for a model the caller lowered (lowerGraph) and hands over: its
/// weights are collected (collectWeights, from options.params or the graph), its graph is
/// released, and its source is compiled and loaded. For the weights to be packed in place, the
/// caller must hold no other graph that shares them.
runtime::Executable compileLowered(LoweredModel lowered, const CompileOptions &options);

/// Where compileAheadOfTime writes its intermediate files.
struct AotOptions {
  /// A folder for the generated source (model.cpp) and the weights (weights.bin), kept
  /// afterwards for inspection; empty: a temporary folder beside the output, removed after.
  std::string buildDir;
  /// Further C functions `const char *NAME(void)` the shared object exports, each returning
  /// its text (a training step's manifest: runtime/TrainingManifest.h).
  std::map<std::string, std::string> exportedStrings;
};

/// What compileAheadOfTime wrote.
struct AotModel {
  std::string soPath;
  std::string sourcePath;  // the generated source, if AotOptions::buildDir kept it
  int64_t weightBytes = 0; // the embedded weights, alignment padding included
  int64_t numWeights = 0;
  int64_t numLaunches = 0;
  int64_t arenaBytes = 0;
};

/// Lowers `graph` as compile() does and writes it, with its weights (options.params, else
/// the parameters' initial values), as the one shared object `outputPath`:
/// Executable::load(outputPath) runs it with no weights given and no compiler. The source is
/// the JIT's (lowerGraph) with the weights pulled in by an assembler `.incbin` of a weights
/// file (64-byte aligned, in weight order, as kiln_model_desc::weight_data), so that
/// megabytes of weights never pass through the C++ front end, and an exported
/// `<options.symbolPrefix>kiln_model` whose description points at them. The object links
/// nothing of kiln (the runtime hands it kiln_rt) and is not put in the compile cache.
/// kiln::Error naming a parameter without a value, a file that cannot be written, or the
/// compiler's first error.
AotModel compileAheadOfTime(const ir::Graph &graph, const std::string &outputPath,
                            const CompileOptions &options = {}, const AotOptions &aot = {});

/// compileAheadOfTime's second half, for a model the caller lowered (a training step:
/// codegen/TrainingAot.h) with a symbol prefix other than options.symbolPrefix: writes it with
/// `weights` (in its weight order, as collectWeights gives them) as the one shared object
/// `outputPath`. kiln::Error as compileAheadOfTime, or when the prefixes clash.
AotModel compileLoweredAheadOfTime(const LoweredModel &lowered, const std::vector<Tensor> &weights,
                                   const std::string &outputPath, const CompileOptions &options = {},
                                   const AotOptions &aot = {});

/// One model of a shared object written ahead of time: what it computes (lowered with a
/// symbol prefix of its own), its weights (as collectWeights gives them) and the symbol it is
/// exported as, which Executable::load's `symbol` names.
struct AotPart {
  const LoweredModel *lowered = nullptr;
  std::vector<Tensor> weights;
  std::string exportedSymbol;
};

/// compileLoweredAheadOfTime for several models in one shared object and one compiler run (a
/// split training step's two parts: codegen/TrainingAot.h), each with its own embedded weights.
/// The AotModel's counts are summed over the parts, its arena the largest. kiln::Error as
/// compileLoweredAheadOfTime, or when two parts would export one symbol.
AotModel compileLoweredPartsAheadOfTime(const std::vector<AotPart> &parts, const std::string &outputPath,
                                        const CompileOptions &options = {}, const AotOptions &aot = {});

/// Compiles several lowered models, each emitted with its own CompileOptions::symbolPrefix, as
/// one translation unit: one compiler run (cached on disk like any source) instead of one per
/// model. Load model i with Executable::load(object.soPath, weights, options,
/// models[i]->model.modelSymbol). kiln::Error when two models share a prefix.
CompiledObject compileLoweredBatch(const std::vector<const LoweredModel *> &models,
                                   const CompilerOptions &options = {});

/// Lowers every graph (with symbol prefix "m<i>_", i its position; options.symbolPrefix and
/// options.params apply to all), compiles them in one translation unit and loads one
/// Executable per graph, in order. Any graph codegen cannot lower fails the whole batch;
/// callers that want to go on without it lower and batch themselves (compileLoweredBatch).
std::vector<runtime::Executable> compileBatch(const std::vector<const ir::Graph *> &graphs,
                                              const CompileOptions &options = {});

/// One executable per input shape signature, built on first use by compiling the graph that
/// `build` returns for that signature; least recently used executables are dropped when their
/// bytes (weights and arena) pass the limit. Safe to use from several threads.
class CompileCache {
public:
  using GraphBuilder = std::function<std::unique_ptr<ir::Graph>(const std::vector<TensorType> &inputTypes)>;

  CompileCache(GraphBuilder build, CompileOptions options = {}, int64_t byteLimit = int64_t(1) << 30);

  /// The executable for inputs of these types (compiled on a miss).
  std::shared_ptr<const runtime::Executable> get(const std::vector<TensorType> &inputTypes);
  /// Runs the executable for `inputs`' types on them.
  std::vector<Tensor> run(const std::vector<Tensor> &inputs);

  int64_t compiles() const;
  int64_t hits() const;
  size_t size() const;
  int64_t bytes() const;

private:
  struct Entry {
    std::string key;
    std::shared_ptr<const runtime::Executable> executable;
    int64_t bytes = 0;
  };

  GraphBuilder build_;
  CompileOptions options_;
  int64_t byteLimit_;
  mutable std::mutex mutex_;
  std::list<Entry> entries_; // most recently used first
  std::map<std::string, std::list<Entry>::iterator> index_;
  int64_t bytes_ = 0, compiles_ = 0, hits_ = 0;
};

} // namespace kiln::codegen
