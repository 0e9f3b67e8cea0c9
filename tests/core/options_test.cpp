#include "core/options.h"

#include <cstdlib>
#include <string>
#include <vector>

#include <fmt/format.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/backend.h"
#include "core/error.h"
#include "core/shape.h"

namespace dtr {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr int64_t KiB = int64_t(1) << 10;
constexpr int64_t MiB = int64_t(1) << 20;
constexpr int64_t GiB = int64_t(1) << 30;
constexpr int64_t TiB = int64_t(1) << 40;

// ---------------------------------------------------------------- DTR_MEMORY_BUDGET

int64_t budget_bytes(std::string_view text) {
  absl::StatusOr<MemoryBudget> b = parse_memory_budget(text);
  EXPECT_TRUE(b.ok()) << text << ": " << b.status();
  if (!b.ok()) return -1;
  EXPECT_EQ(b->kind, MemoryBudget::Kind::kBytes) << text;
  return b->bytes;
}

TEST(MemoryBudget, UnlimitedForms) {
  for (const char* text : {"", "   ", "none", "None", "NONE", "unlimited", "Unlimited", " none "}) {
    absl::StatusOr<MemoryBudget> b = parse_memory_budget(text);
    ASSERT_TRUE(b.ok()) << '"' << text << "\": " << b.status();
    EXPECT_EQ(b->kind, MemoryBudget::Kind::kUnlimited) << text;
    EXPECT_EQ(b->resolve(16 * GiB), std::nullopt);
  }
}

TEST(MemoryBudget, PlainByteCounts) {
  EXPECT_EQ(budget_bytes("1073741824"), GiB);
  EXPECT_EQ(budget_bytes("1"), 1);
  EXPECT_EQ(budget_bytes("+4096"), 4096);
  EXPECT_EQ(budget_bytes("  4096  "), 4096);
  EXPECT_EQ(budget_bytes("0004096"), 4096);
  EXPECT_EQ(budget_bytes("4096.0"), 4096);
  EXPECT_EQ(budget_bytes("9223372036854775807"), INT64_MAX);
}

TEST(MemoryBudget, DecimalUnits) {
  EXPECT_EQ(budget_bytes("800MB"), 800'000'000);
  EXPECT_EQ(budget_bytes("1B"), 1);
  EXPECT_EQ(budget_bytes("2KB"), 2'000);
  EXPECT_EQ(budget_bytes("1.5GB"), 1'500'000'000);
  EXPECT_EQ(budget_bytes("3TB"), 3'000'000'000'000);
  // Exact decimal arithmetic: 0.3 * 1e9 is not 299999999.
  EXPECT_EQ(budget_bytes("0.3GB"), 300'000'000);
  EXPECT_EQ(budget_bytes(".5KB"), 500);
  EXPECT_EQ(budget_bytes("5.KB"), 5'000);
}

TEST(MemoryBudget, BinaryUnits) {
  EXPECT_EQ(budget_bytes("1.5GiB"), GiB + GiB / 2);
  EXPECT_EQ(budget_bytes("512MiB"), 512 * MiB);
  EXPECT_EQ(budget_bytes("64KiB"), 64 * KiB);
  EXPECT_EQ(budget_bytes("2TiB"), 2 * TiB);
  // Fractions of a byte round down.
  EXPECT_EQ(budget_bytes("1.1KiB"), 1126);
  EXPECT_EQ(budget_bytes("0.001KiB"), 1);
}

TEST(MemoryBudget, UnitsAreCaseInsensitiveAndMaySeparate) {
  EXPECT_EQ(budget_bytes("512 MiB"), 512 * MiB);
  EXPECT_EQ(budget_bytes("512\tMiB"), 512 * MiB);
  EXPECT_EQ(budget_bytes("512mib"), 512 * MiB);
  EXPECT_EQ(budget_bytes("512MIB"), 512 * MiB);
  EXPECT_EQ(budget_bytes("800mb"), 800'000'000);
  EXPECT_EQ(budget_bytes("800 Mb"), 800'000'000);
  EXPECT_EQ(budget_bytes("10 b"), 10);
}

TEST(MemoryBudget, Percentages) {
  absl::StatusOr<MemoryBudget> b = parse_memory_budget("60%");
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->kind, MemoryBudget::Kind::kFraction);
  EXPECT_DOUBLE_EQ(b->fraction, 0.6);
  EXPECT_EQ(b->resolve(1000), 600);
  EXPECT_EQ(b->resolve(10 * GiB), int64_t(6 * GiB));

  b = parse_memory_budget("100%");
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_DOUBLE_EQ(b->fraction, 1.0);
  EXPECT_EQ(b->resolve(12345), 12345);

  b = parse_memory_budget(" 12.5 % ");
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_DOUBLE_EQ(b->fraction, 0.125);
  EXPECT_EQ(b->resolve(800), 100);

  b = parse_memory_budget("0.001%");
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->resolve(100'000), 1);
}

// Found by tests/fuzz/fuzz_options: a percentage too small for the device
// resolved to 0 bytes, a budget set_memory_budget rejects (and the runtime
// then took as a budget of nothing).
TEST(MemoryBudget, TinyPercentageResolvesToAtLeastOneByte) {
  absl::StatusOr<MemoryBudget> b = parse_memory_budget("0.00000000001%");
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->kind, MemoryBudget::Kind::kFraction);
  EXPECT_EQ(b->resolve(16 * GiB), 1);
  EXPECT_EQ(b->resolve(1), 1);
  EXPECT_EQ(b->resolve(0), 1);
  b = parse_memory_budget("100%");
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->resolve(0), 1);
}

TEST(MemoryBudget, ResolveBytesIgnoresDeviceSize) {
  absl::StatusOr<MemoryBudget> b = parse_memory_budget("1GiB");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->resolve(0), GiB);
  EXPECT_EQ(b->resolve(100 * GiB), GiB);
}

struct BadBudget {
  const char* text;
  const char* reason;  // a piece of the expected message
};

class MemoryBudgetRejects : public ::testing::TestWithParam<BadBudget> {};

TEST_P(MemoryBudgetRejects, WithMessageNamingTheValue) {
  const BadBudget& bad = GetParam();
  absl::StatusOr<MemoryBudget> b = parse_memory_budget(bad.text);
  ASSERT_FALSE(b.ok()) << '"' << bad.text << "\" was accepted";
  EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string message(b.status().message());
  EXPECT_THAT(message, HasSubstr("memory budget"));
  EXPECT_THAT(message, HasSubstr(std::string("\"") + bad.text + "\""));
  EXPECT_THAT(message, HasSubstr(bad.reason));
}

INSTANTIATE_TEST_SUITE_P(
    BadForms, MemoryBudgetRejects,
    ::testing::Values(
        BadBudget{"-1", "negative"}, BadBudget{"-1GiB", "negative"},
        BadBudget{"-50%", "negative"}, BadBudget{"0", "positive"},
        BadBudget{"0GiB", "positive"}, BadBudget{"0.0MB", "positive"},
        BadBudget{"0.0000001KB", "positive"}, BadBudget{"nan", "expected a number"},
        BadBudget{"NaN", "expected a number"}, BadBudget{"inf", "expected a number"},
        BadBudget{"-inf", "expected a number"}, BadBudget{"infinity", "expected a number"},
        BadBudget{"GiB", "expected a number"}, BadBudget{"abc", "expected a number"},
        BadBudget{".", "expected a number"}, BadBudget{"-", "expected a number"},
        BadBudget{"%", "expected a number"}, BadBudget{"1.2.3", "unknown unit"},
        BadBudget{"1e9", "unknown unit"}, BadBudget{"0x100", "unknown unit"},
        BadBudget{"1.5XB", "unknown unit"}, BadBudget{"1.5PB", "unknown unit"},
        BadBudget{"1.5PiB", "unknown unit"}, BadBudget{"10 bits", "unknown unit"},
        BadBudget{"1.5GiBs", "unknown unit"}, BadBudget{"1.5GiB extra", "unknown unit"},
        BadBudget{"1GiB 2GiB", "unknown unit"}, BadBudget{"1,024", "unknown unit"},
        BadBudget{"1.5", "whole number"}, BadBudget{"1.5B", "whole number"},
        BadBudget{"0%", "(0, 100]"}, BadBudget{"0.0%", "(0, 100]"},
        BadBudget{"100.01%", "(0, 100]"}, BadBudget{"150%", "(0, 100]"},
        BadBudget{"60%%", "unknown unit"}, BadBudget{"60% of it", "unknown unit"},
        BadBudget{"9223372036854775808", "too large"},
        BadBudget{"99999999999999999999999", "too large"},
        BadBudget{"8388608TiB", "too large"}, BadBudget{"9223372036854775.808KB", "too large"},
        BadBudget{"nonee", "expected a number"}));

// ------------------------------------------------- DTR_MEMORY_BUDGET per device

MemoryBudgetSpec spec(std::string_view text) {
  absl::StatusOr<MemoryBudgetSpec> s = parse_memory_budget_spec(text);
  EXPECT_TRUE(s.ok()) << text << ": " << s.status();
  return s.ok() ? *s : MemoryBudgetSpec{};
}
MemoryBudget bytes_budget(int64_t bytes) {
  return MemoryBudget{.kind = MemoryBudget::Kind::kBytes, .bytes = bytes};
}
MemoryBudget fraction_budget(double fraction) {
  return MemoryBudget{.kind = MemoryBudget::Kind::kFraction, .fraction = fraction};
}
const MemoryBudget kUnlimited{};
const Device kCpu(kCPU), kCuda0(kCUDA, 0), kCuda1(kCUDA, 1), kCuda2(kCUDA, 2);

TEST(MemoryBudgetSpec, BareFormsCapTheDefaultDeviceOnly) {
  MemoryBudgetSpec s = spec("8GiB");
  EXPECT_EQ(s.default_device, bytes_budget(8 * GiB));
  EXPECT_TRUE(s.per_device.empty());
  EXPECT_EQ(s.for_device(kCpu, true), bytes_budget(8 * GiB));
  EXPECT_EQ(s.for_device(kCuda0, true), bytes_budget(8 * GiB));
  EXPECT_EQ(s.for_device(kCpu, false), kUnlimited);
  EXPECT_EQ(s.for_device(kCuda1, false), kUnlimited);

  s = spec(" 60% ");
  EXPECT_EQ(s.default_device.kind, MemoryBudget::Kind::kFraction);  // resolved per device later
  EXPECT_DOUBLE_EQ(s.for_device(kCuda0, true).fraction, 0.6);
  EXPECT_EQ(spec("1073741824").default_device, bytes_budget(GiB));
  for (const char* text : {"", "  ", "none", "Unlimited"}) {
    s = spec(text);
    EXPECT_EQ(s, MemoryBudgetSpec{}) << '"' << text << '"';
    EXPECT_EQ(s.for_device(kCpu, true), kUnlimited);
  }
}

TEST(MemoryBudgetSpec, BareFormsGiveTheSingleValueErrorsUnchanged) {
  for (const char* text : {"-1GiB", "0", "1.5XB", "150%", "lots"}) {
    absl::StatusOr<MemoryBudgetSpec> s = parse_memory_budget_spec(text);
    ASSERT_FALSE(s.ok()) << text;
    EXPECT_EQ(s.status(), parse_memory_budget(text).status()) << text;
  }
}

TEST(MemoryBudgetSpec, PerDeviceEntries) {
  const MemoryBudgetSpec s = spec("cuda:0=20GiB,cuda:1=20GiB,cpu=none");
  EXPECT_EQ(s.default_device, kUnlimited);
  ASSERT_EQ(s.per_device.size(), 3u);
  EXPECT_EQ(s.per_device[0], std::make_pair(kCuda0, bytes_budget(20 * GiB)));
  EXPECT_EQ(s.per_device[1], std::make_pair(kCuda1, bytes_budget(20 * GiB)));
  EXPECT_EQ(s.per_device[2], std::make_pair(kCpu, kUnlimited));
  EXPECT_EQ(s.for_device(kCuda0, true), bytes_budget(20 * GiB));
  EXPECT_EQ(s.for_device(kCuda1, false), bytes_budget(20 * GiB));
  EXPECT_EQ(s.for_device(kCpu, false), kUnlimited);
  // A device without an entry: unlimited, default device or not.
  EXPECT_EQ(s.for_device(kCuda2, true), kUnlimited);
  EXPECT_EQ(s.for_device(kCuda2, false), kUnlimited);
}

// A budget for a device this process does not have still parses (one
// DTR_MEMORY_BUDGET may serve machines with and without GPUs), and the
// runtime warns at start-up that it is ignored, naming the device and why.
TEST(MemoryBudgetSpec, EntriesForAbsentDevicesAreReportedNotDropped) {
  const int cuda_devices = find_backend(kCUDA) != nullptr ? find_backend(kCUDA)->device_count() : 0;
  const std::string absent = fmt::format("cuda:{}", cuda_devices);  // one past the last present
  const std::vector<std::string> lines = unusable_budget_entries(spec(absent + "=1GiB,cpu=2GiB"));
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_THAT(lines[0], HasSubstr("DTR_MEMORY_BUDGET: the budget for " + absent + " is ignored"));
  EXPECT_THAT(lines[0], HasSubstr(find_backend(kCUDA) == nullptr ? "built without CUDA" : "present"));
  EXPECT_TRUE(unusable_budget_entries(spec("cpu=2GiB")).empty());
  EXPECT_TRUE(unusable_budget_entries(spec("8GiB")).empty());  // the bare entry caps whatever is the default
}

// A bare budget shadowed by the default device's own entry ("8GiB,cpu=none"
// on a machine without a GPU, where the CPU is the default device) is
// reported, not dropped in silence.
TEST(MemoryBudgetSpec, ABareEntryShadowedByTheDefaultDevicesOwnIsReported) {
  const std::string own = default_device().str();
  const std::vector<std::string> lines = unusable_budget_entries(spec("8GiB," + own + "=none"));
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_THAT(lines[0], HasSubstr("the budget without a device is ignored"));
  EXPECT_THAT(lines[0], HasSubstr(own));
  EXPECT_TRUE(unusable_budget_entries(spec("none," + own + "=1GiB")).empty());
  const std::string other = default_device() == Device(kCPU) ? "cuda:0" : "cpu";
  const std::vector<std::string> other_lines = unusable_budget_entries(spec("8GiB," + other + "=1GiB"));
  for (const std::string& line : other_lines) EXPECT_THAT(line, Not(HasSubstr("without a device")));
}

TEST(MemoryBudgetSpec, OneBareEntryAmongTheDevices) {
  MemoryBudgetSpec s = spec("8GiB,cpu=none");
  EXPECT_EQ(s.default_device, bytes_budget(8 * GiB));
  EXPECT_EQ(s.for_device(kCuda0, true), bytes_budget(8 * GiB));
  EXPECT_EQ(s.for_device(kCuda1, false), kUnlimited);
  // The device's own entry wins over the bare one, default device or not.
  EXPECT_EQ(s.for_device(kCpu, true), kUnlimited);
  s = spec("cuda:1=50%, 2GiB");  // the bare entry may come anywhere
  EXPECT_EQ(s.default_device, bytes_budget(2 * GiB));
  EXPECT_EQ(s.for_device(kCuda1, false), fraction_budget(0.5));
  EXPECT_EQ(s.for_device(kCuda1, true), fraction_budget(0.5));
}

TEST(MemoryBudgetSpec, SpacesAndCudaMeansCuda0) {
  const MemoryBudgetSpec s = spec("  cuda = 1.5 GiB ,  cpu=512MiB  ");
  ASSERT_EQ(s.per_device.size(), 2u);
  EXPECT_EQ(s.per_device[0], std::make_pair(kCuda0, bytes_budget(GiB + GiB / 2)));
  EXPECT_EQ(s.per_device[1], std::make_pair(kCpu, bytes_budget(512 * MiB)));
  EXPECT_EQ(spec("cpu=1GiB"), (MemoryBudgetSpec{.per_device = {{kCpu, bytes_budget(GiB)}}}));
}

struct BadSpec {
  const char* text;
  const char* entry;   // how the message names the offending entry
  const char* reason;  // a piece of the expected message
};

class MemoryBudgetSpecRejects : public ::testing::TestWithParam<BadSpec> {};

TEST_P(MemoryBudgetSpecRejects, WithMessageNamingTheValueAndTheEntry) {
  const BadSpec& bad = GetParam();
  absl::StatusOr<MemoryBudgetSpec> s = parse_memory_budget_spec(bad.text);
  ASSERT_FALSE(s.ok()) << '"' << bad.text << "\" was accepted";
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string message(s.status().message());
  EXPECT_THAT(message, HasSubstr(std::string("invalid memory budget \"") + bad.text + "\""));
  EXPECT_THAT(message, HasSubstr(bad.entry));
  EXPECT_THAT(message, HasSubstr(bad.reason));
}

INSTANTIATE_TEST_SUITE_P(
    BadForms, MemoryBudgetSpecRejects,
    ::testing::Values(
        // A malformed budget in an entry.
        BadSpec{"cuda:0=abc", "entry \"cuda:0=abc\"", "expected a number"},
        BadSpec{"cpu=0", "entry \"cpu=0\"", "must be positive"},
        BadSpec{"cpu=-1GiB", "entry \"cpu=-1GiB\"", "negative"},
        BadSpec{"8GiB,cpu=1.5XB", "entry \"cpu=1.5XB\"", "unknown unit \"XB\""},
        BadSpec{"cuda:1=150%", "entry \"cuda:1=150%\"", "(0, 100]"},
        BadSpec{"cpu=1GiB=2GiB", "entry \"cpu=1GiB=2GiB\"", "unknown unit"},
        BadSpec{"lots,cpu=none", "entry \"lots\"", "expected a number"},
        // An unknown device.
        BadSpec{"gpu=1GiB", "entry \"gpu=1GiB\"", "invalid device 'gpu'"},
        BadSpec{"cuda:x=1GiB", "entry \"cuda:x=1GiB\"", "invalid device 'cuda:x'"},
        BadSpec{"CPU=1GiB", "entry \"CPU=1GiB\"", "invalid device 'CPU'"},
        BadSpec{"8GiB,cuda:-1=1GiB", "entry \"cuda:-1=1GiB\"", "invalid device"},
        // A device named twice.
        BadSpec{"cuda=1GiB,cuda:0=2GiB", "entry \"cuda:0=2GiB\"",
                "a second budget for cuda:0 (entry \"cuda=1GiB\" is one already)"},
        BadSpec{"cpu=1GiB,cuda:1=1GiB,cpu=none", "entry \"cpu=none\"",
                "a second budget for cpu"},
        // Two bare entries.
        BadSpec{"8GiB,4GiB", "entry \"4GiB\"",
                "a second budget without a device (entry \"8GiB\" already caps the default"},
        BadSpec{"none,cpu=1GiB,none", "entry \"none\"", "a second budget without a device"},
        BadSpec{"1,024", "entry \"024\"", "a second budget without a device"},
        // An empty entry.
        BadSpec{"8GiB,,cpu=none", "entry 2", "entry 2 is empty"},
        BadSpec{"8GiB,", "entry 2", "is empty"},
        BadSpec{",cpu=1GiB", "entry 1", "is empty"},
        BadSpec{"cpu=1GiB, ,cuda=1GiB", "entry 2", "is empty"},
        // A missing side of '='.
        BadSpec{"=1GiB", "entry \"=1GiB\"", "no device before '='"},
        BadSpec{"8GiB, = none", "entry \"= none\"", "no device before '='"},
        BadSpec{"cpu=", "entry \"cpu=\"", "no budget after '='"},
        BadSpec{"cuda:0=20GiB,cpu= ", "entry \"cpu=\"", "no budget after '='"}));

TEST(MemoryBudgetSpec, ASingleValueParserTakesNoDevices) {
  EXPECT_FALSE(parse_memory_budget("cpu=1GiB").ok());
  EXPECT_FALSE(parse_memory_budget("8GiB,cpu=none").ok());
}

// ---------------------------------------------------------------- DTR_MIN_EVICT_BYTES

TEST(ByteSize, AcceptsZeroAndUnits) {
  EXPECT_EQ(parse_byte_size("0").value(), 0);
  EXPECT_EQ(parse_byte_size("0KiB").value(), 0);
  EXPECT_EQ(parse_byte_size("4096").value(), 4096);
  EXPECT_EQ(parse_byte_size("64KiB").value(), 64 * KiB);
  EXPECT_EQ(parse_byte_size("1 mb").value(), 1'000'000);
}

TEST(ByteSize, Rejects) {
  for (const char* text : {"", "none", "unlimited", "10%", "-1", "1.5", "12 parsecs", "nan",
                           "1e6", "9223372036854775808"}) {
    absl::StatusOr<int64_t> size = parse_byte_size(text);
    ASSERT_FALSE(size.ok()) << '"' << text << "\" was accepted";
    EXPECT_THAT(std::string(size.status().message()),
                HasSubstr(std::string("\"") + text + "\""));
  }
  EXPECT_THAT(std::string(parse_byte_size("10%").status().message()),
              HasSubstr("percentage is not allowed"));
}

// ---------------------------------------------------------------- names

TEST(Heuristic, EveryNameRoundTrips) {
  for (const Heuristic h : {Heuristic::kDtrEq, Heuristic::kDtr, Heuristic::kDtrLocal,
                            Heuristic::kLru, Heuristic::kSize, Heuristic::kMsps}) {
    absl::StatusOr<Heuristic> parsed = parse_heuristic(heuristic_name(h));
    ASSERT_TRUE(parsed.ok()) << heuristic_name(h);
    EXPECT_EQ(*parsed, h);
  }
  EXPECT_EQ(parse_heuristic("dtr_eq").value(), Heuristic::kDtrEq);
  EXPECT_EQ(parse_heuristic(" LRU ").value(), Heuristic::kLru);
  EXPECT_EQ(parse_heuristic("msps").value(), Heuristic::kMsps);
}

TEST(Heuristic, RejectsUnknown) {
  for (const char* text : {"", "dtr-eq", "dtreq", "random", "lru2"}) {
    absl::StatusOr<Heuristic> parsed = parse_heuristic(text);
    ASSERT_FALSE(parsed.ok()) << text;
    EXPECT_THAT(std::string(parsed.status().message()),
                HasSubstr(std::string("\"") + text + "\""));
  }
}

TEST(SampleMode, Parses) {
  EXPECT_EQ(parse_sample_mode("all").value(), SampleMode::kAll);
  EXPECT_EQ(parse_sample_mode("SQRT").value(), SampleMode::kSqrt);
  EXPECT_EQ(sample_mode_name(SampleMode::kSqrt), "sqrt");
  EXPECT_EQ(parse_sample_mode("index").value(), SampleMode::kIndex);
  EXPECT_EQ(parse_sample_mode("auto").value(), SampleMode::kAuto);
  EXPECT_EQ(sample_mode_name(SampleMode::kAuto), "auto");
  EXPECT_FALSE(parse_sample_mode("half").ok());
  EXPECT_FALSE(parse_sample_mode("").ok());
}

TEST(LogLevel, Parses) {
  for (const char* level : {"trace", "debug", "info", "warn", "error", "critical", "off"}) {
    EXPECT_EQ(parse_log_level(level).value(), level);
  }
  EXPECT_EQ(parse_log_level(" WARN ").value(), "warn");
  for (const char* bad : {"", "warning", "verbose", "err", "5"}) {
    EXPECT_FALSE(parse_log_level(bad).ok()) << bad;
  }
}

TEST(Bool, Parses) {
  for (const char* yes : {"1", "true", "TRUE", "on", "On", " 1 "}) {
    EXPECT_TRUE(parse_bool(yes).value()) << yes;
  }
  for (const char* no : {"0", "false", "False", "off", "OFF"}) {
    EXPECT_FALSE(parse_bool(no).value()) << no;
  }
  for (const char* bad : {"", "yes", "no", "2", "-1", "truee", "enabled"}) {
    EXPECT_FALSE(parse_bool(bad).ok()) << bad;
  }
}

// ---------------------------------------------------------------- the table

TEST(OptionTable, ListsEveryVariableOnceAndDefaultsParse) {
  const std::vector<std::string_view> expected = {
      "DTR_MEMORY_BUDGET", "DTR_HEURISTIC", "DTR_SAMPLE", "DTR_MIN_EVICT_BYTES",
      "DTR_COST",          "DTR_SWAP",      "DTR_LOG",    "DTR_TRACE",  "DTR_VERIFY", "DTR_PLAN", "DTR_MEMORY_SNAPSHOT",
      "DTR_COLLECTIVE_TIMEOUT", "DTR_THRASH_LIMIT", "DTR_ONEDNN_GEMM", "DTR_CUDA_SYNC"};
  std::vector<std::string_view> names;
  for (const OptionInfo& row : option_table()) {
    names.push_back(row.env_var);
    EXPECT_FALSE(row.doc.empty()) << row.env_var;
    EXPECT_FALSE(row.default_value.empty()) << row.env_var;
  }
  EXPECT_EQ(names, expected);

  // Setting each option to its documented default gives Options{}.
  Options options;
  options.heuristic = Heuristic::kLru;
  options.sample = SampleMode::kSqrt;
  options.min_evict_bytes = 7;
  options.log_level = "off";
  options.trace_path = "x.json";
  options.verify = true;
  options.collective_timeout_seconds = 3;
  options.memory_budget.default_device.kind = MemoryBudget::Kind::kBytes;
  options.memory_budget.per_device.emplace_back(Device(kCPU), MemoryBudget{});
  for (const OptionInfo& row : option_table()) set_option(options, row.env_var, row.default_value);
  const Options defaults;
  EXPECT_EQ(options.memory_budget, defaults.memory_budget);
  EXPECT_EQ(options.heuristic, defaults.heuristic);
  EXPECT_EQ(options.sample, defaults.sample);
  EXPECT_EQ(options.min_evict_bytes, defaults.min_evict_bytes);
  EXPECT_EQ(options.log_level, defaults.log_level);
  EXPECT_EQ(options.trace_path, defaults.trace_path);
  EXPECT_EQ(options.verify, defaults.verify);
  EXPECT_EQ(options.collective_timeout_seconds, defaults.collective_timeout_seconds);
}

TEST(SetOption, SetsAndResets) {
  Options options;
  set_option(options, "DTR_MEMORY_BUDGET", "2GiB");
  EXPECT_EQ(options.memory_budget.default_device.kind, MemoryBudget::Kind::kBytes);
  EXPECT_EQ(options.memory_budget.default_device.bytes, 2 * GiB);
  set_option(options, "DTR_MEMORY_BUDGET", "");
  EXPECT_EQ(options.memory_budget.default_device.kind, MemoryBudget::Kind::kUnlimited);
  set_option(options, "DTR_TRACE", "/tmp/trace.json");
  EXPECT_EQ(options.trace_path, "/tmp/trace.json");
  set_option(options, "DTR_TRACE", "off");
  EXPECT_EQ(options.trace_path, "");
}

TEST(SetOption, UnknownVariable) {
  Options options;
  try {
    set_option(options, "DTR_BUDGET", "1GiB");
    FAIL() << "no throw";
  } catch (const ValueError& e) {
    EXPECT_THAT(e.what(), HasSubstr("DTR_BUDGET"));
    EXPECT_THAT(e.what(), HasSubstr("DTR_MEMORY_BUDGET"));
  }
}

// ---------------------------------------------------------------- from the environment

/// Clears every DTR_* option variable for the test and restores it after.
class EnvTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const OptionInfo& row : option_table()) {
      const std::string name(row.env_var);
      if (const char* v = std::getenv(name.c_str())) saved_.emplace_back(name, v);
      unsetenv(name.c_str());
    }
  }
  void TearDown() override {
    for (const OptionInfo& row : option_table()) unsetenv(std::string(row.env_var).c_str());
    for (const auto& [name, value] : saved_) setenv(name.c_str(), value.c_str(), 1);
  }
  static void set(const char* name, const char* value) { setenv(name, value, 1); }

  /// options_from_env() must throw a ValueError naming the variable, the value
  /// and the accepted forms (`accepted` is a piece of them).
  static void expect_rejected(const char* name, const char* value, const char* accepted) {
    set(name, value);
    try {
      options_from_env();
      ADD_FAILURE() << name << "=\"" << value << "\" was accepted";
    } catch (const ValueError& e) {
      EXPECT_THAT(e.what(), HasSubstr(name));
      EXPECT_THAT(e.what(), HasSubstr(std::string("\"") + value + "\""));
      EXPECT_THAT(e.what(), HasSubstr("accepted forms"));
      EXPECT_THAT(e.what(), HasSubstr(accepted));
    }
    unsetenv(name);
  }

 private:
  std::vector<std::pair<std::string, std::string>> saved_;
};

TEST_F(EnvTest, DefaultsWhenUnset) {
  const Options o = options_from_env();
  EXPECT_EQ(o.memory_budget.default_device.kind, MemoryBudget::Kind::kUnlimited);
  EXPECT_EQ(o.heuristic, Heuristic::kDtrEq);
  EXPECT_EQ(o.sample, SampleMode::kAuto);
  EXPECT_EQ(o.min_evict_bytes, 0);
  EXPECT_EQ(o.cost, CostModel::kEstimate);
  EXPECT_EQ(o.swap, SwapMode::kAuto);
  EXPECT_EQ(o.log_level, "warn");
  EXPECT_EQ(o.trace_path, "");
  EXPECT_FALSE(o.verify);
}

TEST_F(EnvTest, ReadsEveryVariable) {
  set("DTR_MEMORY_BUDGET", "1.5GiB");
  set("DTR_HEURISTIC", "msps");
  set("DTR_SAMPLE", "sqrt");
  set("DTR_MIN_EVICT_BYTES", "4KiB");
  set("DTR_COST", "Measured");
  set("DTR_SWAP", "OFF");
  set("DTR_LOG", "debug");
  set("DTR_TRACE", "/tmp/dtr_trace.json");
  set("DTR_VERIFY", "on");
  const Options o = options_from_env();
  EXPECT_EQ(o.memory_budget.default_device.kind, MemoryBudget::Kind::kBytes);
  EXPECT_EQ(o.memory_budget.default_device.bytes, GiB + GiB / 2);
  EXPECT_EQ(o.heuristic, Heuristic::kMsps);
  EXPECT_EQ(o.sample, SampleMode::kSqrt);
  EXPECT_EQ(o.min_evict_bytes, 4 * KiB);
  EXPECT_EQ(o.cost, CostModel::kMeasured);
  EXPECT_EQ(o.swap, SwapMode::kOff);
  EXPECT_EQ(o.log_level, "debug");
  EXPECT_EQ(o.trace_path, "/tmp/dtr_trace.json");
  EXPECT_TRUE(o.verify);
}

TEST_F(EnvTest, BudgetForms) {
  set("DTR_MEMORY_BUDGET", "60%");
  EXPECT_EQ(options_from_env().memory_budget.default_device.kind, MemoryBudget::Kind::kFraction);
  set("DTR_MEMORY_BUDGET", "none");
  EXPECT_EQ(options_from_env().memory_budget.default_device.kind, MemoryBudget::Kind::kUnlimited);
  set("DTR_MEMORY_BUDGET", "");
  EXPECT_EQ(options_from_env().memory_budget.default_device.kind, MemoryBudget::Kind::kUnlimited);
  set("DTR_MEMORY_BUDGET", "1073741824");
  EXPECT_EQ(options_from_env().memory_budget.default_device.bytes, GiB);
  set("DTR_MEMORY_BUDGET", "cuda:0=20GiB,cuda:1=20GiB,cpu=none");
  const MemoryBudgetSpec per_device = options_from_env().memory_budget;
  EXPECT_EQ(per_device.for_device(Device(kCUDA, 1), false).bytes, 20 * GiB);
  EXPECT_EQ(per_device.for_device(Device(kCPU), true).kind, MemoryBudget::Kind::kUnlimited);
  set("DTR_MEMORY_BUDGET", "8GiB,cpu=none");
  EXPECT_EQ(options_from_env().memory_budget.default_device.bytes, 8 * GiB);
}

TEST_F(EnvTest, BadValuesNameVariableValueAndAcceptedForms) {
  for (const char* bad : {"-1GiB", "0", "nan", "inf", "1.5XB", "1.5GiB!", "150%", "0%",
                          "9223372036854775808", "lots"}) {
    expect_rejected("DTR_MEMORY_BUDGET", bad, "\"1.5GiB\"");
  }
  for (const char* bad : {"8GiB,,cpu=none", "gpu=1GiB", "cuda=1GiB,cuda:0=1GiB", "8GiB,4GiB",
                          "cpu=", "=8GiB", "cpu=lots"}) {
    expect_rejected("DTR_MEMORY_BUDGET", bad, "\"cuda:0=20GiB,cuda:1=20GiB,cpu=none\"");
  }
  expect_rejected("DTR_HEURISTIC", "random", "dtr_eq, dtr, dtr_local, lru, size, msps");
  expect_rejected("DTR_SAMPLE", "half", "all, sqrt, index, auto");
  expect_rejected("DTR_COST", "guess", "estimate, measured");
  expect_rejected("DTR_SWAP", "always", "off, auto");
  expect_rejected("DTR_MIN_EVICT_BYTES", "10%", "64KiB");
  expect_rejected("DTR_MIN_EVICT_BYTES", "-5", "64KiB");
  expect_rejected("DTR_LOG", "loud", "trace, debug, info, warn, error, critical, off");
  expect_rejected("DTR_VERIFY", "yes", "0/1, true/false, on/off");
}

TEST_F(EnvTest, MessageForAStrayUnit) {
  set("DTR_MEMORY_BUDGET", "2 gigs");
  try {
    options_from_env();
    FAIL() << "no throw";
  } catch (const ValueError& e) {
    EXPECT_THAT(e.what(), HasSubstr("DTR_MEMORY_BUDGET"));
    EXPECT_THAT(e.what(), HasSubstr("\"2 gigs\""));
    EXPECT_THAT(e.what(), HasSubstr("unknown unit \"gigs\""));
  }
}

}  // namespace
}  // namespace dtr

namespace dtr {
namespace {
TEST(Shape, ElementCountOverflowIsAValueError) {
  EXPECT_THROW(numel({int64_t{1} << 40, int64_t{1} << 40}), ValueError);
  EXPECT_THROW(numel({int64_t{1} << 62, 4}), ValueError);
  EXPECT_EQ(numel({int64_t{1} << 30, 4}), int64_t{1} << 32);
}
TEST(OptionParse, CollectiveTimeoutTakesSecondsWithAUnit) {
  EXPECT_DOUBLE_EQ(*parse_seconds("30"), 30.0);
  EXPECT_DOUBLE_EQ(*parse_seconds(" 1.5s "), 1.5);
  EXPECT_DOUBLE_EQ(*parse_seconds("500ms"), 0.5);
  EXPECT_DOUBLE_EQ(*parse_seconds("10MIN"), 600.0);
  EXPECT_DOUBLE_EQ(*parse_seconds("2h"), 7200.0);
  for (const char* bad : {"", "0", "-1", "abc", "1x", "inf", "nan", "s", "ms"})
    EXPECT_FALSE(parse_seconds(bad).ok()) << bad;
  Options o;
  set_option(o, "DTR_COLLECTIVE_TIMEOUT", "45s");
  EXPECT_DOUBLE_EQ(o.collective_timeout_seconds, 45.0);
  EXPECT_THROW(set_option(o, "DTR_COLLECTIVE_TIMEOUT", "soon"), ValueError);
}

}  // namespace
}  // namespace dtr
