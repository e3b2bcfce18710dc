// sgd_update and adam_update on the reference evaluator, one and three steps, against loops of
// torch.optim's update formulas written here (in double), in f64 and f32; and the errors.
#include <gtest/gtest.h>

#include "tests/ErrorMatchers.h"

#include <cmath>
#include <functional>

#include "core/Error.h"
#include "ir/Builder.h"
#include "ir/Evaluator.h"

namespace kiln::test {

namespace {

using ir::AttrMap;
using ir::OpKind;

struct SgdConfig {
  double lr = 0.1, momentum = 0.0, dampening = 0.0, weightDecay = 0.0;
  bool nesterov = false;
};

struct AdamConfig {
  double lr = 0.01, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weightDecay = 0.0;
  bool decoupled = false;
};

std::vector<double> gradAt(int step, size_t count) {
  std::vector<double> g(count);
  for (size_t i = 0; i < count; ++i)
    g[i] = std::sin(1.7 * static_cast<double>(i) + 0.9 * step) * (1.0 + 0.25 * step);
  return g;
}

std::vector<double> initialParam(size_t count) {
  std::vector<double> p(count);
  for (size_t i = 0; i < count; ++i)
    p[i] = 0.5 - 0.3 * static_cast<double>(i % 5) + 0.01 * static_cast<double>(i);
  return p;
}

// torch.optim.SGD's step, element by element.
std::vector<double> torchSgd(const SgdConfig &c, size_t count, int steps) {
  std::vector<double> p = initialParam(count), buf(count, 0.0);
  for (int t = 1; t <= steps; ++t) {
    std::vector<double> g = gradAt(t, count);
    for (size_t i = 0; i < count; ++i) {
      double d = g[i] + c.weightDecay * p[i];
      if (c.momentum != 0.0) {
        buf[i] = t == 1 ? d : c.momentum * buf[i] + (1.0 - c.dampening) * d;
        d = c.nesterov ? d + c.momentum * buf[i] : buf[i];
      }
      p[i] -= c.lr * d;
    }
  }
  return p;
}

// torch.optim.Adam / AdamW's step (non-amsgrad), element by element.
std::vector<double> torchAdam(const AdamConfig &c, size_t count, int steps) {
  std::vector<double> p = initialParam(count), m(count, 0.0), v(count, 0.0);
  for (int t = 1; t <= steps; ++t) {
    std::vector<double> g = gradAt(t, count);
    double bc1 = 1.0 - std::pow(c.beta1, t), bc2 = 1.0 - std::pow(c.beta2, t);
    for (size_t i = 0; i < count; ++i) {
      double grad = g[i];
      if (c.decoupled)
        p[i] *= 1.0 - c.lr * c.weightDecay;
      else
        grad += c.weightDecay * p[i];
      m[i] = m[i] + (1.0 - c.beta1) * (grad - m[i]);
      v[i] = c.beta2 * v[i] + (1.0 - c.beta2) * grad * grad;
      p[i] -= c.lr / bc1 * m[i] / (std::sqrt(v[i]) / std::sqrt(bc2) + c.eps);
    }
  }
  return p;
}

std::vector<Tensor> apply(OpKind op, const std::vector<Tensor> &inputs, const AttrMap &given) {
  AttrMap attrs = ir::completeAttrs(op, given);
  std::vector<TensorType> types;
  for (const Tensor &input : inputs)
    types.push_back(input.type());
  return ir::evaluateOp(op, inputs, attrs, ir::inferTypes(op, types, attrs));
}

Tensor sgdWithOp(const SgdConfig &c, DType dtype, const Shape &shape, int steps) {
  size_t count = static_cast<size_t>(numElements(shape));
  Tensor p = Tensor::fromDoubles(dtype, shape, initialParam(count));
  Tensor buf(dtype, shape);
  buf = Tensor::fromDoubles(dtype, shape, std::vector<double>(count, 7.0)); // ignored on step 1
  AttrMap attrs{{"momentum", c.momentum},
                {"dampening", c.dampening},
                {"nesterov", int64_t(c.nesterov)},
                {"weight_decay", c.weightDecay}};
  for (int t = 1; t <= steps; ++t) {
    std::vector<Tensor> in{p, Tensor::fromDoubles(dtype, shape, gradAt(t, count)), Tensor::scalar(dtype, c.lr)};
    if (c.momentum != 0.0) {
      in.push_back(buf);
      in.push_back(Tensor::scalar(dtype, t));
    }
    std::vector<Tensor> out = apply(OpKind::SgdUpdate, in, attrs);
    EXPECT_EQ(out.size(), c.momentum != 0.0 ? 2u : 1u);
    p = out[0];
    if (c.momentum != 0.0)
      buf = out[1];
  }
  return p;
}

Tensor adamWithOp(const AdamConfig &c, DType dtype, const Shape &shape, int steps) {
  size_t count = static_cast<size_t>(numElements(shape));
  Tensor p = Tensor::fromDoubles(dtype, shape, initialParam(count));
  Tensor m(dtype, shape), v(dtype, shape);
  AttrMap attrs{{"beta1", c.beta1},
                {"beta2", c.beta2},
                {"eps", c.eps},
                {"weight_decay", c.weightDecay},
                {"decoupled", int64_t(c.decoupled)}};
  for (int t = 1; t <= steps; ++t) {
    std::vector<Tensor> out = apply(OpKind::AdamUpdate,
                                    {p, Tensor::fromDoubles(dtype, shape, gradAt(t, count)), m, v,
                                     Tensor::scalar(dtype, c.lr), Tensor::scalar(dtype, t)},
                                    attrs);
    p = out[0];
    m = out[1];
    v = out[2];
  }
  return p;
}

void expectClose(const Tensor &got, const std::vector<double> &want, double rtol, const std::string &what) {
  ASSERT_EQ(static_cast<size_t>(got.numElements()), want.size()) << what;
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_NEAR(got.getDouble(static_cast<int64_t>(i)), want[i], rtol * (1.0 + std::abs(want[i])))
        << what << " element " << i;
}

void checkSgd(const SgdConfig &c, const std::string &what) {
  for (int steps : {1, 3}) {
    Shape shape{3, 4};
    std::vector<double> want = torchSgd(c, 12, steps);
    expectClose(sgdWithOp(c, DType::F64, shape, steps), want, 1e-12, what + " f64 steps " + std::to_string(steps));
    expectClose(sgdWithOp(c, DType::F32, shape, steps), want, 1e-5, what + " f32 steps " + std::to_string(steps));
  }
}

void checkAdam(const AdamConfig &c, const std::string &what) {
  for (int steps : {1, 3}) {
    Shape shape{2, 5};
    std::vector<double> want = torchAdam(c, 10, steps);
    expectClose(adamWithOp(c, DType::F64, shape, steps), want, 1e-12, what + " f64 steps " + std::to_string(steps));
    expectClose(adamWithOp(c, DType::F32, shape, steps), want, 1e-5, what + " f32 steps " + std::to_string(steps));
  }
}

using kiln::test::expectErrorContaining;

TensorType f32(Shape shape) { return {DType::F32, std::move(shape)}; }

} // namespace

TEST(OptimizerOps, SgdPlain) { checkSgd({0.1, 0.0, 0.0, 0.0, false}, "plain"); }
TEST(OptimizerOps, SgdMomentum) { checkSgd({0.05, 0.9, 0.0, 0.0, false}, "momentum"); }
TEST(OptimizerOps, SgdMomentumWithDampeningStartsFromTheGradient) {
  // torch's first step sets buf = d (no dampening); a zero-initialised buffer would give 0.7 d.
  checkSgd({0.05, 0.9, 0.3, 0.0, false}, "dampening");
}
TEST(OptimizerOps, SgdNesterov) { checkSgd({0.05, 0.8, 0.0, 0.0, true}, "nesterov"); }
TEST(OptimizerOps, SgdWeightDecay) {
  checkSgd({0.1, 0.0, 0.0, 0.01, false}, "weight decay");
  checkSgd({0.1, 0.9, 0.0, 0.05, true}, "weight decay + nesterov");
}

TEST(OptimizerOps, Adam) { checkAdam({0.01, 0.9, 0.999, 1e-8, 0.0, false}, "adam"); }
TEST(OptimizerOps, AdamWeightDecayIsL2) { checkAdam({0.01, 0.8, 0.99, 1e-6, 0.1, false}, "adam wd"); }
TEST(OptimizerOps, AdamW) { checkAdam({0.01, 0.9, 0.999, 1e-8, 0.1, true}, "adamw"); }
TEST(OptimizerOps, AdamBetaOneZero) { checkAdam({0.01, 0.0, 0.9, 1e-8, 0.0, false}, "beta1 0"); }

TEST(OptimizerOps, ScalarAndEmptyParameters) {
  SgdConfig momentum{0.1, 0.9, 0.0, 0.0, false};
  expectClose(sgdWithOp(momentum, DType::F64, {}, 3), torchSgd(momentum, 1, 3), 1e-12, "scalar");
  EXPECT_EQ(sgdWithOp(momentum, DType::F32, {0, 3}, 2).numElements(), 0);
  AdamConfig adam;
  expectClose(adamWithOp(adam, DType::F64, {1}, 3), torchAdam(adam, 1, 3), 1e-12, "size-1");
  EXPECT_EQ(adamWithOp(adam, DType::F32, {2, 0}, 1).shape(), (Shape{2, 0}));
}

TEST(OptimizerOps, UpdatesDecomposeIntoElementwisePrimitives) {
  // The decomposition must be fusable into one kernel: no reductions, no movement on the
  // parameter-sized values.
  for (OpKind op : {OpKind::SgdUpdate, OpKind::AdamUpdate}) {
    std::vector<TensorType> in = op == OpKind::SgdUpdate
                                     ? std::vector<TensorType>{f32({4, 3}), f32({4, 3}), f32({}), f32({4, 3}), f32({})}
                                     : std::vector<TensorType>{f32({4, 3}), f32({4, 3}), f32({4, 3}), f32({4, 3}),
                                                               f32({}), f32({})};
    AttrMap attrs;
    if (op == OpKind::SgdUpdate)
      attrs = {{"momentum", 0.9}, {"nesterov", int64_t(1)}, {"weight_decay", 0.1}};
    else
      attrs = {{"weight_decay", 0.1}, {"decoupled", int64_t(1)}};
    auto graph = ir::decompositionGraph(op, in, attrs);
    for (const ir::Node *node : graph->nodes()) {
      ir::FusionKind kind = ir::opTraits(node->op()).fusion;
      bool ok = node->op() == OpKind::Constant || kind == ir::FusionKind::Elementwise ||
                kind == ir::FusionKind::Broadcast;
      EXPECT_TRUE(ok) << ir::opName(op) << " decomposes with " << node->opName();
    }
  }
}

TEST(OptimizerOps, Errors) {
  auto infer = [](OpKind op, std::vector<TensorType> in, AttrMap attrs) {
    ir::inferTypes(op, in, ir::completeAttrs(op, attrs));
  };
  expectErrorContaining([&] { infer(OpKind::SgdUpdate, {f32({3}), f32({3}), f32({})}, {{"nesterov", int64_t(1)}}); },
                        "nesterov momentum requires momentum > 0");
  expectErrorContaining(
      [&] {
        infer(OpKind::SgdUpdate, {f32({3}), f32({3}), f32({}), f32({3}), f32({})},
              {{"momentum", 0.9}, {"dampening", 0.1}, {"nesterov", int64_t(1)}});
      },
      "dampening 0");
  expectErrorContaining([&] { infer(OpKind::SgdUpdate, {f32({3}), f32({4}), f32({})}, {}); },
                        "grad must have the parameter's type f32[3], got f32[4]");
  expectErrorContaining([&] { infer(OpKind::SgdUpdate, {f32({3}), f32({3}), f32({1})}, {}); },
                        "lr must be a f32 scalar");
  expectErrorContaining([&] { infer(OpKind::SgdUpdate, {f32({3}), f32({3}), f32({})}, {{"momentum", 0.9}}); },
                        "(param, grad, lr, momentum_buffer, step)");
  expectErrorContaining(
      [&] { infer(OpKind::SgdUpdate, {f32({3}), f32({3}), f32({}), f32({3}), f32({})}, {}); }, "(param, grad, lr)");
  expectErrorContaining([&] { infer(OpKind::SgdUpdate, {f32({3}), f32({3}), f32({})}, {{"momentum", -0.5}}); },
                        "'momentum' must be a finite value >= 0");
  expectErrorContaining(
      [&] {
        infer(OpKind::SgdUpdate, {{DType::I64, {3}}, {DType::I64, {3}}, {DType::I64, {}}}, {});
      },
      "param must be floating-point");
  std::vector<TensorType> adamIn{f32({2}), f32({2}), f32({2}), f32({2}), f32({}), f32({})};
  expectErrorContaining([&] { infer(OpKind::AdamUpdate, adamIn, {{"beta2", 1.0}}); }, "'beta2' must be in [0, 1)");
  expectErrorContaining([&] { infer(OpKind::AdamUpdate, adamIn, {{"eps", -1.0}}); }, "'eps' must be");
  expectErrorContaining([&] { infer(OpKind::AdamUpdate, adamIn, {{"decoupled", int64_t(2)}}); },
                        "'decoupled' must be 0 or 1");
  adamIn[3] = f32({3});
  expectErrorContaining([&] { infer(OpKind::AdamUpdate, adamIn, {}); }, "exp_avg_sq must have the parameter's type");
  adamIn[3] = f32({2});
  adamIn[5] = {DType::F64, {}};
  expectErrorContaining([&] { infer(OpKind::AdamUpdate, adamIn, {}); }, "step must be a f32 scalar");
}

} // namespace kiln::test
