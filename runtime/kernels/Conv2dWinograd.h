#pragma once
// The pieces the Winograd files share: the shape of a call (Plan, Block) and the steps one file
// runs for another. Conv2dWinogradPlan.cpp: the gate and the plan; Conv2dWinogradTransforms.cpp:
// the weight, input and output transforms; Conv2dWinogradSchedule.cpp: the GEMMs and how blocks
// are spread over the threads. Internal to runtime/kernels/.
//
// Winograd F(2x2, 3x3) and F(4x4, 3x3) for 3x3 stride-1 convolutions (Lavin & Gray, arXiv
// 1509.09308): each M x M output tile comes from an alpha x alpha input tile (alpha = M + 2)
// with alpha^2 multiplies per (input, output channel) instead of 9 M^2 (16 for 36, or 36 for
// 144), and the channel sums become alpha^2 GEMMs, one per point xi of the transformed tile:
//   U_xi (K x C) = (G g G^T)_xi          transformed weights, at load or per call
//   V_xi (C x T) = (B^T d B)_xi          transformed input tiles
//   M_xi (K x T) = U_xi * V_xi           the blocked driver, U read in place
//   y tile       = A^T M A               the output transform
// with, for F(2,3), B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1], G = [1 0 0; .5 .5 .5;
// .5 -.5 .5; 0 0 1], A^T = [1 1 1 0; 0 1 -1 -1], and F(4,3)'s matrices at Rules<4> (Conv2dWinogradTransforms.cpp). The
// two variants share everything but the 1-D rules (Rules<M>) and how 16 tiles' values are
// gathered from and scattered to image rows (tileRowElements, storeTileRow).
#include <algorithm>
#include <cstdint>

#include "runtime/KernelAbi.h"
#include "runtime/kernels/GemmDriver.h" // bf16PanelElements

namespace kiln::runtime::kernels::detail::winograd {

/// Points of F(M x M, 3x3): its (M + 2) x (M + 2) transformed tile.
constexpr int64_t pointsOf(int tile) { return (tile + 2) * (tile + 2); }
constexpr int64_t kGroup = 16;       // tiles (or channels) per vectorised transform step
constexpr int64_t kEpilogueRows = 16; // output channels per epilogue call

inline int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
inline int64_t roundUp(int64_t a, int64_t b) { return ceilDiv(a, b) * b; }

/// Floats between the planes of U: K*C rounded to a cache line, plus 4 lines so that the 16
/// planes the weight transform writes at once (1 MiB apart for 512 x 512) do not all map to
/// the same cache sets.
inline int64_t uPlaneOf(int64_t k, int64_t c) { return roundUp(k * c, 16) + 64; }
/// The same in bf16 (KILN_CONV_WEIGHTS_WINOGRAD_F*_BF16): K x C as the GEMM driver's row panels.
inline int64_t uPlaneBf16Of(int64_t k, int64_t c) { return roundUp(bf16PanelElements(k, c), 32) + 64; }

/// The shape of one call: tiles, blocks and buffer sizes. A block is either a range of tile
/// rows of one image or, for small images, several whole images.
struct Plan {
  const kiln_conv2d_args &a;
  int tile;                       // M of F(M x M, 3x3): 2 or 4
  int64_t points;                 // (M + 2)^2
  const float *u;                 // `points` planes of K x C, uPlane floats apart
  int64_t uPlane;
  int64_t tileRows, tileCols;     // TH, TW
  int64_t groupCols;              // TW rounded up to kGroup
  int64_t imagesPerBlock, blocksPerImage, maxBlockRows;
  bool phased;                    // all blocks phase by phase (runPhased), not block by block
  int64_t stripWidth, stripRows;  // per channel, for the largest block
  int threads;
  const uint16_t *u16 = nullptr;  // instead of u: U stored in bf16, planes uPlaneBf16Of apart
  int64_t outputParts = 1;        // work items per block, each a share of its output channels

  int64_t blocks() const { return ceilDiv(a.n, imagesPerBlock) * blocksPerImage; }
  int64_t firstRow(int64_t block) const { return block * tileRows / blocksPerImage; }
  int64_t maxTiles() const { return imagesPerBlock * maxBlockRows * tileCols; }
  /// Floats of V, then M, of the largest block.
  int64_t blockFloats() const { return points * (a.c + a.k) * maxTiles(); }
  int64_t stripFloats() const { return stripRows * stripWidth; }
};

/// The plan of a call with these arguments on `threads` threads by F(tile x tile, 3x3), its U
/// not yet set (Conv2dWinogradPlan.cpp).
Plan makePlan(const kiln_conv2d_args &a, int threads, int tile);

/// Block `block` of a plan: images [image0, image0 + images) and tile rows [tr0, tr1) of each.
/// Tile t of image image0 + i is column i*imageTiles + t of its V and M.
struct Block {
  int64_t image0, images, tr0, tr1, imageTiles, tiles;

  Block(const Plan &p, int64_t block) {
    image0 = block / p.blocksPerImage * p.imagesPerBlock;
    images = std::min(p.imagesPerBlock, p.a.n - image0);
    tr0 = p.firstRow(block % p.blocksPerImage);
    tr1 = p.firstRow(block % p.blocksPerImage + 1);
    imageTiles = (tr1 - tr0) * p.tileCols;
    tiles = images * imageTiles;
  }
  bool empty() const { return tr0 >= tr1 || images <= 0; }
};

/// Rows [k0, k1) of U (`points` planes, `plane` floats apart) from the plain weights
/// w[K][C][3][3] (Conv2dWinogradTransforms.cpp).
void transformWeights(int tile, const float *weights, int64_t channels, float *u, int64_t plane, int64_t k0,
                      int64_t k1);

/// V of input channels [c0, c1) of a block (V_xi is C x T, planes C*T apart), one channel at a
/// time through the strip, which stays in L1.
void transformBlockInput(const Plan &p, const Block &b, int64_t c0, int64_t c1, float *v, float *strip);

/// Output channels [k0, k1) of a block from M, and the epilogue on each chunk of kEpilogueRows
/// of them right after it is written, while it is in cache.
void transformBlockOutput(const Plan &p, const Block &b, int64_t k0, int64_t k1, const float *m);

} // namespace kiln::runtime::kernels::detail::winograd
