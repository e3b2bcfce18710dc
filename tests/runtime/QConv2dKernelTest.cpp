// kiln::runtime::kernels::qconv2d against int64 sums over the taps written here (padding adds
// nothing): the int32 sums are exact and the dequantization the same two float operations, so
// every output must be equal, bit for bit. The epilogue counts its calls per output (exactly
// one each) and adds a per-channel bias.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "runtime/kernels/Kernels.h"
#include "tests/runtime/KernelTestRuntime.h"
#include "tests/runtime/QuantizedOutputReference.h"

namespace {

using kiln::runtime::kernels::test::addendAt;
using kiln::runtime::kernels::test::addsResidual;
using kiln::runtime::kernels::test::clipped;
using kiln::runtime::kernels::test::keepsF32;
using kiln::runtime::kernels::test::requantises;
using kiln::runtime::kernels::test::makeRuntime;
using kiln::runtime::kernels::test::Output;
using kiln::runtime::kernels::test::OutputBuffers;
using kiln::runtime::kernels::test::requantised;

/// How the case hands over its weights: plain, packed in the order the call reads them
/// (kiln::runtime::kernels::qconvChannelQuadRows), or packed in the other order.
enum class Weights { Plain, Packed, PackedOtherOrder };

struct QConvCase {
  int64_t n, c, h, w, k, r, s;
  int64_t stride = 1, pad = 0, dilation = 1, groups = 1;
  bool xSigned = false, perChannel = true;
  Weights weights = Weights::Packed;
  int64_t strideW = -1, dilationW = -1; // -1: as stride, dilation
  int threads = 1;
  int64_t padBottom = -1; // -1: as pad
  bool tileInScratch = false;
  Output output = Output::Epilogue;
};

struct CountingBias {
  std::vector<int> *calls;
  int64_t k, pixels;
  std::vector<float> *seen; // what the epilogue saw at each output, after its bias
  static float bias(int64_t channel) { return 0.25f * static_cast<float>(channel % 5) - 0.5f; }
  static void apply(void *ctx, float *tile, int64_t ld, int64_t batch, int64_t row0, int64_t col0, int64_t rows,
                    int64_t cols) {
    auto &self = *static_cast<CountingBias *>(ctx);
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) {
        tile[i * ld + j] += bias(row0 + i);
        const size_t at = static_cast<size_t>((batch * self.k + row0 + i) * self.pixels + col0 + j);
        ++(*self.calls)[at];
        (*self.seen)[at] = tile[i * ld + j];
      }
  }
};

void checkQConv(const QConvCase &tc, uint32_t seed = 1) {
  SCOPED_TRACE(testing::Message() << "n=" << tc.n << " c=" << tc.c << " " << tc.h << "x" << tc.w << " k=" << tc.k
                                  << " kernel " << tc.r << "x" << tc.s << " stride=" << tc.stride << "," << tc.strideW
                                  << " pad=" << tc.pad
                                  << " dilation=" << tc.dilation << "," << tc.dilationW << " groups=" << tc.groups
                                  << " signed=" << tc.xSigned << " threads=" << tc.threads);
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> byte(0, 255), weight(-127, 127);
  std::uniform_real_distribution<float> scale(1e-3f, 2e-2f);
  const int64_t padBottom = tc.padBottom < 0 ? tc.pad : tc.padBottom;
  const int64_t oh = (tc.h + tc.pad + padBottom - (tc.r - 1) * tc.dilation - 1) / tc.stride + 1;
  const int64_t strideW = tc.strideW < 0 ? tc.stride : tc.strideW;
  const int64_t dilationW = tc.dilationW < 0 ? tc.dilation : tc.dilationW;
  const int64_t ow = (tc.w + 2 * tc.pad - (tc.s - 1) * dilationW - 1) / strideW + 1;
  const int64_t perGroup = tc.c / tc.groups, taps = perGroup * tc.r * tc.s, pixels = oh * ow;
  std::vector<uint8_t> x(static_cast<size_t>(tc.n * tc.c * tc.h * tc.w));
  for (uint8_t &v : x)
    v = static_cast<uint8_t>(byte(rng));
  std::vector<int8_t> w(static_cast<size_t>(tc.k * taps));
  for (int8_t &v : w)
    v = static_cast<int8_t>(weight(rng));
  std::vector<float> scales(static_cast<size_t>(tc.perChannel ? tc.k : 1));
  for (float &v : scales)
    v = scale(rng);
  const int32_t zero = tc.xSigned ? byte(rng) - 128 : byte(rng);
  const float xScale = scale(rng);
  std::vector<float> y(static_cast<size_t>(tc.n * tc.k * pixels), 777.0f);
  std::vector<int> calls(y.size(), 0);
  std::vector<float> seen(y.size(), 0.0f);
  CountingBias epilogue{&calls, tc.k, pixels, &seen};

  kiln_qconv2d_args args{};
  args.n = tc.n, args.c = tc.c, args.h = tc.h, args.w = tc.w, args.k = tc.k, args.r = tc.r, args.s = tc.s;
  args.oh = oh, args.ow = ow, args.stride_h = tc.stride, args.stride_w = strideW;
  args.pad_top = args.pad_left = tc.pad;
  args.dilation_h = tc.dilation, args.dilation_w = dilationW, args.groups = tc.groups;
  args.x = x.data(), args.x_signed = tc.xSigned, args.x_zero = zero, args.x_scale = xScale;
  const bool channelQuads =
      kiln::runtime::kernels::qconvChannelQuadRows(args) == (tc.weights == Weights::Packed);
  std::vector<int8_t> packed(
      static_cast<size_t>(kiln::runtime::kernels::qconvPackedBytes(tc.k, perGroup, tc.r * tc.s, channelQuads)));
  kiln::runtime::kernels::packQConvWeights(w.data(), tc.k, perGroup, tc.r * tc.s, channelQuads, packed.data());
  args.weights = tc.weights == Weights::Plain ? w.data() : packed.data();
  args.weights_packed = tc.weights == Weights::Plain ? 0 : channelQuads ? 2 : 1;
  args.w_scales = scales.data(), args.w_per_channel = tc.perChannel;
  args.y = y.data(), args.epilogue = CountingBias::apply, args.epilogue_ctx = &epilogue;
  args.tile_in_scratch = tc.tileInScratch;
  const bool quantized = requantises(tc.output);
  OutputBuffers buffers(args, tc.output, tc.k, y.size(), CountingBias::bias);
  const std::vector<uint8_t> &q = buffers.q;
  kiln_rt rt = makeRuntime(tc.threads);
  kiln::runtime::kernels::qconv2d(&rt, &args);
  if (tc.output != Output::Epilogue && keepsF32(tc.output)) // what the epilogue would have seen, and counted
    for (size_t i = 0; i < y.size(); ++i)
      seen[i] = y[i], calls[i] = 1;

  int64_t failures = 0;
  for (int64_t image = 0; image < tc.n; ++image)
    for (int64_t o = 0; o < tc.k; ++o) {
      const int64_t group = o / (tc.k / tc.groups);
      for (int64_t oy = 0; oy < oh; ++oy)
        for (int64_t ox = 0; ox < ow; ++ox) {
          int64_t sum = 0;
          for (int64_t c = 0; c < perGroup; ++c)
            for (int64_t ky = 0; ky < tc.r; ++ky)
              for (int64_t kx = 0; kx < tc.s; ++kx) {
                const int64_t iy = oy * tc.stride + ky * tc.dilation - tc.pad;
                const int64_t ix = ox * strideW + kx * dilationW - tc.pad;
                if (iy < 0 || iy >= tc.h || ix < 0 || ix >= tc.w)
                  continue;
                const uint8_t raw = x[static_cast<size_t>(((image * tc.c + group * perGroup + c) * tc.h + iy) * tc.w + ix)];
                const int64_t value = tc.xSigned ? int64_t{static_cast<int8_t>(raw)} : int64_t{raw};
                sum += (value - zero) * w[static_cast<size_t>(o * taps + (c * tc.r + ky) * tc.s + kx)];
              }
          float want = static_cast<float>(static_cast<int32_t>(sum)) *
                           (xScale * scales[static_cast<size_t>(tc.perChannel ? o : 0)]) +
                       CountingBias::bias(o);
          const size_t at = static_cast<size_t>((image * tc.k + o) * pixels + oy * ow + ox);
          if (addsResidual(tc.output))
            want += addendAt(static_cast<int64_t>(at), tc.output);
          if (tc.output != Output::Epilogue)
            want = clipped(want);
          if (quantized) { // the bytes, and f32 only when kept; no epilogue runs
            const uint8_t byte = requantised(want, tc.output);
            if (q[at] != byte && failures++ < 5)
              ADD_FAILURE() << "q[" << at << "] = " << int{q[at]} << ", expected " << int{byte} << " from " << want;
            if (!keepsF32(tc.output)) {
              if (calls[at] != 0 && failures++ < 5)
                ADD_FAILURE() << "an epilogue ran on output " << at;
              continue;
            }
          }
          if (std::memcmp(&seen[at], &want, sizeof want) != 0 && failures++ < 5)
            ADD_FAILURE() << "y[" << image << "][" << o << "][" << oy << "][" << ox << "] = " << seen[at]
                          << ", expected " << want;
          // Tiles kept in the thread's buffer never reach y; conv2d (thin groups that are not
          // depthwise) always writes it.
          const bool depthwise = tc.groups == tc.c && tc.k == tc.c && strideW == 1 && tc.r * tc.s * 255 * 128 < (1 << 24);
          const bool throughConv2d = !depthwise && tc.k / tc.groups < 8 && taps * 255 * 128 < (1 << 24);
          const float inY = tc.tileInScratch && !throughConv2d && tc.output == Output::Epilogue ? 777.0f : want;
          if (std::memcmp(&y[at], &inY, sizeof inY) != 0 && failures++ < 5)
            ADD_FAILURE() << "y holds " << y[at] << " at " << at << ", expected " << inY;
          if (calls[at] != 1 && failures++ < 5)
            ADD_FAILURE() << "epilogue ran " << calls[at] << " times on output " << at;
        }
    }
  EXPECT_EQ(failures, 0);
}

TEST(QConv2dKernel, PointwiseKernels) {
  checkQConv({1, 64, 8, 8, 24, 1, 1});      // one whole panel
  checkQConv({2, 13, 9, 11, 7, 1, 1});     // channels not a multiple of 4, a partial panel, two images
  checkQConv({1, 40, 14, 14, 100, 1, 1, 2}); // strided: one row phase of two is read
}

TEST(QConv2dKernel, PaddedStridedDilatedKernels) {
  checkQConv({1, 16, 15, 15, 32, 3, 3, 1, 1});
  checkQConv({1, 3, 29, 29, 16, 7, 7, 2, 3}); // a stem: 147 taps
  checkQConv({2, 8, 12, 10, 9, 3, 3, 1, 2, 2});
  checkQConv({1, 6, 9, 9, 5, 5, 5, 3, 4}); // most taps read padding
  QConvCase asymmetric{1, 4, 10, 10, 6, 3, 3, 2, 1};
  asymmetric.padBottom = 0; // a trailing pad smaller than the leading one
  checkQConv(asymmetric);
  QConvCase shorter{1, 4, 8, 8, 5, 3, 3, 1, 1}; // rows as wide as the input's, one fewer of them
  shorter.padBottom = 0;
  checkQConv(shorter);
  // Strides and dilations that differ between rows and columns (three row phases, column
  // stride 3 through the scalar gather); a 5x1 kernel; rows of more than 64 outputs, whole
  // blocks and a ragged last one, at column strides 1 and 2.
  QConvCase uneven{1, 9, 17, 23, 10, 3, 5, 3, 2, 2};
  uneven.strideW = 3, uneven.dilationW = 1;
  checkQConv(uneven);
  QConvCase tall{2, 5, 20, 9, 7, 5, 1, 2, 2};
  tall.strideW = 1;
  checkQConv(tall);
  checkQConv({1, 8, 5, 150, 12, 3, 3, 1, 1});
  checkQConv({1, 6, 7, 200, 9, 3, 3, 2, 1});
}

TEST(QConv2dKernel, SignedInputOneScaleGroupsAndThreads) {
  QConvCase signedOne{1, 12, 10, 10, 18, 3, 3, 1, 1};
  signedOne.xSigned = true, signedOne.perChannel = false;
  checkQConv(signedOne);
  QConvCase grouped{2, 12, 9, 9, 18, 3, 3, 1, 1, 1, 3};
  grouped.threads = 2;
  checkQConv(grouped);
  QConvCase wide{1, 64, 28, 28, 200, 3, 3, 1, 1};
  wide.threads = 2, wide.xSigned = true;
  checkQConv(wide);
}

TEST(QConv2dKernel, DeepInputsFewOutputChannels) {
  // Many quads of input channels (planes) for a few rows of weights: strided, padded, 1x1.
  checkQConv({1, 512, 24, 24, 8, 3, 3, 2, 1});
  checkQConv({1, 512, 12, 12, 7, 3, 3, 1, 1});
  checkQConv({2, 4000, 16, 16, 4, 1, 1});
}

TEST(QConv2dKernel, FewRowsPerGroupGoThroughExactFloats) {
  // Depthwise (one output channel per group): the direct kernels at strides 1 and 2 (the
  // int32 one with VNNI, the f32 one without; dilated, padded, a trailing pad cut short),
  // conv2d's in f32 at stride 3, products for a 23 x 23 kernel (529 taps: past f32's exact
  // range); 6 per group: conv2d's grouped kernels in f32 on the centred integers; 2 per group
  // but 5400 taps: products.
  QConvCase depthwise{2, 16, 11, 11, 16, 3, 3, 2, 1, 1, 16};
  depthwise.xSigned = true;
  checkQConv(depthwise);
  checkQConv({1, 24, 10, 10, 24, 5, 5, 1, 4, 2, 24});
  checkQConv({1, 5, 17, 19, 5, 7, 7, 3, 3, 1, 5});
  QConvCase asymmetric{1, 6, 12, 12, 6, 3, 3, 1, 1, 1, 6};
  asymmetric.padBottom = 0;
  checkQConv(asymmetric);
  checkQConv({1, 3, 25, 25, 3, 23, 23, 1, 11, 1, 3});
  checkQConv({1, 12, 9, 9, 18, 3, 3, 1, 1, 1, 6});
  checkQConv({1, 1200, 6, 6, 4, 3, 3, 1, 1, 1, 2});
  QConvCase grouped{1, 16, 9, 9, 32, 3, 3, 1, 1, 1, 2}; // 16 per group: products
  grouped.perChannel = false;
  checkQConv(grouped);
}

TEST(QConv2dKernel, DepthwiseSumsFromTheBytes) {
  // The int32 depthwise kernel (QConv2dDepthwiseBytes.cpp, on CPUs with VNNI and VBMI): 3x3 at
  // strides 1 and 2, rows wider than 64 outputs (two runs of vectors, a ragged last one), 5x5,
  // 7x7 and 9x9 (2 and 3 quads of taps per kernel row), dilation, asymmetric padding, s8 input,
  // one weight scale, two images on two threads.
  checkQConv({1, 7, 9, 70, 7, 3, 3, 1, 1, 1, 7});
  QConvCase strided{2, 9, 23, 131, 9, 3, 3, 2, 1, 1, 9};
  strided.threads = 2, strided.xSigned = true;
  checkQConv(strided);
  checkQConv({1, 5, 12, 17, 5, 5, 5, 2, 2, 1, 5});
  checkQConv({1, 4, 15, 15, 4, 7, 7, 1, 3, 1, 4});
  QConvCase nine{1, 3, 20, 33, 3, 9, 9, 2, 4, 1, 3};
  nine.perChannel = false;
  checkQConv(nine);
  checkQConv({1, 6, 13, 13, 6, 3, 3, 1, 4, 3, 6}); // dilated
  QConvCase asymmetric{1, 6, 12, 12, 6, 3, 3, 2, 1, 1, 6};
  asymmetric.padBottom = 0;
  checkQConv(asymmetric);
}

TEST(QConv2dKernel, TilesInScratchLeaveYAlone) {
  QConvCase pointwise{1, 20, 9, 9, 14, 1, 1};
  pointwise.tileInScratch = true;
  checkQConv(pointwise);
  QConvCase padded{2, 8, 10, 10, 12, 3, 3, 2, 1};
  padded.tileInScratch = true, padded.threads = 2;
  checkQConv(padded);
  QConvCase depthwise{1, 8, 7, 7, 8, 3, 3, 1, 1, 1, 8};
  depthwise.tileInScratch = true;
  checkQConv(depthwise);
  QConvCase grouped{1, 8, 7, 7, 12, 3, 3, 1, 1, 1, 4}; // 3 per group: through conv2d, which writes y
  grouped.tileInScratch = true;
  checkQConv(grouped);
}

TEST(QConv2dKernel, PostOpsAndRequantisationOnEveryPath) {
  // Product tiles (pointwise in place, unfolded, partial panels), the depthwise kernel, and
  // conv2d on exact floats: each with the bias and clip as post ops into y, and then
  // requantised to u8 and s8, bit for bit against the reference's steps.
  // The residual outputs add an addend before the clip and keep f32 beside the bytes, or read
  // it as u8 or s8 bytes dequantized and store only bytes.
  std::vector<QConvCase> cases = {{2, 13, 9, 11, 7, 1, 1}, {1, 16, 15, 15, 32, 3, 3, 1, 1},
                                  {1, 40, 14, 14, 100, 1, 1, 2}, {2, 16, 11, 11, 16, 3, 3, 1, 1, 1, 16},
                                  {1, 16, 11, 11, 16, 3, 3, 2, 1, 1, 16}, {1, 12, 9, 9, 18, 3, 3, 1, 1, 1, 6}};
  cases[3].xSigned = true, cases[4].threads = 2, cases[1].threads = 2;
  for (Output output : {Output::PostOps, Output::U8, Output::S8, Output::ResidualF32, Output::ResidualU8,
                        Output::ResidualBytesU8, Output::ResidualBytesS8})
    for (QConvCase tc : cases) {
      SCOPED_TRACE(testing::Message() << "output " << static_cast<int>(output));
      tc.output = output;
      checkQConv(tc);
    }
}

TEST(QConv2dKernel, WeightsNotInTheOrderTheCallReadsArePackedPerCall) {
  for (Weights weights : {Weights::Plain, Weights::PackedOtherOrder}) {
    QConvCase product{1, 10, 7, 7, 13, 3, 3, 1, 1}; // channel-quad order
    product.weights = weights;
    checkQConv(product);
    QConvCase depthwise{1, 8, 9, 9, 8, 3, 3, 1, 1, 1, 8}; // tap order
    depthwise.weights = weights;
    checkQConv(depthwise);
  }
}

TEST(QConv2dKernel, InvalidArgumentsLeaveTheOutputAlone) {
  std::vector<float> y(4, 5.0f);
  kiln_qconv2d_args args{};
  args.n = 1, args.c = 3, args.k = 2, args.groups = 2, args.y = y.data(); // groups do not divide c
  kiln_rt rt = makeRuntime(1);
  kiln::runtime::kernels::qconv2d(&rt, &args);
  EXPECT_EQ(y, std::vector<float>(4, 5.0f));
}

} // namespace
