#pragma once
// kiln's thread pool: the one place the runtime gets parallelism from. Generated kernels and
// the heavy kernels reach it through kiln_rt::parallel_for (runtime/KernelAbi.h).
//
// What it promises:
//  - parallelFor(n, grain, fn) splits [0, n) into equal contiguous chunks of at least `grain`
//    iterations, at most one per thread (workers plus the calling thread), and returns when
//    all have run. The chunk boundaries depend only on (n, grain, numThreads()): the same
//    chunks run whether they run in parallel or inline, so results never depend on timing.
//  - Chunk i belongs to thread i (the caller is thread 0): a thread runs its own chunk first
//    and then helps with any chunk nobody has started, so a loop that splits work the same way
//    as the one before it finds its data in the same core's caches whenever all threads are
//    awake.
//  - parallelForBalanced cuts a few chunks per thread, so that a thread come free takes over
//    the unstarted chunks of a slower one; each still starts with its own run of chunks.
//  - Idle workers spin for a short while (Options::spin) before they sleep on a condition
//    variable: a fork and join with a spinning worker costs ~0.1 us here, waking a sleeping
//    one ~5 us, so back-to-back kernels of one inference never pay the wake-up.
//  - No nested parallelism: a parallelFor from inside a chunk runs inline.
//  - Several threads may call parallelFor on one pool at once (Executable::run from several
//    threads). The first takes the pool; the others, rather than queue behind it, run their
//    chunks inline on their own thread. No caller ever waits for another caller's work, and
//    no more threads run than the pool's workers plus the callers.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

namespace kiln::runtime {

class ThreadPool {
public:
  /// Work item: handles [begin, end). Must not throw (it may run on a worker thread).
  using RangeFn = void (*)(void *ctx, int64_t begin, int64_t end);

  struct Options {
    /// Threads that run a parallelFor, the calling thread included (so numThreads - 1
    /// workers); 0 or less means one per core (std::thread::hardware_concurrency).
    int numThreads = 0;
    /// How long an idle worker spins (with a pause instruction) before it sleeps. Waking a
    /// sleeping worker costs ~20 us, more than many kernels take: after 50 us of spinning,
    /// two-thread runs of GoogLeNet, MnasNet and SqueezeNet were 1-3% slower than after 300.
    std::chrono::microseconds spin{300};
  };

  ThreadPool() : ThreadPool(Options{}) {}
  explicit ThreadPool(int numThreads) : ThreadPool(Options{numThreads}) {}
  explicit ThreadPool(Options options);
  /// Joins the workers. No parallelFor may be running.
  ~ThreadPool();
  ThreadPool(const ThreadPool &) = delete;
  ThreadPool &operator=(const ThreadPool &) = delete;

  /// Workers plus the calling thread.
  int numThreads() const { return numThreads_; }

  void parallelFor(int64_t n, int64_t grain, RangeFn fn, void *ctx);

  /// parallelFor with up to kChunksPerThread chunks per thread, claimed as the threads come
  /// free: each thread runs its own run of consecutive chunks (its share under parallelFor)
  /// first, in order, then takes the other runs' unstarted chunks from their far ends. The
  /// chunk boundaries still depend only on (n, grain, numThreads()). For loops whose chunks
  /// cost nothing extra to cut finer: when one core runs slower for a while (a busy sibling
  /// on the host), the other takes over part of its share instead of waiting at the join.
  void parallelForBalanced(int64_t n, int64_t grain, RangeFn fn, void *ctx);
  static constexpr int kChunksPerThread = 4;

  /// The same for a C++ callable `fn(int64_t begin, int64_t end)`.
  template <typename Fn> void parallelFor(int64_t n, int64_t grain, Fn &&fn) {
    using Callable = std::remove_reference_t<Fn>;
    RangeFn thunk = [](void *ctx, int64_t begin, int64_t end) {
      (*static_cast<Callable *>(ctx))(begin, end);
    };
    parallelFor(n, grain, thunk, const_cast<void *>(static_cast<const void *>(std::addressof(fn))));
  }

  /// How many chunks parallelFor(n, grain, ...) runs: min(numThreads, n / grain), at least 1
  /// (0 when n <= 0). A grain below 1 counts as 1.
  int64_t numChunks(int64_t n, int64_t grain) const;
  /// Chunk `index` of [0, n) cut into `chunks` near-equal parts (sizes differ by at most 1,
  /// the larger ones first).
  static std::pair<int64_t, int64_t> chunkRange(int64_t n, int64_t chunks, int64_t index);

  /// Whether the current thread is a pool worker or is running a chunk of a parallelFor.
  static bool inParallelRegion();

private:
  struct Job {
    RangeFn fn = nullptr;
    void *ctx = nullptr;
    int64_t n = 0;
    int64_t chunks = 0;
    bool balanced = false; // chunks claimed in runs (parallelForBalanced)
  };
  void run(int64_t n, int64_t chunks, bool balanced, RangeFn fn, void *ctx);
  /// Runs chunk `index` if nobody has claimed it yet.
  void tryChunk(int64_t index);

  /// `home`: the chunk this worker claims first (see claimAndRunChunks).
  void workerLoop(int home);
  /// Waits until a job other than `lastSeq` is open (returns its sequence number) or the pool
  /// stops (returns 0).
  uint64_t waitForJob(uint64_t lastSeq);
  bool tryJoin(uint64_t seq);
  /// Runs chunk `home` if unclaimed, then every other unclaimed chunk. A throwing chunk would
  /// leave the job open: terminate.
  void claimAndRunChunks(int home) noexcept;
  void runInline(int64_t n, int64_t chunks, RangeFn fn, void *ctx);

  // `state_` packs (sequence << kSeqShift) | participants. The sequence is odd while a job is
  // open: workers join it by incrementing the participant count with a CAS that also checks
  // the sequence, and leave by decrementing it; the caller closes the job by moving the
  // sequence on when the count is zero. A worker that wakes late therefore can never touch a
  // finished job, and job_ is rewritten only while no worker is inside it.
  static constexpr int kSeqShift = 16;
  alignas(64) std::atomic<uint64_t> state_{0};
  std::unique_ptr<std::atomic<bool>[]> claimed_; // per chunk (at most kChunksPerThread per thread)
  alignas(64) std::atomic<bool> busy_{false}; // a caller holds the pool
  Job job_;
  std::atomic<int> sleepers_{0};
  std::atomic<bool> stop_{false};
  std::mutex sleepMutex_;
  std::condition_variable wake_;
  std::vector<std::thread> workers_;
  std::chrono::microseconds spin_;
  int numThreads_ = 1;
};

/// The process-wide pool that executables use unless given their own: created on first use
/// with KILN_NUM_THREADS threads when that variable is set, else one per core.
std::shared_ptr<ThreadPool> defaultThreadPool();

} // namespace kiln::runtime
