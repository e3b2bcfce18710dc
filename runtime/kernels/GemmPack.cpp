// Packing of dense GEMM operands (GemmPack.h). Packing runs once per (K block, column block)
// and its cost is spread over the other dimension of the product, which for a 64-channel
// convolution is only 64 rows: two cycles of FMAs per packed float. So the copies are
// vectorised, including the transposing one (16 x 16 blocks in registers).
#include "runtime/kernels/GemmPack.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>

#include "core/Allocation.h"
#include "runtime/kernels/GemmMicroKernel.h" // kPanelWidth, kVector
#include "runtime/kernels/Simd.h"

namespace kiln::runtime::kernels::detail {

void packRows(float *dst, const float *src, int64_t ld, int64_t kc, int64_t cols, int64_t width) {
  for (int64_t k = 0; k < kc; ++k) {
    const float *in = src + k * ld;
    float *out = dst + k * width;
#ifdef __AVX512F__
    for (int64_t x = 0; x < width; x += 16) {
      const __m512 v = x < cols ? _mm512_maskz_loadu_ps(firstLanes(cols - x), in + x)
                                : _mm512_setzero_ps();
      _mm512_mask_storeu_ps(out + x, firstLanes(width - x), v);
    }
#else
    std::copy(in, in + cols, out);
    std::fill(out + cols, out + width, 0.0f);
#endif
  }
}

void transposeCopy(float *dst, int64_t ldDst, const float *src, int64_t ld, int64_t kc, int64_t cols,
                   int64_t width) {
#ifdef __AVX512F__
  for (int64_t x0 = 0; x0 < width; x0 += 16) {
    const int64_t rowsHere = std::clamp<int64_t>(cols - x0, 0, 16);
    const __mmask16 storeMask = firstLanes(width - x0);
    for (int64_t k0 = 0; k0 < kc; k0 += 16) {
      const int64_t kHere = std::min<int64_t>(16, kc - k0);
      const __mmask16 loadMask = firstLanes(kHere);
      __m512 r[16];
      for (int t = 0; t < 16; ++t)
        r[t] = t < rowsHere ? _mm512_maskz_loadu_ps(loadMask, src + (x0 + t) * ld + k0)
                            : _mm512_setzero_ps();
      transpose16x16(r);
      for (int64_t u = 0; u < kHere; ++u)
        _mm512_mask_storeu_ps(dst + (k0 + u) * ldDst + x0, storeMask, r[u]);
    }
  }
#else
  for (int64_t k = 0; k < kc; ++k)
    for (int64_t x = 0; x < width; ++x)
      dst[k * ldDst + x] = x < cols ? src[x * ld + k] : 0.0f;
#endif
}

int64_t panelWidth(int64_t q, int64_t cols) {
  const int64_t rest = cols - q * kPanelWidth;
  return rest >= kPanelWidth ? kPanelWidth : (rest + kVector - 1) / kVector * kVector;
}

void PanelSource::packPanels(float *dst, int64_t k0, int64_t kc, int64_t x0, int64_t cols) const {
  for (int64_t q = 0; q * kPanelWidth < cols; ++q) {
    const int64_t panelCols = std::min<int64_t>(kPanelWidth, cols - q * kPanelWidth);
    pack(dst + q * kPanelWidth * kc, k0, kc, x0 + q * kPanelWidth, panelCols, panelWidth(q, cols));
  }
}

void DenseSource::packPanels(float *dst, int64_t k0, int64_t kc, int64_t x0, int64_t cols) const {
  if (strideX_ != 1)
    return PanelSource::packPanels(dst, k0, kc, x0, cols);
  const int64_t fullPanels = cols / kPanelWidth;
  const int64_t rest = cols - fullPanels * kPanelWidth;
  const int64_t restWidth = panelWidth(fullPanels, cols);
  for (int64_t k = 0; k < kc; ++k) {
    const float *row = base_ + (k0 + k) * strideK_ + x0;
    float *out = dst + k * kPanelWidth;
#ifdef __AVX512F__
    // Rows lie strideK apart (a channel plane of a 1x1 conv's input), too far for the
    // hardware prefetchers to follow: fetch a few rows ahead.
    constexpr int64_t kRowsAhead = 4;
    if (k + kRowsAhead < kc) {
      const char *ahead = reinterpret_cast<const char *>(row + kRowsAhead * strideK_);
      for (int64_t byte = 0; byte < cols * 4; byte += 64)
        _mm_prefetch(ahead + byte, _MM_HINT_T0);
    }
#endif
    // Whole panels: 64 floats from the row to each panel's row k.
    for (int64_t q = 0; q < fullPanels; ++q, row += kPanelWidth, out += kPanelWidth * kc) {
#ifdef __AVX512F__
      for (int v = 0; v < kPanelWidth; v += kVector)
        _mm512_storeu_ps(out + v, _mm512_loadu_ps(row + v));
#else
      std::copy(row, row + kPanelWidth, out);
#endif
    }
    if (rest > 0)
      packRows(dst + fullPanels * kPanelWidth * kc + k * restWidth, row, 0, 1, rest, restWidth);
  }
}

void PanelMajorSource::pack(float *dst, int64_t k0, int64_t kc, int64_t x0, int64_t cols,
                            int64_t width) const {
  // Runs of columns within one stored panel are contiguous in each row.
  for (int64_t kk = 0; kk < kc; ++kk) {
    float *out = dst + kk * width;
    for (int64_t x = x0; x < x0 + cols;) {
      const int64_t inPanel = x % kPanelWidth, run = std::min(kPanelWidth - inPanel, x0 + cols - x);
      const float *from = base_ + (x - inPanel) * depth_ + (k0 + kk) * kPanelWidth + inPanel;
      std::copy(from, from + run, out + (x - x0));
      x += run;
    }
    std::fill(out + cols, out + width, 0.0f);
  }
}

double PanelMajorSource::packCost(int64_t) const { return 0.15; }

const float *PanelMajorSource::panelsInPlace(int64_t k0, int64_t x0, int64_t &panelStride) const {
  if (x0 % kPanelWidth != 0)
    return nullptr;
  panelStride = kPanelWidth * depth_;
  return base_ + x0 * depth_ + k0 * kPanelWidth;
}

void DenseSource::pack(float *dst, int64_t k0, int64_t kc, int64_t x0, int64_t cols,
                       int64_t width) const {
  const float *origin = base_ + k0 * strideK_ + x0 * strideX_;
  if (strideX_ == 1)
    packRows(dst, origin, strideK_, kc, cols, width);
  else
    packColumns(dst, origin, strideX_, kc, cols, width);
}

double DenseSource::packCost(int64_t) const {
  // Row copies stream at ~0.15 cycle per float; the 16 x 16 transposes cost ~0.5.
  return strideX_ == 1 ? 0.15 : 0.5;
}

const float *DenseSource::inPlace(int64_t &stride) const {
  if (strideK_ != 1)
    return nullptr;
  stride = strideX_;
  return base_;
}

const float *DenseSource::rowsInPlace(int64_t k0, int64_t x0, int64_t &ld) const {
  if (strideX_ != 1)
    return nullptr;
  ld = strideK_;
  return base_ + k0 * strideK_ + x0;
}

namespace {

struct AlignedBlock {
  float *data = nullptr;
  size_t capacity = 0;
  ~AlignedBlock() { std::free(data); }
};

} // namespace

float *scratch(Scratch slot, size_t floats) {
  thread_local AlignedBlock blocks[kScratchSlots];
  AlignedBlock &block = blocks[static_cast<int>(slot)];
  if (block.capacity < floats) {
    // Round up so that a slightly larger request later does not reallocate again.
    const size_t capacity = std::max(floats + floats / 4, size_t{4096});
    const size_t bytes = (capacity * sizeof(float) + 63) / 64 * 64;
    void *fresh = allocateBlock(bytes);
    if (!fresh)
      throw std::bad_alloc();
    std::free(block.data);
    block.data = static_cast<float *>(fresh);
    block.capacity = capacity;
  }
  return block.data;
}

} // namespace kiln::runtime::kernels::detail
