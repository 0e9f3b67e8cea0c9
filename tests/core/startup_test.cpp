// Start-up under a malformed or misspelled environment (Note [environment at
// start-up]). Start-up happens once per process, so each case runs
// tests/core/startup_child.cpp (built as dtr_startup_child next to this
// binary) in a fresh process and reads the lines it prints.
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "child_process.h"
#include "core/backend.h"
#include "core/options.h"

namespace dtr {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

/// The child's `key: value` lines in order (a key printed twice gets "#2").
std::map<std::string, std::string> steps(const std::string& out) {
  std::map<std::string, std::string> m;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    const size_t colon = line.find(": ");
    if (colon == std::string::npos) continue;
    std::string key = line.substr(0, colon);
    if (m.count(key) != 0) key += "#2";
    m[key] = line.substr(colon + 2);
  }
  return m;
}

class Startup : public ::testing::Test {
 protected:
  void SetUp() override {
    exe_ = testing::built_program("tests", "dtr_startup_child");
    ASSERT_TRUE(exe_.has_value()) << "dtr_startup_child is built with the tests";
  }
  /// Runs the child under `env` and returns its steps; `output` keeps all it printed.
  std::map<std::string, std::string> run(std::vector<std::pair<std::string, std::string>> env,
                                         testing::Output* output = nullptr) const {
    const testing::Output r = testing::run_child(*exe_, {}, env);
    EXPECT_EQ(r.exit_code, 0) << r.all();
    if (output != nullptr) *output = r;
    return steps(r.out);
  }
  std::optional<std::filesystem::path> exe_;
};

TEST_F(Startup, CleanEnvironmentRunsAndWarnsAboutNothing) {
  testing::Output r;
  auto s = run({}, &r);
  EXPECT_EQ(s["first"], "ok 20.000000") << r.all();
  EXPECT_EQ(s["second"], "ok 20.000000") << r.all();
  EXPECT_EQ(s["options"], "ok budget none heuristic dtr_eq log 3") << r.all();
  EXPECT_THAT(s["third"], StartsWith("ok ")) << r.all();
  EXPECT_THAT(s["third"], Not(HasSubstr("evictions 0"))) << r.all();
  EXPECT_EQ(s["options#2"], "ok budget 1048576 heuristic lru log 3") << r.all();
  EXPECT_EQ(r.err, "");
}

// The first op throws the malformed value once; after it the program goes on
// at the option's default, and the setters set what they set. (Before
// start-up was made safe to retry, the second op threw "op 'clone' defined
// twice" and every setter threw the environment error again.)
class StartupWithABadValue : public Startup,
                             public ::testing::WithParamInterface<std::pair<const char*, const char*>> {};

TEST_P(StartupWithABadValue, ThrowsOnceThenTheDefaultRunsAndSettersWork) {
  const auto [name, value] = GetParam();
  auto clean = run({});
  testing::Output r;
  auto s = run({{name, value}}, &r);
  EXPECT_THAT(s["first"], StartsWith("ValueError: malformed DTR_* environment variable:")) << r.all();
  EXPECT_THAT(s["first"], HasSubstr(std::string(name) + ": ")) << r.all();
  EXPECT_EQ(s["second"], "ok 20.000000") << r.all();
  EXPECT_EQ(s["options"], "ok budget none heuristic dtr_eq log 3") << r.all();
  EXPECT_EQ(s["setters"], "ok ") << r.all();
  // Under the budget and the heuristic the setters chose, the run is the
  // clean environment's, evictions included.
  EXPECT_EQ(s["third"], clean["third"]) << r.all();
  EXPECT_EQ(s["options#2"], "ok budget 1048576 heuristic lru log 3") << r.all();
}

INSTANTIATE_TEST_SUITE_P(EveryOption, StartupWithABadValue,
                         ::testing::Values(std::pair{"DTR_HEURISTIC", "foo"},
                                           std::pair{"DTR_MEMORY_BUDGET", "12 gigs"},
                                           std::pair{"DTR_SAMPLE", "half"},
                                           std::pair{"DTR_MIN_EVICT_BYTES", "-5"},
                                           std::pair{"DTR_COST", "guess"},
                                           std::pair{"DTR_LOG", "loud"},
                                           std::pair{"DTR_VERIFY", "yes"}));

TEST_F(Startup, TheErrorNamesVariableValueAcceptedFormsDefaultAndSetter) {
  auto s = run({{"DTR_HEURISTIC", "foo"}, {"DTR_MEMORY_BUDGET", "lots"}});
  const std::string& e = s["first"];
  EXPECT_THAT(e, StartsWith("ValueError: malformed DTR_* environment variables:")) << e;
  EXPECT_THAT(e, HasSubstr("DTR_MEMORY_BUDGET: invalid memory budget \"lots\"")) << e;
  EXPECT_THAT(e, HasSubstr("until dtr::remat::set_memory_budget() is called, DTR_MEMORY_BUDGET is "
                           "\"unlimited\", its default")) << e;
  EXPECT_THAT(e, HasSubstr("DTR_HEURISTIC: unknown heuristic \"foo\"; accepted forms: dtr_eq, dtr, "
                           "dtr_local, lru, size, msps")) << e;
  EXPECT_THAT(e, HasSubstr("until dtr::remat::Runtime::global().set_heuristic() is called, "
                           "DTR_HEURISTIC is \"dtr_eq\", its default")) << e;
  EXPECT_THAT(e, HasSubstr("This error is thrown once")) << e;
  EXPECT_EQ(s["second"], "ok 20.000000");
  EXPECT_EQ(s["options"], "ok budget none heuristic dtr_eq log 3");
}

TEST_F(Startup, AGoodValueIsStillApplied) {
  auto s = run({{"DTR_HEURISTIC", "msps"}, {"DTR_MEMORY_BUDGET", "64MiB"}});
  EXPECT_EQ(s["first"], "ok 20.000000");
  EXPECT_EQ(s["options"], "ok budget 67108864 heuristic msps log 3");
}

TEST_F(Startup, APerDeviceBudgetCapsTheCpuByItsEntryOrTheBareOne) {
  // Without CUDA the CPU is the default device: its own entry, else the bare
  // entry, caps it; an entry for another device leaves it unlimited.
  EXPECT_EQ(run({{"DTR_MEMORY_BUDGET", "cuda:0=1GiB,cpu=64MiB"}})["options"],
            "ok budget 67108864 heuristic dtr_eq log 3");
  EXPECT_EQ(run({{"DTR_MEMORY_BUDGET", "32MiB,cuda:1=1GiB"}})["options"],
            "ok budget 33554432 heuristic dtr_eq log 3");
  EXPECT_EQ(run({{"DTR_MEMORY_BUDGET", "cuda=1GiB"}})["options"],
            "ok budget none heuristic dtr_eq log 3");
}

// From the environment, a budget for a CUDA device that cannot be had (no
// driver, no device, no CUDA backend) is a warning at start-up naming the
// device and why, never an error: one DTR_MEMORY_BUDGET may serve machines
// with and without GPUs. The program runs, the cpu entry applies. (A setter
// given the same entry throws DeviceError: process_options_test.cpp.)
TEST_F(Startup, ABudgetForAnAbsentCudaDeviceIsAWarning) {
  const Backend* cuda = find_backend(kCUDA);
  if (cuda != nullptr && cuda->device_count() > 0) GTEST_SKIP() << "a CUDA device is present";
  testing::Output r;
  auto s = run({{"DTR_MEMORY_BUDGET", "cuda:0=1GiB,cpu=64MiB"}}, &r);
  EXPECT_EQ(s["first"], "ok 20.000000") << r.all();
  EXPECT_EQ(s["options"], "ok budget 67108864 heuristic dtr_eq log 3") << r.all();
  EXPECT_THAT(r.err, HasSubstr("DTR_MEMORY_BUDGET: the budget for cuda:0 is ignored: cuda:0:")) << r.all();
}

TEST_F(Startup, AMisspelledVariableIsNamedOnceWithTheClosestOption) {
  testing::Output r;
  auto s = run({{"DTR_MEMORYBUDGET", "1"}, {"DTR_HEURSITIC", "lru"}}, &r);
  EXPECT_EQ(s["first"], "ok 20.000000") << r.all();
  EXPECT_EQ(s["options"], "ok budget none heuristic dtr_eq log 3") << r.all();
  // One warning per unknown variable on the "dtr" logger (stderr), once per
  // process although the child runs many ops.
  std::vector<std::string> warnings;
  std::istringstream in(r.err);
  for (std::string line; std::getline(in, line);) {
    if (line.find("[dtr] [warning]") != std::string::npos) warnings.push_back(line);
  }
  ASSERT_EQ(warnings.size(), 2u) << r.all();
  const std::string all = warnings[0] + "\n" + warnings[1];
  EXPECT_THAT(all, HasSubstr("DTR_MEMORYBUDGET is not a dtr option and is ignored; did you mean "
                             "DTR_MEMORY_BUDGET?"));
  EXPECT_THAT(all, HasSubstr("DTR_HEURSITIC is not a dtr option and is ignored; did you mean "
                             "DTR_HEURISTIC?"));
}

TEST(ClosestOption, ByEditDistance) {
  EXPECT_EQ(closest_option("DTR_MEMORYBUDGET"), "DTR_MEMORY_BUDGET");
  EXPECT_EQ(closest_option("DTR_BUDGET"), "DTR_MEMORY_BUDGET");
  EXPECT_EQ(closest_option("DTR_HEURISTICS"), "DTR_HEURISTIC");
  EXPECT_EQ(closest_option("dtr_log"), "DTR_LOG");
  EXPECT_EQ(closest_option("DTR_SAMPLES"), "DTR_SAMPLE");
  EXPECT_EQ(closest_option("DTR_VERIFIY"), "DTR_VERIFY");
  EXPECT_EQ(closest_option("DTR_TRACE_FILE"), "DTR_TRACE");
  EXPECT_EQ(closest_option("DTR_MIN_EVICT"), "DTR_MIN_EVICT_BYTES");
}

}  // namespace
}  // namespace dtr
