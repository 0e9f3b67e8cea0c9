// The thread's dispatch state (grad mode, autocast) around kernels: a
// replay runs under the state its op was recorded with, whatever the
// caller's, and the caller's state is back afterwards, also when the
// kernel throws (Note [replay equals original]).
#include <atomic>
#include <cstring>
#include <optional>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/backend.h"
#include "dtr/dtr.h"
#include "eager/dispatch_state.h"
#include "eager/lineage_record.h"
#include "tests/testing.h"

namespace dtr {
namespace {

struct BudgetScope {
  explicit BudgetScope(std::optional<int64_t> b) { remat::set_memory_budget(b); }
  ~BudgetScope() { remat::set_memory_budget(std::nullopt); }
};

// A test-only op: out = in (float32); its kernel notes the dispatch state it
// runs under, and throws a ValueError while g_probe_throws is set.
std::atomic<int> g_probe_runs{0};
std::atomic<bool> g_probe_throws{false};
DispatchState g_probe_state;

void probe_kernel(const KernelContext& c) {
  ++g_probe_runs;
  g_probe_state = DispatchState::current();
  if (g_probe_throws) throw ValueError("test_state_probe: failing on purpose");
  std::memcpy(c.outputs[0].data, c.inputs[0].data, size_t(c.inputs[0].numel() * 4));
}
const OpDef& probe_op() {
  constexpr const char* kName = "test_state_probe";
  ensure_ops_registered();
  if (const OpDef* d = OpRegistry::instance().find(kName)) return *d;
  OpDef d{.name = kName, .infer = op("neg").infer};  // same shape and dtype
  d.save = kSaveNone;
  OpRegistry::instance().define(std::move(d));
  OpRegistry::instance().set_kernel(kName, kCPU, probe_kernel);
  return OpRegistry::instance().get(kName);
}

Tensor constant(IntList shape) {
  Tensor t;
  {
    NoGradGuard ng;
    t = randn(shape);
  }
  t.requires_grad_();  // a leaf: never evicted
  return t;
}

/// Autocast states of the CPU and of CUDA (the others left off).
AutocastStates autocast_of(AutocastState cpu, AutocastState cuda) {
  AutocastStates s;
  s[kCPU] = cpu;
  s[kCUDA] = cuda;
  return s;
}
const DispatchState kRecorded{.grad_mode = false,
                              .autocast = autocast_of({true, kFloat16}, {false, kFloat16})};
const DispatchState kCaller{.grad_mode = true,
                            .autocast = autocast_of({true, kBFloat16}, {true, kBFloat16})};

/// A probe output (4 KiB, the only evictable storage) recorded under
/// kRecorded, with its values, then evicted. Leaves the budget set.
std::pair<Tensor, std::vector<float>> evicted_probe_output(uint64_t seed) {
  const OpDef& probe = probe_op();
  manual_seed(seed);
  Tensor x = constant({32, 32});
  Tensor y;
  {
    const DispatchStateGuard recorded(kRecorded);
    y = dispatch1(probe, {x});
  }
  EXPECT_EQ(lineage_of(y)->state, kRecorded);
  std::vector<float> values = y.to_vector<float>();
  remat::set_memory_budget(remat::stats().resident_bytes + 4096);
  Tensor filler = randn({32, 48});  // 6 KiB: y must go
  EXPECT_FALSE(y.storage()->resident());
  return {std::move(y), std::move(values)};
}

TEST(DispatchState, GuardSetsAndRestoresAlsoOnThrow) {
  const DispatchState before = DispatchState::current();
  EXPECT_EQ(before, DispatchState{});  // a fresh thread: grad on, autocast off
  try {
    const DispatchStateGuard g(kRecorded);
    EXPECT_EQ(DispatchState::current(), kRecorded);
    EXPECT_FALSE(is_grad_enabled());
    EXPECT_EQ(autocast_state(), (AutocastState{true, kFloat16}));  // the CPU's
    EXPECT_EQ(autocast_state(kCUDA), (AutocastState{false, kFloat16}));
    throw ValueError("leaving the scope");
  } catch (const ValueError&) {
  }
  EXPECT_EQ(DispatchState::current(), before);
}

TEST(Replay, RunsUnderTheRecordedStateWhateverTheCallers) {
  BudgetScope b(std::nullopt);
  const auto [y, before] = evicted_probe_output(21);
  const int runs = g_probe_runs;
  {
    const DispatchStateGuard caller(kCaller);
    EXPECT_EQ(y.to_vector<float>(), before);  // replayed
    EXPECT_EQ(g_probe_runs, runs + 1);
    EXPECT_EQ(g_probe_state, kRecorded);
    EXPECT_EQ(DispatchState::current(), kCaller);
  }
}

TEST(Replay, AThrowingKernelLeavesTheCallersStateAndTheTensorUsable) {
  BudgetScope b(std::nullopt);
  const auto [y, before] = evicted_probe_output(22);
  {
    const DispatchStateGuard caller(kCaller);
    g_probe_throws = true;
    EXPECT_THROW(y.to_vector<float>(), ValueError);
    g_probe_throws = false;
    EXPECT_EQ(g_probe_state, kRecorded);
    EXPECT_EQ(DispatchState::current(), kCaller);
    // Nothing was left half-done: the next touch replays again and succeeds.
    EXPECT_EQ(y.to_vector<float>(), before);
    EXPECT_EQ(DispatchState::current(), kCaller);
  }
}

// The first run and a replay call the kernel through one function: an op
// without a kernel for the device is a NotImplementedError naming the op and
// the device in both (a replay used to call through the null pointer).
TEST(Replay, AMissingKernelIsNotImplementedErrorOnFirstRunAndReplay) {
  BudgetScope b(std::nullopt);
  const auto [y, before] = evicted_probe_output(23);
  struct KernelRemoved {
    KernelRemoved() { OpRegistry::instance().set_kernel("test_state_probe", kCPU, nullptr); }
    ~KernelRemoved() { OpRegistry::instance().set_kernel("test_state_probe", kCPU, probe_kernel); }
  };
  {
    const KernelRemoved removed;
    const int runs = g_probe_runs;
    const std::string replay_error =
        testing::error_message<NotImplementedError>([&y = y] { y.to_vector<float>(); });
    EXPECT_NE(replay_error.find("test_state_probe: no kernel for device cpu"), std::string::npos)
        << replay_error;
    // A first run fails before it allocates or draws anything.
    remat::set_memory_budget(std::nullopt);
    Tensor x = constant({8});
    const int64_t resident = remat::stats().resident_bytes;
    const std::string first_error =
        testing::error_message<NotImplementedError>([&] { dispatch1(probe_op(), {x}); });
    EXPECT_NE(first_error.find("test_state_probe: no kernel for device cpu"), std::string::npos)
        << first_error;
    EXPECT_EQ(remat::stats().resident_bytes, resident);
    EXPECT_EQ(g_probe_runs, runs);
  }
  EXPECT_EQ(y.to_vector<float>(), before);
}


// Found by tests/fuzz/fuzz_dispatch: a dtype or device type no enumerator
// names (a cast integer, as from a binding) went through to() and the
// factories into the output's metadata, and from there into the allocator
// and kernel tables.
TEST(DispatchOutputs, InvalidDTypeIsATypeError) {
  const Tensor x = ones({2, 3});
  EXPECT_THAT(testing::error_message<TypeError>([&] { (void)x.to(DType(99)); }),
              ::testing::HasSubstr("to_dtype: invalid dtype 99 for output 0"));
  EXPECT_THAT(testing::error_message<TypeError>([&] { (void)zeros({2}, DType(kNumDTypes)); }),
              ::testing::HasSubstr("invalid dtype 8"));
  EXPECT_EQ(x.to(kFloat64).dtype(), kFloat64);  // the valid ones still work
}

TEST(DispatchOutputs, InvalidDeviceTypeIsAValueError) {
  const Tensor x = ones({2});
  EXPECT_THAT(testing::error_message<ValueError>([&] {
                (void)dispatch1(op("to_device"), {x},
                                Attrs{{"device_type", int64_t{7}}, {"device_index", int64_t{0}}});
              }),
              ::testing::HasSubstr("to_device: invalid device type 7 for output 0"));
}

// The same integer as a Device: no backend, so a DeviceError (it indexed
// the backend table past its end).
TEST(DispatchOutputs, InvalidDeviceTypeHasNoBackend) {
  const Device bogus(DeviceType(7), 0);
  EXPECT_EQ(find_backend(bogus.type), nullptr);
  EXPECT_THROW((void)ones({2}).to(bogus), DeviceError);
}

}  // namespace
}  // namespace dtr
