// Note [library handles per thread]: cuda/handle_pool.h over fake handles,
// without a GPU.
#include "cuda/handle_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

namespace dtr::cuda {
namespace {

struct Fake {
  int device;
  int serial;
  bool operator<(const Fake& o) const { return serial < o.serial; }
};

TEST(ThreadHandlePool, OneHandlePerThreadAndDeviceStableWithinAThread) {
  std::atomic<int> made{0};
  ThreadHandlePool<Fake> pool([&](int device) { return Fake{device, made++}; });
  const Fake a0 = pool.get(0), a1 = pool.get(1);
  EXPECT_EQ(a0.device, 0);
  EXPECT_EQ(a1.device, 1);
  EXPECT_NE(a0.serial, a1.serial);
  EXPECT_EQ(pool.get(0).serial, a0.serial);
  EXPECT_EQ(pool.get(1).serial, a1.serial);
  EXPECT_EQ(pool.created(), 2);
}

TEST(ThreadHandlePool, ConcurrentThreadsNeverShareAHandle) {
  std::atomic<int> made{0};
  ThreadHandlePool<Fake> pool([&](int device) { return Fake{device, made++}; });
  constexpr int kThreads = 8;
  std::vector<int> serials(kThreads, -1);
  std::atomic<int> arrived{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      serials[size_t(i)] = pool.get(0).serial;
      // All threads hold their handle at once before any ends.
      arrived.fetch_add(1);
      while (arrived.load() < kThreads) std::this_thread::yield();
      EXPECT_EQ(pool.get(0).serial, serials[size_t(i)]);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(std::set<int>(serials.begin(), serials.end()).size(), size_t(kThreads));
  EXPECT_EQ(pool.created(), kThreads);
  EXPECT_EQ(pool.free_count(0), kThreads);  // given back when the threads ended
}

TEST(ThreadHandlePool, AThreadThatEndsGivesItsHandleToTheNext) {
  std::atomic<int> made{0};
  ThreadHandlePool<Fake> pool([&](int device) { return Fake{device, made++}; });
  int first = -1, second = -1;
  std::thread([&] { first = pool.get(0).serial; }).join();
  EXPECT_EQ(pool.free_count(0), 1);
  std::thread([&] { second = pool.get(0).serial; }).join();
  EXPECT_EQ(first, second);
  EXPECT_EQ(pool.created(), 1);
}

TEST(ThreadHandlePool, AFailedCreationKeepsNothingAndTheNextCallRetries) {
  int calls = 0;
  ThreadHandlePool<Fake> pool([&](int device) {
    if (++calls == 1) throw std::runtime_error("no memory for the handle");
    return Fake{device, calls};
  });
  EXPECT_THROW(pool.get(0), std::runtime_error);
  EXPECT_EQ(pool.created(), 0);
  EXPECT_EQ(pool.get(0).serial, 2);
  EXPECT_EQ(pool.created(), 1);
}

TEST(ThreadHandlePool, APoolDestroyedBeforeItsThreadsLeavesNothingDangling) {
  std::atomic<bool> go{false};
  auto* pool = new ThreadHandlePool<Fake>([](int device) { return Fake{device, 7}; });
  std::thread t([&] {
    EXPECT_EQ(pool->get(0).serial, 7);
    while (!go.load()) std::this_thread::yield();
  });
  while (pool->created() == 0) std::this_thread::yield();
  delete pool;  // the thread's window still holds the shared state
  go = true;
  t.join();
}

}  // namespace
}  // namespace dtr::cuda
