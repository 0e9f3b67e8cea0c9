// The thread pool behind parallel_for / parallel_reduce (core/parallel.h):
// coverage, chunking independent of the thread count, exceptions reaching
// the caller, nested loops, loops from several threads at once, resizing.
#include "core/parallel.h"

#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

namespace dtr {
namespace {

/// Restores the kernel thread count at scope exit.
struct ThreadsGuard {
  int saved = num_threads();
  ~ThreadsGuard() { set_num_threads(saved); }
};

constexpr int kThreadCounts[] = {1, 2, 3, 7};

TEST(Parallel, EveryIndexExactlyOnce) {
  ThreadsGuard guard;
  for (int threads : kThreadCounts) {
    set_num_threads(threads);
    for (int64_t n : {0, 1, 5, 255, 256, 257, 1000, 100003}) {
      for (int64_t grain : {1, 7, 64, 1 << 14}) {
        std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
        parallel_for(n, grain, [&](int64_t b, int64_t e) {
          ASSERT_LE(0, b);
          ASSERT_LT(b, e);
          ASSERT_LE(e, n);
          for (int64_t i = b; i < e; ++i) hits[size_t(i)].fetch_add(1);
        });
        for (int64_t i = 0; i < n; ++i)
          ASSERT_EQ(hits[size_t(i)].load(), 1) << "n " << n << " grain " << grain << " threads " << threads << " index " << i;
      }
    }
  }
}

TEST(Parallel, ChunksDoNotDependOnThreadCount) {
  ThreadsGuard guard;
  std::vector<std::set<std::pair<int64_t, int64_t>>> seen;
  for (int threads : {2, 3, 7, 16}) {
    set_num_threads(threads);
    std::mutex m;
    std::set<std::pair<int64_t, int64_t>> chunks;
    parallel_for(100000, 1000, [&](int64_t b, int64_t e) {
      std::lock_guard<std::mutex> lock(m);
      chunks.insert({b, e});
    });
    seen.push_back(chunks);
  }
  EXPECT_EQ(seen[0].size(), 100u);
  for (size_t i = 1; i < seen.size(); ++i) EXPECT_EQ(seen[i], seen[0]);
}

TEST(Parallel, UsesSeveralThreadsAndMarksTheRegion) {
  ThreadsGuard guard;
  set_num_threads(4);
  EXPECT_FALSE(in_parallel_region());
  std::mutex m;
  std::set<std::thread::id> ids;
  std::atomic<bool> all_marked{true};
  parallel_for(256, 1, [&](int64_t, int64_t) {
    if (!in_parallel_region()) all_marked = false;
    // Long enough that the helpers get a share before the caller is done.
    std::this_thread::sleep_for(std::chrono::microseconds(200));
    std::lock_guard<std::mutex> lock(m);
    ids.insert(std::this_thread::get_id());
  });
  EXPECT_TRUE(all_marked.load());
  EXPECT_FALSE(in_parallel_region());
  EXPECT_GE(ids.size(), 2u);
  EXPECT_LE(ids.size(), 4u);
  // Shrinking the count shrinks the pool at the next loop.
  set_num_threads(2);
  ids.clear();
  parallel_for(256, 1, [&](int64_t, int64_t) {
    std::this_thread::sleep_for(std::chrono::microseconds(100));
    std::lock_guard<std::mutex> lock(m);
    ids.insert(std::this_thread::get_id());
  });
  EXPECT_LE(ids.size(), 2u);
}

TEST(Parallel, ExceptionReachesTheCallerFromTheLowestFailingChunk) {
  ThreadsGuard guard;
  for (int threads : kThreadCounts) {
    set_num_threads(threads);
    // Chunks of 10: indices 437 and 901 throw, in chunks 43 and 90.
    try {
      parallel_for(1000, 10, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) {
          if (i == 437 || i == 901) throw std::out_of_range("index " + std::to_string(i));
        }
      });
      ADD_FAILURE() << "no exception with " << threads << " threads";
    } catch (const std::out_of_range& e) {
      EXPECT_STREQ(e.what(), "index 437") << threads << " threads";
    }
    // The pool still works afterwards.
    std::atomic<int64_t> total{0};
    parallel_for(1000, 10, [&](int64_t b, int64_t e) { total += e - b; });
    EXPECT_EQ(total.load(), 1000);
  }
}

TEST(Parallel, NestedLoopsRunInline) {
  ThreadsGuard guard;
  set_num_threads(3);
  std::vector<std::atomic<int>> hits(64 * 64);
  parallel_for(64, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const std::thread::id outer = std::this_thread::get_id();
      parallel_for(64, 1, [&](int64_t b2, int64_t e2) {
        EXPECT_EQ(std::this_thread::get_id(), outer);
        for (int64_t j = b2; j < e2; ++j) hits[size_t(i * 64 + j)].fetch_add(1);
      });
    }
  });
  for (auto& h : hits) ASSERT_EQ(h.load(), 1);
}

/// A sum whose rounding depends on the order of its terms.
double ordered_sum(int64_t n) {
  return parallel_reduce(n, 1000, 0.0, [](int64_t b, int64_t e) {
    double s = 0;
    for (int64_t i = b; i < e; ++i) s += 1.0 / double(i + 1) * ((i % 3) == 0 ? 1e8 : 1e-8);
    return s;
  });
}

TEST(Parallel, ReduceIsBitwiseIndependentOfThreads) {
  ThreadsGuard guard;
  set_num_threads(1);
  const double ref = ordered_sum(123457);
  for (int threads : kThreadCounts) {
    set_num_threads(threads);
    const double got = ordered_sum(123457);
    EXPECT_EQ(std::memcmp(&got, &ref, sizeof(double)), 0) << threads << " threads";
  }
}

TEST(Parallel, LoopsFromSeveralThreadsAtOnce) {
  ThreadsGuard guard;
  set_num_threads(1);
  const double ref = ordered_sum(200000);
  set_num_threads(3);
  std::vector<double> got(6);
  std::vector<std::thread> callers;
  for (size_t t = 0; t < got.size(); ++t) {
    callers.emplace_back([&got, t] {
      double s = 0;
      for (int k = 0; k < 20; ++k) s = ordered_sum(200000);
      got[t] = s;
    });
  }
  for (auto& c : callers) c.join();
  for (double g : got) EXPECT_EQ(std::memcmp(&g, &ref, sizeof(double)), 0);
}

TEST(Parallel, ThreadCountSetting) {
  ThreadsGuard guard;
  set_num_threads(5);
  EXPECT_EQ(num_threads(), 5);
  set_num_threads(0);
  EXPECT_EQ(num_threads(), 1);
  set_num_threads(-3);
  EXPECT_EQ(num_threads(), 1);
}

}  // namespace
}  // namespace dtr
