// compileTrainingStep: an MLP trained on the reference backend and compiled, step for step;
// parameters updated in place (same storage, new values); the launch order that makes the
// in-place update sound, checked on a graph whose update comes before a reader (wrong without
// order-parameter-writes, both by the check and numerically); saving and loading parameters.
#include <gtest/gtest.h>

#include "tests/ErrorMatchers.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>

#include "codegen/CompileTraining.h"
#include "core/Error.h"
#include "frontend/Frontend.h"
#include "ir/Builder.h"
#include "ir/Evaluator.h"
#include "passes/Pipelines.h"
#include "runtime/SafeTensors.h"
#include "tests/codegen/CodegenTestUtil.h"

namespace kiln::codegen::test {

namespace {

using ir::OpKind;
using passes::autodiff::ParamUpdate;

std::unique_ptr<ir::Graph> mlp() { return smallMlp(7); }

Tensor batch(int step) { return randomTensor({DType::F32, {5, 6}}, 100 + static_cast<uint64_t>(step)); }

Tensor labels(int step) {
  std::vector<double> values;
  for (int i = 0; i < 5; ++i)
    values.push_back((i + step) % 3);
  return Tensor::fromDoubles(DType::I64, {5}, values);
}

TrainingOptions trainingOptions(bool reference) {
  TrainingOptions options;
  options.reference = reference;
  options.compile = testOptions();
  return options;
}

void expectTensorsClose(const Tensor &got, const Tensor &want, double rtol, double atol, const std::string &what) {
  ASSERT_EQ(got.type(), want.type()) << what;
  for (int64_t i = 0; i < got.numElements(); ++i)
    EXPECT_NEAR(got.getDouble(i), want.getDouble(i), atol + rtol * std::abs(want.getDouble(i)))
        << what << " element " << i;
}

using kiln::test::expectErrorContaining;

/// Trains the MLP 5 steps with cross-entropy on both backends; losses and parameters must agree.
void expectBackendsAgree(const OptimizerSpec &optimizer, bool fuse = true) {
  auto forward = mlp();
  LossSpec loss{LossKind::CrossEntropy, 0, "", "labels"};
  TrainingStep reference = compileTrainingStep(*forward, loss, optimizer, trainingOptions(true));
  TrainingOptions options = trainingOptions(false);
  options.compile.fuse = fuse;
  TrainingStep compiled = compileTrainingStep(*forward, loss, optimizer, options);
  EXPECT_TRUE(reference.isReference());
  EXPECT_FALSE(compiled.isReference());
  EXPECT_EQ(compiled.inputNames(), (std::vector<std::string>{"x", "labels"}));
  float first = 0.0f, last = 0.0f;
  for (int step = 0; step < 5; ++step) {
    float want = reference.run({batch(step % 2), labels(step % 2)});
    float got = compiled.run({{"x", batch(step % 2)}, {"labels", labels(step % 2)}});
    EXPECT_NEAR(got, want, 1e-5 * std::abs(want)) << "step " << step;
    if (step == 0)
      first = want;
    last = want;
  }
  EXPECT_LT(last, first); // it learns
  EXPECT_EQ(compiled.stepCount(), 5);
  for (const auto &[name, tensor] : reference.parameters())
    expectTensorsClose(compiled.parameter(name), tensor, 1e-5, 1e-6, name);
}

} // namespace

TEST(TrainingStep, MlpSgdMomentumMatchesTheReferenceBackend) {
  expectBackendsAgree(OptimizerSpec::sgd(0.1, 0.9, true, 1e-3));
}

TEST(TrainingStep, MlpAdamWMatchesTheReferenceBackend) { expectBackendsAgree(OptimizerSpec::adamw(0.01)); }

TEST(TrainingStep, MlpAdamWithoutFusionMatchesTheReferenceBackend) {
  // Every primitive its own launch: the update's last op writes the parameter it reads.
  expectBackendsAgree(OptimizerSpec::adam(0.01, 0.9, 0.99, 1e-8, 1e-2), false);
}

TEST(TrainingStep, ParametersAreUpdatedInPlace) {
  auto forward = mlp();
  TrainingStep step = compileTrainingStep(*forward, {LossKind::Mean}, OptimizerSpec::sgd(0.05, 0.9),
                                          trainingOptions(false));
  std::map<std::string, const void *> storage;
  std::map<std::string, Tensor> before;
  for (const auto &[name, tensor] : step.parameters()) {
    storage[name] = tensor.data();
    before[name] = tensor.clone();
  }
  ASSERT_EQ(storage.size(), 8u); // 4 params, 4 momentum buffers
  step.run({batch(0)});
  step.run({batch(1)});
  for (const auto &[name, tensor] : step.parameters()) {
    EXPECT_EQ(tensor.data(), storage[name]) << name << " moved";
    EXPECT_FALSE(tensor.identical(before[name])) << name << " did not change";
  }
  // The executable reads its weights from the same storage.
  EXPECT_EQ(step.executable().outputs().size(), 9u);
}

TEST(TrainingStep, LearningRateChangesWithoutARecompile) {
  auto forward = mlp();
  TrainingStep step = compileTrainingStep(*forward, LossKind::Mean, OptimizerSpec::sgd(0.1), trainingOptions(false));
  Tensor before = step.parameter("2.weight").clone();
  step.setLearningRate(0.0);
  step.run({batch(0)});
  EXPECT_TRUE(step.parameter("2.weight").identical(before)) << "lr 0 must leave the weights alone";
  step.setLearningRate(0.1);
  step.run({batch(0)});
  EXPECT_FALSE(step.parameter("2.weight").identical(before));
}

TEST(TrainingStep, OneSgdStepOfALinearModelMatchesTheClosedForm) {
  // loss = mean(x · w); d loss / d w[k, j] = sum_n x[n, k] / (N * O).
  auto graph = std::make_unique<ir::Graph>("linear");
  ir::Builder b(*graph);
  ir::Value *x = graph->addInput({DType::F32, {4, 3}}, "x");
  Tensor w0 = randomTensor({DType::F32, {3, 2}}, 5);
  graph->setOutputs({b.create(OpKind::MatMul, {x, b.param("w", w0.type(), w0)})});
  TrainingStep step = compileTrainingStep(*graph, {LossKind::Mean}, OptimizerSpec::sgd(0.5), trainingOptions(false));
  Tensor xs = randomTensor({DType::F32, {4, 3}}, 6);
  step.run({xs});
  for (int64_t k = 0; k < 3; ++k) {
    double column = 0.0;
    for (int64_t n = 0; n < 4; ++n)
      column += xs.getDouble(n * 3 + k);
    for (int64_t j = 0; j < 2; ++j)
      EXPECT_NEAR(step.parameter("w").getDouble(k * 2 + j), w0.getDouble(k * 2 + j) - 0.5 * column / 8, 1e-6);
  }
}

namespace {

/// The training pipeline without `pass`, to show what goes wrong without it.
CompileOptions trainingPipelineWithout(std::string_view pass) {
  CompileOptions options = testOptions();
  for (std::string_view name : passes::findPipeline("training").passes)
    if (name != pass)
      options.passes.emplace_back(name);
  return options;
}

/// Compiles `lowered` and runs it once, with each update's output bound to its parameter's
/// tensor in `params` (which the executable also reads as its weights): in place.
std::vector<Tensor> runInPlace(const LoweredModel &lowered, const ir::ParamValues &params,
                               const std::vector<ParamUpdate> &updates, const std::vector<Tensor> &inputs) {
  CompiledObject object = compileSource(lowered.model.source, testOptions().compiler);
  runtime::Executable executable = runtime::Executable::load(object.soPath, collectWeights(lowered, params));
  std::vector<Tensor> outputs;
  for (const runtime::TensorSpec &spec : executable.outputs())
    outputs.emplace_back(spec.type);
  for (const ParamUpdate &update : updates)
    outputs.at(update.output) = params.at(update.name);
  executable.runInto(inputs, outputs);
  return outputs;
}

} // namespace

TEST(TrainingStep, UpdatesAreNotFusedIntoTheirGradientsContraction) {
  // Fusion makes w - lr * (x^T · dy) one kernel, the update an epilogue of the gradient's
  // matmul, whose tile codegen writes into the first result buffer: w's own storage, before the
  // epilogue reads w. isolate-parameter-writes splits it; without the split the check refuses.
  auto graph = std::make_unique<ir::Graph>("linear");
  ir::Builder b(*graph);
  ir::Value *x = graph->addInput({DType::F32, {4, 3}}, "x");
  Tensor w0 = randomTensor({DType::F32, {3, 2}}, 5);
  graph->setOutputs({b.create(OpKind::MatMul, {x, b.param("w", w0.type(), w0)})});
  auto training = passes::autodiff::buildTrainingGraph(*graph, {LossKind::Mean}, OptimizerSpec::sgd(0.5));
  LoweredModel fused =
      lowerTrainingGraph(*training.graph, training.updates, trainingPipelineWithout("isolate-parameter-writes"));
  expectErrorContaining([&] { checkInPlaceUpdates(fused, training.updates); },
                        "writes parameter 'w' in place but computes in stages");
  LoweredModel split = lowerTrainingGraph(*training.graph, training.updates, testOptions());
  checkInPlaceUpdates(split, training.updates);
  EXPECT_EQ(split.model.launches.size(), fused.model.launches.size() + 1);

  // Numerically: the fused kernel computes w' from the gradient it parked in w's storage.
  std::vector<Tensor> inputs{randomTensor({DType::F32, {4, 3}}, 6), Tensor::scalar(DType::F32, 0.5),
                             Tensor::scalar(DType::F32, 1)};
  std::vector<Tensor> want = ir::evaluate(*training.graph, inputs);
  Tensor wSplit = w0.clone(), wFused = w0.clone();
  runInPlace(split, {{"w", wSplit}}, training.updates, inputs);
  expectTensorsClose(wSplit, want[1], 1e-5, 1e-6, "w', split");
  runInPlace(fused, {{"w", wFused}}, training.updates, inputs);
  EXPECT_FALSE(compareTensors(wFused, want[1], 1e-3, 1e-3).ok) << "the fused kernel read its own tile as w";
}

TEST(TrainingStep, ConvolutionsAreExactSumsNeverWinograd) {
  // A 3x3 64-channel layer on 56x56 pixels, which an inference compile runs by Winograd with
  // its weights transformed at load: a training step marks it exact (kiln_conv2d_args::exact).
  // Winograd's rounding, amplified by BatchNorm and ReLU's kinks, had ResNet-18's layer4
  // gradients 6% off the reference backend's at 4x3x64x64.
  frontend::GraphBuilder gb("conv");
  frontend::Var x = gb.input("x", DType::F32, {1, 64, 56, 56});
  frontend::Var w = gb.param("w", randomTensor({DType::F32, {64, 64, 3, 3}}, 12));
  auto forward = gb.finish({frontend::conv2d(x, w, frontend::Var(), {1}, {1})});
  const std::string inference = lowerGraph(*forward, testOptions()).model.source;
  EXPECT_NE(inference.find("g.weights_layout = KILN_CONV_WEIGHTS_WINOGRAD_F4"), std::string::npos) << "the inference compile's choice";
  EXPECT_EQ(inference.find("g.exact = 1;"), std::string::npos);
  const std::string training =
      lowerTrainingStep(*forward, {LossKind::Mean}, OptimizerSpec::sgd(0.1), trainingOptions(false))
          .lowered.model.source;
  EXPECT_NE(training.find("g.exact = 1;"), std::string::npos);
  EXPECT_EQ(training.find("g.weights_layout = KILN_CONV_WEIGHTS_WINOGRAD"), std::string::npos);
}

namespace {

/// p' = sgd_update(p, g, lr) is built BEFORE y = reduce_sum(x · p), which reads the old p:
/// outputs [y, p']. Updating p in place is right only if the update launches last.
std::unique_ptr<ir::Graph> updateBeforeReader() {
  auto graph = std::make_unique<ir::Graph>("order");
  ir::Builder b(*graph);
  ir::Value *x = graph->addInput({DType::F32, {4, 4}}, "x");
  ir::Value *g = graph->addInput({DType::F32, {4, 4}}, "g");
  ir::Value *lr = graph->addInput({DType::F32, {}}, "lr");
  ir::Value *p = b.param("p", {DType::F32, {4, 4}}, randomTensor({DType::F32, {4, 4}}, 11));
  ir::Value *updated = b.create(OpKind::SgdUpdate, {p, g, lr});
  ir::Value *y = b.create(OpKind::ReduceSum, {b.create(OpKind::MatMul, {x, p})},
                          {{"axes", std::vector<int64_t>{}}, {"keepdims", int64_t(0)}});
  graph->setOutputs({y, updated});
  return graph;
}

} // namespace

TEST(TrainingStep, UpdatesLaunchAfterEveryReaderOfTheirParameter) {
  auto graph = updateBeforeReader();
  std::vector<ParamUpdate> updates{{"p", 1, false, "p"}};
  LoweredModel unordered = lowerTrainingGraph(*graph, updates, trainingPipelineWithout("order-parameter-writes"));
  expectErrorContaining([&] { checkInPlaceUpdates(unordered, updates); }, "reads parameter 'p' after launch");
  LoweredModel ordered = lowerTrainingGraph(*graph, updates, testOptions());
  checkInPlaceUpdates(ordered, updates);

  // Numerically: with the update first, y reads the new p.
  std::vector<Tensor> inputs{randomTensor({DType::F32, {4, 4}}, 12), randomTensor({DType::F32, {4, 4}}, 13),
                             Tensor::scalar(DType::F32, 0.5)};
  Tensor p0 = graph->params()[0]->attrTensor("value");
  std::vector<Tensor> want = ir::evaluate(*graph, inputs);
  Tensor pOrdered = p0.clone();
  expectTensorsClose(runInPlace(ordered, {{"p", pOrdered}}, updates, inputs)[0], want[0], 1e-5, 1e-5, "y, ordered");
  expectTensorsClose(pOrdered, want[1], 1e-6, 1e-6, "p', ordered");
  Tensor wrong = runInPlace(unordered, {{"p", p0.clone()}}, updates, inputs)[0];
  EXPECT_GT(std::abs(wrong.getDouble(0) - want[0].getDouble(0)), 1e-3) << "the unordered launch list read the new p";
}

// LayerNorm's weight is read broadcast by its input gradient (dy * weight) and written by its
// update; fusion puts both in one group. The update kernel may read the weight only at the
// element it writes, so the broadcast read must land in a kernel of its own, launched before.
TEST(TrainingStep, LayerNormWeightReadBroadcastAndUpdatedInPlace) {
  frontend::GraphBuilder gb("norm");
  frontend::Var x = gb.input("x", DType::F32, {4, 6, 8});
  frontend::Var w = gb.param("norm.weight", randomTensor({DType::F32, {8}}, 41));
  frontend::Var b = gb.param("norm.bias", randomTensor({DType::F32, {8}}, 42));
  frontend::Var proj = gb.param("proj.weight", randomTensor({DType::F32, {8, 8}}, 43));
  auto forward = gb.finish({frontend::matmul(frontend::layerNorm(x, -1, w, b), proj) * x});
  LossSpec loss{LossKind::Mean};
  OptimizerSpec sgd = OptimizerSpec::sgd(0.1);
  TrainingStep reference = compileTrainingStep(*forward, loss, sgd, trainingOptions(true));
  TrainingStep compiled = compileTrainingStep(*forward, loss, sgd, trainingOptions(false));
  for (int step = 0; step < 3; ++step) {
    Tensor input = randomTensor({DType::F32, {4, 6, 8}}, 50 + static_cast<uint64_t>(step));
    float want = reference.run({input});
    float got = compiled.run({input});
    EXPECT_NEAR(got, want, 1e-5 * std::abs(want) + 1e-6) << "step " << step;
  }
  for (const char *name : {"norm.weight", "norm.bias", "proj.weight"})
    expectTensorsClose(compiled.parameter(name), reference.parameter(name), 1e-5, 1e-6, name);
}

TEST(TrainingStep, SaveAndLoadParameters) {
  auto forward = mlp();
  std::string dir = (std::filesystem::temp_directory_path() / "kiln-training-step-test").string();
  std::filesystem::remove_all(dir);
  TrainingStep step = compileTrainingStep(*forward, {LossKind::Mean}, OptimizerSpec::adam(0.01), trainingOptions(true));
  step.run({batch(0)});
  step.run({batch(1)});
  std::map<std::string, Tensor> saved;
  for (const auto &[name, tensor] : step.parameters())
    saved[name] = tensor.clone();
  for (const std::string &path : {dir + "/npy", dir + "/params.safetensors"}) {
    std::filesystem::create_directories(dir);
    step.saveParameters(path);
    TrainingStep fresh = compileTrainingStep(*forward, {LossKind::Mean}, OptimizerSpec::adam(0.01), trainingOptions(true));
    const void *storage = fresh.parameter("0.weight").data();
    fresh.loadParameters(path);
    EXPECT_EQ(fresh.parameter("0.weight").data(), storage) << "loading copies into the existing tensors";
    EXPECT_EQ(fresh.stepCount(), 2);
    for (const auto &[name, tensor] : saved)
      EXPECT_TRUE(fresh.parameter(name).identical(tensor)) << path << ": " << name;
    // The resumed run continues exactly as the original.
    EXPECT_EQ(fresh.run({batch(2)}), step.run({batch(2)})) << path;
    step.setStepCount(2);
    for (const auto &[name, tensor] : saved)
      std::memcpy(const_cast<void *>(step.parameter(name).data()), tensor.data(), tensor.byteSize());
  }
  EXPECT_TRUE(std::filesystem::exists(dir + "/npy/0.weight.exp_avg_sq.npy"));
  // A file with a tensor the step does not have, or of another type, changes nothing.
  runtime::writeSafeTensors(dir + "/bad.safetensors", {{"0.weight", Tensor(DType::F32, {2})}});
  expectErrorContaining([&] { step.loadParameters(dir + "/bad.safetensors"); }, "holds '0.weight' as f32[2]");
  runtime::writeSafeTensors(dir + "/unknown.safetensors", {{"nope", Tensor(DType::F32, {2})}});
  expectErrorContaining([&] { step.loadParameters(dir + "/unknown.safetensors"); }, "'nope', which is not a parameter");
  expectErrorContaining([&] { step.loadParameters(dir + "/missing"); }, "neither a .safetensors file nor a directory");
  std::filesystem::remove_all(dir);
}

TEST(TrainingStep, BufferWritesUpdateRunningStatisticsInPlace) {
  // y = x · w; running' = 0.9 running + 0.1 mean over the batch of x (BatchNorm's update of its
  // running mean): a forward output written back into the untrained parameter "running".
  auto graph = std::make_unique<ir::Graph>("stats");
  ir::Builder b(*graph);
  ir::Value *x = graph->addInput({DType::F32, {4, 3}}, "x");
  Tensor w0 = randomTensor({DType::F32, {3, 2}}, 21);
  ir::Value *w = b.param("w", w0.type(), w0);
  ir::Value *running = b.param("running", {DType::F32, {3}}, Tensor::fromDoubles(DType::F32, {3}, {1, 2, 3}));
  ir::Value *mean = b.create(OpKind::ReduceMean, {x}, {{"axes", std::vector<int64_t>{0}}, {"keepdims", int64_t(0)}});
  ir::Value *updated = b.create(OpKind::Add, {b.create(OpKind::Mul, {running, b.scalar(DType::F32, 0.9)}),
                                              b.create(OpKind::Mul, {mean, b.scalar(DType::F32, 0.1)})});
  updated->setName("new_running");
  graph->setOutputs({b.create(OpKind::MatMul, {x, w}), updated});
  for (bool reference : {true, false}) {
    TrainingOptions options = trainingOptions(reference);
    options.buffers = {{"new_running", "running"}};
    TrainingStep step = compileTrainingStep(*graph, LossKind::Mean, OptimizerSpec::sgd(0.1), options);
    ASSERT_EQ(step.manifest().updates.size(), 2u);
    EXPECT_EQ(step.manifest().updates[1].name, "running");
    const void *storage = step.parameter("running").data();
    std::vector<double> want{1, 2, 3};
    for (int s = 0; s < 2; ++s) {
      Tensor xs = randomTensor({DType::F32, {4, 3}}, 30 + static_cast<uint64_t>(s));
      step.run({xs});
      for (int64_t k = 0; k < 3; ++k) {
        double column = 0.0;
        for (int64_t n = 0; n < 4; ++n)
          column += xs.getDouble(n * 3 + k);
        want[static_cast<size_t>(k)] = 0.9 * want[static_cast<size_t>(k)] + 0.1 * column / 4;
      }
    }
    EXPECT_EQ(step.parameter("running").data(), storage);
    for (int64_t k = 0; k < 3; ++k)
      EXPECT_NEAR(step.parameter("running").getDouble(k), want[static_cast<size_t>(k)], 1e-6)
          << (reference ? "reference " : "compiled ") << k;
  }
  TrainingOptions bad = trainingOptions(true);
  bad.buffers = {{"nope", "running"}};
  expectErrorContaining([&] { compileTrainingStep(*graph, LossKind::Mean, OptimizerSpec::sgd(0.1), bad); },
                        "has no output named 'nope'");
  bad.buffers = {{"new_running", "w"}};
  expectErrorContaining([&] { compileTrainingStep(*graph, LossKind::Mean, OptimizerSpec::sgd(0.1), bad); },
                        "has type f32[3], but the parameter 'w' it writes has type f32[3,2]");
}

TEST(TrainingStep, MemoryPlanOfAnMlpTrainingStep) {
  // Linear(784, 256) -> ReLU -> Linear(256, 10), batch 64, cross-entropy: the training graph's
  // arena against the plan's lower bound (the most bytes live at one step).
  frontend::nn::manualSeed(1);
  frontend::nn::Sequential model{std::make_shared<frontend::nn::Linear>(784, 256),
                                 std::make_shared<frontend::nn::ReLU>(),
                                 std::make_shared<frontend::nn::Linear>(256, 10)};
  frontend::GraphBuilder gb("mlp");
  frontend::Var x = gb.input("x", DType::F32, {64, 784});
  auto forward = gb.finish({model(x)});
  for (const OptimizerSpec &optimizer : {OptimizerSpec::sgd(0.1, 0.9), OptimizerSpec::adamw(1e-3)}) {
    auto training = passes::autodiff::buildTrainingGraph(*forward, {LossKind::CrossEntropy}, optimizer);
    LoweredModel lowered = lowerTrainingGraph(*training.graph, training.updates, testOptions());
    checkInPlaceUpdates(lowered, training.updates);
    const passes::MemoryPlan &plan = lowered.plan;
    std::printf("mlp 784-256-10 b64 %s: %zu launches, arena %lld bytes, lower bound %lld (%.3fx), naive %lld\n",
                optimizer.kind == OptimizerKind::Sgd ? "sgd+momentum" : "adamw", lowered.model.launches.size(),
                static_cast<long long>(plan.arenaBytes), static_cast<long long>(plan.lowerBoundBytes),
                double(plan.arenaBytes) / double(plan.lowerBoundBytes), static_cast<long long>(plan.naiveBytes));
    EXPECT_GE(plan.arenaBytes, plan.lowerBoundBytes);
    EXPECT_LE(plan.arenaBytes, plan.lowerBoundBytes * 11 / 10);
  }
}

TEST(TrainingStep, Errors) {
  auto forward = mlp();
  TrainingStep step = compileTrainingStep(*forward, {LossKind::Mean}, OptimizerSpec::sgd(0.1), trainingOptions(true));
  expectErrorContaining([&] { step.run(std::vector<Tensor>{}); }, "expected 1 inputs (x), got 0");
  expectErrorContaining([&] { step.run(std::map<std::string, Tensor>{{"y", batch(0)}}); }, "missing input 'x'");
  expectErrorContaining([&] { step.parameter("nope"); }, "no parameter 'nope'");
  expectErrorContaining([&] { step.executable(); }, "reference backend has no executable");
  expectErrorContaining([&] { step.setLearningRate(-1.0); }, "learning rate must be >= 0");
  step.setLearningRate(0.5);
  EXPECT_EQ(step.learningRate(), 0.5);
  TrainingStep moved = std::move(step);
  expectErrorContaining([&] { step.run({batch(0)}); }, "moved-from TrainingStep");
  EXPECT_EQ(moved.learningRate(), 0.5);
  TrainingOptions bad = trainingOptions(true);
  bad.compile.params["0.weight"] = Tensor(DType::F32, {1});
  expectErrorContaining([&] { compileTrainingStep(*forward, {LossKind::Mean}, OptimizerSpec::sgd(0.1), bad); },
                        "the value of parameter '0.weight' has type f32[1]");
}

} // namespace kiln::codegen::test
