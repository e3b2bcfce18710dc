// kiln-run FILE.kir|FILE.onnx: load the graph, bind inputs and parameters, run passes (or
// bisect them), compile it (falling back to the reference evaluator for what codegen does not
// support yet) or evaluate it, and report.
#include <chrono>
#include <iostream>
#include <optional>

#include "codegen/CompileModel.h"
#include "core/Error.h"
#include "passes/Bisect.h"
#include "runtime/ThreadPool.h"
#include "tools/GraphLoading.h"
#include "tools/PrecisionComparison.h"
#include "tools/RunCommands.h"
#include "tools/RunReport.h"

namespace kiln::tools {

namespace {

/// The graph compiled for the runtime, or nothing when codegen does not support one of its ops
/// or dtypes yet (then the caller runs the reference evaluator on `graph`; the note says why).
/// Once lowered, `graph` is released: the executable is then the only holder of the weights,
/// and packing one at load replaces its plain copy instead of adding to it.
std::optional<runtime::Executable> compileOrFallBack(std::unique_ptr<ir::Graph> &graph, const RunOptions &options,
                                                     const ir::ParamValues &params, std::string &tiling) {
  codegen::CompileOptions compileOptions;
  compileOptions.params = params;
  compileOptions.precision = options.precision;
  compileOptions.batchTile = options.batchTile;
  if (options.threads > 0)
    compileOptions.runtime.pool = std::make_shared<runtime::ThreadPool>(options.threads);
  codegen::LoweredModel lowered;
  try {
    lowered = codegen::lowerGraph(*graph, compileOptions);
    tiling = lowered.batchTiling;
  } catch (const Error &e) {
    std::string message = e.what();
    if (message.rfind("codegen: ", 0) != 0 || message.find("is not supported yet") == std::string::npos)
      throw;
    if (options.precision != codegen::ContractionPrecision::F32) // never f32 in its place, silently
      fail("--precision {} needs a compiled graph: {}", codegen::contractionPrecisionName(options.precision),
           oneLine(message));
    std::cerr << "kiln-run: note: " << oneLine(message) << "; running the reference evaluator instead\n";
    return std::nullopt;
  }
  graph.reset();
  return codegen::compileLowered(std::move(lowered), compileOptions);
}

/// --bisect-passes: one line per pass, then the first pass out of tolerance or that all agree.
int bisect(ir::Graph &graph, const RunOptions &options, const std::vector<Tensor> &inputs,
           const ir::ParamValues &params, const std::vector<std::string> &names) {
  double rtol = options.rtolOr(1e-4), atol = options.atolOr(1e-5);
  passes::PassManager manager = selectPasses(options.pipeline, options.passList, "inference");
  size_t total = manager.passNames().size();
  std::cout << fmt::format("bisect: {} passes, each compared with the input graph (rtol {}, atol {})\n", total, rtol,
                           atol);
  auto describe = [&](const passes::PassCheck &check) {
    std::string problem = oneLine(check.problem);
    return check.failedOutput >= 0 ? fmt::format("output {}: {}", names.at(check.failedOutput), problem) : problem;
  };
  std::vector<passes::PassCheck> checks =
      passes::bisectPasses(graph, manager, inputs, params, rtol, atol, [&](const passes::PassCheck &check) {
        std::cout << fmt::format("pass {} {}: max rel error {:.3g}, {}\n", check.index, check.pass, check.maxRelError,
                                 check.ok ? "ok" : "OUT OF TOLERANCE (" + describe(check) + ")")
                  << std::flush;
      });
  if (const passes::PassCheck *failure = passes::firstFailure(checks)) {
    std::cout << fmt::format("first pass out of tolerance: pass {} {}: {}\n", failure->index, failure->pass,
                             describe(*failure));
    return 1;
  }
  std::cout << fmt::format("all {} passes agree with the input graph\n", total);
  return 0;
}

double millisecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

int64_t paramBytes(const ir::Graph &graph) {
  int64_t bytes = 0;
  for (const ir::Node *param : graph.params())
    bytes += static_cast<int64_t>(param->output()->type().byteSize());
  return bytes;
}

} // namespace

int runGraphCommand(const RunOptions &options) {
  std::map<std::string, Tensor> given;
  auto loadStart = std::chrono::steady_clock::now();
  std::unique_ptr<ir::Graph> graph = loadGraph({options.paths[0], options.inputs, {}, options.dims, true}, given);
  double loadMs = millisecondsSince(loadStart);
  std::vector<std::string> names = outputNames(*graph);
  // Every name checked and every expected file read before the (possibly long) evaluation.
  OutputRequests requests(names, options, "the graph's");
  std::vector<Tensor> inputs = bindInputs(inputSpecs(*graph), options, given, "graph @" + graph->name());
  std::string inputTypes = inputTypesOf(inputSpecs(*graph), inputs);
  ir::ParamValues params = bindParams(*graph, options.params, options.seed, true);
  if (options.bisectPasses)
    return bisect(*graph, options, inputs, params, names);
  if (!options.pipeline.empty() || !options.passList.empty()) {
    passes::PassContext context;
    selectPasses(options.pipeline, options.passList, "").run(*graph, context);
  }
  if (options.comparePrecision)
    return comparePrecision(std::move(graph), options, inputs, params, names);
  if (!options.quantizedModel.empty())
    return compareQuantized(std::move(graph), options, inputs, params, names);

  std::optional<runtime::Executable> executable;
  auto compileStart = std::chrono::steady_clock::now();
  std::string tiling;
  if (!options.reference)
    executable = compileOrFallBack(graph, options, params, tiling);
  RunTarget target;
  target.loadMs = loadMs;
  target.inputTypes = inputTypes;
  if (executable) {
    target.compileMs = millisecondsSince(compileStart);
    runtime::Executable &compiled = *executable;
    target.description = fmt::format(
        "compiled model ({} threads{}{})", compiled.numThreads(),
        options.precision == codegen::ContractionPrecision::F32
            ? ""
            : fmt::format(", {} contractions", codegen::contractionPrecisionName(options.precision)),
        compiled.batchTile() > 0 ? fmt::format(", batch tiles of {}", compiled.batchTile()) : "");
    target.batchTiling = tiling;
    target.arenaBytes = compiled.arenaBytes();
    target.weightBytes = weightBytesOf(compiled);
    target.executable = &compiled;
    target.run = [&](std::vector<Tensor> &outputs) {
      if (outputs.empty())
        outputs = compiled.run(inputs);
      else
        compiled.runInto(inputs, outputs);
    };
  } else {
    target.description = "reference evaluator";
    target.weightBytes = paramBytes(*graph);
    target.run = [&](std::vector<Tensor> &outputs) { outputs = ir::evaluate(*graph, inputs, params); };
  }
  return runAndReport(target, requests, options);
}

} // namespace kiln::tools
