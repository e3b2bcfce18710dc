// appendGradients as a whole: end-to-end finite-difference checks of small models written with
// composites (an MLP with a mean loss, a conv net with cross-entropy), how gradients accumulate
// and skip non-differentiable paths, and the errors a caller can cause.
#include <gtest/gtest.h>

#include "tests/ErrorMatchers.h"

#include <functional>

#include "core/Error.h"
#include "ir/Builder.h"
#include "ir/Evaluator.h"
#include "passes/autodiff/Autodiff.h"
#include "tests/passes/GradCheck.h"

namespace kiln::test {


namespace {

using ir::OpKind;
using Ints = std::vector<int64_t>;
using passes::autodiff::appendGradients;

TensorType f64(Shape shape) { return {DType::F64, std::move(shape)}; }

using kiln::test::expectErrorContaining;

TEST(AutodiffEndToEnd, MlpWithMeanSquaredLoss) {
  // x[4,3] -> linear(5) -> relu -> linear(2) -> mse_loss against a fixed target (mean).
  expectGradientsMatch({{f64({4, 3})}, {f64({5, 3})}, {f64({5})}, {f64({2, 5})}, {f64({2})}},
                       [](ir::Builder &b, const std::vector<ir::Value *> &in) {
                         ir::Value *h = b.create(OpKind::Relu, {b.create(OpKind::Linear, {in[0], in[1], in[2]})});
                         ir::Value *out = b.create(OpKind::Linear, {h, in[3], in[4]});
                         ir::Value *target = b.constant(randomTensor(out->type(), 77));
                         return b.create(OpKind::MseLoss, {out, target});
                       },
                       5, true);
}

TEST(AutodiffEndToEnd, ConvNetWithCrossEntropy) {
  // conv(3x3, pad 1) + bias -> relu -> max_pool 2x2 -> flatten -> linear(3) -> cross_entropy.
  expectGradientsMatch(
      {{f64({2, 1, 6, 6}), false, false}, {f64({3, 1, 3, 3})}, {f64({3})}, {f64({3, 27})}, {f64({3})}},
      [](ir::Builder &b, const std::vector<ir::Value *> &in) {
        ir::Value *conv = b.create(OpKind::Conv, {in[0], in[1]}, {{"pads", Ints{1, 1, 1, 1}}});
        ir::Value *bias = b.create(OpKind::Reshape, {in[2]}, {{"shape", Ints{3, 1, 1}}});
        ir::Value *h = b.create(OpKind::Relu, {b.create(OpKind::Add, {conv, bias})});
        h = b.create(OpKind::MaxPool, {h}, {{"kernel", Ints{2, 2}}, {"strides", Ints{2, 2}}});
        h = b.create(OpKind::Flatten, {h}, {{"start", int64_t(1)}});
        ir::Value *logits = b.create(OpKind::Linear, {h, in[3], in[4]});
        ir::Value *labels = b.constant(Tensor::fromDoubles(DType::I64, {2}, {2, 0}));
        return b.create(OpKind::CrossEntropy, {logits, labels});
      },
      9, true);
}

TEST(Autodiff, ReusedValuesAccumulate) {
  expectGradientsMatch({{f64({3})}, {f64({3})}}, [](ir::Builder &b, const std::vector<ir::Value *> &in) {
    ir::Value *xy = b.create(OpKind::Mul, {in[0], in[1]});
    return b.create(OpKind::Add, {b.create(OpKind::Mul, {xy, in[0]}), b.create(OpKind::Exp, {xy})});
  });
}

TEST(Autodiff, IntegerAndIndexPathsContributeNothing) {
  // floor-like round trip through i64, and argmax feeding a gather: only the data paths count.
  expectGradientsMatch({{f64({2, 4})}}, [](ir::Builder &b, const std::vector<ir::Value *> &in) {
    ir::Value *scaled = b.create(OpKind::Mul, {in[0], b.scalar(DType::F64, 3.3)});
    ir::Value *asInt = b.create(OpKind::Cast, {scaled}, {{"to", DType::I64}});
    ir::Value *back = b.create(OpKind::Cast, {asInt}, {{"to", DType::F64}});
    ir::Value *best = b.create(OpKind::ArgMax, {in[0]}, {{"axis", int64_t(1)}});
    ir::Value *picked = b.create(OpKind::Gather, {in[0], best}, {{"axis", int64_t(1)}}); // [2,2]
    ir::Value *rowSum = b.create(OpKind::ReduceSum, {picked}, {{"axes", Ints{1}}, {"keepdims", int64_t(1)}});
    return b.create(OpKind::Add, {b.create(OpKind::Mul, {back, in[0]}), rowSum});
  });
}

TEST(Autodiff, UnrelatedAndUnreachedValues) {
  // A node without a rule (gather_nd) off the gradient path is ignored; a wrt value the loss
  // does not depend on gets zeros of its type.
  ir::Graph graph;
  ir::Value *x = graph.addInput(f64({2, 2})), *unused = graph.addInput(f64({3})), *table = graph.addInput(f64({2, 3}));
  ir::Builder b(graph);
  ir::Value *tuples = b.constant(Tensor::fromDoubles(DType::I64, {1, 2}, {1, 2}));
  ir::Value *offPath = b.create(OpKind::GatherNd, {table, tuples}); // depends on no wrt value
  ir::Value *loss = b.create(OpKind::ReduceSum, {b.create(OpKind::Mul, {x, x})});
  ir::Value *total = b.create(OpKind::Add, {loss, b.create(OpKind::ReduceSum, {offPath})});
  std::vector<ir::Value *> grads = appendGradients(graph, total, {x, unused});
  graph.setOutputs(grads);
  Tensor xv = randomTensor(f64({2, 2}), 1);
  std::vector<Tensor> got = ir::evaluate(graph, {xv, randomTensor(f64({3}), 2), randomTensor(f64({2, 3}), 3)});
  for (int64_t i = 0; i < 4; ++i)
    EXPECT_DOUBLE_EQ(got[0].getDouble(i), 2 * xv.getDouble(i));
  ASSERT_EQ(got[1].type(), f64({3}));
  for (int64_t i = 0; i < 3; ++i)
    EXPECT_EQ(got[1].getDouble(i), 0.0);
}

TEST(AutodiffErrors, OpWithoutRuleOnPathIsNamed) {
  ir::Graph graph;
  ir::Value *x = graph.addInput(f64({2, 3}));
  ir::Builder b(graph);
  ir::Value *tuples = b.constant(Tensor::fromDoubles(DType::I64, {1, 2}, {1, 2}));
  ir::Value *loss = b.create(OpKind::ReduceSum, {b.create(OpKind::GatherNd, {x, tuples})});
  expectErrorContaining([&] { appendGradients(graph, loss, {x}); }, "no gradient rule for op 'gather_nd' at node #1");
}

TEST(AutodiffErrors, CompositeAsksForDecompose) {
  ir::Graph graph;
  ir::Value *x = graph.addInput(f64({2, 3}));
  ir::Builder b(graph);
  ir::Value *loss = b.create(OpKind::ReduceSum, {b.create(OpKind::Softmax, {x}, {{"axis", int64_t(1)}})});
  expectErrorContaining([&] { appendGradients(graph, loss, {x}); }, "softmax(f64[2,3]) is a composite op; run the decompose pass");
}

TEST(AutodiffErrors, BadLossOrWrt) {
  ir::Graph graph, other;
  ir::Value *x = graph.addInput(f64({2, 3})), *i = graph.addInput({DType::I64, {2}});
  ir::Value *foreign = other.addInput(f64({}));
  ir::Builder b(graph);
  ir::Value *loss = b.create(OpKind::ReduceSum, {x});
  expectErrorContaining([&] { appendGradients(graph, x, {x}); }, "single float element, got f64[2,3]");
  expectErrorContaining([&] { appendGradients(graph, loss, {i}); }, "only float values have gradients");
  expectErrorContaining([&] { appendGradients(graph, foreign, {x}); }, "not a value of graph");
  expectErrorContaining([&] { appendGradients(graph, loss, {foreign}); }, "wrt value 0 is not a value of graph");
}

TEST(Autodiff, LossOfShapeOneAndEmptyWrt) {
  ir::Graph graph;
  ir::Value *x = graph.addInput(f64({3}));
  ir::Builder b(graph);
  ir::Value *loss = b.create(OpKind::ReduceSum, {x}, {{"keepdims", int64_t(1)}}); // f64[1]
  EXPECT_TRUE(appendGradients(graph, loss, {}).empty());
  std::vector<ir::Value *> grads = appendGradients(graph, loss, {x});
  graph.setOutputs(grads);
  std::vector<Tensor> got = ir::evaluate(graph, {randomTensor(f64({3}), 1)});
  for (int64_t k = 0; k < 3; ++k)
    EXPECT_EQ(got[0].getDouble(k), 1.0);
}

} // namespace
} // namespace kiln::test
