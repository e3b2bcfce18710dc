// Concats laid out over their operands (passes/memory/ConcatSlices.h): each producer writes its
// slice of the concat's buffer and the concat runs no kernel. Against the reference evaluator,
// at one and two threads: GoogLeNet's branch concat of convolutions and a max pool, DenseNet's
// block (every layer's concat a prefix of the block's buffer), concats of concats, an unrolled
// recurrence whose steps are read later and through reshapes by the sequence concat, a concat
// whose operand a kernel would otherwise accumulate into while the concat is still to be read,
// the cases that must stay copies (batch 2, an operand used twice, a graph input, a parameter,
// an operand returned, a misaligned operand, a concat returned, an operand already a slice
// elsewhere), and random graphs of convolutions, adds, pools and concats.
#include <memory>
#include <random>
#include <string>

#include <gtest/gtest.h>

#include "frontend/Frontend.h"
#include "passes/memory/PlanMemory.h"
#include "tests/codegen/CodegenTestUtil.h"

namespace kiln::codegen::test {
namespace {

using frontend::GraphBuilder;
using frontend::Var;

/// Convolutions with seeded weights.
class Convs {
public:
  Convs(GraphBuilder &gb, uint64_t seed) : gb_(gb), seed_(seed) {}

  /// relu(conv(x) + bias), `kernel` x `kernel` with same padding, `out` channels.
  Var operator()(const Var &x, int64_t out, int64_t kernel, bool relu = true) {
    std::string name = "conv" + std::to_string(count_++);
    Var w = gb_.param(name + ".w", randomTensor({DType::F32, {out, x.dim(1), kernel, kernel}}, seed_++));
    Var b = gb_.param(name + ".b", randomTensor({DType::F32, {out}}, seed_++));
    Var y = frontend::conv2d(x, w, b, {1}, {kernel / 2});
    return relu ? frontend::relu(y) : y;
  }

private:
  GraphBuilder &gb_;
  uint64_t seed_;
  int count_ = 0;
};

/// The concats of the lowered `graph` and which of them the plan laid out in place.
struct ConcatCount {
  int concats = 0, inPlace = 0;
};
ConcatCount countConcats(const ir::Graph &graph) {
  LoweredModel lowered = lowerGraph(graph, testOptions());
  passes::verifyPlan(*lowered.graph, lowered.plan);
  ConcatCount count;
  for (const ir::Node *node : lowered.graph->nodes())
    if (node->op() == ir::OpKind::Concat) {
      ++count.concats;
      count.inPlace += lowered.plan.isConcatInPlace(node->output());
    }
  return count;
}

/// Whether the lowered graph's concat named `name` is laid out in place.
bool namedConcatInPlace(const ir::Graph &graph, const std::string &name) {
  LoweredModel lowered = lowerGraph(graph, testOptions());
  for (const ir::Node *node : lowered.graph->nodes())
    if (node->op() == ir::OpKind::Concat && node->output()->name() == name)
      return lowered.plan.isConcatInPlace(node->output());
  ADD_FAILURE() << "no concat named " << name << " survives lowering";
  return false;
}

void expectMatchesAtOneAndTwoThreads(const ir::Graph &graph, uint64_t seed) {
  for (int threads : {1, 2})
    expectMatchesReference(graph, randomInputs(graph, seed), withThreads(threads));
}

TEST(CodegenConcatInPlace, BranchConcatOfConvolutionsAndAPool) {
  // An inception module at batch 1: [1, 8, 6, 6] per branch is 1152 bytes, 18 cache lines, so
  // each branch starts aligned. The concat feeds a convolution and a pool: it is needed in
  // memory, and its producers now write it.
  GraphBuilder gb("inception");
  Convs conv(gb, 10);
  Var x = gb.input("x", DType::F32, {1, 8, 6, 6});
  Var pooled = frontend::maxPool2d(x, {3, 3}, {1, 1}, {1, 1});
  Var joined = frontend::concat({conv(x, 8, 1), conv(conv(x, 4, 1), 8, 3), conv(pooled, 8, 1), pooled}, 1);
  joined.setName("joined");
  Var next = frontend::concat({conv(joined, 8, 1), frontend::maxPool2d(joined, {3, 3}, {1, 1}, {1, 1})}, 1);
  auto graph = gb.finish({conv(next, 4, 1)});
  ConcatCount count = countConcats(*graph);
  EXPECT_EQ(count.concats, 2);
  EXPECT_EQ(count.inPlace, 2);
  expectMatchesAtOneAndTwoThreads(*graph, 1);
}

TEST(CodegenConcatInPlace, DenseBlockConcatsArePrefixesOfOneBuffer) {
  // Each layer convolves the concat of the block's input and every earlier layer's output; the
  // last concat feeds a pool. 4 channels of 4 x 4 are 256 bytes, so every slice is aligned.
  GraphBuilder gb("dense");
  Convs conv(gb, 20);
  Var x = gb.input("x", DType::F32, {1, 8, 4, 4});
  std::vector<Var> features{conv(x, 8, 3)};
  for (int layer = 0; layer < 5; ++layer) {
    Var joined = features.size() == 1 ? features[0] : frontend::concat(features, 1);
    if (layer == 2) // one layer reads its concat through a relu, which reads one buffer
      joined = frontend::relu(joined);
    features.push_back(conv(conv(joined, 8, 1), 4, 3));
  }
  Var block = frontend::concat(features, 1);
  auto graph = gb.finish({frontend::maxPool2d(block, {2, 2})});

  LoweredModel lowered = lowerGraph(*graph, testOptions());
  passes::verifyPlan(*lowered.graph, lowered.plan);
  std::vector<const ir::Value *> concats;
  for (const ir::Node *node : lowered.graph->nodes())
    if (node->op() == ir::OpKind::Concat)
      concats.push_back(node->output());
  ASSERT_EQ(concats.size(), 5u); // layers 1 to 4 and the block's end, none fused into a kernel
  for (const ir::Value *concat : concats) {
    EXPECT_TRUE(lowered.plan.isConcatInPlace(concat));
    EXPECT_EQ(lowered.plan.offsetOf(concat), lowered.plan.offsetOf(concats.front()));
  }
  expectMatchesAtOneAndTwoThreads(*graph, 2);
}

TEST(CodegenConcatInPlace, ConcatsOfConcatsAndAReshapeOfOne) {
  GraphBuilder gb("nested");
  Convs conv(gb, 30);
  Var x = gb.input("x", DType::F32, {1, 4, 4, 4});
  Var inner1 = frontend::concat({conv(x, 4, 1), conv(x, 8, 3)}, 1);
  Var inner2 = frontend::concat({conv(x, 4, 3), conv(x, 4, 1)}, 1);
  Var outer = frontend::concat({inner1, inner2}, 1);
  Var flat = frontend::reshape(outer, {1, 20 * 16});
  Var w = gb.param("fc.w", randomTensor({DType::F32, {20 * 16, 5}}, 39));
  auto graph = gb.finish({frontend::matmul(flat, w), conv(inner1, 4, 1)});
  ConcatCount count = countConcats(*graph);
  EXPECT_EQ(count.concats, 3);
  EXPECT_EQ(count.inPlace, 3);
  expectMatchesAtOneAndTwoThreads(*graph, 3);
}

TEST(CodegenConcatInPlace, RecurrentStepsWriteTheirSliceOfTheSequence) {
  // An unrolled recurrence (ir/ops/RecurrentUnroll.cpp): each step's [4,16] state is
  // read by the next step and, reshaped to [1,4,16], by the sequence concat on axis 0, which
  // a permute reads. The reshapes share their step's bytes (the step is read later), so each
  // step kernel writes its slice of the sequence directly: no concat and no reshape runs.
  GraphBuilder gb("recurrent");
  Var x = gb.input("x", DType::F32, {4, 16});
  Var w = gb.param("w", randomTensor({DType::F32, {16, 16}}, 60));
  Var b = gb.param("b", randomTensor({DType::F32, {16}}, 61));
  std::vector<Var> steps;
  Var h = x;
  for (int t = 0; t < 6; ++t) {
    h = frontend::tanh(frontend::matmul(h, w) + b);
    steps.push_back(frontend::reshape(h, {1, 4, 16}));
  }
  Var sequence = frontend::permute(frontend::concat(steps, 0), {1, 0, 2});
  auto graph = gb.finish({sequence, frontend::matmul(h, w)});

  LoweredModel lowered = lowerGraph(*graph, testOptions());
  passes::verifyPlan(*lowered.graph, lowered.plan);
  int concats = 0, reshapes = 0, sharedViews = 0;
  for (const ir::Node *node : lowered.graph->nodes()) {
    if (node->op() == ir::OpKind::Concat) {
      ++concats;
      EXPECT_TRUE(lowered.plan.isConcatInPlace(node->output()));
    }
    reshapes += node->op() == ir::OpKind::Reshape;
  }
  for (const passes::BufferReuse &reuse : lowered.plan.reuses)
    sharedViews += reuse.kind == passes::ReuseKind::View;
  EXPECT_EQ(concats, 1);
  EXPECT_EQ(reshapes, 6);
  EXPECT_EQ(sharedViews, 6);
  expectMatchesAtOneAndTwoThreads(*graph, 6);
}

TEST(CodegenConcatInPlace, NoKernelAccumulatesIntoAnOperandTheConcatStillNeeds) {
  // relu(conv1x1(z) + r) may start from r and accumulate into its buffer when r dies there
  // (passes/fusion/AccumulatedOperand.h). Here r is also a slice of `joined`, which the last
  // convolution reads after that: r's bytes must stay. (r is a max pool, which no convolution
  // kernel computes beside the sum, as it would a convolution reading the same input.)
  GraphBuilder gb("accumulate");
  Convs conv(gb, 40);
  Var x = gb.input("x", DType::F32, {1, 8, 4, 4});
  Var r = frontend::maxPool2d(x, {3, 3}, {1, 1}, {1, 1});
  Var joined = frontend::concat({r, conv(x, 8, 1)}, 1);
  Var z = conv(x, 4, 3);
  Var summed = frontend::relu(conv(z, 8, 1, /*relu=*/false) + r);
  auto graph = gb.finish({conv(joined, 4, 1) + conv(summed, 4, 1)});
  LoweredModel lowered = lowerGraph(*graph, testOptions());
  passes::verifyPlan(*lowered.graph, lowered.plan);
  int inPlaceConcats = 0;
  for (const ir::Node *node : lowered.graph->nodes())
    inPlaceConcats += node->op() == ir::OpKind::Concat && lowered.plan.isConcatInPlace(node->output());
  EXPECT_EQ(inPlaceConcats, 1);
  for (const passes::BufferReuse &reuse : lowered.plan.reuses) {
    if (reuse.kind == passes::ReuseKind::InPlace) {
      EXPECT_NE(reuse.operand->producer()->op(), ir::OpKind::Concat);
    }
  }
  expectMatchesAtOneAndTwoThreads(*graph, 4);
}

TEST(CodegenConcatInPlace, CopiesWhereSlicesCannotBe) {
  GraphBuilder gb("copies");
  Convs conv(gb, 50);
  Var x = gb.input("x", DType::F32, {1, 4, 4, 4});
  Var x2 = gb.input("x2", DType::F32, {2, 4, 4, 4});
  Var a = conv(x, 4, 3), b = conv(x, 4, 1);
  std::vector<Var> outputs;
  auto keep = [&](Var joined, const std::string &name) {
    joined.setName(name);
    outputs.push_back(conv(joined, 2, 1));
  };
  keep(frontend::concat({conv(x2, 4, 3), conv(x2, 4, 1)}, 1), "batch2"); // slices interleave
  keep(frontend::concat({a, a}, 1), "twice");
  keep(frontend::concat({x, b}, 1), "graph_input");
  Var odd = conv(frontend::maxPool2d(x, {2, 2}), 3, 1); // [1, 3, 2, 2]: 48 bytes
  keep(frontend::concat({odd, conv(frontend::maxPool2d(x, {2, 2}), 4, 1)}, 1), "misaligned");
  Var returnedOperand = conv(x, 4, 1);
  outputs.push_back(returnedOperand);
  keep(frontend::concat({returnedOperand, conv(x, 4, 3)}, 1), "output_operand");
  Var weight = gb.param("constant_plane", randomTensor({DType::F32, {1, 4, 4, 4}}, 59));
  keep(frontend::concat({conv(x, 4, 3), weight}, 1), "param_operand");
  keep(frontend::concat({a, b}, 1), "first");
  keep(frontend::concat({b, a}, 1), "second"); // a and b already lie in `first`, the other way
  Var returned = frontend::concat({conv(x, 4, 1), conv(x, 4, 3)}, 1);
  outputs.push_back(returned);
  auto graph = gb.finish(outputs);
  for (const char *name : {"batch2", "twice", "graph_input", "output_operand", "param_operand", "misaligned", "second"})
    EXPECT_FALSE(namedConcatInPlace(*graph, name)) << name;
  EXPECT_TRUE(namedConcatInPlace(*graph, "first"));
  ConcatCount count = countConcats(*graph);
  EXPECT_EQ(count.concats, 9);
  EXPECT_EQ(count.inPlace, 1);
  expectMatchesAtOneAndTwoThreads(*graph, 5);
}

/// Random DAGs of NCHW values at batch 1 (sometimes 2): convolutions, adds, pools and concats
/// of two or three earlier values (an operand repeated, or the graph input, now and then), on
/// 4 x 4 images, where every channel is a cache line, or 3 x 3, where only multiples of 16 are.
class RandomConvGraph {
public:
  RandomConvGraph(uint64_t seed, int index) : rng_(seed), gb_("random" + std::to_string(index)), conv_(gb_, seed) {}

  std::unique_ptr<ir::Graph> build() {
    int64_t batch = pick(5) == 0 ? 2 : 1, side = pick(4) == 0 ? 3 : 4;
    pool_.push_back(gb_.input("x", DType::F32, {batch, 4 + 4 * pick(3), side, side}));
    for (int i = 0, n = 8 + pick(8); i < n; ++i)
      addNode();
    // The last value is returned; a concat there is read by a convolution first, mostly, so
    // that it can lie in the arena.
    std::vector<Var> outputs{pick(4) == 0 ? pool_.back() : conv_(pool_.back(), 4, 1)};
    if (pool_.size() > 2)
      outputs.push_back(frontend::relu(pool_[1 + static_cast<size_t>(pick(static_cast<int>(pool_.size()) - 2))]));
    return gb_.finish(outputs);
  }

private:
  int pick(int n) { return static_cast<int>(rng_() % static_cast<uint64_t>(n)); }
  Var recent() {
    size_t n = pool_.size();
    return pool_[n - 1 - static_cast<size_t>(pick(static_cast<int>(std::min<size_t>(n, 5))))];
  }

  /// A recent value other than `other`, if a few draws find one.
  Var distinctFrom(const Var &other) {
    Var candidate = recent();
    for (int tries = 0; tries < 4 && candidate.value() == other.value(); ++tries)
      candidate = recent();
    return candidate;
  }

  void addNode() {
    Var a = recent();
    switch (pick(6)) {
    case 0:
    case 1: pool_.push_back(conv_(a, 2 + 2 * pick(4), 1 + 2 * pick(2), pick(3) != 0)); break;
    case 2: {
      Var b = recent();
      pool_.push_back(b.dim(1) == a.dim(1) ? a + b : conv_(a, b.dim(1), 1) + b);
      break;
    }
    case 3: pool_.push_back(frontend::maxPool2d(a, {3, 3}, {1, 1}, {1, 1})); break;
    default: {
      std::vector<Var> parts{a, distinctFrom(a)};
      if (pick(2) == 0)
        parts.push_back(pick(6) == 0 ? pool_.front() : distinctFrom(parts[1]));
      if (parts.size() == 3 && pick(6) == 0)
        parts[2] = parts[0]; // an operand used twice
      pool_.push_back(frontend::concat(parts, 1));
    }
    }
    // Keep channel counts modest: a wide value is squeezed by a 1 x 1 convolution.
    if (pool_.back().dim(1) > 32)
      pool_.push_back(conv_(pool_.back(), 8, 1));
  }

  std::mt19937_64 rng_;
  GraphBuilder gb_;
  Convs conv_;
  std::vector<Var> pool_;
};

TEST(CodegenConcatInPlace, RandomGraphsMatchTheEvaluator) {
  int concats = 0, inPlace = 0;
  for (int index = 0; index < 20; ++index) {
    auto graph = RandomConvGraph(700 + static_cast<uint64_t>(index), index).build();
    SCOPED_TRACE("random graph " + std::to_string(index));
    ConcatCount count = countConcats(*graph);
    concats += count.concats;
    inPlace += count.inPlace;
    expectMatchesReference(*graph, randomInputs(*graph, 80 + static_cast<uint64_t>(index)),
                           withThreads(1 + index % 2));
  }
  // The generator does exercise both: concats laid out in place and concats copied.
  EXPECT_GT(inPlace, 0);
  EXPECT_GT(concats, inPlace);
  std::cout << "[ figures  ] 20 random graphs: " << concats << " concats, " << inPlace << " laid out in place\n";
}

} // namespace
} // namespace kiln::codegen::test
