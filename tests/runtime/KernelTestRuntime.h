#pragma once
// The kiln_rt that the precompiled-kernel tests (Gemm, Conv2d, Winograd, Pool2d) run on: its
// parallel_for runs chunks on fresh std::threads (or inline with 1 thread), cut like kiln's
// pool: equal contiguous chunks, at most one per thread; every kernel entry is filled in.
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

inline kiln_rt makeRuntime(int threads) {
  kiln_rt rt{};
  rt.abi_version = KILN_ABI_VERSION;
  rt.num_threads = threads;
  rt.parallel_for = threadedParallelFor;
  rt.gemm = gemm;
  rt.conv2d = conv2d;
  rt.pool2d = pool2d;
  rt.conv2d_weight_grad = conv2dWeightGrad;
  return rt;
}

} // namespace kiln::runtime::kernels::test
