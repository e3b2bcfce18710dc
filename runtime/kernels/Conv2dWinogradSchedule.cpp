// How a Winograd convolution (Conv2dWinograd.h) runs: its blocks' GEMMs, and the blocks spread
// over the threads, block by block or phase by phase, with U transformed per call or stored.
//
// Work items are blocks of tiles: a range of tile rows of one image, or several whole small
// images, with at least minBlockPixels of output (each block streams all of U, which for deep
// layers is far larger than V and M) and otherwise as many as keep V (alpha^2 x C x T) and
// M (alpha^2 x K x T) in L2. Items are split evenly over the threads; with fewer blocks than
// threads (than two per thread when U is transformed per call), the threads instead share
// every block: by its output channels when there are at least twice as many as input
// channels (Plan::outputParts items per block, each transforming the block's whole input),
// else phase by phase (runPhased). Inside an item everything runs on one thread:
// the input transform reads a zero-padded strip of the block's input rows (one channel at a
// time, so the strip lives in L1), which handles any padding and the partial tiles at the
// bottom and right; the alpha^2 GEMMs run through the blocked driver; the output transform
// writes only valid output pixels, and the epilogue then sees each image of the block in
// chunks of 16 channels over the block's contiguous output pixels, each element once, after it
// is final.
//
// U comes transformed when the model's weights are constant and this kernel alone reads them:
// the runtime transforms them once, at load (KILN_CONV_WEIGHTS_WINOGRAD_F2/_F4,
// packWinogradWeights).
// ResNet-50's (then F(2,3)) Winograd layers at one thread (Zen 4): 17.6-21.5 ms -> 15.4-17.0; at two threads
// no change (each thread then streams its part of the stored U, 16/9 the size of the weights,
// from memory, about as long as transforming that part took). Otherwise (training, where the
// weights change) U is recomputed on every call into the calling thread's Scratch::Conv, in
// parallel over K (or, when it is small and every thread reads all of it, by each thread into
// its own): ~0.3 ms for 256 x 256 and ~1.9 ms for 512 x 512 on one core (writing 16 x K x C
// floats, memory-bound). The gate (Conv2dWinogradPlan.cpp) was measured with that per-call
// transform, which is what keeps deep layers at batch 1 off; with U stored, 512 x 512 at 7 x 7
// was still no faster.
#include <algorithm>

#include "runtime/kernels/Conv2dCommon.h"
#include "runtime/kernels/Conv2dWinograd.h"
#include "runtime/kernels/GemmDriver.h"

namespace kiln::runtime::kernels::detail {

namespace winograd {

namespace {

// Threads that all read the whole of U each transform their own copy up to this size (U of a
// 64 x 64 layer: 256 KiB); larger U is transformed once, split over the threads.
constexpr int64_t kOwnWeightsMaxFloats = int64_t{1} << 16;
// Input channels per unit of the phased input transform.
constexpr int64_t kPhasedChannels = 16;

/// Per-thread buffer of a work item: its own scratch slot, since the calling thread's
/// Scratch::Conv holds U and the driver's slots are in use during the GEMMs.
float *itemScratch(size_t floats) { return scratch(Scratch::WinogradItem, floats); }

// ---------------------------------------------------------------------------------------------
// The GEMMs of a block.

/// M_xi = U_xi * V_xi for points [xi0, xi1), rows [k0, k1): U_xi is K x C row-major (read in
/// place), V_xi is C x T, M_xi is K x T.
void multiplyBlock(const Plan &p, const Block &b, int64_t xi0, int64_t xi1, int64_t k0, int64_t k1, const float *v,
                   float *m) {
  const kiln_conv2d_args &a = p.a;
  const int64_t vPlane = a.c * b.tiles, mPlane = a.k * b.tiles;
  for (int64_t xi = xi0; xi < xi1; ++xi) {
    const DenseSource weights(p.u ? p.u + xi * p.uPlane : nullptr, 1, a.c); // unread with u16
    const DenseSource tilesSource(v + xi * vPlane, b.tiles, 1);
    Product product;
    product.m = a.k;
    product.n = b.tiles;
    product.k = a.c;
    product.a = &weights;
    product.b = &tilesSource;
    product.c = m + xi * mPlane;
    product.ldc = b.tiles;
    if (p.u16) { // U stored in bf16 at load: the products are bf16's
      product.bf16A = p.u16 + xi * uPlaneBf16Of(a.k, a.c);
      product.bf16 = true;
    }
    computeRegion(product, k0, k1, 0, b.tiles);
  }
}

// ---------------------------------------------------------------------------------------------
// Block by block: each block one work item, all three steps on one thread.

/// Output channels [k0, k1) of block `block`, from the whole block's input (Plan::outputParts
/// items per block: each transforms that input for itself).
void runItem(const Plan &p, int64_t block, int64_t k0, int64_t k1) {
  const Block b(p, block);
  if (b.empty() || k0 >= k1)
    return;
  const int64_t maxTiles = p.maxTiles();
  float *v = itemScratch(static_cast<size_t>(p.blockFloats() + p.stripFloats() + 32));
  float *m = v + p.points * p.a.c * maxTiles;
  float *strip = m + p.points * p.a.k * maxTiles;
  transformBlockInput(p, b, 0, p.a.c, v, strip);
  multiplyBlock(p, b, 0, p.points, k0, k1, v, m);
  transformBlockOutput(p, b, k0, k1, m);
}

/// Work item `item`: a block, or one of its Plan::outputParts shares of output channels (whole
/// epilogue chunks).
void runItem(const Plan &p, int64_t item) {
  const int64_t parts = p.outputParts, part = item % parts, chunks = ceilDiv(p.a.k, kEpilogueRows);
  runItem(p, item / parts, std::min(p.a.k, part * chunks / parts * kEpilogueRows),
          std::min(p.a.k, (part + 1) * chunks / parts * kEpilogueRows));
}

int64_t itemCount(const Plan &p) { return p.blocks() * p.outputParts; }

void runShare(void *ctx, int64_t begin, int64_t end) {
  const Plan &p = *static_cast<const Plan *>(ctx);
  for (int64_t part = begin; part < end; ++part)
    for (int64_t item = part * itemCount(p) / p.threads; item < (part + 1) * itemCount(p) / p.threads; ++item)
      runItem(p, item);
}

/// runShare with U of this thread's own: every thread transforms all the weights into its
/// Scratch::Conv (free on this path: no padded input is built) before its items.
void runShareWithOwnWeights(void *ctx, int64_t begin, int64_t end) {
  Plan own = *static_cast<const Plan *>(ctx);
  float *u = scratch(Scratch::Conv, static_cast<size_t>(own.points * own.uPlane));
  transformWeights(own.tile, own.a.weights, own.a.c, u, own.uPlane, 0, own.a.k);
  own.u = u;
  runShare(&own, begin, end);
}

struct SharedTransform {
  const Plan &plan;
  float *u;
};

void transformWeightsShare(void *ctx, int64_t begin, int64_t end) {
  const SharedTransform &t = *static_cast<const SharedTransform *>(ctx);
  const kiln_conv2d_args &a = t.plan.a;
  for (int64_t part = begin; part < end; ++part)
    transformWeights(t.plan.tile, a.weights, a.c, t.u, t.plan.uPlane, part * a.k / t.plan.threads,
                     (part + 1) * a.k / t.plan.threads);
}

void runItemRange(void *ctx, int64_t begin, int64_t end) {
  for (int64_t item = begin; item < end; ++item)
    runItem(*static_cast<const Plan *>(ctx), item);
}

// ---------------------------------------------------------------------------------------------
// Phase by phase: with fewer blocks than threads, every thread takes part in every block. The
// input transforms of all blocks, split by input channels, then the GEMMs, split by point xi
// (each thread reads only its planes of U and packs each V_xi once), then the output
// transforms and epilogues, split by output channels; V and M of every block are shared. So no
// step is repeated, at the price of two more waits for the slowest thread and of each thread
// reading V and M that another wrote. (Splitting each block's output channels over the threads
// instead repeated its input transform on every thread and packed each V_xi once per part:
// ResNet-50's 3x3 256-channel 14x14 layer at 2 threads ran at 1.3 times its 1-thread speed.)

struct Phased {
  const Plan &plan;
  float *shared; // V, then M, of each block, plan.blockFloats() apart

  float *v(int64_t block) const { return shared + block * plan.blockFloats(); }
  float *m(int64_t block) const { return v(block) + plan.points * plan.a.c * plan.maxTiles(); }
  int64_t channelUnits() const { return ceilDiv(plan.a.c, kPhasedChannels); }
  int64_t outputUnits() const { return ceilDiv(plan.a.k, kEpilogueRows); }
};

void phasedInput(void *ctx, int64_t begin, int64_t end) {
  const Phased &ph = *static_cast<const Phased *>(ctx);
  float *strip = itemScratch(static_cast<size_t>(ph.plan.stripFloats() + 32));
  for (int64_t unit = begin; unit < end; ++unit) {
    const int64_t block = unit / ph.channelUnits(), c0 = unit % ph.channelUnits() * kPhasedChannels;
    transformBlockInput(ph.plan, Block(ph.plan, block), c0, std::min(ph.plan.a.c, c0 + kPhasedChannels),
                        ph.v(block), strip);
  }
}

void phasedMultiply(void *ctx, int64_t begin, int64_t end) {
  const Phased &ph = *static_cast<const Phased *>(ctx);
  for (int64_t unit = begin; unit < end; ++unit) {
    const int64_t block = unit / ph.plan.points, xi = unit % ph.plan.points;
    multiplyBlock(ph.plan, Block(ph.plan, block), xi, xi + 1, 0, ph.plan.a.k, ph.v(block), ph.m(block));
  }
}

void phasedOutput(void *ctx, int64_t begin, int64_t end) {
  const Phased &ph = *static_cast<const Phased *>(ctx);
  for (int64_t unit = begin; unit < end; ++unit) {
    const int64_t block = unit / ph.outputUnits(), k0 = unit % ph.outputUnits() * kEpilogueRows;
    transformBlockOutput(ph.plan, Block(ph.plan, block), k0, std::min(ph.plan.a.k, k0 + kEpilogueRows), ph.m(block));
  }
}

void runPhased(const kiln_rt *rt, const Plan &plan) {
  // In the calling thread's scratch: the workers use it only until this call returns.
  Phased ph{plan, scratch(Scratch::WinogradShared, static_cast<size_t>(plan.blocks() * plan.blockFloats()))};
  parallelForBalanced(rt, plan.blocks() * ph.channelUnits(), 1, phasedInput, &ph);
  parallelForBalanced(rt, plan.blocks() * plan.points, 1, phasedMultiply, &ph);
  parallelForBalanced(rt, plan.blocks() * ph.outputUnits(), 1, phasedOutput, &ph);
}

/// All blocks: phase by phase, or as items claimed as the threads come free.
void runItems(const kiln_rt *rt, Plan &plan) {
  if (plan.phased)
    runPhased(rt, plan);
  else if (plan.threads > 1 && itemCount(plan) > 1)
    parallelForBalanced(rt, itemCount(plan), 1, runItemRange, &plan);
  else
    for (int64_t item = 0; item < itemCount(plan); ++item)
      runItem(plan, item);
}

} // namespace

} // namespace winograd

using namespace winograd;

void winogradConv(const kiln_rt *rt, const kiln_conv2d_args &a, int tile) {
  const int threads = threadsOf(rt);
  Plan plan = makePlan(a, threads, tile);
  if (winogradTileOfLayout(a.weights_layout) == tile) { // U transformed at load
    if (a.weights_layout == KILN_CONV_WEIGHTS_WINOGRAD_F2_BF16)
      plan.u16 = reinterpret_cast<const uint16_t *>(a.weights);
    else
      plan.u = a.weights;
    runItems(rt, plan);
    return;
  }
  if (threads > 1 && plan.blocks() > 1 && !plan.phased && plan.points * a.k * a.c <= kOwnWeightsMaxFloats) {
    // Every thread reads all of U. Shared, half of it would be read from the other core, which
    // costs more than transforming small weights twice when the cores are on different L3s.
    rt->parallel_for(rt, threads, 1, runShareWithOwnWeights, &plan);
    return;
  }
  // U is shared by all threads, so it lives in the calling thread's scratch (the padded
  // input, the other user of Scratch::Conv, is not built on this path).
  float *u = scratch(Scratch::Conv, static_cast<size_t>(plan.points * plan.uPlane));
  SharedTransform transform{plan, u};
  if (threads > 1 && a.k >= threads)
    rt->parallel_for(rt, threads, 1, transformWeightsShare, &transform);
  else
    transformWeights(tile, a.weights, a.c, u, plan.uPlane, 0, a.k);
  plan.u = u;
  runItems(rt, plan);
}

} // namespace kiln::runtime::kernels::detail
