// kiln::runtime::kernels::conv2d against a naive double-precision loop written here, across
// strides, pads, dilations, groups (depthwise included) and thread counts.
//
// Tolerance: each output is a dot product of length K = C/groups * R * S, so as for GEMM
// (GemmKernelTest.cpp) an element must satisfy
//   |y - ref| <= 2e-6 * sqrt(K) * sum |x * w| (+1e-30),
// below a relative 1e-4 for K up to 2500. The epilogue adds a bias per output channel, applies
// ReLU and counts its calls per element, which must be exactly one. With accumulate, y starts
// as a random addend (a residual) that the convolution adds onto before the epilogue. Cases
// marked `direct` call the direct pixel-tile path (Conv2dDirect.cpp) whatever its gate says.
// Past the output lies a guard that no store may touch.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <thread>
#include <vector>

#include "runtime/kernels/Conv2dCommon.h"
#include "runtime/kernels/GemmBf16.h"
#include "runtime/kernels/Kernels.h"
#include "tests/runtime/KernelTestRuntime.h"

namespace {

using kiln::runtime::kernels::test::makeRuntime;

struct ConvCase {
  int64_t n, c, h, w, k, r, s;
  int64_t stride = 1, padTop = 0, padLeft = 0, padBottom = 0, padRight = 0, dilation = 1, groups = 1;
  int threads = 1;
  int64_t strideW = 0, dilationW = 0; // 0: same as the height's
  bool accumulate = false;
  bool direct = false; // call detail::directConv instead of conv2d
  bool planes = false; // call detail::depthwisePlaneConv (flat or stride phases) instead of conv2d
  bool blocks = false; // call detail::depthwiseChannelBlocks instead of conv2d
  bool rows = false;   // call detail::depthwiseShiftedRows instead of conv2d
  bool tapMajor = false; // pass the weights tap-major (KILN_CONV_WEIGHTS_TAP_MAJOR)
  bool directPanels = false; // pass W^T's panels (KILN_CONV_WEIGHTS_DIRECT_PANELS) to conv2d
  bool bf16 = false;     // KILN_PRECISION_BF16, for a convolution conv2d computes as a GEMM
  bool bf16Panels = false; // with bf16: the weights stored as bf16 panels (KILN_CONV_WEIGHTS_BF16_PANELS)
};

struct BiasReluEpilogue {
  const std::vector<float> *bias; // per output channel
  std::vector<int> *calls;
  int64_t k, pixels;
  static void apply(void *ctx, float *tile, int64_t ld, int64_t batch, int64_t row0, int64_t col0, int64_t rows,
                    int64_t cols) {
    auto &self = *static_cast<BiasReluEpilogue *>(ctx);
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) {
        float &v = tile[i * ld + j];
        v = std::max(0.0f, v + (*self.bias)[row0 + i]);
        ++(*self.calls)[(batch * self.k + row0 + i) * self.pixels + col0 + j];
      }
  }
};

void checkConv(const ConvCase &tc, uint32_t seed = 1) {
  const int64_t strideW = tc.strideW ? tc.strideW : tc.stride, dilationW = tc.dilationW ? tc.dilationW : tc.dilation;
  const int64_t oh = (tc.h + tc.padTop + tc.padBottom - tc.dilation * (tc.r - 1) - 1) / tc.stride + 1;
  const int64_t ow = (tc.w + tc.padLeft + tc.padRight - dilationW * (tc.s - 1) - 1) / strideW + 1;
  SCOPED_TRACE(testing::Message() << "n=" << tc.n << " c=" << tc.c << " " << tc.h << "x" << tc.w << " k=" << tc.k
                                  << " kernel " << tc.r << "x" << tc.s << " stride " << tc.stride << "," << strideW
                                  << " pads " << tc.padTop << "," << tc.padLeft << "," << tc.padBottom << ","
                                  << tc.padRight << " dilation " << tc.dilation << "," << dilationW
                                  << " groups " << tc.groups << " threads " << tc.threads
                                  << (tc.direct ? " direct" : "") << (tc.planes ? " planes" : "")
                                  << (tc.blocks ? " blocks" : "") << (tc.rows ? " rows" : "")
                                  << (tc.tapMajor ? " tap-major" : "") << (tc.directPanels ? " direct panels" : ""));
  ASSERT_GE(oh, 1);
  ASSERT_GE(ow, 1);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  const int64_t cg = tc.c / tc.groups, kg = tc.k / tc.groups;
  // At least one element each, so that no channels (K = 0) still passes valid pointers.
  std::vector<float> x(std::max<int64_t>(1, tc.n * tc.c * tc.h * tc.w)), w(std::max<int64_t>(1, tc.k * cg * tc.r * tc.s)),
      bias(tc.k);
  for (float &v : x)
    v = dist(rng);
  for (float &v : w)
    v = dist(rng);
  for (float &v : bias)
    v = dist(rng);
  constexpr size_t kGuard = 64;
  constexpr float kGuardValue = -777.0f;
  std::vector<float> y(tc.n * tc.k * oh * ow + kGuard, 12345.0f);
  if (tc.accumulate)
    for (float &v : y)
      v = dist(rng);
  std::fill(y.end() - kGuard, y.end(), kGuardValue);
  const std::vector<float> addend = y;
  std::vector<int> calls(y.size(), 0);
  BiasReluEpilogue epi{&bias, &calls, tc.k, oh * ow};

  kiln_conv2d_args args{};
  args.n = tc.n, args.c = tc.c, args.h = tc.h, args.w = tc.w;
  args.k = tc.k, args.r = tc.r, args.s = tc.s, args.oh = oh, args.ow = ow;
  args.stride_h = tc.stride, args.stride_w = strideW, args.pad_top = tc.padTop, args.pad_left = tc.padLeft;
  args.dilation_h = tc.dilation, args.dilation_w = dilationW, args.groups = tc.groups;
  args.x = x.data(), args.weights = w.data(), args.y = y.data();
  std::vector<float> tapMajor(w.size());
  if (tc.tapMajor) {
    kiln::runtime::kernels::packConvTapMajor(w.data(), tc.k, tc.c, tc.r, tc.s, tapMajor.data());
    args.weights = tapMajor.data(), args.weights_layout = KILN_CONV_WEIGHTS_TAP_MAJOR;
  }
  std::vector<float> directPanels;
  if (tc.directPanels) {
    const int64_t taps = tc.c * tc.r * tc.s;
    // Past the last channel the panels hold zeros, not what was there.
    directPanels.assign(static_cast<size_t>(kiln::runtime::kernels::convDirectPanelFloats(tc.k, taps)), 1e30f);
    kiln::runtime::kernels::packConvDirectPanels(w.data(), tc.k, taps, directPanels.data());
    for (float v : directPanels)
      ASSERT_NE(v, 1e30f);
    args.weights = directPanels.data(), args.weights_layout = KILN_CONV_WEIGHTS_DIRECT_PANELS;
  }
  args.epilogue = BiasReluEpilogue::apply;
  args.epilogue_ctx = &epi;
  args.accumulate = tc.accumulate;
  args.precision = tc.bf16 ? KILN_PRECISION_BF16 : KILN_PRECISION_F32;
  std::vector<uint16_t> bf16Panels;
  if (tc.bf16Panels) {
    ASSERT_TRUE(kiln::runtime::kernels::convBf16Panels(args));
    const int64_t depth = cg * tc.r * tc.s;
    bf16Panels.resize(static_cast<size_t>(kiln::runtime::kernels::convBf16PanelElements(tc.k, depth, tc.groups)),
                      0xFFFF);
    kiln::runtime::kernels::packConvBf16Panels(w.data(), tc.k, depth, tc.groups, bf16Panels.data());
    // Every element is written: the panels' padding is zero, never left as it was.
    for (uint16_t element : bf16Panels)
      ASSERT_NE(element, 0xFFFF);
    args.weights = reinterpret_cast<const float *>(bf16Panels.data());
    args.weights_layout = KILN_CONV_WEIGHTS_BF16_PANELS;
  }
  kiln_rt rt = makeRuntime(tc.threads);
  if (tc.direct)
    kiln::runtime::kernels::detail::directConv(&rt, args, kiln::runtime::kernels::detail::padInput(&rt, args));
  else if (tc.planes)
    kiln::runtime::kernels::detail::depthwisePlaneConv(&rt, args);
  else if (tc.blocks)
    kiln::runtime::kernels::detail::depthwiseChannelBlocks(&rt, args);
  else if (tc.rows)
    kiln::runtime::kernels::detail::depthwiseShiftedRows(&rt, args);
  else
    kiln::runtime::kernels::conv2d(&rt, &args);
  if (tc.bf16) // the GEMM multiplied the operands rounded to bf16, exactly (GemmKernelTest.cpp)
    for (std::vector<float> *operand : {&x, &w})
      for (float &v : *operand)
        v = kiln::runtime::kernels::detail::fromBf16(kiln::runtime::kernels::detail::toBf16(v));

  int64_t failures = 0;
  const int64_t depth = cg * tc.r * tc.s;
  for (int64_t img = 0; img < tc.n; ++img)
    for (int64_t oc = 0; oc < tc.k; ++oc)
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j) {
          const int64_t group = oc / kg;
          double sum = 0, magnitude = 0;
          for (int64_t ic = 0; ic < cg; ++ic)
            for (int64_t r = 0; r < tc.r; ++r)
              for (int64_t s = 0; s < tc.s; ++s) {
                const int64_t ih = i * tc.stride - tc.padTop + r * tc.dilation;
                const int64_t iw = j * strideW - tc.padLeft + s * dilationW;
                if (ih < 0 || ih >= tc.h || iw < 0 || iw >= tc.w)
                  continue;
                const double product = double(x[((img * tc.c + group * cg + ic) * tc.h + ih) * tc.w + iw]) *
                                       double(w[((oc * cg + ic) * tc.r + r) * tc.s + s]);
                sum += product;
                magnitude += std::fabs(product);
              }
          const size_t at = static_cast<size_t>(((img * tc.k + oc) * oh + i) * ow + j);
          const double start = tc.accumulate ? double(addend[at]) : 0.0;
          const double expected = std::max(0.0, start + sum + bias[oc]);
          const double tolerance =
              2e-6 * std::sqrt(double(std::max<int64_t>(depth, 1))) * (magnitude + std::fabs(bias[oc]) + std::fabs(start)) +
              1e-30;
          if (!(std::fabs(y[at] - expected) <= tolerance) && failures++ < 5)
            ADD_FAILURE() << "y[" << img << "][" << oc << "][" << i << "][" << j << "] = " << y[at] << ", expected "
                          << expected;
          if (calls[at] != 1 && failures++ < 5)
            ADD_FAILURE() << "epilogue ran " << calls[at] << " times on y[" << img << "][" << oc << "][" << i << "]["
                          << j << "]";
        }
  EXPECT_EQ(failures, 0);
  EXPECT_EQ(std::count(y.end() - kGuard, y.end(), kGuardValue), static_cast<long>(kGuard)) << "a store past the output";
}

TEST(Conv2dKernel, PointwiseReadsTheInputAsB) {
  checkConv({1, 16, 7, 9, 24, 1, 1});
  checkConv({2, 256, 6, 6, 64, 1, 1, 1, 0, 0, 0, 0, 1, 1, 2});
}

// Pointwise convolutions of 1x1 images (squeeze-and-excitation after a global pool) run as
// gemm's matrix-vector products (Conv2d.cpp, singlePixelConv): one image and three, the
// epilogue seeing each image's channels once, a 960 x 240 layer over two threads; a residual
// (accumulate) keeps the GEMM.
TEST(Conv2dKernel, SinglePixelPointwise) {
  checkConv({1, 24, 1, 1, 40, 1, 1});
  checkConv({3, 17, 1, 1, 33, 1, 1});
  ConvCase tc{1, 240, 1, 1, 960, 1, 1};
  tc.threads = 2;
  checkConv(tc);
  tc.accumulate = true;
  checkConv(tc);
}

// Pixels that fill whole vectors are read as B's rows where they lie, unpacked (GemmDriver.cpp):
// 80 pixels (a last panel of one vector), 256, 12544 as MobileNetV2's first pointwise layer,
// two K blocks, batches, two threads (column shares that may end mid-vector fall back to
// packing), and onto a residual.
TEST(Conv2dKernel, PointwiseReadsBRowsInPlace) {
  checkConv({1, 16, 8, 10, 24, 1, 1});
  checkConv({2, 24, 16, 16, 20, 1, 1});
  checkConv({1, 32, 112, 112, 16, 1, 1});
  checkConv({1, 600, 8, 8, 13, 1, 1});
  ConvCase tc{2, 48, 16, 20, 30, 1, 1};
  tc.threads = 2;
  checkConv(tc);
  tc = {1, 40, 24, 24, 8, 1, 1}, tc.threads = 2, tc.accumulate = true;
  checkConv(tc);
}

TEST(Conv2dKernel, Bf16GemmConvolutions) {
  auto bf16 = [](ConvCase tc) {
    tc.bf16 = true;
    return tc;
  };
  checkConv(bf16({1, 16, 7, 9, 24, 1, 1}));                               // pointwise
  checkConv(bf16({2, 33, 6, 6, 64, 1, 1, 1, 0, 0, 0, 0, 1, 1, 2}));       // pointwise, odd K, threads
  checkConv(bf16({1, 65, 7, 7, 96, 1, 1, 1, 0, 0, 0, 0, 1, 1, 2}));       // one image split in rows: B packed whole
  checkConv(bf16({1, 9, 12, 12, 70, 3, 3, 2, 1, 1, 1, 1}));               // im2col, stride 2
  checkConv(bf16({2, 12, 9, 9, 40, 3, 3, 1, 1, 1, 1, 1, 1, 2, 2}));       // im2col, two groups, threads
  ConvCase summed = bf16({1, 20, 5, 5, 30, 1, 1});
  summed.accumulate = true;
  checkConv(summed);
  // Weights stored as bf16 panels: odd depths (9*9 and 33), two groups (of 20 and of 13
  // output channels: panels that end short), threads, accumulation, a depth of three K blocks
  // (3x3 x 115 = 1035: blocks of 346, which start at even rows).
  auto rows = [&](ConvCase tc) {
    tc = bf16(tc);
    tc.bf16Panels = true;
    return tc;
  };
  checkConv(rows({1, 9, 12, 12, 70, 3, 3, 2, 1, 1, 1, 1}));
  checkConv(rows({2, 33, 6, 6, 64, 1, 1, 1, 0, 0, 0, 0, 1, 1, 2}));
  checkConv(rows({2, 12, 9, 9, 40, 3, 3, 1, 1, 1, 1, 1, 1, 2, 2}));
  checkConv(rows({1, 115, 8, 8, 40, 3, 3, 2, 1, 1, 1, 1, 1, 1, 2}));
  checkConv(rows({1, 10, 7, 7, 26, 1, 1, 1, 0, 0, 0, 0, 1, 2, 2}));
  checkConv(rows({1, 65, 7, 7, 96, 1, 1, 1, 0, 0, 0, 0, 1, 1, 2}));
  ConvCase rowsSummed = rows({1, 20, 5, 5, 30, 1, 1});
  rowsSummed.accumulate = true;
  checkConv(rowsSummed);
  // Small products take stored rows too (bf16 then pays at any size): 3 x 4 pixels.
  checkConv(rows({1, 16, 3, 4, 8, 1, 1}));
}

TEST(Conv2dKernel, Bf16RowsOnlyForGemmConvolutions) {
  kiln_conv2d_args a{};
  a.n = 1, a.c = a.k = 64, a.h = a.w = a.oh = a.ow = 28, a.r = a.s = 3, a.stride_h = a.stride_w = 1;
  a.pad_top = a.pad_left = 1, a.dilation_h = a.dilation_w = 1, a.groups = 1;
  EXPECT_FALSE(kiln::runtime::kernels::convBf16Panels(a)); // f32
  a.precision = KILN_PRECISION_BF16;
  EXPECT_FALSE(kiln::runtime::kernels::convBf16Panels(a)); // Winograd
  a.exact = 1;
  EXPECT_FALSE(kiln::runtime::kernels::convBf16Panels(a)); // exact sums stay f32
  a.exact = 0, a.r = a.s = 1, a.pad_top = a.pad_left = 0;
  EXPECT_TRUE(kiln::runtime::kernels::convBf16Panels(a)); // pointwise
  a.groups = a.c, a.k = a.c, a.r = a.s = 3, a.pad_top = a.pad_left = 1;
  EXPECT_FALSE(kiln::runtime::kernels::convBf16Panels(a)); // depthwise
}

TEST(Conv2dKernel, ThreeByThreePadOne) {
  checkConv({1, 8, 10, 12, 16, 3, 3, 1, 1, 1, 1, 1});
  checkConv({2, 64, 9, 9, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1, 2});
}

TEST(Conv2dKernel, StridedAndDilated) {
  checkConv({1, 3, 23, 23, 16, 7, 7, 2, 3, 3, 3, 3});     // a ResNet stem
  checkConv({1, 4, 15, 11, 8, 3, 3, 1, 2, 2, 2, 2, 2});   // dilation 2
  checkConv({1, 8, 14, 14, 16, 1, 1, 2});                 // 1x1 stride 2 (downsample)
  checkConv({1, 5, 17, 13, 6, 3, 2, 3, 1, 0, 2, 1, 1, 1, 1, 2, 2}); // stride 3 x 2, dilation 1 x 2
}

// 7x7 and 10x10 outputs: 49 and 100 pixels, whose last 1 and 4 columns the GEMM runs as dot
// products along k (here up to 1152 deep, three K blocks), pointwise and through im2col, on 1
// and 2 threads.
TEST(Conv2dKernel, SevenBySevenAndTenByTenOutputs) {
  checkConv({1, 64, 9, 9, 70, 3, 3});
  ConvCase strided{2, 128, 14, 14, 40, 3, 3, 2, 1, 1, 1, 1};
  strided.threads = 2;
  checkConv(strided);
  ConvCase pointwise{1, 600, 7, 7, 64, 1, 1};
  pointwise.threads = 2;
  checkConv(pointwise);
  checkConv({3, 6, 14, 14, 16, 5, 5}); // LeNet-5's second convolution
}

// One image split over threads: along output channels with the im2col panels packed once for
// all threads (7x7 outputs and several K blocks; shares over 192 channels, which run in
// 2048-pixel outer blocks), and along pixels (im2col and 1x1).
TEST(Conv2dKernel, ImageSplitOverThreads) {
  ConvCase tall{1, 1, 92, 92, 3100, 3, 3, 2, 1, 1, 1, 1};
  tall.threads = 2;
  checkConv(tall);
  for (int threads : {2, 3}) {
    ConvCase strided{1, 128, 14, 14, 200, 3, 3, 2, 1, 1, 1, 1};
    strided.threads = threads;
    checkConv(strided);
    ConvCase wide{1, 40, 14, 14, 150, 5, 5, 1, 2, 2, 2, 2};
    wide.threads = threads;
    checkConv(wide);
    ConvCase pixels{1, 24, 40, 40, 16, 1, 1};
    pixels.threads = threads;
    checkConv(pixels);
  }
}

TEST(Conv2dKernel, OutputRowsShorterAndLongerThanAPanel) {
  checkConv({1, 4, 300, 1, 8, 3, 1, 1, 1, 0, 1, 0}); // one pixel per output row: a run per column
  checkConv({1, 3, 5, 150, 8, 3, 3, 1, 1, 1, 1, 1}); // rows of 150 pixels cross 64-wide panels
}

TEST(Conv2dKernel, AsymmetricAndLargePads) {
  checkConv({1, 3, 5, 6, 4, 3, 3, 1, 0, 2, 2, 0});
  checkConv({1, 2, 3, 3, 3, 2, 2, 1, 3, 3, 3, 3}); // windows that see only padding
}

TEST(Conv2dKernel, GroupsAndDepthwise) {
  checkConv({2, 12, 8, 8, 18, 3, 3, 1, 1, 1, 1, 1, 1, 3});  // 3 groups of 4 -> 6
  checkConv({1, 16, 9, 10, 16, 3, 3, 1, 1, 1, 1, 1, 1, 16}); // depthwise
  checkConv({2, 8, 11, 11, 16, 5, 5, 2, 2, 2, 2, 2, 1, 8});  // depthwise, multiplier 2, stride 2
  checkConv({1, 6, 12, 7, 6, 3, 3, 3, 1, 1, 1, 1, 2, 6, 2}); // depthwise, stride 3, dilation 2, threads
  // Output rows run in groups of 4: 5, 6, 7 and 8 rows leave tails of 1, 2, 3 and none, at
  // strides 1 and 2, with rows wider than one vector (35).
  for (int64_t rows : {5, 6, 7, 8}) {
    checkConv({1, 4, rows, 35, 4, 3, 3, 1, 1, 1, 1, 1, 1, 4});
    checkConv({2, 3, 2 * rows, 35, 6, 3, 3, 2, 1, 1, 0, 0, 1, 3});
  }
  checkConv({1, 1, 12, 12, 6, 5, 5});                       // LeNet's first layer
}

TEST(Conv2dKernel, BatchesPadEachImageInTheProducts) {
  // On the im2col GEMM path a batch's products pad their own image when their thread reaches
  // it (paddedImage), not the whole batch ahead: several images, threads, strides, dilations,
  // uneven pads, groups (several products per image), and no padding at all.
  checkConv({3, 8, 13, 11, 40, 3, 3, 2, 1, 2, 0, 1, 2, 1, 2});   // stride 2, dilation 2, 2 threads
  checkConv({4, 12, 9, 10, 12, 3, 3, 1, 1, 1, 1, 1, 1, 2, 2});   // 2 groups of 6 -> 6
  checkConv({2, 6, 12, 12, 36, 5, 5, 1, 2, 2, 2, 2, 1, 1, 3});   // 5x5, 3 threads
  checkConv({3, 5, 8, 9, 36, 3, 3, 1, 0, 0, 0, 0, 1, 1, 2});     // unpadded: the input itself
}

TEST(Conv2dKernel, GroupedPadsEachGroupInItsThread) {
  // The grouped path (groupedConvShape: 4 to 16 outputs per group, rows of 14 or more) pads
  // each (image, group)'s planes when it reaches the group, once for the group's blocks of
  // four channels that follow on a thread: 8 and 16 outputs per group give 2 and 4 blocks,
  // odd group and batch counts split a group's blocks between two threads, and pads of 0
  // read the input in place.
  checkConv({3, 16, 15, 17, 32, 3, 3, 1, 1, 1, 1, 1, 1, 4, 2});  // 4 groups of 4 -> 8
  checkConv({2, 30, 9, 20, 48, 3, 3, 1, 2, 0, 1, 2, 1, 3, 2});   // 3 groups of 10 -> 16, uneven pads
  checkConv({1, 12, 16, 16, 12, 3, 3, 1, 0, 0, 0, 0, 1, 3, 2});  // unpadded: the input in place
  checkConv({5, 8, 14, 16, 8, 5, 5, 1, 4, 4, 4, 4, 2, 2, 1});    // 5x5 dilated, 1 thread
}

/// check(case) for a 19x23 depthwise layer of `channels` channels with every kernel size
/// 3-9 at strides 1 and 2, with and without dilation, "same" pads.
template <typename Check> void everyDepthwiseWindow(int64_t channels, const Check &check) {
  for (int64_t kernel : {3, 5, 7, 9})
    for (int64_t stride : {1, 2})
      for (int64_t dilation : {1, 2}) {
        const int64_t pad = dilation * (kernel - 1) / 2;
        check({1, channels, 19, 23, channels, kernel, kernel, stride, pad, pad, pad, pad, dilation, channels});
      }
}

// Plain depthwise plane by plane over the padded plane's stride phases (Conv2dDepthwise.cpp;
// conv2d takes this path for planes too large for a channel block): every kernel size 3-9
// at strides 1 and 2 with and without dilation, "same" and asymmetric pads, planes narrower
// than a vector (7x7, 1x1, 2x3), rows wide enough to be copied with unmasked loads, rows
// whose flattened outputs end mid-vector, non-square kernels, strides 3 and 4, and 2 threads.
TEST(Conv2dKernel, PlainDepthwiseByStridePhases) {
  auto planes = [](ConvCase tc) {
    tc.planes = true;
    checkConv(tc);
  };
  everyDepthwiseWindow(3, planes);
  planes({2, 5, 7, 7, 5, 3, 3, 1, 1, 1, 1, 1, 1, 5});       // 7x7 planes, batch 2
  planes({1, 4, 1, 1, 4, 3, 3, 1, 1, 1, 1, 1, 1, 4});       // one pixel, all taps but one padding
  planes({1, 2, 2, 3, 2, 3, 3, 2, 1, 1, 1, 1, 1, 2});       // stride 2 on a 2x3 plane
  planes({1, 3, 13, 40, 3, 3, 5, 2, 0, 2, 1, 0, 1, 3});     // 3x5 kernel, asymmetric pads
  planes({1, 2, 9, 80, 2, 3, 3, 2, 1, 1, 1, 1, 1, 2});      // stride 2, rows of whole vectors
  planes({1, 2, 6, 70, 2, 3, 3, 1, 1, 1, 1, 1, 1, 2});      // stride 1, rows of whole vectors
  planes({1, 2, 17, 17, 2, 3, 3, 3, 1, 1, 1, 1, 1, 2});     // stride 3
  planes({1, 2, 21, 22, 2, 5, 5, 4, 2, 2, 2, 2, 1, 2});     // stride 4
  ConvCase threaded{3, 8, 29, 31, 8, 3, 3, 2, 1, 1, 1, 1, 1, 8};
  threaded.threads = 2;
  planes(threaded);
  ConvCase unequal{1, 3, 12, 12, 3, 3, 3, 1, 1, 1, 1, 1, 1, 3}; // strides 1 and 2
  unequal.strideW = 2;
  checkConv(unequal);
}

// Stride-1 depthwise layers whose output rows are as wide as their input's load every tap
// straight from x, the padding masked off each load (Conv2dDepthwise.cpp, flat planes; conv2d
// takes this path for planes larger than 56x56): pads split unevenly between the sides (2
// left, 0 right), output heights unlike the input's, dilations reaching past the plane,
// one-column and one-row planes, planes ending inside a vector, many planes over 2 threads,
// and one shape twice (its masks come from the cache).
TEST(Conv2dKernel, DepthwiseStraightFromTheInput) {
  auto planes = [](ConvCase tc, uint32_t seed = 1) {
    tc.planes = true;
    checkConv(tc, seed);
  };
  planes({1, 3, 9, 17, 3, 3, 3, 1, 1, 2, 1, 0, 1, 3});     // pads left 2, right 0
  planes({1, 3, 9, 17, 3, 3, 3, 1, 0, 1, 2, 1, 1, 3});     // no top pad, 2 at the bottom
  planes({1, 2, 11, 13, 2, 3, 3, 1, 3, 3, 3, 3, 3, 2});    // dilation 3
  planes({1, 2, 5, 6, 2, 7, 7, 1, 3, 3, 3, 3, 1, 2});      // kernel larger than the plane
  planes({1, 4, 10, 1, 4, 3, 1, 1, 1, 0, 1, 0, 1, 4});     // one column
  planes({1, 4, 1, 40, 4, 1, 5, 1, 0, 2, 0, 2, 1, 4});     // one row
  planes({2, 6, 14, 14, 6, 5, 5, 1, 2, 2, 2, 2, 1, 6});    // 196 outputs: a 4-lane last vector
  ConvCase threaded{2, 40, 23, 23, 40, 3, 3, 1, 1, 1, 1, 1, 1, 40};
  threaded.threads = 2;
  planes(threaded);
  planes(threaded, 2);
  planes({1, 5, 60, 61, 5, 3, 3, 1, 2, 2, 2, 2, 2, 5});    // a large plane, dilated
}

// Large depthwise planes with a 3x3, 5x5 or 7x7 kernel, "same" padding and stride 1 or 2 run
// eight output rows at a time, each tap's inputs shifted or permuted out of the 16-column
// chunks around them (Conv2dDepthwiseRows.cpp): row widths below, at and around multiples of
// 16 and 32 (chunks wholly or partly outside the row on both sides), heights of one row, fewer
// than 8 output rows, and groups with a last row or two over, top and bottom pads unlike the
// kernel's half (fewer or more output rows), batches, one channel, and bands of rows on 2
// threads; then conv2d's own choice for large planes.
TEST(Conv2dKernel, DepthwiseShiftedRows) {
  auto rows = [](int64_t kernel, int64_t h, int64_t w, int64_t stride = 1, int64_t padTop = -1,
                 int64_t padBottom = -1) {
    const int64_t half = kernel / 2;
    ConvCase tc{2, 3, h, w, 3, kernel, kernel, stride, padTop < 0 ? half : padTop, half,
                padBottom < 0 ? half : padBottom, half, 1, 3};
    tc.rows = true;
    checkConv(tc);
  };
  for (int64_t stride : {1, 2})
    for (int64_t kernel : {3, 5, 7}) {
      for (int64_t w : {1, 5, 16, 17, 31, 32, 33, 47, 48, 63, 64, 65, 70, 97})
        rows(kernel, 9, w, stride);
      for (int64_t h : {1, 3, 8, 17, 18, 33})
        rows(kernel, h, 37, stride);
      rows(kernel, 12, 40, stride, 0, kernel - 1); // no top pad: rows start at the input's first
      rows(kernel, 12, 40, stride, kernel - 1, 0); // twice the top pad
      rows(kernel, 12, 40, stride, 0, 0);          // fewer output rows
    }
  ConvCase threaded{1, 1, 29, 45, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1};
  threaded.rows = true;
  threaded.threads = 2;
  checkConv(threaded); // one plane: a band of rows per thread
  threaded.stride = 2;
  checkConv(threaded);
  for (int64_t stride : {1, 2})
    for (int64_t kernel : {3, 5, 7}) // conv2d's own choice
      checkConv({1, 5, 60, 61, 5, kernel, kernel, stride, kernel / 2, kernel / 2, kernel / 2, kernel / 2, 1, 5});
}

// Plain depthwise with 16 channels in the lanes (Conv2dDepthwiseBlocks.cpp): channel counts
// that fill no block (1, 5), one and a bit (17), several (40); every kernel size 3-9 at
// strides 1 and 2 with and without dilation; strides 3 and unequal ones; asymmetric pads and
// pads larger than the kernel reaches; one-pixel, one-row and one-column planes; rows of
// more outputs than a row kernel takes (8) and an odd number of rows; bands of output rows
// when there are fewer blocks than threads need (1 block on 2 threads), and batches.
TEST(Conv2dKernel, DepthwiseChannelBlocks) {
  auto blocks = [](ConvCase tc, int threads = 1) {
    tc.blocks = true;
    tc.threads = threads;
    checkConv(tc);
  };
  everyDepthwiseWindow(17, [&](const ConvCase &tc) { blocks(tc); });
  blocks({1, 1, 7, 7, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1});       // one channel
  blocks({2, 5, 7, 7, 5, 3, 3, 2, 1, 1, 1, 1, 1, 5});       // 7x7 planes at stride 2, batch 2
  blocks({1, 40, 1, 1, 40, 3, 3, 1, 1, 1, 1, 1, 1, 40});    // one pixel, all taps but one padding
  blocks({1, 16, 1, 37, 16, 1, 5, 1, 0, 2, 0, 2, 1, 16});   // one row
  blocks({1, 16, 37, 1, 16, 5, 1, 1, 2, 0, 2, 0, 1, 16});   // one column
  blocks({1, 20, 13, 40, 20, 3, 5, 2, 0, 2, 1, 0, 1, 20});  // 3x5 kernel, asymmetric pads
  blocks({1, 16, 10, 10, 16, 3, 3, 1, 4, 3, 2, 5, 1, 16});  // pads beyond the kernel's reach
  blocks({1, 18, 17, 17, 18, 3, 3, 3, 1, 1, 1, 1, 1, 18});  // stride 3
  ConvCase unequal{1, 33, 12, 15, 33, 3, 3, 1, 1, 1, 1, 1, 1, 33};
  unequal.strideW = 2;
  blocks(unequal);
  unequal.strideW = 1, unequal.stride = 2, unequal.dilationW = 2;
  blocks(unequal);
  blocks({1, 16, 29, 31, 16, 3, 3, 2, 1, 1, 1, 1, 1, 16}, 2); // one block: bands of rows
  blocks({1, 48, 14, 14, 48, 5, 5, 1, 2, 2, 2, 2, 1, 48}, 2); // three blocks on two threads
  blocks({3, 40, 9, 9, 40, 3, 3, 1, 1, 1, 1, 1, 1, 40}, 2);   // batch 3
}

// conv2d's choice between the depthwise paths: channel blocks except for planes that fit no
// scratch and large stride-1 planes, which run along their rows without transposes (shifted
// rows for square 3-7 kernels with "same" padding, flat otherwise).
TEST(Conv2dKernel, DepthwiseChannelBlockGate) {
  auto args = [](int64_t c, int64_t hw, int64_t kernel, int64_t stride, int64_t groups) {
    kiln_conv2d_args a{};
    a.n = 1, a.c = c, a.h = a.w = hw, a.k = c, a.r = a.s = kernel, a.groups = groups;
    a.stride_h = a.stride_w = stride, a.dilation_h = a.dilation_w = 1, a.pad_top = a.pad_left = kernel / 2;
    a.oh = a.ow = (hw + 2 * (kernel / 2) - kernel) / stride + 1;
    return a;
  };
  using kiln::runtime::kernels::detail::channelBlockDepthwise;
  EXPECT_TRUE(channelBlockDepthwise(args(960, 7, 3, 1, 960)));
  EXPECT_TRUE(channelBlockDepthwise(args(240, 28, 5, 1, 240)));
  EXPECT_TRUE(channelBlockDepthwise(args(96, 112, 3, 2, 96)));   // as gated alone
  EXPECT_TRUE(channelBlockDepthwise(args(144, 56, 3, 1, 144)));
  EXPECT_FALSE(channelBlockDepthwise(args(32, 112, 3, 1, 32)));  // the shifted-row path's
  EXPECT_FALSE(channelBlockDepthwise(args(32, 112, 9, 1, 32)));  // the flat path's
  EXPECT_FALSE(channelBlockDepthwise(args(16, 1024, 3, 2, 16))); // a block larger than the scratch
  EXPECT_FALSE(channelBlockDepthwise(args(64, 14, 3, 1, 32)));   // two input channels per group
  using kiln::runtime::kernels::detail::shiftedRowDepthwise;
  EXPECT_TRUE(shiftedRowDepthwise(args(32, 112, 3, 1, 32)));
  EXPECT_TRUE(shiftedRowDepthwise(args(32, 112, 7, 1, 32)));
  EXPECT_TRUE(shiftedRowDepthwise(args(16, 64, 5, 1, 16)));
  EXPECT_FALSE(shiftedRowDepthwise(args(144, 56, 3, 1, 144))); // 56x56: channel blocks
  EXPECT_FALSE(shiftedRowDepthwise(args(120, 28, 5, 1, 120)));
  EXPECT_TRUE(shiftedRowDepthwise(args(96, 112, 3, 2, 96)));
  EXPECT_TRUE(shiftedRowDepthwise(args(32, 112, 5, 2, 32)));
  EXPECT_FALSE(shiftedRowDepthwise(args(144, 56, 3, 2, 144))); // stride 2 from 56x56: channel blocks
  EXPECT_FALSE(shiftedRowDepthwise(args(32, 112, 9, 1, 32)));  // 9x9: flat
  kiln_conv2d_args dilated = args(32, 112, 3, 1, 32);
  dilated.dilation_h = dilated.dilation_w = 2, dilated.pad_top = dilated.pad_left = 2;
  EXPECT_FALSE(shiftedRowDepthwise(dilated));
}

// 5-8 output channels per input channel run together, each input vector loaded once for all
// of them: one input channel (LeNet-5's first layer, at batch 2 on 2 threads) and depthwise
// multipliers of 5, 7 and 8; odd output heights (a single last row), rows wider than a vector,
// padding, stride 2 and dilation.
TEST(Conv2dKernel, OutputChannelsSharingAnInput) {
  ConvCase lenet{2, 1, 28, 28, 6, 5, 5};
  lenet.threads = 2;
  checkConv(lenet);
  checkConv({1, 2, 9, 21, 10, 3, 3, 1, 1, 1, 1, 1, 1, 2});   // multiplier 5, 9 rows
  checkConv({2, 3, 11, 35, 21, 3, 5, 2, 1, 2, 1, 2, 1, 3});  // multiplier 7, stride 2
  checkConv({1, 2, 10, 18, 16, 3, 3, 1, 2, 2, 2, 2, 2, 2});  // multiplier 8, dilation 2
}

TEST(Conv2dKernel, NarrowOutputs) {
  // 7 x 7 outputs (49 columns of 64-wide tiles) with many channels.
  checkConv({1, 32, 7, 7, 96, 3, 3, 1, 1, 1, 1, 1});
  checkConv({2, 64, 7, 7, 128, 1, 1, 1, 0, 0, 0, 0, 1, 1, 2});
  // One output pixel and 256 channels.
  checkConv({1, 32, 3, 3, 256, 3, 3});
  checkConv({2, 16, 4, 4, 200, 3, 3, 2, 1, 1, 0, 0, 1, 1, 2});
}

TEST(Conv2dKernel, ImagesAndThreads) {
  checkConv({3, 8, 16, 16, 24, 3, 3, 1, 1, 1, 1, 1, 1, 1, 2});
  checkConv({2, 16, 20, 20, 32, 3, 3, 2, 1, 1, 1, 1, 1, 2, 3});
}

TEST(Conv2dKernel, RandomGeometries) {
  std::mt19937 rng(11);
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  for (int trial = 0; trial < 40; ++trial) {
    ConvCase tc{pick(1, 2), 0, pick(1, 12), pick(1, 12), 0, pick(1, 4), pick(1, 4)};
    tc.groups = pick(1, 3);
    tc.c = tc.groups * pick(1, 5);
    tc.k = tc.groups * pick(1, 7);
    tc.stride = pick(1, 3), tc.strideW = pick(1, 3);
    tc.dilation = pick(1, 2), tc.dilationW = pick(1, 2);
    tc.padTop = pick(0, 2), tc.padLeft = pick(0, 2), tc.padBottom = pick(0, 2), tc.padRight = pick(0, 2);
    tc.threads = trial % 4 == 0 ? 2 : 1;
    if (tc.h + tc.padTop + tc.padBottom < tc.dilation * (tc.r - 1) + 1 ||
        tc.w + tc.padLeft + tc.padRight < tc.dilationW * (tc.s - 1) + 1)
      continue;
    checkConv(tc, static_cast<uint32_t>(trial));
  }
}

TEST(Conv2dKernel, PointwiseAccumulatesIntoTheOutput) {
  ConvCase tc{1, 16, 7, 9, 24, 1, 1};
  tc.accumulate = true;
  checkConv(tc);
  // Two K blocks (600 channels), so the first must add to the addend too.
  tc = {1, 600, 5, 6, 20, 1, 1}, tc.accumulate = true;
  checkConv(tc);
  // 7x7 pixels: 49 = 3 vectors + 1 column of dot products; and many output channels, which
  // the driver computes as C^T.
  tc = {1, 64, 7, 7, 40, 1, 1}, tc.accumulate = true;
  checkConv(tc);
  tc = {1, 32, 2, 2, 256, 1, 1}, tc.accumulate = true;
  checkConv(tc);
  // Batch 2, groups, two threads.
  tc = {2, 256, 6, 6, 64, 1, 1, 1, 0, 0, 0, 0, 1, 2, 2}, tc.accumulate = true;
  checkConv(tc);
  // No input channels (K = 0): the convolution is 0, y keeps the addend.
  tc = {1, 0, 3, 5, 8, 1, 1}, tc.accumulate = true;
  checkConv(tc);
}

TEST(Conv2dKernel, AccumulateOnlyForPointwiseConvolutions) {
  // conv2d adds into y only on its pointwise path; for anything else the arguments are
  // invalid and y stays as it was.
  std::vector<float> x(2 * 36, 1.0f), w(4 * 2 * 9, 1.0f), y(4 * 36, 7.0f);
  kiln_conv2d_args args{};
  args.n = 1, args.c = 2, args.h = 6, args.w = 6, args.k = 4, args.r = 3, args.s = 3, args.oh = 6, args.ow = 6;
  args.stride_h = args.stride_w = args.dilation_h = args.dilation_w = 1, args.pad_top = args.pad_left = 1;
  args.groups = 1, args.accumulate = 1;
  args.x = x.data(), args.weights = w.data(), args.y = y.data();
  kiln_rt rt = makeRuntime(1);
  kiln::runtime::kernels::conv2d(&rt, &args);
  EXPECT_EQ(y, std::vector<float>(4 * 36, 7.0f)) << "3x3";
  EXPECT_FALSE(kiln::runtime::kernels::convCanAccumulate(args));
  args.r = args.s = 1, args.pad_top = args.pad_left = 0, args.stride_w = 2, args.ow = 3;
  kiln::runtime::kernels::conv2d(&rt, &args);
  EXPECT_EQ(y, std::vector<float>(4 * 36, 7.0f)) << "1x1 stride 2";
  EXPECT_FALSE(kiln::runtime::kernels::convCanAccumulate(args));
  args.stride_w = 1, args.ow = 6;
  EXPECT_TRUE(kiln::runtime::kernels::convCanAccumulate(args));
  kiln::runtime::kernels::conv2d(&rt, &args);
  EXPECT_EQ(y, std::vector<float>(4 * 36, 9.0f)) << "1x1: 7 plus two channels of 1 x 1";
}

TEST(Conv2dKernel, DirectPixelTiles) {
  // Through conv2d's gate: LeNet-5's second layer (6 -> 16 channels, 5x5), on 1 and 2 threads.
  ConvCase lenet{4, 6, 14, 14, 16, 5, 5};
  checkConv(lenet);
  lenet.threads = 2;
  checkConv(lenet);
  // Called directly. Output pixel counts of every remainder modulo 6 (tiles of 6 pixels), rows
  // shorter than a tile (tiles run across row ends), blocks of more than 96 pixels, images.
  for (int64_t side : {1, 2, 3, 4, 5, 7, 8, 11})
    checkConv({1, 3, side + 2, side + 4, 12, 3, 3, 1, 0, 0, 0, 0, 1, 1, 1, 0, 0, false, true});
  checkConv({3, 5, 13, 14, 10, 3, 3, 1, 1, 1, 1, 1, 1, 1, 2, 0, 0, false, true});
  // Channel counts: 1 to 4 vectors of 16, partial ones, and several panels of 64.
  for (int64_t k : {1, 5, 16, 17, 33, 48, 64, 65, 130})
    checkConv({1, 4, 9, 9, k, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, false, true});
  // Strides, dilations and asymmetric pads; 2 and 3 threads.
  checkConv({2, 7, 17, 15, 20, 3, 2, 2, 2, 0, 1, 1, 1, 1, 2, 3, 2, false, true});
  checkConv({1, 3, 20, 20, 24, 7, 7, 2, 3, 3, 3, 3, 1, 1, 3, 0, 0, false, true});
  checkConv({2, 2, 12, 19, 9, 3, 4, 1, 2, 0, 0, 2, 2, 1, 2, 3, 1, false, true});
}

TEST(Conv2dKernel, DirectPanelsStoredAtLoad) {
  // W^T's panels as codegen stores them, through conv2d: Inception-v3's 1x7 and 7x1 layers at
  // 17x17 (three panels; items panel by panel: the weights outweigh the image), a 5x5 layer of
  // 64 channels (items block by block), on 1 to 3 threads.
  auto stored = [](ConvCase tc) {
    tc.directPanels = true;
    return tc;
  };
  for (int threads : {1, 2, 3}) {
    checkConv(stored({1, 192, 17, 17, 192, 1, 7, 1, 0, 3, 0, 3, 1, 1, threads}));
    checkConv(stored({1, 160, 17, 17, 160, 7, 1, 1, 3, 0, 3, 0, 1, 1, threads}));
    checkConv(stored({1, 48, 35, 35, 64, 5, 5, 1, 2, 2, 2, 2, 1, 1, threads}));
  }
  // Two images, a partial last panel (130 = 64 + 64 + 2 channels), stride 2.
  checkConv(stored({2, 20, 23, 23, 130, 3, 3, 2, 1, 1, 1, 1, 1, 1, 2}));
  // Output planes 4 KiB apart (32x32), whose tiles are staged before they are copied out.
  checkConv(stored({1, 16, 64, 64, 64, 3, 3, 2, 1, 1, 1, 1, 1, 1, 2}));
}

TEST(Conv2dKernel, DirectGate) {
  auto direct = [](int64_t c, int64_t k, int64_t r, int64_t groups = 1) {
    kiln_conv2d_args args{};
    args.n = 1, args.c = c, args.h = args.w = 20, args.k = k, args.r = args.s = r, args.oh = args.ow = 20 - r + 1;
    args.stride_h = args.stride_w = 1, args.dilation_h = args.dilation_w = 1, args.groups = groups;
    return kiln::runtime::kernels::detail::directConvShape(args);
  };
  EXPECT_TRUE(direct(6, 16, 5));  // LeNet-5's second layer
  EXPECT_TRUE(direct(16, 32, 3));
  EXPECT_FALSE(direct(6, 8, 5));   // few enough channels for one 6-row GEMM tile
  EXPECT_FALSE(direct(3, 32, 3));  // 27 taps
  EXPECT_FALSE(direct(12, 24, 3, 2)); // groups
  EXPECT_FALSE(direct(512, 16, 3)); // 4608 taps
  // More channels: where the W^T panel and a block's input rows fit in half of L2.
  auto wide = [](int64_t c, int64_t k, int64_t r, int64_t s, int64_t side, int64_t stride = 1, int64_t dilation = 1) {
    kiln_conv2d_args args{};
    args.n = 1, args.c = c, args.k = k, args.r = r, args.s = s, args.groups = 1;
    args.h = side * stride + (r - 1) * dilation, args.w = side * stride + (s - 1) * dilation;
    args.oh = args.ow = side;
    args.stride_h = args.stride_w = stride, args.dilation_h = args.dilation_w = dilation;
    const bool gate = kiln::runtime::kernels::detail::directConvShape(args);
    EXPECT_EQ(kiln::runtime::kernels::convDirectPanels(args), gate);
    args.precision = KILN_PRECISION_BF16; // the GEMM multiplies in bf16 instead
    EXPECT_FALSE(kiln::runtime::kernels::detail::directConvShape(args));
    args.precision = KILN_PRECISION_F32, args.exact = 1; // a training step's: the GEMM's order
    EXPECT_FALSE(kiln::runtime::kernels::detail::directConvShape(args));
    return gate;
  };
  EXPECT_TRUE(wide(192, 192, 1, 7, 17));   // Inception-v3 at 17x17: 344 KB of W^T a panel
  EXPECT_TRUE(wide(192, 192, 7, 1, 17));
  EXPECT_TRUE(wide(48, 64, 5, 5, 35));
  EXPECT_TRUE(wide(3, 64, 7, 7, 112, 2));  // a ResNet stem
  EXPECT_TRUE(wide(384, 384, 1, 3, 8));
  EXPECT_TRUE(wide(16, 64, 3, 3, 18));
  EXPECT_FALSE(wide(288, 384, 3, 3, 17, 2)); // a 663 KB panel
  EXPECT_FALSE(wide(256, 512, 1, 1, 7, 2));  // a strided 1x1 layer: its im2col is a copy
  EXPECT_FALSE(wide(128, 128, 3, 3, 32, 2)); // a 295 KB panel and 236 KB of rows
  EXPECT_FALSE(wide(256, 256, 3, 3, 32, 1, 2)); // DeepLab's dilated layers: 590 KB panels
}

TEST(Conv2dKernel, GroupedGate) {
  auto grouped = [](int64_t c, int64_t k, int64_t groups, int64_t side, int64_t stride = 1) {
    kiln_conv2d_args args{};
    args.n = 1, args.c = c, args.k = k, args.h = args.w = side, args.r = args.s = 3;
    args.oh = args.ow = (side - 1) / stride + 1;
    args.stride_h = args.stride_w = stride, args.pad_top = args.pad_left = 1;
    args.dilation_h = args.dilation_w = 1, args.groups = groups;
    return kiln::runtime::kernels::detail::groupedConvShape(args);
  };
  EXPECT_TRUE(grouped(128, 128, 32, 56));   // ResNeXt-50's layer1: 4 channels per group
  EXPECT_TRUE(grouped(512, 512, 32, 14));   // layer3: 16 per group
  EXPECT_FALSE(grouped(1024, 1024, 32, 7)); // layer4: 32 per group on 7 pixels a row
  EXPECT_FALSE(grouped(256, 256, 32, 56, 2)); // strided
  EXPECT_FALSE(grouped(96, 96, 32, 28));    // 3 per group
  EXPECT_FALSE(grouped(64, 64, 64, 28));    // depthwise
  EXPECT_FALSE(grouped(64, 64, 1, 28));     // one group
}

TEST(Conv2dKernel, GroupedDirectOverPixelVectors) {
  // Through the grouped gate: 4, 8, 12 and 16 channels per group, input channels per group
  // from 2 to 32 (and unequal to the outputs), row widths around multiples of 16, pads,
  // dilation, a row stride, batches and threads.
  checkConv({1, 128, 20, 20, 128, 3, 3, 1, 1, 1, 1, 1, 1, 32});
  checkConv({2, 16, 17, 16, 32, 3, 3, 1, 1, 1, 1, 1, 1, 4, 2});
  checkConv({1, 24, 15, 33, 48, 3, 3, 1, 2, 2, 2, 2, 2, 4});
  checkConv({1, 64, 14, 14, 32, 5, 5, 1, 2, 2, 2, 2, 1, 2, 2});
  checkConv({3, 12, 9, 31, 24, 3, 1, 2, 0, 0, 1, 0, 1, 6, 2, 1});
  checkConv({1, 4, 16, 18, 8, 1, 1, 1, 0, 0, 0, 0, 1, 2});
}

TEST(Conv2dKernel, SparseTapsGate) {
  auto sparse = [](int64_t side, int64_t dilation, int64_t groups = 1) {
    kiln_conv2d_args args{};
    args.n = 1, args.c = args.k = 8, args.h = args.w = side, args.r = args.s = 3, args.oh = args.ow = side;
    args.stride_h = args.stride_w = 1, args.pad_top = args.pad_left = dilation;
    args.dilation_h = args.dilation_w = dilation, args.groups = groups;
    return kiln::runtime::kernels::detail::sparseTapConvShape(args);
  };
  EXPECT_TRUE(sparse(16, 12));  // DeepLabV3's ASPP at 16x16: a quarter of the pairs inside
  EXPECT_TRUE(sparse(16, 24));  // only the centre tap reaches the image
  EXPECT_TRUE(sparse(1, 1));    // a 3x3 pad-1 convolution of a 1x1 map: the centre only
  EXPECT_FALSE(sparse(16, 2));  // dilated, but most pairs inside
  EXPECT_FALSE(sparse(7, 1));   // an ordinary 3x3 pad-1 layer on a small map: 82% inside
  EXPECT_FALSE(sparse(16, 24, 2)); // groups
  // What codegen stores tap-major: the path conv2d takes, so never a convolution it runs
  // another way (Winograd for a 3x3 pad-1 layer with channels enough, on a map larger than 1).
  kiln_conv2d_args aspp{};
  aspp.n = 1, aspp.c = 960, aspp.k = 256, aspp.h = aspp.w = aspp.oh = aspp.ow = 16, aspp.r = aspp.s = 3;
  aspp.stride_h = aspp.stride_w = 1, aspp.pad_top = aspp.pad_left = aspp.dilation_h = aspp.dilation_w = 12;
  aspp.groups = 1;
  EXPECT_TRUE(kiln::runtime::kernels::convSparseTaps(aspp));
  aspp.exact = 1; // training steps keep the GEMM's summation order
  EXPECT_FALSE(kiln::runtime::kernels::convSparseTaps(aspp));
  aspp.exact = 0;
  aspp.pad_top = aspp.pad_left = aspp.dilation_h = aspp.dilation_w = 1;
  EXPECT_FALSE(kiln::runtime::kernels::convSparseTaps(aspp));
}

TEST(Conv2dKernel, SparseTapsSkipThePadding) {
  // Large dilations against the image, so conv2d goes tap by tap (sparseTapConvShape): every
  // tap reaching part of the image, only the centre one, rectangles of every remainder,
  // strides, unequal dilations and pads, batches and threads.
  checkConv({1, 20, 16, 16, 24, 3, 3, 1, 12, 12, 12, 12, 12});
  checkConv({1, 20, 16, 16, 24, 3, 3, 1, 24, 24, 24, 24, 24});
  checkConv({2, 9, 11, 13, 70, 3, 3, 1, 9, 9, 9, 9, 9, 1, 2});
  checkConv({2, 17, 10, 9, 33, 3, 3, 2, 7, 6, 7, 6, 7, 1, 2, 1, 6});
  checkConv({1, 5, 6, 7, 8, 5, 3, 1, 5, 2, 5, 2, 3, 1, 1, 3, 2});
  checkConv({3, 16, 1, 1, 40, 3, 3, 1, 1, 1, 1, 1, 1, 1, 2});
  for (int64_t k : {1, 6, 65})
    checkConv({1, 33, 12, 12, k, 3, 3, 1, 10, 10, 10, 10, 10});
  // With the weights laid out tap-major, as the runtime stores them at load.
  ConvCase packed{2, 9, 11, 13, 70, 3, 3, 1, 9, 9, 9, 9, 9, 1, 2};
  packed.tapMajor = true;
  checkConv(packed);
  ConvCase kernel5x3{1, 5, 6, 7, 8, 5, 3, 1, 5, 2, 5, 2, 3, 1, 1, 3, 2};
  kernel5x3.tapMajor = true;
  checkConv(kernel5x3);
}

TEST(Conv2dKernel, InvalidArgumentsLeaveTheOutputAlone) {
  std::vector<float> x(16, 1.0f), w(4, 1.0f), y(16, 7.0f);
  kiln_conv2d_args args{};
  args.n = 1, args.c = 3, args.h = 4, args.w = 4, args.k = 1, args.r = 1, args.s = 1, args.oh = 4, args.ow = 4;
  args.stride_h = args.stride_w = args.dilation_h = args.dilation_w = 1;
  args.groups = 2; // does not divide 3 channels
  args.x = x.data(), args.weights = w.data(), args.y = y.data();
  kiln_rt rt = makeRuntime(1);
  kiln::runtime::kernels::conv2d(&rt, &args);
  args.groups = 1, args.stride_h = 0;
  kiln::runtime::kernels::conv2d(&rt, &args);
  kiln::runtime::kernels::conv2d(&rt, nullptr);
  // W^T's panels are for the direct path only: not for a pointwise convolution (whose path
  // reads plain weights).
  args.stride_h = 1, args.c = 2, args.k = 16, args.weights_layout = KILN_CONV_WEIGHTS_DIRECT_PANELS;
  kiln::runtime::kernels::conv2d(&rt, &args);
  EXPECT_EQ(y, std::vector<float>(16, 7.0f));
}

} // namespace
