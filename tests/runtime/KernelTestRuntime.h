#pragma once
// The kiln_rt that the precompiled-kernel tests (Gemm, Conv2d, Winograd, Pool2d) run on: its
// parallel_for runs chunks on fresh std::threads (or inline with 1 thread), cut like kiln's
// pool: equal contiguous chunks, at most one per thread (parallel_for_balanced: a few per
// thread, dealt out in another order than the pool's); every kernel entry is filled in.
#include <algorithm>
#include <cstdint>
#include <thread>
#include <vector>

#include "runtime/KernelAbi.h"
#include "runtime/kernels/Kernels.h"

namespace kiln::runtime::kernels::test {

inline void threadedParallelFor(const kiln_rt *rt, int64_t n, int64_t grain, kiln_range_fn fn, void *ctx) {
  const int64_t chunks = std::max<int64_t>(1, std::min<int64_t>(rt->num_threads, n / std::max<int64_t>(grain, 1)));
  std::vector<std::thread> threads;
  for (int64_t c = 1; c < chunks; ++c)
    threads.emplace_back([=] { fn(ctx, c * n / chunks, (c + 1) * n / chunks); });
  fn(ctx, 0, n / chunks);
  for (std::thread &t : threads)
    t.join();
}

/// parallel_for_balanced: up to 4 chunks per thread, cut like kiln's pool, but dealt out
/// round-robin and each thread's run backwards, so that kernels see their parts run by any
/// thread in any order (kiln's pool does so when a thread takes over a slower one's parts).
inline void threadedParallelForBalanced(const kiln_rt *rt, int64_t n, int64_t grain, kiln_range_fn fn, void *ctx) {
  const int64_t chunks =
      std::max<int64_t>(1, std::min<int64_t>(int64_t{rt->num_threads} * 4, n / std::max<int64_t>(grain, 1)));
  const int64_t workers = std::min<int64_t>(rt->num_threads, chunks);
  auto runOwn = [=](int64_t t) {
    for (int64_t c = (chunks - 1 - t) / workers * workers + t; c >= 0; c -= workers)
      fn(ctx, c * n / chunks, (c + 1) * n / chunks);
  };
  std::vector<std::thread> threads;
  for (int64_t t = 1; t < workers; ++t)
    threads.emplace_back(runOwn, t);
  runOwn(0);
  for (std::thread &t : threads)
    t.join();
}

inline kiln_rt makeRuntime(int threads) {
  kiln_rt rt{};
  rt.abi_version = KILN_ABI_VERSION;
  rt.num_threads = threads;
  rt.parallel_for = threadedParallelFor;
  rt.gemm = gemm;
  rt.conv2d = conv2d;
  rt.pool2d = pool2d;
  rt.conv2d_weight_grad = conv2dWeightGrad;
  rt.parallel_for_balanced = threadedParallelForBalanced;
  rt.recurrence = recurrence;
  rt.qgemm = qgemm;
  rt.qconv2d = qconv2d;
  return rt;
}

} // namespace kiln::runtime::kernels::test
