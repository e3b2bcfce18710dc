// fold-batch-norm: folds where it should - conv, conv + bias add in both frontends' layouts,
// linear, an ONNX Gemm, depthwise conv, chains of layers - with weights checked against values
// worked out by hand, and leaves alone what it must: a contraction result read elsewhere,
// parameters without values, a batch_norm after something else, a variance that makes
// var + eps non-positive. Every case runs the numerics check before and after.
#include <gtest/gtest.h>

#include "frontend/Frontend.h"
#include "ir/GraphEquality.h"
#include "ir/Verifier.h"
#include "passes/simplify/FoldBatchNorm.h"
#include "tests/onnx/OnnxTestModel.h"
#include "tests/passes/PassTestUtil.h"

namespace kiln {
namespace {

using frontend::Ints;
using ir::OpKind;

struct Outcome {
  std::unique_ptr<ir::Graph> before, after;
  passes::PassContext context;
  bool changed = false;

  int64_t folded() const { return context.stats.get("batch norms folded"); }
  int count(OpKind op) const {
    int n = 0;
    for (const ir::Node *node : after->nodes())
      n += node->op() == op;
    return n;
  }
  const ir::Node *find(OpKind op) const {
    for (const ir::Node *node : after->nodes())
      if (node->op() == op)
        return node;
    return nullptr;
  }
};

Outcome foldGraph(std::unique_ptr<ir::Graph> graph) {
  Outcome run;
  run.before = std::move(graph);
  run.after = run.before->clone();
  run.changed = passes::createFoldBatchNormPass()->run(*run.after, run.context);
  EXPECT_NO_THROW(ir::verify(*run.after));
  test::expectSameNumerics(*run.before, *run.after, 11);
  return run;
}

Outcome foldText(std::string_view text) { return foldGraph(test::parseKir(text)); }

Tensor uniform(const TensorType &type) { return frontend::nn::uniformTensor(type, -1, 1); }

std::vector<double> valuesOf(const ir::Value *value) {
  const ir::Node *producer = value->producer();
  EXPECT_TRUE(producer && producer->op() == OpKind::Constant);
  return producer ? producer->attrTensor("value").toDoubles() : std::vector<double>{};
}

// scale [1, 2], shift [0.5, 0], mean [1, -2], var [3, 0] with epsilon 1: var + eps = [4, 1],
// factor = scale / sqrt(var + eps) = [0.5, 2].
constexpr const char *kBatchNormParams = R"(
    %scale = param "bn.weight" {value = tensor<f32[2]>[1.0, 2.0]} : f32[2]
    %shift = param "bn.bias" {value = tensor<f32[2]>[0.5, 0.0]} : f32[2]
    %mean = param "bn.running_mean" {value = tensor<f32[2]>[1.0, -2.0]} : f32[2]
    %var = param "bn.running_var" {value = tensor<f32[2]>[3.0, 0.0]} : f32[2]
)";

std::string graphText(const std::string &signature, const std::string &body) {
  return "graph @g" + signature + " {" + kBatchNormParams + body + "}";
}

TEST(FoldBatchNorm, ConvWithoutBiasFoldsIntoNewWeightsAndABias) {
  Outcome run = foldText(graphText("(%x: f32[1,1,2,2]) -> (f32[1,2,2,2])", R"(
    %w = param "conv.weight" {value = tensor<f32[2,1,1,1]>[2.0, -1.0]} : f32[2,1,1,1]
    %c = conv(%x, %w) : f32[1,2,2,2]
    %y = batch_norm(%c, %scale, %shift, %mean, %var) {epsilon = 1.0} : f32[1,2,2,2]
    return %y
  )"));
  EXPECT_TRUE(run.changed);
  EXPECT_EQ(run.folded(), 1);
  EXPECT_EQ(run.count(OpKind::BatchNorm), 0);
  EXPECT_TRUE(run.after->params().empty()); // every old parameter fed only the folded chain
  const ir::Node *add = run.after->outputs()[0]->producer();
  ASSERT_EQ(add->op(), OpKind::Add);
  const ir::Node *conv = add->input(0)->producer();
  ASSERT_EQ(conv->op(), OpKind::Conv);
  EXPECT_EQ(valuesOf(conv->input(1)), (std::vector<double>{2 * 0.5, -1 * 2.0}));
  // b' = (0 - mean) * factor + shift, shaped [C,1,1] to broadcast over [N,C,H,W].
  EXPECT_EQ(add->input(1)->type().toString(), "f32[2,1,1]");
  EXPECT_EQ(valuesOf(add->input(1)), (std::vector<double>{-1 * 0.5 + 0.5, 2 * 2.0 + 0}));
  EXPECT_EQ(run.after->outputs()[0]->name(), "y");
}

TEST(FoldBatchNorm, ConvBiasAddInTheOnnxImporterLayoutFolds) {
  // The importer's Conv with B: add(conv, reshape(B, [C,1,1])).
  Outcome run = foldText(graphText("(%x: f32[1,1,2,2]) -> (f32[1,2,2,2])", R"(
    %w = param "w" {value = tensor<f32[2,1,1,1]>[2.0, -1.0]} : f32[2,1,1,1]
    %b = param "b" {value = tensor<f32[2]>[0.25, 1.0]} : f32[2]
    %c = conv(%x, %w) : f32[1,2,2,2]
    %b3 = reshape(%b) {shape = [2, 1, 1]} : f32[2,1,1]
    %s = add(%c, %b3) : f32[1,2,2,2]
    %y = batch_norm(%s, %scale, %shift, %mean, %var) {epsilon = 1.0} : f32[1,2,2,2]
    return %y
  )"));
  EXPECT_EQ(run.folded(), 1);
  EXPECT_EQ(run.count(OpKind::Reshape), 0);
  const ir::Node *add = run.after->outputs()[0]->producer();
  ASSERT_EQ(add->op(), OpKind::Add);
  // (b - mean) * factor + shift = [(0.25 - 1) * 0.5 + 0.5, (1 + 2) * 2 + 0]
  EXPECT_EQ(valuesOf(add->input(1)), (std::vector<double>{0.125, 6.0}));
}

TEST(FoldBatchNorm, ConvBiasAddInTheNnLayoutWithTheBiasFirstFolds) {
  // kiln's nn Conv2d reshapes its bias to [1,C,1,1]; the add may also list the bias first.
  Outcome run = foldText(graphText("(%x: f32[2,1,3,3]) -> (f32[2,2,2,2])", R"(
    %w = param "w" {value = tensor<f32[2,1,2,2]>[1.0, 2.0, 3.0, 4.0, -1.0, 0.5, 0.0, 2.0]} : f32[2,1,2,2]
    %b = param "b" {value = tensor<f32[2]>[0.25, 1.0]} : f32[2]
    %c = conv(%x, %w) : f32[2,2,2,2]
    %b4 = reshape(%b) {shape = [1, 2, 1, 1]} : f32[1,2,1,1]
    %s = add(%b4, %c) : f32[2,2,2,2]
    %y = batch_norm(%s, %scale, %shift, %mean, %var) {epsilon = 1.0} : f32[2,2,2,2]
    return %y
  )"));
  EXPECT_EQ(run.folded(), 1);
  const ir::Node *conv = run.find(OpKind::Conv);
  ASSERT_NE(conv, nullptr);
  // Channel 0's slice scales by 0.5, channel 1's by 2.
  EXPECT_EQ(valuesOf(conv->input(1)), (std::vector<double>{0.5, 1.0, 1.5, 2.0, -2.0, 1.0, 0.0, 4.0}));
}

TEST(FoldBatchNorm, DepthwiseConvWithStridesAndPadsFolds) {
  Outcome run = foldText(graphText("(%x: f32[1,2,4,4]) -> (f32[1,2,2,2])", R"(
    %w = param "w" {value = tensor<f32[2,1,3,3]>[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, -1.0, -2.0, -3.0, -4.0, -5.0, -6.0, -7.0, -8.0, -9.0]} : f32[2,1,3,3]
    %c = conv(%x, %w) {groups = 2, pads = [1, 1, 1, 1], strides = [2, 2]} : f32[1,2,2,2]
    %y = batch_norm(%c, %scale, %shift, %mean, %var) {epsilon = 1.0} : f32[1,2,2,2]
    return %y
  )"));
  EXPECT_EQ(run.folded(), 1);
  const ir::Node *conv = run.find(OpKind::Conv);
  ASSERT_NE(conv, nullptr);
  EXPECT_EQ(conv->attrInt("groups"), 2);
  EXPECT_EQ(conv->attrInts("strides"), (std::vector<int64_t>{2, 2}));
}

TEST(FoldBatchNorm, LinearFoldsItsOwnBiasAndKeepsTheLinearOp) {
  Outcome run = foldText(graphText("(%x: f32[3,2]) -> (f32[3,2])", R"(
    %w = param "fc.weight" {value = tensor<f32[2,2]>[1.0, 2.0, 3.0, 4.0]} : f32[2,2]
    %b = param "fc.bias" {value = tensor<f32[2]>[0.25, 1.0]} : f32[2]
    %l = linear(%x, %w, %b) : f32[3,2]
    %y = batch_norm(%l, %scale, %shift, %mean, %var) {epsilon = 1.0} : f32[3,2]
    return %y
  )"));
  EXPECT_EQ(run.folded(), 1);
  const ir::Node *linear = run.after->outputs()[0]->producer();
  ASSERT_EQ(linear->op(), OpKind::Linear);
  EXPECT_EQ(valuesOf(linear->input(1)), (std::vector<double>{0.5, 1.0, 6.0, 8.0})); // rows x [0.5, 2]
  EXPECT_EQ(valuesOf(linear->input(2)), (std::vector<double>{0.125, 6.0}));
}

TEST(FoldBatchNorm, MatMulScalesWeightColumns) {
  Outcome run = foldText(graphText("(%x: f32[3,2]) -> (f32[3,2])", R"(
    %w = constant tensor<f32[2,2]>[1.0, 2.0, 3.0, 4.0] : f32[2,2]
    %m = matmul(%x, %w) : f32[3,2]
    %y = batch_norm(%m, %scale, %shift, %mean, %var) {epsilon = 1.0} : f32[3,2]
    return %y
  )"));
  EXPECT_EQ(run.folded(), 1);
  const ir::Node *matmul = run.find(OpKind::MatMul);
  ASSERT_NE(matmul, nullptr);
  EXPECT_EQ(valuesOf(matmul->input(1)), (std::vector<double>{0.5, 4.0, 1.5, 8.0})); // columns x [0.5, 2]
}

TEST(FoldBatchNorm, ContractionReadElsewhereIsLeftAlone) {
  Outcome run = foldText(graphText("(%x: f32[1,1,2,2]) -> (f32[1,2,2,2], f32[1,2,2,2])", R"(
    %w = param "w" {value = tensor<f32[2,1,1,1]>[2.0, -1.0]} : f32[2,1,1,1]
    %c = conv(%x, %w) : f32[1,2,2,2]
    %y = batch_norm(%c, %scale, %shift, %mean, %var) {epsilon = 1.0} : f32[1,2,2,2]
    %r = relu(%c) : f32[1,2,2,2]
    return %y, %r
  )"));
  EXPECT_FALSE(run.changed);
  EXPECT_EQ(run.context.stats.get("batch norms skipped: producer has other users"), 1);
  EXPECT_EQ(run.count(OpKind::BatchNorm), 1);
}

TEST(FoldBatchNorm, BiasAddReturnedAsAnOutputIsLeftAlone) {
  Outcome run = foldText(graphText("(%x: f32[1,1,2,2]) -> (f32[1,2,2,2], f32[1,2,2,2])", R"(
    %w = param "w" {value = tensor<f32[2,1,1,1]>[2.0, -1.0]} : f32[2,1,1,1]
    %b = constant tensor<f32[2,1,1]>[1.0, 2.0] : f32[2,1,1]
    %c = conv(%x, %w) : f32[1,2,2,2]
    %s = add(%c, %b) : f32[1,2,2,2]
    %y = batch_norm(%s, %scale, %shift, %mean, %var) {epsilon = 1.0} : f32[1,2,2,2]
    return %y, %s
  )"));
  EXPECT_FALSE(run.changed);
  EXPECT_EQ(run.context.stats.get("batch norms skipped: producer has other users"), 1);
}

TEST(FoldBatchNorm, ParametersWithoutValuesAreLeftAlone) {
  auto graph = test::parseKir(R"(graph @g(%x: f32[1,1,2,2]) -> (f32[1,2,2,2]) {
    %w = param "w" : f32[2,1,1,1]
    %scale = param "s" {value = tensor<f32[2]>[1.0, 2.0]} : f32[2]
    %shift = param "t" {value = tensor<f32[2]>[0.5, 0.0]} : f32[2]
    %mean = param "m" : f32[2]
    %var = constant tensor<f32[2]>[1.0, 2.0] : f32[2]
    %c = conv(%x, %w) : f32[1,2,2,2]
    %y = batch_norm(%c, %scale, %shift, %mean, %var) : f32[1,2,2,2]
    return %y
  })");
  auto after = graph->clone();
  passes::PassContext context;
  EXPECT_FALSE(passes::createFoldBatchNormPass()->run(*after, context));
  EXPECT_EQ(context.stats.get("batch norms skipped: values not known"), 1);
  // Unchanged to the last attribute, so it computes what it did. (The shared numerics check
  // cannot bind parameters without values yet: PassTestUtil's addRandomParams tests
  // hasAttr("value"), which the builder's defaults make true for every parameter.)
  EXPECT_EQ(ir::graphDifference(*graph, *after), "");
}

TEST(FoldBatchNorm, NonPositiveVariancePlusEpsilonIsLeftAlone) {
  Outcome run = foldText(R"(graph @g(%x: f32[1,1,2,2]) -> (f32[1,2,2,2]) {
    %w = constant tensor<f32[2,1,1,1]>[2.0, -1.0] : f32[2,1,1,1]
    %v2 = constant tensor<f32[2]>[1.0, -1.0] : f32[2]
    %c = conv(%x, %w) : f32[1,2,2,2]
    %y = batch_norm(%c, %v2, %v2, %v2, %v2) {epsilon = 0.5} : f32[1,2,2,2]
    return %y
  })");
  EXPECT_FALSE(run.changed);
  EXPECT_EQ(run.context.stats.get("batch norms skipped: variance + epsilon not positive"), 1);
}

TEST(FoldBatchNorm, BatchNormAfterOtherOpsOrRankThreeLinearIsNotACandidate) {
  Outcome run = foldText(R"(graph @g(%x: f32[1,2,2,2], %t: f32[2,2,3]) -> (f32[1,2,2,2], f32[2,2,2]) {
    %v = constant tensor<f32[2]>[1.0, 2.0] : f32[2]
    %w = constant tensor<f32[2,3]>[1.0, 2.0, 3.0, 4.0, 5.0, 6.0] : f32[2,3]
    %r = relu(%x) : f32[1,2,2,2]
    %y = batch_norm(%r, %v, %v, %v, %v) : f32[1,2,2,2]
    %l = linear(%t, %w) : f32[2,2,2]
    %z = batch_norm(%l, %v, %v, %v, %v) : f32[2,2,2]
    return %y, %z
  })");
  EXPECT_FALSE(run.changed);
  EXPECT_TRUE(run.context.stats.counters().empty()); // not candidates, so not "skipped" either
}

TEST(FoldBatchNorm, TracedNnConvBatchNormChainFoldsInEvalMode) {
  namespace nn = frontend::nn;
  nn::manualSeed(7);
  auto conv1 = std::make_shared<nn::Conv2d>(3, 4, Ints{3}, Ints{1}, Ints{1});
  auto bn1 = std::make_shared<nn::BatchNorm2d>(4);
  auto conv2 = std::make_shared<nn::Conv2d>(4, 4, Ints{1}, Ints{1}, Ints{0}, Ints{1}, 1, false);
  auto bn2 = std::make_shared<nn::BatchNorm2d>(4);
  nn::Sequential model{conv1, bn1, std::make_shared<nn::ReLU>(), conv2, bn2};
  // Trained-looking statistics, so the fold has something to fold.
  for (const auto &bn : {bn1, bn2})
    bn->loadStateDict({{"weight", nn::uniformTensor({DType::F32, {4}}, 0.5, 1.5)},
                       {"bias", nn::uniformTensor({DType::F32, {4}}, -1, 1)},
                       {"running_mean", nn::uniformTensor({DType::F32, {4}}, -1, 1)},
                       {"running_var", nn::uniformTensor({DType::F32, {4}}, 0.1, 2)}},
                      false);
  model.eval();
  frontend::GraphBuilder gb("cnn");
  frontend::Var y = model(gb.input("x", DType::F32, {2, 3, 5, 5}));
  Outcome run = foldGraph(gb.finish({y}));
  EXPECT_EQ(run.folded(), 2);
  EXPECT_EQ(run.count(OpKind::BatchNorm), 0);
  EXPECT_EQ(run.count(OpKind::Conv), 2);
  EXPECT_TRUE(run.after->params().empty());
}

TEST(FoldBatchNorm, OnnxConvAndGemmFollowedByBatchNormalizationFold) {
  onnxtest::ModelBuilder m(13);
  m.input("x", DType::F32, {2, 2, 3, 3});
  m.initializer("W", uniform({DType::F32, {3, 2, 2, 2}}));
  m.initializer("B", uniform({DType::F32, {3}}));
  for (const char *prefix : {"bn1", "bn2"}) {
    int64_t channels = std::string(prefix) == "bn1" ? 3 : 4;
    m.initializer(std::string(prefix) + ".scale", uniform({DType::F32, {channels}}));
    m.initializer(std::string(prefix) + ".bias", uniform({DType::F32, {channels}}));
    m.initializer(std::string(prefix) + ".mean", uniform({DType::F32, {channels}}));
    m.initializer(std::string(prefix) + ".var", frontend::nn::uniformTensor({DType::F32, {channels}}, 0.5, 2));
  }
  m.initializer("G", uniform({DType::F32, {4, 12}}));
  m.initializer("C", uniform({DType::F32, {4}}));
  m.node("Conv", {"x", "W", "B"}, {"c"});
  onnxtest::setFloat(m.node("BatchNormalization", {"c", "bn1.scale", "bn1.bias", "bn1.mean", "bn1.var"}, {"n"}),
                     "epsilon", 1e-3f);
  m.node("Flatten", {"n"}, {"f"});
  onnxtest::setInt(m.node("Gemm", {"f", "G", "C"}, {"g"}), "transB", 1);
  m.node("BatchNormalization", {"g", "bn2.scale", "bn2.bias", "bn2.mean", "bn2.var"}, {"y"});
  m.output("y", DType::F32, {2, 4});
  Outcome run = foldGraph(onnxtest::import(m));
  EXPECT_EQ(run.folded(), 2);
  EXPECT_EQ(run.count(OpKind::BatchNorm), 0);
  EXPECT_EQ(run.count(OpKind::Permute), 0); // Gemm's transposed B is folded as a constant
}

} // namespace
} // namespace kiln
