// Post ops (kiln_post_ops): gemm and conv2d apply y = activation(y + bias) before their
// epilogue, in registers on the blocked GEMM's paths and through PostOpsEpilogue on every
// other. Each case runs the kernel twice on the same operands, once plain and once with post
// ops and a recording epilogue: the second output must be exactly the first with the post ops
// applied by the scalar reference (PostOps.h's activate), the same sums bit for bit, and the
// epilogue must have seen every element once, already post-processed. The shapes reach every
// conv2d path and every GEMM tile kind: pointwise (in place, with trailing 7x7 columns, with
// accumulate), im2col, Winograd, depthwise flat and phase planes, channel multipliers,
// grouped, direct, sparse taps, M = 1 and N = 1 products, C^T products, K blocks, batches
// folded into rows, bf16, K = 0.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "runtime/kernels/Kernels.h"
#include "runtime/kernels/PostOps.h"
#include "tests/runtime/KernelTestRuntime.h"

namespace {

using kiln::runtime::kernels::detail::TilePostOps;

float activate(float v, int32_t activation, float lo, float hi, float alpha = 0, float beta = 0) {
  TilePostOps post;
  post.activation = activation, post.lo = lo, post.hi = hi, post.alpha = alpha, post.beta = beta;
  return kiln::runtime::kernels::detail::activate(v, post);
}
using kiln::runtime::kernels::test::makeRuntime;

/// Records the value of every element it sees (and how many times it saw it).
struct Recorder {
  std::vector<float> seen;
  std::vector<int> calls;
  int64_t rows = 0, cols = 0; // of one batch's matrix
  static void apply(void *ctx, float *tile, int64_t ld, int64_t batch, int64_t row0, int64_t col0, int64_t rows,
                    int64_t cols) {
    auto &self = *static_cast<Recorder *>(ctx);
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) {
        const size_t at = static_cast<size_t>((batch * self.rows + row0 + i) * self.cols + col0 + j);
        self.seen[at] = tile[i * ld + j];
        ++self.calls[at];
      }
  }
};

std::vector<float> randomValues(size_t count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> values(count);
  for (float &v : values)
    v = dist(rng);
  return values;
}

bool sameFloat(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0 || (a != a && b != b); }

/// The post ops of each case: a bias alone, ReLU alone, bias + ReLU, bias + clip [-0.25, 0.5],
/// bias + SiLU, bias + hard sigmoid, bias + hard swish (a line steep enough that the gate
/// closes and opens fully on these values), bias + GELU.
std::vector<kiln_post_ops> postOpsVariants(const std::vector<float> &bias) {
  std::vector<kiln_post_ops> variants(8);
  variants[7].bias = bias.data(), variants[7].activation = KILN_ACTIVATION_GELU;
  for (int i : {5, 6}) {
    variants[i].bias = bias.data(), variants[i].alpha = 1.5f, variants[i].beta = 0.5f;
    variants[i].activation = i == 5 ? KILN_ACTIVATION_HARD_SIGMOID : KILN_ACTIVATION_HARD_SWISH;
  }
  variants[4].bias = bias.data(), variants[4].activation = KILN_ACTIVATION_SILU;
  variants[0].bias = bias.data();
  variants[1].activation = KILN_ACTIVATION_RELU;
  variants[2].bias = bias.data(), variants[2].activation = KILN_ACTIVATION_RELU;
  variants[3].bias = bias.data(), variants[3].activation = KILN_ACTIVATION_CLIP;
  variants[3].lo = -0.25f, variants[3].hi = 0.5f;
  return variants;
}

/// `withPost` against `plain` with post applied: bias per row (channel, every `plane`
/// elements of each of `channels`) or per column (every element's index mod `channels`).
void expectPostApplied(const std::vector<float> &plain, const std::vector<float> &withPost, const Recorder &seen,
                       const kiln_post_ops &post, bool perRow, int64_t channels, int64_t plane) {
  int mismatches = 0;
  for (size_t i = 0; i < plain.size() && mismatches < 5; ++i) {
    const int64_t channel = perRow ? static_cast<int64_t>(i) / plane % channels : static_cast<int64_t>(i) % channels;
    float expected = plain[i];
    if (post.bias)
      expected += post.bias[channel];
    expected = activate(expected, post.activation, post.lo, post.hi, post.alpha, post.beta);
    if (!sameFloat(withPost[i], expected) || !sameFloat(seen.seen[i], expected) || seen.calls[i] != 1) {
      ADD_FAILURE() << "element " << i << ": " << withPost[i] << " (epilogue saw " << seen.seen[i] << ", "
                    << seen.calls[i] << " calls), expected " << expected << " from " << plain[i];
      ++mismatches;
    }
  }
}

/// run(nullptr, nullptr) plain, then run(&post, &recorder) with every variant of post ops,
/// each against the plain output (`rows` x `cols` per batch as the epilogue sees it; the bias
/// per row when perRow, with `cols` elements per row, else per column).
template <typename Run>
void checkEveryVariant(const Run &run, const std::vector<float> &bias, bool perRow, int64_t rows, int64_t cols) {
  const std::vector<float> plain = run(nullptr, nullptr);
  for (const kiln_post_ops &post : postOpsVariants(bias)) {
    SCOPED_TRACE(testing::Message() << "activation " << post.activation << (post.bias ? " with bias" : ""));
    Recorder recorder{std::vector<float>(plain.size(), 0.0f), std::vector<int>(plain.size(), 0), rows, cols};
    expectPostApplied(plain, run(&post, &recorder), recorder, post, perRow, perRow ? rows : cols, perRow ? cols : 1);
  }
}

struct ConvShape {
  int64_t n, c, hw, k, r, stride, pad, groups;
  int threads = 1;
  int32_t layout = KILN_CONV_WEIGHTS_PLAIN;
  bool accumulate = false;
  int64_t dilation = 1;
  bool bf16 = false; // KILN_PRECISION_BF16 (the layouts BF16_PANELS and WINOGRAD_F2_BF16 imply it)
};

void checkConvPostOps(const ConvShape &s) {
  SCOPED_TRACE(testing::Message() << "conv n=" << s.n << " c=" << s.c << " " << s.hw << "x" << s.hw << " k=" << s.k
                                  << " " << s.r << "x" << s.r << "/" << s.stride << " groups " << s.groups
                                  << " threads " << s.threads << (s.accumulate ? " accumulate" : "")
                                  << " layout " << s.layout << (s.bf16 ? " bf16" : ""));
  const int64_t out = (s.hw + 2 * s.pad - s.dilation * (s.r - 1) - 1) / s.stride + 1, plane = out * out;
  std::vector<float> x = randomValues(static_cast<size_t>(s.n * s.c * s.hw * s.hw), 1);
  x[x.size() / 2] = std::numeric_limits<float>::quiet_NaN(); // NaN outputs pass through relu and clip
  std::vector<float> w = randomValues(static_cast<size_t>(s.k * s.c / s.groups * s.r * s.r), 2);
  std::vector<float> bias = randomValues(static_cast<size_t>(s.k), 3);
  std::vector<float> weights = w;
  if (s.layout == KILN_CONV_WEIGHTS_WINOGRAD_F4) {
    weights.resize(static_cast<size_t>(kiln::runtime::kernels::winogradWeightFloats(s.k, s.c, 4)));
    kiln::runtime::kernels::packWinogradWeights(w.data(), s.k, s.c, 4, weights.data());
  } else if (s.layout == KILN_CONV_WEIGHTS_TAP_MAJOR) {
    kiln::runtime::kernels::packConvTapMajor(w.data(), s.k, s.c, s.r, s.r, weights.data());
  } else if (s.layout == KILN_CONV_WEIGHTS_DIRECT_PANELS) {
    weights.resize(static_cast<size_t>(kiln::runtime::kernels::convDirectPanelFloats(s.k, s.c * s.r * s.r)));
    kiln::runtime::kernels::packConvDirectPanels(w.data(), s.k, s.c * s.r * s.r, weights.data());
  }
  // bf16 layouts: bf16 patterns, two to a float of `weights`.
  std::vector<uint16_t> weights16;
  if (s.layout == KILN_CONV_WEIGHTS_BF16_PANELS) {
    weights16.resize(static_cast<size_t>(
        kiln::runtime::kernels::convBf16PanelElements(s.k, s.c / s.groups * s.r * s.r, s.groups)));
    kiln::runtime::kernels::packConvBf16Panels(w.data(), s.k, s.c / s.groups * s.r * s.r, s.groups, weights16.data());
  } else if (s.layout == KILN_CONV_WEIGHTS_WINOGRAD_F2_BF16) {
    weights16.resize(static_cast<size_t>(kiln::runtime::kernels::winogradWeightsBf16Elements(s.k, s.c, 2)));
    kiln::runtime::kernels::packWinogradWeightsBf16(w.data(), s.k, s.c, 2, weights16.data());
  }
  const bool bf16 = s.bf16 || !weights16.empty();
  const std::vector<float> addend = randomValues(static_cast<size_t>(s.n * s.k * plane), 4);
  kiln_rt rt = makeRuntime(s.threads);
  auto run = [&](const kiln_post_ops *post, Recorder *recorder) {
    std::vector<float> y = s.accumulate ? addend : std::vector<float>(addend.size(), 0.0f);
    kiln_conv2d_args a{};
    a.n = s.n, a.c = s.c, a.h = s.hw, a.w = s.hw, a.k = s.k, a.r = s.r, a.s = s.r, a.oh = out, a.ow = out;
    a.stride_h = a.stride_w = s.stride, a.pad_top = a.pad_left = s.pad, a.dilation_h = a.dilation_w = s.dilation;
    a.groups = s.groups, a.x = x.data(), a.weights = weights.data(), a.y = y.data(), a.weights_layout = s.layout;
    if (!weights16.empty())
      a.weights = reinterpret_cast<const float *>(weights16.data());
    a.precision = bf16 ? KILN_PRECISION_BF16 : KILN_PRECISION_F32;
    a.accumulate = s.accumulate;
    if (post)
      a.post = *post, a.epilogue = Recorder::apply, a.epilogue_ctx = recorder;
    kiln::runtime::kernels::conv2d(&rt, &a);
    return y;
  };
  checkEveryVariant(run, bias, true, s.k, plane);
}

TEST(PostOps, EveryConvolutionPath) {
  checkConvPostOps({1, 16, 14, 96, 1, 1, 0, 1});            // pointwise, in place
  checkConvPostOps({1, 64, 7, 96, 1, 1, 0, 1});             // pointwise 7x7: a 1-column trailing vector
  checkConvPostOps({2, 32, 9, 40, 1, 1, 0, 1, 2});          // pointwise, 2 images on 2 threads
  ConvShape residual{1, 24, 12, 48, 1, 1, 0, 1};
  residual.accumulate = true;
  checkConvPostOps(residual);                               // pointwise onto a residual
  checkConvPostOps({1, 600, 7, 20, 1, 1, 0, 1});            // pointwise, two K blocks, C^T tiles
  checkConvPostOps({2, 96, 1, 40, 1, 1, 0, 1, 2});          // pointwise on 1x1 images: gemm's vector products
  checkConvPostOps({1, 3, 23, 20, 3, 2, 1, 1});             // im2col (stem-like)
  checkConvPostOps({1, 32, 16, 32, 3, 1, 1, 1});            // Winograd as gated
  checkConvPostOps({1, 16, 12, 16, 3, 1, 1, 1, 1, KILN_CONV_WEIGHTS_WINOGRAD_F4}); // stored F4
  checkConvPostOps({1, 24, 21, 24, 3, 1, 1, 24});           // depthwise, channel blocks (one short)
  checkConvPostOps({1, 24, 21, 24, 3, 2, 1, 24});           // depthwise, channel blocks at stride 2
  checkConvPostOps({1, 16, 9, 16, 5, 1, 2, 16, 2});         // depthwise, bands of one block, 2 threads
  checkConvPostOps({1, 3, 64, 3, 3, 1, 1, 3});              // depthwise, shifted rows
  checkConvPostOps({1, 2, 60, 2, 5, 1, 2, 2, 2});           // depthwise, shifted rows, 5x5, 2 threads
  ConvShape dilated{1, 3, 64, 3, 3, 1, 2, 3};
  dilated.dilation = 2;
  checkConvPostOps(dilated);                                // depthwise, straight from x (dilated)
  checkConvPostOps({1, 4, 13, 24, 3, 1, 1, 4});             // channel multiplier 6
  checkConvPostOps({1, 64, 10, 64, 3, 1, 1, 8});            // grouped
  checkConvPostOps({1, 8, 30, 16, 5, 3, 2, 1});             // direct or im2col, as gated
  checkConvPostOps({1, 16, 8, 16, 3, 1, 6, 1, 1, KILN_CONV_WEIGHTS_TAP_MAJOR, false, 6}); // sparse taps
  checkConvPostOps({1, 40, 13, 80, 3, 1, 1, 1, 2, KILN_CONV_WEIGHTS_DIRECT_PANELS}); // direct, stored W^T
  // bf16: weights rounded per call, stored as panels (pointwise on two threads, two groups,
  // im2col at stride 2), Winograd F(2,3)'s stored in bf16.
  checkConvPostOps({1, 64, 7, 96, 1, 1, 0, 1, 1, KILN_CONV_WEIGHTS_PLAIN, false, 1, true});
  checkConvPostOps({1, 65, 7, 96, 1, 1, 0, 1, 2, KILN_CONV_WEIGHTS_BF16_PANELS});
  checkConvPostOps({1, 32, 9, 40, 1, 1, 0, 2, 1, KILN_CONV_WEIGHTS_BF16_PANELS});
  checkConvPostOps({1, 24, 15, 40, 3, 2, 1, 1, 1, KILN_CONV_WEIGHTS_BF16_PANELS});
  checkConvPostOps({1, 32, 14, 40, 3, 1, 1, 1, 2, KILN_CONV_WEIGHTS_WINOGRAD_F2_BF16});
}

#ifdef __AVX512F__
// The vector forms store loops use, ClampPost (the GEMM micro-kernel's) and withPostKind (the
// depthwise kernels'), give withPostOps's results bit for bit for every activation, with and
// without a bias, on signed zeros, NaN, infinities, subnormals, the clip bounds and ordinary
// values.
TEST(PostOps, BranchFreeFormsAsWithPostOps) {
  using namespace kiln::runtime::kernels::detail;
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const float sub = std::numeric_limits<float>::denorm_min();
  alignas(64) const float values[16] = {-0.0f, 0.0f, nan, inf, -inf, sub, -sub, 6.0f, -1.0f, 1.0f, 7.5f, -3.25f,
                                        0.5f, -0.5f, 1e-20f, -1e30f};
  alignas(64) const float biases[16] = {0.0f, -0.0f, 1.0f, -1.0f, 0.5f, -0.0f, 0.0f, 0.0f,
                                        1.0f, -1.0f, -1.5f, 3.25f, -0.5f, 0.5f, -1e-20f, 1e30f};
  const __m512 v = _mm512_load_ps(values);
  for (int32_t activation : {KILN_ACTIVATION_NONE, KILN_ACTIVATION_RELU, KILN_ACTIVATION_CLIP, KILN_ACTIVATION_SILU,
                             KILN_ACTIVATION_GELU, KILN_ACTIVATION_HARD_SIGMOID, KILN_ACTIVATION_HARD_SWISH})
    for (bool withBias : {false, true}) {
      SCOPED_TRACE(testing::Message() << "activation " << activation << (withBias ? " with bias" : ""));
      TilePostOps post;
      post.activation = activation, post.lo = 0.0f, post.hi = 6.0f, post.alpha = 1.0f / 6, post.beta = 0.5f;
      post.columnBias = withBias ? biases : nullptr;
      alignas(64) float want[16], clamp[16], kind[16];
      _mm512_store_ps(want, withPostOps(v, post, 0, 0, 0xFFFF));
      const ClampPost clampPost(&post);
      _mm512_store_ps(clamp, clampPost.apply(v, clampPost.bias(clampPost.rowBias(0), 0, 0xFFFF)));
      const __m512 bias = _mm512_load_ps(biases);
      switch (postKind(post)) {
      case PostKind::None: _mm512_store_ps(kind, withPostKind<PostKind::None>(v, bias, post)); break;
      case PostKind::Bias: _mm512_store_ps(kind, withPostKind<PostKind::Bias>(v, bias, post)); break;
      case PostKind::BiasRelu: _mm512_store_ps(kind, withPostKind<PostKind::BiasRelu>(v, bias, post)); break;
      case PostKind::BiasClip: _mm512_store_ps(kind, withPostKind<PostKind::BiasClip>(v, bias, post)); break;
      case PostKind::Any: _mm512_store_ps(kind, withPostKind<PostKind::Any>(v, bias, post)); break;
      }
      for (int l = 0; l < 16; ++l) {
        EXPECT_TRUE(sameFloat(clamp[l], want[l])) << "lane " << l << ": ClampPost " << clamp[l] << ", want " << want[l];
        EXPECT_TRUE(sameFloat(kind[l], want[l])) << "lane " << l << ": withPostKind " << kind[l] << ", want " << want[l];
      }
    }
}
#endif

struct GemmShape {
  int64_t m, n, k, batch = 1;
  bool transA = false, transB = false, bf16 = false;
  int64_t strideB = -1; // -1: one B per product
};

void checkGemmPostOps(const GemmShape &s) {
  SCOPED_TRACE(testing::Message() << "gemm " << s.m << "x" << s.n << "x" << s.k << " batch " << s.batch
                                  << (s.transA ? " A^T" : "") << (s.transB ? " B^T" : "") << (s.bf16 ? " bf16" : ""));
  const int64_t strideB = s.strideB < 0 ? s.k * s.n : s.strideB;
  std::vector<float> a = randomValues(static_cast<size_t>(std::max<int64_t>(1, s.batch * s.m * s.k)), 5);
  std::vector<float> b = randomValues(static_cast<size_t>(std::max<int64_t>(1, (s.batch - 1) * strideB + s.k * s.n)), 6);
  std::vector<float> bias = randomValues(static_cast<size_t>(s.n), 7);
  kiln_rt rt = makeRuntime(1);
  auto run = [&](const kiln_post_ops *post, Recorder *recorder) {
    std::vector<float> c(static_cast<size_t>(s.batch * s.m * s.n), 0.0f);
    kiln_gemm_args g{};
    g.m = s.m, g.n = s.n, g.k = s.k, g.batch = s.batch;
    g.a = a.data(), g.lda = s.transA ? s.m : s.k, g.stride_a = s.m * s.k, g.trans_a = s.transA;
    g.b = b.data(), g.ldb = s.transB ? s.k : s.n, g.stride_b = strideB, g.trans_b = s.transB;
    g.c = c.data(), g.ldc = s.n, g.stride_c = s.m * s.n;
    g.precision = s.bf16 ? KILN_PRECISION_BF16 : KILN_PRECISION_F32;
    if (post)
      g.post = *post, g.epilogue = Recorder::apply, g.epilogue_ctx = recorder;
    kiln::runtime::kernels::gemm(&rt, &g);
    return c;
  };
  checkEveryVariant(run, bias, false, s.m, s.n);
}

TEST(PostOps, EveryGemmTile) {
  checkGemmPostOps({13, 70, 20});                   // edge tiles of rows and columns
  checkGemmPostOps({64, 49, 96});                   // a narrow N: C^T tiles, or trailing columns
  checkGemmPostOps({30, 8, 300, 1, true, true});    // transposed operands
  checkGemmPostOps({7, 128, 1100});                 // three K blocks
  checkGemmPostOps({1, 300, 64});                   // M = 1: matrix-vector
  checkGemmPostOps({50, 1, 64});                    // N = 1
  checkGemmPostOps({4, 96, 32, 3, false, false, false, 0}); // one B: batches folded into rows
  checkGemmPostOps({5, 40, 24, 2});                 // separate products
  checkGemmPostOps({32, 64, 48, 1, false, false, true}); // bf16
  checkGemmPostOps({6, 20, 0});                     // K = 0: bias and activation on zeros
}

TEST(PostOps, ActivationsAsTheEvaluator) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(sameFloat(activate(-0.0f, KILN_ACTIVATION_RELU, 0, 0), 0.0f));
  EXPECT_TRUE(std::isnan(activate(nan, KILN_ACTIVATION_RELU, 0, 0)));
  EXPECT_EQ(activate(-2.0f, KILN_ACTIVATION_RELU, 0, 0), 0.0f);
  EXPECT_EQ(activate(7.0f, KILN_ACTIVATION_CLIP, 0, 6), 6.0f);
  EXPECT_TRUE(sameFloat(activate(-0.0f, KILN_ACTIVATION_CLIP, 0, 6), -0.0f)); // kiln_fclip keeps -0
  EXPECT_TRUE(std::isnan(activate(nan, KILN_ACTIVATION_CLIP, 0, 6)));
  // hard_swish's decomposition: g == 0 gives +0 even for a negative x (where(eq(g, 0), 0, x*g)).
  EXPECT_TRUE(sameFloat(activate(-4.0f, KILN_ACTIVATION_HARD_SWISH, 0, 0, 1.0f / 6, 0.5f), 0.0f));
  EXPECT_EQ(activate(1.0f, KILN_ACTIVATION_HARD_SWISH, 0, 0, 1.0f / 6, 0.5f), 1.0f * (1.0f * (1.0f / 6) + 0.5f));
  EXPECT_EQ(activate(4.0f, KILN_ACTIVATION_HARD_SWISH, 0, 0, 1.0f / 6, 0.5f), 4.0f);
  EXPECT_EQ(activate(-1.0f, KILN_ACTIVATION_HARD_SIGMOID, 0, 0, 0.2f, 0.5f), -1.0f * 0.2f + 0.5f);
  EXPECT_TRUE(std::isnan(activate(nan, KILN_ACTIVATION_HARD_SWISH, 0, 0, 1.0f / 6, 0.5f)));
  // SiLU within 4 ulp of x / (1 + e^-x) in double, over the range that matters and its ends.
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_TRUE(std::isnan(activate(nan, KILN_ACTIVATION_SILU, 0, 0)));
  EXPECT_EQ(activate(inf, KILN_ACTIVATION_SILU, 0, 0), inf);
  EXPECT_TRUE(std::isnan(activate(-inf, KILN_ACTIVATION_SILU, 0, 0))); // -inf * 0, as the evaluator
  EXPECT_EQ(activate(-200.0f, KILN_ACTIVATION_SILU, 0, 0), -0.0f);
  for (float x = -120.0f; x <= 120.0f; x += 0.0371f) {
    const double want = x / (1.0 + std::exp(-static_cast<double>(x)));
    const float got = activate(x, KILN_ACTIVATION_SILU, 0, 0);
    if (std::abs(want) > 1e-30) {
      EXPECT_LE(std::abs(got - want), 4 * std::abs(want) * std::numeric_limits<float>::epsilon()) << "x = " << x;
    }
  }
  // GELU within 3e-7 of (x/2)(1 + erf(x/sqrt 2)) in double, absolutely or relatively (erf is
  // kiln_erff's polynomials), across both of them and past 3.92 sqrt 2.
  EXPECT_TRUE(std::isnan(activate(nan, KILN_ACTIVATION_GELU, 0, 0)));
  EXPECT_EQ(activate(inf, KILN_ACTIVATION_GELU, 0, 0), inf);
  for (float x = -9.0f; x <= 9.0f; x += 0.00731f) {
    const double want = 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
    EXPECT_LE(std::abs(activate(x, KILN_ACTIVATION_GELU, 0, 0) - want), 3e-7 * std::max(1.0, std::abs(want)))
        << "x = " << x;
  }
#ifdef __AVX512F__
  // Lanes of every kind together, and (GELU's erf skips its second polynomial when no lane
  // needs it) lanes all within |x| < 2 sqrt 2, and all but one.
  const __m512 mixed = _mm512_setr_ps(-0.0f, nan, -2.0f, 7.0f, 3.0f, 0.0f, -1e30f, 1e30f, -90.0f, 90.0f, -inf, inf,
                                      1e-40f, -5.5f, 0.25f, 88.75f);
  const __m512 near = _mm512_setr_ps(-0.0f, 0.0f, 1e-40f, -1e-20f, 0.5f, -0.5f, 1.0f, -1.0f, 1.5f, -1.5f, 2.0f,
                                     -2.0f, 2.5f, -2.5f, 2.8f, -2.8f);
  const __m512 oneFar = _mm512_mask_mov_ps(near, 1 << 9, _mm512_set1_ps(2.9f));
  for (const __m512 v : {mixed, near, oneFar}) {
    for (int32_t activation : {KILN_ACTIVATION_RELU, KILN_ACTIVATION_CLIP, KILN_ACTIVATION_SILU,
                               KILN_ACTIVATION_HARD_SIGMOID, KILN_ACTIVATION_HARD_SWISH, KILN_ACTIVATION_GELU}) {
      alignas(64) float in[16], outVector[16];
      _mm512_store_ps(in, v);
      TilePostOps post;
      post.activation = activation, post.lo = 0.0f, post.hi = 6.0f, post.alpha = 1.0f / 6, post.beta = 0.5f;
      _mm512_store_ps(outVector, kiln::runtime::kernels::detail::activate(v, post));
      for (int i = 0; i < 16; ++i)
        EXPECT_TRUE(sameFloat(outVector[i], activate(in[i], activation, 0.0f, 6.0f, 1.0f / 6, 0.5f)))
            << "lane " << i << " activation " << activation;
    }
  }
#endif
}

} // namespace
