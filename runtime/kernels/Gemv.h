#pragma once
// Matrix-vector products for GEMMs with M == 1 or N == 1 (batch-1 fully connected layers),
// which read the matrix once without packing: they are bound by memory bandwidth, not FMAs.
// Internal to runtime/kernels/.
#include <cstdint>

namespace kiln::runtime::kernels::detail {

/// out[o] = sum over k < depth of x[k] * mat(o, k), for o < outputs, where
/// mat(o, k) = mat[k*ld + o] when outputsContiguous, else mat[o*ld + k]. x and out are
/// contiguous; depth may be 0 (out = 0).
void gemv(const float *x, const float *mat, int64_t ld, bool outputsContiguous, int64_t outputs,
          int64_t depth, float *out);

} // namespace kiln::runtime::kernels::detail
