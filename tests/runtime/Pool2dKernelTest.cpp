// kiln::runtime::kernels::pool2d, and each of its two forms (plane by plane, channel blocks)
// on every case, against naive loops written here, following ONNX MaxPool /
// AveragePool (and kiln's reference evaluator): taps outside the input never win a max; an
// average divides by the taps inside the input, or with count_include_pad by the taps inside
// the padded extent [-pad_begin, size + pad_end). The kernel's ABI carries only the leading
// pads and takes pad_end = pad_begin, which is exact whenever pad_end <= pad_begin and the
// windows stay inside [-pad_begin, size + pad_end) (floor mode). So averages with
// count_include_pad pad symmetrically in ceil mode and with pad_end <= pad_begin otherwise;
// the other cases may pad as they like.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <thread>
#include <vector>

#include "runtime/kernels/Kernels.h"
#include "runtime/kernels/Pool2dCommon.h"
#include "tests/runtime/KernelTestRuntime.h"

namespace {

using kiln::runtime::kernels::test::makeRuntime;

struct PoolCase {
  int64_t n, c, h, w, kernelH, kernelW;
  int64_t strideH = 1, strideW = 1, padTop = 0, padLeft = 0, padBottom = 0, padRight = 0;
  int64_t dilationH = 1, dilationW = 1;
  bool isMax = true, countIncludePad = false, ceilMode = false;
  int threads = 1;
  int64_t nanEvery = 0; // > 0: every nanEvery-th input is NaN
};

int64_t outputSize(int64_t in, int64_t padBegin, int64_t padEnd, int64_t kernel, int64_t stride, int64_t dilation,
                   bool ceilMode) {
  const int64_t excess = in + padBegin + padEnd - (dilation * (kernel - 1) + 1);
  int64_t out = (ceilMode ? (excess + stride - 1) / stride : excess / stride) + 1;
  if (ceilMode && (out - 1) * stride >= in + padBegin) // a window starting in the trailing pad
    --out;
  return out;
}

void checkPool(const PoolCase &tc, uint32_t seed = 1) {
  const int64_t oh = outputSize(tc.h, tc.padTop, tc.padBottom, tc.kernelH, tc.strideH, tc.dilationH, tc.ceilMode);
  const int64_t ow = outputSize(tc.w, tc.padLeft, tc.padRight, tc.kernelW, tc.strideW, tc.dilationW, tc.ceilMode);
  SCOPED_TRACE(testing::Message() << (tc.isMax ? "max" : "avg") << " " << tc.n << "x" << tc.c << "x" << tc.h << "x"
                                  << tc.w << " kernel " << tc.kernelH << "x" << tc.kernelW << " stride " << tc.strideH
                                  << "," << tc.strideW << " pads " << tc.padTop << "," << tc.padLeft << ","
                                  << tc.padBottom << "," << tc.padRight << " dilation " << tc.dilationH << ","
                                  << tc.dilationW << " include_pad " << tc.countIncludePad << " ceil " << tc.ceilMode);
  ASSERT_GE(oh, 1);
  ASSERT_GE(ow, 1);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-4.0f, 4.0f);
  std::vector<float> x(tc.n * tc.c * tc.h * tc.w), y(tc.n * tc.c * oh * ow, 12345.0f);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = tc.nanEvery > 0 && i % static_cast<size_t>(tc.nanEvery) == 0 ? std::nanf("") : dist(rng);

  kiln_pool2d_args args{};
  args.n = tc.n, args.c = tc.c, args.h = tc.h, args.w = tc.w, args.oh = oh, args.ow = ow;
  args.kernel_h = tc.kernelH, args.kernel_w = tc.kernelW, args.stride_h = tc.strideH, args.stride_w = tc.strideW;
  args.pad_top = tc.padTop, args.pad_left = tc.padLeft, args.dilation_h = tc.dilationH, args.dilation_w = tc.dilationW;
  args.is_max = tc.isMax, args.count_include_pad = tc.countIncludePad;
  args.x = x.data(), args.y = y.data();
  kiln_rt rt = makeRuntime(tc.threads);
  // Every case through each form: pool2d's own choice, plane by plane, and channel blocks.
  for (const char *path : {"pool2d", "planes", "blocks"}) {
  SCOPED_TRACE(path);
  std::fill(y.begin(), y.end(), 12345.0f);
  if (path[0] == 'p' && path[1] == 'o')
    kiln::runtime::kernels::pool2d(&rt, &args);
  else if (path[0] == 'p')
    kiln::runtime::kernels::detail::poolPlaneByPlane(&rt, args);
  else
    kiln::runtime::kernels::detail::poolChannelBlocks(&rt, args);

  int64_t failures = 0;
  for (int64_t plane = 0; plane < tc.n * tc.c; ++plane)
    for (int64_t i = 0; i < oh; ++i)
      for (int64_t j = 0; j < ow; ++j) {
        double best = -std::numeric_limits<double>::infinity(), sum = 0;
        bool sawNan = false; // NaN wins a max
        int64_t inside = 0, padded = 0;
        for (int64_t r = 0; r < tc.kernelH; ++r)
          for (int64_t s = 0; s < tc.kernelW; ++s) {
            const int64_t ih = i * tc.strideH - tc.padTop + r * tc.dilationH;
            const int64_t iw = j * tc.strideW - tc.padLeft + s * tc.dilationW;
            if (ih >= -tc.padTop && ih < tc.h + tc.padBottom && iw >= -tc.padLeft && iw < tc.w + tc.padRight)
              ++padded;
            if (ih < 0 || ih >= tc.h || iw < 0 || iw >= tc.w)
              continue;
            const double v = x[(plane * tc.h + ih) * tc.w + iw];
            best = std::max(best, v);
            sawNan = sawNan || std::isnan(v);
            sum += v;
            ++inside;
          }
        const int64_t divisor = tc.countIncludePad ? padded : inside;
        const double expected = tc.isMax ? (sawNan ? std::nan("") : best) : divisor ? sum / double(divisor) : std::nan("");
        const float got = y[(plane * oh + i) * ow + j];
        const bool ok = std::isnan(expected) ? std::isnan(got)
                        : std::isinf(expected) ? got == expected
                                               : std::fabs(got - expected) <= 1e-5 * (1.0 + std::fabs(expected));
        if (!ok && failures++ < 5)
          ADD_FAILURE() << "y[" << plane << "][" << i << "][" << j << "] = " << got << ", expected " << expected;
      }
  EXPECT_EQ(failures, 0);
  }
}

TEST(Pool2dKernel, ResNetMaxPool) { checkPool({1, 4, 20, 20, 3, 3, 2, 2, 1, 1, 1, 1}); }

TEST(Pool2dKernel, ThreeByThreeStrideTwoMaxIsSeparable) {
  // The separable 3x3 stride-2 max: pads 0, 1 and 2, rows with partial and several vectors of
  // windows whose border taps are masked off, ceil mode (GoogLeNet's, whose last window reaches
  // past the row), NaNs in the interior and at the borders, two threads.
  for (int64_t pad : {0, 1, 2})
    for (int64_t width : {1, 2, 5, 14, 28, 31, 33, 37, 112}) {
      if (width + 2 * pad < 3)
        continue;
      PoolCase tc{2, 3, 9, width, 3, 3, 2, 2, pad, pad, pad, pad};
      checkPool(tc);
      tc.nanEvery = 13, tc.threads = 2, tc.ceilMode = pad == 1;
      checkPool(tc, 7);
      tc.ceilMode = true, tc.nanEvery = 5, tc.threads = 1;
      checkPool(tc, 8);
    }
}

TEST(Pool2dKernel, TwoByTwoStrideTwo) {
  // The row-pair, column-pair form: LeNet's 28 and 10 wide planes, rows of one partial vector,
  // of several, and odd sizes whose last row and column no window reads; max with NaNs (in
  // either row and either column of a window) and average; two threads.
  for (int64_t width : {28, 10, 7, 33, 224}) {
    for (bool isMax : {true, false}) {
      PoolCase tc{2, 3, width == 224 ? 6 : width + 1, width, 2, 2, 2, 2};
      tc.isMax = isMax;
      checkPool(tc);
      tc.threads = 2;
      tc.nanEvery = isMax ? 5 : 0;
      checkPool(tc, 3);
    }
  }
}

TEST(Pool2dKernel, MaxPoolStrideOneWideRows) { checkPool({2, 3, 9, 40, 3, 3, 1, 1, 1, 1, 1, 1}); }

TEST(Pool2dKernel, AveragePoolWithAndWithoutPadding) {
  PoolCase tc{1, 3, 11, 37, 3, 3, 2, 2, 1, 1, 1, 1};
  tc.isMax = false;
  checkPool(tc);
  tc.countIncludePad = true;
  checkPool(tc);
  tc.padBottom = 0, tc.padRight = 0; // asymmetric, floor mode
  checkPool(tc);
}

TEST(Pool2dKernel, GlobalAverage) {
  PoolCase tc{2, 8, 7, 7, 7, 7};
  tc.isMax = false;
  checkPool(tc);
}

TEST(Pool2dKernel, DilationAndStrideThree) {
  PoolCase tc{1, 2, 19, 41, 3, 2, 3, 3, 2, 1, 2, 1, 2, 3};
  checkPool(tc);
  tc.isMax = false;
  tc.countIncludePad = true;
  checkPool(tc);
}

TEST(Pool2dKernel, CeilModeWindowsPastThePadding) {
  for (bool isMax : {true, false})
    for (bool include : {false, true}) {
      PoolCase tc{1, 2, 10, 33, 3, 3, 2, 2, 1, 1, 1, 1};
      tc.isMax = isMax, tc.countIncludePad = include, tc.ceilMode = true;
      checkPool(tc);
      PoolCase even{1, 1, 8, 8, 2, 2, 2, 2}; // ceil mode that adds nothing
      even.isMax = isMax, even.countIncludePad = include, even.ceilMode = true;
      checkPool(even);
    }
}

TEST(Pool2dKernel, WindowsOfOnlyPadding) {
  PoolCase tc{1, 1, 2, 2, 2, 2, 1, 1, 2, 2, 2, 2};
  checkPool(tc); // corners see only padding: -inf
  tc.isMax = false;
  checkPool(tc); // NaN: the mean of nothing
  tc.countIncludePad = true;
  checkPool(tc); // 0
}

TEST(Pool2dKernel, RandomGeometriesAndThreads) {
  std::mt19937 rng(5);
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  for (int trial = 0; trial < 60; ++trial) {
    PoolCase tc{pick(1, 2), pick(1, 4), pick(1, 20), pick(1, 40), pick(1, 4), pick(1, 4)};
    tc.strideH = pick(1, 3), tc.strideW = pick(1, 3), tc.dilationH = pick(1, 2), tc.dilationW = pick(1, 2);
    tc.padTop = pick(0, std::min<int64_t>(2, tc.kernelH - 1)), tc.padLeft = pick(0, std::min<int64_t>(2, tc.kernelW - 1));
    tc.ceilMode = trial % 3 == 0;
    tc.isMax = trial % 2 == 0, tc.countIncludePad = trial % 4 == 1;
    const bool trailingPadMatters = tc.countIncludePad; // see the top of this file
    tc.padBottom = tc.ceilMode && trailingPadMatters ? tc.padTop : pick(0, trailingPadMatters ? tc.padTop : 2);
    tc.padRight = tc.ceilMode && trailingPadMatters ? tc.padLeft : pick(0, trailingPadMatters ? tc.padLeft : 2);
    tc.threads = trial % 5 == 0 ? 2 : 1;
    if (tc.h + tc.padTop + tc.padBottom < tc.dilationH * (tc.kernelH - 1) + 1 ||
        tc.w + tc.padLeft + tc.padRight < tc.dilationW * (tc.kernelW - 1) + 1)
      continue;
    checkPool(tc, static_cast<uint32_t>(trial));
  }
  PoolCase big{2, 16, 56, 56, 3, 3, 2, 2, 1, 1, 1, 1};
  big.threads = 2;
  checkPool(big);
}

TEST(Pool2dKernel, ThreadsSplitRowsAcrossImages) {
  // Four threads over 3 images of 35 output rows: the runs of (image, row) units start mid-image
  // and cross from one image into the next, in the separable max, the generic max and average
  // forms; a global pool (one output row), and output planes of 32x32 or fewer pixels, split
  // their planes instead.
  PoolCase separable{3, 5, 69, 69, 3, 3, 2, 2, 1, 1, 1, 1};
  separable.threads = 4;
  separable.nanEvery = 29;
  checkPool(separable);
  PoolCase average = separable;
  average.isMax = false, average.nanEvery = 0;
  checkPool(average, 2);
  PoolCase strideOne{3, 2, 40, 40, 3, 3, 1, 1, 1, 1, 1, 1};
  strideOne.threads = 3;
  checkPool(strideOne, 3);
  PoolCase global{1, 64, 32, 32, 32, 32};
  global.isMax = false, global.threads = 2;
  checkPool(global, 4);
  PoolCase small{2, 7, 27, 27, 3, 3, 2, 2, 0, 0, 0, 0}; // 13x13 outputs, 14 planes on 3 threads
  small.threads = 3, small.ceilMode = true, small.nanEvery = 17;
  checkPool(small, 5);
}

TEST(Pool2dKernel, SameSizeStrideOneOverFlattenedPlanes) {
  // Stride-1 pools that keep the plane's size (odd kernels, pads of half of them) run over the
  // flattened plane, a lane's column tracked across row ends: planes narrower and wider than
  // 16, of one row, one column and one pixel, kernels larger than the plane, max with NaNs,
  // averages with and without the padding in the divisor, and row runs on 2 and 3 threads.
  const std::pair<int64_t, int64_t> planes[] = {{7, 7}, {14, 14}, {17, 33}, {1, 20}, {20, 1}, {1, 1}, {5, 3}, {28, 28}};
  uint32_t seed = 40;
  for (auto [h, w] : planes)
    for (int64_t kernelH : {1, 3, 5})
      for (int64_t kernelW : {3, 7}) {
        PoolCase tc{2, 3, h, w, kernelH, kernelW, 1, 1, kernelH / 2, kernelW / 2, kernelH / 2, kernelW / 2};
        tc.nanEvery = 37;
        checkPool(tc, seed++);
        tc.nanEvery = 0, tc.isMax = false;
        checkPool(tc, seed++);
        tc.countIncludePad = true, tc.threads = 2;
        checkPool(tc, seed++);
        tc.isMax = true, tc.threads = 3;
        checkPool(tc, seed++);
      }
}

// Channel blocks (Pool2dBlocks.cpp) over channel counts that fill no block, one, and one and a
// bit or two and a half, batches, and blocks over two threads; and which pools take them:
// output planes up to 28x28 whose block fits the scratch.
TEST(Pool2dKernel, ChannelBlocks) {
  for (int64_t c : {1, 16, 17, 40}) {
    PoolCase tc{2, c, 15, 13, 3, 3, 2, 2, 1, 1, 1, 1};
    tc.ceilMode = true, tc.nanEvery = 23, tc.threads = c > 16 ? 2 : 1;
    checkPool(tc, static_cast<uint32_t>(c));
    tc.isMax = false, tc.nanEvery = 0, tc.countIncludePad = c % 2 == 0;
    checkPool(tc, static_cast<uint32_t>(c + 1));
    PoolCase wide{1, c, 9, 11, 2, 5, 1, 2, 0, 2, 0, 2};
    wide.dilationH = 2, wide.isMax = c % 2 == 1;
    checkPool(wide, static_cast<uint32_t>(c + 2));
  }
  auto args = [](int64_t c, int64_t hw, int64_t kernel, int64_t stride) {
    kiln_pool2d_args a{};
    a.n = 1, a.c = c, a.h = a.w = hw, a.kernel_h = a.kernel_w = kernel, a.stride_h = a.stride_w = stride;
    a.dilation_h = a.dilation_w = 1, a.pad_top = a.pad_left = kernel / 2, a.is_max = 1;
    a.oh = a.ow = (hw + 2 * (kernel / 2) - kernel) / stride + 1;
    return a;
  };
  using kiln::runtime::kernels::detail::channelBlockPool;
  EXPECT_TRUE(channelBlockPool(args(480, 28, 3, 2)));   // 14x14 outputs
  EXPECT_TRUE(channelBlockPool(args(832, 7, 3, 1)));
  EXPECT_TRUE(channelBlockPool(args(192, 28, 3, 1)));   // 28x28
  EXPECT_FALSE(channelBlockPool(args(192, 35, 3, 1)));  // 35x35: plane by plane
  EXPECT_FALSE(channelBlockPool(args(64, 112, 3, 2)));  // the stem's 56x56
}

TEST(Pool2dKernel, NaNWinsAMax) {
  std::vector<float> x = {1.0f, std::nanf(""), 3.0f, 2.0f}, y(1, 0.0f);
  kiln_pool2d_args args{};
  args.n = args.c = 1, args.h = args.w = 2, args.oh = args.ow = 1;
  args.kernel_h = args.kernel_w = 2, args.stride_h = args.stride_w = 1, args.dilation_h = args.dilation_w = 1;
  args.is_max = 1, args.x = x.data(), args.y = y.data();
  kiln::runtime::kernels::pool2d(nullptr, &args);
  EXPECT_TRUE(std::isnan(y[0]));
}

} // namespace

namespace {

/// A max pool of u8 or s8 planes (KILN_POOL_U8, KILN_POOL_S8) against the loops here: taps
/// outside the input never win; a window with none inside gives the type's lowest value.
void checkBytePool(const PoolCase &tc, bool isSigned, uint32_t seed = 1) {
  const int64_t oh = outputSize(tc.h, tc.padTop, tc.padBottom, tc.kernelH, tc.strideH, tc.dilationH, tc.ceilMode);
  const int64_t ow = outputSize(tc.w, tc.padLeft, tc.padRight, tc.kernelW, tc.strideW, tc.dilationW, tc.ceilMode);
  SCOPED_TRACE(testing::Message() << (isSigned ? "s8 " : "u8 ") << tc.n << "x" << tc.c << "x" << tc.h << "x" << tc.w
                                  << " kernel " << tc.kernelH << "x" << tc.kernelW << " stride " << tc.strideH << ","
                                  << tc.strideW << " pads " << tc.padTop << "," << tc.padLeft << " dilation "
                                  << tc.dilationH << "," << tc.dilationW << " threads " << tc.threads);
  ASSERT_GE(oh, 1);
  ASSERT_GE(ow, 1);
  std::mt19937 rng(seed);
  std::vector<uint8_t> x(static_cast<size_t>(tc.n * tc.c * tc.h * tc.w));
  for (uint8_t &v : x)
    v = static_cast<uint8_t>(rng());
  std::vector<uint8_t> y(static_cast<size_t>(tc.n * tc.c * oh * ow), 0x5a);
  kiln_pool2d_args args{};
  args.n = tc.n, args.c = tc.c, args.h = tc.h, args.w = tc.w, args.oh = oh, args.ow = ow;
  args.kernel_h = tc.kernelH, args.kernel_w = tc.kernelW, args.stride_h = tc.strideH, args.stride_w = tc.strideW;
  args.pad_top = tc.padTop, args.pad_left = tc.padLeft, args.dilation_h = tc.dilationH, args.dilation_w = tc.dilationW;
  args.is_max = 1, args.element = isSigned ? KILN_POOL_S8 : KILN_POOL_U8;
  args.x_bytes = x.data(), args.y_bytes = y.data();
  kiln_rt rt = makeRuntime(tc.threads);
  kiln::runtime::kernels::pool2d(&rt, &args);
  auto value = [&](uint8_t byte) { return isSigned ? int{static_cast<int8_t>(byte)} : int{byte}; };
  int64_t failures = 0;
  for (int64_t plane = 0; plane < tc.n * tc.c; ++plane)
    for (int64_t i = 0; i < oh; ++i)
      for (int64_t j = 0; j < ow; ++j) {
        int best = isSigned ? -128 : 0;
        for (int64_t r = 0; r < tc.kernelH; ++r)
          for (int64_t s = 0; s < tc.kernelW; ++s) {
            const int64_t ih = i * tc.strideH - tc.padTop + r * tc.dilationH;
            const int64_t iw = j * tc.strideW - tc.padLeft + s * tc.dilationW;
            if (ih >= 0 && ih < tc.h && iw >= 0 && iw < tc.w)
              best = std::max(best, value(x[static_cast<size_t>((plane * tc.h + ih) * tc.w + iw)]));
          }
        const int got = value(y[static_cast<size_t>((plane * oh + i) * ow + j)]);
        if (got != best && failures++ < 5)
          ADD_FAILURE() << "y[" << plane << "][" << i << "][" << j << "] = " << got << ", expected " << best;
      }
  EXPECT_EQ(failures, 0);
}

} // namespace

TEST(Pool2dKernel, MaxOfBytes) {
  for (bool isSigned : {false, true}) {
    // 2x2 stride 2 without padding (registers only): rows of one partial vector, two, and of
    // more than 128 bytes; odd sizes whose last row and column no window reads.
    for (int64_t width : {7, 10, 33, 130, 224})
      checkBytePool({2, 3, width == 224 ? 6 : 9, width, 2, 2, 2, 2}, isSigned);
    // The rows of maxima and strided gathers: ResNet's 3x3 stride-2 pad-1 at widths past 128,
    // stride 1 and 3 (the scalar gather), dilation, a 1x4 kernel, ceil mode, padding as wide
    // as the kernel (windows with no tap inside), two threads.
    for (int64_t width : {5, 64, 150})
      checkBytePool({1, 4, 11, width, 3, 3, 2, 2, 1, 1, 1, 1}, isSigned);
    checkBytePool({1, 3, 9, 20, 3, 3, 1, 1, 1, 1, 1, 1}, isSigned);
    checkBytePool({1, 2, 13, 40, 2, 3, 3, 3, 0, 1, 0, 1}, isSigned);
    PoolCase dilated{1, 2, 12, 70, 3, 2, 2, 2, 2, 1, 2, 1};
    dilated.dilationH = 2, dilated.dilationW = 3;
    checkBytePool(dilated, isSigned);
    checkBytePool({2, 3, 8, 17, 1, 4, 1, 2}, isSigned);
    PoolCase ceil{1, 3, 10, 21, 3, 3, 2, 2, 0, 0, 1, 1};
    ceil.ceilMode = true;
    checkBytePool(ceil, isSigned);
    PoolCase empty{1, 2, 4, 6, 2, 2, 2, 2, 2, 2, 2, 2}; // the first and last rows and columns: padding only
    empty.threads = 2;
    checkBytePool(empty, isSigned);
    PoolCase threaded{2, 8, 30, 200, 3, 3, 2, 2, 1, 1, 1, 1};
    threaded.threads = 2;
    checkBytePool(threaded, isSigned);
  }
}
