// The paths BERT's attention blocks and projections take, checked against hand-computed
// values and the reference evaluator:
//  - rt->gemm folding a batch that shares one B (a sequence-first [S, 1, D] x [D, N] layer)
//    into one tall product, with the epilogue still seeing each product's (batch, row, col);
//  - row max/min with their NaN test kept apart from the select (the vectorised lanes).
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "frontend/Frontend.h"
#include "runtime/KernelAbi.h"
#include "runtime/kernels/Kernels.h"
#include "tests/codegen/CodegenTestUtil.h"

namespace kiln::codegen::test {
namespace {

using frontend::GraphBuilder;
using frontend::Var;

// Records every element the epilogue saw, with its coordinates, and adds batch*1000 +
// row*100 + col to it so the test can tell that each got the right coordinates exactly once.
struct SeenTiles {
  int64_t batches, m, n;
  std::vector<int> visits;

  static void epilogue(void *vctx, float *tile, int64_t ld, int64_t batch, int64_t row0, int64_t col0,
                       int64_t rows, int64_t cols) {
    SeenTiles &self = *static_cast<SeenTiles *>(vctx);
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) {
        const int64_t row = row0 + i, col = col0 + j;
        ASSERT_TRUE(batch >= 0 && batch < self.batches && row >= 0 && row < self.m && col >= 0 && col < self.n);
        ++self.visits[static_cast<size_t>((batch * self.m + row) * self.n + col)];
        tile[i * ld + j] += static_cast<float>(batch * 1000 + row * 100 + col);
      }
  }
};

// C[b] = A[b] * B (B shared over the batch), A[b] at a * b * strideA with rows lda apart, then
// the epilogue; compared with a plain triple loop.
void expectSharedBGemm(int64_t batches, int64_t m, int64_t n, int64_t k, int64_t lda, int64_t strideA) {
  std::vector<float> a(static_cast<size_t>(strideA * (batches - 1) + lda * (m - 1) + k));
  std::vector<float> b(static_cast<size_t>(k * n)), c(static_cast<size_t>(batches * m * n), -7.0f);
  for (size_t i = 0; i < a.size(); ++i)
    a[i] = static_cast<float>(static_cast<int>(i % 11) - 5) * 0.25f;
  for (size_t i = 0; i < b.size(); ++i)
    b[i] = static_cast<float>(static_cast<int>(i % 7) - 3) * 0.5f;
  SeenTiles seen{batches, m, n, std::vector<int>(c.size(), 0)};
  kiln_gemm_args g{};
  g.m = m, g.n = n, g.k = k, g.batch = batches;
  g.a = a.data(), g.lda = lda, g.stride_a = strideA;
  g.b = b.data(), g.ldb = n, g.stride_b = 0;
  g.c = c.data(), g.ldc = n, g.stride_c = m * n;
  g.epilogue = SeenTiles::epilogue, g.epilogue_ctx = &seen;
  kiln_rt rt{};
  rt.abi_version = KILN_ABI_VERSION;
  rt.num_threads = 1;
  runtime::kernels::gemm(&rt, &g);
  for (int64_t bt = 0; bt < batches; ++bt)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double want = static_cast<double>(bt * 1000 + i * 100 + j);
        for (int64_t p = 0; p < k; ++p)
          want += static_cast<double>(a[static_cast<size_t>(bt * strideA + i * lda + p)]) *
                  static_cast<double>(b[static_cast<size_t>(p * n + j)]);
        const size_t at = static_cast<size_t>((bt * m + i) * n + j);
        ASSERT_EQ(seen.visits[at], 1) << "batch " << bt << " row " << i << " col " << j;
        ASSERT_NEAR(c[at], want, 1e-3 + 1e-5 * std::fabs(want)) << "batch " << bt << " row " << i << " col " << j;
      }
}

TEST(CodegenAttention, SharedWeightBatchOfRowVectorsFoldsIntoOneProduct) {
  // [S, 1, D] x [D, N]: 40 products of one row each, rows of A 24 apart (a slice of wider rows).
  expectSharedBGemm(40, 1, 70, 20, 20, 24);
}

TEST(CodegenAttention, SharedWeightBatchOfMatricesFoldsWithTilesAcrossProducts) {
  // 5-row products: the 6-row tiles of the folded product straddle product boundaries.
  expectSharedBGemm(9, 5, 33, 17, 17, 5 * 17);
}

TEST(CodegenAttention, SharedWeightBatchWithAGapBetweenProductsStaysBatched) {
  // A's products are not contiguous (stride 3 rows + 2): no fold, the same results.
  expectSharedBGemm(4, 3, 19, 8, 8, 3 * 8 + 2);
}

TEST(CodegenAttention, SequenceFirstProjectionWithResidualMatchesReference) {
  // nn.MultiheadAttention's layout: [S, B, D] x W + bias + residual indexed by (s, b, n), for
  // B = 1 (one-row products) and B = 3, in one graph so that the test compiles once.
  GraphBuilder gb("seq_first_linear");
  Var w = gb.param("w", randomTensor({DType::F32, {24, 40}}, 31));
  Var bias = gb.param("bias", randomTensor({DType::F32, {40}}, 32));
  std::vector<Var> outputs;
  for (int64_t batch : {1, 3}) {
    Var x = gb.input("x" + std::to_string(batch), DType::F32, {37, batch, 24});
    Var res = gb.input("res" + std::to_string(batch), DType::F32, {37, batch, 40});
    outputs.push_back(frontend::matmul(x, w) + bias + res);
  }
  auto graph = gb.finish(outputs);
  expectMatchesReference(*graph, randomInputs(*graph, 33));
}

TEST(CodegenAttention, SoftmaxRowsWithTailsMatchReference) {
  // Row lengths around the 16 lanes: a whole number of blocks, a tail, and a long row with a tail.
  GraphBuilder gb("softmax_rows");
  std::vector<Var> outputs;
  for (int64_t width : {32, 41, 300}) {
    Var x = gb.input("x" + std::to_string(width), DType::F32, {3, 4, width});
    outputs.push_back(frontend::softmax(x * 4.0, -1));
    outputs.push_back(frontend::max(x, {-1}));
    outputs.push_back(frontend::min(x, {-1}));
  }
  auto graph = gb.finish(outputs);
  expectMatchesReference(*graph, randomInputs(*graph, 34));
}

TEST(CodegenAttention, SoftmaxRowsKeepTheirExponentialsForTheTail) {
  // The sum pass keeps exp(x - max) per row and the tail divides what it kept rather than
  // taking exp again: rows of 32, 197 (ViT's: a tail of 5) and 4096 lanes-long; rows of 20
  // (no lanes) and 5000 (longer than the cache) compute it twice; log_softmax's tail does not
  // read the exponentials (log(sum) is per row), so it keeps none. A row cache is declared once
  // per cached softmax, each kernel then holding a single exp, in the pass.
  GraphBuilder gb("softmax_cache");
  std::vector<Var> outputs;
  for (int64_t width : {32, 197, 4096, 20, 5000}) {
    Var x = gb.input("x" + std::to_string(width), DType::F32, {3, width});
    outputs.push_back(frontend::softmax(x * 3.0, -1));
  }
  Var y = gb.input("y", DType::F32, {3, 197});
  outputs.push_back(frontend::logSoftmax(y, -1));
  Var d = gb.input("d", DType::F64, {2, 64});
  outputs.push_back(frontend::softmax(d, -1));
  auto graph = gb.finish(outputs);
  EXPECT_EQ(countInSource(*graph, "float rc"), 3);
  EXPECT_EQ(countInSource(*graph, "double rc"), 1);
  expectMatchesReference(*graph, randomInputs(*graph, 36));
  expectMatchesReference(*graph, randomInputs(*graph, 37), withThreads(2));
}

TEST(CodegenAttention, RowMaxAndMinAreNanWhereverTheRowHasOne) {
  GraphBuilder gb("nan_rows");
  Var x = gb.input("x", DType::F32, {4, 37});
  auto graph = gb.finish({frontend::max(x, {-1}), frontend::min(x, {-1})});
  Tensor input = randomTensor({DType::F32, {4, 37}}, 35);
  float *data = input.dataAs<float>();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  data[0 * 37 + 5] = nan;  // in a lane block
  data[1 * 37 + 36] = nan; // in the tail
  data[2 * 37 + 16] = -nan;
  // Row 3 has none: its max and min are those of its values.
  expectMatchesReference(*graph, {input});
  std::vector<Tensor> outputs = compile(*graph, testOptions()).run({input});
  for (int r = 0; r < 3; ++r) {
    EXPECT_TRUE(std::isnan(outputs[0].dataAs<float>()[r])) << "max of row " << r;
    EXPECT_TRUE(std::isnan(outputs[1].dataAs<float>()[r])) << "min of row " << r;
  }
  float want = -INFINITY;
  for (int j = 0; j < 37; ++j)
    want = std::max(want, data[3 * 37 + j]);
  EXPECT_EQ(outputs[0].dataAs<float>()[3], want);
}

} // namespace
} // namespace kiln::codegen::test
