// resize: every mode, coordinate transformation and nearest rounding on small grids whose
// results are worked out by hand from the ONNX Resize definition (several are the ONNX backend
// tests' own expectations), an independent bilinear oracle, dtypes, edge cases and errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "core/Error.h"
#include "ir/Builder.h"
#include "ir/Evaluator.h"
#include "ir/Verifier.h"
#include "tests/ir/OpTestUtil.h"

using namespace kiln;
using namespace kiln::ir;
using namespace kiln::test;

namespace {

// A grid of values (f32 unless another dtype is given).
Tensor gridOf(Shape shape, const std::vector<double> &v, DType dtype = DType::F32) {
  return tensorOf(dtype, std::move(shape), v);
}

// resize with `sizes` and string options given as name/value pairs.
Tensor resize(const Tensor &x, Shape sizes, std::vector<std::pair<std::string, std::string>> options = {},
              AttrMap more = {}) {
  AttrMap attrs = std::move(more);
  attrs["sizes"] = sizes;
  for (auto &[name, value] : options)
    attrs[name] = value;
  return runOp(OpKind::Resize, {x}, attrs);
}

// 1..16 as a 4x4 grid: the ONNX backend tests' input.
Tensor grid4x4() {
  std::vector<double> v(16);
  for (int i = 0; i < 16; ++i)
    v[i] = i + 1;
  return gridOf({1, 1, 4, 4}, v);
}

Tensor ramp4() { return gridOf({4}, {1, 2, 3, 4}); }

TEST(OpsResizeNearest, UpsampleAndDownsample) {
  // Width 2 -> 6 (scale 3) maps x = 0..5 to -1/3, 0, 1/3, 2/3, 1, 4/3: rounding gives 0,0,0,1,1,1.
  Tensor x = gridOf({1, 1, 2, 2}, {1, 2, 3, 4});
  EXPECT_TRUE(near(
      resize(x, {1, 1, 4, 6}),
      gridOf({1, 1, 4, 6}, {1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4, 3, 3, 3, 4, 4, 4}), 0));
  // Scales 0.6 on 2x4: rows 0.5/0.6 - 0.5 = 1/3 -> 0; columns 1/3 -> 0 and 1.5/0.6 - 0.5 = 2.
  Tensor y = gridOf({1, 1, 2, 4}, {1, 2, 3, 4, 5, 6, 7, 8});
  EXPECT_TRUE(near(resize(y, {1, 1, 1, 2}, {}, {{"scales", std::vector<double>{1, 1, 0.6, 0.6}}}),
                   gridOf({1, 1, 1, 2}, {1, 3}), 0));
}

TEST(OpsResizeNearest, RoundingAndCoordinateModes) {
  struct Case {
    const char *coordinates, *rounding;
    std::vector<double> want; // [1, 2, 3, 4] resized to 8
  };
  std::vector<Case> cases = {
      // half_pixel: x_ori = -0.25, 0.25, 0.75, ..., 3.25
      {"half_pixel", "round_prefer_floor", {1, 1, 2, 2, 3, 3, 4, 4}},
      {"half_pixel", "ceil", {1, 2, 2, 3, 3, 4, 4, 4}},
      {"half_pixel", "floor", {1, 1, 1, 2, 2, 3, 3, 4}},
      // align_corners: x_ori = 3x/7
      {"align_corners", "floor", {1, 1, 1, 2, 2, 3, 3, 4}},
      {"align_corners", "round_prefer_floor", {1, 1, 2, 2, 3, 3, 4, 4}},
      // asymmetric: x_ori = x/2, so every other point is a tie
      {"asymmetric", "round_prefer_ceil", {1, 2, 2, 3, 3, 4, 4, 4}},
      {"asymmetric", "round_prefer_floor", {1, 1, 2, 2, 3, 3, 4, 4}},
      {"asymmetric", "ceil", {1, 2, 2, 3, 3, 4, 4, 4}},
      {"pytorch_half_pixel", "round_prefer_floor", {1, 1, 2, 2, 3, 3, 4, 4}},
  };
  for (const Case &c : cases)
    EXPECT_TRUE(
        near(resize(ramp4(), {8},
                    {{"coordinate_transformation_mode", c.coordinates}, {"nearest_mode", c.rounding}}),
             gridOf({8}, c.want), 0))
        << c.coordinates << " " << c.rounding;

  // 4 -> 2 with pytorch_half_pixel: x_ori = 0.5 and 2.5, ties either way.
  EXPECT_TRUE(near(resize(ramp4(), {2}, {{"coordinate_transformation_mode", "pytorch_half_pixel"}}),
                   gridOf({2}, {1, 3}), 0));
  EXPECT_TRUE(near(resize(ramp4(), {2},
                          {{"coordinate_transformation_mode", "pytorch_half_pixel"},
                           {"nearest_mode", "round_prefer_ceil"}}),
                   gridOf({2}, {2, 4}), 0));
  // To a single element: pytorch_half_pixel samples -0.5 (the edge), half_pixel the middle.
  EXPECT_EQ(resize(ramp4(), {1}, {{"coordinate_transformation_mode", "pytorch_half_pixel"}}).getDouble(0), 1);
  EXPECT_EQ(resize(ramp4(), {1}).getDouble(0), 2); // x_ori = 1.5, a tie rounded down
}

TEST(OpsResizeNearest, CopiesEveryDTypeExactly) {
  int64_t big = (int64_t(1) << 60) + 7; // not representable in double
  Tensor x(DType::I64, {2});
  x.setInt(0, big);
  x.setInt(1, -big);
  Tensor y = resize(x, {4});
  EXPECT_EQ(y.getInt(0), big);
  EXPECT_EQ(y.getInt(1), big);
  EXPECT_EQ(y.getInt(2), -big);
  EXPECT_EQ(y.getInt(3), -big);
  Tensor flags = gridOf({2}, {1, 0}, DType::Bool);
  EXPECT_TRUE(resize(flags, {4}).identical(gridOf({4}, {1, 1, 0, 0}, DType::Bool)));
  Tensor half = gridOf({1, 2}, {0.5, -2}, DType::F16);
  EXPECT_TRUE(resize(half, {2, 2}).identical(gridOf({2, 2}, {0.5, -2, 0.5, -2}, DType::F16)));
}

TEST(OpsResizeLinear, HalfPixelAndAlignCorners) {
  Tensor x = gridOf({1, 1, 2, 2}, {1, 2, 3, 4});
  EXPECT_TRUE(near(
      resize(x, {1, 1, 4, 4}, {{"mode", "linear"}}),
      gridOf({1, 1, 4, 4}, {1, 1.25, 1.75, 2, 1.5, 1.75, 2.25, 2.5, 2.5, 2.75, 3.25, 3.5, 3, 3.25, 3.75, 4}),
      1e-6));
  double third = 1.0 / 3, twoThirds = 2.0 / 3;
  EXPECT_TRUE(
      near(resize(x, {1, 1, 4, 4}, {{"mode", "linear"}, {"coordinate_transformation_mode", "align_corners"}}),
           gridOf({1, 1, 4, 4}, {1, 1 + third, 1 + twoThirds, 2, 1 + twoThirds, 2, 2 + third, 2 + twoThirds,
                                 2 + third, 2 + twoThirds, 3, 3 + third, 3, 3 + third, 3 + twoThirds, 4}),
           1e-6));
  // asymmetric: x_ori = x/2; the last point (3.5) leans on the repeated edge.
  EXPECT_TRUE(
      near(resize(ramp4(), {8}, {{"mode", "linear"}, {"coordinate_transformation_mode", "asymmetric"}}),
           gridOf({8}, {1, 1.5, 2, 2.5, 3, 3.5, 4, 4}), 1e-6));
}

TEST(OpsResizeLinear, ScalesEnterTheCoordinateMapping) {
  Tensor x = gridOf({1, 1, 2, 4}, {1, 2, 3, 4, 5, 6, 7, 8});
  AttrMap scales = {{"scales", std::vector<double>{1, 1, 0.6, 0.6}}};
  // half_pixel, scale 0.6: rows at 1/3 give [7/3, 10/3, 13/3, 16/3]; columns at 1/3 and 2.
  EXPECT_TRUE(near(resize(x, {1, 1, 1, 2}, {{"mode", "linear"}}, scales),
                   gridOf({1, 1, 1, 2}, {8.0 / 3, 13.0 / 3}), 1e-6));
  // align_corners uses the output width scale * in = 2.4, not 2: column 1 maps to 3/1.4.
  EXPECT_TRUE(near(resize(x, {1, 1, 1, 2},
                          {{"mode", "linear"}, {"coordinate_transformation_mode", "align_corners"}}, scales),
                   gridOf({1, 1, 1, 2}, {1, 1 + 3 / 1.4}), 1e-6));
  // Without scales the same sizes mean scale 0.5 and width 2: column 1 maps to 3.
  EXPECT_TRUE(
      near(resize(x, {1, 1, 1, 2}, {{"mode", "linear"}, {"coordinate_transformation_mode", "align_corners"}}),
           gridOf({1, 1, 1, 2}, {1, 4}), 1e-6));
}

TEST(OpsResizeLinear, PytorchHalfPixelToOneColumn) {
  // Rows 4 -> 3 sample 1/6, 1.5 and 17/6; the single column samples the edge (pytorch) or the
  // middle, 1.5 (half_pixel).
  EXPECT_TRUE(near(resize(grid4x4(), {1, 1, 3, 1},
                          {{"mode", "linear"}, {"coordinate_transformation_mode", "pytorch_half_pixel"}}),
                   gridOf({1, 1, 3, 1}, {1 + 4.0 / 6, 7, 1 + 4 * 17.0 / 6}), 1e-5));
  EXPECT_TRUE(near(resize(grid4x4(), {1, 1, 3, 1}, {{"mode", "linear"}}),
                   gridOf({1, 1, 3, 1}, {2.5 + 4.0 / 6, 8.5, 2.5 + 4 * 17.0 / 6}), 1e-5));
}

// Bilinear with half_pixel centres and clamped coordinates, as image libraries define it.
double bilinearSample(const Tensor &x, int64_t plane, int64_t h, int64_t w, double sy, double sx) {
  auto axis = [](double s, int64_t size, int64_t &i0, int64_t &i1, double &frac) {
    s = std::max(0.0, s);
    i0 = std::min<int64_t>(static_cast<int64_t>(std::floor(s)), size - 1);
    i1 = std::min<int64_t>(i0 + 1, size - 1);
    frac = i0 == size - 1 ? 0 : s - double(i0);
  };
  int64_t y0, y1, x0, x1;
  double fy, fx;
  axis(sy, h, y0, y1, fy);
  axis(sx, w, x0, x1, fx);
  auto at = [&](int64_t r, int64_t c) { return x.getDouble((plane * h + r) * w + c); };
  return (1 - fy) * ((1 - fx) * at(y0, x0) + fx * at(y0, x1)) +
         fy * ((1 - fx) * at(y1, x0) + fx * at(y1, x1));
}

TEST(OpsResizeLinear, MatchesIndependentBilinearOnEveryPlane) {
  Tensor x = randomTensor({DType::F64, {2, 3, 3, 5}}, 7);
  Tensor got = resize(x, {2, 3, 7, 4}, {{"mode", "linear"}});
  ASSERT_EQ(got.shape(), (Shape{2, 3, 7, 4}));
  for (int64_t plane = 0; plane < 6; ++plane)
    for (int64_t r = 0; r < 7; ++r)
      for (int64_t c = 0; c < 4; ++c) {
        double want = bilinearSample(x, plane, 3, 5, (r + 0.5) * 3 / 7 - 0.5, (c + 0.5) * 5 / 4 - 0.5);
        EXPECT_NEAR(got.getDouble((plane * 7 + r) * 4 + c), want, 1e-12);
      }
}

TEST(OpsResizeCubic, HalfPixelAsymmetricAndExcludeOutside) {
  // Keys' kernel (a = -0.75) at ratio 0.75 weighs -0.03515625, 0.26171875, 0.87890625,
  // -0.10546875; ratio 0.25 mirrors them. Sampling [1, 2, 3, 4] at x_ori = -0.25 .. 3.25 with
  // the edge repeated gives:
  std::vector<double> line = {0.89453125, 1.19140625, 1.66796875, 2.296875,
                              2.703125,   3.33203125, 3.80859375, 4.10546875};
  EXPECT_TRUE(near(resize(ramp4(), {8}, {{"mode", "cubic"}}), gridOf({8}, line), 1e-6));
  // Separable: on the 4x4 grid (value 4r + c + 1) each point is 4 (line[i] - 1) + line[j].
  Tensor grid = resize(grid4x4(), {1, 1, 8, 8}, {{"mode", "cubic"}});
  for (int64_t i = 0; i < 8; ++i)
    for (int64_t j = 0; j < 8; ++j)
      EXPECT_NEAR(grid.getDouble(i * 8 + j), 4 * (line[i] - 1) + line[j], 1e-5) << i << "," << j;
  EXPECT_NEAR(grid.getDouble(0), 0.47265625, 1e-6); // the ONNX backend test's first value

  // asymmetric: x_ori = x / 2; halves weigh -0.09375, 0.59375, 0.59375, -0.09375.
  EXPECT_TRUE(
      near(resize(ramp4(), {8}, {{"mode", "cubic"}, {"coordinate_transformation_mode", "asymmetric"}}),
           gridOf({8}, {1, 1.40625, 2, 2.5, 3, 3.59375, 4, 4.09375}), 1e-6));

  // a = -0.5 with exclude_outside: at x_ori = -0.25 only taps 0 and 1 are inside, weighing
  // 0.8671875 and -0.0703125 before renormalising by their sum 0.796875.
  double e = -0.0703125 / 0.796875;
  Tensor excluded = resize(grid4x4(), {1, 1, 8, 8}, {{"mode", "cubic"}},
                           {{"cubic_coeff_a", -0.5}, {"exclude_outside", int64_t(1)}});
  EXPECT_NEAR(excluded.getDouble(0), 1 + 5 * e, 1e-6);
  EXPECT_NEAR(excluded.getDouble(0), 0.55882353, 1e-6);
}

TEST(OpsResizeCubic, DownsampleWithScales) {
  // Scale 0.8 on 4 -> 3 samples x_ori = 0.125, 1.375, 2.625. At ratio 0.125 the weights are
  // -0.0717773, 0.9672852, 0.1147461, -0.0102539 on taps -1..2 (clamped to 0, 0, 1, 2); at 0.375
  // -0.1098633, 0.7495117, 0.4262695, -0.0659180 on taps 0..3; ratio 0.625 mirrors 0.375 on taps
  // 1..4 (the last clamped to 3). Weighted tap positions e, and by separability on the grid
  // (value 4r + c + 1) each point is 1 + 4 e[i] + e[j] (the ONNX backend test's numbers).
  std::vector<double> e = {0.09423828, 1.40429688, 2.70556641};
  Tensor got =
      resize(grid4x4(), {1, 1, 3, 3}, {{"mode", "cubic"}}, {{"scales", std::vector<double>{1, 1, 0.8, 0.8}}});
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 3; ++j)
      EXPECT_NEAR(got.getDouble(i * 3 + j), 1 + 4 * e[i] + e[j], 1e-5) << i << "," << j;
  EXPECT_NEAR(got.getDouble(0), 1.47119141, 1e-5);
  EXPECT_NEAR(got.getDouble(4), 8.02148438, 1e-5);
}

TEST(OpsResize, IdentityDTypesAndEdgeCases) {
  // Unchanged sizes are the identity in every mode.
  Tensor x = randomTensor({DType::F64, {2, 3, 4}}, 3);
  for (const char *mode : {"nearest", "linear", "cubic"})
    EXPECT_TRUE(resize(x, {2, 3, 4}, {{"mode", mode}}).identical(x)) << mode;
  // Integers interpolate in double and truncate: [0, 255] -> 0, 63.75, 191.25, 255.
  Tensor bytes = gridOf({2}, {0, 255}, DType::U8);
  EXPECT_TRUE(resize(bytes, {4}, {{"mode", "linear"}}).identical(gridOf({4}, {0, 63, 191, 255}, DType::U8)));
  // A scalar has nothing to resize; empty axes stay empty or become so.
  Tensor scalar = Tensor::scalar(DType::F32, 5);
  EXPECT_TRUE(resize(scalar, {}).identical(scalar));
  EXPECT_EQ(resize(Tensor(DType::F32, {0, 3}), {0, 5}, {{"mode", "linear"}}).shape(), (Shape{0, 5}));
  EXPECT_EQ(resize(Tensor(DType::F32, {2, 3}), {2, 0}, {{"mode", "cubic"}}).shape(), (Shape{2, 0}));
  EXPECT_EQ(resize(Tensor(DType::F32, {2, 3}), {0, 3}).shape(), (Shape{0, 3}));
  // Size-1 inputs spread their one value.
  EXPECT_TRUE(near(resize(gridOf({1}, {7}), {3}, {{"mode", "cubic"}}), gridOf({3}, {7, 7, 7}), 1e-6));
}

TEST(OpsResize, Errors) {
  TensorType x{DType::F32, {1, 1, 2, 2}};
  auto infer = [&](AttrMap attrs, TensorType type = {DType::F32, {1, 1, 2, 2}}) {
    return [=] { inferOne(OpKind::Resize, {type}, attrs); };
  };
  Shape sizes = {1, 1, 4, 4};
  expectError(infer({}), "missing required attribute 'sizes'");
  expectError(infer({{"sizes", Shape{4, 4}}}), "'sizes' needs 4 values");
  expectError(infer({{"sizes", Shape{1, 1, -4, 4}}}), "negative dim");
  expectError(infer({{"sizes", Shape{1, 3, 4}}}, {DType::F32, {1, 0, 2}}),
              "axis 1 of input [1,0,2] is empty");
  expectError(infer({{"sizes", sizes}, {"mode", std::string("bilinear")}}), "'mode' must be");
  expectError(
      infer({{"sizes", sizes}, {"coordinate_transformation_mode", std::string("tf_crop_and_resize")}}),
      "\"tf_crop_and_resize\" is not supported");
  expectError(
      infer({{"sizes", sizes}, {"coordinate_transformation_mode", std::string("half_pixel_symmetric")}}),
      "not supported");
  expectError(infer({{"sizes", sizes}, {"coordinate_transformation_mode", std::string("corners")}}),
              "unknown value \"corners\"");
  expectError(infer({{"sizes", sizes}, {"nearest_mode", std::string("round")}}), "'nearest_mode' must be");
  expectError(infer({{"sizes", sizes}, {"exclude_outside", int64_t(2)}}), "'exclude_outside' must be 0 or 1");
  expectError(infer({{"sizes", sizes}, {"scales", std::vector<double>{2, 2}}}), "'scales' needs 4 values");
  expectError(infer({{"sizes", sizes}, {"scales", std::vector<double>{1, 1, 0, 2}}}), "finite and > 0");
  expectError(infer({{"sizes", sizes}, {"scales", std::vector<double>{1, 1, NAN, 2}}}), "finite and > 0");
  expectError(infer({{"sizes", sizes}, {"cubic_coeff_a", double(INFINITY)}}),
              "'cubic_coeff_a' must be finite");
  expectError(infer({{"sizes", Shape{4}}, {"mode", std::string("linear")}}, {DType::Bool, {2}}),
              "linear interpolation needs a numeric input");
  expectError(infer({{"sizes", Shape{int64_t(1) << 40, int64_t(1) << 40, 1, 1}}}), "too many elements");
  expectError([&] { inferOne(OpKind::Resize, {x, x}, {{"sizes", sizes}}); }, "expects 1 inputs");
}

TEST(OpsResize, PrintsAndParsesBack) {
  expectRoundTrip(OpKind::Resize, {{DType::F32, {1, 1, 2, 4}}},
                  {{"sizes", Shape{1, 1, 1, 2}},
                   {"scales", std::vector<double>{1, 1, 0.6, 0.6}},
                   {"mode", std::string("cubic")},
                   {"coordinate_transformation_mode", std::string("align_corners")},
                   {"cubic_coeff_a", -0.5},
                   {"exclude_outside", int64_t(1)}});
  expectRoundTrip(OpKind::Resize, {{DType::U8, {3, 3}}},
                  {{"sizes", Shape{6, 5}}, {"nearest_mode", std::string("ceil")}});
}

} // namespace
