// kiln quickstart: the first program to read.
//
// It builds the seed model - an MLP 1024 -> 512 -> 256 -> 10 with ReLU, written with kiln's nn
// modules exactly as in PyTorch - traces it into an IR graph, prints the graph (large weights
// elided), runs it with the reference evaluator on a random batch and prints the output's shape
// and a checksum. `make run` builds and runs it.
#include <chrono>
#include <cmath>
#include <iostream>

#include "frontend/Frontend.h"
#include "ir/Error.h"
#include "ir/Evaluator.h"
#include "ir/Printer.h"

using namespace kiln;
using namespace kiln::frontend;

int main() {
  try {
    constexpr int64_t kBatch = 1024;

    // 1. The model, as torch.nn.Sequential(Linear, ReLU, ...). Weights get PyTorch's default
    //    initialisation from a seeded generator, so every run prints the same numbers.
    nn::manualSeed(0);
    nn::Sequential model{std::make_shared<nn::Linear>(1024, 512), std::make_shared<nn::ReLU>(),
                         std::make_shared<nn::Linear>(512, 256), std::make_shared<nn::ReLU>(),
                         std::make_shared<nn::Linear>(256, 10)};
    model.eval();

    // 2. Tracing: calling the model on a symbolic input records its ops; parameters become
    //    named `param` nodes ("0.weight", ...) carrying their values. Every op is type-checked
    //    as it is recorded.
    GraphBuilder builder("mlp");
    Var x = builder.input("x", DType::F32, {kBatch, 1024});
    std::unique_ptr<ir::Graph> graph = builder.finish({{"logits", model(x)}});

    // 3. The IR, as text (.kir; kiln-run and kiln-dump read it back).
    std::cout << ir::printGraph(*graph) << "\n";

    // 4. Run it with the reference evaluator, the numerical oracle of the project.
    Tensor input = randomTensor(x.type(), /*seed=*/0);
    auto start = std::chrono::steady_clock::now();
    Tensor logits = ir::evaluate(*graph, {input})[0];
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

    double sum = 0, sumAbs = 0;
    for (int64_t i = 0; i < logits.numElements(); ++i) {
      sum += logits.getDouble(i);
      sumAbs += std::fabs(logits.getDouble(i));
    }
    std::cout << fmt::format("parameters: {}\n", model.numParameters());
    std::cout << fmt::format("output logits: {}\n", logits.type().toString());
    std::cout << fmt::format("checksum: sum {:.6f}, sum of abs {:.6f}\n", sum, sumAbs);
    std::cout << fmt::format("reference evaluation took {:.2f} s\n", seconds);
    return 0;
  } catch (const std::exception &e) {
    std::cerr << "quickstart: " << e.what() << "\n";
    return 1;
  }
}
