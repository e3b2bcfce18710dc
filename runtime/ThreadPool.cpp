// The pool in stages:
//  1. The caller cuts [0, n) into numChunks equal parts (static: with two cores, the common
//     case, each thread gets one half and nobody idles at the end).
//  2. It publishes the job by opening a new sequence in state_ and wakes sleeping workers.
//  3. Each thread first claims its home chunk (the caller chunk 0, worker i chunk i), then any
//     chunk still unclaimed, so a worker that is slow to wake costs nothing: the caller simply
//     runs its chunk too. Home chunks keep data on one core from one parallelFor to the next
//     (a convolution's transformed weights, written in one loop over output channels and read
//     in the next): on this machine the two cores are at times on different L3s, and a part
//     written by the other core then comes at DRAM speed. With one shared counter, which
//     thread took which chunk depended on the race, and 2-thread layer times were bimodal.
//     parallelForBalanced cuts up to kChunksPerThread chunks per thread: thread t's run is
//     the chunks it would own under parallelFor; it runs them in order, then the other runs'
//     unclaimed chunks from their far ends. On these shared machines one core at times runs
//     slower for seconds; with one chunk each, the other then waits at every join.
//  4. The caller closes the job once every joined worker has left; since all chunks were
//     claimed before that, all have finished, and their writes are visible to the caller
//     (each worker's leaving decrement releases, the caller's closing CAS acquires).
#include "runtime/ThreadPool.h"

#include <algorithm>
#include <cstdlib>
#include <string>

#include "core/Error.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace kiln::runtime {

namespace {

thread_local bool tlInParallelRegion = false;

inline void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#else
  std::this_thread::yield();
#endif
}

/// Sets tlInParallelRegion for the lifetime of the guard.
class RegionGuard {
public:
  RegionGuard() : previous_(tlInParallelRegion) { tlInParallelRegion = true; }
  ~RegionGuard() { tlInParallelRegion = previous_; }

private:
  bool previous_;
};

// The participant count shares state_ with the sequence; far more threads than any machine
// has, and well inside its 16 bits.
constexpr int kMaxThreads = 1024;

} // namespace

ThreadPool::ThreadPool(Options options) : spin_(options.spin) {
  int threads = options.numThreads;
  if (threads <= 0)
    threads = static_cast<int>(std::thread::hardware_concurrency());
  numThreads_ = std::clamp(threads, 1, kMaxThreads);
  claimed_ = std::make_unique<std::atomic<bool>[]>(static_cast<size_t>(numThreads_) * kChunksPerThread);
  workers_.reserve(static_cast<size_t>(numThreads_ - 1));
  for (int i = 1; i < numThreads_; ++i)
    workers_.emplace_back([this, i] { workerLoop(i); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true, std::memory_order_seq_cst);
  { std::lock_guard<std::mutex> lock(sleepMutex_); }
  wake_.notify_all();
  for (std::thread &worker : workers_)
    worker.join();
}

int64_t ThreadPool::numChunks(int64_t n, int64_t grain) const {
  if (n <= 0)
    return 0;
  grain = std::max<int64_t>(grain, 1);
  return std::clamp<int64_t>(n / grain, 1, numThreads_);
}

std::pair<int64_t, int64_t> ThreadPool::chunkRange(int64_t n, int64_t chunks, int64_t index) {
  // base * index never overflows: it is at most n.
  int64_t base = n / chunks, remainder = n % chunks;
  int64_t begin = index * base + std::min(index, remainder);
  return {begin, begin + base + (index < remainder ? 1 : 0)};
}

bool ThreadPool::inParallelRegion() { return tlInParallelRegion; }

void ThreadPool::parallelFor(int64_t n, int64_t grain, RangeFn fn, void *ctx) {
  run(n, numChunks(n, grain), false, fn, ctx);
}

void ThreadPool::parallelForBalanced(int64_t n, int64_t grain, RangeFn fn, void *ctx) {
  if (n <= 0)
    return;
  const int64_t chunks = std::clamp<int64_t>(n / std::max<int64_t>(grain, 1), 1,
                                             int64_t{numThreads_} * kChunksPerThread);
  run(n, chunks, chunks > numThreads_, fn, ctx);
}

void ThreadPool::run(int64_t n, int64_t chunks, bool balanced, RangeFn fn, void *ctx) {
  if (chunks == 0)
    return;
  if (chunks == 1) {
    // One chunk needs no other thread; the caller stays free to parallelise inside it.
    fn(ctx, 0, n);
    return;
  }
  if (tlInParallelRegion || busy_.exchange(true, std::memory_order_acquire)) {
    runInline(n, chunks, fn, ctx);
    return;
  }

  job_ = Job{fn, ctx, n, chunks, balanced};
  for (int64_t i = 0; i < chunks; ++i)
    claimed_[static_cast<size_t>(i)].store(false, std::memory_order_relaxed);
  uint64_t seq = (state_.load(std::memory_order_relaxed) >> kSeqShift) + 1; // odd: open
  // seq_cst on both this store and the load of sleepers_ (and on the worker's increment of
  // sleepers_ before it re-reads state_): either the worker sees the job or we see it asleep.
  state_.store(seq << kSeqShift, std::memory_order_seq_cst);
  if (sleepers_.load(std::memory_order_seq_cst) > 0) {
    { std::lock_guard<std::mutex> lock(sleepMutex_); }
    wake_.notify_all();
  }

  {
    RegionGuard guard;
    claimAndRunChunks(0);
  }

  // Close: wait for joined workers to leave. They only finish chunks already claimed, so this
  // wait is as long as the slowest chunk; yield now and then in case a worker was preempted.
  // Only a plain load while workers are inside, so the CAS does not keep pulling the cache line
  // away from the worker's leaving decrement.
  uint64_t open = seq << kSeqShift, closed = (seq + 1) << kSeqShift;
  for (int spins = 0;; ++spins) {
    uint64_t expected = open;
    if (state_.load(std::memory_order_relaxed) == open &&
        state_.compare_exchange_weak(expected, closed, std::memory_order_acq_rel,
                                     std::memory_order_relaxed))
      break;
    if (spins % 256 == 255)
      std::this_thread::yield();
    else
      cpuRelax();
  }
  busy_.store(false, std::memory_order_release);
}

void ThreadPool::runInline(int64_t n, int64_t chunks, RangeFn fn, void *ctx) {
  RegionGuard guard;
  for (int64_t i = 0; i < chunks; ++i) {
    auto [begin, end] = chunkRange(n, chunks, i);
    fn(ctx, begin, end);
  }
}

void ThreadPool::tryChunk(int64_t index) {
  std::atomic<bool> &claim = claimed_[static_cast<size_t>(index)];
  // A plain load first: a chunk already taken costs no write to its line.
  if (claim.load(std::memory_order_relaxed) || claim.exchange(true, std::memory_order_relaxed))
    return;
  auto [begin, end] = chunkRange(job_.n, job_.chunks, index);
  job_.fn(job_.ctx, begin, end);
}

void ThreadPool::claimAndRunChunks(int home) noexcept {
  const int64_t chunks = job_.chunks;
  if (!job_.balanced) {
    for (int64_t step = 0; step < chunks; ++step)
      tryChunk((home + step) % chunks);
    return;
  }
  // Thread t's run is chunks [t*C/T, (t+1)*C/T): its own in order, then the others' from the
  // back, where their owners will get last.
  auto [first, last] = chunkRange(chunks, numThreads_, home);
  for (int64_t index = first; index < last; ++index)
    tryChunk(index);
  for (int step = 1; step < numThreads_; ++step) {
    auto [otherFirst, otherLast] = chunkRange(chunks, numThreads_, (home + step) % numThreads_);
    for (int64_t index = otherLast - 1; index >= otherFirst; --index)
      tryChunk(index);
  }
}

bool ThreadPool::tryJoin(uint64_t seq) {
  uint64_t state = state_.load(std::memory_order_relaxed);
  while ((state >> kSeqShift) == seq) {
    if (state_.compare_exchange_weak(state, state + 1, std::memory_order_acquire,
                                     std::memory_order_relaxed))
      return true;
  }
  return false;
}

uint64_t ThreadPool::waitForJob(uint64_t lastSeq) {
  auto openJob = [&]() -> uint64_t {
    uint64_t seq = state_.load(std::memory_order_seq_cst) >> kSeqShift;
    return (seq & 1) && seq != lastSeq ? seq : 0;
  };

  // Spin first, reading the clock only every 64 pauses (a pause is tens of cycles).
  auto deadline = std::chrono::steady_clock::now() + spin_;
  for (;;) {
    for (int i = 0; i < 64; ++i) {
      if (stop_.load(std::memory_order_relaxed))
        return 0;
      if (uint64_t seq = openJob())
        return seq;
      cpuRelax();
    }
    if (std::chrono::steady_clock::now() >= deadline)
      break;
  }

  std::unique_lock<std::mutex> lock(sleepMutex_);
  sleepers_.fetch_add(1, std::memory_order_seq_cst);
  uint64_t seq = 0;
  wake_.wait(lock, [&] {
    if (stop_.load(std::memory_order_seq_cst))
      return true;
    seq = openJob();
    return seq != 0;
  });
  sleepers_.fetch_sub(1, std::memory_order_relaxed);
  return stop_.load(std::memory_order_relaxed) ? 0 : seq;
}

void ThreadPool::workerLoop(int home) {
  // A worker never starts a nested parallel region: it is already one of the pool's threads.
  tlInParallelRegion = true;
  uint64_t lastSeq = 0;
  for (;;) {
    uint64_t seq = waitForJob(lastSeq);
    if (seq == 0)
      return;
    lastSeq = seq;
    if (!tryJoin(seq))
      continue; // closed before we got there: the caller ran our share
    claimAndRunChunks(home);
    state_.fetch_sub(1, std::memory_order_release);
  }
}

std::shared_ptr<ThreadPool> defaultThreadPool() {
  static std::shared_ptr<ThreadPool> pool = [] {
    int threads = 0;
    if (const char *env = std::getenv("KILN_NUM_THREADS"); env && *env) {
      char *end = nullptr;
      long value = std::strtol(env, &end, 10);
      if (*end != '\0' || value < 1 || value > kMaxThreads)
        fail("KILN_NUM_THREADS='{}' is not a thread count between 1 and {}", env, kMaxThreads);
      threads = static_cast<int>(value);
    }
    return std::make_shared<ThreadPool>(threads);
  }();
  return pool;
}

} // namespace kiln::runtime
