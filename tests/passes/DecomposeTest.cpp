// decompose: every composite in the table is expanded down to primitives (including composites
// that decompositions create), outputs keep their names, a graph without composites is left
// alone, and every rewritten graph computes what the original did. The recurrences stay whole
// in f32 and are unrolled off f32 and for autodiff.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "ir/Builder.h"
#include "ir/Evaluator.h"
#include "ir/Printer.h"
#include "ir/Verifier.h"
#include "passes/decompose/Decompose.h"
#include "tests/passes/PassTestUtil.h"

namespace kiln {
namespace {

using test::PassRun;

PassRun decompose(std::string_view text) {
  PassRun run = test::runPass(text, *passes::createDecomposePass());
  for (const ir::Node *node : run.after->nodes())
    EXPECT_FALSE(ir::isComposite(node->op())) << node->opName() << " is left";
  test::expectSameNumerics(*run.before, *run.after);
  return run;
}

int countComposites(const ir::Graph &graph) {
  int n = 0;
  for (const ir::Node *node : graph.nodes())
    n += ir::isComposite(node->op());
  return n;
}

TEST(Decompose, ExpandsLinearIntoPrimitivesAndKeepsTheOutputName) {
  PassRun run = decompose(R"(graph @g(%x: f32[4,3]) -> (f32[4,2]) {
    %w = param "w" : f32[2,3]
    %b = param "b" : f32[2]
    %logits = linear(%x, %w, %b) : f32[4,2]
    return %logits
  })");
  EXPECT_TRUE(run.changed);
  EXPECT_EQ(run.stat("composites expanded"), 1);
  EXPECT_EQ(run.after->outputs()[0]->name(), "logits");
  EXPECT_NE(ir::printGraph(*run.after).find("matmul"), std::string::npos);
}

TEST(Decompose, ExpandsCompositesThatDecompositionsCreate) {
  // mse_loss's decomposition builds a composite (a mean): checked first, so this test keeps
  // testing nesting if the decomposition changes.
  TensorType f23{DType::F32, {2, 3}};
  auto inner = ir::decompositionGraph(ir::OpKind::MseLoss, {f23, f23}, {});
  ASSERT_GT(countComposites(*inner), 0) << "mse_loss no longer nests a composite; pick another op";
  PassRun run = decompose(R"(graph @g(%x: f32[2,3], %t: f32[2,3]) -> (f32[]) {
    %loss = mse_loss(%x, %t) : f32[]
    return %loss
  })");
  EXPECT_EQ(run.stat("composites expanded"), 1 + countComposites(*inner));
}

TEST(Decompose, ExpandsEveryKindOfComposite) {
  PassRun run = decompose(R"(graph @g(%x: f32[2,3], %v: f32[3], %img: f32[1,2,5,5]) -> (f32[2,3], f32[2,3], f32[2,3], f32[1,2,5,5], f32[1,2,5,5], f32[], f32[], f32[2,4], f32[4,3], f32[1,50], f32[1,2,3], f32[2], f32[2,1], f32[], f32[3], f32[2,1], f32[2,4], f32[2], f32[1,1]) {
    %gamma = constant tensor<f32[2]>[1.5, 0.5] : f32[2]
    %beta = constant tensor<f32[2]>[0.25, -1.0] : f32[2]
    %mean = constant tensor<f32[2]>[0.1, -0.2] : f32[2]
    %var = constant tensor<f32[2]>[0.5, 2.0] : f32[2]
    %idx = constant tensor<i64[2]>[2, 0] : i64[2]
    %onoff = constant tensor<f32[2]>[0.0, 1.0] : f32[2]
    %w = param "w" : f32[4,3]
    %abs = abs(%x) : f32[2,3]
    %linear = linear(%x, %w) : f32[2,4]
    %layer_norm = layer_norm(%x, %v, %v) : f32[2,3]
    %softmax = softmax(%x) {axis = 0} : f32[2,3]
    %log_softmax = log_softmax(%x) : f32[2,3]
    %gelu = gelu(%x) {approximate = "tanh"} : f32[2,3]
    %silu = silu(%x) : f32[2,3]
    %elu = elu(%silu) {alpha = 0.5} : f32[2,3]
    %selu = selu(%elu) {gamma = 1.5} : f32[2,3]
    %leaky_relu = leaky_relu(%selu) {alpha = 0.2} : f32[2,3]
    %prelu = prelu(%leaky_relu, %v) : f32[2,3]
    %hard_sigmoid = hard_sigmoid(%prelu) {beta = 0.25} : f32[2,3]
    %hard_swish = hard_swish(%hard_sigmoid) : f32[2,3]
    %softplus = softplus(%hard_swish) : f32[2,3]
    %softsign = softsign(%softplus) : f32[2,3]
    %celu = celu(%softsign) {alpha = 2.0} : f32[2,3]
    %thresholded_relu = thresholded_relu(%celu) {alpha = 0.5} : f32[2,3]
    %mish = mish(%thresholded_relu) : f32[2,3]
    %shrink = shrink(%mish) {bias = 0.5, lambd = 1.0} : f32[2,3]
    %hardmax = hardmax(%shrink) {axis = 0} : f32[2,3]
    %trilu = trilu(%gelu) {k = 1, upper = 0} : f32[2,3]
    %batch_norm = batch_norm(%img, %gamma, %beta, %mean, %var) {epsilon = 0.001} : f32[1,2,5,5]
    %instance_norm = instance_norm(%img, %gamma, %beta) {epsilon = 0.001} : f32[1,2,5,5]
    %lrn = lrn(%batch_norm) {size = 3} : f32[1,2,5,5]
    %mse_loss = mse_loss(%x, %softmax) {reduction = "sum"} : f32[]
    %cross_entropy = cross_entropy(%x, %idx) : f32[]
    %nll_loss = nll_loss(%log_softmax, %idx) {reduction = "sum"} : f32[]
    %one_hot = one_hot(%idx, %onoff) {depth = 4} : f32[2,4]
    %tile = tile(%x) {repeats = [2, 1]} : f32[4,3]
    %flatten = flatten(%lrn) {start = 1} : f32[1,50]
    %unsqueeze = unsqueeze(%trilu) {axes = [0]} : f32[1,2,3]
    %left, %right = split(%x) {axis = 1, sizes = [1, 2]} : f32[2,1], f32[2,2]
    %squeeze = squeeze(%left) {axes = [1]} : f32[2]
    %reduce_mean = reduce_mean(%x) {axes = [1], keepdims = 1} : f32[2,1]
    %reduce_l1 = reduce_l1(%x) {axes = [1]} : f32[2]
    %reduce_l2 = reduce_l2(%x) {keepdims = 1} : f32[1,1]
    %reduce_log_sum = reduce_log_sum(%abs) : f32[]
    %reduce_log_sum_exp = reduce_log_sum_exp(%x) {axes = [0]} : f32[3]
    %reduce_sum_square = reduce_sum_square(%x) {axes = [-1], keepdims = 1} : f32[2,1]
    %sum = add(%hardmax, %layer_norm) : f32[2,3]
    %total = add(%mse_loss, %cross_entropy) : f32[]
    return %sum, %softmax, %log_softmax, %instance_norm, %lrn, %total, %nll_loss, %one_hot, %tile, %flatten, %unsqueeze, %squeeze, %reduce_mean, %reduce_log_sum, %reduce_log_sum_exp, %reduce_sum_square, %linear, %reduce_l1, %reduce_l2
  })");
  EXPECT_GE(run.stat("composites expanded"), 37); // the 37 composites written above, plus any they nest
}

TEST(Decompose, AGraphWithoutCompositesIsUnchanged) {
  PassRun run = decompose(R"(graph @g(%x: f32[2,3], %e: f32[0,3], %s: f32[]) -> (f32[2,3], f32[0,3], f32[]) {
    %a = relu(%x) : f32[2,3]
    %b = exp(%e) : f32[0,3]
    %c = neg(%s) : f32[]
    return %a, %b, %c
  })");
  EXPECT_FALSE(run.changed);
  EXPECT_EQ(run.stat("composites expanded"), 0);
  EXPECT_EQ(ir::printGraph(*run.after), ir::printGraph(*run.before));
}

TEST(Decompose, EdgeShapesAndIntegerComposites) {
  PassRun run = decompose(R"(graph @g(%e: f32[0,3], %s: f32[], %one: f32[1,3], %i: i64[2,3]) -> (f32[0,3], f32[], f32[3], i64[4,3]) {
    %a = softmax(%e) : f32[0,3]
    %b = gelu(%s) : f32[]
    %c = squeeze(%one) {axes = [-2]} : f32[3]
    %d = tile(%i) {repeats = [2, 1]} : i64[4,3]
    return %a, %b, %c, %d
  })");
  EXPECT_EQ(run.stat("composites expanded"), 4);
}

int countOp(const ir::Graph &graph, ir::OpKind op) {
  int n = 0;
  for (const ir::Node *node : graph.nodes())
    n += node->op() == op;
  return n;
}

TEST(Decompose, RecurrencesStayWholeInF32AndUnrollOffItOrForAutodiff) {
  auto rnn = [](const char *dtype) {
    return fmt::format(R"(graph @g(%xw: {0}[3,2,4], %r: {0}[1,4,4], %rb: {0}[1,4], %h0: {0}[1,2,4]) -> ({0}[3,2,1,4]) {{
      %y, %h = rnn_sequence(%xw, %r, %rb, %h0) : {0}[3,2,1,4], {0}[1,2,4]
      return %y
    }})", dtype);
  };
  PassRun whole = test::runPass(rnn("f32"), *passes::createDecomposePass());
  EXPECT_FALSE(whole.changed);
  EXPECT_EQ(countOp(*whole.after, ir::OpKind::RnnSequence), 1);
  PassRun unrolled = test::runPass(rnn("f64"), *passes::createDecomposePass());
  EXPECT_EQ(countOp(*unrolled.after, ir::OpKind::RnnSequence), 0);
  EXPECT_EQ(countOp(*unrolled.after, ir::OpKind::MatMul), 3); // one h R^T per step
  test::expectSameNumerics(*unrolled.before, *unrolled.after);
  PassRun forAutodiff = test::runPass(rnn("f32"), *passes::createDecomposeForAutodiffPass());
  EXPECT_EQ(countOp(*forAutodiff.after, ir::OpKind::RnnSequence), 0);
  test::expectSameNumerics(*forAutodiff.before, *forAutodiff.after);
}

TEST(Decompose, IsLinearOnManyComposites) {
  ir::Graph graph;
  ir::Value *x = graph.addInput({DType::F32, {2}}, "x");
  ir::Builder builder(graph);
  ir::Value *chain = x;
  for (int i = 0; i < 2000; ++i)
    chain = builder.create(ir::OpKind::Silu, {chain});
  graph.setOutputs({chain});
  passes::PassContext context;
  EXPECT_TRUE(passes::createDecomposePass()->run(graph, context));
  EXPECT_EQ(context.stats.get("composites expanded"), 2000);
  EXPECT_EQ(countComposites(graph), 0);
  ir::verify(graph);
}

} // namespace
} // namespace kiln
