#pragma once
// The blocked GEMM driver shared by gemm and conv2d: cache blocking around the micro-kernel
// (GemmMicroKernel.h), the fused epilogue, and the split of a batch of products over rt's
// threads. Internal to runtime/kernels/.
#include <cstdint>

#include "runtime/KernelAbi.h"
#include "runtime/kernels/GemmPack.h"

namespace kiln::runtime::kernels::detail {

/// One product C = op(A) * op(B), M x N x K, with A and B given as K-major sources
/// (S_a(k, i) = op(A)(i, k), S_b(k, j) = op(B)(k, j)) and C row-major at c (leading dimension
/// ldc). The epilogue sees tiles of C at rows shifted by rowOffset (a conv group's first
/// output channel) in output matrix `batch`.
struct Product {
  int64_t m = 0, n = 0, k = 0;
  const PanelSource *a = nullptr, *b = nullptr;
  float *c = nullptr;
  int64_t ldc = 0;
  kiln_epilogue_fn epilogue = nullptr;
  void *epilogueCtx = nullptr;
  int64_t batch = 0, rowOffset = 0;
  /// Compute C^T = B^T A^T (chooseSwap), invisible to the caller but for speed.
  bool swap = false;
  /// C holds an addend: the product is added to it (the first K block accumulates too).
  bool accumulate = false;
  /// When not null, all of B already packed by runProducts (never with swap): the K block
  /// that starts at row pc holds its panels from packedB + pc * N64, N64 being N rounded up
  /// to 64, laid out as PanelSource::packPanels writes them. The driver reads them instead of
  /// packing its own.
  const float *packedB = nullptr;
  /// Multiply in bf16 (KILN_PRECISION_BF16): both operands rounded, f32 sums (GemmBf16.h).
  bool bf16 = false;
  /// When not null (with bf16, never with swap): all of op(B) as pair panels, each 64 wide
  /// and K rounded up to even deep (KILN_GEMM_B_PAIR_PANELS_BF16, or packed whole for all row
  /// parts by runProducts), which the driver reads in place; `b` is then not read.
  const uint16_t *bf16Panels = nullptr;
  /// When not null (with bf16, never with swap): all of op(A) stored as bf16 row panels
  /// (packBf16Panels, M x K), read in place; `a` is then not read.
  const uint16_t *bf16A = nullptr;
  /// When not null: post ops applied to C before the epilogue sees it (PostOps.h), the bias
  /// indexed by C's row plus rowOffset when postPerRow (a convolution's output channel), by
  /// C's column otherwise (a linear layer's).
  const kiln_post_ops *post = nullptr;
  bool postPerRow = true;
};

/// Whether an M x N product asked for bf16 (KILN_PRECISION_BF16) computes in it. Each block of
/// B is rounded once for all rows, and each of A once per column block, which costs about as
/// much as multiplying the block by a few rows (columns) in f32: narrower products stay f32.
/// VGG16's 1 x 25088 x 4096 classifier took 36 ms in bf16 against 18.7 in f32.
constexpr int64_t kMinBf16Extent = 16;
inline bool bf16Pays(int64_t m, int64_t n) { return m >= kMinBf16Extent && n >= kMinBf16Extent; }

/// bf16 weights stored at load for the driver to read as A in place (Product::bf16A), M x K:
/// for each of the driver's K blocks in turn, each panel of kMaxRows rows, each k-pair of the
/// block, the panel's kMaxRows pair words side by side; zero past M and K. One row-major bf16
/// row per output channel had the micro-kernel read kMaxRows rows a K block at a time, short
/// runs that the hardware prefetcher never followed: weights streamed from memory (ResNet-50's
/// 7 x 7 layers, 2048 x 2048 1 x 1 at 2.5 GB/s) ran slower in bf16 than in f32. In panels the
/// row tiles of a K block are one stream.
int64_t bf16PanelElements(int64_t m, int64_t k);
/// Stores the M x K matrix a[i*lda + k] as bf16 row panels at dst (bf16PanelElements).
void packBf16Panels(const float *a, int64_t lda, int64_t m, int64_t k, uint16_t *dst);

/// Computes rows [row0, row1) x columns [col0, col1) of the product's C over the whole of K,
/// then calls the epilogue exactly once on every element of that region, tile by tile, each
/// tile right after its last K block.
void computeRegion(const Product &product, int64_t row0, int64_t row1, int64_t col0, int64_t col1);

/// Whether an M x N product with these operands is faster computed as C^T = B^T A^T: when the
/// 6 x 64 tiles would waste much of their width on a narrow N (49 pixels of a 7 x 7 conv) and
/// the swap does not cost more in packing (transposing a weight matrix) than it saves.
bool chooseSwap(int64_t m, int64_t n, const PanelSource &a, const PanelSource &b);

/// A batch of `count` products of one shape, M x N x K, and of one operand layout. run()
/// computes a region of product `index` (building its sources on the stack and calling
/// computeRegion), with `packedB` as Product::packedB (as Product::bf16Panels when
/// multipliesInBf16()).
class ProductSet {
public:
  ProductSet(int64_t count, int64_t m, int64_t n, int64_t k, bool swap)
      : count(count), m(m), n(n), k(k), swap(swap) {}
  virtual ~ProductSet() = default;
  virtual void run(int64_t index, int64_t row0, int64_t row1, int64_t col0, int64_t col1,
                   const float *packedB) const = 0;
  /// Whether these products' B is worth packing once for all threads when a single product is
  /// split along rows (packB then packs it): im2col panels, whose packing gathers (3x3/2
  /// 256->256 convolution of 28x28 pixels on 2 threads: 1.25 -> 1.21 ms). A dense B copies so
  /// fast that reading the other core's half of a shared copy cost more than packing one's own
  /// (1x1 2048->512 of 7x7 pixels: 0.48 -> 0.51 ms).
  virtual bool sharesPackedB() const { return false; }
  /// Multiply-adds below which runProducts runs the set on the calling thread, where waking
  /// the pool would cost more than it saves.
  virtual int64_t minParallelMacs() const;
  /// Whether packB works for these products (it must when sharesPackedB()).
  virtual bool canPackB() const { return sharesPackedB(); }
  /// Whether run() multiplies in bf16. A B that runProducts packs whole is then packed as
  /// bf16 pair panels (Product::bf16Panels' layout, in the float storage run() gets as
  /// packedB), rounded once: rounded from f32 panels by every part of a row split instead,
  /// it took a fifth of a 1x1 1024 -> 256 layer's time on 14 x 14 pixels at two threads.
  virtual bool multipliesInBf16() const { return false; }
  /// Packs rows [k0, k0 + kc) x columns [x0, x0 + cols) of product `index`'s B into panels
  /// (PanelSource::packPanels). Only called when canPackB().
  virtual void packB(int64_t index, float *dst, int64_t k0, int64_t kc, int64_t x0, int64_t cols) const {
    (void)index, (void)dst, (void)k0, (void)kc, (void)x0, (void)cols;
  }
  const int64_t count, m, n, k;
  /// Whether run() computes its products as C^T (the same for all of them).
  const bool swap;
};

/// Runs all products of the set, split evenly over rt's threads: one contiguous share per
/// thread of the (product, row block) or (product, column block) space, whichever divides
/// more evenly. A single product split along rows whose B is worth sharing (sharesPackedB)
/// has B packed once, each thread packing a part, before the threads compute; one whose B is
/// not (a dense B) has it packed whole by each thread for itself, once. Shares that cutting
/// finer repeats no work for (columns, and rows of a B packed whole) go in a few parts per
/// thread through parallel_for_balanced. Small batches run on the calling thread.
void runProducts(const kiln_rt *rt, const ProductSet &set);

/// The number of threads a kernel may use on rt (1 when rt has no pool).
int threadsOf(const kiln_rt *rt);

/// A number no earlier call got (never 0): what per-thread work done once per kernel call (a
/// B packed whole, a Winograd input transform) is keyed on, whichever of the call's parts a
/// thread runs.
uint64_t nextCallNumber();

/// fn(ctx, 0, items) split over rt's threads (parallel_for, grain 1; with `balanced`,
/// parallelForBalanced, for items of unequal cost) when there are two items or more and `work`
/// (in whatever unit the caller counts) reaches `minWork`; on the calling thread otherwise,
/// where waking the pool would cost more than it saves.
void parallelForIfWorth(const kiln_rt *rt, int64_t items, int64_t work, int64_t minWork, kiln_range_fn fn,
                        void *ctx, bool balanced = false);

/// rt's parallel_for_balanced, or its parallel_for when it has none.
void parallelForBalanced(const kiln_rt *rt, int64_t n, int64_t grain, kiln_range_fn fn, void *ctx);

} // namespace kiln::runtime::kernels::detail
