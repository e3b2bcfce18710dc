#pragma once
// Random rank-2 chains of ops over symbolic dims, for the randomised tests of symbolic shapes
// (tests/ir/SymbolicShapesTest.cpp: a symbolic build bound equals the static build) and of
// batch tiles (tests/codegen/BatchTilesTest.cpp: one compile runs every batch size).
#include <map>
#include <memory>
#include <random>
#include <string>

#include <fmt/format.h>

#include "core/Tensor.h"
#include "ir/Builder.h"
#include "ir/Graph.h"

namespace kiln::test {

using ir::Builder;
using ir::Graph;
using ir::OpKind;
using ir::Value;

/// Rank-2 chains over symbols N and M (and constants): each step applies one op to the
/// current value, with fresh inputs where the op needs a second operand. `dims` maps a symbol
/// to its dim: symbolDim for the symbolic build, its extent for the static one.
class RandomChain {
public:
  explicit RandomChain(uint64_t seed) : rng_(seed) {}

  std::unique_ptr<Graph> build(const std::map<std::string, int64_t> &dims) {
    std::mt19937_64 rng = rng_; // the same choices for every build
    auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<uint64_t>(n)); };
    auto g = std::make_unique<Graph>("chain");
    Builder b(*g);
    const int64_t n = dims.at("N"), m = dims.at("M");
    int inputIndex = 0;
    auto input = [&](Shape shape) { return g->addInput(TensorType{DType::F32, std::move(shape)}, fmt::format("in{}", inputIndex++)); };
    Value *x = input({n, 3});
    int steps = 3 + pick(6);
    for (int step = 0; step < steps; ++step) {
      Shape shape = x->shape();
      switch (pick(9)) {
      case 0: x = b.create(pick(2) ? OpKind::Tanh : OpKind::Neg, {x}); break;
      case 1: x = b.create(OpKind::Relu, {x}); break;
      case 2: // binary with a full, row or column operand
        x = b.create(pick(2) ? OpKind::Add : OpKind::Mul,
                     {x, input(pick(3) == 0 ? Shape{shape[0], shape[1]} : pick(2) ? Shape{1, shape[1]} : Shape{shape[0], 1})});
        break;
      case 3:
        x = b.create(pick(2) ? OpKind::ReduceSum : OpKind::ReduceMax, {x},
                     {{"axes", std::vector<int64_t>{pick(2)}}, {"keepdims", int64_t(1)}});
        break;
      case 4: // contract the last dim with a [last, N|M|2] operand
        x = b.create(OpKind::MatMul, {x, input({shape[1], pick(3) == 0 ? 2 : pick(2) ? n : m})});
        break;
      case 5: x = b.create(OpKind::Permute, {x}, {{"perm", std::vector<int64_t>{1, 0}}}); break;
      case 6: // flatten and restore through an inferred dim
        x = b.create(OpKind::Reshape, {x}, {{"shape", Shape{-1}}});
        x = b.create(OpKind::Reshape, {x}, {{"shape", Shape{-1, shape[1]}}});
        break;
      case 7: x = b.create(OpKind::Concat, {x, input(shape)}, {{"axis", int64_t(pick(2))}}); break;
      case 8: x = b.create(OpKind::Softmax, {x}, {{"axis", int64_t(1)}}); break;
      }
    }
    g->addOutput(x, "out");
    return g;
  }

private:
  std::mt19937_64 rng_;
};

} // namespace kiln::test
