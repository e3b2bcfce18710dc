// The finishing of f32 tiles (QuantizedOutput.h).
#include "runtime/kernels/QuantizedOutput.h"

namespace kiln::runtime::kernels::detail {

void finishTile(const float *tile, int64_t ld, const TilePostOps &post, const FinishedTile &to, int64_t rows,
                int64_t cols) {
#ifdef __AVX512F__
  const ClampPost clamp(&post);
  const QuantizeLanes quantize(quantizedOrNone(to));
#endif
  TilePostOps activationOnly = post; // the bias is added before the addend
  activationOnly.rowBias = activationOnly.columnBias = nullptr;
  for (int64_t i = 0; i < rows; ++i) {
    const float *row = tile + i * ld;
    int64_t j = 0;
#ifdef __AVX512F__
    const __m512 rowBias = clamp.rowBias(i);
    for (; j < cols; j += 16) {
      const __mmask16 lanes = firstLanes(cols - j);
      const __m512 v = _mm512_maskz_loadu_ps(lanes, row + j);
      finishLanes(v, clamp.bias(rowBias, j, lanes), clamp, quantize, to, i, j, lanes);
    }
#endif
    for (; j < cols; ++j) {
      const int64_t at = i * to.ld + j;
      float v = row[j] + (post.rowBias ? post.rowBias[i] : post.columnBias ? post.columnBias[j] : -0.0f);
      if (to.addend)
        v += to.addend[at];
      if (to.addendBytes)
        v += dequantizedAddend(*to.addendQuant, to.addendBytes[at]);
      v = withPostOps(v, activationOnly, i, j);
      if (to.c)
        to.c[at] = v;
      if (to.q)
        to.q[at] = quantizeValue(v, *to.quantized);
    }
  }
}

void FinishEpilogue::call(void *vself, float *tile, int64_t ld, int64_t batch, int64_t row0, int64_t col0,
                          int64_t rows, int64_t cols) {
  const FinishEpilogue &self = *static_cast<const FinishEpilogue *>(vself);
  const int64_t at = batch * self.batchStride + row0 * self.rowStride + col0;
  finishTile(tile, ld, tilePostOps(self.post, self.perRow, row0, col0), finishedTile(self, self.y, at, self.rowStride),
             rows, cols);
}

} // namespace kiln::runtime::kernels::detail
