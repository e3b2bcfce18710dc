#pragma once
// The one matrix product of the reference evaluator's contractions (matmul, and conv and
// conv_transpose as products of the weights with the unfolded input: Contraction.cpp), in
// double through Eigen's blocked product. Eigen is the oracle's own arithmetic, independent of
// kiln's kernels (runtime/kernels: float, their own packing and micro-kernels), and its cache
// blocking is what keeps the reference quick on the seed models, whose contractions were most
// of its time. Internal to ir/ops/.
#include <cstdint>

namespace kiln::ir::ops {

/// A row-major matrix of doubles: `rows` x `cols` at `data`, rows `stride` elements apart.
struct DoubleMatrix {
  const double *data = nullptr;
  int64_t rows = 0, cols = 0, stride = 0;
};

/// out = op(a) * b, op(a) being a, or its transpose when transposeA: op(a) is m x k, b k x n,
/// and out m x n, row-major with rows `outStride` elements apart (>= n). out is overwritten;
/// with k == 0 it is zero. The sums are double, in Eigen's blocked order.
void multiplyMatrices(const DoubleMatrix &a, bool transposeA, const DoubleMatrix &b, double *out, int64_t outStride);

} // namespace kiln::ir::ops
