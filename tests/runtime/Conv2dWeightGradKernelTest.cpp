// kiln::runtime::kernels::conv2dWeightGrad against a naive double-precision loop written here,
// across strides, pads, dilations, channel counts on either side of the 16-lane vectors (both
// orientations: vectors along C, and along K when C is narrow), tile tails and thread counts.
//
// Tolerance: each weight is a dot product of length L = N*OH*OW (fewer where taps read
// padding), so as for the forward kernel an element must satisfy
//   |dw - ref| <= 2e-6 * sqrt(L) * sum |dy * x| (+1e-30).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "runtime/kernels/Kernels.h"
#include "tests/runtime/KernelTestRuntime.h"

namespace {

using kiln::runtime::kernels::test::makeRuntime;

struct GradCase {
  int64_t n, c, h, w, k, r, s;
  int64_t stride = 1, padTop = 0, padLeft = 0, padBottom = 0, padRight = 0, dilation = 1;
  int threads = 1;
  int64_t strideW = 0, dilationW = 0; // 0: same as the height's
};

void checkWeightGrad(const GradCase &tc, uint32_t seed = 1) {
  const int64_t strideW = tc.strideW ? tc.strideW : tc.stride, dilationW = tc.dilationW ? tc.dilationW : tc.dilation;
  const int64_t oh = (tc.h + tc.padTop + tc.padBottom - tc.dilation * (tc.r - 1) - 1) / tc.stride + 1;
  const int64_t ow = (tc.w + tc.padLeft + tc.padRight - dilationW * (tc.s - 1) - 1) / strideW + 1;
  SCOPED_TRACE(testing::Message() << "n=" << tc.n << " c=" << tc.c << " " << tc.h << "x" << tc.w << " k=" << tc.k
                                  << " kernel " << tc.r << "x" << tc.s << " stride " << tc.stride << "," << strideW
                                  << " pads " << tc.padTop << "," << tc.padLeft << " dilation " << tc.dilation << ","
                                  << dilationW << " threads " << tc.threads);
  ASSERT_GE(oh, 1);
  ASSERT_GE(ow, 1);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> x(tc.n * tc.c * tc.h * tc.w), dy(tc.n * tc.k * oh * ow);
  for (float &v : x)
    v = dist(rng);
  for (float &v : dy)
    v = dist(rng);
  std::vector<float> dw(tc.k * tc.c * tc.r * tc.s, 12345.0f);

  kiln_conv2d_weight_grad_args args{};
  args.n = tc.n, args.c = tc.c, args.h = tc.h, args.w = tc.w;
  args.k = tc.k, args.r = tc.r, args.s = tc.s, args.oh = oh, args.ow = ow;
  args.stride_h = tc.stride, args.stride_w = strideW, args.pad_top = tc.padTop, args.pad_left = tc.padLeft;
  args.dilation_h = tc.dilation, args.dilation_w = dilationW;
  args.x = x.data(), args.dy = dy.data(), args.dw = dw.data();
  kiln_rt rt = makeRuntime(tc.threads);
  rt.conv2d_weight_grad(&rt, &args);

  int64_t failures = 0;
  for (int64_t oc = 0; oc < tc.k; ++oc)
    for (int64_t ic = 0; ic < tc.c; ++ic)
      for (int64_t r = 0; r < tc.r; ++r)
        for (int64_t s = 0; s < tc.s; ++s) {
          double sum = 0, magnitude = 0;
          int64_t terms = 0;
          for (int64_t img = 0; img < tc.n; ++img)
            for (int64_t i = 0; i < oh; ++i)
              for (int64_t j = 0; j < ow; ++j) {
                const int64_t ih = i * tc.stride - tc.padTop + r * tc.dilation;
                const int64_t iw = j * strideW - tc.padLeft + s * dilationW;
                if (ih < 0 || ih >= tc.h || iw < 0 || iw >= tc.w)
                  continue;
                const double product = double(dy[((img * tc.k + oc) * oh + i) * ow + j]) *
                                       double(x[((img * tc.c + ic) * tc.h + ih) * tc.w + iw]);
                sum += product;
                magnitude += std::fabs(product);
                ++terms;
              }
          const size_t at = static_cast<size_t>(((oc * tc.c + ic) * tc.r + r) * tc.s + s);
          const double tolerance = 2e-6 * std::sqrt(double(std::max<int64_t>(terms, 1))) * magnitude + 1e-30;
          if (!(std::fabs(dw[at] - sum) <= tolerance) && failures++ < 5)
            ADD_FAILURE() << "dw[" << oc << "][" << ic << "][" << r << "][" << s << "] = " << dw[at] << ", expected "
                          << sum;
        }
  EXPECT_EQ(failures, 0);
}

TEST(Conv2dWeightGradKernel, ThreeByThreePadOne) {
  checkWeightGrad({2, 64, 9, 9, 64, 3, 3, 1, 1, 1, 1, 1});
  checkWeightGrad({1, 8, 10, 12, 16, 3, 3, 1, 1, 1, 1, 1});
  checkWeightGrad({3, 40, 7, 7, 70, 3, 3, 1, 1, 1, 1, 1, 1, 2}); // tails of rows and vectors, 2 threads
}

TEST(Conv2dWeightGradKernel, VectorsAlongOutputChannelsForANarrowInput) {
  checkWeightGrad({2, 3, 23, 23, 64, 7, 7, 2, 3, 3, 3, 3});        // a ResNet stem
  checkWeightGrad({1, 1, 12, 12, 6, 5, 5});                       // LeNet's first layer
  checkWeightGrad({2, 5, 11, 9, 37, 3, 3, 1, 1, 1, 1, 1, 1, 3}); // 3 threads
}

TEST(Conv2dWeightGradKernel, StridedAndDilated) {
  checkWeightGrad({1, 4, 15, 11, 8, 3, 3, 1, 2, 2, 2, 2, 2});           // dilation 2
  checkWeightGrad({2, 32, 14, 14, 48, 1, 1, 2});                         // 1x1 stride 2 (downsample)
  checkWeightGrad({2, 24, 16, 16, 32, 3, 3, 2, 1, 1, 1, 1, 1, 2});       // 3x3 stride 2
  checkWeightGrad({1, 5, 17, 13, 6, 3, 2, 3, 1, 0, 2, 1, 1, 1, 2, 2});   // stride 3 x 2, dilation 1 x 2
}

TEST(Conv2dWeightGradKernel, PadsAndWindowsThatSeeOnlyPadding) {
  checkWeightGrad({1, 3, 5, 6, 4, 3, 3, 1, 0, 2, 2, 0});
  checkWeightGrad({1, 2, 3, 3, 3, 2, 2, 1, 3, 3, 3, 3});
  checkWeightGrad({2, 17, 4, 300, 5, 3, 3, 1, 1, 1, 1, 1}); // rows longer than a block of positions
}

TEST(Conv2dWeightGradKernel, RandomGeometries) {
  std::mt19937 rng(23);
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  for (int trial = 0; trial < 40; ++trial) {
    GradCase tc{pick(1, 3), pick(1, 40), pick(1, 12), pick(1, 12), pick(1, 40), pick(1, 4), pick(1, 4)};
    tc.stride = pick(1, 3), tc.strideW = pick(1, 3);
    tc.dilation = pick(1, 2), tc.dilationW = pick(1, 2);
    tc.padTop = pick(0, 2), tc.padLeft = pick(0, 2), tc.padBottom = pick(0, 2), tc.padRight = pick(0, 2);
    tc.threads = static_cast<int>(trial % 3) + 1;
    if (tc.h + tc.padTop + tc.padBottom < tc.dilation * (tc.r - 1) + 1 ||
        tc.w + tc.padLeft + tc.padRight < tc.dilationW * (tc.s - 1) + 1)
      continue;
    checkWeightGrad(tc, static_cast<uint32_t>(trial));
  }
}

TEST(Conv2dWeightGradKernel, NoImagesGiveZeroAndInvalidArgumentsLeaveTheOutputAlone) {
  std::vector<float> x(16, 1.0f), dy(16, 1.0f), dw(9, 7.0f);
  kiln_conv2d_weight_grad_args args{};
  args.n = 0, args.c = 1, args.h = 4, args.w = 4, args.k = 1, args.r = 3, args.s = 3, args.oh = 4, args.ow = 4;
  args.stride_h = args.stride_w = args.dilation_h = args.dilation_w = 1;
  args.pad_top = args.pad_left = 1;
  args.x = x.data(), args.dy = dy.data(), args.dw = dw.data();
  kiln_rt rt = makeRuntime(1);
  rt.conv2d_weight_grad(&rt, &args);
  EXPECT_EQ(dw, std::vector<float>(9, 0.0f));
  dw.assign(9, 7.0f);
  args.n = 1, args.stride_h = 0;
  rt.conv2d_weight_grad(&rt, &args);
  args.stride_h = 1, args.pad_left = -1;
  rt.conv2d_weight_grad(&rt, &args);
  rt.conv2d_weight_grad(&rt, nullptr);
  EXPECT_EQ(dw, std::vector<float>(9, 7.0f));
}

} // namespace
