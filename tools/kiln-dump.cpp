// kiln-dump: reads a .kir file or an ONNX model and prints it as text, Graphviz DOT or JSON,
// optionally after running passes on it (--passes, --pipeline) with the IR printed after passes
// and per-pass statistics on stderr, the memory plan as text or as an SVG picture (--print-memory-plan,
// --memory-plan), or the C++ source codegen generates for it (--emit=cpp); --coverage reports
// what kiln supports of an ONNX model before anything runs; --list-ops prints the op catalogue
// (ir/OpCatalogue.h): the op table with each composite's decomposition into primitives. Every
// error is one line "kiln-dump: MESSAGE" on stderr and exit status 1.
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>

#include "codegen/CompileModel.h"
#include "core/Error.h"
#include "frontend/onnx/OnnxImporter.h"
#include "ir/Export.h"
#include "ir/OpCatalogue.h"
#include "ir/Parser.h"
#include "ir/Printer.h"
#include "passes/PassManager.h"
#include "passes/Pipelines.h"
#include "passes/fusion/Fuse.h"
#include "passes/fusion/FusionAnalysis.h"
#include "passes/memory/MemoryPlanSvg.h"
#include "passes/memory/PlanMemory.h"
#include "tools/GraphLoading.h"
#include "tools/ToolCommon.h"

using namespace kiln;
using namespace kiln::ir;

namespace {

constexpr const char *kUsage = R"(usage: kiln-dump FILE [--format=text|dot|json] [--keep-data] [-o OUT]
       kiln-dump FILE (--pipeline=NAME | --passes=A,B,...) [--print-after-all]
                 [--print-after=PASS]... [--stats] [--memory-plan=FILE.svg]
                 [--print-memory-plan] [--format=...] [-o OUT]
       kiln-dump FILE --emit=cpp [--pipeline=NAME | --passes=A,B,...] [-o OUT]
       kiln-dump MODEL.onnx --coverage [-o OUT]
       kiln-dump --list-ops [-o OUT]

Reads a .kir graph (FILE '-' reads standard input) or an ONNX model (FILE ending in .onnx,
imported with kiln's ONNX importer), verifies it and prints it. An ONNX model's symbolic dims
(dim_params) stay symbols (f32[N,3,224,224]) unless --dim fixes them.
  --format=FORMAT  text (default): the .kir form; dot: Graphviz; json: a JSON document
  --keep-data      print every tensor value (large ones are elided by default)
  --dim NAME=N     give symbolic dim NAME the extent N (repeatable): the graph is bound to it
                   (static) before anything else, as kiln-run --dim binds it
  --pipeline=NAME  run the named pipeline (below) on the graph before printing it
  --passes=A,B,... run these passes, in this order (each may appear more than once); the
                   graph is verified after every pass
  --print-after-all     print the IR to stderr after every pass
  --print-after=PASS    print the IR to stderr after every run of PASS (repeatable)
  --stats          print to stderr, per pass that ran: whether it changed the graph, its time
                   and its counters; then `nodes N` (non-source nodes, a kernel's body nodes
                   counted instead of the kernel), `kernels K` (kernels plus the non-source
                   nodes outside them) and, when a pass planned memory, `arena_bytes`,
                   `lower_bound_bytes` and `naive_bytes`
  --explain-fusion print, instead of the graph, each kernel group with its ops and the rule
                   that joined each, the single ops, and why every unfused edge was not fused
                   (what `fuse` did in the pipeline, or would do to the graph as it stands)
  --memory-plan=FILE.svg  write a picture of the memory plan to FILE.svg: a rectangle per
                   buffer, steps across and arena offset down, names in tooltips; needs the
                   plan-memory pass (--pipeline=inference, or --passes=...,plan-memory)
  --print-memory-plan  print, instead of the graph, the memory plan: a summary line and one
                   line per buffer (its values, bytes, offset and live steps); needs plan-memory
  --emit=cpp       print, instead of the graph, the C++ translation unit codegen generates for
                   it (what kiln-run compiles): the graph after the inference pipeline, or, with
                   --pipeline/--passes, as those passes leave it (primitives and kernels only)
  --coverage       for an ONNX model: every op type with its node count and whether kiln
                   supports it (and what it does not support); exits 1 when anything is
                   unsupported. Only scans the model: nothing is imported or run
  --list-ops       print every op: mnemonic, tier, fusion kind, family and, for composites,
                   the primitives its decomposition uses
  -o OUT           write to OUT instead of standard output
  --help           show this help
)";

/// The usage text with the registered passes and pipelines.
std::string usage() {
  std::string text = kUsage;
  text += "\npasses (--passes=A,B,...):\n";
  for (const passes::PassInfo &pass : passes::registeredPasses())
    text += fmt::format("  {:<16} {}\n", pass.name, pass.description);
  text += "\npipelines (--pipeline=NAME):\n";
  for (const passes::PipelineInfo &pipeline : passes::registeredPipelines())
    text += fmt::format("  {:<16} {}\n", pipeline.name, fmt::join(pipeline.passes, ", "));
  return text;
}

struct Options {
  std::string input;
  std::string output;
  std::string format = "text";
  bool listOps = false;
  bool keepData = false;
  bool coverage = false;
  std::string pipeline;                // --pipeline
  std::optional<std::string> passList; // --passes (given but empty is an error, reported later)
  bool printAfterAll = false;
  std::vector<std::string> printAfter;
  bool stats = false;
  bool explainFusion = false;
  std::string memoryPlanSvg; // --memory-plan: the SVG file to write
  bool printMemoryPlan = false;
  std::string emit; // --emit: "cpp"
  DimBindings dims; // --dim

  bool runsPasses() const { return !pipeline.empty() || passList.has_value(); }
};

bool isOnnxPath(const std::string &path) {
  return path.size() > 5 && path.compare(path.size() - 5, 5, ".onnx") == 0;
}

Options parseArgs(int argc, char **argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto valueOf = [&](const std::string &flag) -> std::string {
      if (arg.size() > flag.size() && arg.compare(0, flag.size() + 1, flag + "=") == 0)
        return arg.substr(flag.size() + 1);
      if (i + 1 >= argc)
        fail("{} needs a value", flag);
      return argv[++i];
    };
    if (arg == "--help" || arg == "-h") {
      std::cout << usage();
      std::exit(0);
    } else if (arg == "--list-ops") {
      options.listOps = true;
    } else if (arg == "--dim" || arg.rfind("--dim=", 0) == 0) {
      tools::addDimBinding("--dim", valueOf("--dim"), options.dims);
    } else if (arg == "--keep-data") {
      options.keepData = true;
    } else if (arg == "--coverage") {
      options.coverage = true;
    } else if (arg == "--format" || arg.rfind("--format=", 0) == 0) {
      options.format = valueOf("--format");
      if (options.format != "text" && options.format != "dot" && options.format != "json")
        fail("unknown format '{}' (expected text, dot or json)", options.format);
    } else if (arg == "-o" || arg.rfind("-o=", 0) == 0) {
      options.output = valueOf("-o");
    } else if (arg == "--pipeline" || arg.rfind("--pipeline=", 0) == 0) {
      options.pipeline = valueOf("--pipeline");
      if (options.pipeline.empty())
        fail("--pipeline needs a pipeline name (see --help)");
    } else if (arg == "--passes" || arg.rfind("--passes=", 0) == 0) {
      options.passList = valueOf("--passes");
    } else if (arg == "--print-after-all") {
      options.printAfterAll = true;
    } else if (arg == "--print-after" || arg.rfind("--print-after=", 0) == 0) {
      options.printAfter.push_back(valueOf("--print-after"));
    } else if (arg == "--explain-fusion") {
      options.explainFusion = true;
    } else if (arg == "--stats") {
      options.stats = true;
    } else if (arg == "--memory-plan" || arg.rfind("--memory-plan=", 0) == 0) {
      options.memoryPlanSvg = valueOf("--memory-plan");
      if (options.memoryPlanSvg.empty())
        fail("--memory-plan needs a file name (--memory-plan=FILE.svg)");
    } else if (arg == "--print-memory-plan") {
      options.printMemoryPlan = true;
    } else if (arg == "--emit" || arg.rfind("--emit=", 0) == 0) {
      options.emit = valueOf("--emit");
      if (options.emit != "cpp")
        fail("unknown --emit target '{}' (expected cpp)", options.emit);
    } else if (arg.size() > 1 && arg[0] == '-') {
      fail("unknown option '{}' (see --help)", arg);
    } else if (!options.input.empty()) {
      fail("more than one input file ('{}' and '{}')", options.input, arg);
    } else {
      options.input = arg;
    }
  }
  if (options.listOps && !options.input.empty())
    fail("--list-ops takes no input file");
  if (!options.listOps && options.input.empty())
    fail("no input file (see --help)");
  if (options.coverage && !isOnnxPath(options.input))
    fail("--coverage needs an ONNX model (a .onnx file), not '{}'", options.input);
  if (!options.pipeline.empty() && options.passList)
    fail("--pipeline and --passes cannot be combined");
  bool passOptions = options.runsPasses() || options.printAfterAll || !options.printAfter.empty() || options.stats ||
                     options.explainFusion || !options.memoryPlanSvg.empty() || options.printMemoryPlan;
  if (options.listOps && passOptions)
    fail("--list-ops runs no passes");
  if (options.coverage && passOptions)
    fail("--coverage runs no passes");
  if (options.printAfterAll && !options.runsPasses())
    fail("--print-after-all needs --pipeline or --passes");
  if (!options.printAfter.empty() && !options.runsPasses())
    fail("--print-after needs --pipeline or --passes");
  if (options.printMemoryPlan && options.explainFusion)
    fail("--print-memory-plan and --explain-fusion cannot be combined (each replaces the graph)");
  if (!options.emit.empty() && (options.listOps || options.coverage || options.explainFusion ||
                                options.printMemoryPlan || options.format != "text"))
    fail("--emit=cpp prints the generated source instead of the graph; it cannot be combined with --list-ops, "
         "--coverage, --explain-fusion, --print-memory-plan or --format");
  return options;
}

// --- passes ----------------------------------------------------------------------------------

/// The passes --pipeline or --passes select, with --print-after-all and --print-after printing
/// the IR to stderr after the passes they name.
passes::PassManager makePassManager(const Options &options, const PrintOptions &print) {
  passes::PassManager manager;
  if (!options.pipeline.empty())
    manager.addPipeline(options.pipeline);
  else
    manager.addPasses(passes::splitPassList(*options.passList));
  std::vector<std::string> names = manager.passNames();
  for (const std::string &name : options.printAfter) {
    try {
      passes::createPass(name);
    } catch (const Error &error) {
      fail("--print-after={}: {}", name, error.what());
    }
    if (std::find(names.begin(), names.end(), name) == names.end())
      fail("--print-after={}: pass '{}' does not run (the passes are: {})", name, name, fmt::join(names, ", "));
  }
  if (!options.printAfterAll && options.printAfter.empty())
    return manager;
  auto index = std::make_shared<size_t>(0);
  manager.setAfterPassCallback([options, print, index, total = names.size()](const passes::PassRecord &record,
                                                                             const Graph &graph) {
    ++*index;
    const auto &wanted = options.printAfter;
    if (!options.printAfterAll && std::find(wanted.begin(), wanted.end(), record.name) == wanted.end())
      return;
    std::cerr << fmt::format("// ----- IR after pass {} of {}: {} ({}) -----\n", *index, total, record.name,
                             record.changed ? "changed" : "unchanged")
              << printGraph(graph, print) << std::flush;
  });
  return manager;
}

/// --stats: each pass that ran with its counters, then the graph's size and memory plan.
std::string formatStats(const passes::PassManager &manager, const passes::PassContext &context,
                        const Graph &graph) {
  std::string out;
  for (size_t i = 0; i < manager.records().size(); ++i) {
    const passes::PassRecord &record = manager.records()[i];
    out += fmt::format("pass {} {}: {}, {:.3f} ms\n", i + 1, record.name, record.changed ? "changed" : "unchanged",
                       record.seconds * 1e3);
    for (const auto &[counter, value] : record.stats.counters())
      out += fmt::format("  {} {}\n", counter, value);
  }
  // A kernel is one launch but holds several operations: `nodes` counts the operations,
  // `kernels` the launches.
  int64_t nodes = 0, kernels = 0;
  auto isSource = [](const Node *node) { return opTraits(node->op()).tier == OpTier::Source; };
  for (const Node *node : graph.nodes()) {
    if (isSource(node))
      continue;
    ++kernels;
    if (!node->body()) {
      ++nodes;
      continue;
    }
    for (const Node *inner : node->body()->nodes())
      nodes += !isSource(inner);
  }
  out += fmt::format("nodes {}\nkernels {}\n", nodes, kernels);
  if (const auto *plan = context.analysis<passes::MemoryPlan>("memory-plan"))
    out += fmt::format("arena_bytes {}\nlower_bound_bytes {}\nnaive_bytes {}\n", plan->arenaBytes,
                       plan->lowerBoundBytes, plan->naiveBytes);
  return out;
}

/// The plan that --memory-plan and --print-memory-plan show. Checked before the passes run (so
/// that a long pipeline is not wasted) and after: the plan must describe the graph as printed,
/// so no pass may change the graph after the last plan-memory.
const passes::MemoryPlan &plannedMemory(const Options &options, const passes::PassManager &manager,
                                        const passes::PassContext &context, const std::string &flag) {
  std::vector<std::string> names = manager.passNames();
  const auto *plan = context.analysis<passes::MemoryPlan>("memory-plan");
  if (!options.runsPasses() || std::find(names.begin(), names.end(), "plan-memory") == names.end() || !plan)
    fail("{} needs the plan-memory pass (use --pipeline=inference)", flag);
  const auto &records = manager.records();
  for (size_t i = records.size(); i-- > 0 && records[i].name != "plan-memory";)
    if (records[i].changed)
      fail("{}: pass '{}' changed the graph after plan-memory, so the plan no longer describes it (run "
           "plan-memory last)",
           flag, records[i].name);
  return *plan;
}

void writeFile(const std::string &path, const std::string &text) {
  std::ofstream out(path, std::ios::binary);
  if (!out)
    fail("cannot open '{}' for writing: {}", path, std::strerror(errno));
  out << text;
  out.close();
  if (!out)
    fail("cannot write '{}'", path);
}

// --- --coverage ------------------------------------------------------------------------------

/// One line per op type ("Conv  20  supported"), the problems under it, and a summary line.
std::string formatCoverage(const std::string &path, const frontend::OnnxCoverage &coverage) {
  size_t typeWidth = 7;
  for (const frontend::OnnxOpCoverage &op : coverage.ops)
    typeWidth = std::max(typeWidth, op.opType.size());
  std::string out = fmt::format("{}: opset {}, {} nodes, {} op types\n", path, coverage.opset,
                                coverage.nodeCount, coverage.ops.size());
  out += fmt::format("{:<{}} {:>6}  {}\n", "op_type", typeWidth, "count", "status");
  int64_t unsupportedNodes = 0;
  size_t unsupportedTypes = 0;
  for (const frontend::OnnxOpCoverage &op : coverage.ops) {
    std::string status = op.supported ? (op.problems.empty() ? "supported" : "partly supported")
                                      : "unsupported";
    out += fmt::format("{:<{}} {:>6}  {}\n", op.opType, typeWidth, op.count, status);
    for (const std::string &problem : op.problems)
      out += fmt::format("    {}\n", problem);
    if (!op.supported || !op.problems.empty()) {
      ++unsupportedTypes;
      unsupportedNodes += op.count;
    }
  }
  for (const std::string &problem : coverage.otherProblems)
    out += fmt::format("model: {}\n", problem);
  if (coverage.fullySupported())
    out += "every op is supported\n";
  else
    out += fmt::format("{} of {} op types ({} nodes) not fully supported{}\n", unsupportedTypes,
                       coverage.ops.size(), unsupportedNodes,
                       coverage.otherProblems.empty() ? "" : ", and the model problems above");
  return out;
}

// --- main ------------------------------------------------------------------------------------

/// The graph in `path`: bound to `dims` when given (tools/GraphLoading.h), else as it is, an
/// ONNX model's unresolved dim_params kept as symbols.
std::unique_ptr<Graph> readGraph(const std::string &path, const DimBindings &dims) {
  if (!dims.empty()) {
    std::map<std::string, Tensor> given;
    return tools::loadGraph({path, {}, {}, dims, true}, given);
  }
  if (isOnnxPath(path)) {
    frontend::OnnxImportOptions import;
    import.keepSymbolicDims = true;
    return frontend::importOnnxFile(path, import);
  }
  return parseGraphFile(path);
}

std::string render(const Options &options) {
  if (options.listOps)
    return formatOpCatalogue();
  std::unique_ptr<Graph> graph = readGraph(options.input, options.dims);
  PrintOptions print;
  print.keepLargeTensors = options.keepData;
  passes::PassManager manager;
  passes::PassContext context;
  bool wantsPlan = !options.memoryPlanSvg.empty() || options.printMemoryPlan;
  std::string planFlag = options.memoryPlanSvg.empty() ? "--print-memory-plan" : "--memory-plan";
  if (options.runsPasses()) {
    manager = makePassManager(options, print);
    if (wantsPlan) {
      std::vector<std::string> names = manager.passNames();
      if (std::find(names.begin(), names.end(), "plan-memory") == names.end())
        fail("{} needs the plan-memory pass (use --pipeline=inference)", planFlag);
    }
    manager.run(*graph, context);
  }
  if (options.stats)
    std::cerr << formatStats(manager, context, *graph) << std::flush;
  if (wantsPlan) {
    const passes::MemoryPlan &plan = plannedMemory(options, manager, context, planFlag);
    if (!options.memoryPlanSvg.empty())
      writeFile(options.memoryPlanSvg, passes::memoryPlanSvg(*graph, plan));
    if (options.printMemoryPlan)
      return passes::formatMemoryPlan(*graph, plan);
  }
  if (!options.emit.empty()) {
    // Without passes of the user's, the graph goes through the inference pipeline as in kiln-run.
    codegen::LoweredModel lowered =
        options.runsPasses() ? codegen::lowerPrepared(*graph) : codegen::lowerGraph(*graph);
    return lowered.model.source;
  }
  if (options.explainFusion) {
    // The report `fuse` wrote before outlining; without fuse, what it would do to this graph.
    if (const auto *report = context.analysis<passes::FusionReport>("fusion"))
      return report->text;
    return passes::formatFusionReport(*graph, passes::analyzeFusion(*graph));
  }
  if (options.format == "dot")
    return toDot(*graph);
  if (options.format == "json")
    return toJson(*graph);
  return printGraph(*graph, print);
}

void writeOutput(const Options &options, const std::string &text) {
  if (options.output.empty()) {
    std::cout << text << std::flush;
    if (!std::cout)
      fail("cannot write to standard output");
    return;
  }
  writeFile(options.output, text);
}

/// Tools report every error as one line.
int reportError(const std::string &message) {
  std::string line = message;
  std::replace(line.begin(), line.end(), '\n', ' ');
  std::cerr << "kiln-dump: " << line << "\n";
  return 1;
}

} // namespace

int main(int argc, char **argv) {
  try {
    Options options = parseArgs(argc, argv);
    if (options.coverage) {
      frontend::OnnxCoverage coverage = frontend::onnxCoverage(options.input);
      writeOutput(options, formatCoverage(options.input, coverage));
      return coverage.fullySupported() ? 0 : 1;
    }
    writeOutput(options, render(options));
    return 0;
  } catch (const Error &e) {
    return reportError(e.what());
  } catch (const std::exception &e) {
    return reportError(fmt::format("internal error: {}", e.what()));
  } catch (...) {
    return reportError("internal error");
  }
}
