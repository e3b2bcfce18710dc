// max_pool_grad: inference and reference evaluation against a naive loop written here from the
// definition (every window's ties share its g evenly, padding taps excluded), hand-computed
// examples (ties, an all-padding window, a NaN max), the geometries the gradient rule meets
// (LeNet's 2x2 stride 2, ResNet's overlapping 3x3 stride 2 pad 1, ceil_mode, dilation, 1-D and
// 3-D), against the naive sums rounded once, the text round trip, and the error cases.
#include <gtest/gtest.h>

#include <cmath>

#include "core/Error.h"
#include "tests/ir/OpTestUtil.h"

using namespace kiln;
using namespace kiln::ir;
using namespace kiln::test;

namespace {

using Ints = std::vector<int64_t>;

// Straight from the definition, for any spatial rank, in double: for each (n, c) and output
// position o, the taps o*stride - padBegin + k*dilation inside x whose value equals y[o] share
// g[o] evenly. Returns the unrounded sums.
std::vector<double> naiveMaxPoolGrad(const Tensor &x, const Tensor &y, const Tensor &g, const AttrMap &attrs) {
  const Shape &xs = x.shape(), &ys = y.shape();
  size_t spatial = xs.size() - 2;
  auto attrOr = [&](const char *name, int64_t fallback) {
    Ints values = attrs.count(name) ? std::get<Ints>(attrs.at(name)) : Ints{};
    if (values.empty())
      values.assign(spatial, fallback);
    return values;
  };
  Ints kernel = std::get<Ints>(attrs.at("kernel")), strides = attrOr("strides", 1), dilations = attrOr("dilations", 1);
  Ints pads = attrs.count("pads") ? std::get<Ints>(attrs.at("pads")) : Ints{};
  if (pads.empty())
    pads.assign(2 * spatial, 0); // [begin..., end...]; only the begins matter here
  Shape outSpatial(ys.begin() + 2, ys.end());
  std::vector<double> dx(static_cast<size_t>(x.numElements()), 0.0);
  for (int64_t yi = 0; yi < y.numElements(); ++yi) {
    Shape o = unflatten(yi, ys);
    std::vector<int64_t> ties;
    for (int64_t k = 0; k < numElements(Shape(kernel.begin(), kernel.end())); ++k) {
      Shape tap = unflatten(k, Shape(kernel.begin(), kernel.end()));
      Shape xi{o[0], o[1]};
      bool inside = true;
      for (size_t d = 0; d < spatial; ++d) {
        int64_t p = o[2 + d] * strides[d] - pads[d] + tap[d] * dilations[d];
        inside = inside && p >= 0 && p < xs[2 + d];
        xi.push_back(p);
      }
      if (inside && x.getDouble(flatten(xi, xs)) == y.getDouble(yi))
        ties.push_back(flatten(xi, xs));
    }
    for (int64_t p : ties)
      dx[static_cast<size_t>(p)] += g.getDouble(yi) / static_cast<double>(ties.size());
  }
  return dx;
}

// Inputs drawn from a handful of values, so that windows hold ties.
Tensor fewValues(DType dtype, const Shape &shape, uint64_t seed) {
  Tensor t = randomTensor({dtype, shape}, seed);
  for (int64_t i = 0; i < t.numElements(); ++i)
    t.setDouble(i, std::floor(t.getDouble(i) * 2.0) / 2.0); // -1, -0.5, 0, 0.5
  return t;
}

// y = max_pool(x) by the evaluator, g random; checks the op against the naive loop exactly (the
// reference rounds the double sums once, as the naive result is rounded here).
void checkAgainstNaive(DType dtype, const Shape &xs, const AttrMap &attrs, uint64_t seed) {
  SCOPED_TRACE(::testing::Message() << "x " << shapeToString(xs) << " seed " << seed);
  Tensor x = fewValues(dtype, xs, seed);
  Tensor y = runOp(OpKind::MaxPool, {x}, attrs);
  Tensor g = randomTensor(y.type(), seed + 1);
  Tensor dx = runOp(OpKind::MaxPoolGrad, {x, y, g}, attrs);
  EXPECT_EQ(dx.type(), x.type());
  std::vector<double> want = naiveMaxPoolGrad(x, y, g, attrs);
  expectValues(dx, values(Tensor::fromDoubles(dtype, xs, want)));
  // Every window with a real element hands on all of its g: the sums agree.
  double total = 0, handed = 0;
  for (double v : want)
    total += v;
  for (int64_t i = 0; i < g.numElements(); ++i)
    handed += std::isinf(y.getDouble(i)) ? 0.0 : g.getDouble(i);
  EXPECT_NEAR(total, handed, 1e-9 * (1 + std::abs(handed)));
}

TEST(MaxPoolGrad, HandComputedOneD) {
  // Windows of 2 at stride 1 over [1, 3, 3, 2]: maxima 3, 3, 3; the middle window's two 3s tie.
  AttrMap attrs{{"kernel", Ints{2}}};
  Tensor x = f32s({1, 1, 4}, {1, 3, 3, 2});
  Tensor y = f32s({1, 1, 3}, {3, 3, 3});
  Tensor g = f32s({1, 1, 3}, {1, 2, 4});
  expectValues(runOp(OpKind::MaxPoolGrad, {x, y, g}, attrs), {0, 1 + 1, 1 + 4, 0});
}

TEST(MaxPoolGrad, HandComputedTwoDWithTies) {
  // One 2x2 window of four equal values: each receives a quarter; the second holds one max.
  AttrMap attrs{{"kernel", Ints{2, 2}}, {"strides", Ints{2, 2}}};
  Tensor x = f32s({1, 1, 2, 4}, {5, 5, 1, 2, 5, 5, 4, 3});
  Tensor y = runOp(OpKind::MaxPool, {x}, attrs);
  expectValues(y, {5, 4});
  Tensor g = f32s({1, 1, 1, 2}, {2, -3});
  expectValues(runOp(OpKind::MaxPoolGrad, {x, y, g}, attrs), {0.5, 0.5, 0, 0, 0.5, 0.5, -3, 0});
}

TEST(MaxPoolGrad, PaddingNeverTiesAndEmptyWindowsGiveNothing) {
  // in 1, kernel 1, pads 2+2: five windows, only the middle one holds x. The all-padding windows
  // have y = -inf; even when x itself is -inf, padding taps are not ties.
  AttrMap attrs{{"kernel", Ints{1}}, {"pads", Ints{2, 2}}};
  for (double value : {5.0, -kInf}) {
    Tensor x = f32s({1, 1, 1}, {value});
    Tensor y = runOp(OpKind::MaxPool, {x}, attrs);
    expectValues(y, {-kInf, -kInf, value, -kInf, -kInf});
    Tensor g = f32s({1, 1, 5}, {1, 2, 4, 8, 16});
    expectValues(runOp(OpKind::MaxPoolGrad, {x, y, g}, attrs), {4});
  }
  // A padded 2-wide window at the edge: the real element is the only candidate.
  AttrMap padded{{"kernel", Ints{2}}, {"strides", Ints{2}}, {"pads", Ints{1, 1}}};
  Tensor x = f32s({1, 1, 4}, {-2, -1, -3, -4});
  Tensor y = runOp(OpKind::MaxPool, {x}, padded);
  expectValues(y, {-2, -1, -4});
  expectValues(runOp(OpKind::MaxPoolGrad, {x, y, f32s({1, 1, 3}, {1, 2, 3})}, padded), {1, 2, 0, 3});
}

TEST(MaxPoolGrad, NaNMaximumContributesNothing) {
  AttrMap attrs{{"kernel", Ints{2}}, {"strides", Ints{2}}};
  Tensor x = f32s({1, 1, 4}, {kNaN, 1, 2, 3});
  Tensor y = runOp(OpKind::MaxPool, {x}, attrs);
  expectValues(y, {kNaN, 3});
  expectValues(runOp(OpKind::MaxPoolGrad, {x, y, f32s({1, 1, 2}, {7, 9})}, attrs), {0, 0, 0, 9});
}

TEST(MaxPoolGrad, LeNetAndResNetGeometries) {
  checkAgainstNaive(DType::F32, {2, 3, 8, 8}, {{"kernel", Ints{2, 2}}, {"strides", Ints{2, 2}}}, 1);
  checkAgainstNaive(DType::F32, {2, 2, 9, 10},
                    {{"kernel", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}}, 3);
  checkAgainstNaive(DType::F64, {1, 2, 7, 7},
                    {{"kernel", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}}, 5);
}

TEST(MaxPoolGrad, CeilModeDilationUnevenPadsOneDAndThreeD) {
  checkAgainstNaive(DType::F32, {1, 2, 5, 5}, {{"kernel", Ints{2, 2}}, {"strides", Ints{2, 2}}, {"ceil_mode", int1(1)}},
                    7);
  checkAgainstNaive(DType::F32, {1, 2, 6, 5},
                    {{"kernel", Ints{3, 2}}, {"strides", Ints{2, 1}}, {"pads", Ints{1, 0, 1, 1}}, {"dilations", Ints{1, 2}}},
                    9);
  checkAgainstNaive(DType::F32, {2, 3, 11}, {{"kernel", Ints{3}}, {"strides", Ints{1}}}, 11);
  checkAgainstNaive(DType::F32, {1, 2, 10},
                    {{"kernel", Ints{2}}, {"strides", Ints{3}}, {"pads", Ints{1, 2}}, {"ceil_mode", int1(1)}}, 13);
  checkAgainstNaive(DType::F64, {1, 2, 4, 5, 6},
                    {{"kernel", Ints{2, 3, 2}}, {"strides", Ints{2, 1, 2}}, {"pads", Ints{0, 1, 1, 1, 1, 0}}}, 15);
}

TEST(MaxPoolGrad, OverlappingWindowsAccumulate) {
  // Windows of 3 at stride 1 over one repeated value: every tap ties, each window hands g / 3 to
  // each of its taps, and an element sums the shares of the windows covering it.
  AttrMap attrs{{"kernel", Ints{3}}};
  Tensor x = f32s({1, 1, 5}, {2, 2, 2, 2, 2});
  Tensor y = runOp(OpKind::MaxPool, {x}, attrs);
  Tensor g = f32s({1, 1, 3}, {3, 6, 9});
  expectValues(runOp(OpKind::MaxPoolGrad, {x, y, g}, attrs), {1, 1 + 2, 1 + 2 + 3, 2 + 3, 3});
}

TEST(MaxPoolGrad, EmptyBatch) {
  AttrMap attrs{{"kernel", Ints{2, 2}}};
  Tensor x(DType::F32, {0, 3, 4, 4});
  Tensor y(DType::F32, {0, 3, 3, 3});
  Tensor dx = runOp(OpKind::MaxPoolGrad, {x, y, y}, attrs);
  EXPECT_EQ(dx.shape(), (Shape{0, 3, 4, 4}));
}

TEST(MaxPoolGrad, Inference) {
  AttrMap attrs{{"kernel", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}};
  TensorType t = inferOne(OpKind::MaxPoolGrad, {f32({2, 64, 112, 112}), f32({2, 64, 56, 56}), f32({2, 64, 56, 56})},
                          attrs);
  EXPECT_EQ(t, f32({2, 64, 112, 112}));
  TensorType f64 = inferOne(OpKind::MaxPoolGrad,
                            {{DType::F64, {1, 1, 5}}, {DType::F64, {1, 1, 3}}, {DType::F64, {1, 1, 3}}},
                            {{"kernel", Ints{3}}, {"strides", Ints{2}}, {"ceil_mode", int1(1)}, {"pads", Ints{1, 0}}});
  EXPECT_EQ(f64.dtype, DType::F64);
}

TEST(MaxPoolGrad, RoundTrip) {
  expectRoundTrip(OpKind::MaxPoolGrad, {f32({1, 2, 5, 5}), f32({1, 2, 3, 3}), f32({1, 2, 3, 3})},
                  {{"kernel", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}, {"dilations", Ints{1, 1}},
                   {"ceil_mode", int1(1)}});
}

TEST(MaxPoolGrad, Errors) {
  AttrMap attrs{{"kernel", Ints{2, 2}}, {"strides", Ints{2, 2}}};
  auto infer = [&](std::vector<TensorType> types, AttrMap a) { inferOne(OpKind::MaxPoolGrad, types, a); };
  TensorType x = f32({1, 2, 4, 4}), y = f32({1, 2, 2, 2});
  EXPECT_NO_THROW(infer({x, y, y}, attrs));
  EXPECT_ERROR(infer({x, y, f32({1, 2, 1, 2})}, attrs), "max_pool_grad(f32[1,2,4,4], f32[1,2,2,2], f32[1,2,1,2])");
  EXPECT_ERROR(infer({{DType::I32, {1, 2, 4, 4}}, {DType::I32, {1, 2, 2, 2}}, {DType::I32, {1, 2, 2, 2}}}, attrs),
               "needs floating-point operands");
  EXPECT_ERROR(infer({x, y, {DType::F64, {1, 2, 2, 2}}}, attrs), "different dtypes");
  EXPECT_ERROR(infer({f32({4, 4}), f32({2, 2}), f32({2, 2})}, attrs), "input x must be [N, C, spatial...]");
  EXPECT_ERROR(infer({x, f32({1, 2, 3, 3}), f32({1, 2, 3, 3})}, attrs),
               "pooled y [1,2,3,3] must have max_pool's output shape [1,2,2,2] for input x [1,2,4,4]");
  EXPECT_ERROR(infer({x, y, f32({1, 2, 2, 1})}, attrs), "output gradient g [1,2,2,1] must have the pooled y's shape [1,2,2,2]");
  EXPECT_ERROR(infer({x, y, y}, {{"kernel", Ints{2}}}), "'kernel' needs 2 values");
  EXPECT_ERROR(infer({x, y, y}, {{"kernel", Ints{2, 2}}, {"strides", Ints{0, 2}}}), "'strides' values must be >= 1");
  EXPECT_ERROR(infer({x, y, y}, {{"kernel", Ints{2, 2}}, {"pads", Ints{1, -1, 0, 0}}}), "'pads' values must be >= 0");
  EXPECT_ERROR(infer({x, y, y}, {{"kernel", Ints{9, 2}}}), "output size would be < 1");
  EXPECT_ERROR(infer({x, y, y}, {}), "kernel");
  EXPECT_ERROR(infer({x, y}, attrs), "expects 3 inputs");
  // The evaluator checks too: a y of the wrong shape never reaches the loops.
  EXPECT_ERROR(runOp(OpKind::MaxPoolGrad, {seq(DType::F32, {1, 1, 4}), seq(DType::F32, {1, 1, 2}), seq(DType::F32, {1, 1, 2})},
                     {{"kernel", Ints{2}}}),
               "max_pool's output shape [1,1,3]");
}

} // namespace
