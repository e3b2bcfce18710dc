// Finite-difference checks of the contraction and window gradient rules: matmul (1-D operands,
// batch broadcasting, an operand shared over the whole batch), conv and conv_transpose (strides, asymmetric pads, dilations, groups, 1-D
// to 3-D) and
// max_pool / avg_pool (strides, pads, dilations, ceil_mode, count_include_pad).
#include <gtest/gtest.h>

#include <functional>

#include "ir/Builder.h"
#include "passes/autodiff/Autodiff.h"
#include "tests/passes/GradCheck.h"

namespace kiln::test {


namespace {

using ir::OpKind;
using Ints = std::vector<int64_t>;

TensorType f64(Shape shape) { return {DType::F64, std::move(shape)}; }

GradBuildFn op2(OpKind op, ir::AttrMap attrs = {}) {
  return [op, attrs](ir::Builder &b, const std::vector<ir::Value *> &in) {
    return b.create(op, {in[0], in[1]}, attrs);
  };
}
GradBuildFn op1(OpKind op, ir::AttrMap attrs) {
  return [op, attrs](ir::Builder &b, const std::vector<ir::Value *> &in) { return b.create(op, {in[0]}, attrs); };
}

TEST(GradContraction, MatMulShapes) {
  expectGradientsMatch({{f64({3, 4})}, {f64({4, 2})}}, op2(OpKind::MatMul));
  expectGradientsMatch({{f64({4})}, {f64({4, 3})}}, op2(OpKind::MatMul));
  expectGradientsMatch({{f64({2, 4})}, {f64({4})}}, op2(OpKind::MatMul));
  expectGradientsMatch({{f64({5})}, {f64({5})}}, op2(OpKind::MatMul));
  // Batch dims [2,1] and [3] broadcast to [2,3].
  expectGradientsMatch({{f64({2, 1, 3, 4})}, {f64({3, 4, 2})}}, op2(OpKind::MatMul));
  expectGradientsMatch({{f64({2, 3, 4})}, {f64({4})}}, op2(OpKind::MatMul));
}

TEST(GradContraction, MatMulWeightBroadcastOverBatch) {
  // The right operand shared by every batch (a weight): its gradient folds the batch into the
  // contraction. 2-D, batch dims of 1, more batch dims than the left, and a 1-D right operand.
  expectGradientsMatch({{f64({3, 2, 4})}, {f64({4, 5})}}, op2(OpKind::MatMul));
  expectGradientsMatch({{f64({2, 3, 2, 4})}, {f64({1, 1, 4, 3})}}, op2(OpKind::MatMul));
  expectGradientsMatch({{f64({3, 2, 4})}, {f64({1, 1, 4, 2})}}, op2(OpKind::MatMul));
  expectGradientsMatch({{f64({2, 3, 2, 4})}, {f64({4})}}, op2(OpKind::MatMul));
  // The left operand shared by every batch, symmetrically, also 1-D.
  expectGradientsMatch({{f64({2, 4})}, {f64({3, 4, 5})}}, op2(OpKind::MatMul));
  expectGradientsMatch({{f64({1, 2, 4})}, {f64({2, 3, 4, 2})}}, op2(OpKind::MatMul));
  expectGradientsMatch({{f64({4})}, {f64({3, 4, 2})}}, op2(OpKind::MatMul));
  // A batch of size 1 (nothing to fold) next to one that is folded.
  expectGradientsMatch({{f64({1, 3, 4})}, {f64({4, 2})}}, op2(OpKind::MatMul));
}

TEST(GradContraction, MatMulSharedOperandHasNoBatchedGradient) {
  // The folded gradient of a weight never builds the per-batch [batch, K, N] product (nor the
  // [batch, M, K] one for a shared left operand) that a sum over the batch would reduce.
  for (bool shareRight : {true, false}) {
    SCOPED_TRACE(shareRight);
    ir::Graph graph("fold");
    ir::Value *a = graph.addInput(f64(shareRight ? Shape{8, 4, 16} : Shape{4, 16}));
    ir::Value *w = graph.addInput(f64(shareRight ? Shape{16, 32} : Shape{8, 16, 32}));
    ir::Builder b(graph);
    ir::Value *loss = b.create(OpKind::ReduceSum, {b.create(OpKind::MatMul, {a, w})});
    graph.setOutputs({loss});
    std::vector<ir::Value *> grads = passes::autodiff::appendGradients(graph, loss, {a, w});
    EXPECT_EQ(grads[0]->shape(), a->shape());
    EXPECT_EQ(grads[1]->shape(), w->shape());
    Shape batched = shareRight ? Shape{8, 16, 32} : Shape{8, 4, 16};
    for (const ir::Node *node : graph.nodes())
      for (const ir::Value *output : node->outputs())
        EXPECT_NE(output->shape(), batched) << node->opName() << " builds the batched product";
  }
}

TEST(GradContraction, ConvPlain) {
  expectGradientsMatch({{f64({2, 3, 5, 5})}, {f64({4, 3, 3, 3})}}, op2(OpKind::Conv));
}

TEST(GradContraction, ConvStridesPadsDilations) {
  // Stride 2 on odd extents leaves input rows no window reaches: their gradient must be zero.
  expectGradientsMatch({{f64({1, 2, 7, 6})}, {f64({3, 2, 3, 2})}},
                       op2(OpKind::Conv, {{"strides", Ints{2, 3}}, {"pads", Ints{1, 0, 2, 1}}, {"dilations", Ints{2, 1}}}));
}

// A 2-D stride-1 conv's input gradient is the forward conv with the weight transposed and
// flipped (pads kernel - 1 - pad); strided ones keep conv_transpose. Both against differences.
TEST(GradContraction, ConvStrideOneInputGradientIsAFlippedConv) {
  expectGradientsMatch({{f64({2, 3, 5, 6})}, {f64({4, 3, 3, 2})}}, op2(OpKind::Conv, {{"pads", Ints{1, 0, 2, 1}}}));
  for (bool strided : {false, true}) {
    SCOPED_TRACE(strided);
    ir::Graph graph("conv_grad");
    ir::Value *x = graph.addInput(f64({1, 2, 6, 6}));
    ir::Value *w = graph.addInput(f64({3, 2, 3, 3}));
    ir::Builder b(graph);
    ir::AttrMap attrs{{"pads", Ints{1, 1, 1, 1}}};
    if (strided)
      attrs["strides"] = Ints{2, 2};
    ir::Value *loss = b.create(OpKind::ReduceSum, {b.create(OpKind::Conv, {x, w}, attrs)});
    graph.setOutputs({loss});
    std::vector<ir::Value *> grads = passes::autodiff::appendGradients(graph, loss, {x, w});
    ASSERT_NE(grads[0]->producer(), nullptr);
    EXPECT_EQ(grads[0]->producer()->op(), strided ? OpKind::ConvTranspose : OpKind::Conv);
    EXPECT_EQ(grads[0]->shape(), x->shape());
  }
}

TEST(GradContraction, ConvGroups) {
  expectGradientsMatch({{f64({2, 4, 5, 4})}, {f64({6, 2, 2, 3})}},
                       op2(OpKind::Conv, {{"groups", int64_t(2)}, {"strides", Ints{2, 1}}, {"pads", Ints{0, 1, 1, 1}}}));
  // Depthwise.
  expectGradientsMatch({{f64({1, 3, 4, 4})}, {f64({3, 1, 3, 3})}}, op2(OpKind::Conv, {{"groups", int64_t(3)}}));
}

TEST(GradContraction, Conv1dAnd3d) {
  expectGradientsMatch({{f64({2, 2, 9})}, {f64({3, 2, 3})}},
                       op2(OpKind::Conv, {{"strides", Ints{2}}, {"dilations", Ints{2}}, {"pads", Ints{1, 2}}}));
  expectGradientsMatch({{f64({1, 2, 4, 3, 3})}, {f64({2, 2, 2, 2, 2})}}, op2(OpKind::Conv, {{"strides", Ints{2, 1, 1}}}));
}

TEST(GradContraction, ConvTranspose) {
  expectGradientsMatch({{f64({2, 3, 3, 4})}, {f64({3, 2, 2, 3})}}, op2(OpKind::ConvTranspose));
  expectGradientsMatch({{f64({1, 4, 3, 3})}, {f64({4, 1, 3, 2})}},
                       op2(OpKind::ConvTranspose, {{"strides", Ints{2, 1}}, {"pads", Ints{1, 0, 0, 1}},
                                                   {"dilations", Ints{1, 2}}, {"output_padding", Ints{1, 0}},
                                                   {"groups", int64_t(2)}}));
  // output_padding at least the stride (allowed up to the dilation): output rows no input
  // element reaches, which x's gradient must not have (found by kiln-fuzz-compile, seed 195).
  expectGradientsMatch({{f64({2, 1, 1, 3})}, {f64({1, 2, 1, 3})}},
                       op2(OpKind::ConvTranspose, {{"dilations", Ints{1, 2}}, {"output_padding", Ints{0, 1}}}));
  expectGradientsMatch({{f64({1, 2, 4})}, {f64({2, 1, 2})}},
                       op2(OpKind::ConvTranspose, {{"dilations", Ints{3}}, {"output_padding", Ints{2}}}));
}

TEST(GradPool, MaxPool) {
  expectGradientsMatch({{f64({2, 2, 5, 5})}}, op1(OpKind::MaxPool, {{"kernel", Ints{2, 2}}, {"strides", Ints{2, 2}}}));
  expectGradientsMatch({{f64({1, 2, 6, 5})}},
                       op1(OpKind::MaxPool, {{"kernel", Ints{3, 2}}, {"strides", Ints{2, 1}}, {"pads", Ints{1, 0, 1, 1}},
                                             {"dilations", Ints{1, 2}}}));
  expectGradientsMatch({{f64({1, 1, 5, 5})}},
                       op1(OpKind::MaxPool, {{"kernel", Ints{2, 2}}, {"strides", Ints{2, 2}}, {"ceil_mode", int64_t(1)}}));
  // Overlapping windows: one element may be the maximum of several.
  expectGradientsMatch({{f64({1, 2, 6})}}, op1(OpKind::MaxPool, {{"kernel", Ints{3}}, {"strides", Ints{1}}}));
}

TEST(GradPool, AvgPool) {
  for (int64_t includePad : {0, 1}) {
    SCOPED_TRACE(includePad);
    expectGradientsMatch({{f64({2, 2, 5, 4})}},
                         op1(OpKind::AvgPool, {{"kernel", Ints{3, 2}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 0}},
                                               {"count_include_pad", includePad}}));
    expectGradientsMatch({{f64({1, 1, 5, 5})}},
                         op1(OpKind::AvgPool, {{"kernel", Ints{2, 2}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 0, 0}},
                                               {"ceil_mode", int64_t(1)}, {"count_include_pad", includePad}}));
  }
  expectGradientsMatch({{f64({2, 3, 7})}}, op1(OpKind::AvgPool, {{"kernel", Ints{3}}, {"strides", Ints{2}}}));
}

} // namespace
} // namespace kiln::test
