#include "tests/codegen/CodegenTestUtil.h"

#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include <gtest/gtest.h>

#include "frontend/Frontend.h"
#include "ir/Evaluator.h"
#include "runtime/ThreadPool.h"

namespace kiln::codegen::test {

CompileOptions testOptions() {
  CompileOptions options;
  options.compiler.cacheDir = (std::filesystem::temp_directory_path() / "kiln-codegen-tests").string();
  return options;
}

std::vector<Tensor> randomInputs(const ir::Graph &graph, uint64_t seed) {
  std::vector<Tensor> inputs;
  for (size_t i = 0; i < graph.inputs().size(); ++i)
    inputs.push_back(randomTensor(graph.inputs()[i]->type(), seed + i));
  return inputs;
}

std::unique_ptr<ir::Graph> smallMlp(uint64_t seed) {
  frontend::nn::manualSeed(seed);
  frontend::nn::Sequential model{std::make_shared<frontend::nn::Linear>(6, 8),
                                 std::make_shared<frontend::nn::ReLU>(),
                                 std::make_shared<frontend::nn::Linear>(8, 3)};
  frontend::GraphBuilder gb("mlp");
  frontend::Var x = gb.input("x", DType::F32, {5, 6});
  return gb.finish({model(x)});
}

void expectMatchesReference(const ir::Graph &graph, const std::vector<Tensor> &inputs,
                            const CompileOptions &options, double rtol, double atol) {
  std::vector<Tensor> want = ir::evaluate(graph, inputs, options.params);
  runtime::Executable executable = compile(graph, options);
  std::vector<Tensor> got = executable.run(inputs);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    Comparison comparison = compareTensors(got[i], want[i], rtol, atol);
    EXPECT_TRUE(comparison.ok) << "output " << i << ": " << comparison.message;
  }
}

namespace {

std::string elementBits(const Tensor &t, int64_t i) {
  size_t size = dtypeSize(t.dtype());
  uint64_t bits = 0;
  std::memcpy(&bits, static_cast<const unsigned char *>(t.data()) + static_cast<size_t>(i) * size, size);
  return fmt::format("0x{:0{}x}", bits, 2 * size);
}

} // namespace

void expectBitIdentical(const ir::Graph &graph, const std::vector<Tensor> &inputs) {
  std::vector<Tensor> want = ir::evaluate(graph, inputs);
  std::vector<Tensor> got = compile(graph, testOptions()).run(inputs);
  ASSERT_EQ(got.size(), want.size());
  for (size_t k = 0; k < got.size(); ++k) {
    ASSERT_EQ(got[k].type(), want[k].type()) << "output " << k;
    if (got[k].identical(want[k]))
      continue;
    int shown = 0;
    for (int64_t i = 0; i < got[k].numElements() && shown < 5; ++i) {
      std::string g = elementBits(got[k], i), w = elementBits(want[k], i);
      if (g != w) {
        ADD_FAILURE() << "output " << k << " (" << want[k].type().toString() << ") element " << i << ": got " << g
                      << ", reference " << w;
        ++shown;
      }
    }
  }
}

std::vector<std::string> launchStrategies(const ir::Graph &graph, const CompileOptions &options) {
  LoweredModel lowered = lowerGraph(graph, options);
  std::vector<std::string> strategies;
  for (const LaunchInfo &launch : lowered.model.launches)
    strategies.push_back(launch.strategy);
  return strategies;
}

CompileOptions withThreads(int threads) {
  CompileOptions options = testOptions();
  options.runtime.pool = std::make_shared<runtime::ThreadPool>(threads);
  return options;
}

int countInSource(const ir::Graph &graph, const std::string &text, const CompileOptions &options) {
  const std::string source = lowerGraph(graph, options).model.source;
  int count = 0;
  for (size_t at = source.find(text); at != std::string::npos; at = source.find(text, at + 1))
    ++count;
  return count;
}

} // namespace kiln::codegen::test
