// What a program using an installed kiln does first: import an ONNX model, and build a model
// with the nn modules; compile each to native code and run it, and check the compiled output
// against kiln's reference evaluator. Built only against an installed kiln
// (tests/package/CMakeLists.txt), so it includes kiln's headers the way users do, as <kiln/...>.
//
// Usage: use_installed_kiln MODEL.onnx CACHE_DIR
// CACHE_DIR must be a new folder: each compile has to run the C++ compiler on the generated
// source (the step that needs kiln's runtime ABI header), not find a cached object.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <kiln/codegen/CompileModel.h>
#include <kiln/codegen/CxxCompiler.h>
#include <kiln/core/Error.h>
#include <kiln/core/Tensor.h>
#include <kiln/frontend/Frontend.h>
#include <kiln/frontend/onnx/OnnxImporter.h>
#include <kiln/ir/Evaluator.h>
#include <kiln/ir/Graph.h>

namespace {

// Compiles `graph` with the C++ compiler, runs it on random inputs and compares every output
// with the reference evaluator's. Prints one line per output; false on any difference.
bool compiledMatchesReference(const std::string &name, const kiln::ir::Graph &graph, const std::string &cacheDir) {
  std::vector<kiln::Tensor> inputs;
  for (const kiln::ir::Value *input : graph.inputs())
    inputs.push_back(kiln::randomTensor(input->type(), 7 + inputs.size()));

  kiln::codegen::CompileOptions options;
  options.compiler.cacheDir = cacheDir;
  int64_t compilesBefore = kiln::codegen::compilerCounters().compiles;
  kiln::runtime::Executable executable = kiln::codegen::compile(graph, options);
  if (kiln::codegen::compilerCounters().compiles != compilesBefore + 1) {
    std::fprintf(stderr, "%s: came from the cache in %s, not the compiler\n", name.c_str(), cacheDir.c_str());
    return false;
  }
  std::vector<kiln::Tensor> got = executable.run(inputs);
  std::vector<kiln::Tensor> want = kiln::ir::evaluate(graph, inputs);
  if (got.size() != want.size()) {
    std::fprintf(stderr, "%s: %zu outputs compiled, %zu evaluated\n", name.c_str(), got.size(), want.size());
    return false;
  }
  for (size_t i = 0; i < got.size(); ++i) {
    kiln::Comparison comparison = kiln::compareTensors(got[i], want[i], 1e-4, 1e-5);
    if (!comparison.ok) {
      std::fprintf(stderr, "%s: output %zu: %s\n", name.c_str(), i, comparison.message.c_str());
      return false;
    }
    std::printf("%s: output %zu matches the reference evaluator: %s\n", name.c_str(), i,
                kiln::tensorSummary(got[i], 6).c_str());
  }
  return true;
}

// A small MLP written with the nn modules, traced into a graph.
std::unique_ptr<kiln::ir::Graph> traceMlp() {
  using namespace kiln::frontend;
  nn::manualSeed(0);
  nn::Sequential model{std::make_shared<nn::Linear>(16, 8), std::make_shared<nn::ReLU>(),
                       std::make_shared<nn::Linear>(8, 4)};
  model.eval();
  GraphBuilder builder("mlp");
  Var x = builder.input("x", kiln::DType::F32, {2, 16});
  return builder.finish({{"logits", model(x)}});
}

} // namespace

int main(int argc, char **argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: use_installed_kiln MODEL.onnx CACHE_DIR\n");
    return 2;
  }
  try {
    bool ok = compiledMatchesReference(argv[1], *kiln::frontend::importOnnxFile(argv[1]), argv[2]);
    ok = compiledMatchesReference("nn MLP", *traceMlp(), argv[2]) && ok;
    return ok ? 0 : 1;
  } catch (const kiln::Error &error) {
    std::fprintf(stderr, "use_installed_kiln: %s\n", error.what());
    return 1;
  }
}
