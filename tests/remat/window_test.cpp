// Fragmentation-aware eviction (Note [fragmentation-aware eviction]): the
// window search (remat/window.h) against a brute force, and the runtime
// over a caching allocator (core/caching_allocator.h) on a fake device
// (tests/fake_arena.h) whose free bytes are scattered.
#include "remat/window.h"

#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/caching_allocator.h"
#include "core/error.h"
#include "fake_arena.h"
#include "remat/policy.h"
#include "remat/runtime.h"

namespace dtr::remat {
namespace {

using testing::FakeArena;

constexpr int64_t KiB = 1024;
constexpr int64_t MiB = 1024 * 1024;

WindowBlock free_block(int64_t size) { return {.size = size, .kind = WindowBlock::kFree}; }
WindowBlock evictable(int64_t size, double score, int64_t id = -1) {
  return {.size = size, .kind = WindowBlock::kEvictable, .score = score, .id = id};
}
WindowBlock pinned(int64_t size) { return {.size = size, .kind = WindowBlock::kPinned}; }

// Every run of every segment, cheapest first, fewer evicted bytes on a tie.
std::optional<EvictionWindow> brute_force(const std::vector<WindowSegment>& segments, int64_t request) {
  std::optional<EvictionWindow> best;
  for (size_t si = 0; si < segments.size(); ++si) {
    const WindowSegment& seg = segments[si];
    for (size_t b = 0; b < seg.size(); ++b) {
      for (size_t e = b + 1; e <= seg.size(); ++e) {
        EvictionWindow w{si, b, e, 0, 0, 0};
        bool ok = true;
        for (size_t i = b; i < e; ++i) {
          if (seg[i].kind == WindowBlock::kPinned) ok = false;
          w.bytes += seg[i].size;
          if (seg[i].kind == WindowBlock::kEvictable) {
            w.cost += seg[i].score;
            w.evicted_bytes += seg[i].size;
          }
        }
        if (!ok || w.bytes < request) continue;
        if (!best || w.cost < best->cost || (w.cost == best->cost && w.evicted_bytes < best->evicted_bytes))
          best = w;
      }
    }
  }
  return best;
}

// `w` is a run of segments[w.segment] holding the request, with no pinned
// block, whose fields add up.
void expect_valid(const std::vector<WindowSegment>& segments, int64_t request, const EvictionWindow& w) {
  ASSERT_LT(w.segment, segments.size());
  const WindowSegment& seg = segments[w.segment];
  ASSERT_LT(w.begin, w.end);
  ASSERT_LE(w.end, seg.size());
  int64_t bytes = 0, evicted = 0;
  double cost = 0;
  for (size_t i = w.begin; i < w.end; ++i) {
    EXPECT_NE(seg[i].kind, WindowBlock::kPinned);
    bytes += seg[i].size;
    if (seg[i].kind == WindowBlock::kEvictable) {
      cost += seg[i].score;
      evicted += seg[i].size;
    }
  }
  EXPECT_GE(bytes, request);
  EXPECT_EQ(w.bytes, bytes);
  EXPECT_EQ(w.evicted_bytes, evicted);
  EXPECT_NEAR(w.cost, cost, 1e-9 * std::max(1.0, cost));
}

TEST(CheapestWindow, FreeBytesEnoughButScattered) {
  // 768 KiB free, no two free blocks adjacent: a 512 KiB request needs an
  // eviction, and the cheapest neighbour of a free block is chosen.
  const std::vector<WindowSegment> segs = {{free_block(256 * KiB), evictable(256 * KiB, 3), free_block(256 * KiB),
                                            evictable(256 * KiB, 1), free_block(256 * KiB),
                                            evictable(256 * KiB, 2)}};
  const auto w = cheapest_window(segs, 512 * KiB);
  ASSERT_TRUE(w.has_value());
  EXPECT_EQ(w->segment, 0u);
  EXPECT_EQ(w->begin, 2u);
  EXPECT_EQ(w->end, 4u);
  EXPECT_EQ(w->cost, 1.0);
  EXPECT_EQ(w->bytes, 512 * KiB);
  EXPECT_EQ(w->evicted_bytes, 256 * KiB);
}

TEST(CheapestWindow, APinnedBlockSplitsASegment) {
  const std::vector<WindowSegment> segs = {{evictable(256 * KiB, 1), evictable(256 * KiB, 1), pinned(256 * KiB),
                                            evictable(256 * KiB, 1), free_block(256 * KiB)}};
  // 768 KiB: each side of the pinned block holds only 512 KiB.
  EXPECT_FALSE(cheapest_window(segs, 768 * KiB).has_value());
  const auto w = cheapest_window(segs, 512 * KiB);
  ASSERT_TRUE(w.has_value());
  EXPECT_EQ(w->begin, 3u);
  EXPECT_EQ(w->end, 5u);
  EXPECT_EQ(w->cost, 1.0);
}

TEST(CheapestWindow, RequestLargerThanAnySegmentHasNoWindow) {
  const std::vector<WindowSegment> segs = {{free_block(MiB)}, {free_block(512 * KiB), evictable(512 * KiB, 0)}};
  EXPECT_FALSE(cheapest_window(segs, MiB + 512 * KiB).has_value());  // 2 MiB free in all
  EXPECT_FALSE(cheapest_window({}, 512).has_value());
  const std::vector<WindowSegment> empty_segments = {{}, {}};
  EXPECT_FALSE(cheapest_window(empty_segments, 512).has_value());
}

TEST(CheapestWindow, TiesGoToFewerEvictedBytesAndFreeRunsCostNothing) {
  // Equal cost 1: the second segment's window evicts 512 bytes, not 1024.
  const std::vector<WindowSegment> tie = {{evictable(1024, 1)}, {free_block(512), evictable(512, 1)}};
  auto w = cheapest_window(tie, 1024);
  ASSERT_TRUE(w.has_value());
  EXPECT_EQ(w->segment, 1u);
  EXPECT_EQ(w->evicted_bytes, 512);
  // A free run that holds the request costs nothing.
  const std::vector<WindowSegment> free_run = {{evictable(1024, 0.5), pinned(512), free_block(512), free_block(512)}};
  w = cheapest_window(free_run, 1024);
  ASSERT_TRUE(w.has_value());
  EXPECT_EQ(w->cost, 0.0);
  EXPECT_EQ(w->evicted_bytes, 0);
  EXPECT_EQ(w->begin, 2u);
  EXPECT_THROW(cheapest_window(free_run, 0), ValueError);
}

// Random layouts, exhaustively against the brute force: integer scores
// (exact sums, so costs compare equal) and fractional ones.
TEST(CheapestWindow, MatchesBruteForceOnRandomLayouts) {
  std::mt19937_64 rng(20231210);
  int found = 0, none = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    const bool integral = iter % 2 == 0;
    std::vector<WindowSegment> segs(1 + rng() % 4);
    for (WindowSegment& seg : segs) {
      const size_t n = rng() % 13;
      for (size_t i = 0; i < n; ++i) {
        const int64_t size = 512 * int64_t(1 + rng() % 8);
        switch (rng() % 4) {
          case 0: seg.push_back(free_block(size)); break;
          case 1: seg.push_back(pinned(size)); break;
          default: {
            const double score = integral ? double(rng() % 6) : double(rng() % 1000) / 7.0;
            seg.push_back(evictable(size, score));
          }
        }
      }
    }
    const int64_t request = 512 * int64_t(1 + rng() % 24);
    const auto fast = cheapest_window(segs, request);
    const auto slow = brute_force(segs, request);
    ASSERT_EQ(fast.has_value(), slow.has_value()) << "iteration " << iter;
    if (!fast) {
      ++none;
      continue;
    }
    ++found;
    expect_valid(segs, request, *fast);
    if (integral) {
      EXPECT_EQ(fast->cost, slow->cost) << "iteration " << iter;
      EXPECT_EQ(fast->evicted_bytes, slow->evicted_bytes) << "iteration " << iter;
    } else {
      EXPECT_NEAR(fast->cost, slow->cost, 1e-9 * std::max(1.0, slow->cost)) << "iteration " << iter;
    }
  }
  // Both outcomes were exercised.
  EXPECT_GT(found, 1000);
  EXPECT_GT(none, 1000);
}

// ---- the runtime over a caching allocator ---------------------------------

// Scores a candidate from a table the test fills (1 where not set).
class TablePolicy final : public EvictionPolicy {
 public:
  double score(const Candidate& c, int64_t) override {
    const auto it = table.find(c.s);
    return it == table.end() ? 1.0 : it->second;
  }
  std::map<const Storage*, double> table;
};

// Forwards to another allocator but keeps its layout to itself, so the
// runtime can only evict the policy's victims.
class WithoutLayout final : public Allocator {
 public:
  explicit WithoutLayout(Allocator& a) : a_(a) {}
  void* allocate(size_t n) override { return a_.allocate(n); }
  void* allocate_within(size_t n, int64_t max_cached) override { return a_.allocate_within(n, max_cached); }
  void deallocate(void* p, size_t n) override { a_.deallocate(p, n); }
  int64_t cached_bytes() const override { return a_.cached_bytes(); }
  void release_cached(int64_t n) override { a_.release_cached(n); }
  int64_t rounded_bytes(size_t n) const override { return a_.rounded_bytes(n); }
  std::optional<AllocatorStats> memory_stats() const override { return a_.memory_stats(); }

 private:
  Allocator& a_;
};

struct OneProvider final : AllocatorProvider {
  explicit OneProvider(Allocator& a) : alloc(a) {}
  Allocator* allocator(Device) override { return &alloc; }
  Allocator& alloc;
};

// A runtime whose device takes its bytes from a caching allocator over a
// fake device of `capacity` bytes.
struct Arena {
  enum class Layout { kShown, kHidden };
  enum class Policy { kTable, kDefault };
  explicit Arena(int64_t capacity, Layout layout = Layout::kShown, Policy policy = Policy::kTable)
      : arena(capacity), caching(arena), hidden(caching),
        provider(layout == Layout::kShown ? static_cast<Allocator&>(caching) : static_cast<Allocator&>(hidden)),
        rt(provider, policy == Policy::kTable ? make_table() : nullptr) {}
  ~Arena() { storages.clear(); }

  std::unique_ptr<EvictionPolicy> make_table() {
    auto p = std::make_unique<TablePolicy>();
    table = &p->table;
    return p;
  }

  // A constant of `n` bytes with a pattern of its own.
  std::shared_ptr<Storage> constant(int64_t n, int seed) {
    auto s = std::make_shared<Storage>(n, Device());
    rt.allocate(*s);
    auto* p = static_cast<uint8_t*>(s->data());
    for (int64_t i = 0; i < n; ++i) p[i] = uint8_t(i * 13 + seed);
    rt.register_constant(*s);
    Storage* sp = s.get();
    rt.release({&sp, 1});
    return s;
  }
  // out[i] = 3 in[i] + i % 7 + 1, recorded as lineage, `out_bytes` long
  // (the input read cyclically); a user handle holds it.
  std::shared_ptr<Storage> step(const std::shared_ptr<Storage>& in, int64_t out_bytes) {
    auto out = std::make_shared<Storage>(out_bytes, Device());
    Storage* ip = in.get();
    rt.acquire({&ip, 1});
    rt.allocate(*out);
    auto node = std::make_shared<Node>();
    node->op_name = "step";
    node->inputs.push_back(in);
    node->outputs.push_back(out);
    node->output_nbytes.push_back(out_bytes);
    node->cost_seconds = 1e-6 * double(out_bytes) / double(MiB);
    node->recompute = [](std::span<Storage* const> ins, std::span<Storage* const> outs) {
      const auto* a = static_cast<const uint8_t*>(ins[0]->data());
      auto* b = static_cast<uint8_t*>(outs[0]->data());
      const int64_t na = ins[0]->nbytes();
      for (int64_t i = 0; i < outs[0]->nbytes(); ++i) b[i] = uint8_t(3 * a[i % na] + i % 7 + 1);
    };
    std::vector<Storage*> outs{out.get()};
    node->recompute(std::span<Storage* const>(&ip, 1), outs);
    rt.record(node);
    out->handle_count = 1;
    Storage* op = out.get();
    rt.release({&ip, 1});
    rt.release({&op, 1});
    return out;
  }
  // A constant and `n - 1` steps after it, all of `bytes` bytes.
  void chain(int n, int64_t bytes) {
    storages.push_back(constant(bytes, 5));
    for (int i = 1; i < n; ++i) storages.push_back(step(storages.back(), bytes));
  }
  // The user lets go of storages[i]: its bytes go at once (eager eviction).
  void drop(size_t i) {
    storages[i]->handle_count = 0;
    rt.on_last_handle(*storages[i]);
  }
  // A fresh storage of `n` bytes, allocated (lineage-less: it stays put).
  std::shared_ptr<Storage> take(int64_t n) {
    auto s = std::make_shared<Storage>(n, Device());
    rt.allocate(*s);
    Storage* sp = s.get();
    rt.release({&sp, 1});
    return s;
  }
  // The bytes of storages[i], rematerialized if need be.
  std::vector<uint8_t> bytes(size_t i) {
    Storage* p = storages[i].get();
    rt.acquire({&p, 1});
    const auto* d = static_cast<const uint8_t*>(p->data());
    std::vector<uint8_t> out(d, d + p->nbytes());
    rt.release({&p, 1});
    return out;
  }

  FakeArena arena;
  CachingAllocator caching;
  WithoutLayout hidden;
  OneProvider provider;
  std::map<const Storage*, double>* table = nullptr;
  Runtime rt;
  std::vector<std::shared_ptr<Storage>> storages;
};

// One 2 MiB segment of eight 256 KiB storages, s0 a constant; s3 and s6
// dropped, so 512 KiB are free in two holes; the policy ranks s1 lowest,
// which no hole borders.
void fragment(Arena& a) {
  a.chain(8, 256 * KiB);
  for (size_t i = 1; i < 8; ++i)
    ASSERT_EQ(static_cast<char*>(a.storages[i]->data()), static_cast<char*>(a.storages[0]->data()) + i * 256 * KiB);
  ASSERT_EQ(a.arena.reserved, 2 * MiB);
  a.drop(3);
  a.drop(6);
  ASSERT_FALSE(a.storages[3]->resident());
  ASSERT_FALSE(a.storages[6]->resident());
  const auto& s = a.storages;
  *a.table = {{s[1].get(), 1}, {s[2].get(), 4}, {s[4].get(), 3}, {s[5].get(), 6}, {s[7].get(), 8}};
}

TEST(FragmentationAwareEviction, EvictsAWindowOfNeighboursNotScatteredVictims) {
  Arena a(2 * MiB);  // the device holds one small segment
  fragment(a);
  char* const hole = static_cast<char*>(a.storages[0]->data()) + 3 * 256 * KiB;
  const Stats before = a.rt.stats();
  EXPECT_EQ(before.reserved_bytes, 2 * MiB);
  EXPECT_EQ(before.largest_free_block, 256 * KiB);
  EXPECT_DOUBLE_EQ(before.fragmentation, 0.5);
  // 512 KiB are free but in no one block, and the device has no room for a
  // second segment: the window of s4 and the hole before it is evicted
  // (cost 3), not s1 (the lowest score, whose eviction would not help).
  const auto big = a.take(512 * KiB);
  EXPECT_EQ(static_cast<char*>(big->data()), hole);
  const Stats st = a.rt.stats();
  EXPECT_EQ(st.evictions, 1);
  EXPECT_EQ(st.window_evictions, 1);
  EXPECT_FALSE(a.storages[4]->resident());
  for (size_t i : {0, 1, 2, 5, 7}) EXPECT_TRUE(a.storages[i]->resident()) << i;
  EXPECT_EQ(st.reserved_bytes, 2 * MiB);
  EXPECT_EQ(st.allocated_bytes, 2 * MiB - 256 * KiB);
  EXPECT_EQ(st.largest_free_block, 256 * KiB);
  EXPECT_EQ(st.fragmentation, 0.0);
  EXPECT_EQ(a.arena.reserve_calls - a.arena.refused, 1);

  // Every storage reads back bitwise as in a run with room to spare, though
  // reading them back evicts more windows on the full device.
  Arena reference(1024 * MiB);
  reference.chain(8, 256 * KiB);
  for (size_t i = 0; i < 8; ++i) EXPECT_EQ(a.bytes(i), reference.bytes(i)) << "storage " << i;
  EXPECT_GT(a.rt.stats().rematerializations, 0);
  EXPECT_GT(a.rt.stats().window_evictions, 1);
  EXPECT_EQ(reference.rt.stats().evictions, 0);
}

TEST(FragmentationAwareEviction, WithoutALayoutThePolicysVictimsAreEvictedUntilItFits) {
  Arena a(2 * MiB, Arena::Layout::kHidden);
  fragment(a);
  char* const hole = static_cast<char*>(a.storages[0]->data()) + 3 * 256 * KiB;
  // s1 first (lowest score): its hole borders no other, the allocation
  // still fails; then s4, which joins the hole before it.
  const auto big = a.take(512 * KiB);
  EXPECT_EQ(static_cast<char*>(big->data()), hole);
  const Stats st = a.rt.stats();
  EXPECT_EQ(st.evictions, 2);
  EXPECT_EQ(st.window_evictions, 0);
  EXPECT_FALSE(a.storages[1]->resident());
  EXPECT_FALSE(a.storages[4]->resident());
  Arena reference(1024 * MiB);
  reference.chain(8, 256 * KiB);
  for (size_t i = 0; i < 8; ++i) EXPECT_EQ(a.bytes(i), reference.bytes(i)) << "storage " << i;
}

TEST(FragmentationAwareEviction, APinnedOnlyLayoutIsOutOfMemoryNamingTheFragmentation) {
  Arena a(2 * MiB);
  for (int i = 0; i < 8; ++i) a.storages.push_back(a.constant(256 * KiB, i));
  a.storages[3].reset();  // destroyed: two 256 KiB holes among constants
  a.storages[6].reset();
  EXPECT_DOUBLE_EQ(a.rt.stats().fragmentation, 0.5);
  std::string message;
  try {
    (void)a.take(512 * KiB);
  } catch (const OutOfMemoryError& e) {
    message = e.what();
  }
  ASSERT_FALSE(message.empty()) << "no OutOfMemoryError";
  EXPECT_NE(message.find("could not allocate 524288 bytes"), std::string::npos) << message;
  EXPECT_NE(message.find("512.0 KiB free in reserved segments but the largest free block is 256.0 KiB "
                         "(fragmentation 0.50"),
            std::string::npos)
      << message;
  EXPECT_EQ(a.rt.stats().evictions, 0);
  // The runtime is consistent: a request a hole fits is served from it.
  const auto fits = a.take(256 * KiB);
  EXPECT_TRUE(fits->resident());
  EXPECT_EQ(a.rt.stats().resident_bytes, 7 * 256 * KiB);
}

// Note [hard budget]: the allocator's reserved bytes stay within the
// budget, its rounding counted, with sizes that are no multiple of 512.
TEST(FragmentationAwareEviction, ReservedBytesNeverExceedTheBudget) {
  const int64_t budget = 3 * MiB + 12345;
  Arena a(1024 * MiB, Arena::Layout::kShown, Arena::Policy::kDefault);
  Arena reference(1024 * MiB, Arena::Layout::kShown, Arena::Policy::kDefault);
  a.rt.set_memory_budget(budget);
  for (Arena* r : {&a, &reference}) {
    r->storages.push_back(r->constant(100001, 1));
    for (int i = 1; i < 40; ++i) r->storages.push_back(r->step(r->storages.back(), 60001 + (i * 37117) % 700000));
  }
  EXPECT_LE(a.arena.peak_reserved, budget);
  EXPECT_GT(a.rt.stats().evictions, 0);
  for (size_t i = 40; i-- > 0;) {
    EXPECT_EQ(a.bytes(i), reference.bytes(i)) << "storage " << i;
    const Stats st = a.rt.stats();
    EXPECT_LE(st.reserved_bytes, budget);
    EXPECT_GE(st.allocated_bytes, st.resident_bytes);
    EXPECT_LE(st.allocated_bytes, st.reserved_bytes);
  }
  EXPECT_LE(a.arena.peak_reserved, budget);
  EXPECT_GT(a.rt.stats().rematerializations, 0);
  EXPECT_EQ(reference.rt.stats().evictions, 0);
  // No allocator account (the CPU's): the fields say so.
  EXPECT_EQ(Runtime().stats(Device(kCPU)).reserved_bytes, -1);
  EXPECT_EQ(Runtime().stats(Device(kCPU)).fragmentation, 0.0);
}

}  // namespace
}  // namespace dtr::remat
