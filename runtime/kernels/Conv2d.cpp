// kiln::runtime::kernels::conv2d: NCHW f32 convolution as one GEMM per (image, group),
//   Y_g (K/G x OH*OW) = W_g (K/G x C/G*R*S) * im2col(X_g) (C/G*R*S x OH*OW),
// run by the blocked driver (GemmDriver.h) so that the epilogue sees output tiles with
// row = output channel and col = oh*OW + ow, as the ABI promises.
//
// No im2col matrix is ever built: Im2colSource packs the driver's B panels (kc x 64) straight
// from the input, and the padding is written out first so that the packer is a plain strided
// copy per output-row segment: once per call for one image (padInput), per image by the
// thread that reaches it for a batch (paddedImage). 1x1 stride-1 unpadded convolutions read the
// input as the B matrix itself; one input channel per group goes to the direct depthwise loop;
// 3x3 stride-1 convolutions with enough channels and pixels go to Winograd (F(2x2, 3x3) or
// F(4x4, 3x3)); few output channels over enough taps go to direct tiles of output pixels
// (Conv2dDirect.cpp); convolutions most of whose taps read padding go tap by tap over the
// outputs each reaches (Conv2dSparseTaps.cpp).
#include <algorithm>

#include "runtime/kernels/Conv2dCommon.h"
#include "runtime/kernels/GemmBf16.h"
#include "runtime/kernels/GemmDriver.h"
#include "runtime/kernels/GemmMicroKernel.h" // kPanelWidth
#include "runtime/kernels/Kernels.h"
#include "runtime/kernels/Simd.h"

namespace kiln::runtime::kernels {

namespace detail {

bool pointwiseConv(const kiln_conv2d_args &a) {
  return a.r == 1 && a.s == 1 && a.stride_h == 1 && a.stride_w == 1 && a.pad_top == 0 && a.pad_left == 0 &&
         a.oh == a.h && a.ow == a.w;
}

bool validConv(const kiln_conv2d_args &a) {
  if (a.n < 0 || a.c < 0 || a.h < 1 || a.w < 1 || a.k < 0 || a.r < 1 || a.s < 1 || a.oh < 0 || a.ow < 0)
    return false;
  if (a.stride_h < 1 || a.stride_w < 1 || a.dilation_h < 1 || a.dilation_w < 1 || a.pad_top < 0 ||
      a.pad_left < 0 || a.groups < 1 || a.c % a.groups != 0 || a.k % a.groups != 0)
    return false;
  // Winograd's transformed weights exist only for the convolutions Winograd computes,
  // tap-major ones for those the sparse-tap path computes and W^T's panels for those the
  // direct path can (never a pointwise one, which reads plain weights first).
  if (a.weights_layout == KILN_CONV_WEIGHTS_TAP_MAJOR) {
    if (!sparseTapConvShape(a))
      return false;
  } else if (a.weights_layout == KILN_CONV_WEIGHTS_DIRECT_PANELS) {
    if (!directConvShape(a) || pointwiseConv(a))
      return false;
  } else if (a.weights_layout == KILN_CONV_WEIGHTS_BF16_PANELS) {
    if (!convBf16Panels(a))
      return false;
  } else if (a.weights_layout != KILN_CONV_WEIGHTS_PLAIN &&
             (a.exact || !winogradTileOfLayout(a.weights_layout) || !winogradShape(a))) {
    return false;
  } else if (a.weights_layout == KILN_CONV_WEIGHTS_WINOGRAD_F2_BF16 && a.precision != KILN_PRECISION_BF16) {
    return false;
  }
  // Only the pointwise path (a GEMM whose first K block may add to C) accumulates into y.
  if (a.accumulate && !pointwiseConv(a))
    return false;
  return a.x && a.weights && a.y;
}

PaddedInput paddedShape(const kiln_conv2d_args &a) {
  // Rows and columns the windows reach, in padded coordinates.
  const int64_t reachH = (a.oh - 1) * a.stride_h + (a.r - 1) * a.dilation_h + 1;
  const int64_t reachW = (a.ow - 1) * a.stride_w + (a.s - 1) * a.dilation_w + 1;
  PaddedInput padded;
  padded.height = std::max(a.pad_top + a.h, reachH);
  padded.width = std::max(a.pad_left + a.w, reachW);
  if (a.pad_top == 0 && a.pad_left == 0 && padded.height == a.h && padded.width == a.w) {
    padded.data = a.x;
    padded.plane = a.h * a.w;
    return padded;
  }
  padded.plane = padded.height * padded.width;
  return padded;
}

void padPlanes(const kiln_conv2d_args &a, const PaddedInput &shape, int64_t first, int64_t count, float *out) {
  const int64_t width = shape.width;
  for (int64_t p = first; p < first + count; ++p, out += shape.plane) {
    const float *in = a.x + p * a.h * a.w;
    std::fill(out, out + a.pad_top * width, 0.0f);
    for (int64_t i = 0; i < a.h; ++i) {
      float *row = out + (a.pad_top + i) * width;
      std::fill(row, row + a.pad_left, 0.0f);
      std::copy(in + i * a.w, in + (i + 1) * a.w, row + a.pad_left);
      std::fill(row + a.pad_left + a.w, row + width, 0.0f);
    }
    std::fill(out + (a.pad_top + a.h) * width, out + shape.plane, 0.0f);
  }
}

const float *paddedPlanes(const kiln_conv2d_args &a, const PaddedInput &shape, uint64_t call, int64_t first,
                          int64_t count) {
  thread_local uint64_t paddedCall = 0;
  thread_local int64_t paddedFirst = -1;
  float *planes = scratch(Scratch::Conv, static_cast<size_t>(count * shape.plane));
  if (paddedCall != call || paddedFirst != first) {
    padPlanes(a, shape, first, count, planes);
    paddedCall = call, paddedFirst = first;
  }
  return planes;
}

PaddedInput padInput(const kiln_rt *rt, const kiln_conv2d_args &a) {
  PaddedInput padded = paddedShape(a);
  if (padded.data)
    return padded;
  const int64_t planes = a.n * a.c;
  float *data = scratch(Scratch::Conv, static_cast<size_t>(planes * padded.plane));
  struct Job {
    const kiln_conv2d_args &a;
    const PaddedInput &padded;
    float *data;
  } job{a, padded, data};
  auto fill = [](void *ctx, int64_t begin, int64_t end) {
    const Job &j = *static_cast<const Job *>(ctx);
    padPlanes(j.a, j.padded, begin, end - begin, j.data + begin * j.padded.plane);
  };
  parallelForIfWorth(rt, planes, planes * padded.plane, int64_t{1} << 16, fill, &job);
  padded.data = data;
  return padded;
}

} // namespace detail

namespace {

using detail::PaddedInput;

/// S(k, j) for k = (c, r, s) and output pixel j = (oh, ow): the padded input of one group at
/// channel c, row oh*stride_h + r*dilation_h, column ow*stride_w + s*dilation_w.
///
/// Packing walks k = (c, r, s) and, for each, copies runs of pixels that share an output row
/// (and a destination panel): one strided copy per run, no bounds checks, since the padding
/// is in the input. The runs depend only on the columns, so they are listed once per call.
class Im2colSource final : public detail::PanelSource {
public:
  Im2colSource(const float *image, const kiln_conv2d_args &a, const PaddedInput &padded)
      : image_(image), a_(a), padded_(padded) {}

  void pack(float *dst, int64_t k0, int64_t kc, int64_t x0, int64_t cols,
            int64_t width) const override {
    for (int64_t chunk = 0; chunk < cols; chunk += kChunk) {
      Run runs[kMaxRuns];
      int count = 0;
      const int64_t chunkCols = std::min(kChunk, cols - chunk);
      listRuns(x0 + chunk, chunkCols, [&](int64_t offset, int64_t src, int64_t len) {
        runs[count++] = {chunk + offset, width, src, len};
      });
      copyRuns(dst, k0, kc, runs, count);
    }
    for (int64_t kk = 0; kk < kc && cols < width; ++kk)
      std::fill(dst + kk * width + cols, dst + (kk + 1) * width, 0.0f);
  }

  void packPanels(float *dst, int64_t k0, int64_t kc, int64_t x0, int64_t cols) const override {
    using detail::kPanelWidth;
    // Chunks of whole panels, so that a run never leaves its chunk's panels.
    for (int64_t chunk = 0; chunk < cols; chunk += kChunk) {
      Run runs[kMaxRuns];
      int count = 0;
      const int64_t chunkCols = std::min(kChunk, cols - chunk);
      listRuns(x0 + chunk, chunkCols, [&](int64_t offset, int64_t src, int64_t len) {
        // Split the run where it crosses into the next panel.
        for (int64_t column = chunk + offset; len > 0;) {
          const int64_t q = column / kPanelWidth, inPanel = column % kPanelWidth;
          const int64_t piece = std::min(len, kPanelWidth - inPanel);
          runs[count++] = {q * kPanelWidth * kc + inPanel, detail::panelWidth(q, cols), src, piece};
          column += piece, src += piece * a_.stride_w, len -= piece;
        }
      });
      copyRuns(dst, k0, kc, runs, count);
    }
    const int64_t lastPanel = (cols - 1) / kPanelWidth, lastCols = cols - lastPanel * kPanelWidth;
    const int64_t lastWidth = detail::panelWidth(lastPanel, cols);
    float *last = dst + lastPanel * kPanelWidth * kc;
    for (int64_t kk = 0; kk < kc && lastCols < lastWidth; ++kk)
      std::fill(last + kk * lastWidth + lastCols, last + (kk + 1) * lastWidth, 0.0f);
  }

  double packCost(int64_t width) const override {
    // Runs along output rows: ~0.3 cycle per float for 64-wide panels; a 6-wide micro-panel
    // pays the per-run overhead for every few floats.
    return width >= detail::kPanelWidth ? 0.3 : 1.0;
  }

private:
  // Columns per listing: 4 panels. Each column starts at most one run (a new output row), and
  // each panel boundary splits at most one more.
  static constexpr int64_t kChunk = 4 * detail::kPanelWidth;
  static constexpr int kMaxRuns = kChunk + kChunk / detail::kPanelWidth;
  /// For tap k, len pixels from input offset src (plus the tap's offset) go to
  /// dst + dst + k*stride, where dst is the block being packed.
  struct Run {
    int64_t dst, stride, src, len;
  };

  /// Calls emit(column offset from x0, input offset, length) for each output-row run.
  template <typename Emit> void listRuns(int64_t x0, int64_t cols, Emit &&emit) const {
    for (int64_t j = x0; j < x0 + cols;) {
      const int64_t oh = j / a_.ow, ow = j % a_.ow;
      const int64_t len = std::min(a_.ow - ow, x0 + cols - j);
      emit(j - x0, oh * a_.stride_h * padded_.width + ow * a_.stride_w, len);
      j += len;
    }
  }

  /// Copies every run for each k in [k0, k0+kc). Runs are the outer loop: a run's length,
  /// mask and addresses stay in registers while k walks the taps, whose input offsets are
  /// tabulated first. (Walking k outside and the runs inside cost ~0.5 cycle per float on
  /// the 3x3 64->64 layer, a fifth of its time; this order about a third of that.)
  void copyRuns(float *dst, int64_t k0, int64_t kc, const Run *runs, int count) const {
    constexpr int64_t kTapBlock = 512;
    int64_t taps[kTapBlock];
    for (int64_t kb = 0; kb < kc; kb += kTapBlock) {
      const int64_t kn = std::min(kTapBlock, kc - kb);
      int64_t c = (k0 + kb) / (a_.r * a_.s), r = (k0 + kb) / a_.s % a_.r, s = (k0 + kb) % a_.s;
      for (int64_t kk = 0; kk < kn; ++kk) {
        taps[kk] = c * padded_.plane + r * a_.dilation_h * padded_.width + s * a_.dilation_w;
        if (++s == a_.s) {
          s = 0;
          if (++r == a_.r) {
            r = 0;
            ++c;
          }
        }
      }
      for (int i = 0; i < count; ++i) {
        const Run &run = runs[i];
        float *out = dst + run.dst + kb * run.stride;
        const float *in = image_ + run.src;
#ifdef __AVX512F__
        if (a_.stride_w == 1) {
          const int64_t full = run.len / 16;
          const __mmask16 tail = detail::firstLanes(run.len % 16);
          for (int64_t kk = 0; kk < kn; ++kk, out += run.stride) {
            const float *from = in + taps[kk];
            for (int64_t v = 0; v < full; ++v)
              _mm512_storeu_ps(out + 16 * v, _mm512_loadu_ps(from + 16 * v));
            if (tail)
              _mm512_mask_storeu_ps(out + 16 * full, tail, _mm512_maskz_loadu_ps(tail, from + 16 * full));
          }
          continue;
        }
        if (a_.stride_w == 2) { // even elements of two loads; the second stops at the 31st
          const int64_t full = run.len / 16, tail = run.len % 16;
          const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
          for (int64_t kk = 0; kk < kn; ++kk, out += run.stride) {
            const float *from = in + taps[kk];
            for (int64_t v = 0; v < full; ++v) {
              const __m512 lo = _mm512_loadu_ps(from + 32 * v);
              const __m512 hi = _mm512_maskz_loadu_ps(0x7FFF, from + 32 * v + 16);
              _mm512_storeu_ps(out + 16 * v, _mm512_permutex2var_ps(lo, even, hi));
            }
            if (tail)
              _mm512_mask_storeu_ps(out + 16 * full, detail::firstLanes(tail),
                                    detail::loadStrided(from + 32 * full, 2, tail));
          }
          continue;
        }
#endif
        for (int64_t kk = 0; kk < kn; ++kk, out += run.stride)
          detail::copyStrided(out, in + taps[kk], a_.stride_w, run.len);
      }
    }
  }

  const float *image_;
  const kiln_conv2d_args &a_;
  const PaddedInput &padded_;
};

/// Calls fn(weights, pixels) with the GEMM operands of product `index` = (image, group);
/// `paddedImage` is the image's padded planes (unread for a pointwise convolution, and when
/// only the sources' shapes are asked).
template <typename Fn>
auto withSources(const kiln_conv2d_args &a, const PaddedInput &padded, bool pointwise, int64_t index,
                 const float *paddedImage, Fn &&fn) {
  const int64_t image = index / a.groups, group = index % a.groups;
  const int64_t groupOutputs = a.k / a.groups, depth = a.c / a.groups * a.r * a.s;
  const detail::DenseSource weights(a.weights + group * groupOutputs * depth, 1, depth);
  const int64_t groupChannel = group * (a.c / a.groups);
  if (pointwise)
    return fn(weights, detail::DenseSource(a.x + (image * a.c + groupChannel) * a.h * a.w, a.h * a.w, 1));
  return fn(weights, Im2colSource(paddedImage + groupChannel * padded.plane, a, padded));
}

/// The padded planes of image `image`: in the whole batch's padded input, or, where padding is
/// deferred to the products (`call` != 0: a batch of several images), padded by the thread
/// that reaches them (paddedPlanes; FCN-ResNet50's dilated 512-channel layers at batch 4
/// padded 10.6 MB ahead).
const float *paddedImage(const kiln_conv2d_args &a, const PaddedInput &padded, uint64_t call, int64_t image) {
  return call ? detail::paddedPlanes(a, padded, call, image * a.c, a.c) : padded.data + image * a.c * padded.plane;
}

class ConvProducts final : public detail::ProductSet {
public:
  // Weights stored as bf16 panels are read as A where they lie: never swapped.
  // `deferredCall` != 0: padded has the geometry only, and each product pads its image
  // (paddedImage).
  ConvProducts(const kiln_conv2d_args &a, const PaddedInput &padded, bool pointwise, uint64_t deferredCall = 0)
      : ProductSet(a.n * a.groups, a.k / a.groups, a.oh * a.ow, a.c / a.groups * a.r * a.s,
                   a.weights_layout != KILN_CONV_WEIGHTS_BF16_PANELS &&
                       withSources(a, padded, pointwise, 0, padded.data,
                                   [&](const detail::PanelSource &weights, const detail::PanelSource &pixels) {
                                     return detail::chooseSwap(a.k / a.groups, a.oh * a.ow, weights, pixels);
                                   })),
        a_(a), padded_(padded), pointwise_(pointwise), deferredCall_(deferredCall) {}

  void run(int64_t index, int64_t row0, int64_t row1, int64_t col0, int64_t col1,
           const float *packedB) const override {
    const int64_t image = index / a_.groups, group = index % a_.groups;
    withSources(a_, padded_, pointwise_, index, imageOf(index),
                [&](const detail::PanelSource &weights, const detail::PanelSource &pixels) {
                  detail::Product product;
                  product.m = m;
                  product.n = n;
                  product.k = k;
                  product.a = &weights;
                  product.b = &pixels;
                  product.c = a_.y + (image * a_.k + group * m) * n;
                  product.ldc = n;
                  product.epilogue = a_.epilogue;
                  product.epilogueCtx = a_.epilogue_ctx;
                  product.batch = image;
                  product.rowOffset = group * m;
                  product.swap = swap;
                  product.accumulate = a_.accumulate != 0;
                  product.post = detail::hasPostOps(a_.post) ? &a_.post : nullptr;
                  if (a_.weights_layout == KILN_CONV_WEIGHTS_BF16_PANELS) { // convBf16Panels
                    product.bf16A =
                        reinterpret_cast<const uint16_t *>(a_.weights) + group * detail::bf16PanelElements(m, k);
                  }
                  product.bf16 = multipliesInBf16();
                  if (product.bf16) // B packed whole comes as bf16 pairs (ProductSet::multipliesInBf16)
                    product.bf16Panels = reinterpret_cast<const uint16_t *>(packedB);
                  else
                    product.packedB = packedB;
                  detail::computeRegion(product, row0, row1, col0, col1);
                });
  }

  // The pixels are B: gathered from im2col windows, or for a 1x1 convolution copied from the
  // input.
  bool sharesPackedB() const override { return !pointwise_; }
  bool canPackB() const override { return true; }
  bool multipliesInBf16() const override {
    return a_.weights_layout == KILN_CONV_WEIGHTS_BF16_PANELS ||
           (a_.precision == KILN_PRECISION_BF16 && !a_.exact && detail::bf16Pays(m, n));
  }
  void packB(int64_t index, float *dst, int64_t k0, int64_t kc, int64_t x0, int64_t cols) const override {
    withSources(a_, padded_, pointwise_, index, imageOf(index),
                [&](const detail::PanelSource &, const detail::PanelSource &pixels) {
                  pixels.packPanels(dst, k0, kc, x0, cols);
                });
  }

private:
  const float *imageOf(int64_t index) const {
    return pointwise_ ? nullptr : paddedImage(a_, padded_, deferredCall_, index / a_.groups);
  }

  const kiln_conv2d_args &a_;
  const PaddedInput padded_;
  bool pointwise_;
  uint64_t deferredCall_;
};

} // namespace

bool convCanAccumulate(const kiln_conv2d_args &args) { return detail::pointwiseConv(args); }

namespace {

/// The ways conv2d computes a convolution, in the order it tries them.
enum class ConvPath { Pointwise, SparseTaps, Winograd, ShiftedRows, ChannelBlocks, PhasePlanes, Depthwise, Grouped, Direct, Im2colGemm };

/// conv2d's choice for these shapes and weights layout (its one decision, which the gates
/// codegen asks, convSparseTaps and convBf16Panels, read with plain weights). `tile` gets the
/// Winograd tile.
ConvPath convPath(const kiln_conv2d_args &a, int &tile) {
  if (detail::pointwiseConv(a))
    return ConvPath::Pointwise;
  if (a.weights_layout == KILN_CONV_WEIGHTS_TAP_MAJOR) // chosen by convSparseTaps
    return ConvPath::SparseTaps;
  if (a.weights_layout == KILN_CONV_WEIGHTS_DIRECT_PANELS) // chosen by convDirectPanels
    return ConvPath::Direct;
  // 3x3 stride 1 with enough channels, or weights already transformed: Conv2dWinograd.h
  const int stored = detail::winogradTileOfLayout(a.weights_layout);
  tile = stored ? stored : a.exact ? 0 : detail::winogradTile(a, false);
  if (tile)
    return ConvPath::Winograd;
  if (detail::shiftedRowDepthwise(a))
    return ConvPath::ShiftedRows;
  if (detail::channelBlockDepthwise(a))
    return ConvPath::ChannelBlocks;
  if (detail::phasePlaneDepthwise(a))
    return ConvPath::PhasePlanes;
  if (detail::sparseTapConvShape(a))
    return ConvPath::SparseTaps;
  // One input channel per group: a GEMM with K = R*S and M <= 8 would waste its tiles.
  if (a.c / a.groups == 1 && a.k / a.groups <= 8)
    return ConvPath::Depthwise;
  if (detail::groupedConvShape(a))
    return ConvPath::Grouped;
  if (detail::directConvShape(a))
    return ConvPath::Direct;
  return ConvPath::Im2colGemm;
}

ConvPath plainWeightsPath(kiln_conv2d_args a) {
  a.weights_layout = KILN_CONV_WEIGHTS_PLAIN;
  int tile = 0;
  return convPath(a, tile);
}

} // namespace

bool convSparseTaps(const kiln_conv2d_args &a) { return plainWeightsPath(a) == ConvPath::SparseTaps; }

bool convDirectPanels(const kiln_conv2d_args &a) { return plainWeightsPath(a) == ConvPath::Direct; }

bool convBf16Panels(const kiln_conv2d_args &a) {
  if (a.precision != KILN_PRECISION_BF16 || a.exact)
    return false;
  const ConvPath path = plainWeightsPath(a);
  return path == ConvPath::Pointwise || path == ConvPath::Im2colGemm;
}

int64_t convBf16PanelElements(int64_t rows, int64_t depth, int64_t groups) {
  return groups * detail::bf16PanelElements(rows / groups, depth);
}

void packConvBf16Panels(const float *weights, int64_t rows, int64_t depth, int64_t groups, uint16_t *dst) {
  const int64_t perGroup = rows / groups, groupElements = detail::bf16PanelElements(perGroup, depth);
  for (int64_t g = 0; g < groups; ++g)
    detail::packBf16Panels(weights + g * perGroup * depth, depth, perGroup, depth, dst + g * groupElements);
}

namespace {

/// A pointwise convolution of 1x1 images (squeeze-and-excitation's layers, after a global
/// pool): n images of C values times W^T, the matrix-vector product of a batch-1 linear layer
/// at batch 1 (gemm's VectorProducts, which stream W with prefetching, over the threads). As
/// a GEMM of 1-column images its 6-row dot products streamed W at ~9 GB/s on one thread:
/// MobileNetV3-Large spent 15% of its time in these layers (960 x 240: 0.104 ms).
bool singlePixelPointwise(const kiln_conv2d_args &a) {
  return detail::pointwiseConv(a) && a.oh * a.ow == 1 && !a.accumulate && a.groups == 1 &&
         a.weights_layout == KILN_CONV_WEIGHTS_PLAIN && a.precision != KILN_PRECISION_BF16;
}

/// gemm's epilogue calls over rows of images by columns of channels, as conv2d's over each
/// image's channels by its one pixel.
struct ImageRowsEpilogue {
  kiln_epilogue_fn epilogue;
  void *ctx;
  static void call(void *self, float *tile, int64_t ld, int64_t, int64_t row0, int64_t col0, int64_t rows,
                   int64_t cols) {
    const ImageRowsEpilogue &e = *static_cast<const ImageRowsEpilogue *>(self);
    for (int64_t i = 0; i < rows; ++i)
      e.epilogue(e.ctx, tile + i * ld, 1, row0 + i, col0, 0, cols, 1);
  }
};

void singlePixelConv(const kiln_rt *rt, const kiln_conv2d_args &a) {
  kiln_gemm_args g{};
  g.batch = 1, g.m = a.n, g.n = a.k, g.k = a.c;
  g.a = a.x, g.lda = a.c;                      // image i's values: row i
  g.b = a.weights, g.ldb = a.c, g.trans_b = 1; // W is K x C: op(B) = W^T
  g.c = a.y, g.ldc = a.k;                      // image i's channels: row i
  g.post = a.post;                             // the bias per output channel: per column
  ImageRowsEpilogue epilogue{a.epilogue, a.epilogue_ctx};
  if (a.epilogue)
    g.epilogue = ImageRowsEpilogue::call, g.epilogue_ctx = &epilogue;
  gemm(rt, &g);
}

} // namespace

void conv2d(const kiln_rt *rt, const kiln_conv2d_args *args) {
  if (!args || !detail::validConv(*args) || args->n == 0 || args->k == 0 || args->oh == 0 || args->ow == 0)
    return;
  kiln_conv2d_args a = *args;
  if (singlePixelPointwise(a))
    return singlePixelConv(rt, a);
  int tile = 0;
  const ConvPath path = convPath(a, tile);
  // The GEMM, shifted-row and channel-block paths apply post ops in registers; the others
  // through the epilogue.
  detail::PostOpsEpilogue post;
  if (path != ConvPath::Pointwise && path != ConvPath::Im2colGemm && path != ConvPath::ShiftedRows &&
      path != ConvPath::ChannelBlocks)
    detail::wrapPostOps(a.post, true, a.epilogue, a.epilogue_ctx, post);
  switch (path) {
  case ConvPath::Pointwise:
    detail::runProducts(rt, ConvProducts(a, PaddedInput{}, true));
    return;
  case ConvPath::SparseTaps:
    detail::sparseTapConv(rt, a);
    return;
  case ConvPath::Winograd:
    detail::winogradConv(rt, a, tile);
    return;
  case ConvPath::ShiftedRows:
    detail::depthwiseShiftedRows(rt, a);
    return;
  case ConvPath::ChannelBlocks:
    detail::depthwiseChannelBlocks(rt, a);
    return;
  case ConvPath::PhasePlanes:
    detail::depthwisePlaneConv(rt, a);
    return;
  case ConvPath::Grouped:
    detail::groupedConv(rt, a);
    return;
  default:
    break;
  }
  if (path == ConvPath::Im2colGemm && a.n > 1) {
    // A batch: each product pads its own image when its thread reaches it (paddedImage).
    const PaddedInput shape = detail::paddedShape(a);
    detail::runProducts(rt, ConvProducts(a, shape, false, shape.data ? 0 : detail::nextCallNumber()));
    return;
  }
  const PaddedInput padded = detail::padInput(rt, a);
  switch (path) {
  case ConvPath::Depthwise:
    detail::depthwiseConv(rt, a, padded);
    return;
  case ConvPath::Direct:
    detail::directConv(rt, a, padded);
    return;
  default:
    detail::runProducts(rt, ConvProducts(a, padded, false));
  }
}

} // namespace kiln::runtime::kernels
