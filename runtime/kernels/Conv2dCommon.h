#pragma once
// Pieces shared by the convolution paths (Conv2d.cpp: GEMM; Conv2dDepthwise.cpp and
// Conv2dDirect.cpp: direct; Conv2dWinograd*.cpp).
// Internal to runtime/kernels/.
#include <cstdint>

#include "runtime/KernelAbi.h"

namespace kiln::runtime::kernels::detail {

/// Whether the arguments describe a convolution the kernels can run: positive sizes, strides
/// and dilations, non-negative pads, groups dividing both channel counts, a weights layout and
/// accumulation the shape allows. conv2d leaves y untouched otherwise (the ABI has no error
/// channel; the compiler never emits such a call).
bool validConv(const kiln_conv2d_args &args);

/// A 1x1 kernel, strides 1, no padding: the input's pixels are the GEMM's B as they lie.
bool pointwiseConv(const kiln_conv2d_args &args);

/// The input with its zero padding written out, so that packers and direct loops read every
/// window position without bounds checks: channel c of image n starts at
/// data + (n*C + c)*plane, rows are `width` floats apart, and window tap (r, s) of output
/// (oh, ow) is at row oh*stride_h + r*dilation_h, column ow*stride_w + s*dilation_w.
/// It is the input itself when no padding is read.
struct PaddedInput {
  const float *data = nullptr;
  int64_t height = 0, width = 0, plane = 0;
};

/// The padded input's geometry; its data is the input itself when no padding is read, else
/// null (nothing is built).
PaddedInput paddedShape(const kiln_conv2d_args &args);
/// Planes [first, first + count) of the input (n*C + c numbering), padded as `shape` says,
/// into `out` (count planes, shape.plane floats apart).
void padPlanes(const kiln_conv2d_args &args, const PaddedInput &shape, int64_t first, int64_t count, float *out);
/// Planes [first, first + count) padded into this thread's Scratch::Conv, once per call and
/// first plane on each thread (`call`: a nextCallNumber() of the conv2d call), for paths that
/// pad a batch's planes as their threads reach them instead of all ahead (padInput): that
/// copy outgrew the caches at batch 4-8, went to memory and was read back, and counted in the
/// peak resident set (Conv2dGrouped.cpp, and conv2d's im2col GEMM).
const float *paddedPlanes(const kiln_conv2d_args &args, const PaddedInput &shape, uint64_t call, int64_t first,
                          int64_t count);
/// Builds the padded input in the calling thread's scratch (valid until its next conv2d).
PaddedInput padInput(const kiln_rt *rt, const kiln_conv2d_args &args);

/// Plain depthwise convolution (one output channel per input channel, equal strides up to 4)
/// plane by plane over the plane's padded stride phases, padding done per plane in the
/// thread's scratch (Conv2dDepthwise.cpp); the epilogue sees each finished plane.
bool phasePlaneDepthwise(const kiln_conv2d_args &args);
void depthwisePlaneConv(const kiln_rt *rt, const kiln_conv2d_args &args);
/// Its stride-1 layers whose output rows are as wide as the input's, straight from x.
bool flatPlaneDepthwise(const kiln_conv2d_args &args);
void depthwiseFlatConv(const kiln_rt *rt, const kiln_conv2d_args &args);

/// Whether a plain depthwise layer on `threads` threads splits its planes by rows, a band of
/// each per thread, rather than by images and channels: when there are fewer images than
/// threads and a plane has more pixels than channels. The pointwise convolutions around it
/// then split their GEMMs by pixels, and rows split the same way find their input in the
/// thread's own cache and leave their output there (split by channels, MnasNet's 72-channel
/// 56x56 layers ran slower on 2 threads than on 1). With an image or more per thread the
/// GEMMs split by images, and so must this: split by rows, half of every image came from the
/// other core, and MobileNetV2's 192-channel 28x28 layer at batch 8 ran no faster on 2
/// threads than on 1.
inline bool depthwiseSplitsRows(int64_t threads, const kiln_conv2d_args &args) {
  return threads > 1 && args.n < threads && args.c < args.oh * args.ow;
}

/// Stride-1 depthwise planes with more outputs than this run along their rows (the
/// shifted-row path, else the flat one), where 16 outputs a vector waste no lanes and need no
/// transposes; smaller ones with channels in the lanes (channel blocks). In MobileNetV2 at one
/// thread (one Zen 5 core), blocks against flat: 3x3 144 56x56 0.186-0.195 ms against
/// 0.218-0.225, 32 112x112 0.21-0.28 against 0.19-0.20.
constexpr int64_t kLargeDepthwisePlane = 56 * 56;

/// Plain depthwise convolution on large planes (kLargeDepthwisePlane: the output's at stride
/// 1, the input's at stride 2) with a square 3x3, 5x5 or 7x7 kernel, "same" padding and no
/// dilation, from the input as it lies: each tap's 16 inputs shifted or permuted out of the
/// 16-column chunks around them, eight output rows at a time (Conv2dDepthwiseRows.cpp); post
/// ops applied in registers, then the epilogue sees each band of finished rows.
bool shiftedRowDepthwise(const kiln_conv2d_args &args);
void depthwiseShiftedRows(const kiln_rt *rt, const kiln_conv2d_args &args);

/// Plain depthwise convolution with 16 channels in a vector's lanes, for planes small enough
/// that per-plane vectors waste lanes and setup (Conv2dDepthwiseBlocks.cpp); post ops applied
/// in registers, then the epilogue sees each finished plane.
bool channelBlockDepthwise(const kiln_conv2d_args &args);
void depthwiseChannelBlocks(const kiln_rt *rt, const kiln_conv2d_args &args);

/// Direct convolution for one input channel per group (depthwise, channel multiplier <= 8),
/// parallel over output planes (or, for multipliers of 5-8, over input planes, whose output
/// channels run together); the epilogue sees each finished plane.
void depthwiseConv(const kiln_rt *rt, const kiln_conv2d_args &args, const PaddedInput &input);

/// Direct convolution by tiles of output pixels (Conv2dDirect.cpp), for one group, few output
/// channels and enough taps (directConvShape), whose GEMM would pack about as much as it
/// multiplies. Parallel over blocks of an image's output pixels; the epilogue sees each block
/// (all channels by its pixels) once it is final. Uses the calling thread's Scratch::SharedB.
bool directConvShape(const kiln_conv2d_args &args);
void directConv(const kiln_rt *rt, const kiln_conv2d_args &args, const PaddedInput &input);

/// Grouped convolution with few output channels per group (a multiple of 4, at most 16), rows
/// of at least 14 pixels and column stride 1 (groupedConvShape), directly over vectors of output pixels, four
/// channels of a group by four rows at a time (Conv2dGrouped.cpp); parallel over (image,
/// group, block of four channels); the epilogue sees each block's finished planes.
bool groupedConvShape(const kiln_conv2d_args &args);
void groupedConv(const kiln_rt *rt, const kiln_conv2d_args &args);

/// Whether most (output, tap) pairs of this one-group convolution read padding (large
/// dilations on small images: DeepLabV3's ASPP), so that it runs tap by tap over only the
/// outputs each tap reaches (Conv2dSparseTaps.cpp); the epilogue sees each finished image.
/// Uses the calling thread's Scratch::SparseTaps.
bool sparseTapConvShape(const kiln_conv2d_args &args);
void sparseTapConv(const kiln_rt *rt, const kiln_conv2d_args &args);

// Winograd F(M x M, 3x3), M = 2 or 4 (Conv2dWinograd.h).

/// Whether the convolution is one Winograd computes at all: 3x3, stride 1, dilation 1, one
/// group. Only such convolutions may come with transformed weights.
bool winogradShape(const kiln_conv2d_args &args);

/// The M of the Winograd variant conv2d runs these (valid) arguments with, or 0 for none:
/// winogradShape, and enough channels and pixels for the transforms to pay. weightsStored:
/// with the weights transformed once at load rather than on every call (conv2d with plain
/// weights asks without), which lets deep layers on small images through too.
int winogradTile(const kiln_conv2d_args &args, bool weightsStored);

/// The M of weights in this kiln_conv_weights_layout, 0 for plain weights (or no layout).
int winogradTileOfLayout(int32_t weightsLayout);

/// 3x3 stride-1 convolution by Winograd F(tile x tile, 3x3), parallel over (image, tile-row
/// block) on rt; uses the calling thread's Scratch::Conv for the transformed weights unless
/// they come transformed for this tile (weights_layout).
void winogradConv(const kiln_rt *rt, const kiln_conv2d_args &args, int tile);

} // namespace kiln::runtime::kernels::detail
