// The nccl backend where it can run without a GPU: start-up errors. The
// collectives themselves run in tests/distributed/nccl_check.cpp
// (dtr_nccl_check, on a machine with CUDA devices).
#include <dirent.h>

#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "child_process.h"
#include "core/error.h"
#include "eager/distributed/backends.h"
#include "eager/distributed/distributed.h"
#include "testing.h"

namespace dtr::distributed {
namespace {

using ::testing::HasSubstr;
using dtr::testing::error_message;

/// Sets the launcher's variables for one test and restores them after.
class NcclStartup : public ::testing::Test {
 protected:
  static constexpr const char* kNames[] = {"RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT",
                                           "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"};
  void SetUp() override {
    if (!detail::nccl_available()) GTEST_SKIP() << "the nccl backend was not built";
    for (const char* name : kNames) {
      if (const char* v = std::getenv(name)) saved_.emplace_back(name, v);
      unsetenv(name);
    }
  }
  void TearDown() override {
    if (is_initialized()) destroy_process_group();
    for (const char* name : kNames) unsetenv(name);
    for (const auto& [name, value] : saved_) setenv(name.c_str(), value.c_str(), 1);
  }
  /// A world of one at 127.0.0.1.
  static void world_of_one() {
    setenv("RANK", "0", 1);
    setenv("WORLD_SIZE", "1", 1);
    setenv("MASTER_ADDR", "127.0.0.1", 1);
    setenv("MASTER_PORT", "29531", 1);
  }
  static int open_fds() {
    int n = 0;
    if (DIR* d = opendir("/proc/self/fd")) {
      while (readdir(d) != nullptr) ++n;
      closedir(d);
    }
    return n;
  }

 private:
  std::vector<std::pair<std::string, std::string>> saved_;
};

TEST_F(NcclStartup, NoCudaDeviceIsDeviceErrorAndLeavesNothingBehind) {
  world_of_one();
  const int fds = open_fds();
  try {
    init_process_group("nccl", {.timeout_seconds = 5.0});
  } catch (const DeviceError& e) {
    EXPECT_THAT(e.what(), HasSubstr("init_process_group(\"nccl\"): no CUDA device is present"));
    EXPECT_THAT(e.what(), HasSubstr("use the \"mpi\" backend for CPU tensors"));
    EXPECT_FALSE(is_initialized());
    EXPECT_THAT(error_message<DistributedError>([] { world(); }), HasSubstr("initialized"));
    // The same again, not "already initialized"; no socket or file left open.
    EXPECT_THAT(error_message<DeviceError>([] { init_process_group("nccl"); }),
                HasSubstr("no CUDA device is present"));
    EXPECT_EQ(open_fds(), fds);
    // The CPU still computes.
    EXPECT_TRUE(dtr::testing::allclose(dtr::ones({2, 3}) * 2.0 + 1.0, {3, 3, 3, 3, 3, 3}));
    return;
  }
  // A machine with a CUDA device: the world of one starts; dtr_nccl_check
  // covers that case.
  EXPECT_TRUE(is_initialized());
  EXPECT_EQ(world()->backend_name(), "nccl");
  GTEST_SKIP() << "a CUDA device is present";
}

TEST_F(NcclStartup, MalformedWorldSizeIsValueError) {
  world_of_one();
  setenv("WORLD_SIZE", "abc", 1);
  EXPECT_THAT(error_message<ValueError>([] { init_process_group("nccl"); }),
              HasSubstr("WORLD_SIZE=\"abc\" is not a decimal integer"));
  EXPECT_FALSE(is_initialized());
}

TEST_F(NcclStartup, MissingLauncherVariablesAreValueErrors) {
  EXPECT_THAT(error_message<ValueError>([] { init_process_group("nccl"); }), HasSubstr("RANK is not set"));
  world_of_one();
  unsetenv("MASTER_PORT");
  EXPECT_THAT(error_message<ValueError>([] { init_process_group("nccl"); }),
              HasSubstr("MASTER_PORT is not set"));
  EXPECT_FALSE(is_initialized());
}

// The GPU check program skips cleanly without a device and passes with one.
TEST(NcclCheck, SkipsWithoutADeviceOrPasses) {
  const auto exe = dtr::testing::built_program("tests", "dtr_nccl_check");
  if (!exe) GTEST_SKIP() << "dtr_nccl_check was not built (no NCCL)";
  const dtr::testing::Output r = dtr::testing::run_child(*exe, {});
  EXPECT_EQ(r.exit_code, 0) << r.all();
  const bool skipped = r.out.find("skipped: no CUDA device") != std::string::npos;
  const bool passed = r.out.find("nccl check: passed") != std::string::npos;
  EXPECT_TRUE(skipped || passed) << r.all();
}

}  // namespace
}  // namespace dtr::distributed
