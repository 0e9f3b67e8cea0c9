// The caching device allocator (core/caching_allocator.h) over a fake
// device (tests/fake_arena.h): rounding, the two pools, best fit, splitting
// and coalescing, what goes back to the device and when, the cap of
// allocate_within, stats, layout and threads.
#include "core/caching_allocator.h"

#include <cstdint>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "core/error.h"
#include "fake_arena.h"

namespace dtr {
namespace {

using testing::FakeArena;

constexpr int64_t KiB = 1024;
constexpr int64_t MiB = 1024 * 1024;

char* at(void* p) { return static_cast<char*>(p); }

// Checks what must hold at every moment: each segment's blocks tile it, no
// two free blocks are neighbours, and the stats add up.
void expect_consistent(const CachingAllocator& a) {
  const auto stats = a.memory_stats();
  ASSERT_TRUE(stats.has_value());
  int64_t reserved = 0, allocated = 0, largest = 0, blocks = 0;
  const char* previous_end = nullptr;
  for (const MemorySegmentLayout& seg : a.layout()) {
    ASSERT_FALSE(seg.empty());
    EXPECT_TRUE(previous_end == nullptr || static_cast<const char*>(seg[0].ptr) >= previous_end);
    for (size_t i = 0; i < seg.size(); ++i) {
      EXPECT_EQ(seg[i].size % 512, 0);
      EXPECT_EQ(reinterpret_cast<uintptr_t>(seg[i].ptr) % 64, 0u);
      if (i > 0) {
        EXPECT_EQ(static_cast<const char*>(seg[i].ptr), static_cast<const char*>(seg[i - 1].ptr) + seg[i - 1].size);
        EXPECT_FALSE(!seg[i].allocated && !seg[i - 1].allocated) << "free neighbours not coalesced";
      }
      reserved += seg[i].size;
      if (seg[i].allocated) {
        allocated += seg[i].size;
        ++blocks;
      } else {
        largest = std::max(largest, seg[i].size);
      }
    }
    previous_end = static_cast<const char*>(seg.back().ptr) + seg.back().size;
  }
  EXPECT_EQ(stats->reserved_bytes, reserved);
  EXPECT_EQ(stats->allocated_bytes, allocated);
  EXPECT_EQ(stats->free_bytes, reserved - allocated);
  EXPECT_EQ(stats->largest_free_block, largest);
  EXPECT_EQ(stats->allocations, blocks);
  EXPECT_EQ(stats->segments, int64_t(a.layout().size()));
  EXPECT_EQ(a.cached_bytes(), reserved - allocated);
}

TEST(CachingAllocator, RoundsTo512BytesAndPicksSegmentSizes) {
  EXPECT_EQ(CachingAllocator::round_size(0), 512u);
  EXPECT_EQ(CachingAllocator::round_size(1), 512u);
  EXPECT_EQ(CachingAllocator::round_size(512), 512u);
  EXPECT_EQ(CachingAllocator::round_size(513), 1024u);
  EXPECT_EQ(CachingAllocator::round_size(size_t(MiB) + 1), size_t(MiB + 512));
  EXPECT_EQ(CachingAllocator::segment_size(512), size_t(2 * MiB));
  EXPECT_EQ(CachingAllocator::segment_size(size_t(MiB)), size_t(2 * MiB));
  EXPECT_EQ(CachingAllocator::segment_size(size_t(MiB + 512)), size_t(20 * MiB));
  EXPECT_EQ(CachingAllocator::segment_size(size_t(10 * MiB - 512)), size_t(20 * MiB));
  EXPECT_EQ(CachingAllocator::segment_size(size_t(10 * MiB)), size_t(10 * MiB));
  EXPECT_EQ(CachingAllocator::segment_size(size_t(11 * MiB + 512)), size_t(12 * MiB));
  FakeArena arena(1024 * MiB);
  CachingAllocator a(arena);
  EXPECT_EQ(a.rounded_bytes(1000), 1024);
  void* p = a.allocate(1000);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(a.memory_stats()->allocated_bytes, 1024);
  EXPECT_EQ(a.memory_stats()->reserved_bytes, 2 * MiB);
  void* z = a.allocate(0);  // a block of its own, never shared
  ASSERT_NE(z, nullptr);
  EXPECT_NE(z, p);
  EXPECT_EQ(a.memory_stats()->allocated_bytes, 1024 + 512);
  a.deallocate(z, 0);
  a.deallocate(p, 1000);
  expect_consistent(a);
}

TEST(CachingAllocator, SmallAndLargeRequestsComeFromSeparatePools) {
  FakeArena arena(1024 * MiB);
  CachingAllocator a(arena);
  void* large = a.allocate(size_t(MiB + 1));  // the large pool: a 20 MiB segment
  ASSERT_NE(large, nullptr);
  EXPECT_EQ(arena.reserve_calls, 1);
  EXPECT_EQ(arena.reserved, 20 * MiB);
  // 19 MiB are free in the large segment, but a small request takes a
  // small segment of its own.
  void* small = a.allocate(4096);
  ASSERT_NE(small, nullptr);
  EXPECT_EQ(arena.reserve_calls, 2);
  EXPECT_EQ(arena.reserved, 22 * MiB);
  ASSERT_EQ(a.layout_for(4096).size(), 1u);
  EXPECT_EQ(a.layout_for(4096)[0][0].ptr, small);
  ASSERT_EQ(a.layout_for(size_t(2 * MiB)).size(), 1u);
  EXPECT_EQ(a.layout_for(size_t(2 * MiB))[0][0].ptr, large);
  // A request from 10 MiB up that no free block fits gets a segment of its
  // size rounded up to 2 MiB.
  void* huge = a.allocate(size_t(25 * MiB + 1));
  ASSERT_NE(huge, nullptr);
  EXPECT_EQ(arena.reserved, 48 * MiB);
  // One the large segment's free tail fits is served from it.
  void* tail = a.allocate(size_t(11 * MiB));
  EXPECT_EQ(at(tail), at(large) + MiB + 512);
  a.deallocate(tail, 0);
  // Another large request fits in the first large segment's free tail.
  void* second = a.allocate(size_t(5 * MiB));
  ASSERT_NE(second, nullptr);
  EXPECT_EQ(arena.reserve_calls, 3);
  EXPECT_EQ(at(second), at(large) + MiB + 512);
  for (void* p : {large, small, huge, second}) a.deallocate(p, 0);
  expect_consistent(a);
  EXPECT_EQ(a.memory_stats()->segments, 3);
}

TEST(CachingAllocator, SplitsAndCoalescesWithFreeNeighbours) {
  FakeArena arena(1024 * MiB);
  CachingAllocator a(arena);
  void* x = a.allocate(4096);
  void* y = a.allocate(4096);
  void* z = a.allocate(4096);
  EXPECT_EQ(at(y), at(x) + 4096);
  EXPECT_EQ(at(z), at(y) + 4096);
  a.deallocate(y, 4096);  // the middle: a hole between two blocks in use
  auto seg = a.layout()[0];
  ASSERT_EQ(seg.size(), 4u);
  EXPECT_TRUE(seg[0].allocated);
  EXPECT_FALSE(seg[1].allocated);
  EXPECT_EQ(seg[1].size, 4096);
  EXPECT_TRUE(seg[2].allocated);
  EXPECT_FALSE(seg[3].allocated);
  EXPECT_EQ(seg[3].size, 2 * MiB - 3 * 4096);
  a.deallocate(x, 4096);  // merges with the hole after it
  seg = a.layout()[0];
  ASSERT_EQ(seg.size(), 3u);
  EXPECT_EQ(seg[0].ptr, x);
  EXPECT_EQ(seg[0].size, 8192);
  EXPECT_FALSE(seg[0].allocated);
  a.deallocate(z, 4096);  // merges with both neighbours: one free block
  seg = a.layout()[0];
  ASSERT_EQ(seg.size(), 1u);
  EXPECT_EQ(seg[0].ptr, x);
  EXPECT_EQ(seg[0].size, 2 * MiB);
  EXPECT_FALSE(seg[0].allocated);
  expect_consistent(a);
}

TEST(CachingAllocator, LargeBlocksKeepTailsOfOneMiBOrLess) {
  FakeArena arena(1024 * MiB);
  CachingAllocator a(arena);
  // 20 MiB - 19.5 MiB leaves 0.5 MiB: not split off, the block is the segment.
  void* p = a.allocate(size_t(19 * MiB + 512 * KiB));
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(a.memory_stats()->allocated_bytes, 20 * MiB);
  ASSERT_EQ(a.layout()[0].size(), 1u);
  a.deallocate(p, 0);
  // 18 MiB leaves 2 MiB: split.
  void* q = a.allocate(size_t(18 * MiB));
  EXPECT_EQ(q, p);
  EXPECT_EQ(a.memory_stats()->allocated_bytes, 18 * MiB);
  ASSERT_EQ(a.layout()[0].size(), 2u);
  // Small-pool blocks split down to 512 bytes.
  void* s1 = a.allocate(size_t(MiB));
  void* s2 = a.allocate(size_t(MiB - 512));
  ASSERT_NE(s2, nullptr);
  ASSERT_EQ(a.layout_for(1).size(), 1u);
  ASSERT_EQ(a.layout_for(1)[0].size(), 3u);
  EXPECT_EQ(a.layout_for(1)[0][2].size, 512);
  EXPECT_FALSE(a.layout_for(1)[0][2].allocated);
  for (void* v : {q, s1, s2}) a.deallocate(v, 0);
  expect_consistent(a);
}

TEST(CachingAllocator, BestFitAndReuse) {
  FakeArena arena(1024 * MiB);
  CachingAllocator a(arena);
  // Free holes of 8, 4 and 16 KiB, separated by blocks in use.
  std::vector<void*> keep;
  void* h8 = a.allocate(8 * KiB);
  keep.push_back(a.allocate(512));
  void* h4 = a.allocate(4 * KiB);
  keep.push_back(a.allocate(512));
  void* h16 = a.allocate(16 * KiB);
  keep.push_back(a.allocate(512));
  a.deallocate(h8, 0);
  a.deallocate(h4, 0);
  a.deallocate(h16, 0);
  const int64_t reserves = arena.reserve_calls;
  EXPECT_EQ(a.allocate(4 * KiB), h4);   // exactly the 4 KiB hole
  EXPECT_EQ(a.allocate(6 * KiB), h8);   // the smallest that fits: 8 KiB, split
  EXPECT_EQ(a.allocate(2 * KiB), at(h8) + 6 * KiB);  // the 2 KiB left of it
  EXPECT_EQ(a.allocate(10 * KiB), h16);
  EXPECT_EQ(arena.reserve_calls, reserves);  // nothing new reserved
  // Freed and asked again: the same block.
  void* p = a.allocate(100 * KiB);
  a.deallocate(p, 0);
  EXPECT_EQ(a.allocate(100 * KiB), p);
  EXPECT_EQ(arena.reserve_calls, reserves);
  expect_consistent(a);
}

TEST(CachingAllocator, ReleaseCachedFreesWholeFreeSegmentsOnlyLargestFirst) {
  FakeArena arena(1024 * MiB);
  CachingAllocator a(arena);
  void* s1 = a.allocate(size_t(MiB));      // small segment A (2 MiB)
  void* s2 = a.allocate(size_t(MiB));      // fills A
  void* s3 = a.allocate(4096);             // small segment B
  void* h1 = a.allocate(size_t(12 * MiB)); // large 12 MiB segment, all of it
  void* l1 = a.allocate(size_t(2 * MiB));  // large 20 MiB segment
  ASSERT_EQ(arena.reserve_calls, 4);
  a.deallocate(s1, 0);  // A is half free: not whole
  a.deallocate(s3, 0);  // B is whole free (2 MiB)
  a.deallocate(l1, 0);  // the 20 MiB segment is whole free
  a.deallocate(h1, 0);  // the 12 MiB segment is whole free
  EXPECT_EQ(a.cached_bytes(), 35 * MiB);
  a.release_cached(1);  // one segment: the largest
  EXPECT_EQ(arena.release_calls, 1);
  EXPECT_EQ(arena.reserved, 2 * MiB + 2 * MiB + 12 * MiB);
  a.release_cached(13 * MiB);  // 12 MiB, then 2 MiB more: B
  EXPECT_EQ(arena.release_calls, 3);
  EXPECT_EQ(arena.reserved, 2 * MiB);
  a.release_cached(100 * MiB);  // A has a block in use: it stays
  EXPECT_EQ(arena.release_calls, 3);
  EXPECT_EQ(a.cached_bytes(), MiB);
  a.deallocate(s2, 0);
  a.empty_cache();
  EXPECT_EQ(arena.reserved, 0);
  EXPECT_EQ(arena.bad_releases, 0);
  expect_consistent(a);
}

TEST(CachingAllocator, AllocateWithinKeepsReservedUnderItsCap) {
  FakeArena arena(1024 * MiB);
  CachingAllocator a(arena);
  void* big = a.allocate(size_t(2 * MiB));
  a.deallocate(big, 0);  // a free 20 MiB segment cached
  // Nothing may stay cached: the free segment goes, and a standard 2 MiB
  // segment would pass the cap, so one of exactly 4 KiB is reserved.
  void* p = a.allocate_within(4096, 0);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(arena.reserved, 4096);
  EXPECT_EQ(a.memory_stats()->segments, 1);
  // With room for 3 MiB cached, the standard segment fits.
  void* q = a.allocate_within(4096, 3 * MiB);
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(arena.reserved, 4096 + 2 * MiB);
  a.deallocate(p, 0);
  a.deallocate(q, 0);
  a.empty_cache();

  // 0.5 MiB free inside a segment in use cannot go back: with a cap that
  // leaves no cached bytes, a request it does not fit fails, reserving nothing.
  void* x = a.allocate(size_t(MiB));
  void* y = a.allocate(512 * KiB);
  const int64_t reserves = arena.reserve_calls;
  EXPECT_EQ(a.allocate_within(768 * KiB, 0), nullptr);
  EXPECT_EQ(arena.reserve_calls, reserves);
  EXPECT_EQ(arena.reserved, 2 * MiB);
  // With 0.5 MiB of cache allowed, a segment of exactly the request fits.
  void* z = a.allocate_within(768 * KiB, 512 * KiB);
  ASSERT_NE(z, nullptr);
  EXPECT_EQ(arena.reserved, 2 * MiB + 768 * KiB);
  // A request that fits a free block is served from it whatever the cap.
  void* w = a.allocate_within(256 * KiB, 0);
  EXPECT_EQ(at(w), at(y) + 512 * KiB);
  EXPECT_EQ(arena.reserve_calls, reserves + 1);
  for (void* v : {x, y, z, w}) a.deallocate(v, 0);
  expect_consistent(a);
}

TEST(CachingAllocator, AllocateWithinNeverReservesPastItsCapOnRandomWork) {
  FakeArena arena(4096 * MiB);
  CachingAllocator a(arena);
  std::mt19937_64 rng(7);
  std::vector<void*> live;
  for (int step = 0; step < 3000; ++step) {
    if (!live.empty() && rng() % 5 < 2) {
      const size_t i = rng() % live.size();
      a.deallocate(live[i], 0);
      live[i] = live.back();
      live.pop_back();
      continue;
    }
    const size_t sizes[] = {size_t(rng() % 4096), size_t(rng() % (512 * KiB)), size_t(rng() % (3 * MiB)),
                            size_t(rng() % (14 * MiB))};
    const size_t n = sizes[rng() % 4];
    const int64_t max_cached = int64_t(rng() % 4) * MiB;
    const AllocatorStats before = *a.memory_stats();
    const int64_t cap = before.allocated_bytes + a.rounded_bytes(n) + max_cached;
    void* p = a.allocate_within(n, max_cached);
    const AllocatorStats after = *a.memory_stats();
    // Never past the cap, unless nothing was reserved (a free block reused
    // while free bytes inside segments in use exceed it).
    EXPECT_LE(after.reserved_bytes, std::max(cap, before.reserved_bytes)) << "step " << step;
    if (after.reserved_bytes > cap) {
      EXPECT_LE(after.reserved_bytes, before.reserved_bytes);
    }
    if (p != nullptr) {
      live.push_back(p);
    } else {
      EXPECT_LE(after.reserved_bytes, before.reserved_bytes);
    }
  }
  for (void* p : live) a.deallocate(p, 0);
  expect_consistent(a);
  a.empty_cache();
  EXPECT_EQ(arena.reserved, 0);
}

TEST(CachingAllocator, AFullDeviceGivesTheCacheBackAndRetries) {
  FakeArena arena(21 * MiB);
  CachingAllocator a(arena);
  void* s = a.allocate(4096);
  a.deallocate(s, 0);  // a free 2 MiB small segment cached
  // A 20 MiB segment does not fit beside it: it goes back, the retry fits.
  void* l = a.allocate(size_t(2 * MiB));
  ASSERT_NE(l, nullptr);
  EXPECT_EQ(arena.refused, 1);
  EXPECT_EQ(arena.release_calls, 1);
  EXPECT_EQ(arena.reserved, 20 * MiB);
  // Nothing left to give back: nullptr, nothing changed.
  EXPECT_EQ(a.allocate(size_t(25 * MiB)), nullptr);
  EXPECT_EQ(a.allocate_within(size_t(25 * MiB), 100 * MiB), nullptr);
  EXPECT_EQ(arena.reserved, 20 * MiB);
  a.deallocate(l, 0);
  expect_consistent(a);
}

TEST(CachingAllocator, StatsAndFragmentation) {
  FakeArena arena(1024 * MiB);
  CachingAllocator a(arena);
  EXPECT_EQ(fragmentation(*a.memory_stats()), 0.0);  // nothing free
  std::vector<void*> p;
  for (int i = 0; i < 8; ++i) p.push_back(a.allocate(256 * KiB));  // fills one 2 MiB segment
  EXPECT_EQ(a.memory_stats()->free_bytes, 0);
  EXPECT_EQ(fragmentation(*a.memory_stats()), 0.0);
  for (int i : {1, 3, 5}) a.deallocate(p[size_t(i)], 0);
  AllocatorStats s = *a.memory_stats();
  EXPECT_EQ(s.allocated_bytes, 5 * 256 * KiB);
  EXPECT_EQ(s.reserved_bytes, 2 * MiB);
  EXPECT_EQ(s.free_bytes, 3 * 256 * KiB);
  EXPECT_EQ(s.largest_free_block, 256 * KiB);
  EXPECT_EQ(s.segments, 1);
  EXPECT_EQ(s.allocations, 5);
  EXPECT_DOUBLE_EQ(fragmentation(s), 1.0 - 1.0 / 3.0);
  a.deallocate(p[2], 0);  // 1, 2 and 3 merge: 768 KiB of the 1 MiB free
  s = *a.memory_stats();
  EXPECT_EQ(s.largest_free_block, 768 * KiB);
  EXPECT_DOUBLE_EQ(fragmentation(s), 0.25);
  for (int i : {0, 4, 6, 7}) a.deallocate(p[size_t(i)], 0);
  s = *a.memory_stats();
  EXPECT_EQ(s.largest_free_block, 2 * MiB);
  EXPECT_EQ(fragmentation(s), 0.0);
  expect_consistent(a);
  // The Allocator defaults: no stats, no layout.
  struct Plain final : Allocator {
    void* allocate(size_t) override { return nullptr; }
    void deallocate(void*, size_t) override {}
  } plain;
  EXPECT_FALSE(plain.memory_stats().has_value());
  EXPECT_TRUE(plain.layout().empty());
  EXPECT_TRUE(plain.layout_for(100).empty());
  EXPECT_EQ(plain.rounded_bytes(100), 100);
}

TEST(CachingAllocator, LayoutIsInAddressOrder) {
  FakeArena arena(1024 * MiB);
  CachingAllocator a(arena);
  std::vector<void*> p;
  for (size_t n : {size_t(4096), size_t(3 * MiB), size_t(MiB), size_t(15 * MiB), size_t(700 * KiB), size_t(1000)})
    p.push_back(a.allocate(n));
  a.deallocate(p[2], 0);
  const auto layout = a.layout();
  ASSERT_EQ(layout.size(), size_t(a.memory_stats()->segments));
  for (size_t i = 1; i < layout.size(); ++i) EXPECT_LT(layout[i - 1][0].ptr, layout[i][0].ptr);
  expect_consistent(a);
  // Every block handed out is in the layout as allocated, at its address.
  for (size_t i : {0, 1, 3, 4, 5}) {
    bool found = false;
    for (const auto& seg : layout)
      for (const MemoryBlock& b : seg) found = found || (b.ptr == p[i] && b.allocated);
    EXPECT_TRUE(found) << i;
  }
  for (size_t i : {0, 1, 3, 4, 5}) a.deallocate(p[i], 0);
}

TEST(CachingAllocator, DeallocateOfAForeignPointerIsAnInternalError) {
  FakeArena arena(1024 * MiB);
  CachingAllocator a(arena);
  void* p = a.allocate(100);
  int x = 0;
  EXPECT_THROW(a.deallocate(&x, 4), InternalError);
  EXPECT_THROW(a.deallocate(at(p) + 64, 4), InternalError);
  a.deallocate(p, 100);
  EXPECT_THROW(a.deallocate(p, 100), InternalError);  // twice
}

TEST(CachingAllocator, ThreadsAllocatingAndFreeingAtOnce) {
  FakeArena arena(4096 * MiB);
  CachingAllocator a(arena);
  constexpr int kThreads = 4;
  std::vector<int64_t> corrupted(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(uint64_t(t) + 1);
      std::vector<std::pair<unsigned char*, size_t>> live;
      for (int step = 0; step < 3000; ++step) {
        if (live.size() > 6 || (!live.empty() && rng() % 2 == 0)) {
          const size_t i = rng() % live.size();
          auto [p, n] = live[i];
          // Each block still holds what its owner wrote: no two overlap.
          for (size_t k = 0; k < n; k += 97) corrupted[size_t(t)] += p[k] != (unsigned char)(t * 31 + k % 251);
          a.deallocate(p, n);
          live[i] = live.back();
          live.pop_back();
          continue;
        }
        const size_t n = rng() % 2 ? 1 + rng() % (64 * KiB) : 1 + rng() % (3 * MiB);
        auto* p = static_cast<unsigned char*>(a.allocate(n));
        ASSERT_NE(p, nullptr);
        for (size_t k = 0; k < n; k += 97) p[k] = (unsigned char)(t * 31 + k % 251);
        live.emplace_back(p, n);
      }
      for (auto [p, n] : live) a.deallocate(p, n);
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(corrupted[size_t(t)], 0) << t;
  expect_consistent(a);
  EXPECT_EQ(a.memory_stats()->allocated_bytes, 0);
  for (const auto& seg : a.layout()) EXPECT_EQ(seg.size(), 1u);  // every segment one free block
  a.empty_cache();
  EXPECT_EQ(arena.reserved, 0);
  EXPECT_EQ(arena.bad_releases, 0);
}

}  // namespace
}  // namespace dtr
