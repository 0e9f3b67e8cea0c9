// The runtime alone, with hand-built lineage and a counting allocator: no
// kernels, no autograd (DESIGN.md: remat/ is testable on its own).
#include <algorithm>
#include <chrono>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>

#include "core/error.h"
#include "core/logging.h"
#include "remat/policy.h"
#include "remat/runtime.h"

namespace dtr::remat {
namespace {

// Counts live bytes; can be told to fail.
class CountingAllocator final : public Allocator {
 public:
  void* allocate(size_t n) override {
    if (fail) return nullptr;
    live += int64_t(n);
    return std::malloc(n == 0 ? 1 : n);
  }
  void deallocate(void* p, size_t n) override {
    live -= int64_t(n);
    std::free(p);
  }
  int64_t live = 0;
  bool fail = false;
};

// Gives a runtime the counting allocator for every device.
struct CountingProvider final : AllocatorProvider {
  explicit CountingProvider(Allocator& a) : alloc(a) {}
  Allocator* allocator(Device) override { return &alloc; }
  Allocator& alloc;
};

struct Fixture : ::testing::Test {
  void TearDown() override { chain.clear(); }

  // A constant storage of n bytes, all equal to `v`.
  std::shared_ptr<Storage> constant(int64_t n, uint8_t v) {
    auto s = std::make_shared<Storage>(n, Device());
    rt.allocate(*s);
    std::memset(s->data(), v, size_t(n));
    rt.register_constant(*s);
    Storage* p = s.get();
    rt.release({&p, 1});
    return s;
  }

  // out = in + 1 bytewise, recorded as lineage.
  std::shared_ptr<Storage> plus_one(const std::shared_ptr<Storage>& in, double cost = 1e-6) {
    auto out = std::make_shared<Storage>(in->nbytes(), Device());
    Storage* ip = in.get();
    rt.acquire({&ip, 1});
    rt.allocate(*out);
    auto node = std::make_shared<Node>();
    node->op_name = "plus_one";
    node->inputs.push_back(in);
    node->outputs.push_back(out);
    node->output_nbytes.push_back(out->nbytes());
    node->cost_seconds = cost;
    node->recompute = [this](std::span<Storage* const> ins, std::span<Storage* const> outs) {
      ++replays;
      const auto* a = static_cast<const uint8_t*>(ins[0]->data());
      auto* b = static_cast<uint8_t*>(outs[0]->data());
      for (int64_t i = 0; i < outs[0]->nbytes(); ++i) b[i] = uint8_t(a[i] + 1);
    };
    node->recompute(std::span<Storage* const>(&ip, 1), std::vector<Storage*>{out.get()});
    --replays;
    rt.record(node);
    out->handle_count = 1;  // as if a user held it: no eager free
    Storage* op = out.get();
    rt.release({&ip, 1});
    rt.release({&op, 1});
    return out;
  }

  uint8_t first_byte(const std::shared_ptr<Storage>& s) {
    Storage* p = s.get();
    rt.acquire({&p, 1});
    const uint8_t v = *static_cast<uint8_t*>(s->data());
    rt.release({&p, 1});
    return v;
  }

  CountingAllocator alloc;
  CountingProvider provider{alloc};
  Runtime rt{provider};
  int replays = 0;
  std::vector<std::shared_ptr<Storage>> chain;
};

TEST_F(Fixture, StaysUnderBudgetAndRematerializesExactValues) {
  rt.set_memory_budget(4 * 1024);
  chain.push_back(constant(1024, 0));
  for (int i = 1; i <= 20; ++i) chain.push_back(plus_one(chain.back()));
  const Stats st = rt.stats();
  EXPECT_LE(st.peak_bytes, 4 * 1024);
  EXPECT_GT(st.evictions, 0);
  EXPECT_LE(alloc.live, 4 * 1024);
  for (int i = 20; i >= 0; --i) EXPECT_EQ(first_byte(chain[size_t(i)]), i);
  EXPECT_GT(rt.stats().rematerializations, 0);
  EXPECT_LE(rt.stats().peak_bytes, 4 * 1024);
}

/// Copies what the "dtr" logger prints, at `level`, while in scope.
class CapturedLog {
 public:
  explicit CapturedLog(const char* level)
      : sink_(std::make_shared<spdlog::sinks::ostream_sink_mt>(text_)),
        old_level_(global_options().log_level) {
    sink_->set_pattern("%l %v");
    logger().sinks().push_back(sink_);
    set_log_level(level);
  }
  ~CapturedLog() {
    auto& sinks = logger().sinks();
    sinks.erase(std::remove(sinks.begin(), sinks.end(), sink_), sinks.end());
    set_log_level(old_level_);
  }
  /// The captured lines that contain `needle`.
  std::vector<std::string> lines(const std::string& needle) const {
    std::vector<std::string> out;
    std::istringstream in(text_.str());
    for (std::string line; std::getline(in, line);)
      if (line.find(needle) != std::string::npos) out.push_back(line);
    return out;
  }

 private:
  std::ostringstream text_;
  std::shared_ptr<spdlog::sinks::ostream_sink_mt> sink_;
  std::string old_level_;
};

// Note [debug logging]: DTR_LOG=debug shows budget changes, evictions and
// rematerializations, an eviction and the rematerialization that undoes it
// naming the same storage.
TEST_F(Fixture, DebugLogShowsBudgetEvictionsAndRematerializations) {
  CapturedLog log("debug");
  chain.push_back(constant(1024, 0));
  rt.set_memory_budget(4 * 1024);
  // Few enough evictions and rematerializations to stay under the rate limit.
  for (int i = 1; i <= 8; ++i) chain.push_back(plus_one(chain.back()));
  for (int i = 8; i >= 0; --i) EXPECT_EQ(first_byte(chain[size_t(i)]), i);
  const Stats st = rt.stats();
  ASSERT_GT(st.evictions, 0);
  ASSERT_GT(st.rematerializations, 0);
  ASSERT_LT(st.evictions + st.rematerializations, 99);

  const auto budget = log.lines("memory budget");
  ASSERT_EQ(budget.size(), 1u);
  EXPECT_EQ(budget[0], "debug memory budget of cpu -1 -> 4096 bytes (-1: unlimited), 1024 bytes resident");
  const auto evictions = log.lines("evict storage");
  const auto remats = log.lines("rematerialized storage");
  EXPECT_EQ(int64_t(evictions.size()), st.evictions);
  EXPECT_EQ(int64_t(remats.size()), st.rematerializations);
  ASSERT_FALSE(evictions.empty());
  EXPECT_NE(evictions[0].find("(1024 bytes, from plus_one) on cpu: "), std::string::npos) << evictions[0];
  EXPECT_NE(evictions[0].find("budget 4096 bytes"), std::string::npos) << evictions[0];
  // The storage id of the first eviction comes back in a rematerialization.
  const std::string prefix = "debug evict storage ";
  const std::string id = evictions[0].substr(prefix.size(), evictions[0].find(" (") - prefix.size());
  const std::string rebuilt = "storage " + id + " (1024 bytes) by replaying plus_one";
  EXPECT_FALSE(log.lines(rebuilt).empty()) << rebuilt;
}

TEST_F(Fixture, NoDebugLinesAtTheDefaultLevel) {
  CapturedLog log("info");
  rt.set_memory_budget(4 * 1024);
  chain.push_back(constant(1024, 0));
  for (int i = 1; i <= 20; ++i) chain.push_back(plus_one(chain.back()));
  EXPECT_EQ(first_byte(chain[0]), 0);
  ASSERT_GT(rt.stats().evictions, 0);
  EXPECT_TRUE(log.lines("").empty());
}

TEST_F(Fixture, DebugLinesAreRateLimited) {
  CapturedLog log("debug");
  rt.set_memory_budget(64 * 8);
  chain.push_back(constant(64, 0));
  // Thousands of evictions within a second: 100 lines get through, then the
  // rest are counted, not printed.
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 1; i <= 3000; ++i) chain.push_back(plus_one(chain.back()));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_GT(rt.stats().evictions, 2000);
  // At most 100 lines, and one "dropped" line, per second begun.
  const size_t windows = size_t(seconds) + 2;
  EXPECT_LE(log.lines("debug").size(), 101 * windows);
  EXPECT_GE(log.lines("debug").size(), 100u);
}

TEST_F(Fixture, HundredThousandOpChainRematerializesWithoutRecursion) {
  rt.set_memory_budget(64 * 8);
  chain.push_back(constant(64, 0));
  for (int i = 1; i <= 100000; ++i) chain.push_back(plus_one(chain.back()));
  // Drop the middle handles' bytes: only lineage can bring them back.
  EXPECT_EQ(first_byte(chain.back()), uint8_t(100000 % 256));
  EXPECT_LE(rt.stats().peak_bytes, 64 * 8);
  // Evict everything evictable, then touch the end of the chain.
  rt.set_memory_budget(64 * 3);
  EXPECT_EQ(first_byte(chain[50000]), uint8_t(50000 % 256));
  EXPECT_GE(rt.stats().rematerializations, 40000);
  EXPECT_LE(rt.stats().peak_bytes, 64 * 8);
}

TEST_F(Fixture, OutOfMemoryReportsAndRecovers) {
  rt.set_memory_budget(1000);
  auto c = constant(600, 1);
  auto big = std::make_shared<Storage>(600, Device());
  try {
    rt.allocate(*big);
    FAIL() << "expected OutOfMemoryError";
  } catch (const OutOfMemoryError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("budget 1000 bytes"), std::string::npos) << msg;
    EXPECT_NE(msg.find("request 600 bytes"), std::string::npos) << msg;
    EXPECT_NE(msg.find("unevictable 600 bytes"), std::string::npos) << msg;
    EXPECT_NE(msg.find("a constant"), std::string::npos) << msg;
  }
  EXPECT_EQ(rt.stats().resident_bytes, 600);
  rt.set_memory_budget(2000);
  rt.allocate(*big);
  EXPECT_EQ(rt.stats().resident_bytes, 1200);
}

TEST_F(Fixture, LockedStoragesAreNeverEvicted) {
  rt.set_memory_budget(2000);
  auto c = constant(512, 0);
  auto a = plus_one(c);
  Storage* ap = a.get();
  rt.acquire({&ap, 1});
  auto b = std::make_shared<Storage>(1024, Device());
  EXPECT_THROW(rt.allocate(*b), OutOfMemoryError);  // only `a` is evictable, and it is locked
  EXPECT_TRUE(a->resident());
  rt.release({&ap, 1});
  rt.allocate(*b);  // now `a` goes
  EXPECT_FALSE(a->resident());
}

// Note [pin guard]: a pinned storage is not a candidate; the allocation
// that finds only pinned and constant bytes fails with the report and stays
// under the budget; after the unpin the storage is evictable again.
TEST_F(Fixture, PinnedStorageSurvivesPressureAndIsEvictableAfterUnpin) {
  rt.set_memory_budget(2000);
  auto c = constant(512, 0);
  auto a = plus_one(c);
  auto b = std::make_shared<Storage>(1024, Device());
  {
    PinGuard pin(a, rt);
    EXPECT_EQ(find_state(*a)->pin_count, 1);
    try {
      rt.allocate(*b);
      FAIL() << "expected OutOfMemoryError";
    } catch (const OutOfMemoryError& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("pinned 512 bytes"), std::string::npos) << msg;
      EXPECT_NE(msg.find("Largest pinned storages"), std::string::npos) << msg;
      EXPECT_NE(msg.find("512 bytes from plus_one"), std::string::npos) << msg;
    }
    EXPECT_TRUE(a->resident());
    EXPECT_FALSE(b->resident());
    EXPECT_EQ(rt.stats().resident_bytes, 1024);
    EXPECT_EQ(rt.stats().evictions, 0);
  }
  EXPECT_EQ(find_state(*a)->pin_count, 0);
  rt.allocate(*b);  // now `a` goes
  EXPECT_FALSE(a->resident());
  EXPECT_LE(rt.stats().peak_bytes, 2000);
}

TEST_F(Fixture, OutOfMemoryWhenEverythingIsPinned) {
  rt.set_memory_budget(1024);
  auto c = constant(256, 0);
  std::vector<std::shared_ptr<Storage>> outs;
  std::vector<PinGuard> pins;
  for (int i = 0; i < 3; ++i) {
    outs.push_back(plus_one(c));
    pins.emplace_back(outs.back(), rt);
  }
  auto b = std::make_shared<Storage>(256, Device());
  const std::string msg = [&] {
    try {
      rt.allocate(*b);
    } catch (const OutOfMemoryError& e) {
      return std::string(e.what());
    }
    return std::string();
  }();
  EXPECT_NE(msg.find("pinned 768 bytes"), std::string::npos) << msg;
  EXPECT_NE(msg.find("let the consumers release them"), std::string::npos) << msg;
  EXPECT_EQ(rt.stats().resident_bytes, 1024);
  for (const auto& o : outs) EXPECT_TRUE(o->resident());
  pins.clear();
  rt.allocate(*b);
  EXPECT_EQ(rt.stats().evictions, 1);
}

TEST_F(Fixture, PinRematerializesAnEvictedStorage) {
  auto c = constant(64, 7);
  auto a = plus_one(c);
  rt.set_memory_budget(128);
  auto filler = std::make_shared<Storage>(64, Device());
  rt.allocate(*filler);  // evicts a
  Storage* fp = filler.get();
  rt.release({&fp, 1});
  ASSERT_FALSE(a->resident());
  filler.reset();
  const int before = replays;
  PinGuard pin(a, rt);
  EXPECT_TRUE(a->resident());
  EXPECT_EQ(replays, before + 1);
  EXPECT_EQ(*static_cast<uint8_t*>(a->data()), 8);
  // Under pressure it stays: the allocation fails instead.
  auto b = std::make_shared<Storage>(64, Device());
  EXPECT_THROW(rt.allocate(*b), OutOfMemoryError);
  EXPECT_TRUE(a->resident());
}

TEST_F(Fixture, PinsAreCountedAndUnpinBalances) {
  auto c = constant(64, 0);
  auto a = plus_one(c);
  rt.pin(*a);
  rt.pin(*a);
  rt.unpin(*a);
  EXPECT_TRUE(is_pinned(*a));
  rt.unpin(*a);
  EXPECT_FALSE(is_pinned(*a));
  EXPECT_THROW(rt.unpin(*a), ValueError);
  // A guard moves; the moved-from guard pins nothing.
  PinGuard g1(a, rt);
  PinGuard g2(std::move(g1));
  EXPECT_EQ(g1.storage(), nullptr);
  EXPECT_EQ(find_state(*a)->pin_count, 1);
  PinGuard g3;
  g3 = std::move(g2);
  EXPECT_EQ(find_state(*a)->pin_count, 1);
  g3.reset();
  EXPECT_FALSE(is_pinned(*a));
  EXPECT_THROW(PinGuard(nullptr, rt), ValueError);
}

// A pinned storage no handle holds keeps its bytes until the unpin, which
// frees them at once (eager eviction) when lineage can rebuild them.
TEST_F(Fixture, LastUnpinFreesAStorageNoHandleHolds) {
  auto c = constant(64, 0);
  auto a = plus_one(c);
  PinGuard pin(a, rt);
  a->handle_count = 0;
  rt.on_last_handle(*a);
  EXPECT_TRUE(a->resident());
  pin.reset();
  EXPECT_FALSE(a->resident());
}

// out[i] = sum of ins[k][i] bytewise, recorded as lineage, held by no handle.
std::shared_ptr<Storage> unheld_sum(Runtime& rt, int& replays, std::vector<std::shared_ptr<Storage>> ins) {
  std::vector<Storage*> ip;
  for (auto& in : ins) ip.push_back(in.get());
  rt.acquire(ip);
  auto out = std::make_shared<Storage>(ins[0]->nbytes(), Device());
  rt.allocate(*out);
  auto node = std::make_shared<Node>();
  node->op_name = "sum_of";
  node->inputs = ins;
  node->outputs.push_back(out);
  node->output_nbytes.push_back(out->nbytes());
  node->cost_seconds = 1e-6;
  node->recompute = [&replays](std::span<Storage* const> in, std::span<Storage* const> outs) {
    ++replays;
    auto* b = static_cast<uint8_t*>(outs[0]->data());
    for (int64_t i = 0; i < outs[0]->nbytes(); ++i) {
      uint8_t v = 0;
      for (Storage* x : in) v = uint8_t(v + static_cast<const uint8_t*>(x->data())[i]);
      b[i] = v;
    }
  };
  std::vector<Storage*> op{out.get()};
  node->recompute(ip, op);
  --replays;
  rt.record(node);
  rt.release(ip);
  rt.release(op);
  rt.on_last_handle(*out);  // no handle: freed at once, lineage rebuilds it
  return out;
}

// Note [remat intermediates]: an intermediate no handle holds, brought back
// to rebuild one reader's result, stays while another reader's result a
// user holds is still evicted. Four held results of one unheld `g` (an LSTM
// cell's gate activations), read back one op after another, replay g once.
TEST_F(Fixture, AnUnheldIntermediateIsRebuiltOnceForItsEvictedReaders) {
  auto c = constant(64, 0);
  chain.push_back(c);
  for (int i = 0; i < 5; ++i) chain.push_back(plus_one(chain.back()));  // held: 1..5
  auto g = unheld_sum(rt, replays, {chain.back()});                       // 5, no handle
  std::vector<std::shared_ptr<Storage>> readers;
  for (int k = 0; k < 4; ++k) readers.push_back(plus_one(g));             // held: 6
  rt.set_memory_budget(64);  // evicts all but the constant
  for (auto& s : chain) EXPECT_EQ(s->resident(), s == c);
  rt.set_memory_budget(std::nullopt);
  replays = 0;
  for (auto& r : readers) EXPECT_EQ(first_byte(r), 6);
  EXPECT_EQ(replays, 5 + 1 + 4);  // the chain, g once, each reader
  // Once every reader is back, g goes (nothing will rebuild from it).
  EXPECT_FALSE(g->resident());
}

// The same within one rematerialization: `t` reads two unheld results of
// one unheld `g`; rebuilding t replays g once, not once per reader.
TEST_F(Fixture, OneRematerializationRebuildsASharedIntermediateOnce) {
  auto c = constant(64, 1);
  chain.push_back(c);
  for (int i = 0; i < 3; ++i) chain.push_back(plus_one(chain.back()));  // held: 2..4
  auto g = unheld_sum(rt, replays, {chain.back()});                       // 4
  auto a = unheld_sum(rt, replays, {g, g});                                // 8
  auto b = unheld_sum(rt, replays, {g});                                   // 4
  auto t = plus_one(unheld_sum(rt, replays, {a, b}));                     // held: 13
  rt.set_memory_budget(64);
  EXPECT_FALSE(t->resident());
  rt.set_memory_budget(std::nullopt);
  replays = 0;
  EXPECT_EQ(first_byte(t), 13);
  EXPECT_EQ(replays, 3 + 1 + 2 + 1 + 1);  // the chain, g, a and b, their sum, t
  EXPECT_FALSE(g->resident());
  EXPECT_FALSE(a->resident());
}

TEST_F(Fixture, MutationKeepsTheOldVersionForAnEvictedReader) {
  auto c = constant(16, 5);
  auto d = plus_one(c);  // reads c
  rt.set_memory_budget(64);
  auto filler = std::make_shared<Storage>(48, Device());
  rt.allocate(*filler);  // evicts d
  Storage* fp = filler.get();
  rt.release({&fp, 1});
  EXPECT_FALSE(d->resident());
  // Write into c in place: d's lineage must still see 5, so c's old bytes are kept.
  rt.set_memory_budget(128);
  auto old = rt.before_mutation(c);
  ASSERT_NE(old, nullptr);
  EXPECT_TRUE(old->resident());
  std::memset(c->data(), 100, 16);
  rt.set_memory_budget(128);
  EXPECT_EQ(first_byte(d), 6);
}

TEST_F(Fixture, MutationDetachesResidentReadersInsteadOfCopying) {
  auto c = constant(64, 5);
  auto d = plus_one(c);  // resident: detaching it costs no bytes, a copy would
  const int64_t before = rt.stats().resident_bytes;
  auto old = rt.before_mutation(c);
  EXPECT_EQ(old, nullptr);  // no copy
  EXPECT_EQ(rt.stats().resident_bytes, before);
  EXPECT_TRUE(is_constant(*d));
  EXPECT_EQ(producer(*d), nullptr);
  std::memset(c->data(), 100, 64);
  EXPECT_EQ(first_byte(d), 6);
}

// An error raised while rebuilding a storage keeps its type and says what
// was being rebuilt, by which replays, for which op; nothing stays locked.
TEST_F(Fixture, AnErrorDuringARematerializationSaysWhatWasRebuilt) {
  chain.push_back(constant(1024, 0));
  for (int i = 1; i <= 3; ++i) chain.push_back(plus_one(chain.back()));
  rt.set_memory_budget(1024);  // everything but the constant is evicted
  rt.set_memory_budget(4 * 1024);
  ASSERT_FALSE(chain[2]->resident());
  // Every replay of chain[1]'s producer now fails.
  auto* node = const_cast<Node*>(producer(*chain[1]));
  node->recompute = [](std::span<Storage* const>, std::span<Storage* const>) {
    throw ValueError("kernel failed");
  };
  ASSERT_FALSE(chain[1]->resident());
  Storage* p = chain[2].get();
  const CurrentOpScope op("some_op");
  try {
    rt.acquire({&p, 1});
    FAIL() << "no error";
  } catch (const ValueError& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.rfind("kernel failed", 0), 0u) << what;
    EXPECT_NE(what.find("while rematerializing a storage of 1024 bytes on cpu produced by 'plus_one'"),
              std::string::npos) << what;
    EXPECT_NE(what.find("replaying 'plus_one', needed by 'plus_one'"), std::string::npos) << what;
    EXPECT_NE(what.find("for op 'some_op'"), std::string::npos) << what;
  }
  // Nothing is left locked: everything resident can still be evicted.
  rt.set_memory_budget(1024);
  EXPECT_LE(rt.stats().resident_bytes, 1024);
}

// ---- policies: each picks the victim its formula says ----------------------

// No runtime and no globals: a policy, hand-built lineage and a pool.
struct PolicyFixture : ::testing::Test {
  // A resident storage of `bytes` produced by an op of `cost` seconds, last used at `tick`.
  std::shared_ptr<Storage> make(int64_t bytes, double cost, int64_t tick,
                                const std::shared_ptr<Storage>& input = nullptr) {
    auto s = std::make_shared<Storage>(bytes, Device());
    auto node = std::make_shared<Node>();
    node->cost_seconds = cost;
    if (input) node->inputs.push_back(input);
    node->outputs.push_back(s);
    state(*s).producer = node;
    state(*s).last_access = tick;
    nodes.push_back(node);
    if (input) state(*input).consumers.push_back(node);
    return s;
  }
  // The policy's score of `s` as a pool candidate.
  double score(EvictionPolicy& p, Storage& s, int64_t now) {
    pool.add(s);
    return p.score(pool[size_t(state(s).pool_index)], now);
  }
  std::vector<std::shared_ptr<Node>> nodes;
  CandidatePool pool;
};

TEST_F(PolicyFixture, FormulasOrderCandidates) {
  const int64_t now = 100;
  auto cheap_big = make(4096, 1.0, 90);   // local: 1/(4096*11)
  auto costly_small = make(64, 1.0, 90);  // local: 1/(64*11)
  auto stale = make(64, 1.0, 10);         // local: 1/(64*91)
  auto local = make_policy(Heuristic::kDtrLocal);
  EXPECT_LT(score(*local, *cheap_big, now), score(*local, *stale, now));
  EXPECT_LT(score(*local, *stale, now), score(*local, *costly_small, now));
  EXPECT_DOUBLE_EQ(score(*local, *cheap_big, now), (1.0 + 1e-12) / (4096.0 * 11.0));
  auto lru = make_policy(Heuristic::kLru);
  EXPECT_LT(score(*lru, *stale, now), score(*lru, *cheap_big, now));
  auto size = make_policy(Heuristic::kSize);
  EXPECT_LT(score(*size, *cheap_big, now), score(*size, *stale, now));
}

// Note [host tier]: one score decides between recomputing and copying back.
// Costs as the second test device prices them: its roofline (90 GFLOP/s,
// 30 GB/s, 0.1 µs per call) and a 25 GB/s, 10 µs host link with synchronous
// copies (a swap costs the copy out and the copy back).
TEST_F(PolicyFixture, SwapIsChosenWhereCopyingBackIsCheaperThanRecomputing) {
  const Roofline roof{.peak_flops = 90e9, .bandwidth = 30e9, .launch_seconds = 1e-7};
  const HostLink link{.bandwidth = 25e9, .latency_seconds = 1e-5};
  pool.set_host_link(link);
  const int64_t mib = int64_t{1} << 20;
  // A 512×512×512 GEMM's 1 MiB output: 2.7e8 FLOPs, ~3 ms to recompute.
  auto gemm = make(mib, roof.seconds(2.0 * 512 * 512 * 512, 3.0 * double(mib)), 0);
  // A ReLU of 1 MiB: ~70 µs, bound by its 2 MiB of traffic.
  auto relu = make(mib, roof.seconds(262144, 2.0 * double(mib)), 0);
  const double swap = 2 * link.seconds(double(mib));  // ~104 µs
  const int64_t now = 4;                            // staleness 5 for both (a fake clock)
  for (const Heuristic h : {Heuristic::kDtrEq, Heuristic::kDtr, Heuristic::kDtrLocal, Heuristic::kMsps,
                            Heuristic::kLru, Heuristic::kSize}) {
    SCOPED_TRACE(std::string(heuristic_name(h)));
    auto policy = make_policy(h);
    pool.add(*gemm);
    pool.add(*relu);
    const Candidate& g = pool[size_t(state(*gemm).pool_index)];
    const Candidate& r = pool[size_t(state(*relu).pool_index)];
    EXPECT_DOUBLE_EQ(g.swap_seconds, swap);
    EXPECT_TRUE(g.replayable);
    EXPECT_EQ(policy->restore_choice(g), EvictionPolicy::Restore::kSwap);
    EXPECT_EQ(policy->restore_choice(r), EvictionPolicy::Restore::kRecompute);
    EXPECT_DOUBLE_EQ(policy->restore_cost(g), swap);
    EXPECT_DOUBLE_EQ(policy->restore_cost(r), r.cost);
  }
  // dtr_eq's score is the cheaper way back over size times staleness.
  auto eq = make_policy(Heuristic::kDtrEq);
  EXPECT_DOUBLE_EQ(score(*eq, *gemm, now), (swap + 1e-12) / (double(mib) * 5.0));
  EXPECT_DOUBLE_EQ(score(*eq, *relu, now), (local_cost(*relu) + 1e-12) / (double(mib) * 5.0));
  // An evicted neighbour makes recomputing the ReLU dearer than copying it.
  auto input = make(mib, 1.0, 0);
  auto relu2 = make(mib, local_cost(*relu), 0, input);
  eq->on_evict(*input, pool);
  pool.add(*relu2);
  EXPECT_EQ(eq->restore_choice(pool[size_t(state(*relu2).pool_index)]), EvictionPolicy::Restore::kSwap);
  // A constant (no lineage) can only be copied back.
  auto constant = std::make_shared<Storage>(mib, Device());
  state(*constant).constant = true;
  pool.add(*constant);
  const Candidate& c = pool[size_t(state(*constant).pool_index)];
  EXPECT_FALSE(c.replayable);
  EXPECT_EQ(eq->recompute_cost(c), std::numeric_limits<double>::infinity());
  EXPECT_EQ(eq->restore_choice(c), EvictionPolicy::Restore::kSwap);
  // With the host tier off every swap is priced +inf: recomputation, and
  // bitwise the scores of a runtime without a host tier.
  pool.set_host_link(std::nullopt);
  pool.sync(*gemm);
  const Candidate& g_off = pool[size_t(state(*gemm).pool_index)];
  EXPECT_EQ(g_off.swap_seconds, std::numeric_limits<double>::infinity());
  EXPECT_EQ(eq->restore_choice(g_off), EvictionPolicy::Restore::kRecompute);
  EXPECT_EQ(eq->score(g_off, now), (local_cost(*gemm) + 1e-12) / (double(mib) * 5.0));
}

TEST_F(PolicyFixture, EvictedNeighbourhoodAddsCost) {
  // parent (evicted, cost 5) -> child (resident, cost 1)
  auto parent = make(100, 5.0, 0);
  auto child = make(100, 1.0, 0, parent);
  // `parent` has no bytes: it is evicted.
  const int64_t now = 9;
  auto exact = make_policy(Heuristic::kDtr);
  EXPECT_DOUBLE_EQ(score(*exact, *child, now), (1.0 + 5.0 + 1e-12) / (100.0 * 10.0));
  auto eq = make_policy(Heuristic::kDtrEq);
  eq->on_evict(*parent, pool);
  EXPECT_DOUBLE_EQ(score(*eq, *child, now), (1.0 + 5.0 + 1e-12) / (100.0 * 10.0));
  eq->on_rematerialize(*parent, pool);
  EXPECT_DOUBLE_EQ(score(*eq, *child, now), (1.0 + 1e-12) / (100.0 * 10.0));
  auto msps = make_policy(Heuristic::kMsps);
  EXPECT_DOUBLE_EQ(score(*msps, *child, now), (1.0 + 5.0 + 1e-12) / 100.0);
}

TEST_F(PolicyFixture, EquivalenceClassesMergeEvictedChains) {
  // a -> b -> c -> d, with a, b, c evicted; d's neighbourhood is {c, b, a} via classes.
  auto a = make(10, 1.0, 0);
  auto b = make(10, 2.0, 0, a);
  auto c = make(10, 4.0, 0, b);
  auto d = make(10, 8.0, 0, c);
  auto eq = make_policy(Heuristic::kDtrEq);
  eq->on_evict(*a, pool);
  eq->on_evict(*c, pool);
  eq->on_evict(*b, pool);  // joins a and c into one class of cost 7
  EXPECT_DOUBLE_EQ(score(*eq, *d, 0), (8.0 + 7.0 + 1e-12) / 10.0);
  auto exact = make_policy(Heuristic::kDtr);
  EXPECT_DOUBLE_EQ(score(*exact, *d, 0), (8.0 + 7.0 + 1e-12) / 10.0);
}

TEST_F(PolicyFixture, EquivalenceClassesTrackManyEvictedNeighbours) {
  // A resident centre read by five ops whose outputs (costs 1..5) are
  // evicted: more evicted neighbours than a candidate holds inline.
  auto centre = make(16, 0.5, 0);
  std::vector<std::shared_ptr<Storage>> kids;
  for (int i = 1; i <= 5; ++i) kids.push_back(make(16, double(i), 0, centre));
  auto eq = make_policy(Heuristic::kDtrEq);
  for (auto& k : kids) eq->on_evict(*k, pool);
  EXPECT_DOUBLE_EQ(score(*eq, *centre, 0), (0.5 + 15.0 + 1e-12) / 16.0);
  // Two come back: the centre's neighbourhood loses their cost.
  eq->on_rematerialize(*kids[1], pool);
  eq->on_rematerialize(*kids[4], pool);
  EXPECT_DOUBLE_EQ(score(*eq, *centre, 0), (0.5 + 1.0 + 3.0 + 4.0 + 1e-12) / 16.0);
  // A rematerialized child sees the centre as resident: only its own cost.
  EXPECT_DOUBLE_EQ(score(*eq, *kids[1], 0), (2.0 + 1e-12) / 16.0);
  eq->on_destroy(*kids[0], pool);
  EXPECT_DOUBLE_EQ(score(*eq, *centre, 0), (0.5 + 3.0 + 4.0 + 1e-12) / 16.0);
}

// ---- Note [staleness buckets]: the index's search -------------------------

// Candidates of many costs (1e-8 to 1e-2 s), sizes (64 B to 64 KiB) and ages
// in a graph with side branches; then a budget that takes ~40 evictions.
// Returns, per eviction in order, the victim's position in the build (or,
// for lru, whose ties are common, its last access).
std::vector<int64_t> victims_of(Heuristic h, SampleMode mode, uint32_t seed) {
  CountingAllocator alloc;
  CountingProvider provider{alloc};
  Runtime rt{provider};
  rt.set_heuristic(h);
  rt.set_sample_mode(mode);
  std::mt19937 rng(seed);
  std::vector<std::shared_ptr<Storage>> s;
  std::vector<std::shared_ptr<Node>> nodes;
  auto root = std::make_shared<Storage>(256, Device());
  rt.allocate(*root);
  rt.register_constant(*root);
  Storage* rp = root.get();
  rt.release({&rp, 1});
  s.push_back(root);
  for (int i = 1; i < 3000; ++i) {
    const auto bytes = int64_t(64 * (1 + rng() % 1024));
    auto out = std::make_shared<Storage>(bytes, Device());
    auto node = std::make_shared<Node>();
    node->op_name = "f";
    const std::shared_ptr<Storage>& in = s[rng() % s.size()];
    Storage* ip = in.get();
    rt.acquire({&ip, 1});
    node->inputs.push_back(in);
    node->outputs.push_back(out);
    node->output_nbytes.push_back(bytes);
    node->cost_seconds = std::pow(10.0, -8.0 + 6.0 * double(rng() % 10000) / 10000.0);
    node->recompute = [](std::span<Storage* const>, std::span<Storage* const>) {};
    rt.allocate(*out);
    rt.record(node);
    out->handle_count = 1;
    Storage* op = out.get();
    rt.release({&ip, 1});
    rt.release({&op, 1});
    s.push_back(out);
    nodes.push_back(node);
  }
  std::vector<bool> was(s.size(), true);
  std::vector<int64_t> victims;
  int64_t budget = rt.stats().resident_bytes;
  for (int e = 0; e < 40; ++e) {
    // Runtime::next_victim names the victim without evicting it (neither
    // search draws from the sampler).
    Storage* const next = rt.next_victim();
    budget -= 1;  // one eviction at a time, so their order shows
    rt.set_memory_budget(budget);
    for (size_t i = 0; i < s.size(); ++i) {
      if (was[i] && !s[i]->resident()) {
        EXPECT_EQ(s[i].get(), next) << "eviction " << e;
        victims.push_back(h == Heuristic::kLru ? state(*s[i]).last_access : int64_t(i));
        was[i] = false;
      }
    }
    budget = rt.stats().resident_bytes;
  }
  return victims;
}

// The branch and bound visits few candidates but misses none that could
// win: the victims, in order, are those of the exhaustive search, for each
// heuristic whose score falls with staleness.
TEST(StalenessIndex, FindsTheVictimsOfTheExhaustiveSearch) {
  for (Heuristic h : {Heuristic::kDtrEq, Heuristic::kDtr, Heuristic::kDtrLocal, Heuristic::kLru}) {
    for (uint32_t seed : {1u, 2u, 3u}) {
      const std::vector<int64_t> all = victims_of(h, SampleMode::kAll, seed);
      const std::vector<int64_t> index = victims_of(h, SampleMode::kIndex, seed);
      EXPECT_EQ(all.size(), 40u);
      EXPECT_EQ(index, all) << heuristic_name(h) << " seed " << seed;
    }
  }
}

// Keys fall in buckets, four per octave, whose floors bound them.
TEST(StalenessIndex, BucketFloorsBoundTheirKeys) {
  for (double key : {1e-30, 1e-20, 3.7e-15, 1e-12, 2.5e-9, 1.0, 7e3, 1e40}) {
    const int b = CandidatePool::bucket_of(key);
    ASSERT_GE(b, 0);
    ASSERT_LT(b, CandidatePool::kBuckets);
    EXPECT_LE(CandidatePool::bucket_floor(b), key) << key;
    if (b > 0 && b + 1 < CandidatePool::kBuckets) {
      EXPECT_GT(CandidatePool::bucket_floor(b + 1), key) << key;
      // Mantissas 1, 1.25, 1.5, 1.75: a bucket spans at most 25% of its floor.
      const double ratio = CandidatePool::bucket_floor(b + 1) / CandidatePool::bucket_floor(b);
      EXPECT_GE(ratio, 8.0 / 7.0 - 1e-12) << key;
      EXPECT_LE(ratio, 1.25 + 1e-12) << key;
    }
  }
}

}  // namespace
}  // namespace dtr::remat
