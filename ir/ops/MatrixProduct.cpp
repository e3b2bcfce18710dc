#include "ir/ops/MatrixProduct.h"

#include <Eigen/Core>

#include "core/Error.h"

namespace kiln::ir::ops {

namespace {

using RowMajor = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Strided = Eigen::OuterStride<>;

Eigen::Map<const RowMajor, Eigen::Unaligned, Strided> view(const DoubleMatrix &m) {
  return {m.data, static_cast<Eigen::Index>(m.rows), static_cast<Eigen::Index>(m.cols),
          Strided(static_cast<Eigen::Index>(m.stride))};
}

} // namespace

void multiplyMatrices(const DoubleMatrix &a, bool transposeA, const DoubleMatrix &b, double *out, int64_t outStride) {
  const int64_t m = transposeA ? a.cols : a.rows, k = transposeA ? a.rows : a.cols, n = b.cols;
  if (b.rows != k || a.stride < a.cols || b.stride < b.cols || outStride < n)
    fail("multiplyMatrices: {} x {} times {} x {} (strides {}, {}, {})", m, k, b.rows, n, a.stride, b.stride,
         outStride);
  if (m == 0 || n == 0)
    return;
  Eigen::Map<RowMajor, Eigen::Unaligned, Strided> result(out, static_cast<Eigen::Index>(m),
                                                          static_cast<Eigen::Index>(n),
                                                          Strided(static_cast<Eigen::Index>(outStride)));
  if (k == 0)
    result.setZero();
  else if (transposeA)
    result.noalias() = view(a).transpose() * view(b);
  else
    result.noalias() = view(a) * view(b);
}

} // namespace kiln::ir::ops
