// buildTrainingGraph on the reference evaluator: one SGD and one Adam step of a linear model
// against closed forms, the loss kinds, the output manifest, the update order and the errors.
#include <gtest/gtest.h>

#include "tests/ErrorMatchers.h"

#include <cmath>
#include <functional>
#include <unordered_map>

#include "core/Error.h"
#include "ir/Builder.h"
#include "ir/Evaluator.h"
#include "passes/autodiff/TrainingGraph.h"

namespace kiln::test {

namespace {

using ir::OpKind;
using passes::autodiff::buildTrainingGraph;
using passes::autodiff::LossKind;
using passes::autodiff::LossSpec;
using passes::autodiff::OptimizerSpec;
using passes::autodiff::TrainingGraph;

constexpr int64_t kRows = 4, kIn = 3, kOut = 2;

Tensor xValues(DType dtype = DType::F32) {
  std::vector<double> x;
  for (int64_t i = 0; i < kRows * kIn; ++i)
    x.push_back(0.25 * static_cast<double>(i % 7) - 0.6);
  return Tensor::fromDoubles(dtype, {kRows, kIn}, x);
}

Tensor wValues(DType dtype = DType::F32) {
  std::vector<double> w;
  for (int64_t i = 0; i < kIn * kOut; ++i)
    w.push_back(0.1 * static_cast<double>(i) - 0.2);
  return Tensor::fromDoubles(dtype, {kIn, kOut}, w);
}

/// y = x · w, x [4,3] input, w [3,2] param "w" (and an unused frozen i64 param "count").
std::unique_ptr<ir::Graph> linearModel(DType dtype = DType::F32) {
  auto graph = std::make_unique<ir::Graph>("linear");
  ir::Builder b(*graph);
  ir::Value *x = graph->addInput({dtype, {kRows, kIn}}, "x");
  ir::Value *w = b.param("w", {dtype, {kIn, kOut}}, wValues(dtype));
  b.param("count", {DType::I64, {}}, Tensor::scalar(DType::I64, 3));
  graph->setOutputs({b.create(OpKind::MatMul, {x, w})});
  return graph;
}

std::vector<Tensor> runStep(const TrainingGraph &training, std::vector<Tensor> inputs, double lr, int step,
                            const ir::ParamValues &params = {}) {
  inputs.push_back(Tensor::scalar(DType::F32, lr));
  inputs.push_back(Tensor::scalar(DType::F32, step));
  return ir::evaluate(*training.graph, inputs, params);
}

using kiln::test::expectErrorContaining;

} // namespace

TEST(TrainingGraph, OneSgdStepOfALinearModelMatchesTheClosedForm) {
  // loss = mean(x · w) = (1 / (N * O)) sum_n sum_k sum_j x[n,k] w[k,j], so
  // d loss / d w[k,j] = (1 / (N * O)) sum_n x[n,k] for every j.
  for (DType dtype : {DType::F64, DType::F32}) {
    auto forward = linearModel(dtype);
    TrainingGraph training = buildTrainingGraph(*forward, {LossKind::Mean}, OptimizerSpec::sgd(0.5));
    ASSERT_EQ(training.updates.size(), 1u);
    EXPECT_EQ(training.updates[0].name, "w");
    EXPECT_EQ(training.updates[0].output, 1u);
    EXPECT_EQ(training.graph->outputs().size(), 2u);
    std::vector<Tensor> out = runStep(training, {xValues(dtype)}, 0.5, 1);

    Tensor x = xValues(dtype), w = wValues(dtype);
    double loss = 0.0;
    std::vector<double> columnSums(kIn, 0.0);
    for (int64_t n = 0; n < kRows; ++n)
      for (int64_t k = 0; k < kIn; ++k) {
        columnSums[static_cast<size_t>(k)] += x.getDouble(n * kIn + k);
        for (int64_t j = 0; j < kOut; ++j)
          loss += x.getDouble(n * kIn + k) * w.getDouble(k * kOut + j);
      }
    loss /= kRows * kOut;
    double tolerance = dtype == DType::F64 ? 1e-12 : 1e-6;
    EXPECT_NEAR(out[0].getDouble(0), loss, tolerance);
    for (int64_t k = 0; k < kIn; ++k)
      for (int64_t j = 0; j < kOut; ++j) {
        double want = w.getDouble(k * kOut + j) - 0.5 * columnSums[static_cast<size_t>(k)] / (kRows * kOut);
        EXPECT_NEAR(out[1].getDouble(k * kOut + j), want, tolerance) << k << "," << j;
      }
  }
}

TEST(TrainingGraph, FirstAdamStepMovesEachWeightByTheLearningRate) {
  // Step 1: m_hat = g and v_hat = g^2, so the update is lr * g / (|g| + eps) = lr * sign(g).
  auto forward = linearModel(DType::F64);
  TrainingGraph training = buildTrainingGraph(*forward, {LossKind::Sum}, OptimizerSpec::adam(0.01));
  ASSERT_EQ(training.updates.size(), 3u);
  EXPECT_EQ(training.updates[1].name, "w.exp_avg");
  EXPECT_EQ(training.updates[2].name, "w.exp_avg_sq");
  EXPECT_TRUE(training.updates[1].isState);
  EXPECT_EQ(training.updates[2].param, "w");
  std::vector<Tensor> out = runStep(training, {xValues(DType::F64)}, 0.01, 1);
  Tensor x = xValues(DType::F64), w = wValues(DType::F64);
  for (int64_t k = 0; k < kIn; ++k) {
    double g = 0.0; // d sum(x w) / d w[k,j] = sum_n x[n,k]
    for (int64_t n = 0; n < kRows; ++n)
      g += x.getDouble(n * kIn + k);
    for (int64_t j = 0; j < kOut; ++j) {
      EXPECT_NEAR(out[1].getDouble(k * kOut + j), w.getDouble(k * kOut + j) - 0.01 * (g > 0 ? 1 : -1), 1e-9);
      EXPECT_NEAR(out[2].getDouble(k * kOut + j), 0.1 * g, 1e-12);        // exp_avg
      EXPECT_NEAR(out[3].getDouble(k * kOut + j), 0.001 * g * g, 1e-12);  // exp_avg_sq
    }
  }
}

TEST(TrainingGraph, LossKindsAddTheirTargetInput) {
  auto forward = linearModel(DType::F64);
  Tensor x = xValues(DType::F64);
  Tensor y = ir::evaluate(*forward, {x})[0];

  TrainingGraph mse = buildTrainingGraph(*forward, {LossKind::Mse}, OptimizerSpec::sgd(0.1));
  ASSERT_EQ(mse.targetInput, 1);
  EXPECT_EQ(mse.graph->inputs()[1]->name(), "target");
  EXPECT_EQ(mse.graph->inputs()[1]->type(), y.type());
  EXPECT_EQ(mse.lrInput, 2u);
  EXPECT_EQ(mse.stepInput, 3u);
  Tensor target = Tensor::fromDoubles(DType::F64, {kRows, kOut}, std::vector<double>(kRows * kOut, 0.5));
  double want = 0.0;
  for (int64_t i = 0; i < kRows * kOut; ++i)
    want += (y.getDouble(i) - 0.5) * (y.getDouble(i) - 0.5);
  EXPECT_NEAR(runStep(mse, {x, target}, 0.1, 1)[0].getDouble(0), want / (kRows * kOut), 1e-12);

  LossSpec ce{LossKind::CrossEntropy, 0, "", "labels"};
  TrainingGraph crossEntropy = buildTrainingGraph(*forward, ce, OptimizerSpec::sgd(0.1));
  EXPECT_EQ(crossEntropy.graph->inputs()[1]->name(), "labels");
  EXPECT_EQ(crossEntropy.graph->inputs()[1]->type(), (TensorType{DType::I64, {kRows}}));
  Tensor labels = Tensor::fromDoubles(DType::I64, {kRows}, {0, 1, 1, 0});
  want = 0.0;
  for (int64_t n = 0; n < kRows; ++n) {
    double a = y.getDouble(n * 2), c = y.getDouble(n * 2 + 1);
    double picked = labels.getInt(n) == 0 ? a : c;
    want += std::log(std::exp(a) + std::exp(c)) - picked;
  }
  EXPECT_NEAR(runStep(crossEntropy, {x, labels}, 0.1, 1)[0].getDouble(0), want / kRows, 1e-12);

  TrainingGraph sum = buildTrainingGraph(*forward, {LossKind::Sum}, OptimizerSpec::sgd(0.1));
  EXPECT_EQ(sum.targetInput, -1);
  double total = 0.0;
  for (int64_t i = 0; i < kRows * kOut; ++i)
    total += y.getDouble(i);
  EXPECT_NEAR(runStep(sum, {x}, 0.1, 1)[0].getDouble(0), total, 1e-12);
}

TEST(TrainingGraph, UpdatesComeAfterEveryOtherReaderOfTheirParameter) {
  auto forward = linearModel();
  TrainingGraph training =
      buildTrainingGraph(*forward, {LossKind::Mean}, OptimizerSpec::sgd(0.1, 0.9, true, 0.01));
  ASSERT_EQ(training.updates.size(), 2u);
  EXPECT_EQ(training.updates[1].name, "w.momentum_buffer");
  std::vector<ir::Node *> nodes = training.graph->nodes();
  std::unordered_map<const ir::Node *, size_t> position;
  for (size_t i = 0; i < nodes.size(); ++i)
    position[nodes[i]] = i;
  size_t checked = 0;
  for (const auto &update : training.updates) {
    const ir::Node *writer = training.graph->outputs()[update.output]->producer();
    ASSERT_EQ(writer->op(), OpKind::SgdUpdate);
    for (ir::Node *param : training.graph->params()) {
      if (param->attrString("name") != update.name)
        continue;
      for (const ir::Use &use : param->output()->uses()) {
        EXPECT_LE(position.at(use.user), position.at(writer)) << update.name;
        ++checked;
      }
    }
  }
  EXPECT_GE(checked, 3u); // w: matmul's gradient and forward, the update; the buffer: the update
}

TEST(TrainingGraph, TrainsOnlyTheNamedFloatParameters) {
  // The default trains every float parameter: w, not the i64 "count".
  TrainingGraph all = buildTrainingGraph(*linearModel(), {LossKind::Mean}, OptimizerSpec::sgd(0.1));
  EXPECT_EQ(all.trainedParams(), std::vector<std::string>{"w"});
  // A float parameter the loss does not read is skipped by default, an error when named.
  auto extra = linearModel();
  ir::Builder b(*extra);
  b.param("unused", {DType::F32, {2}}, Tensor(DType::F32, {2}));
  TrainingGraph skipped = buildTrainingGraph(*extra, {LossKind::Mean}, OptimizerSpec::sgd(0.1, 0.9, false, 0.1));
  EXPECT_EQ(skipped.trainedParams(), std::vector<std::string>{"w"});
  ASSERT_EQ(skipped.gradients.size(), 1u);
  EXPECT_EQ(skipped.gradients[0]->type(), (TensorType{DType::F32, {kIn, kOut}}));
  expectErrorContaining(
      [&] { buildTrainingGraph(*extra, {LossKind::Mean}, OptimizerSpec::sgd(0.1), {"w", "unused"}); },
      "the loss does not depend on parameter 'unused'");
  expectErrorContaining([&] { buildTrainingGraph(*linearModel(), {LossKind::Mean}, OptimizerSpec::sgd(0.1), {"v"}); },
                        "has no parameter 'v'");
  expectErrorContaining(
      [&] { buildTrainingGraph(*linearModel(), {LossKind::Mean}, OptimizerSpec::sgd(0.1), {"count"}); },
      "only float parameters can be trained");
  expectErrorContaining(
      [&] { buildTrainingGraph(*linearModel(), {LossKind::Mean}, OptimizerSpec::sgd(0.1), {"w", "w"}); },
      "listed twice");
}

// The loss and a buffer write find forward outputs by the outputs' names, which need not be
// their values' (an ONNX output made by an Identity returns its operand's value).
TEST(TrainingGraph, FindsOutputsByTheirOwnNames) {
  auto forward = linearModel();
  forward->outputs()[0]->setName("h");
  forward->setOutputName(0, "logits");
  ir::Builder b(*forward);
  ir::Value *running = b.param("running", {DType::F32, {kIn, kOut}}, wValues());
  ir::Value *next = b.create(OpKind::Mul, {running, b.scalar(DType::F32, 0.5)});
  next->setName("tmp");
  forward->addOutput(next, "next");
  TrainingGraph training =
      buildTrainingGraph(*forward, {LossKind::Mean, 1, "logits"}, OptimizerSpec::sgd(0.1), {}, {{"next", "running"}});
  EXPECT_EQ(training.trainedParams(), std::vector<std::string>{"w"});
  ASSERT_EQ(training.updates.size(), 2u);
  EXPECT_EQ(training.updates[1].name, "running");
  expectErrorContaining(
      [&] { buildTrainingGraph(*forward, {LossKind::Mean, 0, "h"}, OptimizerSpec::sgd(0.1)); }, "no output named 'h'");
}

TEST(TrainingGraph, Errors) {
  auto forward = linearModel();
  expectErrorContaining([&] { buildTrainingGraph(*forward, {LossKind::Value}, OptimizerSpec::sgd(0.1)); },
                        "a Value loss must hold one element");
  expectErrorContaining([&] { buildTrainingGraph(*forward, {LossKind::Mean, 3}, OptimizerSpec::sgd(0.1)); },
                        "the loss reads output 3");
  expectErrorContaining([&] { buildTrainingGraph(*forward, {LossKind::Mean, 0, "nope"}, OptimizerSpec::sgd(0.1)); },
                        "no output named 'nope'");
  expectErrorContaining([&] { buildTrainingGraph(*forward, {LossKind::Mean}, OptimizerSpec::sgd(0.1, 0.0, true)); },
                        "nesterov momentum requires momentum > 0");
  expectErrorContaining([&] { buildTrainingGraph(*forward, {LossKind::Mean}, OptimizerSpec::sgd(-1.0)); },
                        "learning rate must be a finite value >= 0");
  expectErrorContaining([&] { buildTrainingGraph(*forward, {LossKind::Mean}, OptimizerSpec::adam(0.1, 1.0)); },
                        "betas must be in [0, 1)");
  expectErrorContaining(
      [&] { buildTrainingGraph(*forward, {LossKind::Mse, 0, "", "x"}, OptimizerSpec::sgd(0.1)); },
      "already has an input named 'x'");
  // A forward graph that already has the state's name as a parameter.
  auto clash = linearModel();
  ir::Builder b(*clash);
  b.param("w.exp_avg", {DType::F32, {1}}, Tensor(DType::F32, {1}));
  expectErrorContaining([&] { buildTrainingGraph(*clash, {LossKind::Mean}, OptimizerSpec::adam(0.1), {"w"}); },
                        "optimizer state 'w.exp_avg' is already a parameter");
  // Buffer writes: the written parameter is not trained; naming it as trained is an error.
  auto stats = linearModel();
  ir::Builder sb(*stats);
  ir::Value *running = sb.param("running", {DType::F32, {kIn, kOut}}, wValues());
  ir::Value *next = sb.create(OpKind::Mul, {running, sb.param("w2", {DType::F32, {}}, Tensor::scalar(DType::F32, 2))});
  next->setName("next");
  stats->addOutput(next);
  TrainingGraph withBuffer = buildTrainingGraph(*stats, {LossKind::Mean}, OptimizerSpec::sgd(0.1), {}, {{"next", "running"}});
  EXPECT_EQ(withBuffer.trainedParams(), std::vector<std::string>{"w"});
  ASSERT_EQ(withBuffer.updates.size(), 2u);
  EXPECT_EQ(withBuffer.updates[1].name, "running");
  EXPECT_TRUE(withBuffer.updates[1].isState);
  EXPECT_EQ(withBuffer.graph->outputs().size(), 3u);
  expectErrorContaining(
      [&] { buildTrainingGraph(*stats, {LossKind::Mean}, OptimizerSpec::sgd(0.1), {"w", "running"}, {{"next", "running"}}); },
      "parameter 'running' is both trained and written by a buffer write");
  expectErrorContaining(
      [&] {
        buildTrainingGraph(*stats, {LossKind::Mean}, OptimizerSpec::sgd(0.1), {}, {{"next", "running"}, {"next", "running"}});
      },
      "written by two buffer writes");
  // Cross-entropy needs [N, C] scores.
  auto flat = std::make_unique<ir::Graph>("flat");
  ir::Builder fb(*flat);
  ir::Value *v = fb.param("v", {DType::F32, {5}}, Tensor(DType::F32, {5}));
  flat->setOutputs({fb.create(OpKind::Exp, {v})});
  expectErrorContaining([&] { buildTrainingGraph(*flat, {LossKind::CrossEntropy}, OptimizerSpec::sgd(0.1)); },
                        "needs [N, C] scores");
}

} // namespace kiln::test
