// conv_weight_grad: inference and reference evaluation against a naive loop written here from
// the definition (every weight element sums g * x over images and output positions), the
// adjoint relation with conv (<conv(x, w), g> == <w, conv_weight_grad(x, g)>), a hand-computed
// example, the text round trip, and the error cases.
#include <gtest/gtest.h>

#include "core/Error.h"
#include "tests/ir/OpTestUtil.h"

using namespace kiln;
using namespace kiln::ir;
using namespace kiln::test;

namespace {

struct Params {
  std::vector<int64_t> strides, pads, dilations;
  int64_t groups = 1;
  AttrMap convAttrs() const {
    return {{"strides", strides}, {"pads", pads}, {"dilations", dilations}, {"groups", groups}};
  }
  AttrMap attrs(const Shape &weightShape) const {
    AttrMap a = convAttrs();
    a["weight_shape"] = weightShape;
    return a;
  }
};

// Straight from the definition, for any spatial rank: gw[co][ci][k] sums, over images n and
// output positions o, g[n][co][o] * x[n][group(co)*Cg + ci][o*stride + k*dilation - padBegin].
Tensor naiveWeightGrad(const Tensor &x, const Tensor &g, const Shape &ws, const Params &p) {
  size_t sr = x.shape().size() - 2;
  int64_t cg = ws[1], perGroupOut = ws[0] / p.groups;
  Shape kernel(ws.begin() + 2, ws.end()), outSpatial(g.shape().begin() + 2, g.shape().end());
  Tensor gw(x.dtype(), ws);
  for (int64_t wi = 0; wi < gw.numElements(); ++wi) {
    Shape w = unflatten(wi, ws);
    int64_t co = w[0], c = co / perGroupOut * cg + w[1];
    double sum = 0.0;
    for (int64_t n = 0; n < x.shape()[0]; ++n)
      for (int64_t oflat = 0; oflat < numElements(outSpatial); ++oflat) {
        Shape o = unflatten(oflat, outSpatial);
        Shape xi = {n, c};
        bool inside = true;
        for (size_t d = 0; d < sr; ++d) {
          int64_t pos = o[d] * p.strides[d] + w[2 + d] * p.dilations[d] - p.pads[d];
          inside = inside && pos >= 0 && pos < x.shape()[2 + d];
          xi.push_back(pos);
        }
        if (!inside)
          continue;
        Shape gi = {n, co};
        gi.insert(gi.end(), o.begin(), o.end());
        sum += g.getDouble(flatten(gi, g.shape())) * x.getDouble(flatten(xi, x.shape()));
      }
    gw.setDouble(wi, sum);
  }
  return gw;
}

double dot(const Tensor &a, const Tensor &b) {
  double sum = 0.0;
  for (int64_t i = 0; i < a.numElements(); ++i)
    sum += a.getDouble(i) * b.getDouble(i);
  return sum;
}

struct Case {
  Shape x, w;
  Params p;
};

std::vector<Case> cases() {
  return {
      {{2, 3, 5}, {2, 3, 3}, {{1}, {0, 0}, {1}, 1}},
      {{1, 2, 9}, {3, 2, 2}, {{3}, {1, 2}, {2}, 1}},
      {{2, 2, 5, 4}, {3, 2, 3, 2}, {{2, 1}, {1, 0, 1, 1}, {1, 2}, 1}},
      {{1, 4, 5, 5}, {4, 2, 2, 2}, {{2, 2}, {0, 1, 1, 0}, {1, 1}, 2}},
      {{2, 6, 4, 5}, {6, 1, 3, 3}, {{1, 2}, {1, 1, 1, 1}, {2, 1}, 6}}, // depthwise
      {{1, 2, 4, 3, 5}, {2, 2, 2, 2, 3}, {{2, 1, 2}, {0, 1, 1, 1, 0, 0}, {1, 2, 1}, 1}},
      {{3, 2, 1, 1}, {4, 2, 1, 1}, {{1, 1}, {0, 0, 0, 0}, {1, 1}, 1}}, // size-1 planes
  };
}

// The conv's output shape for the case (from the conv op itself, checked by its own tests).
Shape gradShape(const Case &c) {
  return inferOne(OpKind::Conv, {TensorType{DType::F64, c.x}, TensorType{DType::F64, c.w}}, c.p.convAttrs()).shape;
}

TEST(OpsConvWeightGrad, HandComputedExample) {
  // x = [1, 2, 3, 4] (one image, one channel), g = [1, 10, 100] through a 2-tap kernel:
  // tap 0 sums g[o] * x[o] = 1 + 20 + 300, tap 1 sums g[o] * x[o + 1] = 2 + 30 + 400.
  Tensor x = Tensor::fromDoubles(DType::F32, {1, 1, 4}, {1, 2, 3, 4});
  Tensor g = Tensor::fromDoubles(DType::F32, {1, 1, 3}, {1, 10, 100});
  EXPECT_TRUE(near(runOp(OpKind::ConvWeightGrad, {x, g}, {{"weight_shape", Shape{1, 1, 2}}}),
                   Tensor::fromDoubles(DType::F32, {1, 1, 2}, {321, 432}), 0));
  // Pad 1 on the left: tap 0 reads x[o - 1] (padding for o = 0), tap 1 reads x[o].
  Tensor g4 = Tensor::fromDoubles(DType::F64, {1, 1, 4}, {1, 10, 100, 1000});
  Tensor x4 = Tensor::fromDoubles(DType::F64, {1, 1, 4}, {1, 2, 3, 4});
  EXPECT_TRUE(near(runOp(OpKind::ConvWeightGrad, {x4, g4},
                         {{"weight_shape", Shape{1, 1, 2}}, {"pads", std::vector<int64_t>{1, 0}}}),
                   Tensor::fromDoubles(DType::F64, {1, 1, 2}, {10 + 200 + 3000, 1 + 20 + 300 + 4000}), 0));
}

TEST(OpsConvWeightGrad, AgainstNaiveLoop) {
  uint64_t seed = 200;
  for (const Case &c : cases()) {
    for (DType dtype : {DType::F64, DType::F32}) {
      Tensor x = randomTensor({dtype, c.x}, seed++), g = randomTensor({dtype, gradShape(c)}, seed++);
      Tensor want = naiveWeightGrad(x, g, c.w, c.p);
      Tensor got = runOp(OpKind::ConvWeightGrad, {x, g}, c.p.attrs(c.w));
      EXPECT_EQ(got.shape(), c.w) << shapeToString(c.x);
      EXPECT_TRUE(near(got, want, dtype == DType::F64 ? 1e-12 : 1e-5)) << shapeToString(c.x);
    }
  }
}

TEST(OpsConvWeightGrad, AdjointOfConv) {
  // <conv(x, w), g> is linear in w, and conv_weight_grad is its gradient: the two inner
  // products agree for any w.
  uint64_t seed = 300;
  for (const Case &c : cases()) {
    Tensor x = randomTensor({DType::F64, c.x}, seed++), w = randomTensor({DType::F64, c.w}, seed++);
    Tensor g = randomTensor({DType::F64, gradShape(c)}, seed++);
    double lhs = dot(runOp(OpKind::Conv, {x, w}, c.p.convAttrs()), g);
    double rhs = dot(w, runOp(OpKind::ConvWeightGrad, {x, g}, c.p.attrs(c.w)));
    EXPECT_NEAR(lhs, rhs, 1e-10 * (1 + std::abs(lhs))) << shapeToString(c.x);
  }
}

TEST(OpsConvWeightGrad, EmptyBatchGivesZeros) {
  Tensor x(DType::F32, {0, 2, 4, 4}), g(DType::F32, {0, 3, 2, 2});
  Tensor got = runOp(OpKind::ConvWeightGrad, {x, g}, {{"weight_shape", Shape{3, 2, 3, 3}}});
  EXPECT_TRUE(near(got, Tensor::fromDoubles(DType::F32, {3, 2, 3, 3}, std::vector<double>(54, 0.0)), 0));
}

TEST(OpsConvWeightGrad, RoundTrip) {
  expectRoundTrip(OpKind::ConvWeightGrad, {f32({1, 2, 5, 5}), f32({1, 3, 3, 3})},
                  {{"strides", std::vector<int64_t>{2, 2}}, {"pads", std::vector<int64_t>{1, 1, 1, 1}},
                   {"weight_shape", Shape{3, 2, 3, 3}}});
}

TEST(OpsConvWeightGrad, Errors) {
  AttrMap w3 = {{"weight_shape", Shape{3, 2, 3, 3}}};
  EXPECT_ERROR(inferOne(OpKind::ConvWeightGrad, {f32({1, 2, 5, 5}), f32({1, 3, 2, 2})}, w3),
               "must have the conv's output shape [1,3,3,3]");
  EXPECT_ERROR(inferOne(OpKind::ConvWeightGrad, {f32({1, 2, 5, 5}), f32({1, 3, 3})}, w3), "must have the input's rank");
  EXPECT_ERROR(inferOne(OpKind::ConvWeightGrad, {f32({1, 2, 5}), f32({1, 3, 3})}, w3),
               "'weight_shape' [3,2,3,3] must have the input's rank 3");
  EXPECT_ERROR(inferOne(OpKind::ConvWeightGrad, {f32({1, 4, 5, 5}), f32({1, 3, 3, 3})}, w3),
               "must have C/groups = 4");
  EXPECT_ERROR(inferOne(OpKind::ConvWeightGrad, {f32({1, 4, 5, 5}), f32({1, 3, 3, 3})},
                        {{"weight_shape", Shape{3, 2, 3, 3}}, {"groups", int64_t{2}}}),
               "must divide both");
  EXPECT_ERROR(inferOne(OpKind::ConvWeightGrad, {f32({1, 2, 2, 2}), f32({1, 3, 1, 1})}, w3), "would be empty");
  EXPECT_ERROR(inferOne(OpKind::ConvWeightGrad, {f32({1, 2, 5, 5}), f32({1, 3, 3, 3})},
                        {{"weight_shape", Shape{3, 0, 3, 3}}}),
               "every dim >= 1");
  EXPECT_ERROR(inferOne(OpKind::ConvWeightGrad, {f32({5, 5}), f32({1, 3})}, w3), "[N, C, spatial...]");
  TensorType i32x{DType::I32, {1, 2, 5, 5}}, i32g{DType::I32, {1, 3, 3, 3}};
  EXPECT_ERROR(inferOne(OpKind::ConvWeightGrad, {i32x, i32g}, w3), "floating-point");
  EXPECT_ERROR(inferOne(OpKind::ConvWeightGrad, {f32({1, 2, 5, 5}), f32({1, 3, 3, 3})},
                        {{"weight_shape", Shape{3, 2, 3, 3}}, {"strides", std::vector<int64_t>{0, 1}}}),
               "'strides' values must be >= 1");
}

} // namespace
