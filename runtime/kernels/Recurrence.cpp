// The recurrent kernel (kiln_rt::recurrence): a cell over a whole sequence with the time loop
// inside, as ONNX Runtime and oneDNN run LSTM and GRU. The input projections of every step are
// one GEMM before this kernel (xw); here each step multiplies the previous hidden state by the
// recurrent weights and finishes the cell on the result while it is in registers.
//
// Weights: r in gate blocks (packRecurrentWeights): for each direction and each block of 16
// hidden units, row k holds the 16 units' weights of every gate side by side, so one pass over
// a block's H rows accumulates all gates of those units for up to kMaxRows batch rows (G x rows
// accumulator registers), and the block's gate arithmetic, cell state and hidden state follow
// at once. Weights that one kernel alone reads are packed so at load
// (KILN_PACK_RECURRENT_GATES); plain ones are packed into scratch on each call.
//
// State: h double-buffered per step (a step reads all of h(t-1) and writes h(t)), c updated in
// place (unit j reads only its own c), padded to whole blocks. GRU without linear_before_reset
// needs r (.) h(t-1) of every unit before any unit's candidate, so its steps have two phases:
// z and r (keeping z and r (.) h(t-1)), then the candidate.
//
// Threads: batch rows and directions are independent for the whole sequence, so when there
// are at least two (direction, row) pairs each thread takes whole directions or a range of
// rows and runs every step with no synchronisation (ORT's batch-parallel LSTM). With one
// direction of one batch row, the blocks of each phase are split between the threads, which
// meet at a counter between phases: units of work are claimed in sequence order and a unit
// waits only for the units before its phase, which their claimers are running, so it never
// deadlocks even when the pool runs the participants one after the other.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <thread>

#include "runtime/kernels/CellMath.h"
#include "runtime/kernels/GemmPack.h"
#include "runtime/kernels/Kernels.h"

namespace kiln::runtime::kernels {

using namespace detail;

namespace {

/// Batch rows that share one pass over a weight block.
constexpr int kMaxRows = 4;
/// Below this many multiply-adds in all a recurrence runs on the calling thread.
constexpr int64_t kMinParallelWork = int64_t{1} << 18;
/// Below this many multiply-adds per step one row of one direction is not split over threads.
constexpr int64_t kMinSplitStepWork = int64_t{1} << 15;

int64_t gatesOf(int32_t cell) { return cell == KILN_CELL_RNN ? 1 : cell == KILN_CELL_GRU ? 3 : 4; }
int64_t blocksOf(int64_t hidden) { return (hidden + kLanes - 1) / kLanes; }

/// One call's geometry and state.
struct Sequence {
  const kiln_recurrence_args *a = nullptr;
  int64_t T = 0, B = 0, H = 0, D = 0, G = 0, blocks = 0, width = 0;
  const float *weights = nullptr; // gate blocks
  float *h[2] = {};               // [D][B][width]: h(t-1) and h(t), by step parity
  float *c = nullptr;             // [D][B][width]
  float *reset = nullptr;         // two-phase GRU: r (.) h(t-1), [D][B][width]
  float *update = nullptr;        // two-phase GRU: z, [D][B][width]
  bool twoPhases = false;
  bool plainFunctions[2] = {false, false}; // per direction: sigmoid, tanh, tanh

  bool backwards(int64_t d) const { return a->reverse != 0 || d == 1; }
  int64_t phases() const { return twoPhases ? 2 : 1; }
  const float *block(int64_t d, int64_t jb) const { return weights + (d * blocks + jb) * H * G * kLanes; }
  int64_t state(int64_t d, int64_t b) const { return (d * B + b) * width; }
};

/// acc[r][g] = sum over k < K of in[r][k] * w[k * stride + g * 16 + lane]: NG gates of one
/// block for MR batch rows, every accumulator a register; then finish(r, acc[r]) for each row,
/// which finishes the cell on them still in registers.
template <int NG, int MR, typename Finish>
void accumulate(const float *w, int64_t stride, int64_t K, const float *const *in, const Finish &finish) {
  Lanes acc[MR][NG];
  for (int r = 0; r < MR; ++r)
    for (int g = 0; g < NG; ++g)
      acc[r][g] = splat(0.0f);
  for (int64_t k = 0; k < K; ++k) {
    const float *wk = w + k * stride;
    Lanes wv[NG];
    for (int g = 0; g < NG; ++g) {
      wv[g] = load(wk + g * kLanes);
#ifdef __AVX512F__
      // Each weight vector in a register of its own: left to itself GCC folds the load into
      // every row's FMA, loading it MR times, and the loads, not the FMAs, set the pace.
      asm("" : "+v"(wv[g]));
#endif
    }
    for (int r = 0; r < MR; ++r) {
      const Lanes x = splat(in[r][k]);
      for (int g = 0; g < NG; ++g)
        acc[r][g] = fma(x, wv[g], acc[r][g]);
    }
  }
  for (int r = 0; r < MR; ++r)
    finish(r, acc[r]);
}

/// accumulate for `rows` (1 to kMaxRows) rows.
template <int NG, typename Finish>
void accumulateRows(int64_t rows, const float *w, int64_t stride, int64_t K, const float *const *in,
                    const Finish &finish) {
  static_assert(kMaxRows == 4, "one case per row count");
  switch (rows) {
  case 1: accumulate<NG, 1>(w, stride, K, in, finish); break;
  case 2: accumulate<NG, 2>(w, stride, K, in, finish); break;
  case 3: accumulate<NG, 3>(w, stride, K, in, finish); break;
  default: accumulate<NG, 4>(w, stride, K, in, finish); break;
  }
}

/// The lanes of one block of one batch row at one step.
struct BlockRow {
  const Sequence &s;
  int64_t d, t, b, jb, lanes;

  /// The block's lanes of an operand row (the units past the hidden size read as 0).
  Lanes row(const float *p) const { return lanes == kLanes ? load(p) : loadFirst(p, lanes); }
  /// xw of gate g.
  Lanes input(int64_t g) const {
    return row(s.a->xw + (t * s.B + b) * s.D * s.G * s.H + d * s.G * s.H + g * s.H + jb * kLanes);
  }
  /// rb of gate g.
  Lanes bias(int64_t g) const { return row(s.a->rb + d * s.G * s.H + g * s.H + jb * kLanes); }
  /// xw + rb of gate g.
  Lanes inputs(int64_t g) const { return add(input(g), bias(g)); }
  Lanes clip(Lanes x) const {
    const float bound = s.a->clip;
    return bound > 0 ? min(splat(bound), max(splat(-bound), x)) : x;
  }
  /// Function `index` of this direction (f, g, h).
  Lanes apply(int index, Lanes x) const {
    if (s.plainFunctions[d])
      return index == 0 && s.a->cell != KILN_CELL_RNN ? sigmoid(x) : tanh(x);
    return activate(s.a->functions[d][index], x);
  }
  Lanes peephole(int64_t gate) const { return row(s.a->peepholes + d * 3 * s.H + gate * s.H + jb * kLanes); }
  /// This row's block of a state buffer ([D][B][width]).
  float *state(float *buffer) const { return buffer + s.state(d, b) + jb * kLanes; }
  const float *state(const float *buffer) const { return buffer + s.state(d, b) + jb * kLanes; }
  /// Writes h(t): the next state and this step's output.
  void output(float *hNext, Lanes h) const {
    store(state(hNext), h);
    storeFirst(s.a->y + ((t * s.B + b) * s.D + d) * s.H + jb * kLanes, h, lanes);
  }
};

// The cells, from the accumulated h(t-1) R^T of each gate (acc, registers). Inlined into the
// accumulation, so that acc stays in registers: a call would pass it through memory, which cost
// 5% of a GRU step.
#define KILN_INLINE_CELL inline __attribute__((always_inline))

KILN_INLINE_CELL void finishRnn(const BlockRow &q, const Lanes *acc, float *hNext) {
  q.output(hNext, q.apply(0, q.clip(add(acc[0], q.inputs(0)))));
}

KILN_INLINE_CELL void finishLstm(const BlockRow &q, const Lanes *acc, float *hNext) {
  const kiln_recurrence_args &a = *q.s.a;
  float *cell = q.state(q.s.c);
  const Lanes c = load(cell);
  Lanes pi = add(acc[0], q.inputs(0)), pf = add(acc[2], q.inputs(2));
  if (a.peepholes) {
    pi = fma(q.peephole(0), c, pi);
    pf = fma(q.peephole(2), c, pf);
  }
  const Lanes i = q.apply(0, q.clip(pi));
  const Lanes f = a.input_forget ? sub(splat(1.0f), i) : q.apply(0, q.clip(pf));
  const Lanes candidate = q.apply(1, q.clip(add(acc[3], q.inputs(3))));
  const Lanes next = fma(f, c, mul(i, candidate));
  store(cell, next);
  Lanes po = add(acc[1], q.inputs(1));
  if (a.peepholes)
    po = fma(q.peephole(1), next, po);
  q.output(hNext, mul(q.apply(0, q.clip(po)), q.apply(2, next)));
}

/// GRU's new state from z, the candidate's pre-activation and h(t-1).
KILN_INLINE_CELL void finishGru(const BlockRow &q, Lanes z, Lanes candidate, const float *hPrev, float *hNext) {
  const Lanes h = load(q.state(hPrev));
  const Lanes hTilde = q.apply(1, q.clip(candidate));
  q.output(hNext, fma(sub(splat(1.0f), z), hTilde, mul(z, h)));
}

KILN_INLINE_CELL void finishGruLinearBeforeReset(const BlockRow &q, const Lanes *acc, const float *hPrev, float *hNext) {
  const Lanes z = q.apply(0, q.clip(add(acc[0], q.inputs(0))));
  const Lanes r = q.apply(0, q.clip(add(acc[1], q.inputs(1))));
  // ht = g(Xt Wh^T + Wbh + rt (.) (Ht-1 Rh^T + Rbh)): rb is inside the product with r.
  finishGru(q, z, fma(r, add(acc[2], q.bias(2)), q.input(2)), hPrev, hNext);
}

/// Two-phase GRU, phase 0 (acc: z, r): z and r (.) h(t-1).
KILN_INLINE_CELL void gruGates(const BlockRow &q, const Lanes *acc, const float *hPrev) {
  const Lanes z = q.apply(0, q.clip(add(acc[0], q.inputs(0))));
  const Lanes r = q.apply(0, q.clip(add(acc[1], q.inputs(1))));
  store(q.state(q.s.update), z);
  store(q.state(q.s.reset), mul(r, load(q.state(hPrev))));
}

/// Two-phase GRU, phase 1 (acc: (r (.) h(t-1)) Rh^T): the candidate and h(t).
KILN_INLINE_CELL void gruCandidate(const BlockRow &q, const Lanes *acc, const float *hPrev, float *hNext) {
  finishGru(q, load(q.state(q.s.update)), add(acc[0], q.inputs(2)), hPrev, hNext);
}

/// Phase `phase` of step `k` (in the direction's order) for rows [b0, b1) and blocks [jb0, jb1).
void runBlocks(const Sequence &s, int64_t d, int64_t k, int phase, int64_t b0, int64_t b1, int64_t jb0, int64_t jb1) {
  const kiln_recurrence_args &a = *s.a;
  const int64_t t = s.backwards(d) ? s.T - 1 - k : k;
  const float *hPrev = s.h[k % 2];
  float *hNext = s.h[(k + 1) % 2];
  // The first gate this phase accumulates (the cell picks how many below), and the vectors
  // they multiply.
  const int64_t g0 = s.twoPhases && phase == 1 ? 2 : 0;
  const float *source = s.twoPhases && phase == 1 ? s.reset : hPrev;
  const bool last = phase == s.phases() - 1;
  for (int64_t jb = jb0; jb < jb1; ++jb) {
    const int64_t lanes = std::min<int64_t>(kLanes, s.H - jb * kLanes);
    const float *weights = s.block(d, jb) + g0 * kLanes;
    for (int64_t b = b0; b < b1; b += kMaxRows) {
      const int64_t rows = std::min<int64_t>(kMaxRows, b1 - b);
      const float *in[kMaxRows];
      for (int64_t r = 0; r < rows; ++r)
        in[r] = source + s.state(d, b + r);
      // Runs `cell` on row r unless the row is past its end (state kept, output 0).
      auto finishing = [&](auto cell) {
        return [&, cell](int r, const Lanes *acc) {
          const BlockRow q{s, d, t, b + r, jb, lanes};
          if (a.lengths && t >= a.lengths[b + r]) {
            if (last) {
              std::memcpy(q.state(hNext), q.state(hPrev), sizeof(float) * kLanes);
              storeFirst(a.y + ((t * s.B + b + r) * s.D + d) * s.H + jb * kLanes, splat(0.0f), lanes);
            }
            return;
          }
          cell(q, acc);
        };
      };
      const int64_t stride = s.G * kLanes, K = s.H;
      if (a.cell == KILN_CELL_RNN) {
        accumulateRows<1>(rows, weights, stride, K, in,
                          finishing([&](const BlockRow &q, const Lanes *acc) { finishRnn(q, acc, hNext); }));
      } else if (a.cell == KILN_CELL_LSTM) {
        accumulateRows<4>(rows, weights, stride, K, in,
                          finishing([&](const BlockRow &q, const Lanes *acc) { finishLstm(q, acc, hNext); }));
      } else if (!s.twoPhases) {
        accumulateRows<3>(rows, weights, stride, K, in, finishing([&](const BlockRow &q, const Lanes *acc) {
                            finishGruLinearBeforeReset(q, acc, hPrev, hNext);
                          }));
      } else if (phase == 0) {
        accumulateRows<2>(rows, weights, stride, K, in,
                          finishing([&](const BlockRow &q, const Lanes *acc) { gruGates(q, acc, hPrev); }));
      } else {
        accumulateRows<1>(rows, weights, stride, K, in, finishing([&](const BlockRow &q, const Lanes *acc) {
                            gruCandidate(q, acc, hPrev, hNext);
                          }));
      }
    }
  }
}

/// Every step of direction d for rows [b0, b1), all blocks: no other thread touches them.
void runRows(const Sequence &s, int64_t d, int64_t b0, int64_t b1) {
  for (int64_t k = 0; k < s.T; ++k)
    for (int phase = 0; phase < s.phases(); ++phase)
      runBlocks(s, d, k, phase, b0, b1, 0, s.blocks);
}

/// The split of one direction's steps between threads (see the file comment).
struct SharedSteps {
  const Sequence *s;
  int64_t parts; // per phase
  std::atomic<int64_t> claimed{0}, finished{0};
};

void runSharedSteps(void *ctx, int64_t, int64_t) {
  SharedSteps &shared = *static_cast<SharedSteps *>(ctx);
  const Sequence &s = *shared.s;
  const int64_t phases = s.phases(), total = s.T * phases * shared.parts;
  for (int64_t unit; (unit = shared.claimed.fetch_add(1, std::memory_order_relaxed)) < total;) {
    const int64_t phaseIndex = unit / shared.parts, part = unit % shared.parts;
    // Spin (a phase lasts microseconds), but yield now and then: on a busy machine the thread
    // running the unit waited for may have lost its core.
    for (int spins = 1; shared.finished.load(std::memory_order_acquire) < phaseIndex * shared.parts; ++spins) {
      if (spins % 4096 == 0)
        std::this_thread::yield();
#if defined(__x86_64__)
      __builtin_ia32_pause();
#endif
    }
    runBlocks(s, 0, phaseIndex / phases, static_cast<int>(phaseIndex % phases), 0, s.B,
              part * s.blocks / shared.parts, (part + 1) * s.blocks / shared.parts);
    shared.finished.fetch_add(1, std::memory_order_release);
  }
}

struct RowItems {
  const Sequence *s;
  int64_t partsPerDirection;
};

void runRowItems(void *ctx, int64_t begin, int64_t end) {
  const RowItems &items = *static_cast<const RowItems *>(ctx);
  const Sequence &s = *items.s;
  for (int64_t item = begin; item < end; ++item) {
    const int64_t d = item / items.partsPerDirection, part = item % items.partsPerDirection;
    runRows(s, d, part * s.B / items.partsPerDirection, (part + 1) * s.B / items.partsPerDirection);
  }
}

bool plainFunctions(const kiln_recurrence_args &a, int64_t d) {
  const int count = a.cell == KILN_CELL_RNN ? 1 : a.cell == KILN_CELL_GRU ? 2 : 3;
  for (int i = 0; i < count; ++i) {
    const int32_t want = i == 0 && a.cell != KILN_CELL_RNN ? KILN_ACT_SIGMOID : KILN_ACT_TANH;
    if (a.functions[d][i].kind != want)
      return false;
  }
  return true;
}

} // namespace

namespace detail {

Lanes activate(const kiln_cell_function &f, Lanes x) {
  auto perLane = [&](auto fn) {
    alignas(64) float v[kLanes];
    store(v, x);
    for (float &value : v)
      value = fn(value);
    return load(v);
  };
  const Lanes zero = splat(0.0f), alpha = splat(f.alpha), beta = splat(f.beta);
  switch (f.kind) {
  case KILN_ACT_SIGMOID: return sigmoid(x);
  case KILN_ACT_TANH: return tanh(x);
  case KILN_ACT_RELU: return selectLess(zero, x, x, zero);
  case KILN_ACT_LEAKY_RELU: return selectLess(x, zero, mul(alpha, x), x);
  case KILN_ACT_THRESHOLDED_RELU: return selectLess(alpha, x, x, zero);
  case KILN_ACT_ELU: return perLane([&](float v) { return v >= 0 ? v : f.alpha * std::expm1(v); });
  case KILN_ACT_SOFTSIGN: return div(x, add(splat(1.0f), abs(x)));
  case KILN_ACT_SOFTPLUS:
    return perLane([](float v) { return std::max(v, 0.0f) + std::log1p(std::exp(-std::fabs(v))); });
  case KILN_ACT_HARD_SIGMOID: return min(splat(1.0f), max(zero, fma(alpha, x, beta)));
  case KILN_ACT_AFFINE: return fma(alpha, x, beta);
  case KILN_ACT_SCALED_TANH: return mul(alpha, tanh(mul(beta, x)));
  default: return x; // codegen writes only the kinds above
  }
}

} // namespace detail

int64_t recurrentWeightFloats(int64_t directions, int64_t gates, int64_t hidden) {
  return directions * blocksOf(hidden) * hidden * gates * kLanes;
}

void packRecurrentWeights(const float *r, int64_t directions, int64_t gates, int64_t hidden, float *dst) {
  const int64_t blocks = blocksOf(hidden);
  for (int64_t d = 0; d < directions; ++d)
    for (int64_t jb = 0; jb < blocks; ++jb)
      for (int64_t k = 0; k < hidden; ++k)
        for (int64_t g = 0; g < gates; ++g)
          for (int64_t lane = 0; lane < kLanes; ++lane) {
            const int64_t j = jb * kLanes + lane;
            *dst++ = j < hidden ? r[((d * gates + g) * hidden + j) * hidden + k] : 0.0f;
          }
}

void recurrence(const kiln_rt *rt, const kiln_recurrence_args *args) {
  const kiln_recurrence_args &a = *args;
  Sequence s;
  s.a = args;
  s.T = a.steps, s.B = a.batch, s.H = a.hidden, s.D = a.directions, s.G = gatesOf(a.cell);
  s.blocks = blocksOf(s.H);
  s.width = s.blocks * kLanes;
  s.twoPhases = a.cell == KILN_CELL_GRU && !a.linear_before_reset;
  if (s.B == 0 || s.H == 0)
    return;
  const int64_t stateFloats = s.D * s.B * s.width;
  const bool packHere = a.r_layout != KILN_RECURRENCE_R_GATE_BLOCKS;
  float *space = scratch(Scratch::Recurrence,
                         static_cast<size_t>(5 * stateFloats + (packHere ? recurrentWeightFloats(s.D, s.G, s.H) : 0)));
  s.h[0] = space;
  s.h[1] = space + stateFloats;
  s.c = space + 2 * stateFloats;
  s.reset = space + 3 * stateFloats;
  s.update = space + 4 * stateFloats;
  if (packHere)
    packRecurrentWeights(a.r, s.D, s.G, s.H, space + 5 * stateFloats);
  s.weights = packHere ? space + 5 * stateFloats : a.r;
  std::fill(space, space + 5 * stateFloats, 0.0f); // the padding lanes too
  for (int64_t d = 0; d < s.D; ++d) {
    s.plainFunctions[d] = plainFunctions(a, d);
    for (int64_t b = 0; b < s.B; ++b) {
      std::memcpy(s.h[0] + s.state(d, b), a.h0 + (d * s.B + b) * s.H, sizeof(float) * s.H);
      if (a.cell == KILN_CELL_LSTM)
        std::memcpy(s.c + s.state(d, b), a.c0 + (d * s.B + b) * s.H, sizeof(float) * s.H);
    }
  }

  const int64_t stepWork = s.G * s.H * s.H, work = s.T * s.D * s.B * stepWork;
  const int64_t threads = rt->num_threads;
  if (threads <= 1 || work < kMinParallelWork) {
    for (int64_t d = 0; d < s.D; ++d)
      runRows(s, d, 0, s.B);
  } else if (s.D * s.B >= 2) {
    RowItems items{&s, std::clamp<int64_t>(threads / s.D, 1, s.B)};
    rt->parallel_for(rt, s.D * items.partsPerDirection, 1, runRowItems, &items);
  } else if (stepWork * s.B >= kMinSplitStepWork && s.blocks >= 2) {
    SharedSteps shared;
    shared.s = &s;
    shared.parts = std::min<int64_t>(threads, s.blocks);
    rt->parallel_for(rt, shared.parts, 1, runSharedSteps, &shared);
  } else {
    runRows(s, 0, 0, s.B);
  }

  const float *last = s.h[s.T % 2];
  for (int64_t d = 0; d < s.D; ++d)
    for (int64_t b = 0; b < s.B; ++b) {
      std::memcpy(a.h_n + (d * s.B + b) * s.H, last + s.state(d, b), sizeof(float) * s.H);
      if (a.cell == KILN_CELL_LSTM)
        std::memcpy(a.c_n + (d * s.B + b) * s.H, s.c + s.state(d, b), sizeof(float) * s.H);
    }
}

} // namespace kiln::runtime::kernels
