// kiln::runtime::kernels::gemm: the batched, transposable f32 GEMM behind kiln_rt::gemm.
// A batch is a set of products of one shape (GemmDriver.h) that the driver splits over the
// pool; each product is the blocked 6 x 64 GEMM, or a matrix-vector product when M or N is 1.
// A batch over one shared B whose A and C rows are contiguous across products is first folded
// into one tall product (foldBatchIntoRows).
#include <algorithm>
#include <cstring>
#include <vector>

#include "runtime/kernels/GemmBf16.h"
#include "runtime/kernels/GemmDriver.h"
#include "runtime/kernels/GemmMicroKernel.h" // kPanelWidth
#include "runtime/kernels/Gemv.h"
#include "runtime/kernels/Kernels.h"
#include "runtime/kernels/PostOps.h"

namespace kiln::runtime::kernels {

namespace {

using detail::DenseSource;
using detail::Product;
using detail::ProductSet;

// Product `index`'s operands as K-major sources: S_a(k, i) = op(A)(i, k), S_b(k, j) = op(B)(k, j).
DenseSource sourceA(const kiln_gemm_args &g, int64_t index) {
  const float *a = g.a + index * g.stride_a;
  return g.trans_a ? DenseSource(a, g.lda, 1) : DenseSource(a, 1, g.lda);
}
DenseSource sourceB(const kiln_gemm_args &g, int64_t index) {
  const float *b = g.b + index * g.stride_b;
  return g.trans_b ? DenseSource(b, 1, g.ldb) : DenseSource(b, g.ldb, 1);
}

/// Calls fn(S_b) with product `index`'s B: dense, or prepacked panels (KILN_GEMM_B_PANELS).
/// bf16 pair panels are read by the driver through Product::bf16Panels, never as a source.
template <typename Fn> auto withSourceB(const kiln_gemm_args &g, int64_t index, Fn &&fn) {
  if (g.b_layout == KILN_GEMM_B_PANELS)
    return fn(detail::PanelMajorSource(g.b + index * g.stride_b, g.k));
  if (g.b_layout == KILN_GEMM_B_PAIR_PANELS_BF16)
    return fn(detail::DenseSource(nullptr, 0, 0));
  return fn(sourceB(g, index));
}

class DenseProducts final : public ProductSet {
public:
  // Prepacked B panels serve C = A B only: C^T would need them as its A.
  explicit DenseProducts(const kiln_gemm_args &args)
      : ProductSet(args.batch, args.m, args.n, args.k,
                   args.b_layout == KILN_GEMM_B_PLAIN &&
                       detail::chooseSwap(args.m, args.n, sourceA(args, 0), sourceB(args, 0))),
        args_(args) {}

  void run(int64_t index, int64_t row0, int64_t row1, int64_t col0, int64_t col1,
           const float *packedB) const override {
    withSourceB(args_, index,
                [&](const detail::PanelSource &b) { runWith(index, b, row0, row1, col0, col1, packedB); });
  }

private:
  void runWith(int64_t index, const detail::PanelSource &b, int64_t row0, int64_t row1, int64_t col0,
               int64_t col1, const float *packedB) const {
    const kiln_gemm_args &g = args_;
    const DenseSource a = sourceA(g, index);
    Product product;
    product.m = g.m;
    product.n = g.n;
    product.k = g.k;
    product.a = &a;
    product.b = &b;
    product.c = g.c + index * g.stride_c;
    product.ldc = g.ldc;
    product.epilogue = g.epilogue;
    product.epilogueCtx = g.epilogue_ctx;
    product.batch = index;
    product.swap = swap;
    product.packedB = packedB;
    product.post = detail::hasPostOps(g.post) ? &g.post : nullptr;
    product.postPerRow = false;
    // Stored bf16 weights need no rounding per call: bf16 pays at any M.
    if (g.b_layout == KILN_GEMM_B_PAIR_PANELS_BF16)
      product.bf16Panels = reinterpret_cast<const uint16_t *>(g.b);
    product.bf16 = product.bf16Panels || (g.precision == KILN_PRECISION_BF16 && detail::bf16Pays(g.m, g.n));
    detail::computeRegion(product, row0, row1, col0, col1);
  }

  const kiln_gemm_args &args_;
};

/// M == 1 or N == 1: each region is a matrix-vector product over its outputs (the columns of
/// a 1 x N product, the rows of an M x 1 one), handed to the epilogue in chunks.
class VectorProducts final : public ProductSet {
public:
  explicit VectorProducts(const kiln_gemm_args &args)
      : ProductSet(args.batch, args.m, args.n, args.k, false), args_(args) {}

  /// Matrix-vector products stream their matrix, 4 bytes a multiply-add, from memory: a
  /// second thread reading half of it pays from a 256 KiB matrix on. (At the GEMMs' 2^18,
  /// MobileNetV3-Large's squeeze-and-excitation layers ran on one thread.)
  int64_t minParallelMacs() const override { return int64_t{1} << 16; }

  void run(int64_t index, int64_t row0, int64_t row1, int64_t col0, int64_t col1,
           const float *) const override {
    const kiln_gemm_args &g = args_;
    const float *a = g.a + index * g.stride_a;
    const float *b = g.b + index * g.stride_b;
    float *c = g.c + index * g.stride_c;
    const bool rowVector = g.m == 1;
    // The vector operand, and the matrix with its outputs' layout.
    const float *vector = rowVector ? a : b;
    const int64_t vectorStride = rowVector ? (g.trans_a ? g.lda : 1) : (g.trans_b ? 1 : g.ldb);
    const int64_t first = rowVector ? col0 : row0, last = rowVector ? col1 : row1;
    const float *matrix;
    int64_t ld;
    bool outputsContiguous;
    if (rowVector) { // outputs are columns j of op(B)
      ld = g.ldb;
      outputsContiguous = !g.trans_b;
      matrix = g.trans_b ? b + first * g.ldb : b + first;
    } else { // outputs are rows i of op(A)
      ld = g.lda;
      outputsContiguous = g.trans_a;
      matrix = g.trans_a ? a + first : a + first * g.lda;
    }
    if (vectorStride != 1 && g.k > 0) {
      float *gathered = detail::scratch(detail::Scratch::PackedA, static_cast<size_t>(g.k));
      for (int64_t k = 0; k < g.k; ++k)
        gathered[k] = vector[k * vectorStride];
      vector = gathered;
    }
    const int64_t outStride = rowVector ? 1 : g.ldc;
    constexpr int64_t kChunk = 512;
    float *staging = outStride == 1 ? nullptr : detail::scratch(detail::Scratch::PackedB, kChunk);
    for (int64_t o = first; o < last; o += kChunk) {
      const int64_t count = std::min(kChunk, last - o);
      const float *chunkMatrix = matrix + (o - first) * (outputsContiguous ? 1 : ld);
      float *out = c + o * outStride;
      detail::gemv(vector, chunkMatrix, ld, outputsContiguous, count, g.k, staging ? staging : out);
      if (staging)
        for (int64_t i = 0; i < count; ++i)
          out[i * outStride] = staging[i];
      if (g.epilogue) {
        if (rowVector)
          g.epilogue(g.epilogue_ctx, out, g.ldc, index, 0, o, 1, count);
        else
          g.epilogue(g.epilogue_ctx, out, g.ldc, index, o, 0, count, 1);
      }
    }
  }

private:
  const kiln_gemm_args &args_;
};

/// A batch that shares one B (stride_b 0) and whose A rows and C rows run on from product to
/// product is one tall product: batch x M rows. Folding it turns 128 matrix-vector products
/// over one weight (a [S, 1, D] x [D, N] layer of a sequence-first transformer) into one GEMM
/// that reads the weight once instead of 128 times. The epilogue still sees the caller's
/// (batch, row) coordinates: FoldedEpilogue cuts each tile at product boundaries.
struct FoldedEpilogue {
  kiln_epilogue_fn epilogue;
  void *ctx;
  int64_t m;

  static void call(void *vself, float *tile, int64_t ld, int64_t, int64_t row0, int64_t col0,
                   int64_t rows, int64_t cols) {
    const FoldedEpilogue &self = *static_cast<const FoldedEpilogue *>(vself);
    for (int64_t r = row0; r < row0 + rows;) {
      const int64_t batch = r / self.m, local = r % self.m;
      const int64_t count = std::min(self.m - local, row0 + rows - r);
      self.epilogue(self.ctx, tile + (r - row0) * ld, ld, batch, local, col0, count, cols);
      r += count;
    }
  }
};

bool foldBatchIntoRows(kiln_gemm_args &g, FoldedEpilogue &folded) {
  if (g.batch <= 1 || g.stride_b != 0 || g.trans_a || g.stride_c != g.m * g.ldc)
    return false;
  // Row i of product b must sit at row b*M + i of one matrix with a single leading dimension.
  int64_t lda = g.lda;
  if (g.m == 1)
    lda = g.stride_a;
  else if (g.stride_a != g.m * g.lda)
    return false;
  if (lda < g.k || lda <= 0)
    return false;
  if (g.epilogue) {
    folded = FoldedEpilogue{g.epilogue, g.epilogue_ctx, g.m};
    g.epilogue = FoldedEpilogue::call;
    g.epilogue_ctx = &folded;
  }
  g.lda = lda;
  g.m *= g.batch;
  g.batch = 1;
  g.stride_a = g.stride_c = 0;
  return true;
}

} // namespace

void gemm(const kiln_rt *rt, const kiln_gemm_args *args) {
  if (!args || args->m <= 0 || args->n <= 0 || args->batch <= 0)
    return;
  const bool pairPanels = args->b_layout == KILN_GEMM_B_PAIR_PANELS_BF16;
  const bool panels = args->b_layout == KILN_GEMM_B_PANELS || pairPanels;
  if ((args->b_layout != KILN_GEMM_B_PLAIN && !panels) || (panels && args->n % kGemmBPanelWidth != 0) ||
      (pairPanels && (args->precision != KILN_PRECISION_BF16 || (args->batch > 1 && args->stride_b != 0))))
    return; // the ABI has no error channel; codegen never emits these
  kiln_gemm_args g = *args;
  g.k = std::max<int64_t>(g.k, 0);
  FoldedEpilogue folded{};
  foldBatchIntoRows(g, folded);
  if (!panels && (g.m == 1 || g.n == 1)) {
    detail::PostOpsEpilogue post;
    detail::wrapPostOps(g.post, false, g.epilogue, g.epilogue_ctx, post);
    detail::runProducts(rt, VectorProducts(g));
  } else
    detail::runProducts(rt, DenseProducts(g));
}

static_assert(kGemmBPanelWidth == detail::kPanelWidth, "prepacked B panels are the driver's B panels");

void packGemmB(const float *src, int64_t k, int64_t n, int64_t strideK, int64_t strideN, float *dst) {
  // The driver's own packing of all K rows as one block: panel q at dst + q*64*K, 64 wide.
  DenseSource(src, strideK, strideN).packPanels(dst, 0, k, 0, n);
}

void packGemmBPairsBf16(const float *src, int64_t k, int64_t n, int64_t strideK, int64_t strideN, uint16_t *dst) {
  // Panel by panel: the driver's f32 panel of all K rows, then rounded into pairs.
  std::vector<float> panel(static_cast<size_t>(kGemmBPanelWidth * std::max<int64_t>(k, 1)));
  const int64_t pairRows = (k + 1) / 2 * 2;
  for (int64_t q = 0; q < n / kGemmBPanelWidth; ++q) {
    packGemmB(src + q * kGemmBPanelWidth * strideN, k, kGemmBPanelWidth, strideK, strideN, panel.data());
    detail::roundPanelToBf16Pairs(panel.data(), kGemmBPanelWidth, k, kGemmBPanelWidth, kGemmBPanelWidth,
                                  dst + q * kGemmBPanelWidth * pairRows);
  }
}

void packGemmBPairsBf16InPlace(float *matrix, int64_t k, int64_t n) {
  // Panel q's pairs (64 * ceil(k/2)*2 bf16) end at or before its own rows' end (64 * k floats)
  // and so before any later panel's rows: copied out first, each panel is written over them.
  const int64_t panelFloats = kGemmBPanelWidth * k, pairRows = (k + 1) / 2 * 2;
  std::vector<float> rows(static_cast<size_t>(panelFloats));
  for (int64_t q = 0; q < n / kGemmBPanelWidth; ++q) {
    std::memcpy(rows.data(), matrix + q * panelFloats, static_cast<size_t>(panelFloats) * sizeof(float));
    packGemmBPairsBf16(rows.data(), k, kGemmBPanelWidth, 1, k,
                       reinterpret_cast<uint16_t *>(matrix) + q * kGemmBPanelWidth * pairRows);
  }
}

void packGemmBInPlace(float *matrix, int64_t k, int64_t n) {
  const int64_t panelFloats = kGemmBPanelWidth * k;
  std::vector<float> rows(static_cast<size_t>(panelFloats));
  for (int64_t q = 0; q < n / kGemmBPanelWidth; ++q) {
    float *panel = matrix + q * panelFloats;
    std::memcpy(rows.data(), panel, static_cast<size_t>(panelFloats) * sizeof(float));
    packGemmB(rows.data(), k, kGemmBPanelWidth, 1, k, panel);
  }
}

} // namespace kiln::runtime::kernels
