// Training steps over a symbolic batch (TrainingOptions::batchTile, runtime/TrainingStep.h's
// batch tiles): one compile takes batches of any size, and each update is the one a step
// compiled for that static batch makes, within rounding: losses, parameters and optimizer
// states, over a sequence of sizes above, below and at multiples of the tile, for mean, sum,
// mse and class losses (labels ignored too), on compiled code and on the reference backend.
#include <gtest/gtest.h>

#include "tests/ErrorMatchers.h"

#include <cmath>
#include <functional>

#include "codegen/CompileTraining.h"
#include "core/Error.h"
#include "frontend/Frontend.h"
#include "tests/codegen/CodegenTestUtil.h"

namespace kiln::codegen::test {

namespace {

using kiln::test::expectErrorContaining;

/// Linear(6, 8) -> ReLU -> Linear(8, outputs) over `batch` rows (a symbol or a constant),
/// with the same weights for every batch.
std::unique_ptr<ir::Graph> mlp(int64_t batch, int64_t outputs = 3) {
  frontend::nn::manualSeed(11);
  frontend::nn::Sequential model{std::make_shared<frontend::nn::Linear>(6, 8), std::make_shared<frontend::nn::ReLU>(),
                                 std::make_shared<frontend::nn::Linear>(8, outputs)};
  frontend::GraphBuilder gb("mlp");
  frontend::Var x = gb.input("x", DType::F32, {batch, 6});
  return gb.finish({model(x)});
}

Tensor rows(int64_t count, int64_t width, uint64_t seed) {
  return randomTensor({DType::F32, {count, width}}, seed);
}

Tensor classLabels(int64_t count, uint64_t seed, std::optional<int64_t> ignored = std::nullopt) {
  std::vector<double> values;
  for (int64_t i = 0; i < count; ++i)
    values.push_back(ignored && i % 3 == 1 ? static_cast<double>(*ignored) : static_cast<double>((i + seed) % 3));
  return Tensor::fromDoubles(DType::I64, {count}, values);
}

TrainingOptions options(bool reference, int64_t tile) {
  TrainingOptions result;
  result.reference = reference;
  result.batchTile = tile;
  result.compile = testOptions();
  return result;
}

void expectClose(const Tensor &got, const Tensor &want, const std::string &what) {
  ASSERT_EQ(got.type(), want.type()) << what;
  for (int64_t i = 0; i < got.numElements(); ++i)
    EXPECT_NEAR(got.getDouble(i), want.getDouble(i), 1e-6 + 1e-5 * std::abs(want.getDouble(i)))
        << what << " element " << i;
}

/// Conv2d(2, 4, 3, padding 1) -> ReLU -> MaxPool2d(2) -> Flatten -> Linear(64, outputs) over
/// `batch` images of 2 x 8 x 8, flattened to rows of 128 (the model reshapes them back).
std::unique_ptr<ir::Graph> cnn(int64_t batch, int64_t outputs = 3) {
  namespace nn = frontend::nn;
  nn::manualSeed(12);
  nn::Sequential model{std::make_shared<nn::Conv2d>(2, 4, frontend::Ints{3}, frontend::Ints{1}, frontend::Ints{1}), std::make_shared<nn::ReLU>(),
                       std::make_shared<nn::MaxPool2d>(frontend::Ints{2}), std::make_shared<nn::Flatten>(),
                       std::make_shared<nn::Linear>(64, outputs)};
  frontend::GraphBuilder gb("cnn");
  frontend::Var x = gb.input("x", DType::F32, {batch, 128});
  return gb.finish({model(frontend::reshape(x, {batch, 2, 8, 8}))});
}

using ModelFn = std::function<std::unique_ptr<ir::Graph>(int64_t batch, int64_t outputs)>;

/// Trains one symbolic-batch step over batches of `sizes`; before each, a static step at that
/// size on the reference backend starts from the same parameters, states and step count, and
/// after it the two must agree.
void expectStaticUpdates(const LossSpec &loss, const OptimizerSpec &optimizer, bool reference, int64_t tile,
                         const std::vector<int64_t> &sizes, int64_t outputs = 3, const ModelFn &model = mlp) {
  auto symbolic = model(frontend::GraphBuilder::dim("N"), outputs);
  TrainingStep step = compileTrainingStep(*symbolic, loss, optimizer, options(reference, tile));
  uint64_t seed = 1;
  for (int64_t size : sizes) {
    SCOPED_TRACE("batch " + std::to_string(size));
    std::vector<Tensor> inputs{rows(size, symbolic->inputs()[0]->shape()[1], seed++)};
    if (loss.kind == LossKind::Mse)
      inputs.push_back(rows(size, outputs, seed++));
    else if (loss.kind == LossKind::CrossEntropy || loss.kind == LossKind::Nll)
      inputs.push_back(classLabels(size, seed++, loss.ignoreIndex));
    TrainingOptions fixed = options(true, 0);
    for (const auto &[name, tensor] : step.parameters())
      fixed.compile.params[name] = tensor.clone();
    TrainingStep want = compileTrainingStep(*model(size, outputs), loss, optimizer, fixed);
    want.setStepCount(step.stepCount());
    float wantLoss = want.run(inputs);
    float gotLoss = step.run(inputs);
    EXPECT_NEAR(gotLoss, wantLoss, 1e-6 + 1e-5 * std::abs(wantLoss));
    for (const auto &[name, tensor] : want.parameters())
      expectClose(step.parameter(name), tensor, name);
  }
}

const std::vector<int64_t> kSizes{9, 3, 4, 1, 5, 8};

} // namespace

TEST(BatchTiledTraining, CrossEntropyStepsMatchStaticStepsAtEverySize) {
  expectStaticUpdates({LossKind::CrossEntropy, 0, "", "labels"}, OptimizerSpec::sgd(0.1, 0.9, true, 1e-3), false, 4,
                      kSizes);
}

TEST(BatchTiledTraining, MseAdamStepsMatchStaticStepsAtEverySize) {
  expectStaticUpdates({LossKind::Mse}, OptimizerSpec::adam(0.01), false, 4, kSizes, 2);
}

TEST(BatchTiledTraining, MeanAndSumLossesWeighTheirSamples) {
  expectStaticUpdates({LossKind::Mean}, OptimizerSpec::sgd(0.05), false, 3, {7, 2, 3});
  expectStaticUpdates({LossKind::Sum}, OptimizerSpec::sgd(0.01), false, 3, {7, 2, 3});
}

TEST(BatchTiledTraining, IgnoredLabelsCountNeitherInTheLossNorInTheMean) {
  LossSpec loss{LossKind::Nll, 0, "", "labels"};
  loss.ignoreIndex = -100;
  expectStaticUpdates(loss, OptimizerSpec::adamw(0.01), false, 4, {9, 2, 4});
  loss.kind = LossKind::CrossEntropy;
  expectStaticUpdates(loss, OptimizerSpec::sgd(0.1), false, 4, {6, 5});
}

TEST(BatchTiledTraining, ConvolutionPoolingAndReshapesTrainInTiles) {
  expectStaticUpdates({LossKind::CrossEntropy, 0, "", "labels"}, OptimizerSpec::adam(0.01), false, 3, {7, 2, 3}, 3,
                      cnn);
}

TEST(BatchTiledTraining, TheReferenceBackendRunsTilesToo) {
  expectStaticUpdates({LossKind::CrossEntropy, 0, "", "labels"}, OptimizerSpec::sgd(0.1, 0.9), true, 4, {6, 4, 1});
}

TEST(BatchTiledTraining, OneCompileForTilesWithTheBatchSymbolicOutside) {
  auto symbolic = mlp(frontend::GraphBuilder::dim("N"));
  TrainingStep step = compileTrainingStep(*symbolic, {LossKind::CrossEntropy, 0, "", "labels"},
                                          OptimizerSpec::sgd(0.1), options(false, 4));
  ASSERT_TRUE(step.isSplit());
  EXPECT_EQ(step.inputNames(), (std::vector<std::string>{"x", "labels"}));
  EXPECT_EQ(step.inputs()[0].type.toString(), "f32[N,6]");
  EXPECT_EQ(step.inputs()[1].type.toString(), "i64[N]");
  EXPECT_EQ(step.targetInput(), 1);
  // The executable is the tile's: x, labels, lr, step and the sample weights, four rows each.
  EXPECT_EQ(step.executable().inputs()[0].type.toString(), "f32[4,6]");
  EXPECT_EQ(step.manifest().batchTile, 4);
  EXPECT_EQ(step.manifest().batchSymbol, "N");
  // The manifest says so in its text and reads back.
  runtime::TrainingManifest back = runtime::TrainingManifest::parse(step.manifest().toText(), "test");
  EXPECT_EQ(back.batchTile, 4);
  EXPECT_EQ(back.batchInputs, step.manifest().batchInputs);
  EXPECT_EQ(back.weightInput, step.manifest().weightInput);
  // Gradients of a tiled batch are the whole batch's: computeGradients then applyGradients is
  // run(); the listener hears of every gradient once.
  size_t heard = 0;
  TrainingStep::GradientListener listener;
  listener.ready = [&](size_t, Tensor &) { ++heard; };
  step.computeGradients({rows(10, 6, 3), classLabels(10, 3)}, listener);
  EXPECT_EQ(heard, step.trainedParameters().size());
  step.applyGradients();
  EXPECT_EQ(step.stepCount(), 1);
}

TEST(BatchTiledTraining, Errors) {
  auto symbolic = mlp(frontend::GraphBuilder::dim("N"));
  LossSpec loss{LossKind::CrossEntropy, 0, "", "labels"};
  TrainingStep step = compileTrainingStep(*symbolic, loss, OptimizerSpec::sgd(0.1), options(true, 4));
  expectErrorContaining([&] { step.run({rows(5, 6, 1), classLabels(4, 1)}); },
                        "the batch N has two extents: 5 from input 'x' but 4 from input 'labels'");
  expectErrorContaining([&] { step.run({rows(5, 7, 1), classLabels(5, 1)}); }, "input 'x': expected f32[N,6], got f32[5,7]");
  expectErrorContaining([&] { step.run({rows(0, 6, 1), classLabels(0, 1)}); }, "a batch of 0 samples");
  expectErrorContaining([&] { step.run({rows(5, 6, 1)}); }, "expected 2 inputs");
  EXPECT_EQ(step.stepCount(), 0); // nothing ran

  expectErrorContaining([&] { compileTrainingStep(*symbolic, loss, OptimizerSpec::sgd(0.1), options(true, 0)); },
                        "the batch tile must be at least 1 row, got 0");
  expectErrorContaining(
      [&] { compileTrainingStep(*symbolic, {LossKind::Value}, OptimizerSpec::sgd(0.1), options(true, 4)); },
      "a Value loss");
  expectErrorContaining([&] { lowerTrainingStep(*symbolic, loss, OptimizerSpec::sgd(0.1), options(false, 4)); },
                        "has symbolic dims: bind them first");

  // Samples that meet in the forward pass (a mean over the batch) cannot be tiled.
  frontend::GraphBuilder gb("pooled");
  frontend::Var x = gb.input("x", DType::F32, {frontend::GraphBuilder::dim("N"), 6});
  frontend::Var w = gb.param("w", randomTensor({DType::F32, {6, 3}}, 5));
  frontend::Var centred = x - frontend::mean(x, {0}, true);
  auto pooled = gb.finish({frontend::matmul(centred, w)});
  expectErrorContaining([&] { compileTrainingStep(*pooled, {LossKind::Mean}, OptimizerSpec::sgd(0.1), options(true, 4)); },
                        "its samples do not meet");
}

} // namespace kiln::codegen::test
