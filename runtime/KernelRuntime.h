#pragma once
// The kiln_rt table (runtime/KernelAbi.h): what generated kernels call back into. Its
// parallel_for runs on a kiln ThreadPool, and gemm, conv2d and pool2d are the precompiled
// heavy kernels of runtime/kernels/. An Executable builds one per loaded model; tests and
// tools that call generated or heavy kernels directly build their own.
#include "runtime/KernelAbi.h"

namespace kiln::runtime {

class ThreadPool;

/// A table whose parallel_for runs on `pool` (which must outlive every use of the table) and
/// whose num_threads is pool.numThreads().
kiln_rt makeKernelRuntime(ThreadPool &pool);

/// A table for one thread: num_threads is 1 and parallel_for runs the whole range inline, so
/// that kernels plan for the one thread they get (no split whose parts would then run one
/// after another). An Executable runs batch tiles side by side on it, one tile per thread.
kiln_rt makeSerialKernelRuntime();

} // namespace kiln::runtime
