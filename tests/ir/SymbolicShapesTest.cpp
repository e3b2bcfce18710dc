// Symbolic shapes through inference, the verifier, binding and the reference evaluator
// (ir/SymbolicShapes.h): each op family carries symbols, refuses what needs an extent by name,
// a bound graph equals the graph built statically at those sizes, and a randomised test checks
// that chains of elementwise, reduction, movement and contraction ops built with symbolic dims
// evaluate, at several bindings, exactly like the same chains built statically.
#include <gtest/gtest.h>

#include <random>

#include "core/SymbolicDim.h"
#include "core/Tensor.h"
#include "ir/Builder.h"
#include "ir/Evaluator.h"
#include "ir/Printer.h"
#include "ir/SymbolicShapes.h"
#include "ir/Verifier.h"
#include "tests/ErrorMatchers.h"
#include "tests/ir/RandomChain.h"

namespace kiln::ir {
namespace {

using test::expectErrorContaining;

const int64_t N = symbolDim("N");
const int64_t S = symbolDim("S");
const int64_t M = symbolDim("M");

TensorType f32(Shape shape) { return {DType::F32, std::move(shape)}; }

std::string typeOf(const Value *value) { return value->type().toString(); }

TEST(SymbolicInference, ElementwiseAndBroadcastingEquateSymbols) {
  Graph g;
  Builder b(g);
  Value *x = g.addInput(f32({N, 3}), "x");
  Value *row = g.addInput(f32({1, 3}), "row");
  Value *col = g.addInput(f32({N, 1}), "col");
  EXPECT_EQ(typeOf(b.create(OpKind::Add, {x, row})), "f32[N,3]");
  EXPECT_EQ(typeOf(b.create(OpKind::Mul, {row, col})), "f32[N,3]");
  EXPECT_EQ(typeOf(b.create(OpKind::Exp, {x})), "f32[N,3]");
  EXPECT_EQ(typeOf(b.create(OpKind::Relu, {x})), "f32[N,3]");
  Value *y = g.addInput(f32({M, 3}), "y");
  expectErrorContaining([&] { b.create(OpKind::Add, {x, y}); }, "dim 0: N vs M");
  Value *five = g.addInput(f32({5, 3}), "five");
  expectErrorContaining([&] { b.create(OpKind::Add, {x, five}); }, "dim 0: N vs 5");
}

TEST(SymbolicInference, Contractions) {
  Graph g;
  Builder b(g);
  Value *q = g.addInput(f32({N, S, 8}), "q");
  Value *k = g.addInput(f32({N, S, 8}), "k");
  Value *w = g.addInput(f32({8, 4}), "w");
  EXPECT_EQ(typeOf(b.create(OpKind::MatMul, {q, w})), "f32[N,S,4]");
  // Attention: scores [N,S,S], softmax over the keys, weighted values [N,S,8].
  Value *kt = b.create(OpKind::Permute, {k}, {{"perm", std::vector<int64_t>{0, 2, 1}}});
  Value *scores = b.create(OpKind::MatMul, {q, kt});
  EXPECT_EQ(typeOf(scores), "f32[N,S,S]");
  Value *probs = b.create(OpKind::Softmax, {scores}, {{"axis", int64_t(-1)}});
  EXPECT_EQ(typeOf(b.create(OpKind::MatMul, {probs, k})), "f32[N,S,8]");
  Value *wt = g.addInput(f32({4, 8}), "wt");
  EXPECT_EQ(typeOf(b.create(OpKind::Linear, {q, wt})), "f32[N,S,4]");
  Value *other = g.addInput(f32({N, M, 8}), "other");
  expectErrorContaining([&] { b.create(OpKind::MatMul, {q, other}); }, "[N,S,8] has 8 columns but [N,M,8] has M rows");
  expectErrorContaining([&] { b.create(OpKind::MatMul, {scores, other}); }, "has S columns but");
}

TEST(SymbolicInference, ConvAndPoolingTakeASymbolicBatchOnly) {
  Graph g;
  Builder b(g);
  Value *x = g.addInput(f32({N, 3, 8, 8}), "x");
  Value *w = b.param("w", f32({4, 3, 3, 3}));
  Value *y = b.create(OpKind::Conv, {x, w}, {{"pads", std::vector<int64_t>{1, 1, 1, 1}}});
  EXPECT_EQ(typeOf(y), "f32[N,4,8,8]");
  EXPECT_EQ(typeOf(b.create(OpKind::MaxPool, {y}, {{"kernel", std::vector<int64_t>{2, 2}}, {"strides", std::vector<int64_t>{2, 2}}})),
            "f32[N,4,4,4]");
  Value *wide = g.addInput(f32({N, 3, 8, S}), "wide");
  expectErrorContaining([&] { b.create(OpKind::Conv, {wide, w}); }, "needs a static dim 3 but the shape [N,3,8,S] has the symbolic S");
  expectErrorContaining([&] { b.create(OpKind::AvgPool, {wide}, {{"kernel", std::vector<int64_t>{2, 2}}}); },
                        "pooling's input needs a static dim 3");
}

TEST(SymbolicInference, ReductionsNormsAndArgmax) {
  Graph g;
  Builder b(g);
  Value *x = g.addInput(f32({N, S, 16}), "x");
  EXPECT_EQ(typeOf(b.create(OpKind::ReduceSum, {x}, {{"axes", std::vector<int64_t>{1}}, {"keepdims", int64_t(0)}})),
            "f32[N,16]");
  EXPECT_EQ(typeOf(b.create(OpKind::ReduceMax, {x}, {{"axes", std::vector<int64_t>{0, 1}}, {"keepdims", int64_t(1)}})),
            "f32[1,1,16]");
  EXPECT_EQ(typeOf(b.create(OpKind::ReduceMean, {x}, {{"axes", std::vector<int64_t>{}}})), "f32[]");
  EXPECT_EQ(typeOf(b.create(OpKind::ArgMax, {x}, {{"axis", int64_t(1)}, {"keepdims", int64_t(0)}})), "i64[N,16]");
  Value *gamma = g.addInput(f32({16}), "gamma");
  EXPECT_EQ(typeOf(b.create(OpKind::LayerNorm, {x, gamma}, {{"axis", int64_t(-1)}})), "f32[N,S,16]");
  EXPECT_EQ(typeOf(b.create(OpKind::LogSoftmax, {x}, {{"axis", int64_t(1)}})), "f32[N,S,16]");
}

TEST(SymbolicInference, MovementOps) {
  Graph g;
  Builder b(g);
  Value *x = g.addInput(f32({N, S, 12}), "x");
  auto reshape = [&](Value *v, Shape shape) { return b.create(OpKind::Reshape, {v}, {{"shape", shape}}); };
  EXPECT_EQ(typeOf(reshape(x, {-1, 12})), "f32[N*S,12]");
  EXPECT_EQ(typeOf(reshape(x, {N, -1})), "f32[N,12*S]");
  EXPECT_EQ(typeOf(reshape(x, {N, S, 3, -1})), "f32[N,S,3,4]");
  EXPECT_EQ(typeOf(reshape(x, {-1})), "f32[12*N*S]");
  expectErrorContaining([&] { reshape(x, {N, 5, -1}); }, "12*N*S is not a multiple of 5*N");
  expectErrorContaining([&] { reshape(x, {N, 12}); }, "12*N*S elements) into [N,12] (12*N elements)");
  EXPECT_EQ(typeOf(b.create(OpKind::Flatten, {x}, {{"start", int64_t(0)}, {"end", int64_t(1)}})), "f32[N*S,12]");
  EXPECT_EQ(typeOf(b.create(OpKind::Permute, {x}, {{"perm", std::vector<int64_t>{2, 0, 1}}})), "f32[12,N,S]");
  Value *u = b.create(OpKind::Unsqueeze, {x}, {{"axes", std::vector<int64_t>{1}}});
  EXPECT_EQ(typeOf(u), "f32[N,1,S,12]");
  EXPECT_EQ(typeOf(b.create(OpKind::Squeeze, {u}, {})), "f32[N,S,12]"); // a symbol is never taken for 1
  EXPECT_EQ(typeOf(b.create(OpKind::Tile, {x}, {{"repeats", std::vector<int64_t>{2, 1, 1}}})), "f32[2*N,S,12]");
  EXPECT_EQ(typeOf(b.create(OpKind::Concat, {x, x}, {{"axis", int64_t(1)}})), "f32[N,2*S,12]");
  Value *m = g.addInput(f32({N, M, 12}), "m");
  EXPECT_EQ(typeOf(b.create(OpKind::Concat, {x, m}, {{"axis", int64_t(1)}})), "f32[N,M+S,12]");
  expectErrorContaining([&] { b.create(OpKind::Concat, {x, m}, {{"axis", int64_t(2)}}); }, "outside axis 2");
  EXPECT_EQ(typeOf(b.create(OpKind::Slice, {x}, {{"starts", std::vector<int64_t>{2}}, {"ends", std::vector<int64_t>{10}}, {"axes", std::vector<int64_t>{2}}})),
            "f32[N,S,8]");
  expectErrorContaining([&] { b.create(OpKind::Slice, {x}, {{"starts", std::vector<int64_t>{0}}, {"ends", std::vector<int64_t>{1}}}); },
                        "slice needs a static dim 0");
  Value *one = g.addInput(f32({1, S, 1}), "one");
  EXPECT_EQ(typeOf(b.create(OpKind::Broadcast, {one}, {{"shape", Shape{N, S, 12}}})), "f32[N,S,12]");
  Value *table = g.addInput(f32({100, 16}), "table");
  Value *ids = g.addInput({DType::I64, {N, S}}, "ids");
  EXPECT_EQ(typeOf(b.create(OpKind::Gather, {table, ids})), "f32[N,S,16]");
}

TEST(SymbolicInference, UnauditedOpsRefuseSymbolsByName) {
  Graph g;
  Builder b(g);
  Value *x = g.addInput(f32({N, 4}), "x");
  expectErrorContaining([&] { b.create(OpKind::Pad, {x}, {{"pads", std::vector<int64_t>{0, 1, 0, 1}}}); },
                        "pad does not take symbolic dims yet (operand 0 is f32[N,4])");
}

/// add(x, row) -> reduce_sum over axis 1 -> reshape [-1]: a small symbolic graph.
std::unique_ptr<Graph> smallGraph(int64_t n) {
  auto g = std::make_unique<Graph>("small");
  Builder b(*g);
  Value *x = g->addInput(f32({n, 3}), "x");
  Value *row = g->addInput(f32({1, 3}), "row");
  Value *y = b.create(OpKind::Add, {x, row});
  y = b.create(OpKind::ReduceSum, {y}, {{"axes", std::vector<int64_t>{1}}, {"keepdims", int64_t(1)}});
  g->addOutput(b.create(OpKind::Reshape, {y}, {{"shape", Shape{n}}}), "y");
  return g;
}

TEST(SymbolicBinding, BindingGivesTheStaticGraph) {
  std::unique_ptr<Graph> symbolic = smallGraph(N);
  verify(*symbolic);
  EXPECT_FALSE(isStaticGraph(*symbolic));
  EXPECT_EQ(graphSymbols(*symbolic), std::vector<std::string>{"N"});
  std::unique_ptr<Graph> bound = bindSymbols(*symbolic, {{"N", 5}});
  EXPECT_TRUE(isStaticGraph(*bound));
  EXPECT_EQ(printGraph(*bound), printGraph(*smallGraph(5)));
  EXPECT_FALSE(isStaticGraph(*symbolic)); // binding copies
}

TEST(SymbolicBinding, BindingsFromInputShapesAndErrors) {
  Graph g;
  g.addInput(f32({N, S}), "a");
  g.addInput(f32({S, 4}), "b");
  EXPECT_EQ(bindingsFromShapes(g, std::map<std::string, Shape>{{"a", {2, 7}}, {"b", {7, 4}}}),
            (DimBindings{{"N", 2}, {"S", 7}}));
  expectErrorContaining([&] { bindingsFromShapes(g, std::map<std::string, Shape>{{"a", {2, 7}}, {"b", {6, 4}}}); },
                        "symbol S has two extents: 7 from input 'a' (dim 1 = 7) but 6 from input 'b' (dim 0 = 6)");
  expectErrorContaining([&] { bindingsFromShapes(g, std::map<std::string, Shape>{{"a", {2, 7}}}, {{"N", 3}}); },
                        "symbol N has two extents: 3 from --dim N=3 but 2 from input 'a'");
  expectErrorContaining([&] { bindingsFromShapes(g, std::map<std::string, Shape>{{"b", {7, 5}}}); },
                        "input 'b' is declared f32[S,4] but given shape [7,5]: dim 1 must be 4");
  expectErrorContaining([&] { bindingsFromShapes(g, std::map<std::string, Shape>{{"b", {7}}}); }, "rank 1, not 2");
  expectErrorContaining([&] { bindSymbols(g, {{"N", 2}}); }, "symbol S (in dim S) has no extent");
  expectErrorContaining([&] { bindSymbols(g, {{"N", 2}, {"S", 3}, {"Q", 1}}); }, "--dim Q=1 names no symbol");
}

TEST(SymbolicBinding, ABindingAnOpCannotTakeIsAnError) {
  Graph g;
  Builder b(g);
  Value *x = g.addInput(f32({N, 3}), "x");
  g.addOutput(b.create(OpKind::ReduceMax, {x}, {{"axes", std::vector<int64_t>{0}}}), "y");
  bindSymbols(g, {{"N", 1}});
  expectErrorContaining([&] { bindSymbols(g, {{"N", 0}}); }, "reduce_max over an empty axis");
}

TEST(SymbolicBinding, TheEvaluatorBindsToItsInputs) {
  std::unique_ptr<Graph> symbolic = smallGraph(N);
  Tensor row = randomTensor(f32({1, 3}), 1);
  for (int64_t n : {1, 4}) {
    Tensor x = randomTensor(f32({n, 3}), 2);
    std::vector<Tensor> got = evaluate(*symbolic, {x, row});
    std::vector<Tensor> want = evaluate(*smallGraph(n), {x, row});
    EXPECT_TRUE(got[0].identical(want[0]));
  }
  expectErrorContaining([&] { evaluate(*symbolic, {randomTensor(f32({2, 4}), 0), row}); }, "dim 1 must be 3");
}

// ---- randomised: symbolic chains agree with static ones at every binding -----------------

TEST(SymbolicRandom, ChainsAgreeWithStaticBuildsAtEveryBinding) {
  for (uint64_t seed = 0; seed < 40; ++seed) {
    SCOPED_TRACE(seed);
    test::RandomChain chain(seed);
    std::unique_ptr<Graph> symbolic = chain.build({{"N", N}, {"M", M}});
    verify(*symbolic);
    for (auto [n, m] : {std::pair<int64_t, int64_t>{1, 2}, {3, 5}, {4, 1}, {6, 6}}) {
      std::unique_ptr<Graph> fixed = chain.build({{"N", n}, {"M", m}});
      std::vector<Tensor> inputs;
      for (size_t i = 0; i < fixed->inputs().size(); ++i)
        inputs.push_back(randomTensor(fixed->inputs()[i]->type(), seed * 100 + i));
      // Binding the symbolic graph gives exactly the static build, and they compute the same.
      DimBindings bindings;
      for (const std::string &symbol : graphSymbols(*symbolic)) // M appears only in some chains
        bindings[symbol] = symbol == "N" ? n : m;
      std::unique_ptr<Graph> bound = bindSymbols(*symbolic, bindings);
      EXPECT_EQ(printGraph(*bound), printGraph(*fixed));
      std::vector<Tensor> got = evaluate(*symbolic, inputs), want = evaluate(*fixed, inputs);
      ASSERT_EQ(got.size(), want.size());
      EXPECT_TRUE(got[0].identical(want[0])) << printGraph(*symbolic);
    }
  }
}

} // namespace
} // namespace kiln::ir
