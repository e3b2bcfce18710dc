// kiln::runtime::kernels::qgemm against int64 sums written here: the int32 sums are exact and
// the dequantization is the same two float operations, so every element must be equal, bit for
// bit. The epilogue counts its calls per element (exactly one each) and adds a column bias.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "runtime/kernels/Kernels.h"
#include "tests/runtime/KernelTestRuntime.h"
#include "tests/runtime/QuantizedOutputReference.h"

namespace {

using kiln::runtime::kernels::test::addendAt;
using kiln::runtime::kernels::test::addsResidual;
using kiln::runtime::kernels::test::clipped;
using kiln::runtime::kernels::test::keepsF32;
using kiln::runtime::kernels::test::requantises;
using kiln::runtime::kernels::test::makeRuntime;
using kiln::runtime::kernels::test::Output;
using kiln::runtime::kernels::test::OutputBuffers;
using kiln::runtime::kernels::test::requantised;

struct QCase {
  int64_t m, n, k;
  bool aSigned = false, perColumn = true;
  int threads = 1;
  int64_t padA = 0, padC = 0;
  bool plainB = false;
  bool tileInScratch = false;
  Output output = Output::Epilogue;
};

struct CountingBias {
  std::vector<int> *calls;
  int64_t n;
  std::vector<float> *seen; // what the epilogue saw at each element, after its bias
  static float bias(int64_t col) { return 0.5f * static_cast<float>(col % 7) - 1.0f; }
  static void apply(void *ctx, float *tile, int64_t ld, int64_t, int64_t row0, int64_t col0, int64_t rows,
                    int64_t cols) {
    auto &self = *static_cast<CountingBias *>(ctx);
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) {
        tile[i * ld + j] += bias(col0 + j);
        ++(*self.calls)[(row0 + i) * self.n + col0 + j];
        (*self.seen)[(row0 + i) * self.n + col0 + j] = tile[i * ld + j];
      }
  }
};

void checkQGemm(const QCase &tc, uint32_t seed = 1) {
  SCOPED_TRACE(testing::Message() << "m=" << tc.m << " n=" << tc.n << " k=" << tc.k << " signed=" << tc.aSigned
                                  << " perColumn=" << tc.perColumn << " threads=" << tc.threads);
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> byte(0, 255), weight(-127, 127), zeros(0, 255);
  std::uniform_real_distribution<float> scale(1e-3f, 2e-2f);
  const int64_t lda = tc.k + tc.padA, ldc = tc.n + tc.padC;
  std::vector<uint8_t> a(static_cast<size_t>(tc.m * lda));
  for (uint8_t &x : a)
    x = static_cast<uint8_t>(byte(rng));
  std::vector<int8_t> b(static_cast<size_t>(tc.k * tc.n));
  for (int8_t &x : b)
    x = static_cast<int8_t>(weight(rng));
  std::vector<float> scales(static_cast<size_t>(tc.perColumn ? tc.n : 1));
  for (float &x : scales)
    x = scale(rng);
  const int32_t zero = tc.aSigned ? zeros(rng) - 128 : zeros(rng);
  const float aScale = scale(rng);
  std::vector<int8_t> packed(static_cast<size_t>(kiln::runtime::kernels::qgemmPackedBytes(tc.k, tc.n)));
  kiln::runtime::kernels::packQGemmB(b.data(), tc.k, tc.n, tc.n, 1, packed.data());
  const float sentinel = 777.0f;
  std::vector<float> c(static_cast<size_t>(tc.m * ldc), sentinel);
  std::vector<int> calls(static_cast<size_t>(tc.m * tc.n), 0);
  std::vector<float> seen(static_cast<size_t>(tc.m * tc.n), 0.0f);
  CountingBias epilogue{&calls, tc.n, &seen};

  kiln_qgemm_args args{};
  args.m = tc.m, args.n = tc.n, args.k = tc.k;
  args.a = a.data(), args.lda = lda, args.a_signed = tc.aSigned, args.a_zero = zero, args.a_scale = aScale;
  args.b = packed.data(), args.b_packed = 1, args.b_scales = scales.data(), args.b_per_column = tc.perColumn;
  if (tc.plainB) // row-major: qgemm packs it
    args.b = b.data(), args.b_packed = 0, args.ldb = tc.n;
  args.c = c.data(), args.ldc = ldc;
  args.epilogue = CountingBias::apply, args.epilogue_ctx = &epilogue;
  args.tile_in_scratch = tc.tileInScratch;
  const bool quantized = requantises(tc.output);
  OutputBuffers buffers(args, tc.output, tc.n, c.size(), CountingBias::bias);
  const std::vector<uint8_t> &q = buffers.q;
  kiln_rt rt = makeRuntime(tc.threads);
  kiln::runtime::kernels::qgemm(&rt, &args);
  if (tc.output != Output::Epilogue && keepsF32(tc.output)) // what the epilogue would have seen, and counted
    for (int64_t i = 0; i < tc.m; ++i)
      for (int64_t j = 0; j < tc.n; ++j)
        seen[i * tc.n + j] = c[i * ldc + j], calls[i * tc.n + j] = 1;

  int64_t failures = 0;
  for (int64_t i = 0; i < tc.m; ++i) {
    for (int64_t j = 0; j < tc.n; ++j) {
      int64_t sum = 0;
      for (int64_t p = 0; p < tc.k; ++p) {
        const int64_t value = tc.aSigned ? int64_t{static_cast<int8_t>(a[i * lda + p])} : int64_t{a[i * lda + p]};
        sum += (value - zero) * b[p * tc.n + j];
      }
      float want =
          static_cast<float>(static_cast<int32_t>(sum)) * (aScale * scales[tc.perColumn ? j : 0]) + CountingBias::bias(j);
      if (addsResidual(tc.output))
        want += addendAt(i * ldc + j, tc.output);
      if (tc.output != Output::Epilogue)
        want = clipped(want);
      if (quantized) { // the bytes, at C's layout, and f32 only when kept; no epilogue runs
        const uint8_t byte = requantised(want, tc.output);
        if (q[i * ldc + j] != byte && failures++ < 5)
          ADD_FAILURE() << "q[" << i << "][" << j << "] = " << int{q[i * ldc + j]} << ", expected " << int{byte};
        if (!keepsF32(tc.output)) {
          if (calls[i * tc.n + j] != 0 && failures++ < 5)
            ADD_FAILURE() << "an epilogue ran on C[" << i << "][" << j << "]";
          continue;
        }
      }
      const float got = seen[i * tc.n + j];
      const float inC = tc.tileInScratch ? sentinel : want; // a tile kept in scratch never reaches C
      if (std::memcmp(&c[i * ldc + j], &inC, sizeof inC) != 0 && failures++ < 5)
        ADD_FAILURE() << "C[" << i << "][" << j << "] holds " << c[i * ldc + j] << ", expected " << inC;
      if (std::memcmp(&got, &want, sizeof got) != 0 && failures++ < 5)
        ADD_FAILURE() << "C[" << i << "][" << j << "] = " << got << ", expected " << want;
      if (calls[i * tc.n + j] != 1 && failures++ < 5)
        ADD_FAILURE() << "epilogue ran " << calls[i * tc.n + j] << " times on C[" << i << "][" << j << "]";
    }
    for (int64_t j = tc.n; j < ldc; ++j)
      if ((c[i * ldc + j] != sentinel || q[i * ldc + j] != 0xA5) && failures++ < 5)
        ADD_FAILURE() << "wrote past column n in row " << i;
  }
  EXPECT_EQ(failures, 0);
}

TEST(QGemmKernel, EveryTileShape) {
  // 1-6 rows by 1-4 vectors and a partial last vector, K not a multiple of 4.
  checkQGemm({1 + 6 * 3, 1 + 64 * 2 + 16, 1});
  checkQGemm({13, 70, 31});
  checkQGemm({5, 3, 7});
}

TEST(QGemmKernel, SignedActivationsAndOneScale) {
  checkQGemm({17, 96, 45, true});
  QCase one{23, 64, 64};
  one.perColumn = false;
  checkQGemm(one);
}

TEST(QGemmKernel, LargeKBlocksOfRowsAndThreads) {
  checkQGemm({200, 300, 3001});
  checkQGemm({130, 520, 96, false, true, 2, 3, 5});
  checkQGemm({97, 257, 77, true, true, 3});
}

TEST(QGemmKernel, RowMajorBIsPackedPerCall) {
  QCase plain{40, 130, 50, true, true, 2};
  plain.plainB = true;
  checkQGemm(plain);
}

TEST(QGemmKernel, TilesInScratchLeaveCAlone) {
  QCase scratch{19, 130, 40, false, true, 2};
  scratch.tileInScratch = true;
  checkQGemm(scratch);
}

TEST(QGemmKernel, PostOpsAndRequantisation) {
  // The bias per column and a clip as post ops into C, then requantised to u8 and s8 (C's
  // layout, padded rows), bit for bit against the reference's steps; a residual addend before
  // the clip, the f32 kept beside the bytes, or read as u8 or s8 bytes dequantized.
  for (Output output : {Output::PostOps, Output::U8, Output::S8, Output::ResidualF32, Output::ResidualU8,
                        Output::ResidualBytesU8, Output::ResidualBytesS8})
    for (QCase tc : {QCase{13, 70, 31}, QCase{97, 257, 77, true, true, 2, 0, 9}, QCase{5, 3, 7}}) {
      SCOPED_TRACE(testing::Message() << "output " << static_cast<int>(output));
      tc.output = output;
      checkQGemm(tc);
    }
}

TEST(QGemmKernel, InvalidArgumentsLeaveTheOutputAlone) {
  std::vector<float> c(4, 5.0f);
  kiln_qgemm_args args{};
  args.m = 2, args.n = 2, args.k = 4, args.lda = 3, args.ldc = 2, args.c = c.data();
  kiln_rt rt = makeRuntime(1);
  kiln::runtime::kernels::qgemm(&rt, &args); // no operands, lda < k
  EXPECT_EQ(c, std::vector<float>(4, 5.0f));
}

} // namespace
