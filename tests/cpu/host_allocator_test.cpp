// The caching allocator of CPU storages (cpu/host_allocator.h): freed large
// blocks are reused, small ones and those over the cap go back to malloc.
#include "cpu/host_allocator.h"

#include "core/sanitizers.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "dtr/dtr.h"
#include "remat/runtime.h"

namespace dtr::cpu {
namespace {

TEST(HostAllocator, IsTheCpuBackendsAllocator) {
  EXPECT_EQ(backend(Device(kCPU)).allocator(0), &host_allocator());
  EXPECT_EQ(backend_allocators().allocator(Device(kCPU)), &host_allocator());
}

// A runtime that takes every device's bytes from one allocator.
struct OneAllocator final : AllocatorProvider {
  explicit OneAllocator(Allocator& a) : alloc(a) {}
  Allocator* allocator(Device) override { return &alloc; }
  Allocator& alloc;
};

TEST(HostAllocator, ReusesFreedBlocksOfTheSamePageRoundedSize) {
  CachingHostAllocator a;
  void* p = a.allocate(100000);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
  std::memset(p, 1, 100000);
  a.deallocate(p, 100000);
  EXPECT_EQ(a.stats().cached_bytes, 102400);  // 100000 rounded up to 25 pages
  // 100001 bytes round to the same 25 pages: the freed block comes back.
  void* q = a.allocate(100001);
  EXPECT_EQ(q, p);
  EXPECT_EQ(a.stats().hits, 1);
  EXPECT_EQ(a.stats().misses, 1);
  EXPECT_EQ(a.stats().cached_bytes, 0);
  // A different size is a miss.
  void* r = a.allocate(200000);
  EXPECT_NE(r, q);
  EXPECT_EQ(a.stats().misses, 2);
  a.deallocate(q, 100001);
  a.deallocate(r, 200000);
  a.empty_cache();
  EXPECT_EQ(a.stats().cached_bytes, 0);
}

TEST(HostAllocator, ReleaseCachedFreesLargestBlocksFirst) {
  CachingHostAllocator a;
  const size_t kib = 1024;
  void* p64 = a.allocate(64 * kib);
  void* p128 = a.allocate(128 * kib);
  void* p256 = a.allocate(256 * kib);
  a.deallocate(p64, 64 * kib);
  a.deallocate(p128, 128 * kib);
  a.deallocate(p256, 256 * kib);
  EXPECT_EQ(a.cached_bytes(), int64_t(448 * kib));
  a.release_cached(100 * kib);  // the 256 KiB block covers it
  EXPECT_EQ(a.cached_bytes(), int64_t(192 * kib));
  a.release_cached(150 * kib);  // 128 KiB is not enough: 64 KiB goes too
  EXPECT_EQ(a.cached_bytes(), 0);
  a.release_cached(1);  // nothing left: no-op
  EXPECT_EQ(a.cached_bytes(), 0);
}

// Under a budget the runtime trims the cache: resident plus cached bytes
// stay within the budget even when freed blocks do not fit new requests.
TEST(HostAllocator, RuntimeKeepsResidentPlusCachedWithinTheBudget) {
  CachingHostAllocator cache;
  OneAllocator provider(cache);
  {
    remat::Runtime rt(provider);
    const int64_t budget = 1 << 20;
    rt.set_memory_budget(budget);
    std::vector<std::unique_ptr<Storage>> held;
    for (int64_t size : {int64_t(200) << 10, int64_t(300) << 10, int64_t(100) << 10}) {
      for (int i = 0; i < 3; ++i) {
        auto s = std::make_unique<Storage>(size, Device());
        rt.allocate(*s);
        Storage* sp = s.get();
        rt.release({&sp, 1});
        EXPECT_LE(rt.stats().resident_bytes + cache.cached_bytes(), budget);
        held.push_back(std::move(s));
        if (held.size() > 2) held.erase(held.begin());  // its bytes go to the cache
      }
    }
  }
}

// Blocks the cache must give up (under a budget: what it leaves beside
// resident storage) go back to the system; on a miss one of them is resized
// into the new block, its pages kept rather than unmapped and faulted in again.
TEST(HostAllocator, AllocateWithinRecyclesBlocksThatMustGo) {
  CachingHostAllocator a;
  const size_t kib = 1024;
  auto* p = static_cast<unsigned char*>(a.allocate(1024 * kib));
  ASSERT_NE(p, nullptr);
  std::memset(p, 7, 1024 * kib);
  void* small = a.allocate(256 * kib);
  a.deallocate(p, 1024 * kib);
  a.deallocate(small, 256 * kib);
  EXPECT_EQ(a.cached_bytes(), int64_t(1280 * kib));
  // Room for 300 KiB of cached blocks: the 1 MiB one shrinks into the new
  // 512 KiB block (in place, its bytes still there); the 256 KiB one stays.
  auto* q = static_cast<unsigned char*>(a.allocate_within(512 * kib, 300 * kib));
  EXPECT_EQ(q, p);
  EXPECT_EQ(q[0], 7);
  EXPECT_EQ(q[512 * kib - 1], 7);
  HostCacheStats s = a.stats();
  EXPECT_EQ(s.recycled, 1);
  EXPECT_EQ(s.cached_bytes, int64_t(256 * kib));
  EXPECT_EQ(s.in_use_bytes, int64_t(512 * kib));
  // Room for nothing: a hit still gives up the rest of the cache.
  a.deallocate(q, 512 * kib);
  void* r = a.allocate_within(512 * kib, 0);
  EXPECT_EQ(r, q);
  EXPECT_EQ(a.cached_bytes(), 0);
  // Within what is allowed, a miss maps a fresh block and keeps the cache.
  a.deallocate(r, 512 * kib);
  void* t = a.allocate_within(128 * kib, 512 * kib);
  EXPECT_NE(t, r);
  EXPECT_EQ(a.cached_bytes(), int64_t(512 * kib));
  EXPECT_EQ(a.stats().recycled, 1);
  a.deallocate(t, 128 * kib);
}

// Note [moving pages]: a miss beyond what may stay cached is built from the
// pages of cached blocks. Their old bytes arrive at the new address, where
// fresh pages would read zero. A block so built spans several mappings and
// is itself moved piece by piece later (one mremap of it would fail).
TEST(HostAllocator, AMissBeyondTheCacheMovesThePagesOfBlocksThatMustGo) {
  CachingHostAllocator a;
  const size_t kib = 1024;
  std::vector<unsigned char*> blocks;
  for (int i = 0; i < 3; ++i) {
    auto* b = static_cast<unsigned char*>(a.allocate(256 * kib));
    ASSERT_NE(b, nullptr);
    std::memset(b, 1 + i, 256 * kib);
    blocks.push_back(b);
  }
  for (unsigned char* b : blocks) a.deallocate(b, 256 * kib);
  // Nothing may stay cached: 640 KiB made of two whole blocks and the head
  // of a third, whose 128 KiB tail goes back to the system.
  auto* q = static_cast<unsigned char*>(a.allocate_within(640 * kib, 0));
  ASSERT_NE(q, nullptr);
  std::set<unsigned char> seen;
  for (size_t start : {size_t{0}, 256 * kib, 512 * kib}) {
    const size_t end = std::min(start + 256 * kib, 640 * kib);
    const unsigned char v = q[start];
    EXPECT_NE(v, 0) << "fresh page at " << start;
    size_t other = 0;
    for (size_t k = start; k < end; ++k) other += q[k] != v;
    EXPECT_EQ(other, 0u) << "bytes from more than one block in [" << start << ", " << end << ")";
    seen.insert(v);
  }
  EXPECT_EQ(seen.size(), 3u);
  HostCacheStats s = a.stats();
  EXPECT_EQ(s.recycled_bytes, int64_t(640 * kib));
  EXPECT_EQ(s.cached_bytes, 0);
  EXPECT_EQ(s.in_use_bytes, int64_t(640 * kib));

  // Its three pieces move into a larger block; fresh (zero) pages follow.
  std::memset(q, 9, 640 * kib);
  a.deallocate(q, 640 * kib);
  auto* r = static_cast<unsigned char*>(a.allocate_within(1024 * kib, 0));
  ASSERT_NE(r, nullptr);
  size_t moved = 0, fresh = 0;
  for (size_t k = 0; k < 1024 * kib; ++k) (k < 640 * kib ? moved : fresh) += r[k] == (k < 640 * kib ? 9 : 0);
  EXPECT_EQ(moved, 640 * kib);
  EXPECT_EQ(fresh, 384 * kib);
  EXPECT_EQ(a.stats().recycled_bytes, int64_t(1280 * kib));

  // A cached block that covers a request gives its head in place, split
  // inside a piece; the rest (beyond what may stay cached) is unmapped.
  std::memset(r, 5, 1024 * kib);
  a.deallocate(r, 1024 * kib);
  auto* t = static_cast<unsigned char*>(a.allocate_within(700 * kib, 0));
  EXPECT_EQ(t, r);
  EXPECT_EQ(t[700 * kib - 1], 5);
  EXPECT_EQ(a.cached_bytes(), 0);
  // Within what may stay cached, a tail of two pieces stays and is a hit.
  std::memset(t, 6, 700 * kib);
  a.deallocate(t, 700 * kib);
  auto* u = static_cast<unsigned char*>(a.allocate_within(100 * kib, 600 * kib));
  EXPECT_EQ(u, t);
  EXPECT_EQ(a.cached_bytes(), int64_t(600 * kib));
  auto* w = static_cast<unsigned char*>(a.allocate_within(600 * kib, 0));
  EXPECT_EQ(w, t + 100 * kib);
  EXPECT_EQ(w[0], 6);
  EXPECT_EQ(w[600 * kib - 1], 6);
  EXPECT_EQ(a.stats().hits, 1);
  a.deallocate(u, 100 * kib);
  a.deallocate(w, 600 * kib);
  a.empty_cache();
  EXPECT_EQ(a.cached_bytes(), 0);
}

TEST(HostAllocator, SmallBlocksAreNotCached) {
  CachingHostAllocator a;
  void* p = a.allocate(1000);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
  a.deallocate(p, 1000);
  EXPECT_EQ(a.stats().cached_bytes, 0);
  EXPECT_EQ(a.stats().misses, 0);
  void* z = a.allocate(0);  // a zero-byte storage still gets a distinct block
  EXPECT_NE(z, nullptr);
  a.deallocate(z, 0);
}

TEST(HostAllocator, HeldBytesStayWithinCapOrPeakInUse) {
  CachingHostAllocator a(size_t{1} << 20);
  const size_t kb100 = size_t{100} << 10, kb300 = 3 * kb100, kb700 = 7 * kb100;
  std::vector<void*> blocks;
  for (int i = 0; i < 5; ++i) blocks.push_back(a.allocate(kb300));
  for (void* p : blocks) a.deallocate(p, kb300);
  // 1.5 MiB were in use at once, more than the 1 MiB cap: all five are kept
  // for the next step that needs them again.
  HostCacheStats s = a.stats();
  EXPECT_EQ(s.cached_bytes, int64_t(5 * kb300));
  EXPECT_EQ(s.in_use_bytes, 0);
  EXPECT_EQ(s.peak_in_use_bytes, int64_t(5 * kb300));
  // New sizes miss; each miss takes cached blocks so that in use plus
  // cached stays within the 1.5 MiB peak, their pages moved into the new
  // block (Note [moving pages]): 300 + 300 + the head 100 KiB of a third,
  // whose 200 KiB tail stays cached.
  void* p = a.allocate(kb700);
  s = a.stats();
  EXPECT_EQ(s.in_use_bytes, int64_t(kb700));
  EXPECT_EQ(s.cached_bytes, int64_t(2 * kb300 + 2 * kb100));
  EXPECT_EQ(s.recycled_bytes, int64_t(kb700));
  EXPECT_LE(s.in_use_bytes + s.cached_bytes, s.peak_in_use_bytes);
  void* q = a.allocate(kb700);  // 300 + 300 + 100 of the 200 KiB tail
  s = a.stats();
  EXPECT_EQ(s.cached_bytes, int64_t(kb100));
  EXPECT_EQ(s.recycled_bytes, int64_t(2 * kb700));
  EXPECT_EQ(s.peak_in_use_bytes, int64_t(5 * kb300));  // 1.4 MiB now, below the old peak
  a.deallocate(p, kb700);
  a.deallocate(q, kb700);
  EXPECT_EQ(a.stats().cached_bytes, int64_t(2 * kb700 + kb100));
  EXPECT_EQ(a.allocate(kb700), q);  // reused, not a fresh block
  a.deallocate(q, kb700);

  CachingHostAllocator none(0);
  void* r = none.allocate(size_t{1} << 20);
  none.deallocate(r, size_t{1} << 20);
  EXPECT_EQ(none.stats().cached_bytes, 0);
}

TEST(HostAllocator, ManyThreadsAtOnce) {
  CachingHostAllocator a;
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&a, t] {
      for (int i = 0; i < 200; ++i) {
        const size_t n = size_t(64 + (i + t) % 5) << 10;
        auto* p = static_cast<unsigned char*>(a.allocate(n));
        ASSERT_NE(p, nullptr);
        p[0] = p[n - 1] = static_cast<unsigned char>(t);
        EXPECT_EQ(p[0], p[n - 1]);
        a.deallocate(p, n);
      }
    });
  }
  for (auto& t : threads) t.join();
  const HostCacheStats s = a.stats();
  EXPECT_EQ(s.hits + s.misses, 8 * 200);
  EXPECT_GT(s.hits, 0);
}

TEST(HostAllocator, TrainingStepsReuseTheirBuffers) {
  // After the first step, a repeated step's large buffers come from the cache.
#if DTR_ADDRESS_SANITIZER
  GTEST_SKIP() << "the process-wide cache holds nothing under AddressSanitizer (use-after-free stays visible)";
#endif
  Tensor w = randn({256, 256});
  w.requires_grad_();
  auto step = [&] {
    Tensor x = randn({256, 256});
    Tensor loss = gelu(matmul(x, w)).sum();
    loss.backward();
    w.set_grad(Tensor());
  };
  step();
  const HostCacheStats before = host_allocator().stats();
  step();
  const HostCacheStats after = host_allocator().stats();
  EXPECT_GT(after.hits, before.hits);
  EXPECT_EQ(after.misses, before.misses);
}

// Bytes of a "Vm...:  123 kB" line of /proc/self/status (-1 if absent).
int64_t proc_status_bytes(const std::string& key) {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind(key + ":", 0) == 0) return std::stoll(line.substr(key.size() + 1)) * 1024;
  }
  return -1;
}

// Restarts VmHWM (the peak resident set) from the current resident set
// (Linux 4.0 and later); false where /proc/self/clear_refs is not writable.
bool reset_peak_rss() {
  std::ofstream f("/proc/self/clear_refs");
  f << "5";
  f.flush();
  return bool(f);
}

// Under a budget, evicted and freed storage bytes leave the process: its
// resident set grows by no more than the budget plus a fixed overhead (host
// metadata, blocks below kHostCachePageBytes, page rounding), however many
// bytes pass through. Sizes grow step by step and each step keeps a small
// result (and its lineage) alive, as a training run keeps metadata, so no
// freed block fits a later request: freed into glibc's heap, each step's
// blocks stayed resident there.
TEST(HostAllocator, ResidentSetUnderABudgetStaysWithinTheBudget) {
#if DTR_ADDRESS_SANITIZER
  GTEST_SKIP() << "AddressSanitizer's allocator keeps freed memory in quarantine";
#endif
  constexpr int64_t kBudget = int64_t{16} << 20;
  constexpr int64_t kOverhead = int64_t{8} << 20;
  // glibc raises its mmap threshold to the size of any mapped block it frees
  // (up to 32 MiB), after which blocks up to that size come from its heap; a
  // program that has run a while has done so. Do it here so this test does
  // not depend on what ran before it in this process.
  {
    void* volatile big = std::malloc(size_t{24} << 20);
    std::free(big);
  }
  struct BudgetScope {
    ~BudgetScope() { remat::set_memory_budget(std::nullopt); }
  } scope;
  remat::set_memory_budget(kBudget);
  const int64_t base = proc_status_bytes("VmRSS");
  ASSERT_GT(base, 0);
  const bool hwm = reset_peak_rss();
  int64_t sampled_peak = base;
  const int64_t evictions_before = remat::stats().evictions;
  std::vector<Tensor> kept;  // one small result per step, with its lineage
  int64_t passed_bytes = 0;
  for (int step = 0; step < 30; ++step) {
    const int64_t n = (int64_t{1} << 18) + step * 4096;  // 1 MiB + 16 KiB per step
    std::vector<Tensor> chain{randn({n})};
    for (int i = 0; i < 24; ++i) {  // 24+ MiB held against the 16 MiB budget: evictions
      chain.push_back(chain.back() * 0.5);
      sampled_peak = std::max(sampled_peak, proc_status_bytes("VmRSS"));
    }
    passed_bytes += int64_t(chain.size()) * n * 4;
    kept.push_back(chain.front().sum());  // rematerializes the evicted head
  }
  const int64_t peak = hwm ? std::max(sampled_peak, proc_status_bytes("VmHWM")) : sampled_peak;
  EXPECT_GT(remat::stats().evictions, evictions_before);
  EXPECT_GT(passed_bytes, 40 * kBudget);
  EXPECT_LE(peak - base, kBudget + kOverhead)
      << "resident set grew by " << (peak - base) / 1024 << " KiB under a budget of "
      << kBudget / 1024 << " KiB (peak " << (hwm ? "from VmHWM" : "sampled") << ")";
}

// Setting a budget gives back the cached blocks beyond it at once, not at
// the next allocation.
TEST(HostAllocator, SettingABudgetTrimsTheCache) {
  CachingHostAllocator cache;
  OneAllocator provider(cache);
  {
    remat::Runtime rt(provider);
    std::vector<std::unique_ptr<Storage>> held;
    for (int i = 0; i < 8; ++i) {
      held.push_back(std::make_unique<Storage>(int64_t{256} << 10, Device()));
      rt.allocate(*held.back());
      Storage* sp = held.back().get();
      rt.release({&sp, 1});
    }
    held.clear();  // 2 MiB of freed blocks go to the cache: no budget, all kept
    EXPECT_EQ(cache.cached_bytes(), int64_t{2} << 20);
    rt.set_memory_budget(int64_t{1} << 20);
    EXPECT_LE(cache.cached_bytes(), int64_t{1} << 20);
    rt.set_memory_budget(std::nullopt);
  }
  cache.empty_cache();
}

}  // namespace
}  // namespace dtr::cpu
