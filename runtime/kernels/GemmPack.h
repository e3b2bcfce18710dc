#pragma once
// Operands of the blocked GEMM driver, and the packing that copies them into the order the
// micro-kernel reads. Internal to runtime/kernels/.
//
// Both operands are seen as "K-major" matrices S(k, x) with K rows: for A, S(k, i) = op(A)(i, k);
// for B, S(k, j) = op(B)(k, j). Packing a block [k0, k0+kc) x [x0, x0+cols) writes, for each k,
// `width` contiguous floats (cols of data, then zeros): the B panel and the packed A micro-panel
// are the same format with widths 64 and R. Convolution plugs in its own source (im2col done
// panel by panel while packing) so that no full im2col matrix is ever materialised.
#include <cstddef>
#include <cstdint>

namespace kiln::runtime::kernels::detail {

class PanelSource {
public:
  virtual ~PanelSource() = default;
  /// dst[kk*width + xx] = S(k0+kk, x0+xx) for kk < kc, xx < cols; zero for cols <= xx < width.
  virtual void pack(float *dst, int64_t k0, int64_t kc, int64_t x0, int64_t cols,
                    int64_t width) const = 0;
  /// Packs columns [x0, x0+cols) as consecutive B panels: panel q (columns x0 + 64q ..) at
  /// dst + q*64*kc, each `pack`ed with its width rounded up to 16. Sources whose rows are
  /// contiguous override it to read row by row across all panels, which streams memory far
  /// better than 64 floats of each of kc rows in turn.
  virtual void packPanels(float *dst, int64_t k0, int64_t kc, int64_t x0, int64_t cols) const;
  /// Rough cycles per float packed into panels `width` wide, for choosing between computing
  /// C and C^T (measured on this machine; only ratios matter).
  virtual double packCost(int64_t width) const = 0;
  /// When column x of S is contiguous in k in memory (S(k, x) = base[x*stride + k]), returns
  /// base and sets stride, so the micro-kernel can read A without packing; else nullptr.
  virtual const float *inPlace(int64_t &stride) const {
    (void)stride;
    return nullptr;
  }
  /// When the source already holds B panels: row k0 of the 64-wide panel that starts at column
  /// x0, whose rows are 64 floats apart, with `panelStride` floats from one panel to the next.
  /// The driver then reads them in place instead of packing. Else nullptr.
  virtual const float *panelsInPlace(int64_t k0, int64_t x0, int64_t &panelStride) const {
    (void)k0, (void)x0, (void)panelStride;
    return nullptr;
  }
  /// When row k of S is contiguous in x (S(k, x) = base[k*ld + x]): the address of S(k0, x0),
  /// and ld, so that the micro-kernel can read B's rows where they lie. Else nullptr.
  virtual const float *rowsInPlace(int64_t k0, int64_t x0, int64_t &ld) const {
    (void)k0, (void)x0, (void)ld;
    return nullptr;
  }
};

/// A dense strided matrix: S(k, x) = base[k*strideK + x*strideX], where strideK == 1 or
/// strideX == 1 (every GEMM operand is row-major, transposed or not).
class DenseSource final : public PanelSource {
public:
  DenseSource(const float *base, int64_t strideK, int64_t strideX)
      : base_(base), strideK_(strideK), strideX_(strideX) {}
  void pack(float *dst, int64_t k0, int64_t kc, int64_t x0, int64_t cols,
            int64_t width) const override;
  void packPanels(float *dst, int64_t k0, int64_t kc, int64_t x0, int64_t cols) const override;
  double packCost(int64_t width) const override;
  const float *inPlace(int64_t &stride) const override;
  const float *rowsInPlace(int64_t k0, int64_t x0, int64_t &ld) const override;

private:
  const float *base_;
  int64_t strideK_, strideX_;
};

/// A matrix already laid out as the driver's B panels, each K rows of 64 columns:
/// S(k, x) = base[(x / 64)*64*K + k*64 + x % 64], for a multiple of 64 columns. That is how
/// the runtime stores, at load, a matmul weight that one kernel alone reads (KILN_GEMM_B_PANELS,
/// packGemmB), so that no call packs it again.
class PanelMajorSource final : public PanelSource {
public:
  PanelMajorSource(const float *base, int64_t depth) : base_(base), depth_(depth) {}
  void pack(float *dst, int64_t k0, int64_t kc, int64_t x0, int64_t cols,
            int64_t width) const override;
  double packCost(int64_t width) const override;
  const float *panelsInPlace(int64_t k0, int64_t x0, int64_t &panelStride) const override;

private:
  const float *base_;
  int64_t depth_;
};

/// Width of B panel q of a block of `cols` columns: 64, or the rest rounded up to 16.
int64_t panelWidth(int64_t q, int64_t cols);

/// dst[k*width + x] = src[k*ld + x] for x < cols, zero up to width (rows contiguous in x).
void packRows(float *dst, const float *src, int64_t ld, int64_t kc, int64_t cols, int64_t width);
/// dst[k*ldDst + x] = src[x*ld + k] for k < kc and x < cols, zero for cols <= x < width (a
/// transposing copy, 16 x 16 blocks through registers).
void transposeCopy(float *dst, int64_t ldDst, const float *src, int64_t ld, int64_t kc, int64_t cols,
                   int64_t width);
/// dst[k*width + x] = src[x*ld + k] for x < cols, zero up to width: a packed panel's rows.
inline void packColumns(float *dst, const float *src, int64_t ld, int64_t kc, int64_t cols, int64_t width) {
  transposeCopy(dst, width, src, ld, kc, cols, width);
}

/// Per-thread scratch that grows and is never freed, so that packing allocates nothing after
/// a thread's first call of a given size. Each slot comes from allocateBlock (core/Allocation.h):
/// 64-byte aligned, and from 2 MiB on huge pages. The weight gradient's channels-last copies
/// (25 MB for a ResNet stem at batch 8) took a TLB miss every 4 KiB otherwise: that kernel ran
/// 24 ms on 4 KiB pages against 15.6 ms on huge ones.
// SharedB: the calling thread's B packed for all threads (runProducts); Conv: a convolution's
// padded input, whole (padInput) or a few planes at a time (paddedPlanes), or Winograd's U
// transformed per call; WinogradShared: its V
// and M of Winograd blocks that all threads work on; Depthwise: one plane's padded phases
// (Conv2dDepthwise.cpp); Recurrence: a recurrence's state for all threads, and its weights
// when they come unpacked (Recurrence.cpp); SparseTaps: a sparse-tap convolution's tap-major
// weights, gathered pixels and product (Conv2dSparseTaps.cpp); Bf16A, Bf16B: a block of A and
// of B rounded to bf16 (GemmBf16.h); QConvFloats: the centred input and weights of an int8
// convolution computed in f32 (QConv2d.cpp); PoolBlock: a pool's channel block and outputs
// (Pool2dBlocks.cpp). PoolBlock is last.
enum class Scratch {
  PackedA, PackedB, SharedB, Conv, WinogradShared, Depthwise, Recurrence, SparseTaps, Bf16A, Bf16B, QConvFloats,
  WinogradItem, PoolBlock
};
constexpr int kScratchSlots = static_cast<int>(Scratch::PoolBlock) + 1; // the last slot's + 1
float *scratch(Scratch slot, size_t floats);

} // namespace kiln::runtime::kernels::detail
