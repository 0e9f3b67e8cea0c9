// set_option on the process options (global_options()) is the one way to
// change an option while the program runs, for C++ and the C API alike
// (remat/process_options.cpp): it applies the new value to the running
// library, refuses what cannot apply with a typed error, and leaves the
// options and the runtime as they were when it refuses.
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "dtr/dtr.h"
#include "testing.h"

namespace dtr {
namespace {

using testing::error_message;
using testing::throws_with;
using ::testing::AnyOf;
using ::testing::HasSubstr;

bool cuda_device_present() {
  const Backend* cuda = find_backend(DeviceType::kCUDA);
  return cuda != nullptr && cuda->device_count() > 0;
}

TEST(ProcessOptions, SetOptionAppliesTheBudgetToTheRunningRuntime) {
  const Device cpu(DeviceType::kCPU);
  const std::optional<int64_t> before = remat::memory_budget(cpu);
  const MemoryBudgetSpec spec_before = global_options().memory_budget;
  set_option(global_options(), "DTR_MEMORY_BUDGET", "cpu=1 kib");
  EXPECT_EQ(remat::memory_budget(cpu), 1024);
  EXPECT_EQ(global_options().memory_budget.for_device(cpu, false).bytes, 1024);
  set_option(global_options(), "DTR_MEMORY_BUDGET", "");
  EXPECT_EQ(remat::memory_budget(cpu), std::nullopt);
  EXPECT_EQ(global_options().memory_budget, MemoryBudgetSpec{});
  global_options().memory_budget = spec_before;
  remat::set_memory_budget(cpu, before);
}

TEST(ProcessOptions, SetOptionAppliesEveryRuntimeOptionButALocalOptionsObjectStaysLocal) {
  remat::Runtime& rt = remat::Runtime::global();
  const Heuristic before = rt.heuristic();
  ASSERT_NE(before, Heuristic::kLru);
  Options local;
  set_option(local, "DTR_HEURISTIC", "lru");
  EXPECT_EQ(local.heuristic, Heuristic::kLru);
  EXPECT_EQ(rt.heuristic(), before);  // parsed only
  set_option(global_options(), "DTR_HEURISTIC", "lru");
  EXPECT_EQ(rt.heuristic(), Heuristic::kLru);
  set_option(global_options(), "DTR_HEURISTIC", std::string(heuristic_name(before)));
  EXPECT_EQ(rt.heuristic(), before);
  // Read at start-up only: refused, and the options keep their value.
  const std::string plan = global_options().plan_path;
  EXPECT_TRUE(throws_with<ValueError>([] { set_option(global_options(), "DTR_PLAN", "/tmp/plan"); },
                                      {"DTR_PLAN", "start-up"}));
  EXPECT_EQ(global_options().plan_path, plan);
}

// A budget for cuda:0 where no CUDA device can be had is a DeviceError
// naming the device and why, at set time, through every setter; nothing
// changes (the cpu entry beside it is not applied either). From the
// environment the same entry is a warning at start-up (startup_test.cpp).
TEST(ProcessOptions, ABudgetForAnAbsentCudaDeviceIsADeviceError) {
  if (cuda_device_present()) GTEST_SKIP() << "a CUDA device is present";
  const Device cpu(DeviceType::kCPU);
  const std::optional<int64_t> cpu_budget = remat::memory_budget(cpu);
  const MemoryBudgetSpec spec_before = global_options().memory_budget;
  // "cuda:0: 0 cuda devices present (no driver or no device)", or "built
  // without CUDA" where the CUDA backend is not built.
  const auto no_cuda = AnyOf(HasSubstr("no driver or no device"), HasSubstr("built without CUDA"));
  const std::string what = error_message<DeviceError>(
      [] { set_option(global_options(), "DTR_MEMORY_BUDGET", "cuda:0=1GiB,cpu=64MiB"); });
  EXPECT_THAT(what, HasSubstr("DTR_MEMORY_BUDGET"));
  EXPECT_THAT(what, HasSubstr("cuda:0"));
  EXPECT_THAT(what, no_cuda);
  EXPECT_EQ(global_options().memory_budget, spec_before);
  EXPECT_EQ(remat::memory_budget(cpu), cpu_budget);
  const std::string direct = error_message<DeviceError>(
      [] { remat::set_memory_budget(Device(DeviceType::kCUDA, 0), int64_t{1} << 30); });
  EXPECT_THAT(direct, HasSubstr("cuda:0"));
  EXPECT_THAT(direct, no_cuda);
  EXPECT_EQ(remat::memory_budget(cpu), cpu_budget);
  // The options still work.
  set_option(global_options(), "DTR_MEMORY_BUDGET", "cpu=64MiB");
  EXPECT_EQ(remat::memory_budget(cpu), int64_t{64} << 20);
  global_options().memory_budget = spec_before;
  remat::set_memory_budget(cpu, cpu_budget);
}

// Note [GEMM switch] (docs/DESIGN.md, Options): with lineage alive, turning
// DTR_ONEDNN_GEMM on would make replays of GEMMs recorded under OpenBLAS run
// oneDNN, which DTR_VERIFY reported as an internal error. The switch is
// refused at set time; the run goes on, its replays verified bitwise.
TEST(ProcessOptions, SwitchingTheGemmLibraryWhileLineageExistsIsRefused) {
  ASSERT_FALSE(global_options().onednn_gemm);
  const Device cpu(DeviceType::kCPU);
  const std::optional<int64_t> budget = remat::memory_budget(cpu);
  set_option(global_options(), "DTR_VERIFY", "1");
  {
    Tensor w = from_vector(std::vector<float>(64 * 64, 0.01f), {64, 64});
    std::vector<Tensor> chain{randn({64, 64})};
    for (int i = 0; i < 6; ++i) chain.push_back(matmul(chain.back(), w));
    ASSERT_GT(remat::stats(cpu).metadata_nodes, 0);
    EXPECT_TRUE(throws_with<ValueError>([] { set_option(global_options(), "DTR_ONEDNN_GEMM", "on"); },
                                        {"DTR_ONEDNN_GEMM", "lineage", "bitwise"}));
    EXPECT_FALSE(global_options().onednn_gemm);
    set_option(global_options(), "DTR_ONEDNN_GEMM", "off");  // no switch: accepted
    // Evict, then replay everything: verified, no error.
    remat::reset_stats();
    remat::set_memory_budget(cpu, remat::stats(cpu).resident_bytes - 3 * 64 * 64 * 4);
    for (const Tensor& t : chain) EXPECT_TRUE(std::isfinite(t.sum().item<float>()));
    EXPECT_GT(remat::stats(cpu).rematerializations, 0);
    remat::set_memory_budget(cpu, budget);
  }
  set_option(global_options(), "DTR_VERIFY", "0");
  // With no lineage left the switch is the user's to make.
  ASSERT_EQ(remat::stats(cpu).metadata_nodes, 0);
  set_option(global_options(), "DTR_ONEDNN_GEMM", "on");
  EXPECT_TRUE(global_options().onednn_gemm);
  set_option(global_options(), "DTR_ONEDNN_GEMM", "off");
  EXPECT_FALSE(global_options().onednn_gemm);
}

}  // namespace
}  // namespace dtr
