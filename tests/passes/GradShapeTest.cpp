// Finite-difference checks of the gradient rules that move or reduce elements: reductions,
// cumsum, topk, the movement ops (and the movement composites, through decompose), and the
// indexing ops.
#include <gtest/gtest.h>

#include <functional>

#include "ir/Builder.h"
#include "tests/passes/GradCheck.h"

namespace kiln::test {


namespace {

using ir::OpKind;
using Ints = std::vector<int64_t>;

TensorType f64(Shape shape) { return {DType::F64, std::move(shape)}; }

GradBuildFn op1(OpKind op, ir::AttrMap attrs) {
  return [op, attrs](ir::Builder &b, const std::vector<ir::Value *> &in) { return b.create(op, {in[0]}, attrs); };
}

ir::Value *indexConstant(ir::Builder &b, Shape shape, const std::vector<double> &values) {
  return b.constant(Tensor::fromDoubles(DType::I64, std::move(shape), values));
}

TEST(GradReduce, SumMaxMinProdOverAxes) {
  for (OpKind op : {OpKind::ReduceSum, OpKind::ReduceMax, OpKind::ReduceMin, OpKind::ReduceProd}) {
    SCOPED_TRACE(std::string(ir::opName(op)));
    expectGradientsMatch({{f64({2, 3, 4})}}, op1(op, {{"axes", Ints{1}}}));
    expectGradientsMatch({{f64({2, 3, 4})}}, op1(op, {{"axes", Ints{-1, 0}}, {"keepdims", int64_t(1)}}));
    expectGradientsMatch({{f64({3, 2})}}, op1(op, {})); // every axis, to a scalar
  }
}

TEST(GradReduce, MaxTiesShareTheGradient) {
  // max over [a, a]: each copy gets half, so d/da sum(max) = 1 (the finite difference agrees).
  expectGradientsMatch({{f64({3, 1})}}, [](ir::Builder &b, const std::vector<ir::Value *> &in) {
    ir::Value *twice = b.create(OpKind::Concat, {in[0], in[0]}, {{"axis", int64_t(1)}});
    return b.create(OpKind::ReduceMax, {twice}, {{"axes", Ints{1}}});
  });
}

TEST(GradReduce, MeanThroughDecompose) {
  expectGradientsMatch({{f64({2, 5})}}, op1(OpKind::ReduceMean, {{"axes", Ints{1}}}), 3, true);
}

TEST(GradSequence, CumSumBothDirections) {
  for (int64_t exclusive : {0, 1})
    for (int64_t reverse : {0, 1})
      expectGradientsMatch({{f64({3, 4})}},
                           op1(OpKind::CumSum, {{"axis", int64_t(1)}, {"exclusive", exclusive}, {"reverse", reverse}}));
}

TEST(GradSequence, TopKValues) {
  expectGradientsMatch({{f64({3, 5})}}, [](ir::Builder &b, const std::vector<ir::Value *> &in) {
    return b.createMulti(OpKind::TopK, {in[0]}, {{"k", int64_t(2)}, {"axis", int64_t(1)}})[0];
  });
}

TEST(GradMovement, ReshapePermuteBroadcast) {
  expectGradientsMatch({{f64({2, 6})}}, op1(OpKind::Reshape, {{"shape", Ints{3, 2, 2}}}));
  expectGradientsMatch({{f64({2, 3, 4})}}, op1(OpKind::Permute, {{"perm", Ints{2, 0, 1}}}));
  expectGradientsMatch({{f64({3, 1})}}, op1(OpKind::Broadcast, {{"shape", Ints{2, 3, 4}}}));
  expectGradientsMatch({{f64({})}}, op1(OpKind::Broadcast, {{"shape", Ints{2, 2}}}));
}

TEST(GradMovement, Slice) {
  expectGradientsMatch({{f64({4, 5})}}, op1(OpKind::Slice, {{"starts", Ints{1, -4}}, {"ends", Ints{3, 100}}}));
  expectGradientsMatch({{f64({4, 7})}}, op1(OpKind::Slice, {{"starts", Ints{1}}, {"ends", Ints{7}},
                                                            {"axes", Ints{-1}}, {"steps", Ints{2}}}));
  expectGradientsMatch({{f64({6})}}, op1(OpKind::Slice, {{"starts", Ints{-1}}, {"ends", Ints{-100}}, {"steps", Ints{-2}}}));
  expectGradientsMatch({{f64({3, 2})}}, op1(OpKind::Slice, {{"starts", Ints{2}}, {"ends", Ints{2}}})); // empty
}

TEST(GradMovement, PadEveryMode) {
  expectGradientsMatch({{f64({2, 3})}}, op1(OpKind::Pad, {{"pads", Ints{1, 0, 2, 1}}, {"value", 2.5}}));
  expectGradientsMatch({{f64({3, 4})}}, op1(OpKind::Pad, {{"pads", Ints{-1, 1, 0, -2}}}));
  expectGradientsMatch({{f64({3, 4})}}, op1(OpKind::Pad, {{"pads", Ints{2, 1, 1, 3}}, {"mode", std::string("reflect")}}));
  expectGradientsMatch({{f64({2, 3})}}, op1(OpKind::Pad, {{"pads", Ints{1, 2, 2, 1}}, {"mode", std::string("edge")}}));
}

TEST(GradMovement, ConcatAndSplit) {
  expectGradientsMatch({{f64({2, 1})}, {f64({2, 3})}, {f64({2, 2})}},
                       [](ir::Builder &b, const std::vector<ir::Value *> &in) {
                         return b.create(OpKind::Concat, in, {{"axis", int64_t(-1)}});
                       });
  // Only the second output reaches the loss: the others get zeros.
  expectGradientsMatch({{f64({7, 2})}}, [](ir::Builder &b, const std::vector<ir::Value *> &in) {
    return b.createMulti(OpKind::Split, {in[0]}, {{"axis", int64_t(0)}, {"sizes", Ints{2, 3, 2}}})[1];
  });
  expectGradientsMatch({{f64({2, 5})}}, [](ir::Builder &b, const std::vector<ir::Value *> &in) {
    auto parts = b.createMulti(OpKind::Split, {in[0]}, {{"axis", int64_t(1)}, {"sizes", Ints{2, 3}}});
    ir::Value *second = b.create(OpKind::ReduceSum, {parts[1]}, {{"axes", Ints{1}}, {"keepdims", int64_t(1)}});
    return b.create(OpKind::Mul, {parts[0], second});
  });
}

TEST(GradMovement, CompositesThroughDecompose) {
  expectGradientsMatch({{f64({2, 1, 3})}}, op1(OpKind::Squeeze, {{"axes", Ints{1}}}), 1, true);
  expectGradientsMatch({{f64({2, 3})}}, op1(OpKind::Unsqueeze, {{"axes", Ints{0, -1}}}), 1, true);
  expectGradientsMatch({{f64({2, 3, 2})}}, op1(OpKind::Flatten, {{"start", int64_t(1)}}), 1, true);
}

TEST(GradIndexing, GatherWithRepeatedAndNegativeIndices) {
  expectGradientsMatch({{f64({3, 4, 2})}}, [](ir::Builder &b, const std::vector<ir::Value *> &in) {
    ir::Value *indices = indexConstant(b, {2, 3}, {0, 3, -1, 1, 1, 0});
    return b.create(OpKind::Gather, {in[0], indices}, {{"axis", int64_t(1)}});
  });
  expectGradientsMatch({{f64({5, 3})}}, [](ir::Builder &b, const std::vector<ir::Value *> &in) {
    return b.create(OpKind::Gather, {in[0], indexConstant(b, {}, {2})}); // scalar index: drops the axis
  });
}

TEST(GradIndexing, GatherElementsAndScatterAdd) {
  expectGradientsMatch({{f64({3, 4})}}, [](ir::Builder &b, const std::vector<ir::Value *> &in) {
    ir::Value *indices = indexConstant(b, {2, 4}, {0, 2, 2, 1, 1, 1, 0, 2});
    return b.create(OpKind::GatherElements, {in[0], indices}, {{"axis", int64_t(0)}});
  });
  expectGradientsMatch({{f64({3, 4})}, {f64({2, 3})}}, [](ir::Builder &b, const std::vector<ir::Value *> &in) {
    ir::Value *indices = indexConstant(b, {2, 3}, {0, 3, 3, 1, 0, 2});
    return b.create(OpKind::ScatterAdd, {in[0], indices, in[1]}, {{"axis", int64_t(1)}});
  });
}

} // namespace
} // namespace kiln::test
