// random_uniform in generated code: bit-identical to the reference evaluator on several shapes,
// dtypes and offset kinds, fused into its consumers; and training steps in training mode:
// BatchNorm's running statistics written back every step (against torch's update formulas in a
// loop here) and Dropout's fresh mask per step, compiled against the reference backend.
#include <gtest/gtest.h>

#include <cmath>

#include "codegen/CompileTraining.h"
#include "core/Error.h"
#include "frontend/Frontend.h"
#include "ir/Builder.h"
#include "ir/Evaluator.h"
#include "ir/ops/Random.h"
#include "tests/codegen/CodegenTestUtil.h"
#include "tests/onnx/OnnxTestModel.h"

namespace kiln::codegen::test {
namespace {

using ir::OpKind;

/// u = random_uniform(offset) of `shape`; outputs u and where(u >= 0.3, x * 2, 0) for x of `shape`.
std::unique_ptr<ir::Graph> randomGraph(const Shape &shape, DType dtype, DType offsetType, int64_t seed) {
  auto graph = std::make_unique<ir::Graph>("random");
  ir::Builder b(*graph);
  ir::Value *x = graph->addInput({dtype, shape}, "x");
  ir::Value *offset = graph->addInput({offsetType, {}}, "offset");
  ir::Value *u = b.create(OpKind::RandomUniform, {offset}, {{"shape", shape}, {"dtype", dtype}, {"seed", seed}});
  ir::Value *keep = b.create(OpKind::Ge, {u, b.scalar(dtype, 0.3)});
  ir::Value *scaled = b.create(OpKind::Mul, {x, b.scalar(dtype, 2.0)});
  graph->setOutputs({u, b.create(OpKind::Where, {keep, scaled, b.scalar(dtype, 0.0)})});
  return graph;
}

TEST(RandomCodegen, BitIdenticalToTheEvaluator) {
  struct Case {
    Shape shape;
    DType dtype, offsetType;
    int64_t seed;
  };
  std::vector<Case> cases{{{1000}, DType::F32, DType::I64, 1},
                          {{3, 17, 5}, DType::F32, DType::F32, -9},
                          {{2, 1, 64}, DType::F64, DType::I64, 123456789},
                          {{}, DType::F32, DType::I64, 4},
                          {{4, 0, 3}, DType::F32, DType::I64, 4}};
  for (const Case &c : cases) {
    auto graph = randomGraph(c.shape, c.dtype, c.offsetType, c.seed);
    runtime::Executable executable = compile(*graph, testOptions());
    for (int offset : {0, 1, 7}) {
      std::vector<Tensor> inputs{randomTensor({c.dtype, c.shape}, 3), Tensor::scalar(c.offsetType, offset)};
      std::vector<Tensor> want = ir::evaluate(*graph, inputs);
      std::vector<Tensor> got = executable.run(inputs);
      EXPECT_TRUE(got[0].identical(want[0])) << graph->name() << " " << shapeToString(c.shape) << " offset " << offset;
      EXPECT_TRUE(got[1].identical(want[1])) << shapeToString(c.shape) << " offset " << offset;
    }
  }
}

TEST(RandomCodegen, DrawsFreshNumbersPerOffsetAndFusesIntoOneKernel) {
  auto graph = randomGraph({256}, DType::F32, DType::I64, 5);
  // Only the masked product: the random numbers need no buffer of their own.
  graph->setOutputs({graph->outputs()[1]});
  LoweredModel lowered = lowerGraph(*graph, testOptions());
  EXPECT_EQ(lowered.model.launches.size(), 1u);
  runtime::Executable executable = compile(*graph, testOptions());
  Tensor x = randomTensor({DType::F32, {256}}, 1);
  Tensor first = executable.run({x, Tensor::scalar(DType::I64, 1)})[0];
  Tensor second = executable.run({x, Tensor::scalar(DType::I64, 2)})[0];
  EXPECT_FALSE(first.identical(second));
  EXPECT_TRUE(first.identical(executable.run({x, Tensor::scalar(DType::I64, 1)})[0]));
}

TrainingOptions trainingOptions(bool reference, const std::vector<frontend::BufferWrite> &buffers) {
  TrainingOptions options;
  options.reference = reference;
  options.buffers = buffers;
  options.compile = testOptions();
  return options;
}

Tensor cnnBatch(int step) { return randomTensor({DType::F32, {4, 2, 3, 3}}, 40 + uint64_t(step)); }

TEST(TrainingModeStep, BatchNormRunningStatisticsFollowTorchsFormulas) {
  // Conv2d(2, 3, 1) -> BatchNorm2d(3) -> ReLU -> Flatten -> Linear(27, 2); 3 SGD steps.
  frontend::nn::manualSeed(3);
  frontend::nn::Sequential model{std::make_shared<frontend::nn::Conv2d>(2, 3, frontend::Ints{1}),
                                 std::make_shared<frontend::nn::BatchNorm2d>(3),
                                 std::make_shared<frontend::nn::ReLU>(), std::make_shared<frontend::nn::Flatten>(),
                                 std::make_shared<frontend::nn::Linear>(27, 2)};
  frontend::GraphBuilder gb("cnn");
  auto forward = gb.finish({model(gb.input("x", DType::F32, {4, 2, 3, 3}))});
  ASSERT_EQ(gb.bufferWrites().size(), 3u);
  for (bool reference : {true, false}) {
    TrainingStep step = compileTrainingStep(*forward, LossKind::Mean, OptimizerSpec::sgd(0.5, 0.9),
                                            trainingOptions(reference, gb.bufferWrites()));
    const void *storage = step.parameter("1.running_var").data();
    std::vector<double> mean(3, 0.0), var(3, 1.0);
    for (int s = 0; s < 3; ++s) {
      // The conv output with this step's weights (before its update), per channel.
      Tensor x = cnnBatch(s);
      const Tensor &w = step.parameter("0.weight"), &bias = step.parameter("0.bias");
      for (int64_t o = 0; o < 3; ++o) {
        std::vector<double> values;
        for (int64_t n = 0; n < 4; ++n)
          for (int64_t i = 0; i < 9; ++i) {
            double acc = bias.getDouble(o);
            for (int64_t c = 0; c < 2; ++c)
              acc += w.getDouble(o * 2 + c) * x.getDouble((n * 2 + c) * 9 + i);
            values.push_back(acc);
          }
        double m = 0, ss = 0;
        for (double v : values)
          m += v / double(values.size());
        for (double v : values)
          ss += (v - m) * (v - m);
        mean[size_t(o)] = 0.9 * mean[size_t(o)] + 0.1 * m;
        var[size_t(o)] = 0.9 * var[size_t(o)] + 0.1 * ss / double(values.size() - 1);
      }
      step.run({x});
    }
    EXPECT_EQ(step.parameter("1.running_var").data(), storage) << "updated in place";
    for (int64_t k = 0; k < 3; ++k) {
      EXPECT_NEAR(step.parameter("1.running_mean").getDouble(k), mean[size_t(k)], 1e-5) << reference << " " << k;
      EXPECT_NEAR(step.parameter("1.running_var").getDouble(k), var[size_t(k)], 1e-5) << reference << " " << k;
    }
    EXPECT_EQ(step.parameter("1.num_batches_tracked").getInt(0), 3);
    // Buffers are not trained: no momentum state for them.
    EXPECT_THROW(step.parameter("1.running_mean.momentum_buffer"), Error);
  }
}

TEST(TrainingModeStep, DropoutStepCompiledMatchesTheReferenceBackend) {
  // Linear(6, 16) -> ReLU -> Dropout(0.5) -> Linear(16, 3), cross-entropy, Adam.
  frontend::nn::manualSeed(11);
  frontend::nn::Sequential model{std::make_shared<frontend::nn::Linear>(6, 16),
                                 std::make_shared<frontend::nn::ReLU>(), std::make_shared<frontend::nn::Dropout>(0.5),
                                 std::make_shared<frontend::nn::Linear>(16, 3)};
  frontend::GraphBuilder gb("dropout_mlp");
  auto forward = gb.finish({model(gb.input("x", DType::F32, {8, 6}))});
  LossSpec loss{LossKind::CrossEntropy, 0, "", "labels"};
  TrainingStep reference = compileTrainingStep(*forward, loss, OptimizerSpec::adam(0.01),
                                               trainingOptions(true, gb.bufferWrites()));
  TrainingStep compiled = compileTrainingStep(*forward, loss, OptimizerSpec::adam(0.01),
                                              trainingOptions(false, gb.bufferWrites()));
  EXPECT_EQ(compiled.inputNames(), (std::vector<std::string>{"x", "labels"})); // no extra input
  Tensor x = randomTensor({DType::F32, {8, 6}}, 2);
  Tensor labels = Tensor::fromDoubles(DType::I64, {8}, {0, 1, 2, 0, 1, 2, 0, 1});
  std::vector<float> losses;
  for (int s = 0; s < 4; ++s) {
    float want = reference.run({x, labels});
    float got = compiled.run({x, labels});
    EXPECT_NEAR(got, want, 1e-5 * std::abs(want)) << "step " << s;
    losses.push_back(want);
  }
  EXPECT_EQ(compiled.parameter("rng_offset").getInt(0), 4);
  for (const auto &[name, tensor] : reference.parameters())
    for (int64_t i = 0; i < tensor.numElements(); ++i)
      ASSERT_NEAR(compiled.parameter(name).getDouble(i), tensor.getDouble(i), 1e-5) << name << " " << i;

  // Each step draws a fresh mask: with lr 0 (nothing learns) the loss still changes per step,
  // and it repeats when the offset is set back.
  TrainingStep frozen = compileTrainingStep(*forward, loss, OptimizerSpec::sgd(0.0),
                                            trainingOptions(false, gb.bufferWrites()));
  float a = frozen.run({x, labels}), b = frozen.run({x, labels});
  EXPECT_NE(a, b);
  Tensor offset = frozen.parameter("rng_offset");
  offset.setInt(0, 0); // shares the step's storage
  EXPECT_EQ(frozen.run({x, labels}), a);
}

TEST(TrainingModeStep, OnnxDropoutInTrainingModeDrawsAFreshMaskEveryStep) {
  // x [4, 8] @ W [8, 8] -> Dropout(0.5, training_mode) -> mean. The import carries no buffer
  // writes: the training step itself advances the random offset the mask is drawn at.
  onnxtest::ModelBuilder m(13);
  m.input("x", DType::F32, {4, 8});
  m.initializer("W", randomTensor({DType::F32, {8, 8}}, 21));
  m.constant("ratio", Tensor::scalar(DType::F32, 0.5));
  m.constant("training", Tensor::scalar(DType::Bool, 1));
  m.node("MatMul", {"x", "W"}, {"h"});
  m.node("Dropout", {"h", "ratio", "training"}, {"y"});
  m.output("y", DType::F32, {4, 8});
  std::unique_ptr<ir::Graph> forward = onnxtest::import(m);
  Tensor x = randomTensor({DType::F32, {4, 8}}, 22);
  for (float lr : {0.0f, 0.1f}) {
    TrainingStep reference = compileTrainingStep(*forward, LossKind::Mean, OptimizerSpec::sgd(lr), trainingOptions(true, {}));
    TrainingStep compiled = compileTrainingStep(*forward, LossKind::Mean, OptimizerSpec::sgd(lr), trainingOptions(false, {}));
    std::vector<float> losses;
    for (int s = 0; s < 3; ++s) {
      float want = reference.run({x});
      EXPECT_NEAR(compiled.run({x}), want, 1e-5 * std::abs(want)) << "lr " << lr << " step " << s;
      losses.push_back(want);
    }
    EXPECT_EQ(compiled.parameter(ir::random::kOffsetParam).getInt(0), 3);
    EXPECT_EQ(reference.parameter(ir::random::kOffsetParam).getInt(0), 3);
    // With lr 0 nothing learns, so a changing loss is a changing mask.
    if (lr == 0.0f) {
      EXPECT_NE(losses[0], losses[1]);
      EXPECT_NE(losses[1], losses[2]);
    }
  }
}

TEST(TrainingModeStep, DropoutGradientIsTheScaledMask) {
  // loss = sum(dropout(x * w)), p = 0.25: d loss / d w = x * keep / 0.75, so one SGD step with
  // lr 1 gives w' = w - x * keep / 0.75, keep read off the forward output (x * w is nonzero).
  frontend::GraphBuilder gb("masked");
  frontend::Var x = gb.input("x", DType::F32, {2, 50});
  Tensor w0 = randomTensor({DType::F32, {2, 50}}, 8);
  frontend::nn::Dropout dropout(0.25, 99);
  auto forward = gb.finish({dropout(x * gb.param("w", w0))});
  Tensor xs = randomTensor({DType::F32, {2, 50}}, 9);
  // The first step's mask: the forward graph at offset 0, which the step also starts from.
  Tensor y = ir::evaluate(*forward, {xs}, {{"w", w0}})[0];
  for (bool reference : {true, false}) {
    TrainingOptions options = trainingOptions(reference, gb.bufferWrites());
    options.compile.params["w"] = w0.clone();
    TrainingStep step = compileTrainingStep(*forward, LossKind::Sum, OptimizerSpec::sgd(1.0), options);
    step.run({xs});
    int64_t kept = 0;
    for (int64_t i = 0; i < 100; ++i) {
      bool keep = y.getDouble(i) != 0.0;
      kept += keep;
      double want = w0.getDouble(i) - (keep ? xs.getDouble(i) / 0.75 : 0.0);
      EXPECT_NEAR(step.parameter("w").getDouble(i), want, 1e-5) << (reference ? "reference " : "compiled ") << i;
    }
    EXPECT_GT(kept, 50);
    EXPECT_LT(kept, 100);
  }
}

} // namespace
} // namespace kiln::codegen::test
