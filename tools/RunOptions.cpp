// kiln-run's options: the flag table, the checks of what combines with what, and the help.
#include "tools/RunOptions.h"

#include "core/Error.h"
#include "runtime/Executable.h"

namespace kiln::tools {

const char *const kRunUsage = R"(usage: kiln-run FILE.kir|FILE.onnx [options]
       kiln-run MODEL.so [--input ...] [--output ...] [--check ...] [--bench N] [--threads N]
                [--profile TRACE.json]
       kiln-run --onnx-test [--compiled] DIR... [--list-passing FILE] [--jobs N] [--batch N]

Runs the graph in FILE.kir, or the ONNX model in FILE.onnx (imported with kiln's ONNX
importer), and prints one line per output: its name, type and a short summary of its values.
The graph is compiled (inference pipeline, generated C++ compiled by the system compiler and
cached on disk, see $KILN_CACHE_DIR) and run on kiln's runtime; a graph with an op or dtype
codegen does not support yet runs on the reference evaluator instead, with a note on stderr.
A MODEL.so written by kiln-compile carries its kernels and weights: it runs with no compiler
and no graph, its inputs and outputs as its description declares them.

options:
  --input NAME=FILE       bind graph input NAME (by its name in the graph signature, or the ONNX
                          input name) to FILE: a .npy file, or an ONNX TensorProto (.pb). Inputs
                          not given are random (kiln::randomTensor: floats in [-1,1), integers in
                          [0,10)), input number i drawn with seed S+i. For an ONNX model the
                          given inputs' shapes also fix the model's symbolic dims
  --dim NAME=N            give the graph's symbolic dim NAME (f32[N,3] in a .kir graph, an ONNX
                          dim_param; for a MODEL.so that serves every batch, the size of its random
                          inputs) the extent N; dims not given take their extents from the
                          --input files' shapes, and two sources that disagree are an error. The
                          bound (static) graph is what runs
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
  --bench N               after the run (the warm-up), time N more runs and print inputs (the
                          sizes they ran at), batch_tiling (how the batch runs, and why:
                          --batch-tile), then after the bench line arena_bytes,
                          weight_bytes, peak_rss_bytes, load_ms (reading the model), compile_ms
                          (passes, codegen, and the system compiler or the disk cache's load)
                          and, last, median_ms
  --profile TRACE.json    time every kernel launch of a compiled run (with --bench, of the
                          timed runs only), write the launches as Chrome-trace JSON to
                          TRACE.json (chrome://tracing, Perfetto) and print the ten kernels that
                          took longest: name, calls, total ms and share of all launches
  --pipeline NAME         run the named pipeline of passes (see kiln-dump --help) on the graph
                          before running it
  --passes A,B,...        run these passes, in this order, on the graph before running it
  --precision f32|bf16    what compiled GEMMs and GEMM-computed convolutions (im2col, 1x1)
                          multiply in: bf16 rounds both operands to bfloat16 and sums in f32
                          (AVX-512 BF16's vdpbf16ps), about 2x the f32 rate, ~3 significant
                          digits per operand; everything else stays f32 (default f32)
  --batch-tile auto|off|N run a batch (axis 0 of the inputs) as tiles of N rows, each tile one
                          run of kernels compiled for N rows, whole rounds of tiles side by side
                          on the threads (one thread each); the graph must compute each row from
                          its own rows of the inputs (ir/BatchTiling.h). auto (the default)
                          tiles a symbolic batch by 1 row, so one compile serves every size, and
                          a static one as kiln finds faster; off runs the batch whole
  --compare-precision     compile the graph in --precision (default bf16) and in f32, run both on
                          the same inputs, and print per output the largest error relative to
                          the largest |f32 value|, the mean relative error, the SNR in dB and,
                          for outputs of two dims or more, how many rows' argmax (top-1) agree
  --compare-quantized FILE
                          compile the graph and FILE, its quantized form (kiln-quantize's QDQ
                          model, say: int8 kernels), run both on the same inputs and print the
                          same errors of FILE's outputs against the graph's
  --per-layer             with --compare-precision or --compare-quantized, also compare every
                          contraction's output (matmul, linear, conv, conv_transpose, one line
                          each, in graph order; for --compare-quantized, those whose value FILE
                          names too) and name the layer of the lowest SNR and the one whose SNR
                          falls most below the layer's before it (the layer that loses the most)
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

namespace {

/// The flags every mode shares a meaning of; which apply to which mode is checked after.
FlagParser runFlags(RunOptions &options) {
  FlagParser parser;
  parser.addSwitch("--help", [&] { options.help = true; });
  parser.addSwitch("-h", [&] { options.help = true; });
  parser.addSwitch("--reference", [&] { options.reference = true; });
  parser.addSwitch("--onnx-test", [&] { options.onnxTest = true; });
  parser.addSwitch("--compiled", [&] { options.compiled = true; });
  parser.addSwitch("--bisect-passes", [&] { options.bisectPasses = true; });
  parser.addSwitch("--compare-precision", [&] { options.comparePrecision = true; });
  parser.addSwitch("--per-layer", [&] { options.perLayer = true; });
  parser.addOption("--compare-quantized", [&](const std::string &flag, const std::string &value) {
    options.quantizedModel = nonEmpty(flag, value);
  });
  auto bind = [&](std::vector<Binding> &list) {
    return [&list](const std::string &flag, const std::string &value) { list.push_back(parseBinding(flag, value)); };
  };
  parser.addOption("--input", bind(options.inputs));
  parser.addOption("--param", bind(options.params));
  parser.addOption("--dim", [&](const std::string &flag, const std::string &value) {
    addDimBinding(flag, value, options.dims);
  });
  parser.addOption("--output", bind(options.outputs));
  parser.addOption("--check", bind(options.checks));
  parser.addOption("--rtol", [&](const std::string &flag, const std::string &value) {
    options.rtol = parseTolerance(flag, value);
  });
  parser.addOption("--atol", [&](const std::string &flag, const std::string &value) {
    options.atol = parseTolerance(flag, value);
  });
  parser.addOption("--seed", [&](const std::string &flag, const std::string &value) {
    options.seed = parseCount(flag, value, "a non-negative integer");
  });
  parser.addOption("--jobs", [&](const std::string &flag, const std::string &value) {
    options.jobs = parseBoundedCount(flag, value, 1, 256);
  });
  parser.addOption("--threads", [&](const std::string &flag, const std::string &value) {
    options.threads = parseBoundedCount(flag, value, 1, 1024);
  });
  parser.addOption("--batch", [&](const std::string &flag, const std::string &value) {
    options.batch = parseBoundedCount(flag, value, 1, 10000);
  });
  parser.addOption("--bench", [&](const std::string &flag, const std::string &value) {
    options.bench = parseBoundedCount(flag, value, 1, 1000000);
  });
  parser.addOption("--pipeline", [&](const std::string &flag, const std::string &value) {
    options.pipeline = nonEmpty(flag, value);
  });
  parser.addOption("--passes", [&](const std::string &flag, const std::string &value) {
    options.passList = nonEmpty(flag, value);
  });
  parser.addOption("--profile", [&](const std::string &flag, const std::string &value) {
    options.profile = nonEmpty(flag, value);
  });
  parser.addOption("--precision", [&](const std::string &flag, const std::string &value) {
    options.precision = parsePrecision(flag, value);
    options.precisionGiven = true;
  });
  parser.addOption("--batch-tile", [&](const std::string &flag, const std::string &value) {
    if (value == "auto")
      options.batchTile = codegen::CompileOptions::kBatchTileAuto;
    else if (value == "off")
      options.batchTile = codegen::CompileOptions::kBatchTileOff;
    else
      options.batchTile = parseBoundedCount(flag, value, 1, 1 << 30);
  });
  parser.addOption("--list-passing", [&](const std::string &, const std::string &value) {
    options.listPassing = value;
  });
  return parser;
}

void checkConformance(const RunOptions &options) {
  if (options.compiled && options.reference)
    fail("--compiled and --reference cannot be combined");
  if (options.paths.empty())
    fail("--onnx-test needs at least one test folder (see --help)");
  if (!options.inputs.empty() || !options.params.empty() || !options.outputs.empty() || !options.checks.empty())
    fail("--onnx-test takes its inputs and expected outputs from the test folders; --input, --param, --output "
         "and --check do not apply");
}

} // namespace

bool isSharedObject(const std::string &path) { return runtime::isSharedObjectFile(path); }

namespace {

/// A model kiln-compile wrote carries its kernels and weights: nothing about passes,
/// parameters or the reference evaluator applies to it.
void checkModel(const RunOptions &options) {
  const std::string &path = options.paths[0];
  auto refuse = [&](bool given, const char *flag) {
    if (given)
      fail("{} does not apply to '{}': a compiled model carries its kernels and weights (recompile it with "
           "kiln-compile instead)",
           flag, path);
  };
  refuse(options.reference, "--reference");
  refuse(!options.params.empty(), "--param");
  refuse(!options.pipeline.empty(), "--pipeline");
  refuse(!options.passList.empty(), "--passes");
  refuse(options.precisionGiven, "--precision");
  refuse(options.comparePrecision, "--compare-precision");
  refuse(!options.quantizedModel.empty(), "--compare-quantized");
}

/// --precision picks what a compiled graph's contractions multiply in; --compare-precision
/// compiles the graph in that precision (bf16 unless given) and in f32 and compares outputs.
void checkPrecision(RunOptions &options) {
  const bool quantized = !options.quantizedModel.empty();
  if (options.perLayer && !options.comparePrecision && !quantized)
    fail("--per-layer applies with --compare-precision or --compare-quantized");
  if (quantized) {
    if (options.comparePrecision || options.precisionGiven)
      fail("--compare-quantized compares two models in f32; --precision and --compare-precision do not apply");
    if (options.onnxTest || options.reference || options.bisectPasses)
      fail("--compare-quantized compiles both models; --onnx-test, --reference and --bisect-passes do not apply");
    if (options.bench > 0 || !options.profile.empty() || !options.outputs.empty() || !options.checks.empty())
      fail("--compare-quantized prints the errors of one run; --bench, --profile, --output and --check do not apply");
  }
  if (!options.precisionGiven && !options.comparePrecision)
    return;
  if (options.onnxTest)
    fail("--precision and --compare-precision apply to one graph, not to --onnx-test");
  if (options.reference)
    fail("--precision and --compare-precision choose how compiled kernels multiply; the reference evaluator "
         "computes in each op's own dtype");
  if (options.bisectPasses)
    fail("--bisect-passes runs the reference evaluator; --precision and --compare-precision do not apply");
  if (!options.comparePrecision)
    return;
  if (!options.precisionGiven)
    options.precision = codegen::ContractionPrecision::Bf16;
  if (options.precision == codegen::ContractionPrecision::F32)
    fail("--compare-precision compares a lower precision with f32; --precision f32 leaves nothing to compare");
  if (options.bench > 0 || !options.profile.empty() || !options.outputs.empty() || !options.checks.empty())
    fail("--compare-precision prints the errors of one run; --bench, --profile, --output and --check do not apply");
}

} // namespace

RunOptions parseRunOptions(int argc, char **argv) {
  RunOptions options;
  options.paths = runFlags(options).parse(argc, argv);
  if (options.help)
    return options;
  if (!options.pipeline.empty() && !options.passList.empty())
    fail("--pipeline and --passes cannot be combined");
  if (options.onnxTest && (options.bisectPasses || !options.pipeline.empty() || !options.passList.empty()))
    fail("--onnx-test runs no passes; --bisect-passes, --pipeline and --passes do not apply");
  if ((options.onnxTest || options.bisectPasses) && (options.bench > 0 || options.threads > 0))
    fail("--bench and --threads apply to running one graph, not to --onnx-test or --bisect-passes");
  if ((options.onnxTest || options.bisectPasses) && !options.profile.empty())
    fail("--profile applies to running one graph, not to --onnx-test or --bisect-passes");
  if (options.reference && options.threads > 0)
    fail("--threads applies to compiled runs; the reference evaluator runs on one thread");
  if (options.reference && !options.profile.empty())
    fail("--profile times compiled kernels; the reference evaluator has none");
  if (options.bisectPasses && (!options.outputs.empty() || !options.checks.empty()))
    fail("--bisect-passes compares the graph with itself pass by pass; --output and --check do not apply");
  if (options.onnxTest && !options.dims.empty())
    fail("--dim binds one graph's symbolic dims; it does not apply to --onnx-test");
  if (options.compiled && !options.onnxTest)
    fail("--compiled applies only with --onnx-test (a single graph is compiled by default)");
  checkPrecision(options);
  if (options.onnxTest) {
    checkConformance(options);
    options.mode = RunMode::Conformance;
    return options;
  }
  if (!options.listPassing.empty())
    fail("--list-passing applies only with --onnx-test");
  if (options.paths.empty())
    fail("no graph file given (usage: kiln-run FILE.kir [options]; see --help)");
  if (options.paths.size() > 1)
    fail("more than one graph file: '{}' and '{}'", options.paths[0], options.paths[1]);
  if (isSharedObject(options.paths[0])) {
    if (options.bisectPasses)
      fail("--bisect-passes needs a graph; '{}' is a compiled model", options.paths[0]);
    checkModel(options);
    options.mode = RunMode::Model;
  }
  return options;
}

} // namespace kiln::tools
