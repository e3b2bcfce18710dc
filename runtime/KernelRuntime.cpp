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

} // namespace

kiln_rt makeKernelRuntime(ThreadPool &pool) {
  kiln_rt rt{};
  rt.abi_version = KILN_ABI_VERSION;
  rt.num_threads = pool.numThreads();
  rt.parallel_for = parallelForOnPool;
  rt.gemm = kernels::gemm;
  rt.conv2d = kernels::conv2d;
  rt.pool2d = kernels::pool2d;
  rt.conv2d_weight_grad = kernels::conv2dWeightGrad;
  rt.impl = &pool;
  rt.parallel_for_balanced = parallelForBalancedOnPool;
  rt.recurrence = kernels::recurrence;
  rt.qgemm = kernels::qgemm;
  rt.qconv2d = kernels::qconv2d;
  return rt;
}

} // namespace kiln::runtime
