// The requantisation of finished f32 tiles (QuantizedOutput.h).
#include "runtime/kernels/QuantizedOutput.h"

namespace kiln::runtime::kernels::detail {

void quantizeTile(const float *tile, int64_t ld, const TilePostOps &post, const QuantizedTile &to, int64_t rows,
                  int64_t cols) {
#ifdef __AVX512F__
  const ClampPost clamp(&post);
  const QuantizeLanes lanes(*to.out);
#endif
  for (int64_t i = 0; i < rows; ++i) {
    const float *row = tile + i * ld;
    uint8_t *q = to.q + i * to.ldq;
    int64_t j = 0;
#ifdef __AVX512F__
    const __m512 rowBias = clamp.rowBias(i);
    for (; j < cols; j += 16) {
      const __mmask16 mask = firstLanes(cols - j);
      const __m512 v = _mm512_maskz_loadu_ps(mask, row + j);
      lanes.store(q + j, mask, clamp.apply(v, clamp.bias(rowBias, j, mask)));
    }
#endif
    for (; j < cols; ++j)
      q[j] = quantizeValue(withPostOps(row[j], post, i, j), *to.out);
  }
}

void QuantizedOutputEpilogue::call(void *vself, float *tile, int64_t ld, int64_t batch, int64_t row0, int64_t col0,
                                   int64_t rows, int64_t cols) {
  const QuantizedOutputEpilogue &self = *static_cast<const QuantizedOutputEpilogue *>(vself);
  uint8_t *q = static_cast<uint8_t *>(self.out.q) + batch * self.batchStride + row0 * self.rowStride + col0;
  quantizeTile(tile, ld, tilePostOps(self.post, self.perRow, row0, col0), QuantizedTile{q, self.rowStride, &self.out},
               rows, cols);
}

} // namespace kiln::runtime::kernels::detail
