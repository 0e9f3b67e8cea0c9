// remat/memory_snapshot.h: the memory history recorder counts every
// allocation, free, eviction, rematerialization and swap the runtime makes,
// tags dtr's own in the frames, and the snapshot it writes is a pickle that
// Python reads back with the keys PyTorch's visualizer reads.
#include "remat/memory_snapshot.h"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/memory_history.h"
#include "dtr/dtr.h"
#include "tests/child_process.h"
#include "tests/second_device.h"
#include "tests/testing.h"

namespace dtr {
namespace {

using memory::Action;
using memory::Event;
using memory::Why;

struct Recording : ::testing::Test {
  void SetUp() override {
    memory::record_history(std::nullopt);  // drops anything earlier
    remat::reset_stats();
  }
  void TearDown() override {
    memory::record_history(std::nullopt);
    remat::set_memory_budget(std::nullopt);
    remat::set_memory_budget(testing::second_device(), std::nullopt);
  }
};

// What a trace says of one device, counted as PyTorch's visualizer counts
// (process_alloc_data in MemoryViz.js): allocations, and the peak of the
// bytes allocated at once, where a block freed without its alloc in the
// trace, or in use at the end without one, was there from the start.
struct Counts {
  int64_t allocs = 0, frees = 0, evicts = 0, remats = 0, swap_outs = 0, swap_ins = 0, segment_allocs = 0, peak = 0;
};
Counts count(const memory::Recorded& r, Device d, const remat::Runtime::MemoryHolding* end) {
  Counts c;
  std::map<uint64_t, int64_t> open;  // alloc'd in the trace, not freed yet
  int64_t initial = 0;
  std::vector<std::pair<int, int64_t>> steps;  // +1 alloc / -1 free
  for (const Event& e : r.events) {
    if (e.allocator != nullptr) {
      if (e.action == Action::kSegmentAlloc) ++c.segment_allocs;
      continue;
    }
    if (!(e.device == d)) continue;
    const auto first = [&] { return r.frames.at(e.frames).empty() ? std::string() : r.frames[e.frames][0].name; };
    if (e.action == Action::kAlloc) {
      ++c.allocs;
      open[e.addr] = e.size;
      steps.emplace_back(1, e.size);
      if (e.why == Why::kRemat) ++c.remats;
      if (e.why == Why::kSwapIn && d.type != kCPU) ++c.swap_ins;
      if (e.why == Why::kRemat) EXPECT_EQ(first().rfind("remat ", 0), 0u) << first();
    } else if (e.action == Action::kFreeCompleted) {
      ++c.frees;
      if (e.why == Why::kEvict) {
        ++c.evicts;
        EXPECT_EQ(first().rfind("evict ", 0), 0u) << first();
      }
      if (e.why == Why::kSwapOut && d.type != kCPU) ++c.swap_outs;
      if (open.erase(e.addr) == 0) initial += e.size;
      steps.emplace_back(-1, e.size);
    }
  }
  if (end != nullptr)
    for (const auto& [p, n] : end->live)
      if (!open.contains(reinterpret_cast<uintptr_t>(p))) initial += n;
  int64_t now = initial;
  c.peak = now;
  for (const auto& [sign, n] : steps) {
    now += sign * n;
    c.peak = std::max(c.peak, now);
  }
  return c;
}

const remat::Runtime::MemoryHolding* holding(const std::vector<remat::Runtime::MemoryHolding>& hs, Device d) {
  for (const auto& h : hs)
    if (h.device == d) return &h;
  return nullptr;
}

// A chain of 64 KiB storages under a budget of six of them: evicted as it
// grows, rematerialized when the first is read again.
std::vector<float> chain_under_budget(int n) {
  remat::set_memory_budget(int64_t{6} * 65536 + 4096);
  std::vector<Tensor> keep;
  Tensor x = testing::leaf({16384}, 3).detach();
  x = x.to(kFloat32);
  keep.push_back(x);
  for (int i = 0; i < n; ++i) keep.push_back(keep.back() * 1.01 + 0.5);
  std::vector<float> out = keep[1].to_vector<float>();  // rematerialized
  remat::set_memory_budget(std::nullopt);
  return out;
}

TEST_F(Recording, CountsEqualTheRuntimeStats) {
  memory::record_history("all");
  chain_under_budget(24);
  const remat::Stats s = remat::stats(Device(kCPU));
  const auto hs = remat::Runtime::global().memory_holdings();
  const Counts c = count(memory::recorded(), Device(kCPU), holding(hs, Device(kCPU)));
  ASSERT_GT(s.evictions, 0);
  ASSERT_GT(s.rematerializations, 0);
  EXPECT_EQ(c.allocs, s.allocations);
  EXPECT_EQ(c.evicts, s.evictions);
  EXPECT_EQ(c.remats, s.rematerializations);
  EXPECT_EQ(c.peak, s.peak_bytes);
}

TEST_F(Recording, OffRecordsNothing) {
  ASSERT_FALSE(memory::recording());
  chain_under_budget(8);
  EXPECT_TRUE(memory::recorded().events.empty());
  // "state" keeps the live blocks' frames but no trace.
  memory::record_history("state");
  Tensor t = randn({1024}) * 2.0;
  EXPECT_TRUE(memory::recorded().events.empty());
  EXPECT_FALSE(memory::recorded().live.empty());
}

TEST_F(Recording, MaxEntriesKeepsTheLast) {
  memory::record_history("all", "all", "all", 10);
  chain_under_budget(8);
  const memory::Recorded r = memory::recorded();
  EXPECT_EQ(r.events.size(), 10u);
}

TEST_F(Recording, FramesNameTheOpAndTheScopes) {
  memory::record_history("all");
  Tensor a = randn({4096});
  Tensor b;
  {
    trace::Scope step("step 0");
    trace::Scope layer("layer1");
    b = a * 3.0;
  }
  const memory::Recorded r = memory::recorded();
  bool found = false;
  for (const Event& e : r.events) {
    if (e.action != Action::kAlloc || e.addr != reinterpret_cast<uintptr_t>(b.storage()->data())) continue;
    const auto& f = r.frames.at(e.frames);
    ASSERT_EQ(f.size(), 3u);
    EXPECT_EQ(f[0].filename, "op");
    EXPECT_EQ(f[0].name, "mul_scalar");
    EXPECT_EQ(f[1].name, "layer1");
    EXPECT_EQ(f[2].name, "step 0");
    EXPECT_EQ(f[2].filename, "scope");
    found = true;
  }
  EXPECT_TRUE(found);
}

TEST_F(Recording, BadArgumentsAreValueErrors) {
  EXPECT_THROW(memory::record_history("everything"), ValueError);
  EXPECT_THROW(memory::record_history("all", "some"), ValueError);
  EXPECT_THROW(memory::record_history("all", "all", "cpp"), ValueError);
  EXPECT_FALSE(memory::recording());
  EXPECT_THROW(memory::dump_snapshot("/nonexistent-dir/x.pickle"), ValueError);
}

// The host tier on the test device: swaps are tagged on both devices, and
// the device's segments come from its caching allocator.
TEST_F(Recording, SwapsAndSegmentsOnTheTestDevice) {
  const Device dev = testing::second_device();
  remat::Runtime::global().set_swap_mode(SwapMode::kAuto);
  testing::second_device_allocator(0).empty_cache();
  memory::record_history("all");
  // 24 MiB: a segment of its own (whatever earlier tests left cached).
  (void)(randn({6 << 20}) * 2.0).to(dev).sum().item<float>();
  std::vector<float> h0;
  {
    Tensor x = (randn({256, 256}) * 0.3).to(dev);
    Tensor h = matmul(x, x);
    h0 = h.to_vector<float>();
    (void)x.to_vector<float>();
    remat::set_memory_budget(dev, 2 * x.storage()->nbytes() + 4096);
    Tensor y = x * 2.0;  // needs room: h (a dear GEMM) is swapped out
    (void)y.to_vector<float>();
    EXPECT_EQ(h.to_vector<float>(), h0);  // swapped back in
    remat::set_memory_budget(dev, std::nullopt);
  }
  const remat::Stats s = remat::stats(dev);
  ASSERT_GT(s.swap_outs, 0);
  const auto hs = remat::Runtime::global().memory_holdings();
  const memory::Recorded r = memory::recorded();
  const Counts c = count(r, dev, holding(hs, dev));
  EXPECT_EQ(c.swap_outs, s.swap_outs);
  EXPECT_EQ(c.swap_ins, s.swap_ins);
  EXPECT_EQ(c.allocs, s.allocations);
  EXPECT_EQ(c.peak, s.peak_bytes);
  const Counts cpu = count(r, Device(kCPU), holding(hs, Device(kCPU)));
  EXPECT_EQ(cpu.allocs, remat::stats(Device(kCPU)).allocations);

  // Read back in Python: the devices, the segments' blocks covering them,
  // and the tagged events.
  if (access("/usr/bin/python3", X_OK) != 0) GTEST_SKIP() << "no python3 to read the snapshot";
  testing::TempDir dir;
  const std::string path = (dir.path / "s.pickle").string();
  memory::dump_snapshot(path);
  const std::string code = R"(
import pickle, sys
s = pickle.load(open(sys.argv[1], 'rb'))
dev = s['devices'].index(sys.argv[2])
segs = [g for g in s['segments'] if g['device'] == dev]
assert segs, 'no segments'
for g in s['segments']:
    assert g['total_size'] == sum(b['size'] for b in g['blocks']), g
    addr = g['address']
    for b in g['blocks']:
        assert b['address'] == addr
        addr += b['size']
        assert b['state'] in ('active_allocated', 'inactive')
t = s['device_traces'][dev]
meta = [e.get('user_metadata', '') for e in t]
print(len(t) > 0, sum(m.startswith('swap out ') for m in meta if True) // 2,
      sum(1 for e in t if e['action'] == 'alloc' and e.get('user_metadata', '').startswith('swap in ')),
      sum(1 for e in t if e['action'] == 'segment_alloc') > 0)
)";
  const testing::Output out = testing::run_child("/usr/bin/python3", {"-c", code, path, dev.str()});
  ASSERT_EQ(out.exit_code, 0) << out.all();
  EXPECT_EQ(out.out, fmt::format("True {} {} True\n", s.swap_outs, s.swap_ins)) << out.all();
}

}  // namespace
}  // namespace dtr
