// kiln-run: runs a .kir graph or an .onnx model on .npy / ONNX .pb inputs (or random ones),
// compiled by kiln's codegen (or, with --reference, on the reference evaluator), prints a
// summary of each output, writes outputs to .npy files and checks them against expected ones;
// --bench times repeated runs; --pipeline/--passes run passes on the graph first, and --bisect-passes
// compares the outputs after every pass with the input graph's to find the first pass that
// changes them; with --onnx-test it runs ONNX backend conformance test folders instead. Every
// error is one line "kiln-run: MESSAGE" and exit status 1; a failed --check, a pass that leaves
// tolerance under --bisect-passes and a failing conformance test are exit status 1 too.
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <sys/resource.h>
#include <unistd.h>

#include "codegen/Compile.h"
#include "frontend/onnx/OnnxBackendTest.h"
#include "frontend/onnx/OnnxImporter.h"
#include "ir/Error.h"
#include "ir/Evaluator.h"
#include "ir/Parser.h"
#include "passes/Bisect.h"
#include "passes/PassManager.h"
#include "runtime/Npy.h"
#include "runtime/ThreadPool.h"

using namespace kiln;

namespace {

constexpr const char *kUsage = R"(usage: kiln-run FILE.kir|FILE.onnx [options]
       kiln-run --onnx-test [--compiled] DIR... [--list-passing FILE] [--jobs N] [--batch N]

Runs the graph in FILE.kir, or the ONNX model in FILE.onnx (imported with kiln's ONNX
importer), and prints one line per output: its name, type and a short summary of its values.
The graph is compiled (inference pipeline, generated C++ compiled by the system compiler and
cached on disk, see $KILN_CACHE_DIR) and run on kiln's runtime; a graph with an op or dtype
codegen does not support yet runs on the reference evaluator instead, with a note on stderr.

options:
  --input NAME=FILE       bind graph input NAME (by its name in the graph signature, or the ONNX
                          input name) to FILE: a .npy file, or an ONNX TensorProto (.pb). Inputs
                          not given are random (kiln::randomTensor: floats in [-1,1), integers in
                          [0,10)), input number i drawn with seed S+i. For an ONNX model the
                          given inputs' shapes also fix the model's symbolic dims
  --param NAME=FILE       bind parameter NAME; parameters whose value is not in the file (printed
                          as 'elided') and not given are random too, drawn after the inputs
  --output NAME=FILE.npy  write output NAME to FILE.npy
  --check NAME=FILE       compare output NAME with FILE (.npy or .pb) (|got - want| <= atol +
                          rtol*|want|); a mismatch prints the worst element and exits with status 1
  --rtol R                relative tolerance of --check (default 1e-4; 1e-3 with --onnx-test)
  --atol A                absolute tolerance of --check (default 1e-5; 1e-7 with --onnx-test)
  --seed S                seed of the random inputs (default 0)
  --reference             run with the reference evaluator instead of compiling
  --threads N             run compiled kernels on N threads (default: one per core)
  --bench N               after the run (the warm-up), time N more runs and print arena_bytes,
                          weight_bytes, peak_rss_bytes and, last, median_ms
  --pipeline NAME         run the named pipeline of passes (see kiln-dump --help) on the graph
                          before running it
  --passes A,B,...        run these passes, in this order, on the graph before running it
  --bisect-passes         run the reference evaluator on the graph after every pass of the
                          pipeline (inference unless --pipeline or --passes says otherwise), on
                          the same inputs and parameters; print one line per pass with the largest
                          relative error of any output against the input graph's, then the first
                          pass whose outputs leave tolerance (--rtol/--atol; exit status 1) or
                          that all passes agree
  --help                  print this help

conformance (--onnx-test):
  --onnx-test             treat every DIR argument as an ONNX backend test folder (model.onnx and
                          test_data_set_*/input_*.pb, output_*.pb) or a folder of such folders;
                          import, run and compare each (floats within rtol/atol, NaN equal to NaN,
                          integers and bools exactly). Prints "FAIL name: reason" per failing test,
                          "SKIP name: reason" per test whose model needs strings, sequences,
                          optionals, control flow or random ops, and ends with the line
                          "N passed, M failed, K skipped". Exit status 1 when any test fails;
                          a test that takes more than 2 s is named on stderr ("SLOW name")
  --list-passing FILE     write the names of the passing tests to FILE, one per line, sorted
  --jobs N                run N tests at a time (default 1)
  --compiled              run each test compiled instead of on the reference evaluator, same
                          comparison; a test whose ops codegen does not support yet is SKIP
                          ("codegen: ..."). To keep compiler runs few, the models are lowered
                          into batches that each compile as one translation unit (cached on
                          disk like any model); a batch the compiler rejects is retried model
                          by model, so the failure lands on the model that caused it
  --batch N               models per translation unit with --compiled (default 100)

Output names: a returned value's name in the graph (e.g. %logits is "logits"), or "output0",
"output1", ... by position when the returned value is unnamed (e.g. %7).
Options taking a value accept both "--opt VALUE" and "--opt=VALUE". Errors print one line
"kiln-run: MESSAGE" and exit with status 1.
)";

struct Binding {
  std::string name, path;
};

struct Options {
  std::vector<std::string> paths; // the graph file, or the --onnx-test folders
  std::vector<Binding> inputs, params, outputs, checks;
  std::optional<double> rtol, atol;
  uint64_t seed = 0;
  bool help = false;
  bool onnxTest = false;
  bool compiled = false; // --onnx-test --compiled
  int batch = 100;       // models per translation unit with --compiled
  std::string listPassing;
  int jobs = 1;
  std::string pipeline, passList;
  bool bisectPasses = false;
  bool reference = false;
  int threads = 0; // 0: the runtime's default pool
  int bench = 0;   // timed runs after the first
};

Binding parseBinding(const std::string &flag, const std::string &value) {
  size_t eq = value.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == value.size())
    fail("{} expects NAME=FILE.npy, got '{}'", flag, value);
  return {value.substr(0, eq), value.substr(eq + 1)};
}

double parseTolerance(const std::string &flag, const std::string &value) {
  errno = 0;
  char *end = nullptr;
  double v = std::strtod(value.c_str(), &end);
  if (value.empty() || *end != '\0' || errno == ERANGE || !std::isfinite(v) || v < 0)
    fail("{} expects a non-negative number, got '{}'", flag, value);
  return v;
}

uint64_t parseCount(const std::string &flag, const std::string &value, const char *what) {
  if (value.empty() || value.find_first_not_of("0123456789") != std::string::npos)
    fail("{} expects {}, got '{}'", flag, what, value);
  errno = 0;
  unsigned long long v = std::strtoull(value.c_str(), nullptr, 10);
  if (errno == ERANGE)
    fail("{} value '{}' is too large", flag, value);
  return v;
}

const std::string &nonEmpty(const std::string &flag, const std::string &value) {
  if (value.empty())
    fail("{} needs a value", flag);
  return value;
}

Options parseArgs(int argc, char **argv) {
  Options options;
  std::vector<std::string> args(argv + 1, argv + argc);
  for (size_t i = 0; i < args.size(); ++i) {
    std::string arg = args[i];
    if (arg == "--help" || arg == "-h") {
      options.help = true;
      continue;
    }
    if (arg == "--reference") {
      options.reference = true;
      continue;
    }
    if (arg == "--onnx-test") {
      options.onnxTest = true;
      continue;
    }
    if (arg == "--compiled") {
      options.compiled = true;
      continue;
    }
    if (arg == "--bisect-passes") {
      options.bisectPasses = true;
      continue;
    }
    if (arg.rfind("--", 0) != 0 || arg == "--") {
      if (arg == "--" || (!arg.empty() && arg[0] == '-' && arg != "-"))
        fail("unknown option '{}' (see --help)", arg);
      options.paths.push_back(arg);
      continue;
    }
    // An option with a value, as "--opt VALUE" or "--opt=VALUE".
    std::string flag = arg, value;
    size_t eq = arg.find('=');
    if (eq != std::string::npos) {
      flag = arg.substr(0, eq);
      value = arg.substr(eq + 1);
    }
    static const char *kValued[] = {"--input",    "--param",  "--output",  "--check",        "--rtol",
                                    "--atol",     "--seed",   "--jobs",    "--list-passing", "--pipeline",
                                    "--passes",   "--threads", "--bench",  "--batch"};
    if (std::find(std::begin(kValued), std::end(kValued), flag) == std::end(kValued))
      fail("unknown option '{}' (see --help)", flag);
    if (eq == std::string::npos) {
      if (i + 1 >= args.size())
        fail("{} needs a value", flag);
      value = args[++i];
    }
    if (flag == "--input")
      options.inputs.push_back(parseBinding(flag, value));
    else if (flag == "--param")
      options.params.push_back(parseBinding(flag, value));
    else if (flag == "--output")
      options.outputs.push_back(parseBinding(flag, value));
    else if (flag == "--check")
      options.checks.push_back(parseBinding(flag, value));
    else if (flag == "--rtol")
      options.rtol = parseTolerance(flag, value);
    else if (flag == "--atol")
      options.atol = parseTolerance(flag, value);
    else if (flag == "--seed")
      options.seed = parseCount(flag, value, "a non-negative integer");
    else if (flag == "--jobs")
      options.jobs = static_cast<int>(std::clamp<uint64_t>(parseCount(flag, value, "a positive integer"), 1, 256));
    else if (flag == "--pipeline")
      options.pipeline = nonEmpty(flag, value);
    else if (flag == "--passes")
      options.passList = nonEmpty(flag, value);
    else if (flag == "--threads")
      options.threads = static_cast<int>(std::clamp<uint64_t>(parseCount(flag, value, "a positive integer"), 1, 1024));
    else if (flag == "--batch")
      options.batch = static_cast<int>(std::clamp<uint64_t>(parseCount(flag, value, "a positive integer"), 1, 10000));
    else if (flag == "--bench")
      options.bench = static_cast<int>(std::clamp<uint64_t>(parseCount(flag, value, "a positive integer"), 1, 1000000));
    else
      options.listPassing = value;
  }
  if (options.help)
    return options;
  if (!options.pipeline.empty() && !options.passList.empty())
    fail("--pipeline and --passes cannot be combined");
  if (options.onnxTest && (options.bisectPasses || !options.pipeline.empty() || !options.passList.empty()))
    fail("--onnx-test runs no passes; --bisect-passes, --pipeline and --passes do not apply");
  if ((options.onnxTest || options.bisectPasses) && (options.bench > 0 || options.threads > 0))
    fail("--bench and --threads apply to running one graph, not to --onnx-test or --bisect-passes");
  if (options.reference && options.threads > 0)
    fail("--threads applies to compiled runs; the reference evaluator runs on one thread");
  if (options.bisectPasses && (!options.outputs.empty() || !options.checks.empty()))
    fail("--bisect-passes compares the graph with itself pass by pass; --output and --check do not apply");
  if (options.compiled && !options.onnxTest)
    fail("--compiled applies only with --onnx-test (a single graph is compiled by default)");
  if (options.onnxTest) {
    if (options.compiled && options.reference)
      fail("--compiled and --reference cannot be combined");
    if (options.paths.empty())
      fail("--onnx-test needs at least one test folder (see --help)");
    if (!options.inputs.empty() || !options.params.empty() || !options.outputs.empty() || !options.checks.empty())
      fail("--onnx-test takes its inputs and expected outputs from the test folders; --input, --param, --output "
           "and --check do not apply");
    return options;
  }
  if (!options.listPassing.empty())
    fail("--list-passing applies only with --onnx-test");
  if (options.paths.empty())
    fail("no graph file given (usage: kiln-run FILE.kir [options]; see --help)");
  if (options.paths.size() > 1)
    fail("more than one graph file: '{}' and '{}'", options.paths[0], options.paths[1]);
  return options;
}

/// One line, whatever the message holds.
std::string oneLine(std::string message) {
  for (char &c : message)
    if (c == '\n' || c == '\r')
      c = ' ';
  return message;
}

std::string joinNames(const std::vector<std::string> &names) {
  return names.empty() ? "(none)" : fmt::format("{}", fmt::join(names, ", "));
}

bool endsWith(const std::string &text, const std::string &suffix) {
  return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

/// A tensor file: an ONNX TensorProto when it ends in .pb, else .npy.
Tensor readTensorFile(const std::string &path) {
  return endsWith(path, ".pb") ? frontend::readTensorProtoFile(path) : runtime::readNpy(path);
}

/// Drawing a random tensor larger than memory would end in the OOM killer, not an error; so
/// tensors kiln-run creates itself must fit in half of the machine's physical memory.
void checkFitsInMemory(const TensorType &type, const std::string &what) {
  long pages = sysconf(_SC_PHYS_PAGES), pageSize = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || pageSize <= 0)
    return;
  double limit = static_cast<double>(pages) * static_cast<double>(pageSize) / 2;
  double bytes = static_cast<double>(type.numElements()) * static_cast<double>(dtypeSize(type.dtype));
  if (bytes > limit)
    fail("{} of type {} needs {:.1f} GiB, more than half of this machine's {:.1f} GiB of memory", what, type.toString(),
         bytes / (1 << 30), 2 * limit / (1 << 30));
}

/// The graph's inputs bound to tensors: from --input files (already read into `given` for
/// ONNX models, read here otherwise), else random.
std::vector<Tensor> bindInputs(const ir::Graph &graph, const Options &options, std::map<std::string, Tensor> given) {
  const auto &inputs = graph.inputs();
  std::vector<std::string> names;
  for (const ir::Value *input : inputs)
    names.push_back(input->name());
  std::vector<Tensor> bound(inputs.size());
  for (const Binding &binding : options.inputs) {
    auto it = std::find(names.begin(), names.end(), binding.name);
    if (it == names.end())
      fail("unknown input '{}'; graph @{} has inputs: {}", binding.name, graph.name(), joinNames(names));
    size_t index = static_cast<size_t>(it - names.begin());
    if (bound[index].defined())
      fail("input '{}' is given twice", binding.name);
    Tensor tensor = given.count(binding.name) ? given[binding.name] : readTensorFile(binding.path);
    if (tensor.type() != inputs[index]->type())
      fail("input '{}' expects {}, but {} holds {}", binding.name, inputs[index]->type().toString(), binding.path,
           tensor.type().toString());
    bound[index] = tensor;
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (bound[i].defined())
      continue;
    checkFitsInMemory(inputs[i]->type(), fmt::format("input '{}'", names[i]));
    bound[i] = randomTensor(inputs[i]->type(), options.seed + i);
  }
  return bound;
}

/// Parameter values from --param files, and random ones for parameters that carry none.
ir::ParamValues bindParams(const ir::Graph &graph, const Options &options) {
  std::map<std::string, TensorType> types;
  std::vector<std::string> names;
  for (const ir::Node *param : graph.params()) {
    const std::string &name = param->attrString("name");
    types[name] = param->output()->type();
    names.push_back(name);
  }
  ir::ParamValues values;
  for (const Binding &binding : options.params) {
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
  uint64_t next = options.seed + graph.inputs().size();
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

/// Output names: the returned value's name, or "output<i>".
std::vector<std::string> outputNames(const ir::Graph &graph) {
  std::vector<std::string> names;
  for (size_t i = 0; i < graph.outputs().size(); ++i) {
    const std::string &name = graph.outputs()[i]->name();
    names.push_back(name.empty() ? fmt::format("output{}", i) : name);
  }
  return names;
}

size_t findOutput(const std::vector<std::string> &names, const std::string &name, const std::string &flag) {
  auto it = std::find(names.begin(), names.end(), name);
  if (it == names.end())
    fail("{}: unknown output '{}'; the graph's outputs are: {}", flag, name, joinNames(names));
  return static_cast<size_t>(it - names.begin());
}

/// Loads the graph. An ONNX model's given inputs are read first: their shapes resolve the
/// model's symbolic dims.
std::unique_ptr<ir::Graph> loadGraph(const Options &options, std::map<std::string, Tensor> &given) {
  const std::string &path = options.paths[0];
  if (!endsWith(path, ".onnx"))
    return ir::parseGraphFile(path);
  frontend::OnnxImportOptions importOptions;
  for (const Binding &binding : options.inputs) {
    if (given.count(binding.name))
      fail("input '{}' is given twice", binding.name);
    given[binding.name] = readTensorFile(binding.path);
  }
  // The model is specialised to the given inputs: their shapes fix symbolic dims, and their
  // values serve where kiln needs an operand at import time (a Reshape's shape given as an
  // input), which is sound because the same values are bound when the graph runs. A name
  // that is not an input is refused by the importer, naming it.
  for (const auto &[name, tensor] : given) {
    importOptions.inputShapes[name] = tensor.shape();
    importOptions.inputValues[name] = tensor;
  }
  return frontend::importOnnxFile(path, importOptions);
}

/// The passes --pipeline or --passes select (`fallback`, a pipeline, when neither is given).
passes::PassManager selectPasses(const Options &options, const std::string &fallback) {
  passes::PassManager manager;
  if (!options.passList.empty())
    manager.addPasses(passes::splitPassList(options.passList));
  else
    manager.addPipeline(options.pipeline.empty() ? fallback : options.pipeline);
  return manager;
}

/// The graph compiled for the runtime, or nothing when codegen does not support one of its ops
/// or dtypes yet (then the caller runs the reference evaluator; the note says why).
std::optional<runtime::Executable> compileOrFallBack(const ir::Graph &graph, const Options &options,
                                                     const ir::ParamValues &params) {
  codegen::CompileOptions compileOptions;
  compileOptions.params = params;
  if (options.threads > 0)
    compileOptions.runtime.pool = std::make_shared<runtime::ThreadPool>(options.threads);
  try {
    return codegen::compile(graph, compileOptions);
  } catch (const Error &e) {
    std::string message = e.what();
    if (message.rfind("codegen: ", 0) != 0 || message.find("is not supported yet") == std::string::npos)
      throw;
    std::cerr << "kiln-run: note: " << oneLine(message) << "; running the reference evaluator instead\n";
    return std::nullopt;
  }
}

/// --bench: `options.bench` timed runs after the first (the warm-up), reusing the output
/// tensors; prints the memory the run needs and, last, the median time.
void bench(const ir::Graph &graph, const Options &options, const runtime::Executable *executable,
           const std::vector<Tensor> &inputs, const ir::ParamValues &params, std::vector<Tensor> &outputs) {
  std::vector<double> times;
  for (int i = 0; i < options.bench; ++i) {
    auto start = std::chrono::steady_clock::now();
    if (executable)
      executable->runInto(inputs, outputs);
    else
      outputs = ir::evaluate(graph, inputs, params);
    times.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(times.begin(), times.end());
  size_t n = times.size();
  double median = n % 2 ? times[n / 2] : (times[n / 2 - 1] + times[n / 2]) / 2;
  int64_t weightBytes = 0;
  if (executable) {
    for (const runtime::TensorSpec &weight : executable->weights())
      weightBytes += static_cast<int64_t>(weight.type.byteSize());
  } else {
    for (const ir::Node *param : graph.params())
      weightBytes += static_cast<int64_t>(param->output()->type().byteSize());
  }
  struct rusage usage {};
  getrusage(RUSAGE_SELF, &usage);
  std::cout << fmt::format("bench: {} runs on the {}{}\n", n, executable ? "compiled model" : "reference evaluator",
                           executable ? fmt::format(" ({} threads)", executable->numThreads()) : "");
  std::cout << fmt::format("min_ms {:.4f}\n", times.front());
  std::cout << fmt::format("arena_bytes {}\n", executable ? executable->arenaBytes() : 0);
  std::cout << fmt::format("weight_bytes {}\n", weightBytes);
  std::cout << fmt::format("peak_rss_bytes {}\n", static_cast<int64_t>(usage.ru_maxrss) * 1024);
  std::cout << fmt::format("median_ms {:.4f}\n", median);
}

/// --bisect-passes: one line per pass, then the first pass out of tolerance or that all agree.
int bisect(ir::Graph &graph, const Options &options, const std::vector<Tensor> &inputs,
           const ir::ParamValues &params, const std::vector<std::string> &names) {
  double rtol = options.rtol.value_or(1e-4), atol = options.atol.value_or(1e-5);
  passes::PassManager manager = selectPasses(options, "inference");
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

int run(const Options &options) {
  std::map<std::string, Tensor> given;
  std::unique_ptr<ir::Graph> graph = loadGraph(options, given);
  std::vector<std::string> names = outputNames(*graph);
  // Check every name and read every expected file before the (possibly long) evaluation.
  for (const Binding &binding : options.outputs)
    findOutput(names, binding.name, "--output");
  std::vector<std::pair<size_t, Tensor>> expected;
  for (const Binding &binding : options.checks)
    expected.emplace_back(findOutput(names, binding.name, "--check"), readTensorFile(binding.path));
  std::vector<Tensor> inputs = bindInputs(*graph, options, given);
  ir::ParamValues params = bindParams(*graph, options);
  if (options.bisectPasses)
    return bisect(*graph, options, inputs, params, names);
  if (!options.pipeline.empty() || !options.passList.empty()) {
    passes::PassContext context;
    selectPasses(options, "").run(*graph, context);
  }

  std::optional<runtime::Executable> executable;
  if (!options.reference)
    executable = compileOrFallBack(*graph, options, params);
  std::vector<Tensor> outputs = executable ? executable->run(inputs) : ir::evaluate(*graph, inputs, params);
  for (size_t i = 0; i < outputs.size(); ++i)
    std::cout << names[i] << ": " << tensorSummary(outputs[i]) << "\n";
  for (const Binding &binding : options.outputs)
    runtime::writeNpy(binding.path, outputs[findOutput(names, binding.name, "--output")]);

  int status = 0;
  double rtol = options.rtol.value_or(1e-4), atol = options.atol.value_or(1e-5);
  for (const auto &[index, want] : expected) {
    Comparison comparison = compareTensors(outputs[index], want, rtol, atol);
    if (comparison.ok) {
      std::cout << fmt::format("check {}: ok (max abs error {:.3g}, max rel error {:.3g})\n", names[index],
                               comparison.maxAbsError, comparison.maxRelError);
    } else {
      std::cout << std::flush;
      std::cerr << fmt::format("kiln-run: check {} failed: {}\n", names[index], comparison.message);
      status = 1;
    }
  }
  if (options.bench > 0)
    bench(*graph, options, executable ? &*executable : nullptr, inputs, params, outputs);
  return status;
}

constexpr double kSlowTestSeconds = 2.0;

/// Calls work(i) for every i < count on `jobs` threads (the calling one included).
void parallelFor(size_t count, int jobs, const std::function<void(size_t)> &work) {
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i = next++; i < count; i = next++)
      work(i);
  };
  std::vector<std::thread> threads;
  for (int t = 1; t < std::min<int>(jobs, static_cast<int>(count)); ++t)
    threads.emplace_back(worker);
  worker();
  for (std::thread &thread : threads)
    thread.join();
}

/// The reason an exception gives, as one line.
std::string reasonOf(const std::exception_ptr &error) {
  try {
    std::rethrow_exception(error);
  } catch (const std::bad_alloc &) {
    return "out of memory";
  } catch (const std::exception &e) {
    return oneLine(e.what());
  } catch (...) {
    return "an unknown exception";
  }
}

/// --onnx-test --compiled, in stages: import every test's data sets (parallel); lower each data
/// set's graph with its own symbol prefix (parallel; an op codegen does not support yet skips
/// the test); compile the lowered models in batches, one translation unit each (parallel, so
/// --jobs 2 runs two compilers); load, run and compare every model (parallel). A test passes
/// when every data set does; a batch the compiler rejects is compiled model by model instead.
std::vector<frontend::OnnxTestResult> runCompiledTests(const std::vector<std::string> &dirs,
                                                       const frontend::OnnxTestOptions &testOptions,
                                                       const Options &options) {
  std::vector<frontend::OnnxPreparedTest> tests(dirs.size());
  parallelFor(dirs.size(), options.jobs, [&](size_t i) { tests[i] = frontend::prepareOnnxTestDir(dirs[i]); });

  struct Job {
    size_t test = 0;
    const frontend::OnnxTestCase *testCase = nullptr;
    std::optional<codegen::LoweredModel> lowered;
    std::string soPath;   // set once compiled
    std::string failure;  // why it failed, once it has
  };
  std::vector<Job> jobs;
  for (size_t t = 0; t < tests.size(); ++t)
    if (tests[t].result.status == frontend::OnnxTestStatus::Pass)
      for (const frontend::OnnxTestCase &testCase : tests[t].cases)
        jobs.push_back({t, &testCase, std::nullopt, "", ""});
  std::mutex resultsMutex;
  auto endTest = [&](size_t t, frontend::OnnxTestStatus status, const std::string &reason) {
    std::lock_guard<std::mutex> lock(resultsMutex);
    frontend::OnnxTestResult &result = tests[t].result;
    // A skip outranks a failure in another data set only if nothing failed first: the first
    // word on a test stays.
    if (result.status == frontend::OnnxTestStatus::Pass) {
      result.status = status;
      result.reason = reason;
    }
  };

  parallelFor(jobs.size(), options.jobs, [&](size_t j) {
    Job &job = jobs[j];
    codegen::CompileOptions compileOptions;
    compileOptions.symbolPrefix = fmt::format("t{}_", j);
    try {
      job.lowered = codegen::lowerGraph(*job.testCase->graph, compileOptions);
    } catch (...) {
      std::string reason = reasonOf(std::current_exception());
      bool unsupported = reason.rfind("codegen: ", 0) == 0 && reason.find("not supported yet") != std::string::npos;
      endTest(job.test, unsupported ? frontend::OnnxTestStatus::Skip : frontend::OnnxTestStatus::Fail,
              unsupported ? reason : job.testCase->setName + ": lowering: " + reason);
    }
  });

  // Batches of the lowered models, in suite order (a stable grouping keeps the cache warm).
  std::vector<std::vector<Job *>> batches(1);
  for (Job &job : jobs) {
    if (!job.lowered || tests[job.test].result.status != frontend::OnnxTestStatus::Pass)
      continue;
    if (static_cast<int>(batches.back().size()) == options.batch)
      batches.emplace_back();
    batches.back().push_back(&job);
  }
  if (batches.back().empty())
    batches.pop_back();
  codegen::CompilerCounters before = codegen::compilerCounters();
  auto compileStart = std::chrono::steady_clock::now();
  parallelFor(batches.size(), options.jobs, [&](size_t b) {
    std::vector<const codegen::LoweredModel *> models;
    for (Job *job : batches[b])
      models.push_back(&*job->lowered);
    try {
      std::string soPath = codegen::compileLoweredBatch(models).soPath;
      for (Job *job : batches[b])
        job->soPath = soPath;
      return;
    } catch (...) {
      std::cerr << fmt::format("kiln-run: note: batch {} did not compile ({}); compiling its models one by one\n", b,
                               reasonOf(std::current_exception()));
    }
    for (Job *job : batches[b]) {
      try {
        job->soPath = codegen::compileLoweredBatch({&*job->lowered}).soPath;
      } catch (...) {
        job->failure = job->testCase->setName + ": compile: " + reasonOf(std::current_exception());
      }
    }
  });
  codegen::CompilerCounters after = codegen::compilerCounters();
  size_t batched = 0;
  for (const std::vector<Job *> &batch : batches)
    batched += batch.size();
  std::cerr << fmt::format("kiln-run: compiled {} models in {} batches: {} compiler runs, {} cache hits, {:.1f} s\n",
                           batched, batches.size(), after.compiles - before.compiles,
                           after.cacheHits - before.cacheHits,
                           std::chrono::duration<double>(std::chrono::steady_clock::now() - compileStart).count());

  // One thread per model run: the jobs already run side by side.
  auto pool = std::make_shared<runtime::ThreadPool>(1);
  parallelFor(jobs.size(), options.jobs, [&](size_t j) {
    Job &job = jobs[j];
    if (!job.lowered)
      return;
    try {
      if (job.failure.empty() && !job.soPath.empty()) {
        runtime::ExecutableOptions runOptions;
        runOptions.pool = pool;
        runtime::Executable executable = runtime::Executable::load(
            job.soPath, codegen::collectWeights(*job.lowered, {}), runOptions, job.lowered->model.modelSymbol);
        std::vector<Tensor> outputs = executable.run(job.testCase->inputs);
        if (auto mismatch = frontend::checkOnnxTestOutputs(*job.testCase, outputs, testOptions))
          job.failure = *mismatch;
      }
    } catch (...) {
      job.failure = job.testCase->setName + ": run: " + reasonOf(std::current_exception());
    }
    if (!job.failure.empty())
      endTest(job.test, frontend::OnnxTestStatus::Fail, job.failure);
  });

  std::vector<frontend::OnnxTestResult> results;
  for (const frontend::OnnxPreparedTest &test : tests)
    results.push_back(test.result);
  return results;
}

/// --onnx-test: every test runs, whatever happens to the others (runOnnxTestDir never
/// throws); results print in folder order once all have run.
int runConformance(const Options &options) {
  std::vector<std::string> dirs = frontend::findOnnxTestDirs(options.paths);
  frontend::OnnxTestOptions testOptions;
  testOptions.rtol = options.rtol.value_or(testOptions.rtol);
  testOptions.atol = options.atol.value_or(testOptions.atol);
  std::ofstream list;
  if (!options.listPassing.empty()) { // opened first, so a bad path fails before the long run
    list.open(options.listPassing);
    if (!list)
      fail("--list-passing: cannot write '{}'", options.listPassing);
  }

  std::vector<frontend::OnnxTestResult> results(dirs.size());
  if (options.compiled)
    results = runCompiledTests(dirs, testOptions, options);
  else
    parallelFor(dirs.size(), options.jobs, [&](size_t i) { results[i] = frontend::runOnnxTestDir(dirs[i], testOptions); });

  int passed = 0, failed = 0, skipped = 0;
  std::vector<std::string> passing;
  for (const frontend::OnnxTestResult &result : results) {
    // The suite's tests are tiny: one that takes seconds points at a bug (to stderr, so the
    // summary stays the last line of the report).
    if (result.seconds > kSlowTestSeconds)
      std::cerr << fmt::format("SLOW {}: {:.1f} s\n", result.name, result.seconds);
    switch (result.status) {
    case frontend::OnnxTestStatus::Pass:
      ++passed;
      passing.push_back(result.name);
      break;
    case frontend::OnnxTestStatus::Fail:
      ++failed;
      std::cout << "FAIL " << result.name << ": " << result.reason << "\n";
      break;
    case frontend::OnnxTestStatus::Skip:
      ++skipped;
      std::cout << "SKIP " << result.name << ": " << result.reason << "\n";
      break;
    }
  }
  if (list.is_open()) {
    std::sort(passing.begin(), passing.end());
    for (const std::string &name : passing)
      list << name << "\n";
    list.close();
    if (!list)
      fail("--list-passing: writing '{}' failed", options.listPassing);
  }
  std::cout << passed << " passed, " << failed << " failed, " << skipped << " skipped\n";
  return failed == 0 ? 0 : 1;
}

} // namespace

int main(int argc, char **argv) {
  try {
    Options options = parseArgs(argc, argv);
    if (options.help) {
      std::cout << kUsage;
      return 0;
    }
    return options.onnxTest ? runConformance(options) : run(options);
  } catch (const Error &e) {
    std::cout << std::flush;
    std::cerr << "kiln-run: " << oneLine(e.what()) << "\n";
  } catch (const std::bad_alloc &) {
    std::cerr << "kiln-run: out of memory (is a tensor in the graph or an input too large?)\n";
  } catch (const std::exception &e) {
    std::cerr << "kiln-run: internal error: " << oneLine(e.what()) << "\n";
  }
  return 1;
}
