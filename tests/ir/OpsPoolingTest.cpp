// max_pool and avg_pool (ir/ops/Pooling.cpp): inference and reference evaluation, checked against
// hand-worked windows and naive loops written here from the definitions (ONNX MaxPool/AveragePool).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/Error.h"
#include "ir/Builder.h"
#include "ir/Evaluator.h"
#include "ir/Verifier.h"
#include "tests/ir/OpTestUtil.h"

using namespace kiln;
using namespace kiln::ir;
using namespace kiln::test;

namespace {

AttrMap poolAttrs(std::vector<int64_t> kernel, std::vector<int64_t> strides = {},
                  std::vector<int64_t> pads = {}, int64_t ceilMode = 0) {
  return {{"kernel", kernel}, {"strides", strides}, {"pads", pads}, {"ceil_mode", ceilMode}};
}

TEST(OpsContractionPool, MaxPoolCeilModeAddsAndDropsWindows) {
  Tensor x = tensorOf(DType::F32, {1, 1, 5}, {1, 3, 2, 5, 4});
  EXPECT_TRUE(
      near(runOp(OpKind::MaxPool, {x}, poolAttrs({2}, {2})), tensorOf(DType::F32, {1, 1, 2}, {3, 5}), 0));
  // ceil_mode keeps the partial window [4] at the end.
  EXPECT_TRUE(near(runOp(OpKind::MaxPool, {x}, poolAttrs({2}, {2}, {}, 1)),
                   tensorOf(DType::F32, {1, 1, 3}, {3, 5, 4}), 0));
  // Pads 1+1: ceil((5+2-2)/2)+1 = 4 windows, but the 4th would start at padded index 6, inside the
  // right padding, so it is dropped: windows [pad,1] [3,2] [5,4].
  EXPECT_TRUE(near(runOp(OpKind::MaxPool, {x}, poolAttrs({2}, {2}, {1, 1}, 1)),
                   tensorOf(DType::F32, {1, 1, 3}, {1, 3, 5}), 0));
}

TEST(OpsContractionPool, PaddingNeverWinsAMax) {
  Tensor x = tensorOf(DType::F32, {1, 1, 3}, {-3, -1, -2});
  EXPECT_TRUE(near(runOp(OpKind::MaxPool, {x}, poolAttrs({2}, {1}, {1, 1})),
                   tensorOf(DType::F32, {1, 1, 4}, {-3, -1, -1, -2}), 0));
  // A window over padding only has no maximum: -inf (lowest for integers), never 0.
  Tensor one = tensorOf(DType::F32, {1, 1, 1}, {-5});
  Tensor got = runOp(OpKind::MaxPool, {one}, poolAttrs({1}, {1}, {1, 1}));
  EXPECT_EQ(got.getDouble(0), -std::numeric_limits<double>::infinity());
  EXPECT_EQ(got.getDouble(1), -5);
  Tensor gotInt =
      runOp(OpKind::MaxPool, {tensorOf(DType::I32, {1, 1, 1}, {-5})}, poolAttrs({1}, {1}, {1, 1}));
  EXPECT_EQ(gotInt.getInt(0), std::numeric_limits<int32_t>::min());
}

TEST(OpsContractionPool, MaxPoolPropagatesNaN) {
  Tensor x = tensorOf(DType::F32, {1, 1, 4}, {1, NAN, 2, 3});
  Tensor got = runOp(OpKind::MaxPool, {x}, poolAttrs({2}, {1}));
  EXPECT_TRUE(std::isnan(got.getDouble(0)));
  EXPECT_TRUE(std::isnan(got.getDouble(1)));
  EXPECT_EQ(got.getDouble(2), 3);
}

TEST(OpsContractionPool, MaxPoolDilationAndIntegers) {
  Tensor x = tensorOf(DType::I64, {1, 1, 7}, {5, 1, 0, 7, 2, 3, 6});
  AttrMap attrs = poolAttrs({3});
  attrs["dilations"] = std::vector<int64_t>{2};
  // Windows {0,2,4} {1,3,5} {2,4,6}.
  EXPECT_TRUE(runOp(OpKind::MaxPool, {x}, attrs).identical(tensorOf(DType::I64, {1, 1, 3}, {5, 7, 6})));
}

TEST(OpsContractionPool, AvgPoolPadsAndCountIncludePad) {
  Tensor x = tensorOf(DType::F64, {1, 1, 3}, {1, 2, 3});
  AttrMap attrs = poolAttrs({2}, {1}, {1, 1});
  EXPECT_TRUE(
      near(runOp(OpKind::AvgPool, {x}, attrs), tensorOf(DType::F64, {1, 1, 4}, {1, 1.5, 2.5, 3}), 1e-15));
  attrs["count_include_pad"] = int64_t(1);
  EXPECT_TRUE(
      near(runOp(OpKind::AvgPool, {x}, attrs), tensorOf(DType::F64, {1, 1, 4}, {0.5, 1.5, 2.5, 1.5}), 1e-15));

  // ceil_mode: the last window [3, pad, beyond] reaches past the padded extent; with
  // count_include_pad it counts the one pad position inside the extent, not the one beyond.
  Tensor y = tensorOf(DType::F64, {1, 1, 4}, {1, 2, 3, 4});
  AttrMap ceil = poolAttrs({3}, {2}, {1, 1}, 1);
  EXPECT_TRUE(near(runOp(OpKind::AvgPool, {y}, ceil), tensorOf(DType::F64, {1, 1, 3}, {1.5, 3, 4}), 1e-15));
  ceil["count_include_pad"] = int64_t(1);
  EXPECT_TRUE(near(runOp(OpKind::AvgPool, {y}, ceil), tensorOf(DType::F64, {1, 1, 3}, {1, 3, 2}), 1e-15));

  // A window over padding only: an empty mean (NaN), or 0 when pads count.
  Tensor one = tensorOf(DType::F32, {1, 1, 1}, {5});
  Tensor empty = runOp(OpKind::AvgPool, {one}, poolAttrs({1}, {1}, {1, 1}));
  EXPECT_TRUE(std::isnan(empty.getDouble(0)));
  EXPECT_EQ(empty.getDouble(1), 5);
  AttrMap include = poolAttrs({1}, {1}, {1, 1});
  include["count_include_pad"] = int64_t(1);
  EXPECT_TRUE(near(runOp(OpKind::AvgPool, {one}, include), tensorOf(DType::F32, {1, 1, 3}, {0, 5, 0}), 0));
}

// 2-D pooling written the PyTorch way: window start/end clipped to the padded extent, then to
// the input; the max over real positions only.
struct Pool2D {
  int64_t kh, kw, sh, sw, pt, pl, pb, pr, dh = 1, dw = 1;
  bool ceilMode = false, countIncludePad = false;
  int64_t outSize(int64_t in, int64_t k, int64_t s, int64_t p0, int64_t p1, int64_t d) const {
    double exact = double(in + p0 + p1 - d * (k - 1) - 1) / double(s);
    int64_t out = int64_t(ceilMode ? std::ceil(exact) : std::floor(exact)) + 1;
    if (ceilMode && (out - 1) * s >= in + p0)
      --out;
    return out;
  }
};

Tensor naivePool2D(const Tensor &x, const Pool2D &p, bool isMax) {
  int64_t n = x.shape()[0], c = x.shape()[1], h = x.shape()[2], w = x.shape()[3];
  int64_t oh = p.outSize(h, p.kh, p.sh, p.pt, p.pb, p.dh), ow = p.outSize(w, p.kw, p.sw, p.pl, p.pr, p.dw);
  Tensor out(x.dtype(), {n, c, oh, ow});
  int64_t flat = 0;
  for (int64_t plane = 0; plane < n * c; ++plane)
    for (int64_t i = 0; i < oh; ++i)
      for (int64_t j = 0; j < ow; ++j, ++flat) {
        int64_t h0 = i * p.sh - p.pt, w0 = j * p.sw - p.pl;
        double best = -INFINITY, sum = 0;
        int64_t real = 0;
        for (int64_t a = 0; a < p.kh; ++a)
          for (int64_t b = 0; b < p.kw; ++b) {
            int64_t y = h0 + a * p.dh, z = w0 + b * p.dw;
            if (y < 0 || y >= h || z < 0 || z >= w)
              continue;
            double v = x.getDouble((plane * h + y) * w + z);
            best = std::max(best, v);
            sum += v;
            ++real;
          }
        int64_t hEnd = std::min(h0 + p.kh, h + p.pb), wEnd = std::min(w0 + p.kw, w + p.pr);
        int64_t padded = (hEnd - h0) * (wEnd - w0);
        out.setDouble(flat, isMax ? best : sum / double(p.countIncludePad ? padded : real));
      }
  return out;
}

AttrMap pool2DAttrs(const Pool2D &p, bool isMax) {
  AttrMap attrs = poolAttrs({p.kh, p.kw}, {p.sh, p.sw}, {p.pt, p.pl, p.pb, p.pr}, p.ceilMode);
  if (isMax)
    attrs["dilations"] = std::vector<int64_t>{p.dh, p.dw};
  else
    attrs["count_include_pad"] = int64_t(p.countIncludePad);
  return attrs;
}

TEST(OpsContractionPool, TwoDimensionalAgainstNaiveLoop) {
  Tensor x = randomTensor({DType::F64, {2, 3, 9, 8}}, 11);
  std::vector<Pool2D> cases = {
      {3, 3, 2, 2, 1, 1, 1, 1},                  // ResNet's stem pool
      {2, 3, 2, 1, 0, 1, 1, 0, 1, 1, true},      // ceil_mode, asymmetric pads
      {3, 2, 3, 2, 1, 0, 1, 1, 1, 1, true, true} // ceil_mode with count_include_pad
  };
  for (const Pool2D &p : cases) {
    EXPECT_TRUE(near(runOp(OpKind::MaxPool, {x}, pool2DAttrs(p, true)), naivePool2D(x, p, true), 0));
    EXPECT_TRUE(near(runOp(OpKind::AvgPool, {x}, pool2DAttrs(p, false)), naivePool2D(x, p, false), 1e-14));
  }
  Pool2D dilated{2, 3, 1, 2, 1, 1, 0, 1, 2, 2, true};
  EXPECT_TRUE(
      near(runOp(OpKind::MaxPool, {x}, pool2DAttrs(dilated, true)), naivePool2D(x, dilated, true), 0));
  // Global average pooling, as at the end of ResNet.
  Tensor global = runOp(OpKind::AvgPool, {x}, poolAttrs({9, 8}));
  ASSERT_EQ(global.shape(), (Shape{2, 3, 1, 1}));
  double sum = 0;
  for (int64_t i = 0; i < 72; ++i)
    sum += x.getDouble(i);
  EXPECT_NEAR(global.getDouble(0), sum / 72, 1e-14);
}

TEST(OpsContractionPool, ThreeDimensionalAndEmptyBatch) {
  Tensor x = randomTensor({DType::F32, {1, 1, 2, 2, 2}}, 12);
  Tensor got = runOp(OpKind::MaxPool, {x}, poolAttrs({2, 2, 2}));
  double best = -INFINITY;
  for (int64_t i = 0; i < 8; ++i)
    best = std::max(best, x.getDouble(i));
  EXPECT_EQ(got.shape(), (Shape{1, 1, 1, 1, 1}));
  EXPECT_EQ(got.getDouble(0), best);
  EXPECT_EQ(runOp(OpKind::AvgPool, {Tensor(DType::F32, {0, 3, 4})}, poolAttrs({2})).shape(),
            (Shape{0, 3, 3}));
}

TEST(OpsContractionPool, HugeWindowsCostNothingExtra) {
  // A 2^40-tap kernel over 2^40 pads each side with stride 2^40: two windows, the first over
  // padding only, the second over the whole input. The evaluator must not walk the taps.
  int64_t huge = int64_t(1) << 40;
  Tensor x = tensorOf(DType::F64, {1, 1, 3}, {4, 9, 2});
  AttrMap attrs = poolAttrs({huge}, {huge}, {huge, huge});
  Tensor got = runOp(OpKind::MaxPool, {x}, attrs);
  EXPECT_TRUE(got.identical(tensorOf(DType::F64, {1, 1, 2}, {-INFINITY, 9})));
  attrs["count_include_pad"] = int64_t(1);
  Tensor avg = runOp(OpKind::AvgPool, {x}, attrs);
  EXPECT_EQ(avg.getDouble(0), 0);
  EXPECT_DOUBLE_EQ(avg.getDouble(1), 15 / double(huge));
}

TEST(OpsContractionPool, Errors) {
  TensorType x{DType::F32, {1, 2, 4, 4}};
  expectError([&] { inferOne(OpKind::MaxPool, {x}); }, "missing required attribute 'kernel'");
  expectError([&] { inferOne(OpKind::MaxPool, {x}, poolAttrs({2})); }, "'kernel' needs 2 values");
  expectError([&] { inferOne(OpKind::AvgPool, {x}, poolAttrs({5, 2})); }, "output size would be < 1");
  expectError([&] { inferOne(OpKind::MaxPool, {x}, poolAttrs({2, 2}, {1, 1}, {1, 1})); }, "'pads' needs 4");
  expectError([&] { inferOne(OpKind::MaxPool, {x}, poolAttrs({2, 0})); }, "'kernel' values must be >= 1");
  expectError([] { inferOne(OpKind::AvgPool, {{DType::I32, {1, 1, 4}}}, poolAttrs({2})); }, "floating");
  expectError([] { inferOne(OpKind::MaxPool, {{DType::F32, {4, 4}}}, poolAttrs({2})); }, "spatial");
  expectError(
      [&] {
        AttrMap attrs = poolAttrs({int64_t(1) << 62, 2});
        attrs["dilations"] = std::vector<int64_t>{4, 1};
        inferOne(OpKind::MaxPool, {x}, attrs);
      },
      "overflows");
  expectError(
      [&] {
        AttrMap attrs = poolAttrs({2, 2});
        attrs["dilations"] = std::vector<int64_t>{2, 2};
        inferOne(OpKind::AvgPool, {x}, attrs);
      },
      "unknown attribute 'dilations'");
}

} // namespace
