// The options table (DESIGN.md "Options"): every knob has an environment
// variable, a default, a doc line and a C++ setter. A malformed value throws
// ValueError naming the variable, the value and the accepted forms.
//
// Note [environment at start-up]: the process options are read from the
// environment once (global_options()), and reading never throws: a malformed
// variable leaves its option at the default and queues its error.
// check_environment(), called by the first op, throws the queued errors once
// as one ValueError and warns once about DTR_* variables that are not options
// (a misspelling names the closest option). After that throw the program may
// go on: each malformed option keeps its default until its setter is called,
// and a setter always overrides the environment. Nothing at start-up is
// half-done by a throw, so a caught error leaves every later call working.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <absl/status/statusor.h>

#include "core/device.h"

namespace dtr {

/// A parsed DTR_MEMORY_BUDGET: unlimited, a byte count, or a fraction of the
/// device's memory.
struct MemoryBudget {
  enum class Kind { kUnlimited, kBytes, kFraction } kind = Kind::kUnlimited;
  int64_t bytes = 0;      // for kBytes
  double fraction = 0.0;  // for kFraction, in (0, 1]
  /// Bytes for a device of `device_bytes`; nullopt when unlimited. A
  /// fraction rounds to the nearest byte and to at least 1 (a budget is
  /// positive, however small the percentage).
  std::optional<int64_t> resolve(int64_t device_bytes) const;
  friend bool operator==(const MemoryBudget&, const MemoryBudget&) = default;
};

/// Grammar: "none" | "unlimited" | "" → unlimited; an integer byte count
/// ("1073741824"); a number with a unit: B, KB, MB, GB, TB (powers of 1000),
/// KiB, MiB, GiB, TiB (powers of 1024), case-insensitive, optional space
/// ("1.5GiB", "512 MiB", "800MB"); a percentage of device memory in (0, 100]
/// ("60%"). Rejects negatives, zero, NaN, unknown units, trailing garbage.
absl::StatusOr<MemoryBudget> parse_memory_budget(std::string_view text);

/// A parsed DTR_MEMORY_BUDGET with its devices: a budget for the default
/// device (the first CUDA device where one is present, else the CPU) and
/// budgets for named devices. A fraction stays a fraction here; the runtime
/// resolves it against the device's own memory.
struct MemoryBudgetSpec {
  /// The bare entry; unlimited when there is none.
  MemoryBudget default_device;
  /// The device=budget entries, in the order written, each device once.
  std::vector<std::pair<Device, MemoryBudget>> per_device;

  /// The budget of `d`: its own entry when there is one, else the bare entry
  /// when `d` is the default device (`d_is_default_device`), else unlimited.
  MemoryBudget for_device(Device d, bool d_is_default_device) const;
  friend bool operator==(const MemoryBudgetSpec&, const MemoryBudgetSpec&) = default;
};

/// The per-device entries of `spec` that no device present now can use (no
/// backend for the device's type in this build, or an index past the
/// devices present), one line each naming the entry's device and why. The
/// runtime logs each as a warning at start-up: the budget is ignored, never
/// silently (a CPU-only build keeps accepting a cuda:0 budget, as the same
/// DTR_MEMORY_BUDGET may serve machines with and without GPUs).
std::vector<std::string> unusable_budget_entries(const MemoryBudgetSpec& spec);

/// Grammar: one budget as parse_memory_budget() reads it (caps the default
/// device), or a comma-separated list of entries "device=budget" with
/// devices as Device(std::string_view) reads them ("cpu", "cuda" = "cuda:0",
/// "cuda:1") and at most one bare budget among them, for the default device:
/// "cuda:0=20GiB,cuda:1=20GiB,cpu=none", "8GiB,cpu=none". Spaces around
/// entries, devices and budgets are ignored. The error, naming the value and
/// the offending entry, is InvalidArgument for a malformed budget, an
/// unknown device, a device named twice ("cuda" and "cuda:0" are one), a
/// second bare budget, an empty entry ("8GiB,,cpu=none", a trailing comma)
/// and an entry with nothing before or after its '='.
absl::StatusOr<MemoryBudgetSpec> parse_memory_budget_spec(std::string_view text);

/// Byte counts for DTR_MIN_EVICT_BYTES: same units as the budget, 0 allowed, no %.
absl::StatusOr<int64_t> parse_byte_size(std::string_view text);

enum class Heuristic { kDtrEq, kDtr, kDtrLocal, kLru, kSize, kMsps };
absl::StatusOr<Heuristic> parse_heuristic(std::string_view text);
std::string_view heuristic_name(Heuristic h);

/// Candidates examined per eviction (Note [scores], Note [staleness
/// buckets]): every one; a deterministic random sample of max(128,
/// ceil(sqrt(n))); the staleness-bucket index's search (a sample for
/// heuristics whose score does not fall with staleness: size, msps); or
/// auto: the sample below kIndexMinCandidates candidates, the index from there.
enum class SampleMode { kAll, kSqrt, kIndex, kAuto };
inline constexpr size_t kIndexMinCandidates = 16384;
absl::StatusOr<SampleMode> parse_sample_mode(std::string_view text);
std::string_view sample_mode_name(SampleMode m);

/// Where an op's recompute cost c0 comes from (Note [scores]): the
/// registry's FLOP/byte estimate (reproducible decisions), or the measured
/// time of its first run (closer to the machine; decisions then depend on
/// timing and may differ run to run).
enum class CostModel { kEstimate, kMeasured };
absl::StatusOr<CostModel> parse_cost_model(std::string_view text);
std::string_view cost_model_name(CostModel m);

/// DTR_SWAP: whether a device with a host link (core/backend.h HostLink) may
/// move a storage's bytes to host memory instead of evicting it (Note [host
/// tier]): off, or auto (the policy picks, per victim, the cheaper of
/// recomputing and copying back).
enum class SwapMode { kOff, kAuto };
absl::StatusOr<SwapMode> parse_swap_mode(std::string_view text);
std::string_view swap_mode_name(SwapMode m);

/// An spdlog level name: trace, debug, info, warn, error, critical, off
/// (case-insensitive). Returns the lower-case name.
absl::StatusOr<std::string> parse_log_level(std::string_view text);

/// DTR_COLLECTIVE_TIMEOUT: a positive, finite number of seconds with an
/// optional unit ms, s, min or h (case-insensitive; "30", "1.5s", "500ms").
absl::StatusOr<double> parse_seconds(std::string_view text);

/// DTR_THRASH_LIMIT: a finite number >= 0 (0 turns the guard off); a
/// positive limit must be at least 1 (replaying less than the fresh work is
/// never thrashing).
absl::StatusOr<double> parse_thrash_limit(std::string_view text);

/// DTR_VERIFY's booleans: 0/1, true/false, on/off (case-insensitive).
absl::StatusOr<bool> parse_bool(std::string_view text);

struct Options {
  MemoryBudgetSpec memory_budget;       // DTR_MEMORY_BUDGET
  Heuristic heuristic = Heuristic::kDtrEq;  // DTR_HEURISTIC
  SampleMode sample = SampleMode::kAuto;    // DTR_SAMPLE
  int64_t min_evict_bytes = 0;          // DTR_MIN_EVICT_BYTES
  CostModel cost = CostModel::kEstimate;  // DTR_COST
  SwapMode swap = SwapMode::kAuto;      // DTR_SWAP
  std::string log_level = "warn";       // DTR_LOG
  std::string trace_path;               // DTR_TRACE ("" = off)
  std::string plan_path;                // DTR_PLAN ("" = off)
  std::string memory_snapshot_path;     // DTR_MEMORY_SNAPSHOT ("" = off)
  bool verify = false;                  // DTR_VERIFY
  double collective_timeout_seconds = 600;  // DTR_COLLECTIVE_TIMEOUT
  double thrash_limit = 32;             // DTR_THRASH_LIMIT (0: off)
  bool onednn_gemm = false;             // DTR_ONEDNN_GEMM
  bool cuda_sync = false;               // DTR_CUDA_SYNC
};

/// One row of the options table, for --help texts and docs.
struct OptionInfo {
  std::string_view env_var;
  std::string_view default_value;
  std::string_view doc;
  std::string_view setter;  // the C++ call that overrides the variable
};
const std::vector<OptionInfo>& option_table();

/// Sets one option of `options` by its environment variable name, parsing
/// `value` exactly as the environment would be parsed; an empty value restores
/// the default. Throws ValueError naming the variable, the value and the
/// accepted forms (or the unknown variable).
///
/// On the process options (`global_options()`) this is the documented way to
/// change an option while the program runs, the one path of the C++ and the
/// C API (`dtr_set_option`): the new value also applies to the running
/// library as the option's setter would (a budget to every device, a heuristic
/// to the runtime, DTR_TRACE opens its file, ...), and both stay as they were
/// when that throws. What it refuses there, besides the malformed values:
/// DTR_PLAN (ValueError: read at start-up only); a DTR_MEMORY_BUDGET entry for
/// a device that is not present (DeviceError naming the device, e.g. cuda:0
/// without a CUDA driver or device); switching DTR_ONEDNN_GEMM while lineage
/// exists (ValueError: a replay would run the other GEMM library and not be
/// bitwise the first result). Calls on the process options are serialized.
void set_option(Options& options, std::string_view env_var, std::string_view value);

/// Applies the option `env_var` of `next` (the process options with that one
/// option changed) to the running library, or throws without changing
/// anything. The runtime layer installs it when the library loads
/// (remat/process_options.cpp), not programs; set_option calls it for the
/// process options only.
using ProcessOptionApplier = void (*)(std::string_view env_var, const Options& next);
void set_process_option_applier(ProcessOptionApplier applier);

/// Parses every option from `getenv`-style lookup. Throws ValueError on the
/// first malformed value, naming variable, value and accepted forms.
Options options_from_env();

/// The process options: read from the environment on first use, then
/// changed only through setters. Never throws for a malformed variable: that
/// option keeps its default and check_environment() reports it (Note
/// [environment at start-up]).
Options& global_options();

/// Reports the environment the process options were read from, once per
/// process (the first op calls it; later calls return at once): logs a
/// warning on the "dtr" logger for each DTR_* variable that is not an option,
/// naming the closest option, and throws ValueError listing every malformed
/// DTR_* value (variable, value, accepted forms, the default used instead and
/// the setter that overrides it). The throw happens once: afterwards each such
/// option runs at its default until its setter is called.
void check_environment();

/// The option variable closest to `name` by edit distance (for "did you mean").
std::string_view closest_option(std::string_view name);

}  // namespace dtr
