// kiln::runtime::kernels::conv2dWeightGrad: the weight gradient of a one-group NCHW convolution
//   dw[k][c][r][s] = sum over n, oh, ow of dy[n][k][oh][ow] * x[n][c][ih][iw]
// computed directly, with no im2col and no GEMM packing.
//
// Why not im2col + GEMM: the columns hold R*S copies of x, and with 64 output channels each
// column float feeds only 64 FMAs, so writing the columns and packing them cost about as much
// as the arithmetic (ResNet-18's 64-channel layers ran at half the FMA peak that way).
//
// Instead x and dy are transposed once to NHWC (channels contiguous; each float moved once).
// Then for a kernel tap t = (r, s) the gradient is a sum over output positions p of outer
// products of two contiguous channel vectors,
//   dwT[t][k][c] += dy[p][k] * x[p shifted by the tap][c],
// and a tile of dwT (kRows broadcast channels x kVectors * 16 vector channels) stays in
// registers while the loop over positions broadcasts kRows floats of one operand and loads
// kVectors vectors of the other: nothing is packed. Vectors run along C, or along K when K
// fills 16-lane vectors better (an RGB stem: C = 3, K = 64).
//
// Positions are taken in blocks of whole output rows (>= kBlockPositions positions), so that a
// tile's accumulators are loaded and stored once per block, and one block's rows stay in cache
// while every tile of every tap reads them. Each thread owns a fixed range of tiles for the
// whole call: threads never write the same floats and need no reduction. Last, dwT[t][k][c] is
// transposed into dw's [k][c][t] order.
#include <algorithm>
#include <array>
#include <utility>
#include <vector>

#include "runtime/kernels/GemmDriver.h" // threadsOf
#include "runtime/kernels/GemmPack.h"   // packColumns, transposeCopy, scratch
#include "runtime/kernels/Kernels.h"
#include "runtime/kernels/Simd.h"

namespace kiln::runtime::kernels {

namespace {

using Args = kiln_conv2d_weight_grad_args;

constexpr int kRows = 6;          // broadcast channels per tile
constexpr int kVectors = 4;       // 16-lane vectors per tile
constexpr int kLanes = 16;
constexpr int64_t kBlockPositions = 256;

bool validArgs(const Args &a) {
  if (a.n < 0 || a.c < 1 || a.h < 1 || a.w < 1 || a.k < 1 || a.r < 1 || a.s < 1 || a.oh < 0 || a.ow < 0)
    return false;
  if (a.stride_h < 1 || a.stride_w < 1 || a.dilation_h < 1 || a.dilation_w < 1 || a.pad_top < 0 || a.pad_left < 0)
    return false;
  return a.x && a.dy && a.dw;
}

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Everything the tile loops need, fixed for the call.
struct Plan {
  const Args *a = nullptr;
  const float *xT = nullptr;  // [n][h][w][c]
  const float *dyT = nullptr; // [n][oh][ow][k]
  float *dwT = nullptr;       // [tap][bcast][vec]
  bool vectorOverC = true;
  int64_t bcast = 0, vec = 0;       // channel counts of the broadcast and the vector operand
  int64_t bcastTiles = 0, vecTiles = 0, taps = 0, tiles = 0;
  int64_t rowsPerBlock = 1, rows = 0; // output rows (n, oh) per block, in all
  std::vector<int64_t> owBegin, owEnd; // per kernel column s: outputs whose iw lies inside x
};

struct Tile {
  int64_t tap, r, s, b0, v0;
  int rows, vectors;
  int64_t lastLanes; // lanes of the tile's last vector (1..16)
};

Tile tileAt(const Plan &p, int64_t index) {
  Tile t;
  const int64_t bt = index % p.bcastTiles, vt = (index / p.bcastTiles) % p.vecTiles;
  t.tap = index / (p.bcastTiles * p.vecTiles);
  t.r = t.tap / p.a->s;
  t.s = t.tap % p.a->s;
  t.b0 = bt * kRows;
  t.v0 = vt * kVectors * kLanes;
  t.rows = static_cast<int>(std::min<int64_t>(kRows, p.bcast - t.b0));
  const int64_t lanes = std::min<int64_t>(kVectors * kLanes, p.vec - t.v0);
  t.vectors = static_cast<int>(ceilDiv(lanes, kLanes));
  t.lastLanes = lanes - (t.vectors - 1) * kLanes;
  return t;
}

// Walks output rows row0, row0 + 1, ... of a tile, giving the operands of each row that reads
// inside x: position q of the row's valid range reads the broadcast floats at b + q*bStep and
// the vector floats at v + q*vStep. (n, oh) advance by counting: a division per row would cost
// as much as a 7-wide row's FMAs.
struct RowWalker {
  const Plan &p;
  const Tile &t;
  int64_t n, oh, owBegin, count;
  RowWalker(const Plan &plan, const Tile &tile, int64_t row0)
      : p(plan), t(tile), n(row0 / plan.a->oh), oh(row0 % plan.a->oh),
        owBegin(plan.owBegin[static_cast<size_t>(tile.s)]),
        count(plan.owEnd[static_cast<size_t>(tile.s)] - owBegin) {}
  // The operands of the current row (false when it reads only padding), then steps to the next.
  bool next(const float *&b, const float *&v) {
    const Args &a = *p.a;
    const int64_t ih = oh * a.stride_h + t.r * a.dilation_h - a.pad_top;
    const bool inside = ih >= 0 && ih < a.h && count > 0;
    if (inside) {
      const int64_t iw = owBegin * a.stride_w + t.s * a.dilation_w - a.pad_left;
      const float *x = p.xT + ((n * a.h + ih) * a.w + iw) * a.c;
      const float *dy = p.dyT + ((n * a.oh + oh) * a.ow + owBegin) * a.k;
      b = p.vectorOverC ? dy + t.b0 : x + t.b0;
      v = p.vectorOverC ? x + t.v0 : dy + t.v0;
    }
    if (++oh == a.oh) {
      oh = 0;
      ++n;
    }
    return inside;
  }
};

// Sums output rows [row0, row1) of tile `t` in registers from zero, then stores the sums into
// the tile's corner of dwT (rows p.vec apart) when `first`, or adds them there. Summing each
// block apart keeps fp32 rounding to that of blocked sums: one running sum over 82K positions
// drifted by 2.5e-4 relative in a codegen test.
template <int Rows, int Vectors>
void accumulateTile(const Plan &p, const Tile &t, int64_t row0, int64_t row1, bool first) {
  const Args &a = *p.a;
  float *acc = p.dwT + (t.tap * p.bcast + t.b0) * p.vec + t.v0;
  const int64_t xStep = a.stride_w * a.c;
  const int64_t bStep = p.vectorOverC ? a.k : xStep, vStep = p.vectorOverC ? xStep : a.k;
  RowWalker rows(p, t, row0);
#ifdef __AVX512F__
  const __mmask16 last = detail::firstLanes(t.lastLanes);
  __m512 sum[Rows][Vectors];
#pragma GCC unroll 8
  for (int i = 0; i < Rows; ++i)
#pragma GCC unroll 4
    for (int j = 0; j < Vectors; ++j)
      sum[i][j] = _mm512_setzero_ps();
  for (int64_t row = row0; row < row1; ++row) {
    const float *b, *v;
    if (!rows.next(b, v))
      continue;
    for (int64_t q = 0; q < rows.count; ++q, b += bStep, v += vStep) {
      __m512 vecs[Vectors];
#pragma GCC unroll 4
      for (int j = 0; j + 1 < Vectors; ++j)
        vecs[j] = _mm512_loadu_ps(v + j * kLanes);
      vecs[Vectors - 1] = _mm512_maskz_loadu_ps(last, v + (Vectors - 1) * kLanes);
#pragma GCC unroll 8
      for (int i = 0; i < Rows; ++i) {
        const __m512 scalar = _mm512_set1_ps(b[i]);
#pragma GCC unroll 4
        for (int j = 0; j < Vectors; ++j)
          sum[i][j] = _mm512_fmadd_ps(scalar, vecs[j], sum[i][j]);
      }
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < Rows; ++i)
#pragma GCC unroll 4
    for (int j = 0; j < Vectors; ++j) {
      const __mmask16 lanes = j + 1 < Vectors ? __mmask16(0xFFFF) : last;
      float *out = acc + i * p.vec + j * kLanes;
      _mm512_mask_storeu_ps(out, lanes, first ? sum[i][j] : _mm512_add_ps(sum[i][j], _mm512_maskz_loadu_ps(lanes, out)));
    }
#else
  const int64_t lanes = (Vectors - 1) * kLanes + t.lastLanes;
  float sum[Rows][Vectors * kLanes] = {};
  for (int64_t row = row0; row < row1; ++row) {
    const float *b, *v;
    if (!rows.next(b, v))
      continue;
    for (int64_t q = 0; q < rows.count; ++q)
      for (int i = 0; i < Rows; ++i)
        for (int64_t j = 0; j < lanes; ++j)
          sum[i][j] += b[q * bStep + i] * v[q * vStep + j];
  }
  for (int i = 0; i < Rows; ++i)
    for (int64_t j = 0; j < lanes; ++j)
      acc[i * p.vec + j] = first ? sum[i][j] : acc[i * p.vec + j] + sum[i][j];
#endif
}

using TileFn = void (*)(const Plan &, const Tile &, int64_t, int64_t, bool);

template <int Rows, int... V>
constexpr std::array<TileFn, sizeof...(V)> tileRow(std::integer_sequence<int, V...>) {
  return {&accumulateTile<Rows, V + 1>...};
}

template <int... R>
constexpr std::array<std::array<TileFn, kVectors>, sizeof...(R)> tileTable(std::integer_sequence<int, R...>) {
  return {tileRow<R + 1>(std::make_integer_sequence<int, kVectors>{})...};
}

// kTileFns[rows - 1][vectors - 1].
constexpr auto kTileFns = tileTable(std::make_integer_sequence<int, kRows>{});

// Thread part [begin, end) of the tiles, over every block of output rows.
void runTiles(void *ctx, int64_t begin, int64_t end) {
  const Plan &p = *static_cast<const Plan *>(ctx);
  for (int64_t row0 = 0; row0 < p.rows; row0 += p.rowsPerBlock) {
    const int64_t row1 = std::min(p.rows, row0 + p.rowsPerBlock);
    for (int64_t index = begin; index < end; ++index) {
      const Tile t = tileAt(p, index);
      kTileFns[t.rows - 1][t.vectors - 1](p, t, row0, row1, row0 == 0);
    }
  }
}

// x and dy to NHWC: work item q transposes a run of positions of one image of one of them.
struct ToNhwc {
  const Args *a;
  float *xT, *dyT;
  int64_t xRuns, dyRuns; // runs per image
  static constexpr int64_t kRun = 256;
};

void transposeRuns(void *ctx, int64_t begin, int64_t end) {
  const ToNhwc &j = *static_cast<const ToNhwc *>(ctx);
  const Args &a = *j.a;
  const int64_t xItems = a.n * j.xRuns;
  for (int64_t q = begin; q < end; ++q) {
    const bool isX = q < xItems;
    const int64_t item = isX ? q : q - xItems, runs = isX ? j.xRuns : j.dyRuns;
    const int64_t image = item / runs, run = item % runs;
    const int64_t channels = isX ? a.c : a.k, plane = isX ? a.h * a.w : a.oh * a.ow;
    const int64_t p0 = run * ToNhwc::kRun, count = std::min(ToNhwc::kRun, plane - p0);
    const float *src = (isX ? a.x : a.dy) + image * channels * plane + p0;
    float *dst = (isX ? j.xT : j.dyT) + (image * plane + p0) * channels;
    detail::packColumns(dst, src, plane, count, channels, channels);
  }
}

// dwT[t][bcast][vec] to dw[k][c][t], parallel over the broadcast channels: per broadcast
// channel a transposing copy of its taps x vector channels, so that dw is written in runs of taps.
void scatterTaps(void *ctx, int64_t begin, int64_t end) {
  const Plan &p = *static_cast<const Plan *>(ctx);
  const Args &a = *p.a;
  // dw offset of (broadcast channel b, vector channel v, tap 0).
  const int64_t bStride = p.vectorOverC ? a.c * p.taps : p.taps, vStride = p.vectorOverC ? p.taps : a.c * p.taps;
  for (int64_t b = begin; b < end; ++b)
    detail::transposeCopy(a.dw + b * bStride, vStride, p.dwT + b * p.vec, p.bcast * p.vec, p.vec, p.taps, p.taps);
}

// fn over [0, n) on rt's pool, or inline with one thread.
void run(const kiln_rt *rt, kiln_range_fn fn, void *ctx, int64_t n) {
  if (detail::threadsOf(rt) > 1 && n > 1)
    rt->parallel_for(rt, n, 1, fn, ctx);
  else
    fn(ctx, 0, n);
}

} // namespace

void conv2dWeightGrad(const kiln_rt *rt, const kiln_conv2d_weight_grad_args *args) {
  if (!args || !validArgs(*args))
    return;
  const Args &a = *args;
  const int64_t taps = a.r * a.s, weights = a.k * a.c * taps;
  if (a.n == 0 || a.oh == 0 || a.ow == 0) {
    std::fill(a.dw, a.dw + weights, 0.0f);
    return;
  }
  const int64_t xFloats = a.n * a.h * a.w * a.c, dyFloats = a.n * a.oh * a.ow * a.k;
  auto rounded = [](int64_t floats) { return (floats + 15) / 16 * 16; };
  float *space = detail::scratch(detail::Scratch::Conv,
                                 static_cast<size_t>(rounded(xFloats) + rounded(dyFloats) + rounded(weights)));

  ToNhwc toNhwc{&a, space, space + rounded(xFloats), ceilDiv(a.h * a.w, ToNhwc::kRun),
                ceilDiv(a.oh * a.ow, ToNhwc::kRun)};
  run(rt, transposeRuns, &toNhwc, a.n * (toNhwc.xRuns + toNhwc.dyRuns));

  Plan p;
  p.a = &a;
  p.xT = toNhwc.xT;
  p.dyT = toNhwc.dyT;
  p.dwT = toNhwc.dyT + rounded(dyFloats);
  // Vectors along the channel count that wastes fewer lanes (C on a tie).
  p.vectorOverC = ceilDiv(a.c, kLanes) * kLanes * a.k <= ceilDiv(a.k, kLanes) * kLanes * a.c;
  p.vec = p.vectorOverC ? a.c : a.k;
  p.bcast = p.vectorOverC ? a.k : a.c;
  p.bcastTiles = ceilDiv(p.bcast, kRows);
  p.vecTiles = ceilDiv(p.vec, kVectors * kLanes);
  p.taps = taps;
  p.tiles = taps * p.bcastTiles * p.vecTiles;
  p.rows = a.n * a.oh;
  p.rowsPerBlock = std::max<int64_t>(1, ceilDiv(kBlockPositions, a.ow));
  p.owBegin.resize(static_cast<size_t>(a.s));
  p.owEnd.resize(static_cast<size_t>(a.s));
  for (int64_t s = 0; s < a.s; ++s) {
    // iw = ow*stride + off lies in [0, w) for ow in [begin, end).
    const int64_t off = s * a.dilation_w - a.pad_left;
    const int64_t begin = off >= 0 ? 0 : ceilDiv(-off, a.stride_w);
    const int64_t end = a.w - 1 - off < 0 ? 0 : (a.w - 1 - off) / a.stride_w + 1;
    p.owBegin[static_cast<size_t>(s)] = std::min(begin, a.ow);
    p.owEnd[static_cast<size_t>(s)] = std::clamp(end, p.owBegin[static_cast<size_t>(s)], a.ow);
  }
  run(rt, runTiles, &p, p.tiles);
  run(rt, scatterTaps, &p, p.bcast);
}

} // namespace kiln::runtime::kernels
