// kiln::runtime::kernels::gemm against a naive double-precision loop written here.
//
// Tolerance: a K-long f32 dot product accumulates about sqrt(K) roundings of relative size
// 2^-24 when the errors are random, so each element must satisfy
//   |c - ref| <= 2e-6 * sqrt(K) * sum_k |a_ik * b_kj| (+1e-30 for exact zeros),
// which stays below a relative 1e-4 up to K = 2500 and leaves a 30x margin over the expected
// error. With bf16 operands (KILN_PRECISION_BF16) the reference multiplies the operands
// rounded to bf16, whose products f32 holds exactly, so the same bound holds; against the
// unrounded operands the results are ~1e-3 off, so a product left in f32 fails it. The epilogue in every test adds a per-column bias, applies ReLU and counts its calls
// per element, which must be exactly one.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "runtime/kernels/GemmBf16.h"
#include "runtime/kernels/GemmDriver.h"
#include "runtime/kernels/GemmPack.h" // scratch
#include "runtime/kernels/Kernels.h"
#include "tests/runtime/KernelTestRuntime.h"

namespace {

using kiln::runtime::kernels::test::makeRuntime;

struct BiasReluEpilogue {
  const std::vector<float> *bias; // one per column
  std::vector<int> *calls;        // per element of every batch
  int64_t m, n;
  static void apply(void *ctx, float *tile, int64_t ld, int64_t batch, int64_t row0, int64_t col0,
                    int64_t rows, int64_t cols) {
    auto &self = *static_cast<BiasReluEpilogue *>(ctx);
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) {
        float &v = tile[i * ld + j];
        v = std::max(0.0f, v + (*self.bias)[col0 + j]);
        ++(*self.calls)[(batch * self.m + row0 + i) * self.n + col0 + j];
      }
  }
};

struct GemmCase {
  int64_t m, n, k, batch = 1;
  bool transA = false, transB = false;
  bool broadcastA = false, broadcastB = false;
  int64_t padA = 0, padB = 0, padC = 0; // extra leading-dimension elements
  int threads = 1;
  bool epilogue = true;
  bool packedB = false; // hand op(B) over prepacked (KILN_GEMM_B_PANELS, packGemmB)
  bool bf16 = false;    // KILN_PRECISION_BF16 (products narrower than 16 stay f32: bf16Pays)
};

void checkGemm(const GemmCase &tc, uint32_t seed = 1) {
  SCOPED_TRACE(testing::Message() << "m=" << tc.m << " n=" << tc.n << " k=" << tc.k << " batch=" << tc.batch
                                  << " transA=" << tc.transA << " transB=" << tc.transB << " threads=" << tc.threads
                                  << " bf16=" << tc.bf16);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  const int64_t aRows = tc.transA ? tc.k : tc.m, aCols = tc.transA ? tc.m : tc.k;
  const int64_t bRows = tc.transB ? tc.n : tc.k, bCols = tc.transB ? tc.k : tc.n;
  const int64_t lda = aCols + tc.padA, ldb = bCols + tc.padB, ldc = tc.n + tc.padC;
  const int64_t strideA = tc.broadcastA ? 0 : aRows * lda, strideB = tc.broadcastB ? 0 : bRows * ldb;
  const int64_t strideC = tc.m * ldc;
  std::vector<float> a(std::max<int64_t>(1, (tc.broadcastA ? 1 : tc.batch) * aRows * lda));
  std::vector<float> b(std::max<int64_t>(1, (tc.broadcastB ? 1 : tc.batch) * bRows * ldb));
  for (float &x : a)
    x = dist(rng);
  for (float &x : b)
    x = dist(rng);
  const float sentinel = 12345.0f; // C padding must survive
  std::vector<float> c(tc.batch * strideC, sentinel), bias(tc.n);
  for (float &x : bias)
    x = dist(rng);
  std::vector<int> calls(tc.batch * tc.m * tc.n, 0);
  BiasReluEpilogue epi{&bias, &calls, tc.m, tc.n};

  kiln_gemm_args args{};
  args.m = tc.m, args.n = tc.n, args.k = tc.k, args.batch = tc.batch;
  args.a = a.data(), args.lda = lda, args.stride_a = strideA, args.trans_a = tc.transA;
  args.b = b.data(), args.ldb = ldb, args.stride_b = strideB, args.trans_b = tc.transB;
  std::vector<float> packed;
  std::vector<uint16_t> pairPanels;
  if (tc.packedB && tc.bf16) { // one op(B) as bf16 pair panels (KILN_GEMM_B_PAIR_PANELS_BF16)
    pairPanels.resize(static_cast<size_t>((tc.k + 1) / 2 * 2 * tc.n));
    kiln::runtime::kernels::packGemmBPairsBf16(b.data(), tc.k, tc.n, tc.transB ? 1 : ldb, tc.transB ? ldb : 1,
                                               pairPanels.data());
    args.b = reinterpret_cast<const float *>(pairPanels.data()), args.stride_b = 0;
    args.b_layout = KILN_GEMM_B_PAIR_PANELS_BF16;
  } else if (tc.packedB) { // every product's op(B), packed; a broadcast B once
    const int64_t products = tc.broadcastB ? 1 : tc.batch;
    packed.resize(static_cast<size_t>(products * tc.k * tc.n));
    for (int64_t bi = 0; bi < products; ++bi)
      kiln::runtime::kernels::packGemmB(b.data() + bi * strideB, tc.k, tc.n, tc.transB ? 1 : ldb,
                                        tc.transB ? ldb : 1, packed.data() + bi * tc.k * tc.n);
    args.b = packed.data(), args.stride_b = tc.broadcastB ? 0 : tc.k * tc.n;
    args.b_layout = KILN_GEMM_B_PANELS;
  }
  args.c = c.data(), args.ldc = ldc, args.stride_c = strideC;
  args.precision = tc.bf16 ? KILN_PRECISION_BF16 : KILN_PRECISION_F32;
  if (tc.epilogue) {
    args.epilogue = BiasReluEpilogue::apply;
    args.epilogue_ctx = &epi;
  }
  kiln_rt rt = makeRuntime(tc.threads);
  kiln::runtime::kernels::gemm(&rt, &args);
  // What the kernel multiplies: the operands themselves, or rounded to bf16.
  // Stored bf16 panels are bf16 at any size.
  if (tc.bf16 && (kiln::runtime::kernels::detail::bf16Pays(tc.m, tc.n) || tc.packedB)) {
    for (float &x : a)
      x = kiln::runtime::kernels::detail::fromBf16(kiln::runtime::kernels::detail::toBf16(x));
    for (float &x : b)
      x = kiln::runtime::kernels::detail::fromBf16(kiln::runtime::kernels::detail::toBf16(x));
  }

  int64_t failures = 0;
  for (int64_t bi = 0; bi < tc.batch; ++bi)
    for (int64_t i = 0; i < tc.m; ++i)
      for (int64_t j = 0; j < tc.n; ++j) {
        double sum = 0, magnitude = 0;
        for (int64_t p = 0; p < tc.k; ++p) {
          const double av = tc.transA ? a[bi * strideA + p * lda + i] : a[bi * strideA + i * lda + p];
          const double bv = tc.transB ? b[bi * strideB + j * ldb + p] : b[bi * strideB + p * ldb + j];
          sum += av * bv;
          magnitude += std::fabs(av * bv);
        }
        double expected = sum;
        if (tc.epilogue)
          expected = std::max(0.0, sum + bias[j]);
        const float got = c[bi * strideC + i * ldc + j];
        const double tolerance = 2e-6 * std::sqrt(static_cast<double>(tc.k)) * (magnitude + std::fabs(bias[j])) + 1e-30;
        if (!(std::fabs(got - expected) <= tolerance) && failures++ < 5)
          ADD_FAILURE() << "C[" << bi << "][" << i << "][" << j << "] = " << got << ", expected " << expected;
        const int expectedCalls = tc.epilogue ? 1 : 0;
        if (calls[(bi * tc.m + i) * tc.n + j] != expectedCalls && failures++ < 5)
          ADD_FAILURE() << "epilogue ran " << calls[(bi * tc.m + i) * tc.n + j] << " times on C[" << bi << "][" << i
                        << "][" << j << "]";
        for (int64_t pad = tc.n; pad < ldc && j == 0; ++pad)
          if (c[bi * strideC + i * ldc + pad] != sentinel && failures++ < 5)
            ADD_FAILURE() << "wrote past column n in row " << i;
      }
  EXPECT_EQ(failures, 0);
}

TEST(GemmKernel, OneByOneByOne) { checkGemm({1, 1, 1}); }

TEST(GemmKernel, RandomSmallShapesAllTransposes) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int64_t> size(1, 70), pad(0, 5);
  for (int trial = 0; trial < 60; ++trial) {
    GemmCase tc{size(rng), size(rng), size(rng)};
    tc.transA = trial & 1;
    tc.transB = (trial >> 1) & 1;
    tc.padA = pad(rng), tc.padB = pad(rng), tc.padC = pad(rng);
    tc.threads = trial % 3 == 0 ? 2 : 1;
    checkGemm(tc, static_cast<uint32_t>(trial));
  }
}

TEST(GemmKernel, EdgeTilesAroundSixBySixtyFour) {
  for (int64_t m : {5, 6, 7, 12, 13})
    for (int64_t n : {15, 16, 17, 63, 64, 65, 129})
      checkGemm({m, n, 9});
}

TEST(GemmKernel, TrailingColumnsRunAsDotProducts) {
  // N = 16q + 1..4 with A read in place: the last vector's columns go through columnDotKernel.
  // 7x7 outputs (49), a panel and a half (113), a second column block (305), a second outer
  // block behind 200 rows (2097); several K blocks (accumulating) and a K that is not a
  // multiple of 16; row tiles of 1-6 rows; split over two threads by rows and by columns.
  checkGemm({13, 49, 1100});
  checkGemm({7, 113, 37});
  checkGemm({20, 305, 70, 1, false, false, false, false, 0, 0, 0, 2});
  checkGemm({200, 2097, 21, 1, false, true});
  checkGemm({131, 49, 600, 1, false, false, false, false, 3, 1, 2, 2});
  // 2-4 trailing columns: with vectors before them in their panel (50, 100), alone in it (196 =
  // 3*64 + 4, 67), and as the whole product (3).
  for (int64_t n : {50, 100, 196, 67, 3})
    checkGemm({11, n, 530});
  checkGemm({64, 196, 300, 1, false, false, false, false, 0, 0, 0, 2});
}

TEST(GemmKernel, PrepackedBIsReadInPlace) {
  // op(B) handed over as panels: one panel and several, several K blocks, M from 1 (no
  // matrix-vector path for panels) to tall, a batch over a shared B, and 2 and 3 threads whose
  // column shares may start inside a panel (then the panels are copied, not read in place).
  auto packed = [](GemmCase tc) {
    tc.packedB = true;
    return tc;
  };
  checkGemm(packed({13, 64, 40}));
  checkGemm(packed({128, 192, 1100}));
  checkGemm(packed({1, 128, 70}));
  checkGemm(packed({7, 256, 33, 1, false, true}));
  checkGemm(packed({20, 320, 50, 1, false, false, false, false, 0, 0, 0, 2}));
  checkGemm(packed({30, 448, 64, 1, false, false, false, false, 0, 0, 0, 3}));
  checkGemm(packed({9, 128, 30, 3, false, false, false, true}));
  checkGemm(packed({200, 64, 90, 1, true, false, false, false, 1, 0, 2, 2}));
}

TEST(GemmKernel, PrepackedBAcrossRowAndColumnBlocks) {
  // The shapes where the driver prefetches the next prepacked slice from each branch of its
  // loop order: one row block taller than 192 (197 tokens x K blocks of 368: the A block
  // fits the L2 budget) over three 256-column blocks and three K blocks; row blocks of 192
  // (K blocks of 300 make 500 rows too many for one) over two 2048-column outer blocks; and
  // both on 2 threads.
  auto packed = [](GemmCase tc) {
    tc.packedB = true;
    return tc;
  };
  checkGemm(packed({197, 640, 1100}));
  checkGemm(packed({500, 2176, 600}));
  checkGemm(packed({197, 640, 1100, 1, false, false, false, false, 0, 0, 0, 2}));
  checkGemm(packed({263, 192, 300, 1, false, true}));
}

TEST(GemmKernel, PackingInPlaceEqualsPackingIntoACopy) {
  // An N x K matrix (strideK 1, strideN K) packed over itself, for one panel and several, K
  // from 1 to more than a cache line of floats: the same floats as packGemmB writes.
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (auto [k, n] : std::vector<std::pair<int64_t, int64_t>>{{1, 64}, {3, 64}, {37, 192}, {300, 128}}) {
    std::vector<float> matrix(static_cast<size_t>(k * n)), copy(matrix.size());
    for (float &x : matrix)
      x = dist(rng);
    kiln::runtime::kernels::packGemmB(matrix.data(), k, n, 1, k, copy.data());
    kiln::runtime::kernels::packGemmBInPlace(matrix.data(), k, n);
    EXPECT_EQ(matrix, copy) << "k=" << k << " n=" << n;
  }
}

TEST(GemmKernel, Bf16PairPanelsInPlaceEqualACopy) {
  // Over the matrix's own storage (its first half), odd K and even, one panel and several.
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (auto [k, n] : std::vector<std::pair<int64_t, int64_t>>{{1, 64}, {3, 128}, {37, 192}, {300, 128}}) {
    std::vector<float> matrix(static_cast<size_t>(k * n));
    for (float &x : matrix)
      x = dist(rng);
    std::vector<uint16_t> copy(static_cast<size_t>((k + 1) / 2 * 2 * n));
    kiln::runtime::kernels::packGemmBPairsBf16(matrix.data(), k, n, 1, k, copy.data());
    kiln::runtime::kernels::packGemmBPairsBf16InPlace(matrix.data(), k, n);
    EXPECT_EQ(std::memcmp(matrix.data(), copy.data(), copy.size() * sizeof(uint16_t)), 0) << "k=" << k << " n=" << n;
  }
}

TEST(GemmKernel, LargeKSpansSeveralKBlocks) {
  checkGemm({7, 33, 3000});
  checkGemm({20, 70, 1100, 1, true, true});
}

TEST(GemmKernel, WideNSpansSeveralColumnBlocks) {
  checkGemm({13, 2100, 70});
  checkGemm({9, 2100, 40, 1, false, true, false, false, 0, 3, 1, 2});
}

TEST(GemmKernel, TallAPackedInRowBlocks) { checkGemm({500, 70, 30, 1, true, false}); }

TEST(GemmKernel, NarrowNComputedTransposed) {
  using kiln::runtime::kernels::detail::chooseSwap;
  using kiln::runtime::kernels::detail::DenseSource;
  std::vector<float> a(96 * 80), b(80 * 49);
  // op(A) = A^T packs as cheaply as B^T, op(B) = B^T reads in place: computed as C^T.
  ASSERT_TRUE(chooseSwap(96, 49, DenseSource(a.data(), 96, 1), DenseSource(b.data(), 1, 80)));
  checkGemm({96, 49, 80, 1, true, true});
  checkGemm({96, 49, 80, 2, true, true, false, false, 1, 2, 3, 2});
  checkGemm({200, 10, 50, 1, true, true});
  // A row-major A would need a transposing pack as B^T's panels: computed as C.
  EXPECT_FALSE(chooseSwap(96, 49, DenseSource(a.data(), 1, 80), DenseSource(b.data(), 49, 1)));
  checkGemm({96, 49, 80});
}

TEST(GemmKernel, VectorShapes) {
  for (bool transA : {false, true})
    for (bool transB : {false, true}) {
      checkGemm({1, 300, 77, 1, transA, transB, false, false, 2, 3, 0});
      checkGemm({300, 1, 77, 1, transA, transB, false, false, 2, 3, 4});
      checkGemm({1, 1, 1000, 1, transA, transB});
    }
  checkGemm({1, 1100, 40, 3, false, true, false, true, 0, 0, 0, 2});
}

TEST(GemmKernel, BatchWithBroadcastOperands) {
  checkGemm({17, 23, 19, 4, false, false, true, false});
  checkGemm({17, 23, 19, 4, true, true, false, true});
  checkGemm({40, 70, 30, 3, false, true, true, false, 1, 1, 1, 2});
}

TEST(GemmKernel, ZeroKGivesZerosAndRunsTheEpilogue) {
  checkGemm({5, 70, 0});
  checkGemm({1, 9, 0});
}

TEST(GemmKernel, NoEpilogue) {
  GemmCase tc{30, 40, 50};
  tc.epilogue = false;
  checkGemm(tc);
}

TEST(GemmKernel, ThreadedSplitsCoverEveryElementOnce) {
  // Rows split (M >= N), columns split, a batch split, three threads with uneven shares.
  checkGemm({130, 64, 40, 1, false, false, false, false, 0, 0, 0, 2});
  checkGemm({20, 300, 64, 1, false, false, false, false, 0, 0, 0, 2});
  checkGemm({31, 45, 64, 5, true, false, false, false, 0, 0, 0, 2});
  checkGemm({49, 100, 120, 2, false, true, false, false, 0, 0, 0, 3});
}

TEST(GemmKernel, EmptyProductsTouchNothing) {
  std::vector<float> c(4, 7.0f);
  kiln_gemm_args args{};
  args.m = 0, args.n = 2, args.k = 3, args.batch = 1;
  args.c = c.data();
  kiln_rt rt = makeRuntime(1);
  kiln::runtime::kernels::gemm(&rt, &args);
  args.m = 2, args.n = 2, args.batch = 0;
  kiln::runtime::kernels::gemm(&rt, &args);
  kiln::runtime::kernels::gemm(&rt, nullptr);
  EXPECT_EQ(c, std::vector<float>(4, 7.0f));
}

} // namespace

namespace {

TEST(GemmKernel, LargeScratchIsHugePageAligned) {
  // Scratch of 2 MiB and more comes from allocateBlock: 2 MiB aligned (and advised as huge
  // pages, which AllocationTest checks); small scratch is 64-byte aligned.
  using kiln::runtime::kernels::detail::Scratch;
  using kiln::runtime::kernels::detail::scratch;
  const auto address = [](const float *p) { return reinterpret_cast<uintptr_t>(p); };
  EXPECT_EQ(address(scratch(Scratch::WinogradItem, 100)) % 64, 0u);
  const float *large = scratch(Scratch::Conv, size_t{3} << 20);
  EXPECT_EQ(address(large) % (uintptr_t{2} << 20), 0u);
}

} // namespace

TEST(GemmKernel, Bf16ProductsOfRoundedOperands) {
  auto bf16 = [](GemmCase tc) {
    tc.bf16 = true;
    return tc;
  };
  // Every tile shape at once, odd K (a zero pair fills the last), several K blocks and column
  // blocks, transposes, padding, a narrow N computed as C^T, a batch over a broadcast B,
  // prepacked panels, threads, and no epilogue.
  checkGemm(bf16({1 + 6 * 3, 1 + 64 * 2 + 16, 1}));
  checkGemm(bf16({13, 70, 31}));
  checkGemm(bf16({17, 33, 1201}));
  checkGemm(bf16({13, 2100, 70, 1, false, true, false, false, 0, 3, 1, 2}));
  checkGemm(bf16({96, 49, 80, 2, true, true, false, false, 1, 2, 3, 2}));
  checkGemm(bf16({17, 23, 19, 4, true, true, false, true}));
  checkGemm(bf16({500, 70, 30, 1, true, false}));
  GemmCase packed = bf16({30, 448, 65, 1, false, false, false, false, 0, 0, 0, 3});
  packed.packedB = true;
  checkGemm(packed);
  GemmCase plain = bf16({30, 40, 50});
  plain.epilogue = false;
  checkGemm(plain);
  // Products narrower than 16 stay f32 (the reference then uses the operands as they are).
  checkGemm(bf16({1, 300, 77}));
  checkGemm(bf16({300, 1, 77, 1, true, true}));
  checkGemm(bf16({15, 300, 77}));
  GemmCase narrow = bf16({3, 128, 70});
  narrow.packedB = false;
  checkGemm(narrow);
}

TEST(GemmKernel, Bf16PairPanelsAreReadInPlace) {
  // op(B) stored as bf16 pair panels: bf16 whatever M (one row included), odd K (a zero pair
  // ends each panel), several K blocks (which then start at even rows), several panels, and
  // threads whose column shares start inside a panel (at 16 or 48 columns).
  auto stored = [](GemmCase tc) {
    tc.bf16 = tc.packedB = true;
    return tc;
  };
  checkGemm(stored({1, 128, 77}));
  checkGemm(stored({13, 64, 41}));
  checkGemm(stored({128, 192, 1101}));
  checkGemm(stored({7, 256, 33, 1, false, true}));
  checkGemm(stored({20, 320, 50, 1, false, false, false, false, 0, 0, 0, 2}));
  checkGemm(stored({30, 448, 64, 1, false, false, false, false, 0, 0, 0, 3}));
  checkGemm(stored({2, 192, 600, 1, false, false, false, false, 0, 0, 0, 3}));
  checkGemm(stored({9, 128, 30, 3, false, false, false, true}));
  checkGemm(stored({200, 64, 90, 1, true, false, false, false, 1, 0, 2, 2}));
}
