// The thread pool: every index runs exactly once, chunks are equal and respect the grain,
// work really runs on two threads at once, each thread keeps its own chunk from call to call,
// nested calls run inline, several callers share one pool, and sleeping workers wake up.
// parallelForBalanced: finer chunks, each thread's own run first, a slow thread's chunks taken
// over from the far end.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <limits>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "runtime/ThreadPool.h"

using kiln::runtime::ThreadPool;

namespace {

/// Runs parallelFor(n, grain) and checks that every index in [0, n) ran exactly once, inside
/// chunks that do not overlap.
void expectEveryIndexOnce(ThreadPool &pool, int64_t n, int64_t grain, bool balanced = false) {
  std::vector<std::atomic<int>> hits(static_cast<size_t>(std::max<int64_t>(n, 0)));
  std::atomic<bool> badRange{false};
  auto body = [&](int64_t begin, int64_t end) {
    if (begin < 0 || end > n || begin >= end)
      badRange = true;
    for (int64_t i = begin; i < end && i >= 0 && i < n; ++i)
      hits[static_cast<size_t>(i)].fetch_add(1);
  };
  if (balanced)
    pool.parallelForBalanced(n, grain, [](void *ctx, int64_t b, int64_t e) { (*static_cast<decltype(body) *>(ctx))(b, e); },
                             &body);
  else
    pool.parallelFor(n, grain, body);
  EXPECT_FALSE(badRange) << "n=" << n << " grain=" << grain;
  for (int64_t i = 0; i < n; ++i)
    ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1) << "index " << i << " of n=" << n;
}

/// The chunks parallelFor hands out, sorted.
std::vector<std::pair<int64_t, int64_t>> chunksOf(ThreadPool &pool, int64_t n, int64_t grain,
                                                  bool balanced = false) {
  std::mutex mutex;
  std::vector<std::pair<int64_t, int64_t>> chunks;
  auto body = [&](int64_t begin, int64_t end) {
    std::lock_guard<std::mutex> lock(mutex);
    chunks.emplace_back(begin, end);
  };
  if (balanced)
    pool.parallelForBalanced(n, grain, [](void *ctx, int64_t b, int64_t e) { (*static_cast<decltype(body) *>(ctx))(b, e); },
                             &body);
  else
    pool.parallelFor(n, grain, body);
  std::sort(chunks.begin(), chunks.end());
  return chunks;
}

using Chunks = std::vector<std::pair<int64_t, int64_t>>;

/// A barrier for chunks: counts this one in `started` and waits until `count` have started.
/// False after 5 s, so that a pool that does not run the chunks at once fails rather than hangs.
bool arriveAndWait(std::atomic<int> &started, int count) {
  started.fetch_add(1);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (started.load() < count)
    if (std::chrono::steady_clock::now() > deadline)
      return false;
  return true;
}

} // namespace

TEST(ThreadPoolTest, DefaultsToOneThreadPerCore) {
  ThreadPool pool;
  int cores = static_cast<int>(std::thread::hardware_concurrency());
  EXPECT_EQ(pool.numThreads(), cores > 0 ? cores : 1);
  EXPECT_EQ(ThreadPool(3).numThreads(), 3);
  EXPECT_EQ(ThreadPool(-5).numThreads(), pool.numThreads());
}

TEST(ThreadPoolTest, EveryIndexRunsOnce) {
  for (int threads : {1, 2, 3, 4}) {
    ThreadPool pool(threads);
    for (int64_t n : {0, 1, 2, 3, 7, 10, 64, 1000, 1001})
      for (int64_t grain : {-1, 0, 1, 3, 16, 5000})
        expectEveryIndexOnce(pool, n, grain);
  }
}

TEST(ThreadPoolTest, NegativeCountRunsNothing) {
  ThreadPool pool(2);
  int calls = 0;
  pool.parallelFor(-3, 1, [&](int64_t, int64_t) { ++calls; });
  EXPECT_EQ(calls, 0);
}

TEST(ThreadPoolTest, ChunksAreEqualAndRespectTheGrain) {
  ThreadPool pool(2);
  EXPECT_EQ(chunksOf(pool, 10, 1), (Chunks{{0, 5}, {5, 10}}));
  EXPECT_EQ(chunksOf(pool, 11, 1), (Chunks{{0, 6}, {6, 11}}));
  // 10 / 6 < 2 chunks of at least 6: one chunk.
  EXPECT_EQ(chunksOf(pool, 10, 6), (Chunks{{0, 10}}));
  EXPECT_EQ(chunksOf(pool, 12, 6), (Chunks{{0, 6}, {6, 12}}));

  ThreadPool four(4);
  EXPECT_EQ(chunksOf(four, 3, 1), (Chunks{{0, 1}, {1, 2}, {2, 3}}));
  EXPECT_EQ(chunksOf(four, 10, 1), (Chunks{{0, 3}, {3, 6}, {6, 8}, {8, 10}}));
  EXPECT_EQ(chunksOf(four, 10, 4), (Chunks{{0, 5}, {5, 10}}));
  EXPECT_EQ(four.numChunks(0, 1), 0);
  EXPECT_EQ(four.numChunks(1000, 1), 4);
  EXPECT_EQ(four.numChunks(1000, 300), 3);
}

TEST(ThreadPoolTest, ChunkRangeCoversHugeCountsWithoutOverflow) {
  int64_t n = std::numeric_limits<int64_t>::max();
  auto [begin0, end0] = ThreadPool::chunkRange(n, 3, 0);
  auto [begin2, end2] = ThreadPool::chunkRange(n, 3, 2);
  EXPECT_EQ(begin0, 0);
  EXPECT_EQ(end2, n);
  EXPECT_EQ(end0 - begin0, n / 3 + 1); // n % 3 == 1: the first chunk is the larger
  EXPECT_EQ(end2 - begin2, n / 3);
}

TEST(ThreadPoolTest, TwoThreadsRunAtOnce) {
  // Each chunk waits until both have started: only a pool that really runs them
  // concurrently gets past this (with a timeout so that a broken pool fails, not hangs).
  ThreadPool pool(2);
  std::atomic<int> started{0};
  std::atomic<bool> timedOut{false};
  std::set<std::thread::id> threads;
  std::mutex mutex;
  pool.parallelFor(2, 1, [&](int64_t, int64_t) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      threads.insert(std::this_thread::get_id());
    }
    if (!arriveAndWait(started, 2))
      timedOut = true;
  });
  EXPECT_FALSE(timedOut);
  EXPECT_EQ(threads.size(), 2u);
  EXPECT_TRUE(threads.count(std::this_thread::get_id())) << "the caller runs a chunk too";
}

TEST(ThreadPoolTest, EachThreadRunsItsOwnChunkWhenAllTakePart) {
  // Chunk i belongs to thread i (the caller is thread 0), call after call, so that what one
  // loop writes per chunk the next reads on the same core. Each chunk again waits until all
  // three have started, so every thread runs exactly one; with a shared counter, whichever
  // worker woke first took chunk 1 and the workers' chunks swapped from call to call.
  ThreadPool pool(3);
  std::thread::id ranChunk[3];
  std::atomic<bool> timedOut{false}; // set from the pool's threads
  for (int call = 0; call < 50 && !timedOut; ++call) {
    std::atomic<int> started{0};
    std::thread::id ran[3];
    pool.parallelFor(3, 1, [&](int64_t begin, int64_t) {
      ran[begin] = std::this_thread::get_id();
      if (!arriveAndWait(started, 3))
        timedOut = true;
    });
    ASSERT_EQ(ran[0], std::this_thread::get_id()) << "call " << call;
    for (int chunk = 1; chunk < 3; ++chunk) {
      ASSERT_NE(ran[chunk], std::this_thread::get_id()) << "call " << call << " chunk " << chunk;
      if (call == 0)
        ranChunk[chunk] = ran[chunk];
      ASSERT_EQ(ran[chunk], ranChunk[chunk]) << "call " << call << ": chunk " << chunk << " changed thread";
    }
  }
  EXPECT_FALSE(timedOut);
  EXPECT_NE(ranChunk[1], ranChunk[2]);
}

TEST(ThreadPoolTest, BalancedEveryIndexRunsOnce) {
  for (int threads : {1, 2, 3, 4}) {
    ThreadPool pool(threads);
    for (int64_t n : {0, 1, 2, 3, 7, 10, 64, 1000, 1001})
      for (int64_t grain : {-1, 0, 1, 3, 16, 5000})
        expectEveryIndexOnce(pool, n, grain, true);
  }
}

TEST(ThreadPoolTest, BalancedChunksAreFinerAndStillEqual) {
  // Up to kChunksPerThread (4) chunks per thread, cut as parallelFor cuts: they depend only on
  // (n, grain, threads), never on which thread runs them.
  ThreadPool pool(2);
  Chunks eight;
  for (int64_t i = 0; i < 8; ++i)
    eight.push_back(ThreadPool::chunkRange(100, 8, i));
  EXPECT_EQ(chunksOf(pool, 100, 1, true), eight);
  EXPECT_EQ(chunksOf(pool, 5, 1, true), (Chunks{{0, 1}, {1, 2}, {2, 3}, {3, 4}, {4, 5}}));
  EXPECT_EQ(chunksOf(pool, 10, 4, true), (Chunks{{0, 5}, {5, 10}}));
  EXPECT_EQ(chunksOf(pool, 1, 1, true), (Chunks{{0, 1}}));
}

TEST(ThreadPoolTest, BalancedChunksOfASlowThreadAreTakenOver) {
  // The worker's chunks take 30 ms, the caller's no time: the caller runs its own run (chunks
  // 0-3) in order, then the worker's unstarted ones from the far end (7, 6, ...). The worker
  // gets to at most a couple in that time.
  ThreadPool pool(2);
  const std::thread::id caller = std::this_thread::get_id();
  std::mutex mutex;
  std::vector<int64_t> callerRan, workerRan;
  auto body = [&](int64_t begin, int64_t) {
    const bool onCaller = std::this_thread::get_id() == caller;
    {
      std::lock_guard<std::mutex> lock(mutex);
      (onCaller ? callerRan : workerRan).push_back(begin);
    }
    if (!onCaller)
      std::this_thread::sleep_for(std::chrono::milliseconds(30));
  };
  pool.parallelForBalanced(8, 1, [](void *ctx, int64_t b, int64_t e) { (*static_cast<decltype(body) *>(ctx))(b, e); },
                           &body);
  ASSERT_GE(callerRan.size(), 6u) << "the caller took over the slow worker's chunks";
  EXPECT_EQ(callerRan.size() + workerRan.size(), 8u);
  EXPECT_EQ(std::vector<int64_t>(callerRan.begin(), callerRan.begin() + 4), (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_TRUE(std::is_sorted(callerRan.begin() + 4, callerRan.end(), std::greater<int64_t>()))
      << "the others' chunks from the far end";
  EXPECT_EQ(callerRan[4], 7);
}

TEST(ThreadPoolTest, NestedCallsRunInline) {
  ThreadPool pool(2);
  EXPECT_FALSE(ThreadPool::inParallelRegion());
  std::atomic<int> total{0};
  std::atomic<bool> leftThread{false}, notInRegion{false};
  pool.parallelFor(2, 1, [&](int64_t, int64_t) {
    if (!ThreadPool::inParallelRegion())
      notInRegion = true;
    std::thread::id outer = std::this_thread::get_id();
    pool.parallelFor(100, 1, [&](int64_t begin, int64_t end) {
      if (std::this_thread::get_id() != outer)
        leftThread = true;
      total.fetch_add(static_cast<int>(end - begin));
    });
  });
  EXPECT_FALSE(leftThread) << "a nested parallelFor must run on the thread that called it";
  EXPECT_FALSE(notInRegion);
  EXPECT_EQ(total.load(), 200);
  EXPECT_FALSE(ThreadPool::inParallelRegion());
}

TEST(ThreadPoolTest, ConcurrentCallersShareOnePool) {
  ThreadPool pool(2);
  constexpr int kCallers = 8, kCalls = 200;
  std::atomic<int> failures{0};
  std::vector<std::thread> callers;
  for (int c = 0; c < kCallers; ++c)
    callers.emplace_back([&, c] {
      for (int call = 0; call < kCalls; ++call) {
        int64_t n = 1 + (c * 37 + call * 11) % 97;
        std::vector<int> hits(static_cast<size_t>(n), 0);
        pool.parallelFor(n, 1, [&](int64_t begin, int64_t end) {
          for (int64_t i = begin; i < end; ++i)
            hits[static_cast<size_t>(i)] += 1;
        });
        for (int h : hits)
          if (h != 1)
            failures.fetch_add(1);
      }
    });
  for (std::thread &caller : callers)
    caller.join();
  EXPECT_EQ(failures.load(), 0);
}

TEST(ThreadPoolTest, SleepingWorkersWakeUp) {
  // No spinning: every job finds the worker asleep on its condition variable.
  ThreadPool pool(ThreadPool::Options{2, std::chrono::microseconds(0)});
  for (int round = 0; round < 50; ++round) {
    if (round % 10 == 0)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    expectEveryIndexOnce(pool, 17 + round, 1);
  }
}

TEST(ThreadPoolTest, ManyPoolsStartAndStop) {
  for (int i = 0; i < 20; ++i) {
    ThreadPool pool(ThreadPool::Options{3, std::chrono::microseconds(i % 2 ? 0 : 20)});
    if (i % 3 == 0)
      expectEveryIndexOnce(pool, 30, 1);
  }
}

TEST(ThreadPoolTest, DefaultPoolIsShared) {
  auto first = kiln::runtime::defaultThreadPool();
  auto second = kiln::runtime::defaultThreadPool();
  ASSERT_TRUE(first);
  EXPECT_EQ(first.get(), second.get());
  EXPECT_GE(first->numThreads(), 1);
}
