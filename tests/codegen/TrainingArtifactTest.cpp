// Training steps compiled ahead of time (codegen::compileTrainingAheadOfTime) and loaded with
// runtime::TrainingStep::load (the "artifact"): the same losses and parameters as a step from
// compileTrainingStep from the same initial state, step for step; parameters updated in place in the artifact's own
// writable tensors; checkpoints moving both ways between the artifact and a just-in-time step;
// the manifest's text round trip and its errors; a compiled model that is not a training step.
#include <gtest/gtest.h>

#include "tests/ErrorMatchers.h"

#include <filesystem>
#include <functional>

#include "codegen/TrainingAot.h"
#include "core/Error.h"
#include "frontend/Frontend.h"
#include "runtime/TrainingCheckpoint.h"
#include "runtime/TrainingStep.h"
#include "tests/codegen/CodegenTestUtil.h"

namespace kiln::codegen::test {
namespace {

namespace fs = std::filesystem;

std::unique_ptr<ir::Graph> mlp() { return smallMlp(11); }

Tensor batch(int step) { return randomTensor({DType::F32, {5, 6}}, 200 + static_cast<uint64_t>(step)); }

Tensor labels(int step) {
  std::vector<double> values;
  for (int i = 0; i < 5; ++i)
    values.push_back((2 * i + step) % 3);
  return Tensor::fromDoubles(DType::I64, {5}, values);
}

using kiln::test::errorOf;

void expectSameTensors(const std::map<std::string, Tensor> &got, const std::map<std::string, Tensor> &want,
                       const std::string &what) {
  for (const auto &[name, tensor] : got) {
    auto found = want.find(name);
    ASSERT_NE(found, want.end()) << what << ": " << name;
    ASSERT_EQ(tensor.type(), found->second.type()) << what << ": " << name;
    for (int64_t i = 0; i < tensor.numElements(); ++i)
      EXPECT_NEAR(tensor.getDouble(i), found->second.getDouble(i), 1e-6) << what << ": " << name << "[" << i << "]";
  }
}

const LossSpec kLoss{LossKind::CrossEntropy, 0, "", "labels"};
const OptimizerSpec kOptimizer = OptimizerSpec::sgd(0.1, 0.9, true);

/// One training step compiled ahead of time for the whole suite (a compile takes a second).
class TrainingArtifactTest : public ::testing::Test {
protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(fs::temp_directory_path() / ("kiln-training-aot-test-" + std::to_string(::getpid())));
    fs::remove_all(*dir_);
    fs::create_directories(*dir_);
    forward_ = mlp().release();
    TrainingOptions options;
    options.compile = testOptions();
    step_ = new AotTrainingStep(
        compileTrainingAheadOfTime(*forward_, kLoss, kOptimizer, (*dir_ / "step.so").string(), options));
  }
  static void TearDownTestSuite() {
    fs::remove_all(*dir_);
    delete step_;
    delete forward_;
    delete dir_;
  }

  static TrainingStep jitStep() {
    TrainingOptions options;
    options.compile = testOptions();
    return compileTrainingStep(*forward_, kLoss, kOptimizer, options);
  }
  static std::string soPath() { return (*dir_ / "step.so").string(); }

  static fs::path *dir_;
  static ir::Graph *forward_;
  static AotTrainingStep *step_;
};

fs::path *TrainingArtifactTest::dir_ = nullptr;
ir::Graph *TrainingArtifactTest::forward_ = nullptr;
AotTrainingStep *TrainingArtifactTest::step_ = nullptr;

TEST_F(TrainingArtifactTest, ManifestDescribesTheStep) {
  const runtime::TrainingManifest &manifest = step_->manifest;
  EXPECT_EQ(manifest.loss, "cross-entropy");
  EXPECT_EQ(manifest.optimizer, "sgd");
  EXPECT_EQ(manifest.lr, 0.1);
  EXPECT_EQ(manifest.steps, 0);
  EXPECT_EQ(manifest.classes, 3);
  // Inputs: x, labels, lr, step.
  EXPECT_EQ(manifest.targetInput, 1);
  EXPECT_EQ(manifest.lrInput, 2);
  EXPECT_EQ(manifest.stepInput, 3);
  // Four trained parameters and their four momentum buffers, after the loss.
  ASSERT_EQ(manifest.updates.size(), 8u);
  int states = 0;
  for (size_t i = 0; i < manifest.updates.size(); ++i) {
    EXPECT_EQ(manifest.updates[i].output, static_cast<int64_t>(i) + 1);
    if (manifest.updates[i].isState) {
      ++states;
      EXPECT_EQ(manifest.updates[i].name, manifest.updates[i].param + ".momentum_buffer");
    }
  }
  EXPECT_EQ(states, 4);
  EXPECT_EQ(manifest.params.size(), 8u);
  EXPECT_NE(manifest.describe().find("momentum 0.9"), std::string::npos) << manifest.describe();
}

TEST_F(TrainingArtifactTest, StepsMatchTheJitStepInPlace) {
  TrainingStep jit = jitStep();
  runtime::TrainingStep artifact = runtime::TrainingStep::load(soPath());
  EXPECT_EQ(artifact.inputNames(), jit.inputNames());
  // One type, described alike whichever way it was made.
  EXPECT_FALSE(artifact.isReference());
  EXPECT_EQ(artifact.targetInput(), jit.targetInput());
  EXPECT_EQ(artifact.trainedParameters(), jit.trainedParameters());
  EXPECT_EQ(artifact.manifest().toText(), step_->manifest.toText());
  EXPECT_EQ(artifact.stepCount(), 0);
  EXPECT_EQ(artifact.learningRate(), 0.1);
  // The initial state: the forward graph's parameters, zero momentum.
  expectSameTensors(artifact.parameters(), jit.parameters(), "initial");
  const void *storage = artifact.parameter("0.weight").data();
  float previous = 0;
  for (int step = 0; step < 3; ++step) { // one batch: the loss must go down
    float want = jit.run({batch(0), labels(0)});
    float got = artifact.run({batch(0), labels(0)});
    EXPECT_NEAR(got, want, 1e-6) << "step " << step;
    if (step > 0) {
      EXPECT_LT(got, previous) << "step " << step;
    }
    previous = got;
  }
  EXPECT_EQ(artifact.stepCount(), 3);
  EXPECT_EQ(artifact.parameter("0.weight").data(), storage); // updated in place
  expectSameTensors(artifact.parameters(), jit.parameters(), "after 3 steps");
  // A second artifact loaded from the file starts from the embedded state again, not from
  // the first one's updated copies.
  runtime::TrainingStep fresh = runtime::TrainingStep::load(soPath());
  EXPECT_EQ(fresh.stepCount(), 0);
  EXPECT_NE(fresh.parameter("0.weight").getDouble(0), artifact.parameter("0.weight").getDouble(0));
}

TEST_F(TrainingArtifactTest, CheckpointsMoveBetweenArtifactAndJitStep) {
  runtime::TrainingStep artifact = runtime::TrainingStep::load(soPath());
  TrainingStep reference = jitStep();
  for (int step = 0; step < 3; ++step) {
    artifact.run({batch(step), labels(step)});
    reference.run({batch(step), labels(step)});
  }
  std::string checkpoint = (*dir_ / "artifact.safetensors").string();
  artifact.saveParameters(checkpoint);
  // Artifact -> JIT: the JIT step continues where the artifact stopped, step count included.
  TrainingStep resumed = jitStep();
  resumed.loadParameters(checkpoint);
  EXPECT_EQ(resumed.stepCount(), 3);
  for (int step = 3; step < 5; ++step)
    EXPECT_NEAR(resumed.run({batch(step), labels(step)}), reference.run({batch(step), labels(step)}), 1e-6);
  expectSameTensors(resumed.parameters(), reference.parameters(), "JIT resumed from the artifact");
  // JIT -> artifact, as a folder of .npy files.
  std::string folder = (*dir_ / "jit-checkpoint").string();
  reference.saveParameters(folder);
  runtime::TrainingStep continued = runtime::TrainingStep::load(soPath());
  continued.loadParameters(folder);
  EXPECT_EQ(continued.stepCount(), 5);
  EXPECT_NEAR(continued.run({batch(5), labels(5)}), reference.run({batch(5), labels(5)}), 1e-6);
  expectSameTensors(continued.parameters(), reference.parameters(), "artifact resumed from the JIT step");
}

TEST_F(TrainingArtifactTest, InitialValuesAndStepCountAreEmbedded) {
  TrainingStep jit = jitStep();
  jit.run({batch(0), labels(0)});
  TrainingOptions options;
  options.compile = testOptions();
  options.compile.params = jit.parameters(); // parameters and momentum after one step
  std::string path = (*dir_ / "resumed.so").string();
  AotTrainingStart start;
  start.steps = jit.stepCount();
  compileTrainingAheadOfTime(*forward_, kLoss, kOptimizer, path, options, {}, start);
  runtime::TrainingStep artifact = runtime::TrainingStep::load(path);
  EXPECT_EQ(artifact.stepCount(), 1);
  expectSameTensors(artifact.parameters(), jit.parameters(), "embedded");
  artifact.setLearningRate(0.05);
  jit.setLearningRate(0.05);
  EXPECT_NEAR(artifact.run({batch(1), labels(1)}), jit.run({batch(1), labels(1)}), 1e-6);
  expectSameTensors(artifact.parameters(), jit.parameters(), "after a step at lr 0.05");
}

TEST_F(TrainingArtifactTest, BadUsesAreErrors) {
  runtime::TrainingStep artifact = runtime::TrainingStep::load(soPath());
  EXPECT_NE(errorOf([&] { artifact.run({batch(0)}); }).find("expected 2 inputs (x, labels), got 1"), std::string::npos);
  EXPECT_NE(errorOf([&] { artifact.parameter("nope"); }).find("no parameter 'nope'"), std::string::npos);
  EXPECT_NE(errorOf([&] { artifact.setLearningRate(-1); }).find("learning rate must be >= 0"), std::string::npos);
  // A checkpoint naming a tensor the step does not have changes nothing.
  std::string bad = (*dir_ / "bad.safetensors").string();
  runtime::saveCheckpoint(bad, {{"other", Tensor(DType::F32, {2})}}, 7);
  EXPECT_NE(errorOf([&] { artifact.loadParameters(bad); }).find("'other', which is not a parameter"),
            std::string::npos);
  EXPECT_EQ(artifact.stepCount(), 0);
  // A checkpoint to start a compiled step from is checked before anything is compiled.
  AotTrainingStart start;
  start.checkpoint = bad;
  EXPECT_NE(errorOf([&] {
              compileTrainingAheadOfTime(*forward_, kLoss, kOptimizer, (*dir_ / "bad.so").string(), {}, {}, start);
            }).find("'other', which is not a parameter of this training step"),
            std::string::npos);
  EXPECT_FALSE(fs::exists(*dir_ / "bad.so"));
  TrainingOptions reference;
  reference.reference = true;
  EXPECT_NE(errorOf([&] {
              compileTrainingAheadOfTime(*forward_, kLoss, kOptimizer, (*dir_ / "ref.so").string(), reference);
            }).find("reference evaluator"),
            std::string::npos);
}

TEST_F(TrainingArtifactTest, PlainCompiledModelIsNotATrainingStep) {
  std::string path = (*dir_ / "plain.so").string();
  compileAheadOfTime(*forward_, path, testOptions());
  EXPECT_FALSE(runtime::isTrainingStep(path));
  EXPECT_TRUE(runtime::isTrainingStep(soPath()));
  EXPECT_NE(errorOf([&] { runtime::TrainingStep::load(path); }).find("is a compiled model, not a training step"),
            std::string::npos);
}

/// Linear(6, 8) -> ReLU -> Linear(8, 3) over a symbolic batch N.
std::unique_ptr<ir::Graph> symbolicMlp() {
  frontend::nn::manualSeed(11);
  frontend::nn::Sequential model{std::make_shared<frontend::nn::Linear>(6, 8), std::make_shared<frontend::nn::ReLU>(),
                                 std::make_shared<frontend::nn::Linear>(8, 3)};
  frontend::GraphBuilder gb("mlp");
  frontend::Var x = gb.input("x", DType::F32, {frontend::GraphBuilder::dim("N"), 6});
  return gb.finish({model(x)});
}

Tensor classLabels(int64_t count, uint64_t seed) {
  std::vector<double> values;
  for (int64_t i = 0; i < count; ++i)
    values.push_back(static_cast<double>((i + seed) % 3));
  return Tensor::fromDoubles(DType::I64, {count}, values);
}

TEST_F(TrainingArtifactTest, SymbolicBatchCompilesOnceInTwoPartsForEveryBatchSize) {
  // A forward graph over a symbolic batch compiles ahead of time as compileTrainingStep does:
  // split, for tiles of 4 rows. Its file holds both parts; the loaded step trains batches of
  // any size exactly as the just-in-time step (the same lowering), its parameters and momentum
  // shared by both parts and updated in place.
  auto symbolic = symbolicMlp();
  TrainingOptions options;
  options.compile = testOptions();
  options.batchTile = 4;
  std::string path = (*dir_ / "tiled.so").string();
  AotTrainingStep written = compileTrainingAheadOfTime(*symbolic, kLoss, kOptimizer, path, options);
  EXPECT_EQ(written.manifest.batchTile, 4);
  EXPECT_EQ(written.manifest.batchSymbol, "N");
  EXPECT_EQ(written.manifest.params.size(), 8u); // four parameters, four momentum buffers
  runtime::TrainingStep artifact = runtime::TrainingStep::load(path);
  TrainingStep jit = compileTrainingStep(*symbolic, kLoss, kOptimizer, options);
  ASSERT_TRUE(artifact.isSplit());
  EXPECT_EQ(artifact.inputs()[0].type.toString(), "f32[N,6]");
  EXPECT_EQ(artifact.executable().inputs()[0].type.toString(), "f32[4,6]");
  EXPECT_EQ(artifact.manifest().toText(), written.manifest.toText());
  expectSameTensors(artifact.parameters(), jit.parameters(), "initial");
  const void *storage = artifact.parameter("0.weight").data();
  int64_t seed = 0;
  for (int64_t rows : {10, 3, 4, 9}) {
    Tensor x = randomTensor({DType::F32, {rows, 6}}, 300 + static_cast<uint64_t>(seed));
    Tensor y = classLabels(rows, static_cast<uint64_t>(seed++));
    EXPECT_EQ(artifact.run({x, y}), jit.run({x, y})) << rows << " rows";
  }
  EXPECT_EQ(artifact.stepCount(), 4);
  EXPECT_EQ(artifact.parameter("0.weight").data(), storage);
  for (const auto &[name, tensor] : jit.parameters()) // bit for bit: the same code ran
    for (int64_t i = 0; i < tensor.numElements(); ++i)
      ASSERT_EQ(artifact.parameter(name).getDouble(i), tensor.getDouble(i)) << name << "[" << i << "]";
  // A checkpoint of the split step resumes the same way.
  std::string checkpoint = (*dir_ / "tiled.safetensors").string();
  artifact.saveParameters(checkpoint);
  runtime::TrainingStep resumed = runtime::TrainingStep::load(path);
  resumed.loadParameters(checkpoint);
  Tensor x = randomTensor({DType::F32, {7, 6}}, 400);
  EXPECT_EQ(resumed.run({x, classLabels(7, 9)}), artifact.run({x, classLabels(7, 9)}));
}

TEST(TrainingManifest, TextRoundTripsAndBadTextIsAnError) {
  runtime::TrainingManifest manifest;
  manifest.loss = "mse";
  manifest.optimizer = "adamw";
  manifest.hyperParameters = {{"beta1", 0.9}, {"eps", 1e-8}};
  manifest.lr = 0.1; // not exact in binary: must read back to the same double
  manifest.steps = 12;
  manifest.lrInput = 2;
  manifest.stepInput = 3;
  manifest.targetInput = 1;
  manifest.params = {"w b", "w b.exp_avg"};
  manifest.updates = {{1, false, "w b", "w b"}, {2, true, "w b.exp_avg", "w b"}};
  runtime::TrainingManifest back = runtime::TrainingManifest::parse(manifest.toText(), "test");
  EXPECT_EQ(back.loss, "mse");
  EXPECT_EQ(back.optimizer, "adamw");
  EXPECT_EQ(back.hyperParameters, manifest.hyperParameters);
  EXPECT_EQ(back.lr, 0.1);
  EXPECT_EQ(back.steps, 12);
  EXPECT_EQ(back.targetInput, 1);
  EXPECT_EQ(back.params, manifest.params);
  ASSERT_EQ(back.updates.size(), 2u);
  EXPECT_TRUE(back.updates[1].isState);
  EXPECT_EQ(back.updates[1].name, "w b.exp_avg");
  EXPECT_EQ(back.updates[1].param, "w b");
  EXPECT_FALSE(back.ignoreIndex);
  EXPECT_EQ(manifest.toText().find("ignore-index"), std::string::npos); // files without it stay as they were
  manifest.ignoreIndex = -100;
  EXPECT_EQ(runtime::TrainingManifest::parse(manifest.toText(), "test").ignoreIndex, int64_t(-100));

  auto parseError = [](const std::string &text) {
    return errorOf([&] { runtime::TrainingManifest::parse(text, "m.so"); });
  };
  EXPECT_NE(parseError("").find("m.so: the training manifest is empty"), std::string::npos);
  EXPECT_NE(parseError("kiln-training\t2\n").find("not version 1"), std::string::npos);
  EXPECT_NE(parseError("kiln-training\t1\nsteps\t-1\n").find("expects an integer >= 0, got '-1'"), std::string::npos);
  EXPECT_NE(parseError("kiln-training\t1\nlr\tfast\n").find("expects a number, got 'fast'"), std::string::npos);
  EXPECT_NE(parseError("kiln-training\t1\nwhat\t1\n").find("unknown entry 'what'"), std::string::npos);
  EXPECT_NE(parseError("kiln-training\t1\nignore-index\tnone\n").find("expects an integer"), std::string::npos);
  EXPECT_NE(parseError("kiln-training\t1\nupdate\t1\tparam\tw\n").find("has 4 fields, expected 5"), std::string::npos);
  EXPECT_NE(parseError("kiln-training\t1\nlr\t0.1\n").find("which inputs take the learning rate"), std::string::npos);
  // What toText could not write back: no optimizer, a name ending in '\r' (a CRLF line).
  EXPECT_NE(parseError("kiln-training\t1\nloss\tmse\ninput\tlr\t0\ninput\tstep\t1\n")
                .find("name its loss and optimizer"),
            std::string::npos);
  EXPECT_NE(parseError("kiln-training\t1\nloss\tmse\r\n").find("line 2 ('loss') has a carriage return"),
            std::string::npos);
  manifest.params = {"bad\tname"};
  EXPECT_NE(errorOf([&] { manifest.toText(); }).find("holds a tab or a line break"), std::string::npos);
}

} // namespace
} // namespace kiln::codegen::test
