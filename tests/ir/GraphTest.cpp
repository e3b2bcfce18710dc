// IR core: graph mutation keeps use lists right, the verifier catches broken graphs, the
// builder reports bad calls, the evaluator binds inputs and parameters, and the Boost.Graph
// adapter answers order and reachability questions.
#include <gtest/gtest.h>

#include <cmath>

#include "core/Error.h"
#include "ir/Builder.h"
#include "ir/Evaluator.h"
#include "ir/GraphAlgorithms.h"
#include "ir/Verifier.h"
#include "tests/ir/OpTestUtil.h"

using namespace kiln;
using namespace kiln::ir;
using namespace kiln::test;

namespace {

// x -> abs -> exp on f32[size]: the chain most tests below edit. Graph can be neither copied
// nor moved, so a test holds the whole struct.
struct AbsExpChain {
  explicit AbsExpChain(int64_t size) : x(g.addInput({DType::F32, {size}}, "x")), b(g) {
    abs = b.create(OpKind::Abs, {x});
    exp = b.create(OpKind::Exp, {abs});
  }
  Graph g;
  Value *x;
  Builder b;
  Value *abs, *exp;
};

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
  AbsExpChain c(3);
  c.g.setOutputs({c.abs, c.exp});
  Value *n = c.b.create(OpKind::Neg, {c.x});
  // The replacement is defined after the uses; move it first so order stays valid.
  c.g.moveBefore(n->producer(), c.abs->producer());
  c.abs->replaceAllUsesWith(n);
  EXPECT_TRUE(c.abs->uses().empty());
  EXPECT_FALSE(c.abs->hasUses());
  EXPECT_EQ(c.g.outputs()[0], n);
  EXPECT_EQ(c.exp->producer()->input(0), n);
  c.g.eraseNode(c.abs->producer());
  verify(c.g);
  EXPECT_EQ(c.g.numNodes(), 2u);
}

// An output is named by its value unless it has a name of its own; replacing its value (as a
// pass does) keeps the name it had, and cloning copies it.
TEST(Graph, OutputNamesSurviveValueReplacementAndCloning) {
  AbsExpChain c(3);
  c.abs->setName("a");
  c.g.setOutputs({c.abs, c.exp, c.abs});
  c.g.setOutputName(2, "again");
  EXPECT_EQ(c.g.outputName(0), "a");
  EXPECT_EQ(c.g.outputName(1), "");
  EXPECT_EQ(c.g.outputName(2), "again");
  c.abs->replaceAllUsesWith(c.x);
  c.g.eraseNode(c.abs->producer());
  verify(c.g);
  EXPECT_EQ(c.g.outputs()[0], c.x);
  EXPECT_EQ(c.g.outputs()[2], c.x);
  EXPECT_EQ(c.g.outputName(0), "a");
  EXPECT_EQ(c.g.outputName(2), "again");
  auto copy = c.g.clone();
  EXPECT_EQ(copy->outputName(0), "a");
  EXPECT_EQ(copy->outputName(1), "");
  EXPECT_EQ(copy->outputName(2), "again");
  c.g.setOutputs({c.x});
  EXPECT_EQ(c.g.outputName(0), "x");
}

TEST(Graph, EraseRefusesUsedNodes) {
  AbsExpChain c(3);
  c.g.setOutputs({c.exp});
  expectError([&] { c.g.eraseNode(c.abs->producer()); }, "still used");
  expectError([&] { c.g.eraseInput(c.x); }, "still has uses");
}

TEST(Graph, InsertionPointPlacesNodes) {
  AbsExpChain c(3);
  c.b.setInsertionPoint(c.exp->producer());
  Value *n = c.b.create(OpKind::Neg, {c.abs});
  c.exp->producer()->setInput(0, n);
  c.g.setOutputs({c.exp});
  auto nodes = c.g.nodes();
  ASSERT_EQ(nodes.size(), 3u);
  EXPECT_EQ(nodes[1], n->producer());
  EXPECT_EQ(nodes[1]->prev(), c.abs->producer());
  EXPECT_EQ(nodes[1]->next(), c.exp->producer());
  EXPECT_EQ(nodes[2]->next(), nullptr);
  verify(c.g);
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
  AbsExpChain c(2);
  Value *z = c.g.addInput({DType::F32, {2}}, "z");
  // Clone abs -> exp, feeding it from z instead of x.
  std::unordered_map<const Value *, Value *> mapping{{c.x, z}};
  c.g.cloneNodes({c.abs->producer(), c.exp->producer()}, mapping);
  Value *e2 = mapping.at(c.exp);
  EXPECT_EQ(mapping.at(c.abs)->producer()->input(0), z);
  EXPECT_EQ(e2->producer()->input(0), mapping.at(c.abs));
  c.g.setOutputs({c.exp, e2});
  verify(c.g);
  auto out = evaluate(
      c.g, {Tensor::fromDoubles(DType::F32, {2}, {1, 1}), Tensor::fromDoubles(DType::F32, {2}, {0, 0})});
  EXPECT_NEAR(out[0].getDouble(0), std::exp(1.0), 1e-6);
  EXPECT_NEAR(out[1].getDouble(0), 1.0, 1e-7);
}

TEST(Verifier, CatchesUseBeforeDefinition) {
  AbsExpChain c(2);
  c.g.setOutputs({c.exp});
  c.g.moveBefore(c.exp->producer(), c.abs->producer());
  expectError([&] { verify(c.g); }, "not defined before its use");
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
  expectError(
      [&] {
        b.create(OpKind::Param, {}, {{"name", std::string("w")}});
      },
      "missing required attribute");
  expectError(
      [&] {
        b.create(OpKind::Param, {},
                 {{"name", int64_t(3)}, {"dtype", DType::F32}, {"shape", std::vector<int64_t>{}}});
      },
      "attribute 'name' must be string");
  expectError(
      [&] {
        b.create(OpKind::Exp, {b.create(OpKind::Cast, {x}, {{"to", DType::I32}})});
      },
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

// Outputs that return an input, a parameter's value or a value already returned are copies,
// so that writing into one output changes no input, no parameter and no other output.
TEST(Evaluator, EachOutputHasStorageOfItsOwn) {
  Graph g;
  Value *x = g.addInput({DType::F32, {2}}, "x");
  Builder b(g);
  Value *w = b.param("w", {DType::F32, {2}}, Tensor::fromDoubles(DType::F32, {2}, {3, 4}));
  Value *n = b.create(OpKind::Neg, {x});
  g.setOutputs({x, w, n, n});
  Tensor in = Tensor::fromDoubles(DType::F32, {2}, {-1, 2});
  auto out = evaluate(g, {in});
  ASSERT_EQ(out.size(), 4u);
  EXPECT_TRUE(out[0].identical(in));
  EXPECT_NE(out[0].data(), in.data());
  EXPECT_TRUE(out[1].identical(w->producer()->attrTensor("value")));
  EXPECT_NE(out[1].data(), w->producer()->attrTensor("value").data());
  EXPECT_TRUE(out[2].identical(out[3]));
  EXPECT_NE(out[2].data(), out[3].data());
}

TEST(GraphAlgorithms, OrderAndReachability) {
  AbsExpChain c(2);
  Value *n = c.b.create(OpKind::Neg, {c.x});
  c.g.setOutputs({c.exp, n});
  DependenceGraph deps(c.g);
  Node *a = c.abs->producer(), *e = c.exp->producer();
  EXPECT_TRUE(deps.reaches(a, e));
  EXPECT_FALSE(deps.reaches(e, a));
  EXPECT_FALSE(deps.reaches(n->producer(), e));
  auto reached = deps.reachableFrom({a});
  ASSERT_EQ(reached.size(), 1u);
  EXPECT_EQ(reached[0], e);
  auto order = deps.topologicalOrder();
  ASSERT_EQ(order.size(), 3u);
  EXPECT_LT(std::find(order.begin(), order.end(), a), std::find(order.begin(), order.end(), e));
  EXPECT_FALSE(deps.hasCycle());
  deps.addEdge(e, a);
  EXPECT_TRUE(deps.hasCycle());
  expectError([&] { deps.stableTopologicalOrder(); }, "cycle");
}

TEST(GraphAlgorithms, SortTopologicallyRepairsOrderStably) {
  AbsExpChain c(2);
  Value *n = c.b.create(OpKind::Neg, {c.x});
  c.g.setOutputs({c.exp, n});
  c.g.moveBefore(c.exp->producer(), nullptr);
  c.g.moveBefore(c.abs->producer(), nullptr); // now: neg, exp, abs - invalid
  sortTopologically(c.g);
  verify(c.g);
  auto nodes = c.g.nodes();
  EXPECT_EQ(nodes[0], n->producer()); // independent node keeps its place
  EXPECT_EQ(nodes[1], c.abs->producer());
  EXPECT_EQ(nodes[2], c.exp->producer());
}
