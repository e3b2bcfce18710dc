// kiln-compile: compiles a .kir graph or an ONNX model ahead of time into one shared object
// holding its kernels, its description and its weights, which `kiln-run MODEL.so` (or
// runtime::Executable::load with no weights) runs with no compiler and no graph. With --train,
// it writes the model's whole training step instead (codegen/TrainingAot.h), which
// `kiln-run STEP.so --train` trains on. Every error is one line "kiln-compile: MESSAGE" and exit
// status 1.
#include <chrono>
#include <filesystem>
#include <iostream>

#include "codegen/CompileModel.h"
#include "codegen/TrainingAot.h"
#include "core/Error.h"
#include "tools/GraphLoading.h"
#include "tools/ToolCommon.h"
#include "tools/TrainingFlags.h"

using namespace kiln;
using namespace kiln::tools;

namespace {

constexpr const char *kUsage = R"(usage: kiln-compile FILE.kir|FILE.onnx -o MODEL.so [options]
       kiln-compile FILE.kir|FILE.onnx --train LOSS [training options] -o STEP.so [options]

Compiles the graph in FILE.kir, or the ONNX model in FILE.onnx, ahead of time: the inference
pipeline and the C++ codegen of kiln-run, then the system compiler, into MODEL.so, one shared
object with the model's kernels, its description (inputs, outputs, launch list, arena size)
and its weights. `kiln-run MODEL.so` runs it with no compiler and no graph. MODEL.so needs no
kiln library at link time (the runtime that loads it hands its kernels the thread pool and the
precompiled heavy kernels) and is built for this machine's processor (-march=native). It is
not put in the compile cache. Prints one line: what was written, its size and the time taken.

An ONNX model whose batch is its only dim_param ("N" of [N, 3, 224, 224]), and whose graph
computes each row of the batch from its own rows, compiles for a batch tile of one row:
MODEL.so then runs every batch size (kiln-run MODEL.so takes inputs of any batch). Any other
dim_param needs --input-shape or --dim.

With --train LOSS, MODEL.so is the model's whole training step instead, as `kiln-run FILE
--train LOSS` compiles it: forward, loss, backward and optimizer update (the training
pipeline), with the parameters, the optimizer state (zeros) and the step count (0) it starts
from as its weights, and a manifest naming its loss, optimizer and which output updates which
weight. `kiln-run STEP.so --train` trains on from it, in place, with no compiler. With
--batch-tile T, a model whose batch is its only dim_param (and whose samples never meet: no
BatchNorm over the batch) compiles once, for tiles of T rows, into a step that trains batches
of any size, as `kiln-run FILE --train LOSS --batch-tile T` does.

options:
  -o, --output MODEL.so        where to write the model (required)
  --pipeline NAME              run the named pipeline of passes (see kiln-dump --help) on the
                               graph first, as kiln-run does
  --passes A,B,...             run these passes, in this order, on the graph first
  --input-shape NAME=D0,D1,... ONNX models: the static shape of input NAME, fixing its symbolic
                               dims (repeatable; "NAME=" is a scalar)
  --dim NAME=N                 give the symbolic dim NAME (an ONNX dim_param, N of f32[N,3] in a
                               .kir graph) the extent N: the model is compiled for that size only
  --param NAME=FILE            the value of parameter NAME (.npy, or an ONNX TensorProto .pb)
  --random-params              parameters with neither a value of their own nor --param get
                               random ones, drawn as kiln-run draws them with the same --seed
                               (for tests and benchmarks; without it such a parameter is an error)
  --seed S                     seed of --random-params (default 0)
  --precision f32|bf16         what GEMMs and GEMM-computed convolutions multiply in, as
                               kiln-run --precision (default f32; inference only)
  --build-dir DIR              write the generated source (DIR/model.cpp) and the weights
                               (DIR/weights.bin) to DIR and keep them
  --help                       print this help

training options (as kiln-run --train takes them, and --load):
  --load PATH             start from the parameters, optimizer state and step count that
                          `kiln-run ... --train --save PATH` wrote (.safetensors or a folder)
  --batch-tile T          a symbolic batch trains in tiles of T rows: one step for every batch
                          size (its two parts, gradients and update, in STEP.so)
)";

constexpr const char *kUsageTail = R"(
Options taking a value accept both "--opt VALUE" and "--opt=VALUE". Errors print one line
"kiln-compile: MESSAGE" and exit with status 1.
)";

struct CompileCommand {
  bool train = false;
  TrainingFlags training;
  int64_t batchTile = 0; // --batch-tile
  std::vector<std::string> paths;
  std::string output, pipeline, passList, buildDir, load;
  std::map<std::string, Shape> inputShapes;
  DimBindings dims; // --dim
  std::vector<Binding> params;
  bool randomParams = false;
  uint64_t seed = 0;
  codegen::ContractionPrecision precision = codegen::ContractionPrecision::F32;
  bool help = false;
};

CompileCommand parseArgs(int argc, char **argv) {
  CompileCommand command;
  FlagParser parser;
  parser.addSwitch("--help", [&] { command.help = true; });
  parser.addSwitch("-h", [&] { command.help = true; });
  parser.addSwitch("--random-params", [&] { command.randomParams = true; });
  parser.addOption("--train", [&](const std::string &flag, const std::string &value) {
    command.training.loss.kind = parseLossKind(flag, value);
    command.train = true;
  });
  addTrainingFlags(parser, command.training);
  parser.addOption("--load", [&](const std::string &flag, const std::string &value) {
    command.load = nonEmpty(flag, value);
  });
  parser.addOption("--batch-tile", [&](const std::string &flag, const std::string &value) {
    command.batchTile = parseBoundedCount(flag, value, 1, 1 << 30);
  });
  auto output = [&](const std::string &flag, const std::string &value) {
    if (!command.output.empty())
      fail("{}: the output is given twice", flag);
    command.output = nonEmpty(flag, value);
  };
  parser.addOption("-o", output);
  parser.addOption("--output", output);
  parser.addOption("--pipeline", [&](const std::string &flag, const std::string &value) {
    command.pipeline = nonEmpty(flag, value);
  });
  parser.addOption("--passes", [&](const std::string &flag, const std::string &value) {
    command.passList = nonEmpty(flag, value);
  });
  parser.addOption("--build-dir", [&](const std::string &flag, const std::string &value) {
    command.buildDir = nonEmpty(flag, value);
  });
  parser.addOption("--dim", [&](const std::string &flag, const std::string &value) {
    addDimBinding(flag, value, command.dims);
  });
  parser.addOption("--input-shape", [&](const std::string &flag, const std::string &value) {
    auto [name, shape] = parseShapeBinding(flag, value);
    if (!command.inputShapes.emplace(name, shape).second)
      fail("{}: input '{}' is given twice", flag, name);
  });
  parser.addOption("--param", [&](const std::string &flag, const std::string &value) {
    command.params.push_back(parseBinding(flag, value));
  });
  parser.addOption("--seed", [&](const std::string &flag, const std::string &value) {
    command.seed = parseCount(flag, value, "a non-negative integer");
  });
  parser.addOption("--precision", [&](const std::string &flag, const std::string &value) {
    command.precision = parsePrecision(flag, value);
  });
  command.paths = parser.parse(argc, argv);
  if (command.help)
    return command;
  if (command.paths.empty())
    fail("no graph file given (usage: kiln-compile FILE.kir -o MODEL.so; see --help)");
  if (command.paths.size() > 1)
    fail("more than one graph file: '{}' and '{}'", command.paths[0], command.paths[1]);
  if (command.output.empty())
    fail("no output given: -o MODEL.so");
  if (!command.pipeline.empty() && !command.passList.empty())
    fail("--pipeline and --passes cannot be combined");
  if (!command.train && !command.training.given.empty())
    fail("{} applies to a training step: add --train LOSS", command.training.given[0]);
  if (!command.train && !command.load.empty())
    fail("--load applies to a training step: add --train LOSS");
  if (!command.train && command.batchTile > 0)
    fail("--batch-tile applies to a training step: add --train LOSS (a model for inference with a symbolic batch "
         "already runs every batch size)");
  if (command.train && (!command.pipeline.empty() || !command.passList.empty()))
    fail("--pipeline and --passes do not apply with --train: a training step goes through the training pipeline");
  if (command.train && command.precision != codegen::ContractionPrecision::F32)
    fail("--precision applies to inference; a training step computes in f32");
  if (command.train)
    finishTrainingFlags(command.training);
  return command;
}

/// Refuses a parameter that would have no value, naming the flags that give it one.
void checkParamsHaveValues(const ir::Graph &graph, const ir::ParamValues &params) {
  for (const ir::Node *param : graph.params()) {
    const std::string &name = param->attrString("name");
    if (!params.count(name) && !param->attrTensor("value").defined())
      fail("parameter '{}' has no value in {}; give it with --param {}=FILE, or use --random-params", name,
           graph.name().empty() ? "the graph" : "graph @" + graph.name(), name);
  }
}

int compileCommand(const CompileCommand &command) {
  auto start = std::chrono::steady_clock::now();
  std::map<std::string, Tensor> given;
  GraphSource source;
  source.path = command.paths[0];
  source.inputShapes = command.inputShapes;
  source.dims = command.dims;
  // A symbolic batch: one model (or training step, in tiles) for every batch size.
  source.keepBatchSymbol = !command.train || command.batchTile > 0;
  std::unique_ptr<ir::Graph> graph = loadGraph(source, given);
  if (command.batchTile > 0)
    requireSymbolicBatch(*graph);
  ir::ParamValues params = bindParams(*graph, command.params, command.seed, command.randomParams);
  if (command.load.empty()) // else the checkpoint may hold them: compileTrainingAheadOfTime checks
    checkParamsHaveValues(*graph, params);
  if (!command.pipeline.empty() || !command.passList.empty()) {
    passes::PassContext context;
    selectPasses(command.pipeline, command.passList, "").run(*graph, context);
  }
  codegen::CompileOptions options;
  options.params = params;
  options.precision = command.precision;
  codegen::AotOptions aot;
  aot.buildDir = command.buildDir;
  codegen::AotModel model;
  std::string what;
  if (command.train) {
    codegen::TrainingOptions training;
    training.compile = options;
    if (command.batchTile > 0)
      training.batchTile = command.batchTile;
    codegen::AotTrainingStep step = codegen::compileTrainingAheadOfTime(*graph, command.training.loss,
                                                                        command.training.optimizer, command.output,
                                                                        training, aot, {0, command.load});
    model = step.model;
    what = fmt::format(" training step ({}),", step.manifest.describe());
  } else {
    model = codegen::compileAheadOfTime(*graph, command.output, options, aot);
  }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::error_code error;
  auto fileBytes = std::filesystem::file_size(command.output, error);
  std::cout << fmt::format("wrote {}:{} {} launches, {} weights ({} bytes), arena {} bytes, {} bytes on disk, {:.2f} s\n",
                           command.output, what, model.numLaunches, model.numWeights, model.weightBytes, model.arenaBytes,
                           error ? 0 : static_cast<int64_t>(fileBytes), seconds);
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  return runTool("kiln-compile", [&] {
    CompileCommand command = parseArgs(argc, argv);
    if (command.help) {
      std::cout << kUsage << kTrainingFlagsUsage << kUsageTail;
      return 0;
    }
    return compileCommand(command);
  });
}
