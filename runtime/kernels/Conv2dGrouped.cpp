// Grouped convolution with few channels per group (ResNeXt's 32 groups of 4-16), directly over
// vectors of output pixels.
//
// As a GEMM per (image, group), each product is M = K/G output channels (4 to 16) by
// K = C/G*R*S taps (36 to 144): the 6 x 64 micro-tiles run a third empty at M = 4, and every
// group packs its own im2col panels, each float of which feeds only M outputs. ResNeXt-50's
// grouped layers ran at 40-60 GFLOP/s that way, under half of this core's peak. Here four
// output channels of a group and four output rows are computed together, 16 pixels of a row
// per vector (channelRows, Conv2dChannelRows.h, which depthwise shares): each tap of each input
// channel of the group loads four input vectors (one per row, from the padded input) and
// feeds them to 16 FMAs, one chain per (channel, row), with each channel's weight broadcast. The epilogue sees each finished block of four channels.
//
// Each work item has its group's input planes padded in its thread's scratch (paddedPlanes:
// once for the group's blocks that follow one another on a thread), where they stay in L1/L2
// while its blocks read them. Padded for the whole batch at once, as the GEMM paths' packers want it, the copy
// outgrew the caches at batch 8 (13.8 MB for ResNeXt's 128-channel 56x56 layer), was written to
// memory and read back, and the layer ran at half its batch-1 speed per image.
#include <algorithm>

#include "runtime/kernels/Conv2dChannelRows.h"
#include "runtime/kernels/Conv2dCommon.h"
#include "runtime/kernels/GemmDriver.h"

namespace kiln::runtime::kernels::detail {

namespace {

constexpr int kChannels = 4; // output channels per block
constexpr int kRows = 4;     // output rows computed together
// The gate (groupedConvShape): kiln-gemm-bench --conv --only grouped, one Zen 4 core, this
// path against the GEMM's (ResNeXt-50 32x4d's layers):
//   3x3 128 56x56 g32 (4 per group)     0.36-0.51 ms against 0.71
//   3x3 256 28x28 g32 (8 per group)     0.36 ms against 0.52
//   3x3 512 14x14 g32 (16 per group)    0.37 ms against 0.48
//   3x3/2 256 56x56 g32                 0.71 ms against 0.69: strided loads cost what it saves
//   (1024 7x7 g32, 32 per group: 7 of 16 lanes; the GEMM's tiles fill, 0.48 ms)
constexpr int64_t kMaxGroupOutputs = 16, kMinWidth = 14;

struct GroupedJob {
  const kiln_conv2d_args &a;
  PaddedInput input; // its geometry; data is the input itself when no padding is read, else null
  int64_t blocksPerGroup;
  uint64_t call;     // paddedPlanes' key, when input.data is null
};

#ifdef __AVX512F__
using BlockRowsFn = ChannelRowsFn;

BlockRowsFn blockRowsFn(int64_t rows, bool unitStride) {
  static constexpr BlockRowsFn unit[kRows] = {channelRows<kChannels, 1, true>, channelRows<kChannels, 2, true>,
                                              channelRows<kChannels, 3, true>, channelRows<kChannels, 4, true>};
  static constexpr BlockRowsFn strided[kRows] = {channelRows<kChannels, 1, false>, channelRows<kChannels, 2, false>,
                                                 channelRows<kChannels, 3, false>, channelRows<kChannels, 4, false>};
  return (unitStride ? unit : strided)[rows - 1];
}
#endif

/// Work items [begin, end) of (image, group, block of kChannels output channels).
void groupedBlocks(void *ctx, int64_t begin, int64_t end) {
  const GroupedJob &job = *static_cast<const GroupedJob *>(ctx);
  const kiln_conv2d_args &a = job.a;
  const PaddedInput &in = job.input;
  const int64_t inputs = a.c / a.groups, outputs = a.k / a.groups, taps = a.r * a.s, outPlane = a.oh * a.ow;
  for (int64_t item = begin; item < end; ++item) {
    const int64_t block = item % job.blocksPerGroup, imageGroup = item / job.blocksPerGroup;
    const int64_t image = imageGroup / a.groups, group = imageGroup % a.groups;
    const int64_t first = group * outputs + block * kChannels;
    const int64_t firstPlane = image * a.c + group * inputs;
    const float *source =
        in.data ? in.data + firstPlane * in.plane : paddedPlanes(a, in, job.call, firstPlane, inputs);
    const float *weights = a.weights + first * inputs * taps;
    float *out = a.y + (image * a.k + first) * outPlane;
#ifdef __AVX512F__
    for (int64_t oh0 = 0; oh0 < a.oh; oh0 += kRows)
      blockRowsFn(std::min<int64_t>(kRows, a.oh - oh0), a.stride_w == 1)(a, in, source, inputs, weights, out, oh0);
#else
    for (int64_t o = 0; o < kChannels; ++o)
      for (int64_t oh = 0; oh < a.oh; ++oh)
        for (int64_t ow = 0; ow < a.ow; ++ow) {
          float sum = 0.0f;
          for (int64_t ci = 0; ci < inputs; ++ci)
            for (int64_t r = 0; r < a.r; ++r)
              for (int64_t s = 0; s < a.s; ++s)
                sum += weights[(o * inputs + ci) * taps + r * a.s + s] *
                       source[ci * in.plane + (oh * a.stride_h + r * a.dilation_h) * in.width + ow * a.stride_w +
                              s * a.dilation_w];
          out[o * outPlane + oh * a.ow + ow] = sum;
        }
#endif
    if (a.epilogue)
      a.epilogue(a.epilogue_ctx, out, outPlane, image, first, 0, kChannels, outPlane);
  }
}

} // namespace

bool groupedConvShape(const kiln_conv2d_args &a) {
  const int64_t inputs = a.c / a.groups, outputs = a.k / a.groups;
  // Rows narrower than kMinWidth waste most of each vector; more outputs per group fill the
  // GEMM's tiles; a column stride makes every load a gather (the measurements above).
  return a.groups > 1 && inputs >= 2 && outputs % kChannels == 0 && outputs <= kMaxGroupOutputs &&
         a.ow >= kMinWidth && a.stride_w == 1;
}

void groupedConv(const kiln_rt *rt, const kiln_conv2d_args &a) {
  const int64_t blocksPerGroup = a.k / a.groups / kChannels;
  GroupedJob job{a, paddedShape(a), blocksPerGroup, nextCallNumber()};
  const int64_t items = a.n * a.groups * blocksPerGroup;
  const int64_t macs = a.n * a.k * (a.c / a.groups) * a.r * a.s * a.oh * a.ow;
  parallelForIfWorth(rt, items, macs, int64_t{1} << 18, groupedBlocks, &job);
}

} // namespace kiln::runtime::kernels::detail
