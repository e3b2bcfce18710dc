// Randomised fused groups against the reference evaluator: fixed seeds, 60 cases of random
// shapes (size-1 and broadcast dims), operands that reach the domain through broadcasting,
// transposes, slices (with steps) and reshapes, chains of unary and binary ops, and in some
// cases a row reduction fed back into the chain (softmax-like). Cases are batched ten to a
// graph so that the suite compiles six translation units, not sixty.
#include <random>

#include <gtest/gtest.h>

#include "frontend/Frontend.h"
#include "tests/codegen/CodegenTestUtil.h"

namespace kiln::codegen::test {
namespace {

using frontend::GraphBuilder;
using frontend::Var;

class CaseBuilder {
public:
  CaseBuilder(GraphBuilder &gb, uint64_t seed, int caseIndex) : gb_(gb), rng_(seed), case_(caseIndex) {}

  Var build() {
    int rank = 1 + pick(4);
    for (int d = 0; d < rank; ++d)
      domain_.push_back(1 + pick(d == rank - 1 ? 9 : 5));
    Var v = operand();
    int steps = 2 + pick(5);
    for (int s = 0; s < steps; ++s) {
      switch (pick(3)) {
      case 0: v = unary(v); break;
      case 1: v = binary(v, operand()); break;
      default: v = binary(v, gb_.scalar(0.25 + pick(4) * 0.5)); break;
      }
      if (pick(5) == 0)
        v = rowReduction(v);
    }
    return v;
  }

private:
  int pick(int n) { return static_cast<int>(rng_() % static_cast<uint64_t>(n)); }

  Var input(const Shape &shape) {
    return gb_.input("c" + std::to_string(case_) + "_" + std::to_string(inputs_++), DType::F32, shape);
  }

  // A value of the domain's shape (or broadcastable to it) reached through some view.
  Var operand() {
    switch (pick(4)) {
    case 0: { // broadcast: size-1 dims and dropped leading dims
      Shape shape = domain_;
      for (int64_t &dim : shape)
        if (pick(3) == 0)
          dim = 1;
      size_t drop = static_cast<size_t>(pick(static_cast<int>(shape.size()) + 1));
      return input(Shape(shape.begin() + static_cast<std::ptrdiff_t>(drop), shape.end()));
    }
    case 1: { // transpose
      std::vector<int64_t> perm(domain_.size());
      for (size_t d = 0; d < perm.size(); ++d)
        perm[d] = static_cast<int64_t>(d);
      std::shuffle(perm.begin(), perm.end(), rng_);
      Shape shape(domain_.size());
      for (size_t d = 0; d < perm.size(); ++d)
        shape[static_cast<size_t>(perm[d])] = domain_[d];
      return frontend::permute(input(shape), perm);
    }
    case 2: { // slice of a larger input, step 1 or 2
      Shape shape = domain_;
      std::vector<int64_t> starts, ends, axes, steps;
      for (size_t d = 0; d < shape.size(); ++d) {
        if (pick(2) == 0)
          continue;
        int64_t step = 1 + pick(2), start = pick(3);
        shape[d] = start + step * (domain_[d] - 1) + 1 + pick(2);
        starts.push_back(start);
        ends.push_back(start + step * domain_[d]);
        axes.push_back(static_cast<int64_t>(d));
        steps.push_back(step);
      }
      Var x = input(shape);
      return axes.empty() ? x : frontend::slice(x, starts, ends, axes, steps);
    }
    default: { // reshape from another factorisation
      int64_t total = numElements(domain_);
      Shape shape{total};
      if (total % 2 == 0 && pick(2))
        shape = {2, total / 2};
      return frontend::reshape(input(shape), domain_);
    }
    }
  }

  Var unary(const Var &v) {
    switch (pick(7)) {
    case 0: return frontend::tanh(v);
    case 1: return frontend::sigmoid(v);
    case 2: return frontend::relu(v);
    case 3: return frontend::abs(v);
    case 4: return -v;
    case 5: return frontend::sin(v);
    default: return frontend::cos(v);
    }
  }

  Var binary(const Var &a, const Var &b) {
    switch (pick(5)) {
    case 0: return a + b;
    case 1: return a - b;
    case 2: return a * b;
    case 3: return frontend::maximum(a, b);
    default: return frontend::minimum(a, b);
    }
  }

  // A reduction over some axes of the current value, broadcast back into the chain.
  Var rowReduction(const Var &v) {
    if (v.rank() == 0)
      return v;
    std::vector<int64_t> axes;
    for (int64_t d = 0; d < v.rank(); ++d)
      if (pick(2) == 0)
        axes.push_back(d);
    if (axes.empty())
      axes.push_back(v.rank() - 1);
    Var reduced = pick(2) ? frontend::sum(v, axes, true) : frontend::max(v, axes, true);
    return pick(2) ? v - reduced : v * frontend::sigmoid(reduced);
  }

  GraphBuilder &gb_;
  std::mt19937_64 rng_;
  int case_;
  int inputs_ = 0;
  Shape domain_;
};

void runBatch(int batch, bool fuse) {
  GraphBuilder gb("random" + std::to_string(batch));
  std::vector<Var> outputs;
  for (int c = 0; c < 10; ++c)
    outputs.push_back(CaseBuilder(gb, 1000 * static_cast<uint64_t>(batch) + static_cast<uint64_t>(c), c).build());
  auto graph = gb.finish(outputs);
  CompileOptions options = testOptions();
  options.fuse = fuse;
  expectMatchesReference(*graph, randomInputs(*graph, 77 + static_cast<uint64_t>(batch)), options);
}

TEST(CodegenRandomFused, Batch0) { runBatch(0, true); }
TEST(CodegenRandomFused, Batch1) { runBatch(1, true); }
TEST(CodegenRandomFused, Batch2) { runBatch(2, true); }
TEST(CodegenRandomFused, Batch3) { runBatch(3, true); }
TEST(CodegenRandomFused, Batch4) { runBatch(4, true); }
TEST(CodegenRandomFused, Batch5Unfused) { runBatch(5, false); }

} // namespace
} // namespace kiln::codegen::test
