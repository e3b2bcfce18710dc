// Kernel groups: outlining nodes into a kernel node and inlining it back, what the verifier
// demands of a kernel and its body, evaluation through the body, deep copies, and the text
// form (printing, parsing, parse errors) and exports of graphs with kernels.
#include <gtest/gtest.h>

#include "core/Error.h"
#include "ir/Builder.h"
#include "ir/Evaluator.h"
#include "ir/Export.h"
#include "ir/GraphEquality.h"
#include "ir/KernelOutline.h"
#include "ir/Parser.h"
#include "ir/Printer.h"
#include "ir/Verifier.h"
#include "tests/ir/OpTestUtil.h"

using namespace kiln;
using namespace kiln::ir;
using namespace kiln::test;

namespace {

const PrintOptions kKeepAll{16, true};

std::vector<Tensor> randomInputs(const Graph &graph, uint64_t seed) {
  std::vector<Tensor> inputs;
  for (const Value *input : graph.inputs())
    inputs.push_back(randomTensor(input->type(), seed++));
  return inputs;
}

/// Evaluates both graphs on the same random inputs; the outputs must be bitwise identical
/// (a kernel runs the very same ops as the nodes it replaced).
void expectSameResults(const Graph &want, const Graph &got, uint64_t seed = 7) {
  std::vector<Tensor> inputs = randomInputs(want, seed);
  std::vector<Tensor> a = evaluate(want, inputs), b = evaluate(got, inputs);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_TRUE(a[i].identical(b[i])) << "output " << i << ": " << tensorSummary(a[i]) << " vs "
                                      << tensorSummary(b[i]);
}

/// Prints, parses and prints again: the parsed graph equals the original (names included) and
/// the two texts are identical. Returns the text.
std::string expectRoundTrip(const Graph &graph) {
  std::string text = printGraph(graph, kKeepAll);
  std::unique_ptr<Graph> parsed;
  try {
    parsed = parseGraph(text, "kernel.kir");
  } catch (const Error &e) {
    ADD_FAILURE() << "printed text does not parse: " << e.what() << "\n" << text;
    return text;
  }
  EXPECT_EQ(graphDifference(graph, *parsed), "") << text;
  EXPECT_EQ(printGraph(*parsed, kKeepAll), text);
  return text;
}

std::string parseError(const std::string &text) {
  return errorFrom([&] { parseGraph(text, "k.kir"); });
}

size_t countOps(const Graph &graph, OpKind op) {
  size_t n = 0;
  for (const Node *node : graph.nodes())
    n += node->op() == op;
  return n;
}

/// A hand-made kernel node (what the verifier must judge): Graph::createNode does not check.
Node *rawKernel(Graph &graph, const std::vector<Value *> &operands, const std::vector<TensorType> &types,
                std::unique_ptr<Graph> body) {
  Node *kernel = graph.createNode(OpKind::Kernel, operands, {{"rule", std::string("test")}}, types);
  kernel->setBody(std::move(body));
  return kernel;
}

/// The body relu(in) on f32[shape].
std::unique_ptr<Graph> reluBody(const Shape &shape) {
  auto body = std::make_unique<Graph>("kernel");
  Value *in = body->addInput(f32(shape), "in");
  Builder b(*body);
  body->setOutputs({b.create(OpKind::Relu, {in})});
  return body;
}

} // namespace

// ---- outlining and inlining -------------------------------------------------------------------

TEST(KernelOutline, ChainRoundTripsThroughInline) {
  Graph g("chain");
  Value *x = g.addInput(f32({2, 3}), "x");
  Builder b(g);
  Value *n = b.create(OpKind::Neg, {x});
  Value *e = b.create(OpKind::Exp, {n});
  Value *s = b.create(OpKind::Add, {e, x});
  Value *r = b.create(OpKind::Relu, {s});
  g.setOutputs({r});
  auto original = g.clone();

  // Given out of list order: the body still follows the list order.
  Node *kernel = outlineKernel(g, {s->producer(), e->producer()}, "elementwise");
  verify(g);
  EXPECT_EQ(kernel->attrString("rule"), "elementwise");
  ASSERT_EQ(kernel->numInputs(), 2u);
  EXPECT_EQ(kernel->input(0), n);
  EXPECT_EQ(kernel->input(1), x);
  ASSERT_EQ(kernel->numOutputs(), 1u);
  EXPECT_EQ(g.nodes(), (std::vector<Node *>{n->producer(), kernel, g.lastNode()}));
  EXPECT_EQ(g.lastNode()->input(0), kernel->output());
  std::vector<Node *> bodyNodes = kernel->body()->nodes();
  ASSERT_EQ(bodyNodes.size(), 2u);
  EXPECT_EQ(bodyNodes[0]->op(), OpKind::Exp);
  EXPECT_EQ(bodyNodes[1]->op(), OpKind::Add);
  EXPECT_EQ(kernel->body()->parentNode(), kernel);
  expectSameResults(*original, g);

  std::vector<Node *> copies = inlineKernel(g, kernel);
  verify(g);
  ASSERT_EQ(copies.size(), 2u);
  EXPECT_EQ(copies[0]->op(), OpKind::Exp);
  EXPECT_EQ(copies[1]->op(), OpKind::Add);
  EXPECT_EQ(graphDifference(*original, g), "");
}

TEST(KernelOutline, OperandsAreDeduplicatedInFirstUseOrder) {
  Graph g("dedupe");
  Value *x = g.addInput(f32({3}), "x");
  Value *y = g.addInput(f32({3}));
  Builder b(g);
  Value *a = b.create(OpKind::Mul, {y, x});
  Value *c = b.create(OpKind::Add, {a, x});
  Value *d = b.create(OpKind::Sub, {c, y});
  g.setOutputs({d});
  Node *kernel = outlineKernel(g, {a->producer(), c->producer(), d->producer()}, "elementwise");
  verify(g);
  EXPECT_EQ(kernel->inputs(), (std::vector<Value *>{y, x}));
  // Body inputs take the operand's name, or "argN" when it has none.
  EXPECT_EQ(kernel->body()->inputs()[0]->name(), "arg0");
  EXPECT_EQ(kernel->body()->inputs()[1]->name(), "x");
  EXPECT_EQ(x->uses().size(), 1u);
  EXPECT_EQ(y->uses().size(), 1u);
}

TEST(KernelOutline, MultiOutputGroupFeedsOutsideUsersAndTheReturn) {
  Graph g("multi");
  Value *x = g.addInput(f32({4}), "x");
  Builder b(g);
  Value *a = b.create(OpKind::Abs, {x});
  a->setName("a");
  Value *e = b.create(OpKind::Exp, {a});
  Value *n = b.create(OpKind::Neg, {a});
  Value *t = b.create(OpKind::Tanh, {e}); // used only inside the group: no result
  Value *s = b.create(OpKind::Add, {t, e});
  g.setOutputs({s, e, n});
  auto original = g.clone();

  Node *kernel = outlineKernel(g, {a->producer(), e->producer(), t->producer(), s->producer()}, "elementwise");
  verify(g);
  // Results in list order of their nodes: a (used by neg), e (returned), s (returned).
  ASSERT_EQ(kernel->numOutputs(), 3u);
  EXPECT_EQ(kernel->output(0)->name(), "a");
  EXPECT_EQ(g.outputs(), (std::vector<Value *>{kernel->output(2), kernel->output(1), g.lastNode()->output()}));
  EXPECT_EQ(g.lastNode()->op(), OpKind::Neg);
  EXPECT_EQ(g.lastNode()->input(0), kernel->output(0));
  EXPECT_EQ(kernel->body()->outputs().size(), 3u);
  expectSameResults(*original, g);

  // The neg sat between the members: it now follows the kernel; inlining puts the group back
  // at the kernel's place, so the order differs but the graph computes the same.
  inlineKernel(g, kernel);
  verify(g);
  EXPECT_EQ(countOps(g, OpKind::Kernel), 0u);
  expectSameResults(*original, g);
  expectRoundTrip(g);
}

TEST(KernelOutline, ValueReturnedByTheGraphBecomesAResult) {
  Graph g("ret");
  Value *x = g.addInput(f32({2}), "x");
  Builder b(g);
  Value *a = b.create(OpKind::Sin, {x});
  g.setOutputs({a, x, a});
  Node *kernel = outlineKernel(g, {a->producer()}, "");
  verify(g);
  EXPECT_EQ(g.outputs(), (std::vector<Value *>{kernel->output(), x, kernel->output()}));
  EXPECT_EQ(printGraph(g), "graph @ret(%x: f32[2]) -> (f32[2], f32[2], f32[2]) {\n"
                           "  %0 = kernel(%x) : f32[2] {\n"
                           "    ^(%x: f32[2]):\n"
                           "    %0 = sin(%x) : f32[2]\n"
                           "    return %0\n"
                           "  }\n"
                           "  return %0, %x, %0\n"
                           "}\n");
}

TEST(KernelOutline, DependentsBetweenMembersMoveAfterTheKernel) {
  Graph g("spread");
  Value *x = g.addInput(f32({5}), "x");
  Builder b(g);
  Value *a = b.create(OpKind::Abs, {x});    // group
  Value *c = b.create(OpKind::Neg, {a});    // outside, depends on the group
  Value *d = b.create(OpKind::Sin, {x});    // outside, independent
  Value *e = b.create(OpKind::Exp, {a});    // group
  Value *s = b.create(OpKind::Add, {e, c}); // outside
  g.setOutputs({s, d});
  auto original = g.clone();
  Node *kernel = outlineKernel(g, {a->producer(), e->producer()}, "elementwise");
  verify(g);
  EXPECT_EQ(g.nodes(), (std::vector<Node *>{d->producer(), kernel, c->producer(), s->producer()}));
  EXPECT_EQ(kernel->numOutputs(), 2u); // abs (used by neg) and exp (used by add)
  expectSameResults(*original, g);
}

TEST(KernelOutline, NonConvexGroupIsRejectedAndTheGraphUnchanged) {
  Graph g("cycle");
  Value *x = g.addInput(f32({3}), "x");
  Builder b(g);
  Value *a = b.create(OpKind::Abs, {x});
  Value *c = b.create(OpKind::Neg, {a});
  c->setName("escape");
  Value *s = b.create(OpKind::Add, {a, c});
  g.setOutputs({s});
  auto original = g.clone();
  std::string message = errorFrom([&] { outlineKernel(g, {a->producer(), s->producer()}, "elementwise"); });
  EXPECT_NE(message.find("not convex"), std::string::npos) << message;
  EXPECT_NE(message.find("node 1 (neg, %escape)"), std::string::npos) << message;
  EXPECT_NE(message.find("node 2 (add, %1)"), std::string::npos) << message;
  EXPECT_EQ(graphDifference(*original, g), "");

  // A longer detour through two outside nodes is found as well.
  Graph h("detour");
  Value *y = h.addInput(f32({3}), "y");
  Builder hb(h);
  Value *p = hb.create(OpKind::Abs, {y});
  Value *q = hb.create(OpKind::Neg, {p});
  Value *r = hb.create(OpKind::Exp, {q});
  Value *t = hb.create(OpKind::Add, {p, r});
  h.setOutputs({t});
  EXPECT_ERROR(outlineKernel(h, {p->producer(), t->producer()}, ""), "node 2 (exp");
}

TEST(KernelOutline, RejectsBadGroups) {
  Graph g("bad");
  Value *x = g.addInput(f32({3}), "x");
  Builder b(g);
  Value *w = b.param("w", f32({3}));
  Value *k = b.constant(Tensor::fromDoubles(DType::F32, {3}, {1, 2, 3}));
  Value *a = b.create(OpKind::Add, {x, w});
  Value *m = b.create(OpKind::Mul, {a, k});
  Value *dead = b.create(OpKind::Neg, {x});
  g.setOutputs({m});
  Graph other("other");
  Value *o = other.addInput(f32({3}), "o");
  Value *foreign = Builder(other).create(OpKind::Neg, {o});

  EXPECT_ERROR(outlineKernel(g, {}, ""), "the group is empty");
  EXPECT_ERROR(outlineKernel(g, {a->producer(), nullptr}, ""), "null node");
  EXPECT_ERROR(outlineKernel(g, {w->producer(), a->producer()}, ""), "node 0 (param, %0) is a source");
  EXPECT_ERROR(outlineKernel(g, {k->producer()}, ""), "is a source");
  EXPECT_ERROR(outlineKernel(g, {a->producer(), a->producer()}, ""), "listed twice");
  EXPECT_ERROR(outlineKernel(g, {foreign->producer()}, ""), "belongs to another graph");
  EXPECT_ERROR(outlineKernel(g, {dead->producer()}, ""), "no value of the group is used outside it");
  Node *kernel = outlineKernel(g, {a->producer(), m->producer()}, "elementwise");
  EXPECT_ERROR(outlineKernel(g, {kernel}, ""), "kernels do not nest");
  verify(g);
}

TEST(KernelOutline, SmallConstantsMoveIntoTheBodyLargeOnesStayOperands) {
  Graph g("consts");
  Value *x = g.addInput(f32({65}), "x");
  Builder b(g);
  Value *two = b.scalar(DType::F32, 2.0);
  std::vector<double> ramp(65);
  for (size_t i = 0; i < ramp.size(); ++i)
    ramp[i] = static_cast<double>(i);
  Value *big = b.constant(Tensor::fromDoubles(DType::F32, {65}, ramp));
  Value *table = b.constant(Tensor::fromDoubles(DType::F32, {64}, std::vector<double>(ramp.begin(), ramp.end() - 1)));
  Value *m = b.create(OpKind::Mul, {x, two});
  Value *s = b.create(OpKind::Add, {m, big});
  Value *head = b.create(OpKind::Slice, {s}, {{"starts", std::vector<int64_t>{0}}, {"ends", std::vector<int64_t>{64}}});
  Value *t = b.create(OpKind::Sub, {head, table});
  g.setOutputs({t});
  auto original = g.clone();
  Node *kernel = outlineKernel(g, {m->producer(), s->producer(), head->producer(), t->producer()}, "elementwise");
  verify(g);
  EXPECT_EQ(kernel->inputs(), (std::vector<Value *>{x, big}));
  EXPECT_EQ(countOps(*kernel->body(), OpKind::Constant), 2u); // the scalar and the 64-element table
  // The outer copies stay (now unused) for dead-code elimination.
  EXPECT_EQ(countOps(g, OpKind::Constant), 3u);
  EXPECT_FALSE(two->hasUses());
  expectSameResults(*original, g);
  expectRoundTrip(g);
}

// ---- builder, evaluator, clone ------------------------------------------------------------

TEST(Kernel, BuilderRefusesToCreateKernels) {
  Graph g;
  Value *x = g.addInput(f32({2}), "x");
  Builder b(g);
  EXPECT_ERROR(b.create(OpKind::Kernel, {x}), "ir::outlineKernel");
  EXPECT_EQ(g.numNodes(), 0u);
}

TEST(Kernel, EvaluationEqualsTheInlinedGraphOnRandomInputs) {
  // A contraction with an epilogue, and a reduction group, as fusion would form them.
  Graph g("mlp");
  Value *x = g.addInput(f32({8, 16}), "x");
  Value *w = g.addInput(f32({16, 4}), "w");
  Value *bias = g.addInput(f32({4}), "b");
  Builder b(g);
  Value *mm = b.create(OpKind::MatMul, {x, w});
  Value *add = b.create(OpKind::Add, {mm, bias});
  Value *act = b.create(OpKind::Relu, {add});
  Value *ex = b.create(OpKind::Exp, {act});
  Value *sum = b.create(OpKind::ReduceSum, {ex}, {{"axes", std::vector<int64_t>{1}}, {"keepdims", int64_t{1}}});
  Value *soft = b.create(OpKind::Div, {ex, sum});
  g.setOutputs({soft, act});
  auto original = g.clone();

  Node *epilogue = outlineKernel(g, {mm->producer(), add->producer(), act->producer()}, "contraction+epilogue");
  Node *reduction = outlineKernel(g, {ex->producer(), sum->producer(), soft->producer()}, "reduction");
  verify(g);
  EXPECT_EQ(g.numNodes(), 2u);
  EXPECT_EQ(reduction->input(0), epilogue->output());
  for (uint64_t seed : {1, 2, 3})
    expectSameResults(*original, g, seed);

  // evaluateNode runs a kernel's body; evaluateOp cannot (an op alone has no body).
  std::vector<Tensor> args = randomInputs(g, 5);
  std::vector<Tensor> direct = evaluateNode(*epilogue, args);
  std::vector<Tensor> reference = evaluate(*epilogue->body(), args);
  ASSERT_EQ(direct.size(), 1u);
  EXPECT_TRUE(direct[0].identical(reference[0]));
  EXPECT_ERROR(evaluateOp(OpKind::Kernel, args, epilogue->attrs(), {f32({8, 4})}), "its body");

  inlineKernel(g, reduction);
  inlineKernel(g, epilogue);
  verify(g);
  EXPECT_EQ(graphDifference(*original, g), "");
}

TEST(Kernel, CloneCopiesBodiesDeeply) {
  Graph g("clone");
  Value *x = g.addInput(f32({3}), "x");
  Builder b(g);
  Value *a = b.create(OpKind::Abs, {x});
  Value *e = b.create(OpKind::Exp, {a});
  g.setOutputs({e});
  Node *kernel = outlineKernel(g, {a->producer(), e->producer()}, "elementwise");

  auto copy = g.clone();
  verify(*copy);
  EXPECT_EQ(graphDifference(g, *copy), "");
  Node *copied = copy->firstNode();
  ASSERT_NE(copied->body(), nullptr);
  EXPECT_NE(copied->body(), kernel->body());
  EXPECT_EQ(copied->body()->parentNode(), copied);
  // Editing the copy's body leaves the original's alone, and the graphs then differ there.
  copied->body()->lastNode()->output()->setName("changed");
  EXPECT_EQ(kernel->body()->lastNode()->output()->name(), "");
  EXPECT_NE(graphDifference(g, *copy).find("node 0 (kernel): body: node 1 (exp) output 0: names differ"),
            std::string::npos)
      << graphDifference(g, *copy);

  // cloneNodes copies bodies too.
  std::unordered_map<const Value *, Value *> mapping;
  g.cloneNodes({kernel}, mapping);
  g.setOutputs({g.lastNode()->output()});
  verify(g);
  EXPECT_NE(g.lastNode()->body(), kernel->body());
  EXPECT_EQ(graphDifference(*kernel->body(), *g.lastNode()->body()), "");

  // Erasing a kernel takes its body with it.
  g.eraseNode(kernel);
  verify(g);
  EXPECT_EQ(g.numNodes(), 1u);
}

// ---- verifier -------------------------------------------------------------------------------

TEST(KernelVerifier, RejectsKernelsThatDoNotMatchTheirBodies) {
  {
    Graph g("nobody");
    Value *x = g.addInput(f32({2}), "x");
    g.setOutputs({rawKernel(g, {x}, {f32({2})}, nullptr)->output()});
    EXPECT_ERROR(verify(g), "graph @nobody: node 0 (kernel): the kernel has no body");
  }
  {
    Graph g("inputs");
    Value *x = g.addInput(f32({2}), "x");
    g.setOutputs({rawKernel(g, {x}, {f32({3})}, reluBody({3}))->output()});
    EXPECT_ERROR(verify(g), "node 0 (kernel): body input 0 has type f32[3], operand 0 has type f32[2]");
  }
  {
    Graph g("count");
    Value *x = g.addInput(f32({2}), "x");
    g.setOutputs({rawKernel(g, {x, x}, {f32({2})}, reluBody({2}))->output()});
    EXPECT_ERROR(verify(g), "node 0 (kernel): the body takes 1 inputs, the kernel has 2 operands");
  }
  {
    Graph g("results");
    Value *x = g.addInput(f32({2}), "x");
    g.setOutputs({rawKernel(g, {x}, {f32({1, 2})}, reluBody({2}))->output()});
    EXPECT_ERROR(verify(g), "node 0 (kernel): output 0 has type f32[1,2], its body returns f32[2]");
  }
  {
    Graph g("brokenbody");
    Value *x = g.addInput(f32({2}), "x");
    auto body = reluBody({2});
    body->firstNode()->output()->setType(f32({5}));
    g.setOutputs({rawKernel(g, {x}, {f32({5})}, std::move(body))->output()});
    EXPECT_ERROR(verify(g), "node 0 (kernel): body: graph @kernel: node 0 (relu): output 0 has type f32[5]");
  }
}

TEST(KernelVerifier, RejectsParamsNestedKernelsAndOuterValuesInBodies) {
  {
    Graph g("param");
    Value *x = g.addInput(f32({2}), "x");
    auto body = std::make_unique<Graph>("kernel");
    Value *in = body->addInput(f32({2}), "in");
    Builder b(*body);
    body->setOutputs({b.create(OpKind::Add, {in, b.param("w", f32({2}))})});
    g.setOutputs({rawKernel(g, {x}, {f32({2})}, std::move(body))->output()});
    EXPECT_ERROR(verify(g), "node 0 (kernel): body node 0 is a param");
  }
  {
    Graph g("nested");
    Value *x = g.addInput(f32({2}), "x");
    auto body = std::make_unique<Graph>("kernel");
    Value *in = body->addInput(f32({2}), "in");
    body->setOutputs({rawKernel(*body, {in}, {f32({2})}, reluBody({2}))->output()});
    g.setOutputs({rawKernel(g, {x}, {f32({2})}, std::move(body))->output()});
    EXPECT_ERROR(verify(g), "node 0 (kernel): body node 0 is a kernel; kernels do not nest");
  }
  // Graph::createNode does not check that operands belong to the graph; the verifier does. A
  // body that uses an outer value shows up in that value's use list; one from an unrelated
  // graph is caught in the body.
  for (bool fromOuterGraph : {true, false}) {
    Graph unrelated("unrelated");
    Graph g("outer");
    Value *x = g.addInput(f32({2}), "x");
    Value *y = (fromOuterGraph ? g : unrelated).addInput(f32({2}), "y");
    auto body = std::make_unique<Graph>("kernel");
    Value *in = body->addInput(f32({2}), "in");
    body->setOutputs({body->createNode(OpKind::Add, {in, y}, {}, {f32({2})})->output()});
    g.setOutputs({rawKernel(g, {x}, {f32({2})}, std::move(body))->output()});
    if (fromOuterGraph)
      EXPECT_ERROR(verify(g), "graph @outer: input 'y' has a dangling use by a add node");
    else
      EXPECT_ERROR(verify(g), "node 0 (kernel): body: graph @kernel: node 0 (add): operand 1 belongs to another "
                              "graph (a kernel body");
  }
}

TEST(KernelVerifier, RejectsBodiesOnOtherOps) {
  Graph g("relu");
  Value *x = g.addInput(f32({2}), "x");
  Builder b(g);
  Value *r = b.create(OpKind::Relu, {x});
  g.setOutputs({r});
  r->producer()->setBody(reluBody({2}));
  EXPECT_ERROR(verify(g), "graph @relu: node 0 (relu): only kernel nodes have a body");
  // The printer shows the body anyway; the parser refuses it.
  EXPECT_ERROR(parseGraph(printGraph(g), "relu.kir"), "relu.kir:2:26: only kernel nodes have a body; relu does not");
}

// ---- text form --------------------------------------------------------------------------------

TEST(KernelText, PrintsTheDocumentedFormAndRoundTrips) {
  Graph g("mm");
  Value *x = g.addInput(f32({8, 16}), "x");
  Value *w = g.addInput(f32({16, 4}), "w");
  Value *bias = g.addInput(f32({4}), "b");
  Builder b(g);
  Value *mm = b.create(OpKind::MatMul, {x, w});
  Value *add = b.create(OpKind::Add, {mm, bias});
  Value *halves = b.create(OpKind::Relu, {add});
  auto parts = b.createMulti(OpKind::Split, {halves}, {{"axis", int64_t{1}}, {"sizes", std::vector<int64_t>{1, 3}}});
  g.setOutputs({parts[0], parts[1], add});
  outlineKernel(g, {mm->producer(), add->producer()}, "contraction+epilogue");
  outlineKernel(g, {halves->producer(), parts[0]->producer()}, "elementwise");
  std::string text = expectRoundTrip(g);
  EXPECT_EQ(text, "graph @mm(%x: f32[8,16], %w: f32[16,4], %b: f32[4]) -> (f32[8,1], f32[8,3], f32[8,4]) {\n"
                  "  %0 = kernel(%x, %w, %b) {rule = \"contraction+epilogue\"} : f32[8,4] {\n"
                  "    ^(%x: f32[8,16], %w: f32[16,4], %b: f32[4]):\n"
                  "    %0 = matmul(%x, %w) : f32[8,4]\n"
                  "    %1 = add(%0, %b) : f32[8,4]\n"
                  "    return %1\n"
                  "  }\n"
                  "  %1, %2 = kernel(%0) {rule = \"elementwise\"} : f32[8,1], f32[8,3] {\n"
                  "    ^(%arg0: f32[8,4]):\n"
                  "    %0 = relu(%arg0) : f32[8,4]\n"
                  "    %1, %2 = split(%0) {axis = 1, sizes = [1, 3]} : f32[8,1], f32[8,3]\n"
                  "    return %1, %2\n"
                  "  }\n"
                  "  return %1, %2, %0\n"
                  "}\n");
}

TEST(KernelText, ParsedKernelsEvaluateLikeTheirBodies) {
  auto g = parseGraph("graph @p(%x: f32[3], %y: f32[3]) -> (f32[3]) {\n"
                      "  %s = kernel(%x, %y) {rule = \"elementwise\"} : f32[3] {\n"
                      "    ^(%x: f32[3], %s: f32[3]):   // body names may repeat outer ones\n"
                      "    %c = constant tensor<f32[]>[2.0] : f32[]\n"
                      "    %m = mul(%x, %c) : f32[3]\n"
                      "    %r = add(%m, %s) : f32[3]\n"
                      "    return %r\n"
                      "  }\n"
                      "  return %s\n"
                      "}\n");
  Tensor x = f32s({3}, {1, -2, 0.5}), y = f32s({3}, {10, 20, 30});
  expectValues(evaluate(*g, {x, y})[0], {12, 16, 31});
  expectRoundTrip(*g);
}

TEST(KernelText, ParseErrorsNameLineAndColumn) {
  const std::string head = "graph @g(%x: f32[2]) -> (f32[2]) {\n";
  EXPECT_EQ(parseError(head + "  %0 = kernel(%x) : f32[2]\n  return %0\n}\n"),
            "k.kir:3:3: expected '{' to open the body of kernel %0, found 'return'");
  EXPECT_EQ(parseError(head + "  %0 = kernel(%x) : f32[2] {\n    ^(%a: f32[3]):\n    return %a\n  }\n  return %0\n}\n"),
            "k.kir:3:11: type mismatch: body input %a is written as f32[3] but operand 0 of kernel %0 has type f32[2]");
  EXPECT_EQ(parseError(head + "  %0 = kernel(%x) : f32[2] {\n    ^(%a: f32[2]):\n"
                              "    %1 = kernel(%a) : f32[2] {\n      ^(%b: f32[2]):\n      return %b\n    }\n"
                              "    return %1\n  }\n  return %0\n}\n"),
            "k.kir:4:10: a kernel cannot hold another kernel (kernel bodies do not nest); this is in the body of "
            "kernel %0 opened at 2:28");
  EXPECT_EQ(parseError(head + "  %0 = kernel(%x) : f32[2] {\n    ^(%a: f32[2]):\n    %1 = neg(%x) : f32[2]\n"
                              "    return %1\n  }\n  return %0\n}\n"),
            "k.kir:4:14: undefined value %x: a kernel body sees only its own inputs (^(...)), and %x is defined "
            "outside it");
  EXPECT_EQ(parseError(head + "  %0 = kernel(%x) : f32[2] {\n    ^(%a: f32[2]):\n    %w = param \"w\" : f32[2]\n"
                              "    return %w\n  }\n  return %0\n}\n"),
            "k.kir:4:10: a kernel body cannot hold a param; parameters stay outside kernel %0, as its operands");
  EXPECT_EQ(parseError(head + "  %0 = kernel(%x, %x) : f32[2] {\n    ^(%a: f32[2]):\n    return %a\n  }\n  return %0\n}\n"),
            "k.kir:3:17: the body of kernel %0 takes 1 input, the kernel has 2 operands");
  EXPECT_EQ(parseError(head + "  %0 = kernel(%x) : f32[2] {\n    ^(%a: f32[2], %b: f32[2]):\n    return %a\n  }\n"
                              "  return %0\n}\n"),
            "k.kir:3:19: the body of kernel %0 takes more inputs than the kernel's 1 operand");
  EXPECT_EQ(parseError(head + "  %0 = kernel(%x) : f32[2] {\n    ^(%a: f32[2]):\n    %1 = sum_of(%a) : f32[2]\n"
                              "    return %a, %a\n  }\n  return %0\n}\n"),
            "k.kir:4:10: unknown op 'sum_of'");
  EXPECT_EQ(parseError(head + "  %0 = kernel(%x) : f32[2] {\n    ^(%a: f32[2]):\n    %1 = reduce_sum(%a) : f32[]\n"
                              "    return %1\n  }\n  return %0\n}\n"),
            "k.kir:5:12: type mismatch: %1 has type f32[], kernel %0 declares f32[2]");
  EXPECT_EQ(parseError(head + "  %0 = kernel(%x) : f32[2] {\n    (%a: f32[2]):\n    return %a\n  }\n  return %0\n}\n"),
            "k.kir:3:5: expected '^' and the body's inputs, like ^(%a: f32[2]), found '('");
  EXPECT_EQ(parseError(head + "  %0 = kernel(%x) {rule = 3} : f32[2] {\n    ^(%a: f32[2]):\n    return %a\n  }\n"
                              "  return %0\n}\n"),
            "k.kir:2:27: expected a string for attribute 'rule', found '3'");
  EXPECT_EQ(parseError(head + "  %0 = kernel(%x) : f32[2] {\n    ^(%a: f32[2]):\n    return %a\n  return %0\n}\n"),
            "k.kir:5:3: expected '}' to close the kernel's body after its return, found 'return'");
}

TEST(KernelText, GraphEqualityComparesBodies) {
  auto text = [](const std::string &op) {
    return "graph @g(%x: f32[2]) -> (f32[2]) {\n  %0 = kernel(%x) : f32[2] {\n    ^(%a: f32[2]):\n    %1 = " + op +
           "(%a) : f32[2]\n    return %1\n  }\n  return %0\n}\n";
  };
  auto a = parseGraph(text("neg")), b = parseGraph(text("neg")), c = parseGraph(text("abs"));
  EXPECT_EQ(graphDifference(*a, *b), "");
  EXPECT_EQ(graphDifference(*a, *c), "node 0 (kernel): body: node 0 (neg): ops differ: neg vs abs");
}

TEST(KernelExport, DotShowsOneVertexWithRuleAndOpsAndJsonHasTheBody) {
  auto g = parseGraph("graph @g(%x: f32[2]) -> (f32[2]) {\n"
                      "  %0 = kernel(%x) {rule = \"elementwise\"} : f32[2] {\n"
                      "    ^(%a: f32[2]):\n"
                      "    %1 = neg(%a) : f32[2]\n    %2 = exp(%1) : f32[2]\n    %3 = abs(%2) : f32[2]\n"
                      "    %4 = sin(%3) : f32[2]\n    %5 = cos(%4) : f32[2]\n"
                      "    return %5\n"
                      "  }\n"
                      "  return %0\n"
                      "}\n");
  std::string dot = toDot(*g);
  EXPECT_NE(dot.find("1[label=\"kernel \\\"elementwise\\\"\\nneg, exp, abs, sin\\ncos\\nf32[2]\", shape=box3d, style=filled, fillcolor=\"#a6cee3\"];"),
            std::string::npos)
      << dot;
  std::string json = toJson(*g);
  // Body values carry the body's own names: the parsed %1..%5 were unnamed and print as %0..%4.
  EXPECT_NE(json.find("\"attrs\": {\"rule\": \"elementwise\"}, \"body\": {\n"
                      "      \"inputs\": [\n"
                      "        {\"name\": \"%a\", \"type\": \"f32[2]\"}\n"
                      "      ],\n"
                      "      \"nodes\": [\n"
                      "        {\"op\": \"neg\", \"inputs\": [\"%a\"], \"outputs\": [\"%0\"], \"types\": [\"f32[2]\"], "
                      "\"attrs\": {}},\n"),
            std::string::npos)
      << json;
  EXPECT_NE(json.find("      \"outputs\": [\"%4\"],\n      \"outputNames\": [\"4\"]\n    }}\n  ],\n"
                      "  \"outputs\": [\"%0\"],\n  \"outputNames\": [\"0\"]\n}\n"),
            std::string::npos)
      << json;
}
