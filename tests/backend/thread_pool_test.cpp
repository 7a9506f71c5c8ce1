// Thread pool: every index runs exactly once, for many tiny dispatches, nested calls, concurrent
// dispatchers and exceptions, with 1..3 threads.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

#include "backend/cpu/thread_pool.h"

namespace edgevl::cpu {
namespace {

TEST(ThreadPool, EachIndexOnceManyTinyDispatches) {
  for (int threads = 1; threads <= 3; ++threads) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.size(), threads);
    std::vector<int> hits(64);
    for (int rep = 0; rep < 20000; ++rep) {
      const int64_t n = rep % 65;  // includes 0 and 1
      pool.parallel_for(n, [&](int64_t i) { hits[size_t(i)]++; });
    }
    // Index i is hit once by every dispatch with n > i.
    for (int i = 0; i < 64; ++i) {
      int expect = 0;
      for (int rep = 0; rep < 20000; ++rep) expect += (rep % 65) > i;
      ASSERT_EQ(hits[size_t(i)], expect) << "threads=" << threads << " i=" << i;
    }
  }
}

TEST(ThreadPool, LargeRangeAndUsesWorkers) {
  ThreadPool pool(3);
  std::vector<std::atomic<int>> hits(100000);
  std::atomic<int> distinct_threads{0};
  thread_local int seen_gen = 0;
  static std::atomic<int> gen{0};
  const int g = ++gen;
  pool.parallel_for(int64_t(hits.size()), [&](int64_t i) {
    hits[size_t(i)]++;
    if (seen_gen != g) {
      seen_gen = g;
      distinct_threads++;
    }
    if (i % 1000 == 0) std::this_thread::yield();
  });
  for (auto& h : hits) ASSERT_EQ(h.load(), 1);
  EXPECT_GE(distinct_threads.load(), 1);
}

// Idle gaps longer than the workers' polling (~50 us) put them to sleep in the kernel before
// every dispatch: each one must still run every index exactly once.
TEST(ThreadPool, DispatchesAfterWorkersSlept) {
  for (int threads = 2; threads <= 3; ++threads) {
    ThreadPool pool(threads);
    std::vector<std::atomic<int>> hits(64);
    for (int rep = 0; rep < 40; ++rep) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      pool.parallel_for(64, [&](int64_t i) { hits[size_t(i)]++; });
    }
    for (auto& h : hits) ASSERT_EQ(h.load(), 40) << "threads=" << threads;
  }
}

TEST(ThreadPool, NestedRunsInline) {
  for (int threads = 1; threads <= 3; ++threads) {
    ThreadPool pool(threads);
    std::vector<std::atomic<int>> hits(40 * 30);
    pool.parallel_for(40, [&](int64_t i) {
      pool.parallel_for(30, [&](int64_t j) { hits[size_t(i * 30 + j)]++; });
    });
    for (auto& h : hits) ASSERT_EQ(h.load(), 1);
  }
}

TEST(ThreadPool, ConcurrentDispatchers) {
  ThreadPool pool(2);
  std::atomic<int64_t> total{0};
  auto body = [&] {
    for (int rep = 0; rep < 2000; ++rep) pool.parallel_for(10, [&](int64_t i) { total += i; });
  };
  std::thread a(body), b(body);
  a.join();
  b.join();
  EXPECT_EQ(total.load(), 2 * 2000 * 45);
}

TEST(ThreadPool, ExceptionPropagatesAndPoolStaysUsable) {
  ThreadPool pool(3);
  EXPECT_THROW(pool.parallel_for(100,
                                 [](int64_t i) {
                                   if (i == 57) throw std::runtime_error("boom");
                                 }),
               std::runtime_error);
  std::atomic<int> n{0};
  pool.parallel_for(100, [&](int64_t) { n++; });
  EXPECT_EQ(n.load(), 100);
}

}  // namespace
}  // namespace edgevl::cpu
