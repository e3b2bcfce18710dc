// What a program using an installed kiln does first: import an ONNX model, compile it to native
// code and run it, then check the compiled output against kiln's reference evaluator. Built
// only against an installed kiln (tests/package/CMakeLists.txt), so it includes kiln's headers
// the way users do, as <kiln/...>.
//
// Usage: onnx_consumer MODEL.onnx CACHE_DIR
// CACHE_DIR must be a new folder: the compile has to run the C++ compiler on the generated
// source (the step that needs kiln's runtime ABI header), not find a cached object.
#include <cstdio>
#include <string>
#include <vector>

#include <kiln/codegen/CompileModel.h>
#include <kiln/codegen/CxxCompiler.h>
#include <kiln/core/Error.h>
#include <kiln/core/Tensor.h>
#include <kiln/frontend/onnx/OnnxImporter.h>
#include <kiln/ir/Evaluator.h>
#include <kiln/ir/Graph.h>

int main(int argc, char **argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: onnx_consumer MODEL.onnx CACHE_DIR\n");
    return 2;
  }
  try {
    std::unique_ptr<kiln::ir::Graph> graph = kiln::frontend::importOnnxFile(argv[1]);
    std::vector<kiln::Tensor> inputs;
    for (const kiln::ir::Value *input : graph->inputs())
      inputs.push_back(kiln::randomTensor(input->type(), 7 + inputs.size()));

    kiln::codegen::CompileOptions options;
    options.compiler.cacheDir = argv[2];
    kiln::runtime::Executable executable = kiln::codegen::compile(*graph, options);
    if (kiln::codegen::compilerCounters().compiles != 1) {
      std::fprintf(stderr, "onnx_consumer: the model came from the cache in %s, not the compiler\n", argv[2]);
      return 1;
    }
    std::vector<kiln::Tensor> got = executable.run(inputs);
    std::vector<kiln::Tensor> want = kiln::ir::evaluate(*graph, inputs);
    if (got.size() != want.size()) {
      std::fprintf(stderr, "onnx_consumer: %zu outputs compiled, %zu evaluated\n", got.size(), want.size());
      return 1;
    }
    for (size_t i = 0; i < got.size(); ++i) {
      kiln::Comparison comparison = kiln::compareTensors(got[i], want[i], 1e-4, 1e-5);
      if (!comparison.ok) {
        std::fprintf(stderr, "onnx_consumer: output %zu: %s\n", i, comparison.message.c_str());
        return 1;
      }
      std::printf("output %zu %s matches the reference evaluator: %s\n", i,
                  got[i].type().toString().c_str(), kiln::tensorSummary(got[i]).c_str());
    }
  } catch (const kiln::Error &error) {
    std::fprintf(stderr, "onnx_consumer: %s\n", error.what());
    return 1;
  }
  return 0;
}
