// runtime::Trainer over compiled steps: split steps agree with whole ones; K accumulated
// micro-batches give the update of one batch of K times their size; a short last batch padded
// with ignored labels gives the update of the short batch alone (or is dropped); a run stopped
// after a checkpoint and resumed from it ends bit for bit where an uninterrupted run ends; the
// learning-rate schedule reaches the step; validation loss and accuracy; frozen parameters keep
// their bits and their backward is pruned; errors name what is wrong.
#include <gtest/gtest.h>

#include "tests/ErrorMatchers.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "codegen/CompileTraining.h"
#include "frontend/Frontend.h"
#include "runtime/Npy.h"
#include "runtime/Trainer.h"
#include "tests/TempDir.h"
#include "tests/codegen/CodegenTestUtil.h"

namespace kiln::codegen::test {

namespace {

using kiln::test::expectErrorContaining;
using runtime::Dataset;
using runtime::Trainer;
using runtime::TrainerOptions;

/// An MLP in -> hidden -> hidden2 -> classes with ReLUs and no BatchNorm, at batch `batch`,
/// with PyTorch's initialisation from `seed`: by default the seed MLP's shape scaled down
/// (inputs 32, hidden 16 and 12, 5 classes).
std::unique_ptr<ir::Graph> mlp(int64_t batch, uint64_t seed = 3, std::vector<int64_t> sizes = {32, 16, 12, 5}) {
  namespace nn = frontend::nn;
  nn::manualSeed(seed);
  nn::Sequential model{std::make_shared<nn::Linear>(sizes[0], sizes[1]), std::make_shared<nn::ReLU>(),
                       std::make_shared<nn::Linear>(sizes[1], sizes[2]), std::make_shared<nn::ReLU>(),
                       std::make_shared<nn::Linear>(sizes[2], sizes[3])};
  frontend::GraphBuilder builder("mlp");
  frontend::Var x = builder.input("x", DType::F32, {batch, sizes[0]});
  return builder.finish({model(x)});
}

/// The seed MLP (examples/train_classifier): 1024-512-256-10.
const std::vector<int64_t> kSeedMlp = {1024, 512, 256, 10};

LossSpec crossEntropy(bool ignorePadding = true) {
  LossSpec loss{LossKind::CrossEntropy, 0, "", "labels"};
  if (ignorePadding)
    loss.ignoreIndex = -100;
  return loss;
}

TrainingOptions options(bool split = false, bool reference = false) {
  TrainingOptions training;
  training.split = split;
  training.reference = reference;
  training.compile = testOptions();
  return training;
}

/// A folder of .npy files for one test, removed afterwards.
class TrainerTest : public ::testing::Test {
protected:
  std::string path(const std::string &name) const { return dir_.file(name); }

  /// `samples` inputs x [samples, 32] and labels in [0, 5), written as NAME_x.npy and
  /// NAME_labels.npy; the dataset over them.
  Dataset classification(const std::string &name, int64_t samples, uint64_t seed, int64_t features = 32,
                         int64_t classes = 5) {
    Tensor x = randomTensor({DType::F32, {samples, features}}, seed);
    Tensor labels(DType::I64, {samples});
    for (int64_t i = 0; i < samples; ++i)
      labels.setInt(i, (i * 7 + static_cast<int64_t>(seed)) % classes);
    runtime::writeNpy(path(name + "_x.npy"), x);
    runtime::writeNpy(path(name + "_labels.npy"), labels);
    return Dataset::open({{"x", path(name + "_x.npy")}, {"labels", path(name + "_labels.npy")}});
  }

  kiln::test::TempDir dir_{"kiln-trainer"};
};

void expectParametersClose(const TrainingStep &got, const TrainingStep &want, double rtol, double atol) {
  for (const std::string &name : want.trainedParameters()) {
    const Tensor &a = got.parameter(name), &b = want.parameter(name);
    for (int64_t i = 0; i < a.numElements(); ++i)
      ASSERT_NEAR(a.getDouble(i), b.getDouble(i), atol + rtol * std::abs(b.getDouble(i))) << name << " element " << i;
  }
}

void expectParametersIdentical(const TrainingStep &got, const TrainingStep &want) {
  ASSERT_EQ(got.parameters().size(), want.parameters().size());
  for (const auto &[name, tensor] : want.parameters())
    EXPECT_TRUE(got.parameter(name).identical(tensor)) << name << " differs";
  EXPECT_EQ(got.stepCount(), want.stepCount());
}

} // namespace

TEST_F(TrainerTest, SplitStepMatchesTheWholeStep) {
  auto forward = mlp(8);
  OptimizerSpec adam = OptimizerSpec::adam(0.01);
  TrainingStep whole = compileTrainingStep(*forward, crossEntropy(), adam, options());
  TrainingStep split = compileTrainingStep(*forward, crossEntropy(), adam, options(true));
  TrainingStep reference = compileTrainingStep(*forward, crossEntropy(), adam, options(true, true));
  ASSERT_TRUE(split.isSplit());
  ASSERT_FALSE(whole.isSplit());
  Dataset data = classification("train", 24, 1);
  for (TrainingStep *step : {&whole, &split, &reference})
    Trainer(*step, data, TrainerOptions{}).run();
  EXPECT_EQ(split.stepCount(), 3);
  expectParametersClose(split, whole, 1e-5, 1e-6);
  expectParametersClose(reference, whole, 1e-4, 1e-5);
  // The gradient part computes no update: fewer launches than the whole step.
  EXPECT_LT(split.executable().numLaunches(), whole.executable().numLaunches());
  expectErrorContaining([&] { whole.gradients(); }, "compile it split");
}

TEST_F(TrainerTest, EachGradientIsReportedFinalAsSoonAsItsLastKernelHasRun) {
  // What data-parallel overlap rests on (TrainingStep::GradientListener): every gradient is
  // reported once, in gradientReadyOrder, holding the value it ends with, and the first of them
  // while kernels of the backward pass are still to run; a change made there is what the update
  // applies. The reference backend reports them all at the end, in the same contract.
  auto forward = mlp(4);
  Tensor x = randomTensor({DType::F32, {4, 32}}, 5), labels(DType::I64, {4});
  for (int64_t i = 0; i < 4; ++i)
    labels.setInt(i, i % 5);
  for (bool reference : {false, true}) {
    TrainingStep step =
        compileTrainingStep(*forward, crossEntropy(), OptimizerSpec::sgd(0.1), options(true, reference));
    const size_t count = step.trainedParameters().size();
    std::vector<size_t> order;
    std::vector<Tensor> seen(count);
    std::vector<int64_t> kernelsBefore; // kernels run when each gradient was reported
    int64_t kernels = 0;
    TrainingStep::GradientListener listener;
    listener.ready = [&](size_t g, Tensor &gradient) {
      order.push_back(g);
      seen[g] = gradient.clone();
      kernelsBefore.push_back(kernels);
    };
    listener.betweenKernels = [&] { ++kernels; };
    step.computeGradients({x, labels}, listener);
    EXPECT_EQ(order, step.gradientReadyOrder());
    ASSERT_EQ(order.size(), count);
    std::vector<Tensor> gradients = step.gradients();
    for (size_t g = 0; g < count; ++g)
      EXPECT_TRUE(seen[g].identical(gradients[g])) << step.trainedParameters()[g] << " changed after it was reported";
    if (reference) {
      EXPECT_EQ(kernels, 0);
    } else {
      EXPECT_EQ(kernels, step.executable().numLaunches());
      EXPECT_LT(kernelsBefore.front(), kernels) << "the first gradient was reported only after the last kernel";
      // The last layer's weight is finished before the first layer's.
      auto position = [&](const std::string &name) {
        std::vector<std::string> names = step.trainedParameters();
        size_t index = static_cast<size_t>(std::find(names.begin(), names.end(), name) - names.begin());
        return std::find(order.begin(), order.end(), index) - order.begin();
      };
      EXPECT_LT(position("4.weight"), position("0.weight"));
    }
    // Zeroing a gradient where it is reported keeps its parameter (plain SGD).
    Tensor before = step.parameter("0.bias").clone();
    TrainingStep::GradientListener zeroBias;
    std::vector<std::string> names = step.trainedParameters();
    zeroBias.ready = [&](size_t g, Tensor &gradient) {
      if (names[g] == "0.bias")
        std::memset(gradient.data(), 0, gradient.byteSize());
    };
    step.computeGradients({x, labels}, zeroBias);
    step.applyGradients();
    EXPECT_TRUE(step.parameter("0.bias").identical(before));
  }
}

TEST_F(TrainerTest, AccumulatedMicroBatchesGiveTheUpdateOfTheFullBatch) {
  // SGD with momentum, two epochs in shuffled order of 38 samples: two updates of 16 samples,
  // 4 micro-batches of 4 against one batch of 16, then a short one of 6: micro-batches of 4 and
  // 2 (padded) weighted 4/6 and 2/6, against a batch of 16 padded from 6. On the seed MLP and
  // on a small one.
  for (const std::vector<int64_t> &sizes : {kSeedMlp, std::vector<int64_t>{32, 16, 12, 5}}) {
    SCOPED_TRACE(fmt::format("MLP {}", fmt::join(sizes, "-")));
    OptimizerSpec sgd = OptimizerSpec::sgd(0.2, 0.9);
    TrainingStep full = compileTrainingStep(*mlp(16, 3, sizes), crossEntropy(), sgd, options());
    TrainingStep micro = compileTrainingStep(*mlp(4, 3, sizes), crossEntropy(), sgd, options(true));
    Dataset data = classification(fmt::format("train{}", sizes[0]), 38, 2, sizes[0], sizes[3]);
    TrainerOptions fullOptions;
    fullOptions.epochs = 2;
    fullOptions.shuffle = true;
    TrainerOptions microOptions = fullOptions;
    microOptions.accumulate = 4;
    Trainer fullTrainer(full, data, fullOptions);
    Trainer microTrainer(micro, data, microOptions);
    EXPECT_EQ(microTrainer.batchSize(), 16);
    EXPECT_EQ(microTrainer.updatesPerEpoch(), 3);
    std::vector<runtime::EpochReport> want = fullTrainer.run(), got = microTrainer.run();
    ASSERT_EQ(got.size(), 2u);
    for (size_t e = 0; e < got.size(); ++e)
      EXPECT_NEAR(got[e].meanLoss, want[e].meanLoss, 1e-5 * want[e].meanLoss) << "epoch " << e;
    EXPECT_EQ(micro.stepCount(), 6);
    expectParametersClose(micro, full, 1e-5, 1e-7);
  }
}

TEST_F(TrainerTest, AShortLastBatchPaddedWithIgnoredLabelsTrainsAsTheShortBatch) {
  // 6 samples at batch 4: the second update holds 2 samples, padded to 4.
  OptimizerSpec sgd = OptimizerSpec::sgd(0.3);
  TrainingStep padded = compileTrainingStep(*mlp(4), crossEntropy(), sgd, options());
  ASSERT_EQ(padded.manifest().ignoreIndex, int64_t(-100));
  Dataset data = classification("train", 6, 3);
  Trainer trainer(padded, data, TrainerOptions{});
  EXPECT_EQ(trainer.updatesPerEpoch(), 2);
  EXPECT_EQ(trainer.droppedPerEpoch(), 0);
  std::vector<runtime::EpochReport> reports = trainer.run();

  // The same two updates by hand: samples 0-3 at batch 4, then 4-5 on a step of batch 2.
  TrainingStep first = compileTrainingStep(*mlp(4), crossEntropy(false), sgd, options());
  Tensor x = runtime::readNpy(path("train_x.npy")), labels = runtime::readNpy(path("train_labels.npy"));
  auto rows = [](const Tensor &t, int64_t begin, int64_t count) {
    Tensor out(t.dtype(), [&] {
      Shape shape = t.shape();
      shape[0] = count;
      return shape;
    }());
    int64_t perRow = t.numElements() / t.shape()[0];
    std::memcpy(out.data(), static_cast<const char *>(t.data()) + begin * perRow * dtypeSize(t.dtype()), out.byteSize());
    return out;
  };
  float loss1 = first.run({rows(x, 0, 4), rows(labels, 0, 4)});
  TrainingOptions second = options();
  for (const auto &[name, tensor] : first.parameters())
    second.compile.params[name] = tensor;
  TrainingStep shortStep = compileTrainingStep(*mlp(2), crossEntropy(false), sgd, second);
  float loss2 = shortStep.run({rows(x, 4, 2), rows(labels, 4, 2)});
  expectParametersClose(padded, shortStep, 1e-6, 1e-7);
  EXPECT_NEAR(reports[0].meanLoss, (4 * loss1 + 2 * loss2) / 6, 1e-6);

  // Dropped by request, and where the loss cannot ignore padding (mse has no labels to mask).
  TrainerOptions dropLast;
  dropLast.dropLast = true;
  TrainingStep again = compileTrainingStep(*mlp(4), crossEntropy(), sgd, options());
  Trainer dropping(again, data, dropLast);
  EXPECT_EQ(dropping.updatesPerEpoch(), 1);
  EXPECT_EQ(dropping.droppedPerEpoch(), 2);
  TrainingStep unmasked = compileTrainingStep(*mlp(4), crossEntropy(false), sgd, options());
  Trainer cannotPad(unmasked, data, TrainerOptions{});
  EXPECT_EQ(cannotPad.updatesPerEpoch(), 1);
  EXPECT_EQ(cannotPad.droppedPerEpoch(), 2);
}

TEST_F(TrainerTest, AStepOverAnyBatchTrainsAShortLastBatchAsItIsForEveryLoss) {
  // 6 samples in updates of 4: a step over a symbolic batch (tiles of 3) takes the short batch
  // of 2 as it is, with a loss that cannot ignore padding, and makes the updates that static
  // steps at batch 4 and then 2 make (the padded trainer's, checked against those above).
  OptimizerSpec sgd = OptimizerSpec::sgd(0.3);
  Dataset data = classification("train", 6, 3);
  TrainingStep padded = compileTrainingStep(*mlp(4), crossEntropy(), sgd, options());
  Trainer paddedTrainer(padded, data, TrainerOptions{});
  std::vector<runtime::EpochReport> want = paddedTrainer.run();

  auto symbolic = mlp(frontend::GraphBuilder::dim("N"));
  TrainingOptions tiles = options();
  tiles.batchTile = 3;
  TrainingStep any = compileTrainingStep(*symbolic, crossEntropy(false), sgd, tiles);
  TrainerOptions four;
  four.batchSize = 4;
  Trainer trainer(any, data, four);
  EXPECT_EQ(trainer.microBatch(), 4);
  EXPECT_EQ(trainer.updatesPerEpoch(), 2);
  EXPECT_EQ(trainer.droppedPerEpoch(), 0);
  std::vector<runtime::EpochReport> got = trainer.run();
  expectParametersClose(any, padded, 1e-5, 1e-6);
  EXPECT_NEAR(got[0].meanLoss, want[0].meanLoss, 1e-5 * want[0].meanLoss);

  // Validation over tiles of the step's rows, 7 samples in batches of 4: as the static step's.
  Dataset val = classification("val", 7, 6);
  trainer.setValidation(val, compileEvaluation(*symbolic, crossEntropy(false), any, tiles));
  paddedTrainer.setValidation(val, compileEvaluation(*mlp(4), crossEntropy(false), padded, options()));
  runtime::ValidationResult gotVal = trainer.validate(), wantVal = paddedTrainer.validate();
  EXPECT_NEAR(gotVal.loss, wantVal.loss, 1e-5 * wantVal.loss);
  ASSERT_TRUE(gotVal.accuracy && wantVal.accuracy);
  EXPECT_DOUBLE_EQ(*gotVal.accuracy, *wantVal.accuracy);

  // Accumulated micro-batches of 2 over the same updates, on the same start.
  TrainingStep accumulated = compileTrainingStep(*symbolic, crossEntropy(false), sgd, tiles);
  TrainerOptions twoByTwo = four;
  twoByTwo.accumulate = 2;
  Trainer accumulating(accumulated, data, twoByTwo);
  EXPECT_EQ(accumulating.microBatch(), 2);
  accumulating.run();
  expectParametersClose(accumulated, padded, 1e-5, 1e-6);

  TrainingStep more = compileTrainingStep(*symbolic, crossEntropy(false), sgd, tiles);
  expectErrorContaining([&] { Trainer(more, data, TrainerOptions{}); },
                        "the step takes a batch of any size; give the samples per update (batchSize)");
  TrainerOptions odd = twoByTwo;
  odd.batchSize = 5;
  expectErrorContaining([&] { Trainer(more, data, odd); }, "a multiple of 2 micro-batches times 1 ranks, got 5");
  TrainerOptions wrong;
  wrong.batchSize = 8;
  expectErrorContaining([&] { Trainer(padded, data, wrong); },
                        "the step was compiled for batches of 4 samples, so an update takes 4");
}

TEST_F(TrainerTest, AResumedRunEndsBitForBitWhereAnUninterruptedOneEnds) {
  // Adam (state), a cosine schedule with warm-up (position), shuffling (order), a short batch
  // padded (mask): 3 epochs of 3 updates, stopped after the checkpoint at update 4 - inside the
  // second epoch.
  auto forward = mlp(4);
  OptimizerSpec adam = OptimizerSpec::adam(0.02);
  Dataset data = classification("train", 10, 4);
  TrainerOptions run;
  run.epochs = 3;
  run.shuffle = true;
  run.seed = 11;
  run.schedule = runtime::LearningRateSchedule::parse("cosine:2");
  run.saveEvery = 4;
  run.savePath = path("ck.safetensors");

  TrainingStep uninterrupted = compileTrainingStep(*forward, crossEntropy(), adam, options());
  TrainerOptions noSaves = run;
  noSaves.saveEvery = 0;
  noSaves.savePath.clear();
  Trainer(uninterrupted, data, noSaves).run();
  EXPECT_EQ(uninterrupted.stepCount(), 9);

  struct Stop {};
  TrainingStep stopped = compileTrainingStep(*forward, crossEntropy(), adam, options());
  runtime::TrainerHooks killAt5;
  killAt5.onProgress = [&](const runtime::TrainerProgress &) {
    if (stopped.stepCount() == 5)
      throw Stop{}; // after the checkpoint at 4, one update lost as in a real crash
  };
  EXPECT_THROW(Trainer(stopped, data, run, killAt5).run(), Stop);

  TrainingStep resumed = compileTrainingStep(*forward, crossEntropy(), adam, options());
  resumed.loadParameters(path("ck.safetensors"));
  EXPECT_EQ(resumed.stepCount(), 4);
  std::vector<runtime::EpochReport> reports = Trainer(resumed, data, run).run();
  ASSERT_EQ(reports.size(), 2u); // the rest of epoch 1, then epoch 2
  EXPECT_EQ(reports[0].epoch, 1);
  EXPECT_EQ(reports[0].firstUpdate, 1);
  expectParametersIdentical(resumed, uninterrupted);
  EXPECT_FALSE(std::filesystem::exists(path("ck.safetensors.partial.safetensors")));
}

TEST_F(TrainerTest, TheScheduleSetsEachUpdatesLearningRate) {
  TrainingStep step = compileTrainingStep(*mlp(4), crossEntropy(), OptimizerSpec::sgd(0.5), options());
  TrainerOptions run;
  run.epochs = 2;
  run.schedule = runtime::LearningRateSchedule::parse("step:3:0.1");
  std::vector<double> rates;
  runtime::TrainerHooks hooks;
  hooks.onProgress = [&](const runtime::TrainerProgress &progress) { rates.push_back(progress.lr); };
  Trainer(step, classification("train", 8, 5), run, hooks).run();
  ASSERT_EQ(rates.size(), 4u);
  EXPECT_DOUBLE_EQ(rates[0], 0.5);
  EXPECT_DOUBLE_EQ(rates[2], 0.5);
  EXPECT_NEAR(rates[3], 0.05, 1e-12);
  EXPECT_NEAR(step.learningRate(), 0.05, 1e-12);
}

TEST_F(TrainerTest, ValidationLossIsTheMeanOverSamplesAndAccuracyCountsHits) {
  auto forward = mlp(4);
  TrainingStep step = compileTrainingStep(*forward, crossEntropy(), OptimizerSpec::sgd(0.0), options());
  TrainingStep reference = compileTrainingStep(*forward, crossEntropy(), OptimizerSpec::sgd(0.0), options(false, true));
  Dataset val = classification("val", 7, 6); // a batch of 4 and a short one of 3
  Trainer trainer(step, classification("train", 4, 7), TrainerOptions{});
  trainer.setValidation(val, compileEvaluation(*forward, crossEntropy(), step, options()));
  Trainer referenceTrainer(reference, classification("train2", 4, 7), TrainerOptions{});
  referenceTrainer.setValidation(val, compileEvaluation(*forward, crossEntropy(), reference, options(false, true)));
  runtime::ValidationResult got = trainer.validate(), want = referenceTrainer.validate();
  EXPECT_NEAR(got.loss, want.loss, 1e-5 * want.loss);
  ASSERT_TRUE(got.accuracy && want.accuracy);
  EXPECT_DOUBLE_EQ(*got.accuracy, *want.accuracy);

  // The same by hand on the reference evaluator: the training graph's loss of each batch.
  Tensor x = runtime::readNpy(path("val_x.npy")), labels = runtime::readNpy(path("val_labels.npy"));
  double sum = 0;
  int64_t hits = 0;
  for (int64_t n = 0; n < 7; ++n) {
    Tensor one = ir::evaluate(*mlp(1), {Tensor::fromDoubles(DType::F32, {1, 32}, [&] {
                                std::vector<double> row;
                                for (int64_t k = 0; k < 32; ++k)
                                  row.push_back(x.getDouble(n * 32 + k));
                                return row;
                              }())})[0];
    double top = -1e30, logSum = 0;
    int64_t best = 0;
    for (int64_t c = 0; c < 5; ++c)
      if (one.getDouble(c) > top)
        top = one.getDouble(c), best = c;
    for (int64_t c = 0; c < 5; ++c)
      logSum += std::exp(one.getDouble(c) - top);
    sum += top + std::log(logSum) - one.getDouble(labels.getInt(n));
    hits += best == labels.getInt(n);
  }
  EXPECT_NEAR(want.loss, sum / 7, 1e-6);
  EXPECT_DOUBLE_EQ(*want.accuracy, static_cast<double>(hits) / 7);
}

TEST_F(TrainerTest, BadDataIsRefusedNamingTheFileAndTheInput) {
  TrainingStep step = compileTrainingStep(*mlp(4), crossEntropy(), OptimizerSpec::sgd(0.1), options());
  Dataset good = classification("good", 8, 8);
  runtime::writeNpy(path("short_labels.npy"), Tensor(DType::I64, {7}));
  expectErrorContaining([&] { Dataset::open({{"x", path("good_x.npy")}, {"labels", path("short_labels.npy")}}); },
                        "short_labels.npy: holds 7 samples (shape [7]), but " + path("good_x.npy") + " holds 8");
  runtime::writeNpy(path("wide_x.npy"), Tensor(DType::F32, {8, 33}));
  expectErrorContaining(
      [&] { Trainer(step, Dataset::open({{"x", path("wide_x.npy")}, {"labels", path("good_labels.npy")}}), {}); },
      "wide_x.npy holds samples of f32[33] (the file is f32[8,33]), but the step's input 'x' takes f32[32] per "
      "sample (f32[4,32]: batches of 4)");
  runtime::writeNpy(path("f64_x.npy"), Tensor(DType::F64, {8, 32}));
  expectErrorContaining(
      [&] { Trainer(step, Dataset::open({{"x", path("f64_x.npy")}, {"labels", path("good_labels.npy")}}), {}); },
      "f64_x.npy holds samples of f64[32]");
  expectErrorContaining([&] { Trainer(step, Dataset::open({{"x", path("good_x.npy")}}), {}); },
                        "no array for the step's input 'labels'");
  expectErrorContaining([&] { Dataset::open({{"x", path("missing.npy")}}); }, "missing.npy: cannot open file");
  Tensor bad(DType::I64, {8});
  bad.setInt(5, 9);
  runtime::writeNpy(path("bad_labels.npy"), bad);
  expectErrorContaining(
      [&] { Trainer(step, Dataset::open({{"x", path("good_x.npy")}, {"labels", path("bad_labels.npy")}}), {}); },
      "bad_labels.npy holds class 9 at sample 5, outside [0, 5)");
  TrainerOptions accumulate;
  accumulate.accumulate = 2;
  expectErrorContaining([&] { Trainer(step, good, accumulate); }, "needs a step compiled split");
  TrainerOptions noEpochs;
  noEpochs.epochs = 0;
  expectErrorContaining([&] { Trainer(step, good, noEpochs); }, "epochs must be >= 1");
  step.setStepCount(100);
  expectErrorContaining([&] { Trainer(step, good, {}).run(); }, "past the end of this run");
}

TEST_F(TrainerTest, FrozenParametersKeepTheirBitsAndGetNoBackward) {
  // The first layer frozen: nothing computes its weight's gradient (x^T * dy, the only other
  // reader of x) or the gradient flowing into it.
  auto forward = mlp(4);
  TrainingOptions frozen = options();
  frozen.frozen = {"0.weight", "0.bias"};
  TrainingStep all = compileTrainingStep(*forward, crossEntropy(), OptimizerSpec::sgd(0.1), options());
  TrainingStep head = compileTrainingStep(*forward, crossEntropy(), OptimizerSpec::sgd(0.1), frozen);
  EXPECT_LT(head.executable().numLaunches(), all.executable().numLaunches());
  LoweredTrainingStep lowered = lowerTrainingStep(*forward, crossEntropy(), OptimizerSpec::sgd(0.1), frozen);
  EXPECT_EQ(lowered.training.gradients.size(), 4u);
  EXPECT_EQ(lowered.training.graph->inputs()[0]->uses().size(), 1u) << "x is read by the forward matmul alone";
  Tensor weight = head.parameter("0.weight").clone(), bias = head.parameter("0.bias").clone();
  Trainer(head, classification("train", 8, 9), {}).run();
  EXPECT_TRUE(head.parameter("0.weight").identical(weight));
  EXPECT_TRUE(head.parameter("0.bias").identical(bias));
  EXPECT_FALSE(head.parameter("4.weight").identical(all.parameter("4.weight")));

  // A frozen weight read by one matmul must be read where it lies, not repacked at load: a
  // checkpoint loaded into it changes what the step computes.
  head.saveParameters(path("head"));
  runtime::writeNpy(path("head/0.weight.npy"), Tensor(DType::F32, weight.shape()));
  Tensor x = runtime::readNpy(path("train_x.npy")), labels = runtime::readNpy(path("train_labels.npy"));
  auto firstRows = [](const Tensor &t) {
    Shape shape = t.shape();
    shape[0] = 4;
    Tensor out(t.dtype(), shape);
    std::memcpy(out.data(), t.data(), out.byteSize());
    return out;
  };
  head.setLearningRate(0);
  float before = head.run({firstRows(x), firstRows(labels)});
  head.loadParameters(path("head"));
  float after = head.run({firstRows(x), firstRows(labels)});
  // With the first layer zero, every sample's logits are the same: the loss changes.
  EXPECT_NE(before, after);
  TrainingOptions zeroed = frozen;
  for (const auto &[name, tensor] : head.parameters())
    zeroed.compile.params[name] = tensor;
  zeroed.reference = true;
  TrainingStep check = compileTrainingStep(*forward, crossEntropy(), OptimizerSpec::sgd(0.0), zeroed);
  EXPECT_NEAR(after, check.run({firstRows(x), firstRows(labels)}), 1e-6);
}

} // namespace kiln::codegen::test
