// runtime::TrainingStep without a compiler: a hand-written StepInterpreter (loss = sum(x * p),
// p' = p - lr * step) shows what the step itself does - the learning rate and step count put in
// their inputs' places, the new value written over the parameter's own tensor, the step count
// advanced, inputs by position and by name - and that a manifest which does not describe the
// model is an error naming what does not fit.
#include <gtest/gtest.h>

#include "tests/ErrorMatchers.h"

#include <map>
#include <memory>

#include "runtime/TrainingStep.h"

namespace kiln::runtime {
namespace {

using kiln::test::expectErrorContaining;

/// Inputs x f32[3], lr, step; outputs loss f32[], p' f32[3]; reads parameter "p".
class ToyStep final : public StepInterpreter {
public:
  const std::vector<TensorSpec> &inputs() const override { return inputs_; }
  const std::vector<TensorSpec> &outputs() const override { return outputs_; }
  void runInto(const std::vector<Tensor> &inputs, const std::map<std::string, Tensor> &params,
               std::vector<Tensor> &outputs) const override {
    const Tensor &x = inputs[0], &p = params.at("p");
    double lr = inputs[1].getDouble(0), step = inputs[2].getDouble(0), loss = 0;
    std::vector<double> updated;
    for (int64_t i = 0; i < 3; ++i) {
      loss += x.getDouble(i) * p.getDouble(i);
      updated.push_back(p.getDouble(i) - lr * step);
    }
    outputs[0].setDouble(0, loss);
    for (int64_t i = 0; i < 3; ++i)
      outputs[1].setDouble(i, updated[static_cast<size_t>(i)]);
  }

private:
  std::vector<TensorSpec> inputs_{{"x", {DType::F32, {3}}}, {"lr", {DType::F32, {}}}, {"step", {DType::F32, {}}}};
  std::vector<TensorSpec> outputs_{{"loss", {DType::F32, {}}}, {"p", {DType::F32, {3}}}};
};

TrainingManifest toyManifest() {
  TrainingManifest manifest;
  manifest.loss = "value";
  manifest.optimizer = "sgd";
  manifest.lr = 0.5;
  manifest.lrInput = 1;
  manifest.stepInput = 2;
  manifest.params = {"p"};
  manifest.updates = {{1, false, "p", "p"}};
  return manifest;
}

std::map<std::string, Tensor> toyParams() { return {{"p", Tensor::fromDoubles(DType::F32, {3}, {1, 2, 3})}}; }

TrainingStep toyStep(TrainingManifest manifest = toyManifest(), std::map<std::string, Tensor> params = toyParams()) {
  return TrainingStep(std::make_unique<ToyStep>(), std::move(manifest), std::move(params), "training step @toy");
}

TEST(RuntimeTrainingStep, RunsWithTheLearningRateAndStepCountAndUpdatesInPlace) {
  TrainingStep step = toyStep();
  EXPECT_TRUE(step.isReference());
  EXPECT_EQ(step.inputNames(), std::vector<std::string>{"x"});
  EXPECT_EQ(step.targetInput(), -1);
  EXPECT_EQ(step.trainedParameters(), std::vector<std::string>{"p"});
  EXPECT_EQ(step.learningRate(), 0.5);
  const void *storage = step.parameter("p").data();
  Tensor x = Tensor::fromDoubles(DType::F32, {3}, {1, 1, 1});
  EXPECT_EQ(step.run({x}), 6.0f); // 1 + 2 + 3, before the update
  // p - 0.5 * 1 (step 1)
  EXPECT_EQ(step.parameter("p").getDouble(0), 0.5);
  EXPECT_EQ(step.stepCount(), 1);
  step.setLearningRate(1.0);
  EXPECT_EQ(step.run(std::map<std::string, Tensor>{{"x", x}}), 4.5f); // 0.5 + 1.5 + 2.5
  EXPECT_EQ(step.parameter("p").getDouble(2), 0.5);                  // 2.5 - 1.0 * 2 (step 2)
  EXPECT_EQ(step.parameter("p").data(), storage);
  EXPECT_EQ(step.stepCount(), 2);
}

TEST(RuntimeTrainingStep, BadInputsAreErrors) {
  TrainingStep step = toyStep();
  expectErrorContaining([&] { step.run(std::vector<Tensor>{}); }, "training step @toy: expected 1 inputs (x), got 0");
  expectErrorContaining([&] { step.run(std::map<std::string, Tensor>{{"y", Tensor(DType::F32, {3})}}); },
                        "training step @toy: missing input 'x' (inputs: x)");
  expectErrorContaining(
      [&] {
        step.run(std::map<std::string, Tensor>{{"x", Tensor(DType::F32, {3})}, {"y", Tensor(DType::F32, {3})}});
      },
      "training step @toy: unknown input 'y'");
  expectErrorContaining([&] { step.setStepCount(-1); }, "the step count must be >= 0, got -1");
  expectErrorContaining([&] { step.executable(); }, "training step @toy: the reference backend has no executable");
}

TEST(RuntimeTrainingStep, AManifestThatDoesNotFitTheModelIsAnError) {
  const std::string prefix = "training step @toy: its manifest does not fit the model: ";
  TrainingManifest manifest = toyManifest();
  manifest.stepInput = 1;
  expectErrorContaining([&] { toyStep(manifest); }, prefix + "the learning rate and the step count are one input");
  manifest = toyManifest();
  manifest.lrInput = 0;
  manifest.stepInput = 1;
  expectErrorContaining([&] { toyStep(manifest); }, prefix + "input 'x' is f32[3], not an f32 scalar");
  manifest = toyManifest();
  manifest.updates = {{2, false, "p", "p"}};
  expectErrorContaining([&] { toyStep(manifest); }, prefix + "the update of 'p' is output 2, the model has 2 outputs");
  manifest = toyManifest();
  manifest.params = {"p", "q"};
  expectErrorContaining([&] { toyStep(manifest); }, prefix + "parameter 'q' has no tensor");
  expectErrorContaining([&] { toyStep(toyManifest(), {{"p", Tensor(DType::F32, {2})}}); },
                        prefix + "output 1 is f32[3], but parameter 'p' is f32[2]");
  std::map<std::string, Tensor> extra = toyParams();
  extra["q"] = Tensor(DType::F32, {1});
  expectErrorContaining([&] { toyStep(toyManifest(), extra); }, prefix + "tensor 'q' is not one of its parameters");
}

/// A split toy: the gradient part (x, lr, step) -> (loss = sum(x * p), grad = x), the update
/// part (grad, lr, step) -> p - lr * grad. `gradientOutputs` and `updateInputs` bend the layout.
class ToyPart final : public StepInterpreter {
public:
  ToyPart(bool gradientPart, std::vector<TensorSpec> inputs, std::vector<TensorSpec> outputs)
      : gradientPart_(gradientPart), inputs_(std::move(inputs)), outputs_(std::move(outputs)) {}
  const std::vector<TensorSpec> &inputs() const override { return inputs_; }
  const std::vector<TensorSpec> &outputs() const override { return outputs_; }
  void runInto(const std::vector<Tensor> &inputs, const std::map<std::string, Tensor> &params,
               std::vector<Tensor> &outputs) const override {
    const Tensor &p = params.at("p");
    if (gradientPart_) {
      double loss = 0;
      for (int64_t i = 0; i < 3; ++i) {
        loss += inputs[0].getDouble(i) * p.getDouble(i);
        outputs[1].setDouble(i, inputs[0].getDouble(i));
      }
      outputs[0].setDouble(0, loss);
      return;
    }
    double lr = inputs[1].getDouble(0);
    std::vector<double> updated;
    for (int64_t i = 0; i < 3; ++i)
      updated.push_back(p.getDouble(i) - lr * inputs[0].getDouble(i));
    for (int64_t i = 0; i < 3; ++i)
      outputs[0].setDouble(i, updated[static_cast<size_t>(i)]);
  }

private:
  bool gradientPart_;
  std::vector<TensorSpec> inputs_, outputs_;
};

TrainingStep splitToy(std::vector<TensorSpec> gradientOutputs = {{"loss", {DType::F32, {}}},
                                                                  {"p.grad", {DType::F32, {3}}}},
                      std::vector<TensorSpec> updateInputs = {{"p.grad", {DType::F32, {3}}},
                                                              {"lr", {DType::F32, {}}},
                                                              {"step", {DType::F32, {}}}}) {
  std::vector<TensorSpec> forward{{"x", {DType::F32, {3}}}, {"lr", {DType::F32, {}}}, {"step", {DType::F32, {}}}};
  return TrainingStep(std::make_unique<ToyPart>(true, forward, gradientOutputs),
                      std::make_unique<ToyPart>(false, updateInputs, std::vector<TensorSpec>{{"p", {DType::F32, {3}}}}),
                      toyManifest(), toyParams(), "training step @toy");
}

TEST(RuntimeTrainingStep, ASplitStepShowsItsGradientsBeforeTheUpdate) {
  TrainingStep step = splitToy();
  ASSERT_TRUE(step.isSplit());
  Tensor x = Tensor::fromDoubles(DType::F32, {3}, {1, 2, 4});
  expectErrorContaining([&] { step.gradients(); }, "no gradients yet");
  expectErrorContaining([&] { step.applyGradients(); }, "no gradients to apply");
  EXPECT_EQ(step.computeGradients({x}), 17.0f); // 1 + 4 + 12
  EXPECT_EQ(step.stepCount(), 0);
  std::vector<Tensor> gradients = step.gradients();
  ASSERT_EQ(gradients.size(), 1u);
  EXPECT_EQ(gradients[0].toDoubles(), (std::vector<double>{1, 2, 4}));
  gradients[0].setDouble(2, 0); // what the update reads
  step.applyGradients();
  EXPECT_EQ(step.parameter("p").toDoubles(), (std::vector<double>{0.5, 1, 3})); // p - 0.5 * (1, 2, 0)
  EXPECT_EQ(step.stepCount(), 1);
  expectErrorContaining([&] { step.applyGradients(); }, "no gradients to apply");
  EXPECT_EQ(step.run({x}), 0.5f + 2 + 12); // the two parts in turn
  EXPECT_EQ(step.stepCount(), 2);
  expectErrorContaining([&] { toyStep().computeGradients({x}); }, "compile it split");
}

TEST(RuntimeTrainingStep, ASplitStepWhosePartsDoNotFitItsManifestIsAnError) {
  const std::string prefix = "training step @toy: its manifest does not fit the model: ";
  expectErrorContaining([&] { splitToy({{"loss", {DType::F32, {}}}}); },
                        prefix + "the gradient part has 1 outputs, expected 1 + 1 gradients + 0 buffers");
  expectErrorContaining([&] { splitToy({{"loss", {DType::F32, {}}}, {"p.grad", {DType::F32, {2}}}}); },
                        prefix + "gradient output 'p.grad' is f32[2], its parameter is f32[3]");
  expectErrorContaining([&] { splitToy({{"loss", {DType::F32, {}}}, {"p.grad", {DType::F32, {3}}}},
                                       {{"p.grad", {DType::F32, {3}}}, {"lr", {DType::F32, {}}}}); },
                        prefix + "the update part has 2 inputs, expected 1 gradients, lr and step");
}

TEST(RuntimeTrainingStep, AMovedFromStepIsAnError) {
  TrainingStep step = toyStep();
  TrainingStep moved = std::move(step);
  expectErrorContaining([&] { step.stepCount(); }, "use of a moved-from TrainingStep");
  EXPECT_EQ(moved.stepCount(), 0);
}

} // namespace
} // namespace kiln::runtime
