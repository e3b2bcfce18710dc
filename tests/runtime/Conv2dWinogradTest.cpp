// The Winograd paths of kiln::runtime::kernels::conv2d (Conv2dWinograd*.cpp), F(2x2, 3x3) and
// F(4x4, 3x3), reached through the public conv2d where the shape passes its gate for that
// variant (so that the dispatch is exercised too) and called directly otherwise, against a
// direct double-precision loop written here. Shapes cover output sizes of every remainder
// modulo 2 and 4 (partial tiles at the bottom and right), pads 0, 1 and 2 on each side
// independently, batch 1 and 3, channel counts that are not multiples of 16, rows of more than
// 16 tiles, blocks of tile rows, and 1 to 3 threads, for both variants. Weights transformed
// ahead (KILN_CONV_WEIGHTS_WINOGRAD_F2/_F4, packWinogradWeights: what the runtime does at load)
// must give the very same output as weights transformed by the call.
//
// Tolerance: every element must be within 1e-5 * max |y| of the reference. F(2,3) is about as
// accurate as a direct fp32 sum, F(4,3) 2-4 times less (shared/notes/cpu-kernels.md, section
// 3: max error / max |y| ~3-8e-7 and 2.3e-6 (C = 64) to 9e-6 (C = 512)); the cases here have
// C <= 80. The epilogue adds a value that depends on (image, row, col) and counts its calls,
// which must be exactly one per element.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <thread>
#include <vector>

#include "runtime/kernels/Conv2dCommon.h"
#include "runtime/kernels/Conv2dWinograd.h" // winograd::makePlan
#include "runtime/kernels/Kernels.h"
#include "tests/runtime/KernelTestRuntime.h"

namespace {

using kiln::runtime::kernels::test::makeRuntime;

struct WinogradCase {
  int64_t n, c, h, w, k;
  int64_t padTop = 1, padLeft = 1, padBottom = 1, padRight = 1;
  int threads = 1;
  bool mustDispatch = false; // the shape must pass conv2d's gate (for either variant)
  bool packedWeights = false; // hand conv2d the weights transformed ahead
  int tile = 2;               // F(tile x tile, 3x3)
  bool bf16 = false;          // with packedWeights and tile 2: transformed into bf16 (F2_BF16)
};

/// Adds offset(image, row, col) to each element it sees and counts its calls.
struct CountingEpilogue {
  std::vector<int> *calls;
  int64_t k, pixels;
  static float offset(int64_t image, int64_t row, int64_t col) {
    return 0.25f * static_cast<float>((image * 7 + row * 3 + col) % 11) - 1.0f;
  }
  static void apply(void *ctx, float *tile, int64_t ld, int64_t batch, int64_t row0, int64_t col0, int64_t rows,
                    int64_t cols) {
    auto &self = *static_cast<CountingEpilogue *>(ctx);
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) {
        tile[i * ld + j] += offset(batch, row0 + i, col0 + j);
        ++(*self.calls)[(batch * self.k + row0 + i) * self.pixels + col0 + j];
      }
  }
};

void checkWinograd(const WinogradCase &tc, uint32_t seed = 1) {
  const int64_t oh = tc.h + tc.padTop + tc.padBottom - 2, ow = tc.w + tc.padLeft + tc.padRight - 2;
  SCOPED_TRACE(testing::Message() << "F(" << tc.tile << "," << 3 << ") n=" << tc.n << " c=" << tc.c << " " << tc.h << "x" << tc.w << " k=" << tc.k
                                  << " pads " << tc.padTop << "," << tc.padLeft << "," << tc.padBottom << ","
                                  << tc.padRight << " threads " << tc.threads << " output " << oh << "x" << ow);
  std::mt19937 rng(seed);
  // Post-ReLU-like inputs and weights scaled like a trained layer's.
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(tc.n * tc.c * tc.h * tc.w), w(tc.k * tc.c * 9);
  for (float &v : x)
    v = std::fabs(normal(rng));
  const float scale = 1.0f / std::sqrt(9.0f * static_cast<float>(tc.c));
  for (float &v : w)
    v = normal(rng) * scale;

  kiln_conv2d_args args{};
  args.n = tc.n, args.c = tc.c, args.h = tc.h, args.w = tc.w;
  args.k = tc.k, args.r = 3, args.s = 3, args.oh = oh, args.ow = ow;
  args.stride_h = args.stride_w = 1, args.pad_top = tc.padTop, args.pad_left = tc.padLeft;
  args.dilation_h = args.dilation_w = 1, args.groups = 1;
  // Past the output: a guard that no store may touch.
  constexpr size_t kGuard = 64;
  constexpr float kGuardValue = -777.0f;
  std::vector<float> y(tc.n * tc.k * oh * ow + kGuard, 12345.0f);
  std::fill(y.end() - kGuard, y.end(), kGuardValue);
  std::vector<int> calls(y.size(), 0);
  CountingEpilogue epilogue{&calls, tc.k, oh * ow};
  args.x = x.data(), args.weights = w.data(), args.y = y.data();
  args.epilogue = CountingEpilogue::apply;
  args.epilogue_ctx = &epilogue;
  kiln_rt rt = makeRuntime(tc.threads);
  // Shapes the gate sends to this variant go through conv2d; others (partial tiles, odd pads
  // at sizes whose reference loop is quick) call the Winograd path directly.
  const int gateTile = kiln::runtime::kernels::detail::winogradTile(args, false);
  EXPECT_EQ(kiln::runtime::kernels::convWinogradTile(args, false), gateTile);
  const bool dispatched = gateTile == tc.tile;
  if (tc.mustDispatch) {
    ASSERT_NE(gateTile, 0) << "the case misses the Winograd path";
  }
  auto runPlain = [&](kiln_conv2d_args plain) {
    if (dispatched)
      kiln::runtime::kernels::conv2d(&rt, &plain);
    else
      kiln::runtime::kernels::detail::winogradConv(&rt, plain, tc.tile);
  };
  if (tc.packedWeights) {
    // conv2d takes transformed weights to their Winograd variant whatever its gate says, and
    // must produce what the per-call transform produces, bit for bit.
    // In bf16 the products differ from f32's in some elements (but stay within bf16's error of
    // the reference, below).
    std::vector<float> transformed(
        static_cast<size_t>(kiln::runtime::kernels::winogradWeightFloats(tc.k, tc.c, tc.tile)));
    kiln::runtime::kernels::packWinogradWeights(w.data(), tc.k, tc.c, tc.tile, transformed.data());
    std::vector<uint16_t> transformed16(
        static_cast<size_t>(kiln::runtime::kernels::winogradWeightsBf16Elements(tc.k, tc.c, tc.tile)));
    kiln::runtime::kernels::packWinogradWeightsBf16(w.data(), tc.k, tc.c, tc.tile, transformed16.data());
    kiln_conv2d_args packed = args;
    packed.weights = tc.bf16 ? reinterpret_cast<const float *>(transformed16.data()) : transformed.data();
    packed.weights_layout = tc.tile == 4 ? KILN_CONV_WEIGHTS_WINOGRAD_F4
                                         : (tc.bf16 ? KILN_CONV_WEIGHTS_WINOGRAD_F2_BF16 : KILN_CONV_WEIGHTS_WINOGRAD_F2);
    packed.precision = tc.bf16 ? KILN_PRECISION_BF16 : KILN_PRECISION_F32;
    kiln::runtime::kernels::conv2d(&rt, &packed);
    std::vector<float> plainY(y.size(), 12345.0f);
    std::fill(plainY.end() - kGuard, plainY.end(), kGuardValue);
    std::vector<int> plainCalls(y.size(), 0);
    CountingEpilogue plainEpilogue{&plainCalls, tc.k, oh * ow};
    kiln_conv2d_args plain = args;
    plain.y = plainY.data(), plain.epilogue_ctx = &plainEpilogue;
    runPlain(plain);
    size_t differing = 0;
    for (size_t i = 0; i < y.size(); ++i)
      differing += y[i] != plainY[i];
    if (tc.bf16)
      EXPECT_GT(differing, 0u) << "bf16 weights gave f32's result";
    else
      EXPECT_EQ(differing, 0u) << "elements that differ from the per-call transform's";
  } else {
    runPlain(args);
  }

  std::vector<double> expected(y.size());
  double largest = 0;
  for (int64_t img = 0; img < tc.n; ++img)
    for (int64_t oc = 0; oc < tc.k; ++oc)
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j) {
          double sum = 0;
          for (int64_t ic = 0; ic < tc.c; ++ic)
            for (int64_t r = 0; r < 3; ++r)
              for (int64_t s = 0; s < 3; ++s) {
                const int64_t ih = i - tc.padTop + r, iw = j - tc.padLeft + s;
                if (ih < 0 || ih >= tc.h || iw < 0 || iw >= tc.w)
                  continue;
                sum += double(x[((img * tc.c + ic) * tc.h + ih) * tc.w + iw]) * double(w[((oc * tc.c + ic) * 3 + r) * 3 + s]);
              }
          expected[((img * tc.k + oc) * oh + i) * ow + j] = sum;
          largest = std::max(largest, std::fabs(sum));
        }
  // bf16 rounds U and V (2^-9 relative each) before sums over C channels and F2's transforms:
  // a few 2^-9 of the largest output, well inside 1e-2 of it (F4's reached 4.5e-2).
  const double tolerance = (tc.bf16 ? 1e-2 : 1e-5) * largest;
  int64_t failures = 0;
  double worst = 0;
  for (int64_t img = 0; img < tc.n; ++img)
    for (int64_t oc = 0; oc < tc.k; ++oc)
      for (int64_t p = 0; p < oh * ow; ++p) {
        const size_t at = static_cast<size_t>((img * tc.k + oc) * oh * ow + p);
        const double want = expected[at] + CountingEpilogue::offset(img, oc, p);
        worst = std::max(worst, std::fabs(y[at] - want));
        if (!(std::fabs(y[at] - want) <= tolerance) && failures++ < 5)
          ADD_FAILURE() << "y[" << img << "][" << oc << "][" << p / ow << "][" << p % ow << "] = " << y[at]
                        << ", expected " << want;
        if (calls[at] != 1 && failures++ < 5)
          ADD_FAILURE() << "epilogue ran " << calls[at] << " times on y[" << img << "][" << oc << "][" << p / ow
                        << "][" << p % ow << "]";
      }
  EXPECT_EQ(failures, 0) << "max error " << worst << " against max |y| " << largest;
  EXPECT_EQ(std::count(y.end() - kGuard, y.end(), kGuardValue), static_cast<long>(kGuard)) << "a store past the output";
}

/// The case with each variant (one of them through conv2d's dispatch when the gate passes it).
void checkBothTiles(WinogradCase tc, uint32_t seed = 1) {
  for (int tile : {2, 4}) {
    tc.tile = tile;
    checkWinograd(tc, seed);
  }
}

TEST(Conv2dWinograd, EvenAndOddOutputSizes) {
  checkBothTiles({1, 16, 8, 8, 16});   // 8 x 8: whole tiles
  checkBothTiles({1, 17, 9, 9, 19});   // 9 x 9: a partial tile row and column
  checkBothTiles({1, 24, 8, 11, 20});  // even rows, odd columns
  checkBothTiles({1, 20, 13, 6, 33});  // odd rows, even columns
}

TEST(Conv2dWinograd, PadsZeroOneAndTwo) {
  checkBothTiles({1, 18, 10, 10, 17, 0, 0, 0, 0}); // 8 x 8, no padding
  checkBothTiles({1, 18, 9, 10, 17, 2, 2, 2, 2});  // 11 x 12
  checkBothTiles({1, 18, 9, 10, 17, 0, 2, 1, 0});  // asymmetric
  checkBothTiles({1, 18, 8, 7, 17, 2, 0, 0, 1});   // asymmetric, odd output
}

TEST(Conv2dWinograd, ImagesAndThreads) {
  checkBothTiles({3, 21, 11, 12, 18, 1, 1, 1, 1, 1});
  checkBothTiles({3, 21, 11, 12, 18, 1, 2, 0, 1, 2});
  checkBothTiles({1, 40, 15, 15, 24, 1, 1, 1, 1, 2});
}

TEST(Conv2dWinograd, RowsWiderThanOneVectorOfTiles) {
  // 37 columns of output: 19 tiles of F(2,3) per row, so two groups of 16 with a masked tail;
  // 70 columns: 18 tiles of F(4,3), the last group of two a partial tile; 57 columns: 15 tiles
  // of F(4,3) whose last row store (columns 48-63) is partial, at the end of the output.
  checkBothTiles({1, 16, 37, 37, 16, 1, 1, 1, 1, 1});
  checkBothTiles({2, 16, 36, 37, 17, 1, 0, 2, 1, 2});
  checkBothTiles({1, 16, 12, 70, 16, 1, 1, 1, 1, 2});
  checkBothTiles({1, 16, 9, 57, 16, 1, 1, 1, 1, 1});
}

TEST(Conv2dWinograd, BlocksOfTileRowsAndPhases) {
  // Several tile-row blocks per image (V and M sized for L2), one and two threads.
  checkBothTiles({1, 48, 66, 34, 40, 1, 1, 1, 1, 1});
  checkBothTiles({1, 48, 65, 35, 40, 1, 1, 1, 1, 2});
  // One block and two threads: the threads share it phase by phase (input channels, points,
  // output channels); then a block of two whole images.
  checkBothTiles({1, 64, 14, 14, 72, 1, 1, 1, 1, 2});
  checkBothTiles({2, 40, 8, 8, 72, 1, 1, 1, 1, 2});
  // Whole blocks per thread: small weights are transformed by each thread into its own U
  // (above), large ones (80 x 72) once, split over the threads, and shared.
  checkBothTiles({2, 80, 30, 30, 72, 1, 1, 1, 1, 2});
}

TEST(Conv2dWinograd, OutputChannelsSplitOverThreads) {
  // Few blocks of a layer with at least twice as many output channels as input channels
  // (SqueezeNet's expand layers): each thread transforms the whole block's input and takes a
  // share of whole 16-channel epilogue chunks, with U transformed per call (shared) and stored,
  // on two and three threads; 100 channels are 7 chunks, the last partial, split 2, 2 and 3.
  for (bool stored : {false, true}) {
    checkBothTiles({1, 20, 13, 13, 72, 1, 1, 1, 1, 2, false, stored});
    checkBothTiles({1, 24, 11, 12, 100, 1, 0, 2, 1, 3, false, stored});
    checkBothTiles({2, 16, 6, 6, 96, 1, 1, 1, 1, 2, false, stored}); // a block of both images
  }
}

TEST(Conv2dWinograd, WeightsTransformedAhead) {
  WinogradCase below{1, 17, 9, 9, 19}; // below the gate: conv2d goes by the layout alone
  below.packedWeights = true;
  checkBothTiles(below);
  // One block, two and three threads, phase by phase.
  WinogradCase parts{1, 64, 14, 14, 72, 1, 1, 1, 1, 2, true, true};
  checkBothTiles(parts);
  parts.threads = 3;
  checkBothTiles(parts);
  // Whole blocks per thread, with weights small enough that a per-call transform gives each
  // thread its own U, and large ones that it shares.
  checkBothTiles({2, 16, 30, 30, 16, 1, 1, 1, 1, 2, false, true});
  checkBothTiles({2, 80, 30, 30, 72, 1, 1, 1, 1, 2, false, true});
  // Two blocks on two threads: with U transformed per call the threads run both phase by
  // phase, with U stored each takes a block.
  checkBothTiles({1, 80, 30, 30, 72, 1, 1, 1, 1, 2, false, true});
  // Batch 3, odd output, asymmetric pads, channels not multiples of 16.
  checkBothTiles({3, 33, 13, 12, 35, 2, 1, 2, 0, 2, true, true});
}

TEST(Conv2dWinograd, Bf16TransformedWeights) {
  // The same schedules as above (a block on several threads phase by phase, whole blocks per
  // thread, odd shapes) with U stored in bf16.
  auto bf16 = [](WinogradCase tc) {
    tc.packedWeights = tc.bf16 = true;
    return tc;
  };
  checkWinograd(bf16({1, 64, 14, 14, 72, 1, 1, 1, 1, 2, true}));
  checkWinograd(bf16({1, 64, 14, 14, 72, 1, 1, 1, 1, 3, true}));
  checkWinograd(bf16({2, 80, 30, 30, 72, 1, 1, 1, 1, 2}));
  checkWinograd(bf16({3, 33, 13, 12, 35, 2, 1, 2, 0, 2, true}));
  // Without precision bf16 the layout is invalid: conv2d leaves y alone.
  kiln_conv2d_args args{};
  args.n = 1, args.c = 64, args.h = args.w = args.oh = args.ow = 14, args.k = 64, args.r = args.s = 3;
  args.stride_h = args.stride_w = 1, args.pad_top = args.pad_left = 1, args.dilation_h = args.dilation_w = 1;
  args.groups = 1;
  std::vector<float> x(64 * 14 * 14, 1.0f), y(64 * 14 * 14, 5.0f);
  std::vector<uint16_t> u(static_cast<size_t>(kiln::runtime::kernels::winogradWeightsBf16Elements(64, 64, 2)), 0);
  args.x = x.data(), args.y = y.data(), args.weights = reinterpret_cast<const float *>(u.data());
  args.weights_layout = KILN_CONV_WEIGHTS_WINOGRAD_F2_BF16;
  kiln_rt rt = makeRuntime(1);
  kiln::runtime::kernels::conv2d(&rt, &args);
  EXPECT_EQ(std::count(y.begin(), y.end(), 5.0f), static_cast<long>(y.size()));
}

TEST(Conv2dWinograd, TransformedWeightsOnlyForWinogradShapes) {
  // A layout the convolution cannot have is invalid arguments: conv2d leaves y alone.
  kiln_conv2d_args args{};
  args.n = 1, args.c = 16, args.h = 8, args.w = 8, args.k = 16, args.r = 1, args.s = 1, args.oh = 8, args.ow = 8;
  args.stride_h = args.stride_w = 1, args.dilation_h = args.dilation_w = 1, args.groups = 1;
  std::vector<float> x(16 * 64, 1.0f), w(16 * 16 * 9, 1.0f), y(16 * 64, 7.0f);
  args.x = x.data(), args.weights = w.data(), args.y = y.data();
  args.weights_layout = KILN_CONV_WEIGHTS_WINOGRAD_F2;
  kiln_rt rt = makeRuntime(1);
  kiln::runtime::kernels::conv2d(&rt, &args);
  EXPECT_EQ(std::count(y.begin(), y.end(), 7.0f), static_cast<long>(y.size())) << "a 1x1 convolution";
  args.r = args.s = 3, args.pad_top = args.pad_left = 1, args.stride_w = 2, args.ow = 4;
  kiln::runtime::kernels::conv2d(&rt, &args);
  EXPECT_EQ(std::count(y.begin(), y.end(), 7.0f), static_cast<long>(y.size())) << "stride 2";
  args.stride_w = 1, args.ow = 8, args.weights_layout = 3;
  kiln::runtime::kernels::conv2d(&rt, &args);
  EXPECT_EQ(std::count(y.begin(), y.end(), 7.0f), static_cast<long>(y.size())) << "an unknown layout";
  args.weights_layout = KILN_CONV_WEIGHTS_PLAIN;
  kiln::runtime::kernels::conv2d(&rt, &args);
  EXPECT_EQ(std::count(y.begin(), y.end(), 7.0f), 0) << "the same arguments, plain weights";
}

// exact = 1 (training steps): a convolution the gate sends to Winograd is a plain sum of
// products instead, much closer to the exact sum than F(4x4, 3x3) comes; with transformed
// weights it is invalid arguments (y left alone).
TEST(Conv2dWinograd, ExactConvolutionsAreSumsOfProducts) {
  const int64_t c = 64, hw = 56, k = 64;
  kiln_conv2d_args args{};
  args.n = 1, args.c = c, args.h = hw, args.w = hw, args.k = k, args.r = 3, args.s = 3, args.oh = hw, args.ow = hw;
  args.stride_h = args.stride_w = 1, args.pad_top = args.pad_left = 1, args.dilation_h = args.dilation_w = 1;
  args.groups = 1;
  ASSERT_EQ(kiln::runtime::kernels::detail::winogradTile(args, false), 4) << "a shape the gate sends to F(4x4, 3x3)";
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(c * hw * hw), w(k * c * 9);
  for (float &v : x)
    v = std::fabs(normal(rng));
  for (float &v : w)
    v = normal(rng) / std::sqrt(9.0f * c);
  args.x = x.data(), args.weights = w.data();
  kiln_rt rt = makeRuntime(1);
  auto worstError = [&](int32_t exact) {
    std::vector<float> y(k * hw * hw);
    kiln_conv2d_args run = args;
    run.y = y.data(), run.exact = exact;
    kiln::runtime::kernels::conv2d(&rt, &run);
    double worst = 0, largest = 0;
    for (int64_t o = 0; o < k; ++o)
      for (int64_t i = 0; i < hw; ++i)
        for (int64_t j = 0; j < hw; ++j) {
          double sum = 0;
          for (int64_t ic = 0; ic < c; ++ic)
            for (int64_t r = 0; r < 3; ++r)
              for (int64_t q = 0; q < 3; ++q) {
                const int64_t ih = i + r - 1, iw = j + q - 1;
                if (ih >= 0 && ih < hw && iw >= 0 && iw < hw)
                  sum += double(x[(ic * hw + ih) * hw + iw]) * w[((o * c + ic) * 3 + r) * 3 + q];
              }
          worst = std::max(worst, std::fabs(y[(o * hw + i) * hw + j] - sum));
          largest = std::max(largest, std::fabs(sum));
        }
    return worst / largest;
  };
  const double exact = worstError(1), winograd = worstError(0);
  EXPECT_LT(exact, 1e-6);
  EXPECT_GT(winograd, 4 * exact) << "F(4x4, 3x3) rounds further off: the flag must have changed the path";
  std::vector<float> transformed(static_cast<size_t>(kiln::runtime::kernels::winogradWeightFloats(k, c, 4)));
  kiln::runtime::kernels::packWinogradWeights(w.data(), k, c, 4, transformed.data());
  std::vector<float> y(k * hw * hw, 7.0f);
  kiln_conv2d_args packed = args;
  packed.weights = transformed.data(), packed.weights_layout = KILN_CONV_WEIGHTS_WINOGRAD_F4, packed.exact = 1;
  packed.y = y.data();
  kiln::runtime::kernels::conv2d(&rt, &packed);
  EXPECT_EQ(std::count(y.begin(), y.end(), 7.0f), static_cast<long>(y.size())) << "exact with transformed weights";
}

TEST(Conv2dWinograd, ConvolutionsThatPassTheGate) {
  // The gate picks F(2,3) for the first two and the last, F(4,3) for the third (GatePicksTheVariant).
  checkBothTiles({1, 64, 14, 14, 64, 1, 1, 1, 1, 1, true});   // ResNet stage 3 shape, fewer channels
  checkBothTiles({1, 48, 19, 21, 56, 0, 2, 1, 1, 2, true});   // odd output, asymmetric pads
  checkBothTiles({3, 40, 13, 12, 44, 2, 1, 2, 0, 2, true});   // batch 3, pads 2
  checkBothTiles({2, 33, 27, 26, 35, 1, 1, 0, 0, 1, true});   // channels not multiples of 16
}

TEST(Conv2dWinograd, RandomShapes) {
  std::mt19937 rng(5);
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  for (int trial = 0; trial < 12; ++trial) {
    WinogradCase tc{pick(1, 3), pick(16, 40), pick(6, 20), pick(6, 20), pick(16, 40)};
    tc.padTop = pick(0, 2), tc.padLeft = pick(0, 2), tc.padBottom = pick(0, 2), tc.padRight = pick(0, 2);
    tc.threads = trial % 2 == 0 ? 1 : 2;
    if (tc.h + tc.padTop + tc.padBottom - 2 < 6 || tc.w + tc.padLeft + tc.padRight - 2 < 6)
      continue;
    checkBothTiles(tc, static_cast<uint32_t>(trial + 100));
  }
}

TEST(Conv2dWinograd, GateKeepsOtherConvolutionsOnTheirPath) {
  kiln_conv2d_args args{};
  args.n = 1, args.c = 64, args.h = 16, args.w = 16, args.k = 64, args.r = 3, args.s = 3, args.oh = 16, args.ow = 16;
  args.stride_h = args.stride_w = 1, args.pad_top = args.pad_left = 1, args.dilation_h = args.dilation_w = 1;
  args.groups = 1;
  kiln_rt rt = makeRuntime(1);
  auto useWinograd = [](const kiln_rt *, const kiln_conv2d_args &a) {
    return kiln::runtime::kernels::detail::winogradTile(a, false) != 0;
  };
  EXPECT_TRUE(useWinograd(&rt, args));
  kiln_conv2d_args other = args;
  other.stride_h = 2, other.oh = 8;
  EXPECT_FALSE(useWinograd(&rt, other));
  other = args, other.dilation_w = 2, other.ow = 14;
  EXPECT_FALSE(useWinograd(&rt, other));
  other = args, other.groups = 2;
  EXPECT_FALSE(useWinograd(&rt, other));
  other = args, other.r = other.s = 1;
  EXPECT_FALSE(useWinograd(&rt, other));
  other = args, other.c = 3; // a stem
  EXPECT_FALSE(useWinograd(&rt, other));
  other = args, other.oh = other.ow = 4;
  EXPECT_FALSE(useWinograd(&rt, other));
  other = args, other.h = other.w = other.oh = other.ow = 8; // 16 tiles: transforms waste lanes
  EXPECT_FALSE(useWinograd(&rt, other));
  // ResNet stage 4 (512 -> 512, 7 x 7): the per-call weight transform does not pay at batch 1,
  // does at batch 8.
  other = args, other.c = other.k = 512, other.h = other.w = other.oh = other.ow = 7;
  EXPECT_FALSE(useWinograd(&rt, other));
  other.n = 8;
  EXPECT_TRUE(useWinograd(&rt, other));
}

TEST(Conv2dWinograd, GatePicksTheVariant) {
  // The tile for plain weights; whatever it is, weights stored at load must get it too.
  auto tileOf = [](int64_t n, int64_t c, int64_t side, int64_t k, int64_t pads = 1) {
    kiln_conv2d_args args{};
    args.n = n, args.c = c, args.h = args.w = side, args.k = k, args.r = args.s = 3;
    args.oh = args.ow = side + 2 * pads - 2;
    args.stride_h = args.stride_w = 1, args.pad_top = args.pad_left = pads, args.dilation_h = args.dilation_w = 1;
    args.groups = 1;
    const int plain = kiln::runtime::kernels::convWinogradTile(args, false);
    if (plain != 0) {
      EXPECT_EQ(kiln::runtime::kernels::convWinogradTile(args, true), plain) << c << "->" << k << " " << side;
    }
    return plain;
  };
  auto storedTileOf = [](int64_t n, int64_t c, int64_t side, int64_t k) {
    kiln_conv2d_args args{};
    args.n = n, args.c = c, args.h = args.w = args.oh = args.ow = side, args.k = k, args.r = args.s = 3;
    args.stride_h = args.stride_w = 1, args.pad_top = args.pad_left = 1, args.dilation_h = args.dilation_w = 1;
    args.groups = 1;
    return kiln::runtime::kernels::convWinogradTile(args, true);
  };
  // ResNet stages 1-2 and VGG16: F(4,3), whose tiles fit the image.
  EXPECT_EQ(tileOf(1, 64, 56, 64), 4);
  EXPECT_EQ(tileOf(1, 128, 28, 128), 4);
  EXPECT_EQ(tileOf(8, 128, 28, 128), 4);
  EXPECT_EQ(tileOf(1, 256, 56, 256), 4);
  EXPECT_EQ(tileOf(1, 64, 224, 64), 4);
  // 14 x 14 computed as 16 x 16 (0.73 of F(2,3)'s points): F(2,3), at batch 1 and 8.
  EXPECT_EQ(tileOf(1, 256, 14, 256), 2);
  EXPECT_EQ(tileOf(8, 256, 14, 256), 2);
  // An output side 4 divides, but too few tiles (16) to fill two vectors.
  EXPECT_EQ(tileOf(1, 64, 16, 64), 2);
  // 512 x 512 weights: U of F(4,3) would be 37.7 MB.
  EXPECT_EQ(tileOf(1, 512, 28, 512), 2);
  EXPECT_EQ(tileOf(8, 512, 7, 512), 2);
  EXPECT_EQ(tileOf(1, 256, 28, 256), 4);
  // Below the gate for Winograd at all.
  EXPECT_EQ(tileOf(1, 512, 7, 512), 0);
  EXPECT_EQ(tileOf(1, 512, 14, 512), 0);
  EXPECT_EQ(tileOf(1, 3, 224, 64), 0);
  // With the weights transformed at load, deep layers on small images pass: ResNet stage 4 and
  // VGG16's 14 x 14 layers at batch 1.
  EXPECT_EQ(storedTileOf(1, 512, 7, 512), 2);
  EXPECT_EQ(storedTileOf(1, 512, 14, 512), 2);
  EXPECT_EQ(storedTileOf(1, 256, 7, 256), 0);   // 2^16 weights: the GEMM is as fast
  EXPECT_EQ(storedTileOf(1, 1024, 7, 1024), 2); // U 64 MB, from memory: still 1.2-2.1x the GEMM
  EXPECT_EQ(storedTileOf(1, 2048, 32, 512), 2); // FCN's head
  EXPECT_EQ(storedTileOf(1, 2048, 7, 2048), 0); // 2^22 weights: U would be 268 MB
  EXPECT_EQ(storedTileOf(1, 512, 6, 512), 0);   // 9 tiles
  EXPECT_EQ(storedTileOf(1, 3, 224, 64), 0);
}

TEST(Conv2dWinograd, Bf16TakesF2WhereF32TakesF4WithStoredWeights) {
  // F(2,3)'s products in bf16 against F(4,3)'s in f32: with weights stored at load (then in
  // bf16) bf16 takes F(2,3); weights transformed per call stay f32, where F(4,3) wins.
  kiln_conv2d_args args{};
  args.n = 1, args.c = args.k = 128, args.h = args.w = args.oh = args.ow = 28, args.r = args.s = 3;
  args.stride_h = args.stride_w = 1, args.pad_top = args.pad_left = 1, args.dilation_h = args.dilation_w = 1;
  args.groups = 1;
  EXPECT_EQ(kiln::runtime::kernels::convWinogradTile(args, true), 4);
  args.precision = KILN_PRECISION_BF16;
  EXPECT_EQ(kiln::runtime::kernels::convWinogradTile(args, true), 2);
  EXPECT_EQ(kiln::runtime::kernels::convWinogradTile(args, false), 4);
}

TEST(Conv2dWinograd, BlocksKeepTheirScratchBounded) {
  // A block's V and M live in each thread's scratch for good: FCN-ResNet50's 2048 -> 512 head
  // (32 x 32, batch 4) gets blocks of about 6 MiB, not the 128 tiles (21 MB) the rule for
  // deep layers alone would give; a shallow layer keeps its 2048-pixel F(4,3) blocks (128
  // tiles, in whole rows: 7 of its 14).
  auto planOf = [](int64_t n, int64_t c, int64_t side, int64_t k, int tile, int32_t layout) {
    kiln_conv2d_args args{};
    args.n = n, args.c = c, args.h = args.w = args.oh = args.ow = side, args.k = k, args.r = args.s = 3;
    args.stride_h = args.stride_w = 1, args.pad_top = args.pad_left = 1, args.dilation_h = args.dilation_w = 1;
    args.groups = 1, args.weights_layout = layout;
    const kiln::runtime::kernels::detail::winograd::Plan plan =
        kiln::runtime::kernels::detail::winograd::makePlan(args, 1, tile);
    return std::pair<int64_t, int64_t>{plan.maxTiles(), plan.blockFloats() * int64_t{sizeof(float)}};
  };
  const auto [headTiles, headBytes] = planOf(4, 2048, 32, 512, 2, KILN_CONV_WEIGHTS_WINOGRAD_F2);
  const int64_t rowBytes = 16 * 16 * (2048 + 512) * int64_t{sizeof(float)}; // a row of 16 tiles
  EXPECT_LE(headBytes, (int64_t{6} << 20) + rowBytes);
  EXPECT_GE(headTiles, 16);
  EXPECT_LT(headTiles, 128);
  const auto [shallowTiles, shallowBytes] = planOf(1, 64, 56, 64, 4, KILN_CONV_WEIGHTS_WINOGRAD_F4);
  EXPECT_EQ(shallowTiles, 98) << shallowBytes;
}

} // namespace
