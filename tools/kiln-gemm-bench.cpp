// kiln-gemm-bench: GFLOP/s of kiln's precompiled f32 kernels (runtime/kernels/).
//
//   kiln-gemm-bench [--threads N] [--reps R] [--cpu-time] [SIZES...]
//       square SGEMM, default sizes 256 512 1024 2048
//   kiln-gemm-bench --conv [--threads N] [--reps R] [--cpu-time]
//       ResNet-50's common convolutions, batch 1
//
// Each figure is the median of R timed runs (default: as many as fit in ~0.6 s, at least 5)
// after one warm-up run. --cpu-time times the calling thread's CPU time instead of wall time:
// on a machine shared with other jobs it discounts the time slices they take (1 thread only).
// Threads come from a small pool of this tool's own, cut like kiln's pool (one equal
// contiguous chunk per thread); its threads spin, then yield, while they wait.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "runtime/kernels/Kernels.h"

namespace {

class SpinPool {
public:
  explicit SpinPool(int threads) : threads_(threads) {
    for (int t = 1; t < threads; ++t)
      workers_.emplace_back([this, t] { work(t); });
  }
  ~SpinPool() {
    stop_.store(true);
    for (std::thread &w : workers_)
      w.join();
  }
  int threads() const { return threads_; }

  void parallelFor(int64_t n, kiln_range_fn fn, void *ctx) {
    if (threads_ == 1 || n <= 1) {
      fn(ctx, 0, n);
      return;
    }
    fn_ = fn, ctx_ = ctx, n_ = n;
    pending_.store(threads_ - 1, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
    runChunk(0);
    for (int spins = 0; pending_.load(std::memory_order_acquire) > 0; ++spins)
      relax(spins);
  }

private:
  void runChunk(int t) {
    const int64_t begin = t * n_ / threads_, end = (t + 1) * n_ / threads_;
    if (begin < end)
      fn_(ctx_, begin, end);
  }
  // Spin, then yield: on a machine shared with other jobs a worker that only spins can hold
  // the core that the thread it waits for needs.
  static void relax(int spins) {
    if (spins < 4096)
      __builtin_ia32_pause();
    else
      std::this_thread::yield();
  }

  void work(int t) {
    uint64_t seen = 0;
    for (;;) {
      uint64_t now;
      for (int spins = 0; (now = generation_.load(std::memory_order_acquire)) == seen; ++spins) {
        if (stop_.load(std::memory_order_relaxed))
          return;
        relax(spins);
      }
      seen = now;
      runChunk(t);
      pending_.fetch_sub(1, std::memory_order_release);
    }
  }

  int threads_;
  std::vector<std::thread> workers_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
  kiln_range_fn fn_ = nullptr;
  void *ctx_ = nullptr;
  int64_t n_ = 0;
};

void poolParallelFor(const kiln_rt *rt, int64_t n, int64_t, kiln_range_fn fn, void *ctx) {
  static_cast<SpinPool *>(rt->impl)->parallelFor(n, fn, ctx);
}

std::vector<float> randomVector(size_t size, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(size);
  for (float &x : v)
    x = dist(rng);
  return v;
}

bool useCpuTime = false;

double now() {
  if (useCpuTime) {
    timespec t{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

/// Median seconds of `run` over reps timed runs (reps <= 0: as many as fit in ~0.6 s, >= 5).
template <typename Fn> double medianSeconds(Fn &&run, int reps) {
  auto time = [&] {
    const double start = now();
    run();
    return now() - start;
  };
  const double first = time(); // warm-up: page faults, packing buffers
  if (reps <= 0)
    reps = std::clamp(static_cast<int>(0.6 / std::max(first, 1e-6)), 5, 200);
  std::vector<double> times;
  for (int r = 0; r < reps; ++r)
    times.push_back(time());
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

void benchGemm(const kiln_rt &rt, int64_t size, int reps) {
  const size_t elements = static_cast<size_t>(size * size);
  std::vector<float> a = randomVector(elements, 1), b = randomVector(elements, 2), c(elements);
  kiln_gemm_args args{};
  args.m = args.n = args.k = size;
  args.batch = 1;
  args.a = a.data(), args.lda = size;
  args.b = b.data(), args.ldb = size;
  args.c = c.data(), args.ldc = size;
  const double seconds = medianSeconds([&] { kiln::runtime::kernels::gemm(&rt, &args); }, reps);
  std::printf("sgemm %5lld  threads %d  %8.3f ms  %7.1f GFLOP/s\n", static_cast<long long>(size),
              rt.num_threads, seconds * 1e3, 2.0 * size * size * size / seconds * 1e-9);
}

void benchConv(const kiln_rt &rt, const char *name, int64_t c, int64_t hw, int64_t k, int64_t r,
               int64_t stride, int reps) {
  kiln_conv2d_args args{};
  args.n = 1, args.c = c, args.h = args.w = hw;
  args.k = k, args.r = args.s = r;
  args.stride_h = args.stride_w = stride;
  args.pad_top = args.pad_left = r / 2;
  args.dilation_h = args.dilation_w = 1;
  args.groups = 1;
  args.oh = args.ow = (hw + 2 * (r / 2) - r) / stride + 1;
  std::vector<float> x = randomVector(static_cast<size_t>(c * hw * hw), 1);
  std::vector<float> w = randomVector(static_cast<size_t>(k * c * r * r), 2);
  std::vector<float> y(static_cast<size_t>(k * args.oh * args.ow));
  args.x = x.data(), args.weights = w.data(), args.y = y.data();
  const double seconds = medianSeconds([&] { kiln::runtime::kernels::conv2d(&rt, &args); }, reps);
  const double flops = 2.0 * k * c * r * r * args.oh * args.ow;
  std::printf("conv %-28s threads %d  %8.3f ms  %7.1f GFLOP/s\n", name, rt.num_threads, seconds * 1e3,
              flops / seconds * 1e-9);
}

int usage() {
  std::fprintf(stderr, "usage: kiln-gemm-bench [--threads N] [--reps R] [--cpu-time] [--conv] [SIZES...]\n");
  return 2;
}

} // namespace

int main(int argc, char **argv) {
  int threads = 1, reps = 0;
  bool conv = false;
  std::vector<int64_t> sizes;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if ((arg == "--threads" || arg == "--reps") && i + 1 < argc) {
      const int value = std::atoi(argv[++i]);
      if (value < (arg == "--threads" ? 1 : 0))
        return usage();
      (arg == "--threads" ? threads : reps) = value;
    } else if (arg == "--conv") {
      conv = true;
    } else if (arg == "--cpu-time") {
      useCpuTime = true;
    } else {
      char *end = nullptr;
      const long long size = std::strtoll(arg.c_str(), &end, 10);
      if (*end != '\0' || size < 1 || size > 16384)
        return usage();
      sizes.push_back(size);
    }
  }
  if (sizes.empty())
    sizes = {256, 512, 1024, 2048};
  if (useCpuTime && threads != 1) {
    std::fprintf(stderr, "kiln-gemm-bench: --cpu-time needs --threads 1\n");
    return 2;
  }

  SpinPool pool(threads);
  kiln_rt rt{};
  rt.abi_version = KILN_ABI_VERSION;
  rt.num_threads = threads;
  rt.parallel_for = poolParallelFor;
  rt.gemm = kiln::runtime::kernels::gemm;
  rt.conv2d = kiln::runtime::kernels::conv2d;
  rt.pool2d = kiln::runtime::kernels::pool2d;
  rt.impl = &pool;

  if (conv) {
    benchConv(rt, "3x3 64->64 56x56", 64, 56, 64, 3, 1, reps);
    benchConv(rt, "1x1 256->64 56x56", 256, 56, 64, 1, 1, reps);
    benchConv(rt, "1x1 64->256 56x56", 64, 56, 256, 1, 1, reps);
    benchConv(rt, "3x3 128->128 28x28", 128, 28, 128, 3, 1, reps);
    benchConv(rt, "3x3 256->256 14x14", 256, 14, 256, 3, 1, reps);
    benchConv(rt, "3x3 512->512 7x7", 512, 7, 512, 3, 1, reps);
    benchConv(rt, "7x7/2 3->64 224x224", 3, 224, 64, 7, 2, reps);
    return 0;
  }
  for (int64_t size : sizes)
    benchGemm(rt, size, reps);
  return 0;
}
