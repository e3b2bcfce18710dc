// conv_transpose: inference and reference evaluation against a scatter loop written here from
// the ONNX ConvTranspose definition, the ONNX documentation examples, and the adjoint relation
// with conv (conv_transpose is conv's gradient with respect to its input).
#include <gtest/gtest.h>

#include "core/Error.h"
#include "ir/Builder.h"
#include "ir/Evaluator.h"
#include "ir/Verifier.h"
#include "tests/ir/OpTestUtil.h"

using namespace kiln;
using namespace kiln::ir;
using namespace kiln::test;

namespace {

struct Params {
  std::vector<int64_t> strides, pads, dilations, outputPadding;
  int64_t groups = 1;
  AttrMap attrs() const {
    return {{"strides", strides},
            {"pads", pads},
            {"dilations", dilations},
            {"output_padding", outputPadding},
            {"groups", groups}};
  }
  AttrMap convAttrs() const {
    return {{"strides", strides}, {"pads", pads}, {"dilations", dilations}, {"groups", groups}};
  }
};

// Straight from the definition, for any spatial rank: every input element, for every output
// channel of its group and every kernel tap, adds x * w at o = i*stride + k*dilation - padBegin.
Tensor scatterConvTranspose(const Tensor &x, const Tensor &w, const Params &p) {
  size_t sr = x.shape().size() - 2;
  int64_t cin = x.shape()[1], perGroupIn = cin / p.groups, perGroupOut = w.shape()[1];
  Shape outShape = {x.shape()[0], perGroupOut * p.groups};
  Shape kernel(w.shape().begin() + 2, w.shape().end());
  for (size_t d = 0; d < sr; ++d)
    outShape.push_back(p.strides[d] * (x.shape()[2 + d] - 1) + p.outputPadding[d] +
                       (kernel[d] - 1) * p.dilations[d] + 1 - p.pads[d] - p.pads[sr + d]);
  Tensor y(x.dtype(), outShape);
  std::vector<double> acc(static_cast<size_t>(y.numElements()), 0.0);
  for (int64_t xi = 0; xi < x.numElements(); ++xi) {
    Shape i = unflatten(xi, x.shape());
    int64_t n = i[0], c = i[1], g = c / perGroupIn;
    for (int64_t m = 0; m < perGroupOut; ++m)
      for (int64_t kflat = 0; kflat < numElements(kernel); ++kflat) {
        Shape k = unflatten(kflat, kernel);
        Shape o = {n, g * perGroupOut + m};
        bool inside = true;
        for (size_t d = 0; d < sr; ++d) {
          int64_t pos = i[2 + d] * p.strides[d] + k[d] * p.dilations[d] - p.pads[d];
          inside = inside && pos >= 0 && pos < outShape[2 + d];
          o.push_back(pos);
        }
        if (!inside)
          continue;
        Shape wi = {c, m};
        wi.insert(wi.end(), k.begin(), k.end());
        acc[static_cast<size_t>(flatten(o, outShape))] +=
            x.getDouble(xi) * w.getDouble(flatten(wi, w.shape()));
      }
  }
  for (size_t j = 0; j < acc.size(); ++j)
    y.setDouble(static_cast<int64_t>(j), acc[j]);
  return y;
}

TEST(OpsConvTranspose, OnnxDocumentationExamples) {
  // ONNX's ConvTranspose examples: a 3x3 ramp through an all-ones [1, 2, 3, 3] kernel.
  std::vector<double> ramp = {0, 1, 2, 3, 4, 5, 6, 7, 8};
  Tensor x = Tensor::fromDoubles(DType::F32, {1, 1, 3, 3}, ramp);
  Tensor w = Tensor::fromDoubles(DType::F32, {1, 2, 3, 3}, std::vector<double>(18, 1.0));
  std::vector<double> plane = {0, 1,  3,  3,  2,  //
                               3, 8,  15, 12, 7,  //
                               9, 21, 36, 27, 15, //
                               9, 20, 33, 24, 13, //
                               6, 13, 21, 15, 8};
  std::vector<double> want = plane;
  want.insert(want.end(), plane.begin(), plane.end());
  Tensor wantTensor = Tensor::fromDoubles(DType::F32, {1, 2, 5, 5}, want);
  EXPECT_TRUE(near(runOp(OpKind::ConvTranspose, {x, w}), wantTensor, 0));

  // 1-D: [0, 1, 2] through ones(3) gives the running window sums [0, 1, 3, 3, 2] per channel.
  Tensor x1 = Tensor::fromDoubles(DType::F32, {1, 1, 3}, {0, 1, 2});
  Tensor w1 = Tensor::fromDoubles(DType::F32, {1, 2, 3}, std::vector<double>(6, 1.0));
  EXPECT_TRUE(near(runOp(OpKind::ConvTranspose, {x1, w1}),
                   Tensor::fromDoubles(DType::F32, {1, 2, 5}, {0, 1, 3, 3, 2, 0, 1, 3, 3, 2}), 0));

  // Stride 2 with a [1, 1] kernel repeats each element: [1, 2, 3] -> [1, 1, 2, 2, 3, 3].
  Tensor x2 = Tensor::fromDoubles(DType::F64, {1, 1, 3}, {1, 2, 3});
  Tensor w2 = Tensor::fromDoubles(DType::F64, {1, 1, 2}, {1, 1});
  EXPECT_TRUE(near(runOp(OpKind::ConvTranspose, {x2, w2}, {{"strides", std::vector<int64_t>{2}}}),
                   Tensor::fromDoubles(DType::F64, {1, 1, 6}, {1, 1, 2, 2, 3, 3}), 0));
}

TEST(OpsConvTranspose, AgainstScatterLoop) {
  struct Case {
    Shape x, w;
    Params p;
  };
  std::vector<Case> cases = {
      {{2, 3, 5}, {3, 2, 3}, {{1}, {0, 0}, {1}, {0}, 1}},
      {{1, 2, 4}, {2, 3, 2}, {{3}, {1, 2}, {2}, {1}, 1}},
      {{2, 2, 3, 4}, {2, 3, 3, 2}, {{2, 1}, {1, 0, 1, 1}, {1, 2}, {1, 0}, 1}},
      {{1, 4, 3, 3}, {4, 1, 2, 2}, {{2, 2}, {0, 1, 1, 0}, {1, 1}, {0, 1}, 2}},
      {{1, 6, 2, 3}, {6, 2, 3, 3}, {{1, 2}, {1, 1, 1, 1}, {2, 1}, {0, 0}, 3}},
      {{1, 2, 2, 3, 2}, {2, 2, 2, 2, 3}, {{2, 1, 2}, {0, 1, 1, 1, 0, 0}, {1, 2, 1}, {1, 0, 1}, 1}},
  };
  uint64_t seed = 100;
  for (const Case &c : cases) {
    for (DType dtype : {DType::F64, DType::F32}) {
      Tensor x = randomTensor({dtype, c.x}, seed++), w = randomTensor({dtype, c.w}, seed++);
      Tensor want = scatterConvTranspose(x, w, c.p);
      Tensor got = runOp(OpKind::ConvTranspose, {x, w}, c.p.attrs());
      EXPECT_EQ(got.shape(), want.shape()) << shapeToString(c.x);
      EXPECT_TRUE(near(got, want, dtype == DType::F64 ? 1e-12 : 1e-5)) << shapeToString(c.x);
    }
  }
}

// <conv(x, w), dy> == <x, conv_transpose(dy, w)>: output_padding restores the input positions a
// strided conv never reads, so conv_transpose(dy) has x's shape.
TEST(OpsConvTranspose, IsTheAdjointOfConv) {
  struct Case {
    Shape x, w;
    Params p;
  };
  std::vector<Case> cases = {
      {{2, 3, 7}, {4, 3, 3}, {{2}, {1, 0}, {1}, {}, 1}},
      {{1, 4, 8}, {6, 2, 2}, {{3}, {0, 2}, {2}, {}, 2}},
      {{2, 2, 6, 5}, {3, 2, 3, 2}, {{2, 1}, {1, 0, 0, 1}, {1, 2}, {}, 1}},
      {{1, 4, 7, 6}, {4, 1, 3, 3}, {{2, 3}, {1, 1, 1, 1}, {1, 1}, {}, 4}},
      {{1, 2, 5, 4, 6}, {2, 2, 2, 3, 2}, {{1, 2, 2}, {0, 1, 1, 1, 0, 0}, {2, 1, 1}, {}, 1}},
  };
  uint64_t seed = 200;
  for (Case c : cases) {
    size_t sr = c.x.size() - 2;
    for (size_t d = 0; d < sr; ++d) {
      int64_t span = c.p.dilations[d] * (c.w[2 + d] - 1) + 1;
      c.p.outputPadding.push_back((c.x[2 + d] + c.p.pads[d] + c.p.pads[sr + d] - span) % c.p.strides[d]);
    }
    Tensor x = randomTensor({DType::F64, c.x}, seed++), w = randomTensor({DType::F64, c.w}, seed++);
    Tensor y = runOp(OpKind::Conv, {x, w}, c.p.convAttrs());
    Tensor dy = randomTensor(y.type(), seed++);
    Tensor dx = runOp(OpKind::ConvTranspose, {dy, w}, c.p.attrs());
    ASSERT_EQ(dx.shape(), x.shape()) << shapeToString(c.x);
    double lhs = 0, rhs = 0;
    for (int64_t i = 0; i < y.numElements(); ++i)
      lhs += y.getDouble(i) * dy.getDouble(i);
    for (int64_t i = 0; i < x.numElements(); ++i)
      rhs += x.getDouble(i) * dx.getDouble(i);
    EXPECT_NEAR(lhs, rhs, 1e-9) << shapeToString(c.x);
  }
}

TEST(OpsConvTranspose, ShapesAndEdgeCases) {
  TensorType x{DType::F32, {2, 4, 5, 6}}, w{DType::F32, {4, 3, 3, 3}};
  EXPECT_EQ(inferOne(OpKind::ConvTranspose, {x, w}).shape, (Shape{2, 3, 7, 8}));
  // stride 2: 2*(5-1) + 3 = 11, output_padding adds one more at the end.
  EXPECT_EQ(
      inferOne(OpKind::ConvTranspose, {x, w},
               {{"strides", std::vector<int64_t>{2, 2}}, {"output_padding", std::vector<int64_t>{1, 0}}})
          .shape,
      (Shape{2, 3, 12, 13}));
  // Pads crop the full output; groups multiply the output channels.
  EXPECT_EQ(inferOne(OpKind::ConvTranspose, {x, {DType::F32, {4, 3, 3, 3}}},
                     {{"pads", std::vector<int64_t>{1, 1, 1, 1}}, {"groups", int64_t(2)}})
                .shape,
            (Shape{2, 6, 5, 6}));
  // Dilation 2 spreads a 3-tap kernel over 5 positions.
  EXPECT_EQ(inferOne(OpKind::ConvTranspose, {{DType::F64, {1, 1, 4}}, {DType::F64, {1, 1, 3}}},
                     {{"dilations", std::vector<int64_t>{2}}})
                .shape,
            (Shape{1, 1, 8}));

  // An empty batch gives an empty output; a size-1 input spatial dim gives the kernel's extent.
  Tensor empty = runOp(OpKind::ConvTranspose, {Tensor(DType::F32, {0, 2, 3}), Tensor(DType::F32, {2, 1, 2})});
  EXPECT_EQ(empty.shape(), (Shape{0, 1, 4}));
  Tensor single = Tensor::fromDoubles(DType::F32, {1, 1, 1, 1}, {2});
  Tensor kernel = Tensor::fromDoubles(DType::F32, {1, 1, 2, 2}, {1, 2, 3, 4});
  EXPECT_TRUE(near(runOp(OpKind::ConvTranspose, {single, kernel}),
                   Tensor::fromDoubles(DType::F32, {1, 1, 2, 2}, {2, 4, 6, 8}), 0));
  // No input channels: nothing is scattered, the output is zeros.
  Tensor none = runOp(OpKind::ConvTranspose, {Tensor(DType::F32, {1, 0, 2}), Tensor(DType::F32, {0, 2, 2})});
  EXPECT_TRUE(none.identical(Tensor(DType::F32, {1, 2, 3})));
}

TEST(OpsConvTranspose, Errors) {
  TensorType x{DType::F32, {1, 4, 5, 5}}, w{DType::F32, {4, 2, 3, 3}};
  auto infer = [&](TensorType a, TensorType b, AttrMap attrs = {}) {
    return [=] { inferOne(OpKind::ConvTranspose, {a, b}, attrs); };
  };
  expectError(infer({DType::F32, {4, 5}}, w), "1 to 3 spatial dims");
  TensorType rank6{DType::F32, {1, 1, 1, 1, 1, 1}};
  expectError(infer(rank6, rank6), "1 to 3 spatial dims");
  expectError(infer(x, {DType::F32, {4, 2, 3}}), "must have the input's rank");
  expectError(infer(x, {DType::F32, {3, 2, 3, 3}}), "one per input channel");
  expectError(infer(x, w, {{"groups", int64_t(3)}}), "groups 3 must divide the input channels 4");
  expectError(infer(x, w, {{"groups", int64_t(0)}}), "'groups' must be >= 1");
  expectError(infer(x, w, {{"strides", std::vector<int64_t>{0, 1}}}), "'strides' values must be >= 1");
  expectError(infer(x, w, {{"strides", std::vector<int64_t>{1}}}), "'strides' needs 2 values");
  expectError(infer(x, w, {{"dilations", std::vector<int64_t>{1, 0}}}), "'dilations' values must be >= 1");
  expectError(infer(x, w, {{"pads", std::vector<int64_t>{1, 1}}}), "'pads' needs 4 values");
  expectError(infer(x, w, {{"pads", std::vector<int64_t>{0, 0, -1, 0}}}), "'pads' values must be >= 0");
  expectError(infer(x, w, {{"output_padding", std::vector<int64_t>{0, -1}}}),
              "'output_padding' values must be >= 0");
  expectError(infer(x, w, {{"output_padding", std::vector<int64_t>{1}}}), "'output_padding' needs 2 values");
  expectError(infer(x, w, {{"pads", std::vector<int64_t>{4, 0, 4, 0}}}), "output size would be -1");
  expectError(infer(x, {DType::F32, {4, 2, 0, 3}}), "empty kernel dim");
  expectError(infer({DType::I32, {1, 4, 5, 5}}, {DType::I32, {4, 2, 3, 3}}), "floating-point");
  expectError(infer(x, {DType::F64, {4, 2, 3, 3}}), "dtype");
  expectError(infer(x, w, {{"strides", std::vector<int64_t>{int64_t(1) << 62, 1}}}), "overflows");
  expectError([&] { inferOne(OpKind::ConvTranspose, {x}); }, "expects 2 inputs");
  expectError(
      [&] {
        inferOne(OpKind::ConvTranspose, {x, w}, {{"kernel", std::vector<int64_t>{3, 3}}});
      },
      "unknown attribute 'kernel'");
}

TEST(OpsConvTranspose, PrintsAndParsesBack) {
  expectRoundTrip(OpKind::ConvTranspose, {{DType::F32, {1, 2, 5, 5}}, {DType::F32, {2, 3, 3, 3}}},
                  {{"strides", std::vector<int64_t>{2, 2}},
                   {"pads", std::vector<int64_t>{1, 0, 1, 0}},
                   {"output_padding", std::vector<int64_t>{1, 1}}});
  expectRoundTrip(OpKind::ConvTranspose, {{DType::F64, {1, 4, 3}}, {DType::F64, {4, 1, 2}}},
                  {{"groups", int64_t(2)}, {"dilations", std::vector<int64_t>{3}}});
}

} // namespace
