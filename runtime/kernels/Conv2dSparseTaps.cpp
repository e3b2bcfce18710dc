// Convolutions most of whose taps read padding, computed tap by tap over only the outputs
// each tap reaches inside the image.
//
// A dilated 3x3 convolution whose dilation is large against its image (DeepLabV3's ASPP:
// dilations 12, 24 and 36 on a 16x16 map of 960 channels) reads zeros for most of its
// (output, tap) pairs: with dilation 24 every output's eight outer taps fall in the padding,
// with 12 three quarters of them do. As one GEMM over im2col, all of those zeros are
// multiplied: each of the three layers cost 11-12 ms, two thirds of the whole model, where
// ORT skips them. Here tap (r, s) of a one-group convolution is one GEMM,
//   Y[:, rect(r, s)] += W[:, :, r, s] (K x C) * X shifted to (r, s) (C x |rect(r, s)|),
// over the rectangle of outputs whose input pixel for that tap is inside the image (rows and
// columns are independent, so the outputs a tap reaches always form a rectangle), and taps
// whose rectangle is empty cost nothing. The convolution goes this way when the pairs inside
// are at most half of all pairs (sparseTapConvShape); the epilogue then runs once per image
// on the finished output.
#include <algorithm>
#include <cstring>
#include <vector>

#include "runtime/kernels/Conv2dCommon.h"
#include "runtime/kernels/GemmDriver.h"
#include "runtime/kernels/Kernels.h"

namespace kiln::runtime::kernels::detail {

namespace {

/// The outputs [first, last) along one axis whose input index, output*stride + offset (a
/// tap's), lies inside [0, size).
struct Span {
  int64_t first = 0, last = 0;
  int64_t length() const { return last - first; }
};

Span validOutputs(int64_t outputs, int64_t stride, int64_t offset, int64_t size) {
  // Input index of output o: o*stride + offset, inside when 0 <= it < size.
  const int64_t first = offset >= 0 ? 0 : (-offset + stride - 1) / stride;
  const int64_t last = size - offset <= 0 ? 0 : std::min(outputs, (size - offset + stride - 1) / stride);
  return {first, std::max(first, last)};
}

Span rowSpan(const kiln_conv2d_args &a, int64_t r) {
  return validOutputs(a.oh, a.stride_h, r * a.dilation_h - a.pad_top, a.h);
}
Span columnSpan(const kiln_conv2d_args &a, int64_t s) {
  return validOutputs(a.ow, a.stride_w, s * a.dilation_w - a.pad_left, a.w);
}

/// (output, tap) pairs that read inside the image, summed over taps.
int64_t insidePairs(const kiln_conv2d_args &a) {
  int64_t rows = 0, columns = 0;
  for (int64_t r = 0; r < a.r; ++r)
    rows += rowSpan(a, r).length();
  for (int64_t s = 0; s < a.s; ++s)
    columns += columnSpan(a, s).length();
  return rows * columns;
}

struct Tap {
  int64_t r, s;
  Span rows, columns;
  int64_t outputs() const { return rows.length() * columns.length(); }
};

/// One tap's GEMM: C (K x outputs) = W_tap (K x C, in `weights` as [k][c]) * pixels
/// (C x outputs, gathered contiguous).
class TapProduct final : public ProductSet {
public:
  TapProduct(int64_t k, int64_t outputs, int64_t c, const float *weights, const float *pixels, float *out)
      : ProductSet(1, k, outputs, c, false), weights_(weights), pixels_(pixels), out_(out) {}

  void run(int64_t, int64_t row0, int64_t row1, int64_t col0, int64_t col1, const float *packedB) const override {
    const DenseSource a(weights_, 1, k), b(pixels_, n, 1);
    Product product;
    product.m = m;
    product.n = n;
    product.k = k;
    product.a = &a;
    product.b = &b;
    product.c = out_;
    product.ldc = n;
    product.packedB = packedB;
    computeRegion(product, row0, row1, col0, col1);
  }
  bool canPackB() const override { return true; }
  void packB(int64_t, float *dst, int64_t k0, int64_t kc, int64_t x0, int64_t cols) const override {
    DenseSource(pixels_, n, 1).packPanels(dst, k0, kc, x0, cols);
  }

private:
  const float *weights_, *pixels_;
  float *out_;
};

/// fn(begin, end) over [0, count), on rt's threads when parallelForIfWorth finds the work
/// (count x workPerItem floats moved) worth it.
template <typename Fn> void forRange(const kiln_rt *rt, int64_t count, int64_t workPerItem, Fn &&fn) {
  auto run = [](void *ctx, int64_t begin, int64_t end) { (*static_cast<Fn *>(ctx))(begin, end); };
  parallelForIfWorth(rt, count, count * workPerItem, int64_t{1} << 16, run, &fn);
}

} // namespace

bool sparseTapConvShape(const kiln_conv2d_args &a) {
  // Not for training steps (exact): their sums are exact here too, but in another order than
  // the GEMM's, and compiled ResNet-18 training (batch 2 at 64x64, so layer4's 3x3 layers see
  // 2x2 maps and go tap by tap) then moved one element of layer2.1.bn1.bias 3e-4 of its
  // tensor's scale further from PyTorch's after five steps: batch norm over 8 values a
  // channel amplifies any change of rounding. Training keeps the GEMM's order it was checked in.
  if (a.exact || a.groups != 1 || a.accumulate || a.r * a.s < 2)
    return false;
  // At most half the pairs inside: below that the gathers and the per-tap GEMMs' smaller
  // shapes cost less than the multiplications by zero they save.
  return 2 * insidePairs(a) <= a.r * a.s * a.oh * a.ow;
}

void sparseTapConv(const kiln_rt *rt, const kiln_conv2d_args &a) {
  std::vector<Tap> taps;
  int64_t largest = 0;
  for (int64_t r = 0; r < a.r; ++r)
    for (int64_t s = 0; s < a.s; ++s) {
      Tap tap{r, s, rowSpan(a, r), columnSpan(a, s)};
      if (tap.outputs() > 0) {
        taps.push_back(tap);
        largest = std::max(largest, tap.outputs());
      }
    }
  const int64_t reached = static_cast<int64_t>(taps.size()), plane = a.oh * a.ow, rs = a.r * a.s;
  const bool tapMajor = a.weights_layout == KILN_CONV_WEIGHTS_TAP_MAJOR;
  // The calling thread's scratch: each reached tap's weights as [k][c] (unless they come so),
  // then one tap's gathered pixels (C x outputs) and its product (K x outputs).
  const int64_t weightFloats = tapMajor ? 0 : reached * a.k * a.c;
  float *weights = scratch(Scratch::SparseTaps, static_cast<size_t>(weightFloats + (a.c + a.k) * largest));
  float *pixels = weights + weightFloats, *product = pixels + a.c * largest;
  // Tap t's K x C weights.
  auto tapWeights = [&](int64_t t) -> const float * {
    return tapMajor ? a.weights + (taps[t].r * a.s + taps[t].s) * a.k * a.c : weights + t * a.k * a.c;
  };

  // Weights to tap-major, one output channel's C x R x S block at a time: it stays in L1
  // while each tap's row of C is written in order. (Taps innermost wrote every float to
  // another of R*S streams and took more time than the GEMMs.)
  if (!tapMajor)
    forRange(rt, a.k, a.c * reached, [&](int64_t begin, int64_t end) {
      for (int64_t k = begin; k < end; ++k) {
        const float *from = a.weights + k * a.c * rs;
        for (int64_t t = 0; t < reached; ++t) {
          const float *tap = from + taps[t].r * a.s + taps[t].s;
          float *to = weights + (t * a.k + k) * a.c;
          for (int64_t c = 0; c < a.c; ++c)
            to[c] = tap[c * rs];
        }
      }
    });

  for (int64_t image = 0; image < a.n; ++image) {
    float *y = a.y + image * a.k * plane;
    const float *x = a.x + image * a.c * a.h * a.w;
    std::memset(y, 0, static_cast<size_t>(a.k * plane) * sizeof(float));
    for (int64_t t = 0; t < reached; ++t) {
      const Tap &tap = taps[t];
      const int64_t rows = tap.rows.length(), columns = tap.columns.length(), outputs = tap.outputs();
      const int64_t rowOffset = tap.r * a.dilation_h - a.pad_top, columnOffset = tap.s * a.dilation_w - a.pad_left;
      // Pixel (i, j) of the rectangle: input row (first row + i)*stride + offset, likewise columns.
      forRange(rt, a.c, outputs, [&](int64_t begin, int64_t end) {
        for (int64_t c = begin; c < end; ++c)
          for (int64_t i = 0; i < rows; ++i) {
            const float *in = x + c * a.h * a.w + ((tap.rows.first + i) * a.stride_h + rowOffset) * a.w +
                              tap.columns.first * a.stride_w + columnOffset;
            float *to = pixels + c * outputs + i * columns;
            if (a.stride_w == 1)
              std::copy_n(in, columns, to);
            else
              for (int64_t j = 0; j < columns; ++j)
                to[j] = in[j * a.stride_w];
          }
      });
      runProducts(rt, TapProduct(a.k, outputs, a.c, tapWeights(t), pixels, product));
      forRange(rt, a.k, outputs, [&](int64_t begin, int64_t end) {
        for (int64_t k = begin; k < end; ++k)
          for (int64_t i = 0; i < rows; ++i) {
            float *to = y + k * plane + (tap.rows.first + i) * a.ow + tap.columns.first;
            const float *from = product + k * outputs + i * columns;
            for (int64_t j = 0; j < columns; ++j)
              to[j] += from[j];
          }
      });
    }
    if (a.epilogue)
      forRange(rt, a.k, plane, [&](int64_t begin, int64_t end) {
        a.epilogue(a.epilogue_ctx, y + begin * plane, plane, image, begin, 0, end - begin, plane);
      });
  }
}

} // namespace kiln::runtime::kernels::detail

namespace kiln::runtime::kernels {

void packConvTapMajor(const float *weights, int64_t k, int64_t c, int64_t r, int64_t s, float *dst) {
  for (int64_t o = 0; o < k; ++o)
    for (int64_t tap = 0; tap < r * s; ++tap)
      for (int64_t i = 0; i < c; ++i)
        dst[(tap * k + o) * c + i] = weights[(o * c + i) * r * s + tap];
}

} // namespace kiln::runtime::kernels
