// The host tier (Note [host tier]): on a device with a host link (the test
// device of tests/second_device.h stands in for a GPU), a victim's bytes may
// be copied to host memory instead of evicted, whichever is cheaper to bring
// back; constants (parameters, optimizer state) become swappable, which
// lowers the never-evictable floor; swapped bytes count against the cpu
// budget, and a full host tier falls back to recomputation.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "dtr/dtr.h"
#include "remat/planner.h"
#include "remat/runtime.h"
#include "second_device.h"
#include "testing.h"

namespace dtr {
namespace {

using testing::second_device;

Tensor on(Device dev, IntList shape, double freq) {
  std::vector<float> v(size_t(numel(shape)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = float(std::sin(double(i) * freq + 0.3));
  return from_vector(v, shape, TensorOptions(kFloat32).device(dev));
}

// An MLP trained with AdamW on `dev`: `layers` × (matmul by a width×width
// weight, GELU) on a (batch, width) input, mean squared error.
class DeviceMlp {
 public:
  DeviceMlp(Device dev, int64_t batch, int64_t width, int layers) {
    for (int i = 0; i < layers; ++i) {
      Tensor w = on(dev, {width, width}, 0.11 + 0.01 * i);
      {
        NoGradGuard no_grad;
        w.mul_(1.0 / std::sqrt(double(width)));
      }
      w.requires_grad_();
      weights.push_back(w);
    }
    optimizer = std::make_unique<optim::AdamW>(weights);
    x = on(dev, {batch, width}, 0.37);
    y = on(dev, {batch, width}, 0.23);
  }
  float step() {
    optimizer->zero_grad();
    Tensor h = x;
    for (const Tensor& w : weights) h = gelu(matmul(h, w));
    Tensor loss = mse_loss(h, y);
    loss.backward();
    optimizer->step();
    return loss.item<float>();
  }
  std::vector<Tensor> weights;
  std::unique_ptr<optim::AdamW> optimizer;
  Tensor x, y;
};

struct TrainRun {
  std::vector<float> losses;
  std::vector<std::vector<float>> weights;
};
TrainRun train(DeviceMlp& m, int steps) {
  TrainRun r;
  for (int i = 0; i < steps; ++i) r.losses.push_back(m.step());
  for (const Tensor& w : m.weights) r.weights.push_back(w.to_vector<float>());
  return r;
}
void expect_bitwise(const TrainRun& a, const TrainRun& b) {
  ASSERT_EQ(a.losses.size(), b.losses.size());
  for (size_t i = 0; i < a.losses.size(); ++i) EXPECT_EQ(a.losses[i], b.losses[i]) << "step " << i;
  ASSERT_EQ(a.weights.size(), b.weights.size());
  for (size_t i = 0; i < a.weights.size(); ++i) EXPECT_EQ(a.weights[i], b.weights[i]) << "weight " << i;
}

struct HostTier : ::testing::Test {
  void SetUp() override {
    dev = second_device();
    rt().set_swap_mode(SwapMode::kAuto);
    rt().reset_stats();
  }
  void TearDown() override {
    remat::set_memory_budget(dev, std::nullopt);
    remat::set_memory_budget(Device(kCPU), std::nullopt);
    rt().set_swap_mode(SwapMode::kAuto);
    rt().set_trace_path("");
    rt().set_verify(false);
  }
  static remat::Runtime& rt() { return remat::Runtime::global(); }
  // A 256×256 GEMM output h of a constant x, swapped out: room for one of
  // the two, and h is the staler (a GEMM is dearer to recompute than to copy).
  struct SwappedGemm {
    Tensor x, h;
    std::vector<float> h0;  // h's values
  };
  SwappedGemm swapped_gemm() {
    SwappedGemm g;
    g.x = on(dev, {256, 256}, 0.3);
    g.h = matmul(g.x, g.x);
    g.h0 = g.h.to_vector<float>();
    (void)g.x.to_vector<float>();
    remat::set_memory_budget(dev, g.x.storage()->nbytes() + 4096);
    return g;
  }
  // Peak bytes on the device over `steps` unbudgeted steps of a fresh model.
  int64_t unbudgeted_peak(const std::function<std::unique_ptr<DeviceMlp>()>& make, int steps, TrainRun* run) {
    auto m = make();
    rt().reset_stats();
    *run = train(*m, steps);
    return remat::stats(dev).peak_bytes;
  }
  Device dev;
};

// Parameters, gradients and AdamW's two moments are constants: without the
// host tier they are a floor no eviction goes below. Half the peak is below
// it; with swapping on the model trains there, bitwise as without a budget.
TEST_F(HostTier, TrainsBelowTheNeverEvictableFloorOnlyWithSwapping) {
  auto make = [&] { return std::make_unique<DeviceMlp>(dev, 8, 128, 3); };
  TrainRun reference;
  const int64_t peak = unbudgeted_peak(make, 3, &reference);
  const int64_t budget = peak / 2;
  {
    auto m = make();
    rt().set_swap_mode(SwapMode::kOff);
    remat::set_memory_budget(dev, budget);
    const std::string msg = testing::error_message<OutOfMemoryError>([&] { train(*m, 3); });
    EXPECT_NE(msg.find("Host tier: off (DTR_SWAP=off;"), std::string::npos) << msg;
    remat::set_memory_budget(dev, std::nullopt);
  }
  rt().set_swap_mode(SwapMode::kAuto);
  auto m = make();
  remat::set_memory_budget(dev, budget);
  rt().reset_stats();
  const TrainRun swapped = train(*m, 3);
  const remat::Stats s = remat::stats(dev);
  expect_bitwise(reference, swapped);
  EXPECT_LE(s.peak_bytes, budget);
  EXPECT_GT(s.swap_outs, 0);
  EXPECT_GT(s.swap_ins, 0);
  EXPECT_GE(s.swap_bytes_out, s.swapped_bytes);
  EXPECT_GT(s.swap_seconds_estimated, 0);
  EXPECT_EQ(remat::stats(Device(kCPU)).host_tier_bytes, s.swapped_bytes);
  // The host copies go with the storages.
  m.reset();
  EXPECT_EQ(remat::stats(dev).swapped_bytes, 0);
  EXPECT_EQ(remat::stats(Device(kCPU)).host_tier_bytes, 0);
}

// Activations outweigh the constants here, so recomputation alone can fit
// the budget; a cpu budget with little room left makes the host tier full,
// and the policy falls back to recomputation. Neither tier goes over its budget.
TEST_F(HostTier, AFullHostTierFallsBackToRecomputation) {
  auto make = [&] { return std::make_unique<DeviceMlp>(dev, 512, 64, 8); };
  TrainRun reference;
  const int64_t peak = unbudgeted_peak(make, 2, &reference);
  const int64_t budget = peak * 4 / 10;
  for (const int64_t room : {int64_t{64} << 10, int64_t{1} << 20}) {
    SCOPED_TRACE("host room " + std::to_string(room));
    auto m = make();
    const int64_t cpu_budget = remat::stats(Device(kCPU)).resident_bytes + room;
    remat::set_memory_budget(Device(kCPU), cpu_budget);
    remat::set_memory_budget(dev, budget);
    rt().reset_stats();
    const TrainRun r = train(*m, 2);
    expect_bitwise(reference, r);
    const remat::Stats s = remat::stats(dev);
    const remat::Stats cpu = remat::stats(Device(kCPU));
    EXPECT_LE(s.peak_bytes, budget);
    EXPECT_LE(cpu.peak_bytes, cpu_budget);
    EXPECT_LE(cpu.host_tier_bytes, room);
    EXPECT_GT(s.evictions, 0);
    EXPECT_GT(s.rematerializations, 0);
    if (room > (int64_t{512} << 10)) {
      EXPECT_GT(s.swap_outs, 0);  // activations of 128 KiB fit now
    }
    m.reset();
    remat::set_memory_budget(dev, std::nullopt);
    remat::set_memory_budget(Device(kCPU), std::nullopt);
  }
  // With no room at all the host tier takes nothing.
  auto m = make();
  // (4 KiB for the loss the host reads each step; a weight is 16 KiB.)
  remat::set_memory_budget(Device(kCPU), remat::stats(Device(kCPU)).resident_bytes + 4096);
  remat::set_memory_budget(dev, budget);
  rt().reset_stats();
  TrainRun r;
  for (int i = 0; i < 2; ++i) r.losses.push_back(m->step());
  const remat::Stats s = remat::stats(dev);
  remat::set_memory_budget(Device(kCPU), std::nullopt);  // the host reads the weights now
  for (const Tensor& w : m->weights) r.weights.push_back(w.to_vector<float>());
  expect_bitwise(reference, r);
  EXPECT_EQ(s.swap_outs, 0);
  EXPECT_GT(s.evictions, 0);
}

// Two constants of 256 KiB under a budget that holds one: each use copies
// one back and the other out. An in-place write into the swapped one brings
// it back first; the values are those of the write.
TEST_F(HostTier, InPlaceWriteIntoASwappedStorage) {
  Tensor a = on(dev, {65536}, 0.1);
  Tensor b = on(dev, {65536}, 0.2);
  const std::vector<float> a0 = a.to_vector<float>(), b0 = b.to_vector<float>();
  remat::set_memory_budget(dev, (int64_t{256} << 10) + 4096);
  const bool a_out = remat::is_swapped(*a.storage());
  EXPECT_NE(a_out, remat::is_swapped(*b.storage())) << "exactly one of them is in host memory";
  Tensor& out = a_out ? a : b;
  const std::vector<float>& out0 = a_out ? a0 : b0;
  rt().reset_stats();
  {
    NoGradGuard no_grad;
    out.add_(1.0);
  }
  EXPECT_FALSE(remat::is_swapped(*out.storage()));
  EXPECT_EQ(remat::stats(dev).swap_ins, 1);
  const std::vector<float> got = out.to_vector<float>();
  for (size_t i = 0; i < got.size(); i += 997) EXPECT_EQ(got[i], out0[i] + 1.0f) << i;
  // The other one went to host memory to make room, and comes back intact.
  Tensor& other = a_out ? b : a;
  EXPECT_TRUE(remat::is_swapped(*other.storage()));
  EXPECT_EQ(other.to_vector<float>(), a_out ? b0 : a0);
}

// The unit of swapping is the storage (Note [unit of eviction]): views of a
// swapped storage come back together, with one copy.
TEST_F(HostTier, ViewsOfASwappedStorageComeBackTogether) {
  Tensor base = on(dev, {256, 256}, 0.05);
  Tensor other = on(dev, {256, 256}, 0.07);
  const Tensor row = base.select(0, 3);
  const Tensor col = base.narrow(1, 10, 5);
  const std::vector<float> row0 = row.to_vector<float>(), col0 = col.to_vector<float>();
  (void)other.to_vector<float>();  // the later use: base is the staler
  remat::set_memory_budget(dev, (int64_t{256} << 10) + 4096);
  ASSERT_TRUE(remat::is_swapped(*base.storage()));
  remat::set_memory_budget(dev, (int64_t{320} << 10));  // room for a copy of a view
  rt().reset_stats();
  EXPECT_EQ(row.to_vector<float>(), row0);
  EXPECT_FALSE(remat::is_swapped(*col.storage()));
  EXPECT_EQ(col.to_vector<float>(), col0);
  EXPECT_EQ(remat::stats(dev).swap_ins, 1);
}

// Note [pin guard]: a pinned storage is never moved; a borrowed one (a
// writable pointer was handed out) holds the user's bytes: neither goes to
// host memory, and the report says so.
TEST_F(HostTier, PinnedAndBorrowedStoragesAreNeverSwapped) {
  Tensor a = on(dev, {65536}, 0.1);
  Tensor b = on(dev, {65536}, 0.2);
  {
    remat::PinGuard pin_a(a.storage());
    (void)b.mutable_data_ptr();
    const std::string msg = testing::error_message<OutOfMemoryError>(
        [&] { remat::set_memory_budget(dev, int64_t{256} << 10), (void)mul(a, 2.0); });
    EXPECT_FALSE(remat::is_swapped(*a.storage()));
    EXPECT_FALSE(remat::is_swapped(*b.storage()));
    EXPECT_NE(msg.find("pinned 262144 bytes"), std::string::npos) << msg;
    EXPECT_NE(msg.find("Host tier:"), std::string::npos) << msg;
  }
}

// A swapped result that lineage can rebuild and no handle holds is dropped
// from the host tier (it is evicted then), as its bytes would be on the device.
TEST_F(HostTier, ASwappedResultNoHandleHoldsLeavesHostMemory) {
  const Tensor x = on(dev, {256, 256}, 0.3);
  Tensor h = matmul(x, x);  // a GEMM: dearer to recompute than to copy back
  Tensor g = mul(h, 2.0);   // reads h: its lineage keeps h's storage alive
  const std::vector<float> g0 = g.to_vector<float>();
  (void)x.to_vector<float>();  // h is the stalest now
  // Room for one of the three: g (cheapest to recompute) is evicted, then h
  // (a GEMM, dearer to recompute than to copy back) is swapped.
  remat::set_memory_budget(dev, x.storage()->nbytes() + 4096);
  ASSERT_TRUE(remat::is_swapped(*h.storage()));
  EXPECT_FALSE(g.storage()->resident());
  EXPECT_FALSE(remat::is_swapped(*g.storage()));
  const int64_t host = remat::stats(Device(kCPU)).host_tier_bytes;
  const std::weak_ptr<Storage> hs = h.storage();
  h = Tensor();
  ASSERT_FALSE(hs.expired());
  EXPECT_FALSE(remat::is_swapped(*hs.lock()));
  EXPECT_EQ(remat::stats(Device(kCPU)).host_tier_bytes, host - (int64_t{256} << 10));
  // g comes back bitwise, through h recomputed from x.
  remat::set_memory_budget(dev, std::nullopt);
  rt().reset_stats();
  EXPECT_EQ(g.to_vector<float>(), g0);
  EXPECT_EQ(remat::stats(dev).recomputed_ops, 2);
}

// The cpu budget covers the host's own tensors and the host tier: when a
// host allocation finds nothing else to evict, a host copy that lineage can
// rebuild goes (its storage is evicted), never a constant's.
TEST_F(HostTier, TheHostsOwnAllocationsDropHostCopiesLineageCanRebuild) {
  auto [x, h, h0] = swapped_gemm();
  ASSERT_TRUE(remat::is_swapped(*h.storage()));
  const int64_t cpu_budget = remat::stats(Device(kCPU)).resident_bytes + (int64_t{64} << 10);
  remat::set_memory_budget(Device(kCPU), cpu_budget);
  rt().reset_stats();
  const Tensor c = full({256, 256}, 2.0);  // 256 KiB on the host: room only without h's copy
  EXPECT_FALSE(remat::is_swapped(*h.storage()));
  EXPECT_FALSE(h.storage()->resident());
  EXPECT_EQ(remat::stats(Device(kCPU)).host_tier_bytes, 0);
  EXPECT_EQ(remat::stats(dev).evictions, 1);
  EXPECT_LE(remat::stats(Device(kCPU)).peak_bytes, cpu_budget);
  remat::set_memory_budget(dev, std::nullopt);
  EXPECT_EQ(h.to_vector<float>(), h0);  // recomputed from x, bitwise
  EXPECT_EQ(c.to_vector<float>()[7], 2.0f);
}

// DTR_VERIFY checks a copy back as it checks a replay: against the hash
// taken when the storage was first computed.
TEST_F(HostTier, VerifyChecksWhatComesBackFromHostMemory) {
  rt().set_verify(true);
  auto [x, h, h0] = swapped_gemm();
  ASSERT_TRUE(remat::is_swapped(*h.storage()));
  remat::set_memory_budget(dev, std::nullopt);
  EXPECT_EQ(h.to_vector<float>(), h0);  // checked, equal
  remat::set_memory_budget(dev, x.storage()->nbytes() + 4096);
  (void)x.to_vector<float>();
  remat::set_memory_budget(dev, x.storage()->nbytes() + 4096);
  ASSERT_TRUE(remat::is_swapped(*h.storage()));
  // Corrupt one byte of the host copy: the copy back is caught.
  static_cast<unsigned char*>(remat::find_state(*h.storage())->host_data)[100] ^= 1;
  remat::set_memory_budget(dev, std::nullopt);
  const Tensor swapped = h;  // clang 14 cannot capture a structured binding (C++20, P1091)
  const std::string msg = testing::error_message<InternalError>([&] { (void)swapped.to_vector<float>(); });
  EXPECT_NE(msg.find("copied back from host memory differs from the bytes copied out"), std::string::npos) << msg;
  rt().set_verify(false);
}

// A constant written in place since its first computation (an optimizer's
// state: zeros_like, then mul_/add_ under no_grad) is checked against what
// was copied out, not against its first bytes: DTR_VERIFY holds while an
// AdamW model trains below its floor, bitwise as without a budget.
TEST_F(HostTier, VerifyHoldsForConstantsWrittenInPlace) {
  rt().set_verify(true);
  const Tensor x = on(dev, {256, 256}, 0.3);
  Tensor h = matmul(x, x);  // hashed when recorded
  {
    NoGradGuard no_grad;
    h.add_(1.0);  // a constant now, holding matmul + 1
  }
  const std::vector<float> h1 = h.to_vector<float>();
  (void)x.to_vector<float>();
  remat::set_memory_budget(dev, x.storage()->nbytes() + 4096);
  ASSERT_TRUE(remat::is_swapped(*h.storage()));
  remat::set_memory_budget(dev, std::nullopt);
  EXPECT_EQ(h.to_vector<float>(), h1);

  auto make = [&] { return std::make_unique<DeviceMlp>(dev, 8, 128, 3); };
  TrainRun reference;
  const int64_t peak = unbudgeted_peak(make, 3, &reference);
  auto m = make();
  remat::set_memory_budget(dev, peak / 2);
  rt().reset_stats();
  expect_bitwise(reference, train(*m, 3));
  EXPECT_GT(remat::stats(dev).swap_ins, 0);
}

// A two-output op (max over a dim: values and indices) whose values went to
// host memory and whose indices were evicted: the replay for the indices
// writes the values into scratch and leaves their host copy alone.
TEST_F(HostTier, ReplayOfATwoOutputOpWithASwappedSibling) {
  rt().set_verify(true);
  const Tensor x = on(dev, {1024, 4096}, 0.013);  // 16 MiB: dear to reduce again
  auto [v, i] = max(x, 1);                      // 4 KiB of values, 8 KiB of indices
  const std::vector<float> v0 = v.to_vector<float>();
  const std::vector<int64_t> i0 = i.to_vector<int64_t>();
  (void)x.to_vector<float>();  // x is the freshest
  // The host tier has room for the values, not for the indices.
  remat::set_memory_budget(Device(kCPU), remat::stats(Device(kCPU)).resident_bytes + 6144);
  remat::set_memory_budget(dev, remat::stats(dev).resident_bytes - (int64_t{12} << 10) + 512);
  ASSERT_TRUE(remat::is_swapped(*v.storage()));
  ASSERT_FALSE(i.storage()->resident());
  ASSERT_FALSE(remat::is_swapped(*i.storage()));
  remat::set_memory_budget(dev, std::nullopt);
  remat::set_memory_budget(Device(kCPU), std::nullopt);
  rt().reset_stats();
  EXPECT_EQ(i.to_vector<int64_t>(), i0);
  EXPECT_EQ(remat::stats(dev).recomputed_ops, 1);
  EXPECT_TRUE(remat::is_swapped(*v.storage()));
  EXPECT_EQ(v.to_vector<float>(), v0);
  EXPECT_EQ(remat::stats(dev).swap_ins, 1);
  EXPECT_EQ(remat::stats(Device(kCPU)).host_tier_bytes, 0);
}

// An in-place write under autograd into an activation that was swapped
// out: the gradients are those of the unbudgeted run.
TEST_F(HostTier, InPlaceWriteUnderAutogradMatchesTheUnbudgetedRun) {
  auto grads = [&](std::optional<int64_t> budget) {
    Tensor w = on(dev, {128, 128}, 0.2);
    w.requires_grad_();
    const Tensor x = on(dev, {256, 128}, 0.1);
    Tensor h = matmul(x, w);
    Tensor side = matmul(x, w).sum();
    if (budget) remat::set_memory_budget(dev, *budget);
    h.relu_();
    Tensor loss = add(mul(h, h).sum(), side);
    loss.backward();
    remat::set_memory_budget(dev, std::nullopt);
    return std::pair{loss.item<float>(), w.grad().to_vector<float>()};
  };
  rt().reset_stats();
  const auto ref = grads(std::nullopt);
  const int64_t peak = remat::stats(dev).peak_bytes;
  rt().reset_stats();
  const auto tight = grads(peak * 3 / 4);
  EXPECT_EQ(ref.first, tight.first);
  EXPECT_EQ(ref.second, tight.second);
  EXPECT_GT(remat::stats(dev).swap_outs + remat::stats(dev).evictions, 0);
}

// DTR_SWAP=off: constants leave the candidates (OutOfMemoryError where they
// alone exceed the budget); storages swapped already stay in host memory
// until used.
TEST_F(HostTier, SwapModeOffStopsSwappingAndKeepsWhatIsSwapped) {
  Tensor a = on(dev, {65536}, 0.1);
  Tensor b = on(dev, {65536}, 0.2);
  remat::set_memory_budget(dev, (int64_t{256} << 10) + 4096);
  Tensor& out = remat::is_swapped(*a.storage()) ? a : b;
  ASSERT_TRUE(remat::is_swapped(*out.storage()));
  rt().set_swap_mode(SwapMode::kOff);
  EXPECT_EQ(rt().swap_mode(), SwapMode::kOff);
  EXPECT_TRUE(remat::is_swapped(*out.storage()));
  EXPECT_EQ(remat::stats(dev).evictable_bytes, 0);
  EXPECT_THROW((void)out.to_vector<float>(), OutOfMemoryError);  // no room: the other cannot move
  EXPECT_TRUE(remat::is_swapped(*out.storage()));  // nothing lost
  remat::set_memory_budget(dev, std::nullopt);
  EXPECT_EQ(out.to_vector<float>().size(), 65536u);
  EXPECT_FALSE(remat::is_swapped(*out.storage()));
}

// Swaps are in the Chrome trace, paired by storage id.
TEST_F(HostTier, SwapsAreTraced) {
  const std::string path = ::testing::TempDir() + "dtr_host_tier_trace.json";
  rt().set_trace_path(path);
  Tensor a = on(dev, {65536}, 0.1);
  Tensor b = on(dev, {65536}, 0.2);
  remat::set_memory_budget(dev, (int64_t{512} << 10) + 4096);
  (void)add(a, 1.0).to_vector<float>();  // b goes out to make room
  (void)add(b, 1.0).to_vector<float>();  // and comes back
  rt().set_trace_path("");
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_NE(text.str().find(R"("name":"swap out")"), std::string::npos);
  EXPECT_NE(text.str().find(R"("name":"swap in")"), std::string::npos);
  std::remove(path.c_str());
}

// The planner simulates the host tier with the runtime's own code
// (Note [planner]): its predicted swaps and evictions are a real run's.
TEST_F(HostTier, PlannerPredictsSwapsExactly) {
  for (const double f : {0.5, 0.3, 0.2}) {
    SCOPED_TRACE("fraction " + std::to_string(f));
    DeviceMlp m(dev, 256, 64, 6);
    m.step();
    m.step();
    rt().reset_stats();
    const auto trace = remat::record_step([&] { m.step(); });
    const int64_t peak = remat::stats(dev).peak_bytes;
    remat::PlanOptions o;
    o.device = dev;
    o.fractions = {f};
    o.bisect = false;
    const remat::PlanReport report = remat::plan_trace(*trace, o);
    ASSERT_EQ(report.points.size(), 1u);
    const remat::PlanPoint& p = report.points[0];
    EXPECT_EQ(report.peak_bytes, peak);
    ASSERT_TRUE(p.feasible()) << p.error;
    // As the simulation does: counters restart, then the budget is set
    // (what it swaps out at once counts), then the step runs.
    rt().reset_stats();
    remat::set_memory_budget(dev, p.budget_bytes);
    m.step();
    const remat::Stats s = remat::stats(dev);
    remat::set_memory_budget(dev, std::nullopt);
    EXPECT_EQ(p.swap_outs, s.swap_outs);
    EXPECT_EQ(p.swap_ins, s.swap_ins);
    EXPECT_EQ(p.swap_bytes, s.swap_bytes_out + s.swap_bytes_in);
    EXPECT_EQ(p.evictions, s.evictions);
    EXPECT_EQ(p.recomputed_ops, s.recomputed_ops);
    EXPECT_EQ(p.peak_bytes, s.peak_bytes);
    EXPECT_DOUBLE_EQ(p.swap_seconds_estimated, s.swap_seconds_estimated);
    EXPECT_GT(p.swap_outs, 0);
    const std::string table = remat::format_plan(report);
    EXPECT_NE(table.find("swap outs"), std::string::npos) << table;
  }
  // A state with storages in host memory already is captured and rebuilt
  // as such: a simulation starting from it has them in its host tier.
  DeviceMlp m(dev, 256, 64, 6);
  m.step();
  remat::set_memory_budget(dev, remat::stats(dev).resident_bytes / 2);
  m.step();
  const remat::Stats before = remat::stats(dev);
  ASSERT_GT(before.swapped_bytes, 0);
  remat::Runtime fresh;
  const remat::RuntimeSnapshot snap = rt().snapshot(/*generation=*/0xFFFFFFF0u);
  const auto storages = fresh.restore(snap, [](size_t) {
    return [](std::span<Storage* const>, std::span<Storage* const>) {};
  });
  EXPECT_EQ(fresh.stats(dev).swapped_bytes, before.swapped_bytes);
  EXPECT_EQ(fresh.stats(dev).resident_bytes, before.resident_bytes);
  EXPECT_EQ(fresh.stats(Device(kCPU)).host_tier_bytes, before.swapped_bytes);
  size_t swapped = 0;
  for (size_t i = 0; i < storages.size(); ++i) {
    EXPECT_EQ(remat::is_swapped(*storages[i]), snap.storages[i].swapped) << i;
    swapped += snap.storages[i].swapped;
  }
  EXPECT_GT(swapped, 0u);
}

}  // namespace
}  // namespace dtr
