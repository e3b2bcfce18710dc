// IR core: graph mutation keeps use lists right, the verifier catches broken graphs, the
// builder reports bad calls, the evaluator binds inputs and parameters, and the Boost.Graph
// adapter answers order and reachability questions.
#include <gtest/gtest.h>

#include <cmath>

#include "ir/Builder.h"
#include "ir/Error.h"
#include "ir/Evaluator.h"
#include "ir/GraphAlgorithms.h"
#include "ir/Verifier.h"

using namespace kiln;
using namespace kiln::ir;

namespace {

// Expects `body` to throw kiln::Error whose message contains `needle`.
template <typename Fn> void expectError(Fn body, const std::string &needle) {
  try {
    body();
    FAIL() << "expected kiln::Error containing '" << needle << "'";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

size_t countUses(const Value *v, const Node *user) {
  size_t n = 0;
  for (const Use &use : v->uses())
    n += use.user == user;
  return n;
}

} // namespace

TEST(Graph, BuildVerifyEvaluateUnaryChain) {
  Graph g("chain");
  Value *x = g.addInput({DType::F32, {2, 3}}, "x");
  Builder b(g);
  Value *y = b.create(OpKind::Exp, {b.create(OpKind::Neg, {x})});
  g.setOutputs({y});
  verify(g);
  Tensor in = Tensor::fromDoubles(DType::F32, {2, 3}, {0, 1, 2, -1, -2, 0.5});
  auto out = evaluate(g, {in});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_NEAR(out[0].getDouble(1), std::exp(-1.0), 1e-7);
  EXPECT_NEAR(out[0].getDouble(3), std::exp(1.0), 1e-6);
}

TEST(Graph, UseListsFollowOperands) {
  Graph g;
  Value *x = g.addInput({DType::F32, {4}}, "x");
  Builder b(g);
  Value *a = b.create(OpKind::Abs, {x});
  Value *c = b.create(OpKind::Exp, {x});
  ASSERT_EQ(x->uses().size(), 2u);
  Node *expNode = c->producer();
  expNode->setInput(0, a);
  EXPECT_EQ(x->uses().size(), 1u);
  EXPECT_EQ(countUses(a, expNode), 1u);
  g.setOutputs({c});
  verify(g);
}

TEST(Graph, ReplaceAllUsesUpdatesNodesAndOutputs) {
  Graph g;
  Value *x = g.addInput({DType::F32, {3}}, "x");
  Builder b(g);
  Value *a = b.create(OpKind::Abs, {x});
  Value *e = b.create(OpKind::Exp, {a});
  g.setOutputs({a, e});
  Value *n = b.create(OpKind::Neg, {x});
  // The replacement is defined after the uses; move it first so order stays valid.
  g.moveBefore(n->producer(), a->producer());
  a->replaceAllUsesWith(n);
  EXPECT_TRUE(a->uses().empty());
  EXPECT_FALSE(a->hasUses());
  EXPECT_EQ(g.outputs()[0], n);
  EXPECT_EQ(e->producer()->input(0), n);
  g.eraseNode(a->producer());
  verify(g);
  EXPECT_EQ(g.numNodes(), 2u);
}

TEST(Graph, EraseRefusesUsedNodes) {
  Graph g;
  Value *x = g.addInput({DType::F32, {3}}, "x");
  Builder b(g);
  Value *a = b.create(OpKind::Abs, {x});
  g.setOutputs({b.create(OpKind::Exp, {a})});
  expectError([&] { g.eraseNode(a->producer()); }, "still used");
  expectError([&] { g.eraseInput(x); }, "still has uses");
}

TEST(Graph, InsertionPointPlacesNodes) {
  Graph g;
  Value *x = g.addInput({DType::F32, {3}}, "x");
  Builder b(g);
  Value *a = b.create(OpKind::Abs, {x});
  Value *e = b.create(OpKind::Exp, {a});
  b.setInsertionPoint(e->producer());
  Value *n = b.create(OpKind::Neg, {a});
  e->producer()->setInput(0, n);
  g.setOutputs({e});
  auto nodes = g.nodes();
  ASSERT_EQ(nodes.size(), 3u);
  EXPECT_EQ(nodes[1], n->producer());
  EXPECT_EQ(nodes[1]->prev(), a->producer());
  EXPECT_EQ(nodes[1]->next(), e->producer());
  EXPECT_EQ(nodes[2]->next(), nullptr);
  verify(g);
}

TEST(Graph, CloneGraphIsDeepAndEqualInBehaviour) {
  Graph g("orig");
  Value *x = g.addInput({DType::F32, {2}}, "x");
  Builder b(g);
  Value *w = b.param("w", {DType::F32, {2}}, Tensor::fromDoubles(DType::F32, {2}, {1, 2}));
  Value *y = b.create(OpKind::Tanh, {b.create(OpKind::Abs, {x})});
  g.setOutputs({y, w});
  auto copy = g.clone();
  verify(*copy);
  EXPECT_EQ(copy->numNodes(), g.numNodes());
  EXPECT_EQ(copy->inputs()[0]->name(), "x");
  EXPECT_NE(copy->outputs()[0], y);
  Tensor in = Tensor::fromDoubles(DType::F32, {2}, {-0.5, 2});
  auto a = evaluate(g, {in}), c = evaluate(*copy, {in});
  EXPECT_TRUE(a[0].identical(c[0]));
  EXPECT_TRUE(a[1].identical(c[1]));
}

TEST(Graph, CloneSubgraphRemapsOperands) {
  Graph g;
  Value *x = g.addInput({DType::F32, {2}}, "x");
  Value *z = g.addInput({DType::F32, {2}}, "z");
  Builder b(g);
  Value *a = b.create(OpKind::Abs, {x});
  Value *e = b.create(OpKind::Exp, {a});
  // Clone abs -> exp, feeding it from z instead of x.
  std::unordered_map<const Value *, Value *> mapping{{x, z}};
  g.cloneNodes({a->producer(), e->producer()}, mapping);
  Value *e2 = mapping.at(e);
  EXPECT_EQ(mapping.at(a)->producer()->input(0), z);
  EXPECT_EQ(e2->producer()->input(0), mapping.at(a));
  g.setOutputs({e, e2});
  verify(g);
  auto out = evaluate(g, {Tensor::fromDoubles(DType::F32, {2}, {1, 1}), Tensor::fromDoubles(DType::F32, {2}, {0, 0})});
  EXPECT_NEAR(out[0].getDouble(0), std::exp(1.0), 1e-6);
  EXPECT_NEAR(out[1].getDouble(0), 1.0, 1e-7);
}

TEST(Verifier, CatchesUseBeforeDefinition) {
  Graph g;
  Value *x = g.addInput({DType::F32, {2}}, "x");
  Builder b(g);
  Value *a = b.create(OpKind::Abs, {x});
  Value *e = b.create(OpKind::Exp, {a});
  g.setOutputs({e});
  g.moveBefore(e->producer(), a->producer());
  expectError([&] { verify(g); }, "not defined before its use");
}

TEST(Verifier, CatchesTypeDisagreeingWithInference) {
  Graph g;
  Value *x = g.addInput({DType::F32, {2}}, "x");
  Builder b(g);
  Value *a = b.create(OpKind::Abs, {x});
  g.setOutputs({a});
  a->setType({DType::F32, {3}});
  expectError([&] { verify(g); }, "inference gives f32[2]");
}

TEST(Verifier, CatchesReturnOfForeignValue) {
  Graph g, other;
  Value *x = other.addInput({DType::F32, {2}}, "x");
  g.setOutputs({x});
  expectError([&] { verify(g); }, "not defined in the graph");
}

TEST(Builder, ReportsArityAndAttributes) {
  Graph g;
  Value *x = g.addInput({DType::F32, {2}}, "x");
  Builder b(g);
  expectError([&] { b.create(OpKind::Abs, {x, x}); }, "abs(f32[2], f32[2]): expects 1 inputs, got 2");
  expectError([&] { b.create(OpKind::Abs, {x}, {{"axis", int64_t(1)}}); }, "unknown attribute 'axis'");
  expectError([&] { b.create(OpKind::Param, {}, {{"name", std::string("w")}}); }, "missing required attribute");
  expectError([&] { b.create(OpKind::Param, {}, {{"name", int64_t(3)}, {"dtype", DType::F32}, {"shape", std::vector<int64_t>{}}}); },
              "attribute 'name' must be string");
  expectError([&] { b.create(OpKind::Exp, {b.create(OpKind::Cast, {x}, {{"to", DType::I32}})}); },
              "needs a floating-point operand");
}

TEST(Evaluator, BindsInputsAndParameters) {
  Graph g;
  Value *x = g.addInput({DType::F32, {2}}, "x");
  Builder b(g);
  Value *w = b.param("w", {DType::F32, {2}});
  g.setOutputs({b.create(OpKind::Abs, {x}), w});
  Tensor in = Tensor::fromDoubles(DType::F32, {2}, {-1, 2});
  expectError([&] { evaluate(g, {in}); }, "parameter 'w' has no value");
  expectError([&] { evaluate(g, {Tensor(DType::F32, {3})}, {{"w", in}}); }, "expects f32[2], got f32[3]");
  expectError([&] { evaluate(g, {}); }, "takes 1 inputs, got 0");
  expectError([&] { evaluate(g, {in}, {{"w", Tensor(DType::F64, {2})}}); }, "parameter 'w' expects f32[2]");
  auto out = evaluate(g, {in}, {{"w", in}});
  EXPECT_EQ(out[0].getDouble(0), 1.0);
  EXPECT_TRUE(out[1].identical(in));
}

TEST(GraphAlgorithms, OrderAndReachability) {
  Graph g;
  Value *x = g.addInput({DType::F32, {2}}, "x");
  Builder b(g);
  Value *a = b.create(OpKind::Abs, {x});
  Value *n = b.create(OpKind::Neg, {x});
  Value *e = b.create(OpKind::Exp, {a});
  g.setOutputs({e, n});
  DependenceGraph deps(g);
  EXPECT_TRUE(deps.reaches(a->producer(), e->producer()));
  EXPECT_FALSE(deps.reaches(e->producer(), a->producer()));
  EXPECT_FALSE(deps.reaches(n->producer(), e->producer()));
  auto reached = deps.reachableFrom({a->producer()});
  ASSERT_EQ(reached.size(), 1u);
  EXPECT_EQ(reached[0], e->producer());
  auto order = deps.topologicalOrder();
  ASSERT_EQ(order.size(), 3u);
  EXPECT_LT(std::find(order.begin(), order.end(), a->producer()), std::find(order.begin(), order.end(), e->producer()));
  EXPECT_FALSE(deps.hasCycle());
  deps.addEdge(e->producer(), a->producer());
  EXPECT_TRUE(deps.hasCycle());
  expectError([&] { deps.stableTopologicalOrder(); }, "cycle");
}

TEST(GraphAlgorithms, SortTopologicallyRepairsOrderStably) {
  Graph g;
  Value *x = g.addInput({DType::F32, {2}}, "x");
  Builder b(g);
  Value *a = b.create(OpKind::Abs, {x});
  Value *n = b.create(OpKind::Neg, {x});
  Value *e = b.create(OpKind::Exp, {a});
  g.setOutputs({e, n});
  g.moveBefore(e->producer(), nullptr);
  g.moveBefore(a->producer(), nullptr); // now: neg, exp, abs - invalid
  sortTopologically(g);
  verify(g);
  auto nodes = g.nodes();
  EXPECT_EQ(nodes[0], n->producer()); // independent node keeps its place
  EXPECT_EQ(nodes[1], a->producer());
  EXPECT_EQ(nodes[2], e->producer());
}
