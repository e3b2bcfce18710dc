#include "runtime/KernelRuntime.h"

#include "runtime/ThreadPool.h"
#include "runtime/kernels/Kernels.h"

namespace kiln::runtime {

namespace {

void parallelForOnPool(const kiln_rt *rt, int64_t n, int64_t grain, kiln_range_fn fn, void *ctx) {
  static_cast<ThreadPool *>(rt->impl)->parallelFor(n, grain, fn, ctx);
}

void parallelForBalancedOnPool(const kiln_rt *rt, int64_t n, int64_t grain, kiln_range_fn fn, void *ctx) {
  static_cast<ThreadPool *>(rt->impl)->parallelForBalanced(n, grain, fn, ctx);
}

void parallelForInline(const kiln_rt *, int64_t n, int64_t, kiln_range_fn fn, void *ctx) {
  if (n > 0)
    fn(ctx, 0, n);
}

/// The table with the heavy kernels and the given parallelism.
kiln_rt kernelTable(int32_t threads, decltype(kiln_rt::parallel_for) parallelFor,
                    decltype(kiln_rt::parallel_for_balanced) parallelForBalanced, void *impl) {
  kiln_rt rt{};
  rt.abi_version = KILN_ABI_VERSION;
  rt.num_threads = threads;
  rt.parallel_for = parallelFor;
  rt.gemm = kernels::gemm;
  rt.conv2d = kernels::conv2d;
  rt.pool2d = kernels::pool2d;
  rt.conv2d_weight_grad = kernels::conv2dWeightGrad;
  rt.impl = impl;
  rt.parallel_for_balanced = parallelForBalanced;
  rt.recurrence = kernels::recurrence;
  rt.qgemm = kernels::qgemm;
  rt.qconv2d = kernels::qconv2d;
  return rt;
}

} // namespace

kiln_rt makeKernelRuntime(ThreadPool &pool) {
  return kernelTable(pool.numThreads(), parallelForOnPool, parallelForBalancedOnPool, &pool);
}

kiln_rt makeSerialKernelRuntime() { return kernelTable(1, parallelForInline, parallelForInline, nullptr); }

} // namespace kiln::runtime
