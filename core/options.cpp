#include "core/options.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <mutex>

#include <unistd.h>

#include <absl/status/status.h>
#include <absl/strings/ascii.h>
#include <absl/strings/escaping.h>
#include <absl/strings/match.h>
#include <absl/strings/numbers.h>
#include <fmt/format.h>

#include "core/absl_compat.h"
#include "core/backend.h"
#include "core/error.h"
#include "core/logging.h"

namespace dtr {
namespace {

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

std::string_view strip(std::string_view s) {
  return to_std(absl::StripAsciiWhitespace(to_absl(s)));
}
std::string lower_stripped(std::string_view s) {
  return absl::AsciiStrToLower(absl::StripAsciiWhitespace(to_absl(s)));
}
bool equals_ignore_case(std::string_view a, std::string_view b) {
  return absl::EqualsIgnoreCase(to_absl(a), to_absl(b));
}

/// `"text"`, escaped so that control characters and quotes stay readable.
std::string quoted(std::string_view text) { return fmt::format("\"{}\"", absl::CEscape(to_absl(text))); }

absl::Status invalid(std::string_view what, std::string_view text, std::string_view reason) {
  return absl::InvalidArgumentError(fmt::format("invalid {} {}: {}", what, quoted(text), reason));
}
/// `status` (a reason alone) as invalid(what, text, reason); OK passes.
absl::Status invalid(std::string_view what, std::string_view text, const absl::Status& status) {
  return status.ok() ? status : invalid(what, text, to_std(status.message()));
}
/// A reason alone, put in context by the caller with invalid(what, text, status).
absl::Status reason(std::string_view why) { return absl::InvalidArgumentError(to_absl(why)); }

struct Unit {
  std::string_view name;  // lower case
  uint64_t multiplier;
};
constexpr std::array<Unit, 9> kUnits = {{
    {"b", 1},
    {"kb", 1000ull},
    {"mb", 1000ull * 1000},
    {"gb", 1000ull * 1000 * 1000},
    {"tb", 1000ull * 1000 * 1000 * 1000},
    {"kib", 1ull << 10},
    {"mib", 1ull << 20},
    {"gib", 1ull << 30},
    {"tib", 1ull << 40},
}};
constexpr std::string_view kUnitList = "B, KB, MB, GB, TB, KiB, MiB, GiB, TiB";

/// A byte count or a percentage, as written in a size option.
struct Size {
  bool is_percent = false;
  int64_t bytes = 0;
  double percent = 0.0;
};

/// Parses "<number>[ ]<unit>" or "<number>[ ]%" where <number> is a plain
/// decimal ("12", "1.5", ".5"). Byte counts are computed exactly (no floating
/// point) and rounded down to whole bytes; a count without a unit, or in B,
/// must itself be whole. An error's message is the reason alone.
absl::StatusOr<Size> parse_size(std::string_view original, bool allow_percent) {
  const std::string_view text = strip(original);
  if (text.empty()) return reason("empty value");

  size_t i = 0;
  bool negative = false;
  if (text[0] == '+' || text[0] == '-') {
    negative = text[0] == '-';
    ++i;
  }
  const size_t int_begin = i;
  while (i < text.size() && absl::ascii_isdigit(static_cast<unsigned char>(text[i]))) ++i;
  const std::string_view int_digits = text.substr(int_begin, i - int_begin);
  std::string_view frac_digits;
  if (i < text.size() && text[i] == '.') {
    const size_t frac_begin = ++i;
    while (i < text.size() && absl::ascii_isdigit(static_cast<unsigned char>(text[i]))) ++i;
    frac_digits = text.substr(frac_begin, i - frac_begin);
  }
  if (int_digits.empty() && frac_digits.empty()) {
    return reason("expected a number");
  }
  const std::string_view number = text.substr(int_begin, i - int_begin);
  const std::string_view unit =
      to_std(absl::StripLeadingAsciiWhitespace(to_absl(text.substr(i))));
  if (negative) return reason("negative sizes are not allowed");

  if (unit == "%") {
    if (!allow_percent) return reason("a percentage is not allowed here");
    double percent = 0.0;
    if (!absl::SimpleAtod(to_absl(number), &percent) || !std::isfinite(percent) || percent <= 0.0 ||
        percent > 100.0) {
      return reason("a percentage must be in (0, 100]");
    }
    return Size{.is_percent = true, .percent = percent};
  }

  uint64_t multiplier = 1;
  if (!unit.empty()) {
    const std::string lower = lower_stripped(unit);
    const auto it = std::find_if(kUnits.begin(), kUnits.end(),
                                 [&](const Unit& u) { return u.name == lower; });
    if (it == kUnits.end()) {
      return reason(fmt::format("unknown unit {} (expected one of {}{})", quoted(unit), kUnitList,
                                allow_percent ? ", or %" : ""));
    }
    multiplier = it->multiplier;
  }
  if (multiplier == 1 &&
      !std::all_of(frac_digits.begin(), frac_digits.end(), [](char c) { return c == '0'; })) {
    return reason("a byte count must be a whole number");
  }

  const auto too_large = [&] {
    return reason(fmt::format("too large (the limit is {} bytes)", kInt64Max));
  };
  uint64_t whole = 0;
  for (const char c : int_digits) {
    if (__builtin_mul_overflow(whole, 10u, &whole) ||
        __builtin_add_overflow(whole, uint64_t(c - '0'), &whole)) {
      return too_large();
    }
  }
  // floor(0.d1 d2 ... dn * multiplier), exactly: multiply the digit string by
  // `multiplier` from the right; the final carry is the integer part.
  uint64_t fraction_bytes = 0;
  for (auto it = frac_digits.rbegin(); it != frac_digits.rend(); ++it) {
    fraction_bytes = (uint64_t(*it - '0') * multiplier + fraction_bytes) / 10;
  }
  uint64_t bytes = 0;
  if (__builtin_mul_overflow(whole, multiplier, &bytes) ||
      __builtin_add_overflow(bytes, fraction_bytes, &bytes) || bytes > uint64_t(kInt64Max)) {
    return too_large();
  }
  return Size{.bytes = int64_t(bytes)};
}

template <typename Enum, size_t N>
absl::StatusOr<Enum> parse_name(std::string_view text, std::string_view what,
                                const std::array<std::pair<std::string_view, Enum>, N>& names) {
  const std::string lower = lower_stripped(text);
  for (const auto& [name, value] : names) {
    if (name == lower) return value;
  }
  return absl::InvalidArgumentError(fmt::format("unknown {} {}", what, quoted(text)));
}

constexpr std::array<std::pair<std::string_view, Heuristic>, 6> kHeuristics = {{
    {"dtr_eq", Heuristic::kDtrEq},
    {"dtr", Heuristic::kDtr},
    {"dtr_local", Heuristic::kDtrLocal},
    {"lru", Heuristic::kLru},
    {"size", Heuristic::kSize},
    {"msps", Heuristic::kMsps},
}};
constexpr std::array<std::pair<std::string_view, SampleMode>, 4> kSampleModes = {{
    {"all", SampleMode::kAll},
    {"sqrt", SampleMode::kSqrt},
    {"index", SampleMode::kIndex},
    {"auto", SampleMode::kAuto},
}};
constexpr std::array<std::pair<std::string_view, CostModel>, 2> kCostModels = {{
    {"estimate", CostModel::kEstimate},
    {"measured", CostModel::kMeasured},
}};
constexpr std::array<std::pair<std::string_view, SwapMode>, 2> kSwapModes = {{
    {"off", SwapMode::kOff},
    {"auto", SwapMode::kAuto},
}};
constexpr std::array<std::string_view, 7> kLogLevels = {"trace", "debug", "info",    "warn",
                                                         "error", "critical", "off"};

template <typename T>
absl::Status assign(absl::StatusOr<T> parsed, T& field) {
  if (!parsed.ok()) return parsed.status();
  field = *std::move(parsed);
  return absl::OkStatus();
}

/// One row of the options table. `apply` parses a value (never empty: an
/// empty value means `info.default_value`, which each row must accept).
struct OptionRow {
  OptionInfo info;
  std::string_view accepted;
  absl::Status (*apply)(Options&, std::string_view value);
};

const std::array<OptionRow, 15>& option_rows() {
  static const std::array<OptionRow, 15> rows = {{
      {{"DTR_MEMORY_BUDGET", "unlimited",
        "hard cap on resident device bytes of tensor storage (Note [hard budget]), per device: "
        "a bare budget caps the default device (the first CUDA device where one is present, "
        "else the CPU), device=budget entries cap the devices they name, and any other device "
        "is unlimited",
        "dtr::remat::set_memory_budget"},
       "a byte count (\"1073741824\"); a number with a unit B, KB, MB, GB, TB (powers of "
       "1000) or KiB, MiB, GiB, TiB (powers of 1024), case-insensitive, e.g. \"1.5GiB\", "
       "\"512 MiB\", \"800MB\"; a percentage of the device's memory in (0, 100], e.g. "
       "\"60%\"; or \"none\"/\"unlimited\"; per device, comma-separated device=budget "
       "entries with any of these budgets, each device once (\"cpu\", \"cuda:1\"; \"cuda\" is "
       "\"cuda:0\"), e.g. "
       "\"cuda:0=20GiB,cuda:1=20GiB,cpu=none\", and at most one bare budget among them for the "
       "default device, e.g. \"8GiB,cpu=none\"",
       [](Options& o, std::string_view v) {
         return assign(parse_memory_budget_spec(v), o.memory_budget);
       }},
      {{"DTR_HEURISTIC", "dtr_eq",
        "eviction heuristic: dtr_eq (h_DTR with union-find equivalence classes), dtr (exact "
        "evicted neighbourhood), dtr_local, lru, size, msps",
        "dtr::remat::Runtime::global().set_heuristic"},
       "dtr_eq, dtr, dtr_local, lru, size, msps",
       [](Options& o, std::string_view v) { return assign(parse_heuristic(v), o.heuristic); }},
      {{"DTR_SAMPLE", "auto",
        "candidates examined per eviction: all, a random sqrt(n) of them, the staleness-bucket index's "
        "search, or auto (sqrt below 16384 candidates, index from there)",
        "dtr::remat::Runtime::global().set_sample_mode"},
       "all, sqrt, index, auto",
       [](Options& o, std::string_view v) { return assign(parse_sample_mode(v), o.sample); }},
      {{"DTR_MIN_EVICT_BYTES", "0", "storages smaller than this are never eviction candidates",
        "dtr::remat::Runtime::global().set_min_evict_bytes"},
       "a byte count (\"0\", \"4096\") or a number with a unit B, KB, MB, GB, TB, KiB, MiB, "
       "GiB, TiB, e.g. \"64KiB\"",
       [](Options& o, std::string_view v) { return assign(parse_byte_size(v), o.min_evict_bytes); }},
      {{"DTR_COST", "estimate",
        "recompute cost of an op in eviction scores: estimate (the registry's FLOP and byte "
        "counts; reproducible) or measured (the time of its first run)",
        "dtr::remat::Runtime::global().set_cost_model"},
       "estimate, measured",
       [](Options& o, std::string_view v) { return assign(parse_cost_model(v), o.cost); }},
      {{"DTR_SWAP", "auto",
        "host tier: under a budget, a device with a host link may copy a victim's bytes to "
        "host memory instead of evicting it, whichever is cheaper to bring back (auto), or "
        "never (off); swapped bytes count against the cpu budget (Note [host tier])",
        "dtr::remat::Runtime::global().set_swap_mode"},
       "off, auto",
       [](Options& o, std::string_view v) { return assign(parse_swap_mode(v), o.swap); }},
      {{"DTR_LOG", "warn", "log level of the \"dtr\" spdlog logger", "dtr::set_log_level"},
       "trace, debug, info, warn, error, critical, off",
       [](Options& o, std::string_view v) { return assign(parse_log_level(v), o.log_level); }},
      {{"DTR_TRACE", "off",
        "write a Chrome trace-event JSON (ops, evictions, rematerializations, memory) to this "
        "path, viewable in Perfetto",
        "dtr::remat::Runtime::global().set_trace_path"},
       "a file path, or \"off\"",
       [](Options& o, std::string_view v) {
         o.trace_path = equals_ignore_case(v, "off") ? "" : std::string(v);
         return absl::OkStatus();
       }},
      {{"DTR_VERIFY", "off",
        "hash each storage when first computed and check every rematerialization against it",
        "dtr::remat::Runtime::global().set_verify"},
       "0/1, true/false, on/off",
       [](Options& o, std::string_view v) { return assign(parse_bool(v), o.verify); }},
      {{"DTR_PLAN", "off",
        "record the whole run with no memory budget (DTR_MEMORY_BUDGET is then only planned, "
        "not applied) and at exit predict every budget's cost from it: the table to stderr and "
        "PATH.txt, the chart to PATH.svg (Note [planner])",
        "dtr::remat::plan"},
       "a file path (a .txt or .svg ending is dropped), or \"off\"",
       [](Options& o, std::string_view v) {
         o.plan_path = equals_ignore_case(v, "off") ? "" : std::string(v);
         return absl::OkStatus();
       }},
      {{"DTR_MEMORY_SNAPSHOT", "off",
        "record every allocation, free, eviction, rematerialization and swap from the start and "
        "write a memory snapshot in the format of torch.cuda.memory._snapshot() (a pickle that "
        "https://pytorch.org/memory_viz and torch.cuda._memory_viz read) to this path at exit "
        "(Note [memory snapshots])",
        "dtr::memory::set_snapshot_at_exit"},
       "a file path, or \"off\"",
       [](Options& o, std::string_view v) {
         o.memory_snapshot_path = equals_ignore_case(v, "off") ? "" : std::string(v);
         return absl::OkStatus();
       }},
      {{"DTR_COLLECTIVE_TIMEOUT", "600",
        "seconds a collective of dtr::distributed waits for every rank of its group before "
        "it throws CollectiveTimeoutError naming the ranks that never joined",
        "dtr::distributed::init_process_group(backend, {.timeout_seconds = ...})"},
       "a positive number of seconds, optionally with a unit ms, s, min or h, e.g. \"30\", "
       "\"1.5s\", \"500ms\", \"10min\"",
       [](Options& o, std::string_view v) {
         return assign(parse_seconds(v), o.collective_timeout_seconds);
       }},
      {{"DTR_THRASH_LIMIT", "32",
        "thrash guard (Note [thrash guard]): under a budget, when over the last 1024 ops the "
        "program issued a device replays more than this many times as many ops as were issued, "
        "and more than this many times their estimated cost, the op raises ThrashError (an "
        "OutOfMemoryError naming the budget and the ops replayed most) instead of replaying on; "
        "0 turns the guard off",
        "dtr::remat::Runtime::global().set_thrash_limit"},
       "0 (off) or a number >= 1, e.g. \"32\", \"100\"",
       [](Options& o, std::string_view v) { return assign(parse_thrash_limit(v), o.thrash_limit); }},
      {{"DTR_ONEDNN_GEMM", "off",
        "float32 GEMM blocks of >= 2^18 multiply-adds (M, N >= 8) on oneDNN's matmul primitive instead of "
        "OpenBLAS where oneDNN has a brgemm kernel for them (AVX-512 CPUs): 3-12% faster steps on "
        "the zoo's GEMM-bound models, but each distinct GEMM shape keeps about 60 KB of JIT code "
        "and primitive state outside the budget (about 90 MB with thousands of shapes); results "
        "differ from OpenBLAS's in the last bits, so set it before any lineage is recorded (set_option "
        "refuses to switch it while lineage exists)",
        "dtr::set_option(dtr::global_options(), \"DTR_ONEDNN_GEMM\", \"on\")"},
       "0/1, true/false, on/off",
       [](Options& o, std::string_view v) { return assign(parse_bool(v), o.onednn_gemm); }},
      {{"DTR_CUDA_SYNC", "off",
        "wait for every kernel on a CUDA device as it runs and check it (as CUDA_LAUNCH_BLOCKING=1 "
        "does), so that a device fault is reported by the op whose kernel faulted instead of by a "
        "later one (Note [lost devices]); for debugging: it serializes the host and the device",
        "dtr::set_option(dtr::global_options(), \"DTR_CUDA_SYNC\", \"on\")"},
       "0/1, true/false, on/off",
       [](Options& o, std::string_view v) { return assign(parse_bool(v), o.cuda_sync); }},
  }};
  return rows;
}

}  // namespace

std::optional<int64_t> MemoryBudget::resolve(int64_t device_bytes) const {
  switch (kind) {
    case Kind::kUnlimited: return std::nullopt;
    case Kind::kBytes: return bytes;
    case Kind::kFraction:
      // Rounded to nearest: 0.6 is stored as 0.59999..., and 60% of 1000
      // bytes should still be 600. At least one byte: a budget is positive
      // (set_memory_budget rejects 0), however small the percentage.
      return std::max<int64_t>(
          1, int64_t(std::llround(static_cast<long double>(fraction) *
                                  static_cast<long double>(std::max<int64_t>(device_bytes, 0)))));
  }
  return std::nullopt;
}

MemoryBudget MemoryBudgetSpec::for_device(Device d, bool d_is_default_device) const {
  for (const auto& [device, budget] : per_device) {
    if (device == d) return budget;
  }
  return d_is_default_device ? default_device : MemoryBudget{};
}

std::vector<std::string> unusable_budget_entries(const MemoryBudgetSpec& spec) {
  std::vector<std::string> out;
  for (const auto& [device, budget] : spec.per_device) {
    try {
      check_device(device);
    } catch (const DeviceError& e) {
      out.push_back(fmt::format("DTR_MEMORY_BUDGET: the budget for {} is ignored: {}", device.str(), e.what()));
    }
  }
  // The bare entry caps the default device unless that device has its own
  // entry (for_device): "8GiB,cpu=none", written for a GPU machine, leaves a
  // machine without one unbudgeted. Said, never silently.
  if (spec.default_device.kind != MemoryBudget::Kind::kUnlimited) {
    const Device d = default_device();
    for (const auto& entry : spec.per_device) {
      if (entry.first != d) continue;
      out.push_back(fmt::format(
          "DTR_MEMORY_BUDGET: the budget without a device is ignored: it caps the default device, "
          "{}, whose own entry takes precedence",
          d.str()));
    }
  }
  return out;
}

namespace {

constexpr std::string_view kBudgetWhat = "memory budget";

/// One budget; an error's message is the reason alone.
absl::StatusOr<MemoryBudget> parse_budget_value(std::string_view text) {
  const std::string_view stripped = strip(text);
  if (stripped.empty() || equals_ignore_case(stripped, "none") ||
      equals_ignore_case(stripped, "unlimited")) {
    return MemoryBudget{};
  }
  absl::StatusOr<Size> size = parse_size(text, /*allow_percent=*/true);
  if (!size.ok()) return size.status();
  if (size->is_percent) {
    return MemoryBudget{.kind = MemoryBudget::Kind::kFraction, .fraction = size->percent / 100.0};
  }
  if (size->bytes == 0) return reason("the budget must be positive");
  return MemoryBudget{.kind = MemoryBudget::Kind::kBytes, .bytes = size->bytes};
}

/// A per-device budget list being read, entry by entry.
struct BudgetListParser {
  MemoryBudgetSpec spec;
  std::string_view bare_entry;                  // the bare entry so far, if any
  std::vector<std::string_view> device_entries;  // the entry of each spec.per_device

  /// Adds one entry (stripped; `number` counts from 1). An error's message
  /// names the entry and the reason.
  absl::Status add(std::string_view entry, size_t number) {
    if (entry.empty()) return reason(fmt::format("entry {} is empty", number));
    const auto in_entry = [&](std::string_view why) {
      return reason(fmt::format("entry {}: {}", quoted(entry), why));
    };
    const size_t eq = entry.find('=');
    if (eq == std::string_view::npos) {
      if (!bare_entry.empty()) {
        return in_entry(fmt::format(
            "a second budget without a device (entry {} already caps the default device); "
            "write device=budget for the others",
            quoted(bare_entry)));
      }
      absl::StatusOr<MemoryBudget> budget = parse_budget_value(entry);
      if (!budget.ok()) return in_entry(to_std(budget.status().message()));
      bare_entry = entry;
      spec.default_device = *budget;
      return absl::OkStatus();
    }
    const std::string_view device_text = strip(entry.substr(0, eq));
    const std::string_view budget_text = strip(entry.substr(eq + 1));
    if (device_text.empty()) return in_entry("no device before '='");
    if (budget_text.empty()) return in_entry("no budget after '=' (\"none\" means no limit)");
    absl::StatusOr<MemoryBudget> budget = parse_budget_value(budget_text);
    if (!budget.ok()) return in_entry(to_std(budget.status().message()));
    std::optional<Device> device;
    try {
      device.emplace(device_text);
    } catch (const ValueError& e) {
      return in_entry(e.what());
    }
    for (size_t k = 0; k < spec.per_device.size(); ++k) {
      if (spec.per_device[k].first == *device) {
        return in_entry(fmt::format("a second budget for {} (entry {} is one already)",
                                    device->str(), quoted(device_entries[k])));
      }
    }
    spec.per_device.emplace_back(*device, *budget);
    device_entries.push_back(entry);
    return absl::OkStatus();
  }
};

}  // namespace

absl::StatusOr<MemoryBudget> parse_memory_budget(std::string_view text) {
  absl::StatusOr<MemoryBudget> budget = parse_budget_value(text);
  if (!budget.ok()) return invalid(kBudgetWhat, text, budget.status());
  return budget;
}

absl::StatusOr<MemoryBudgetSpec> parse_memory_budget_spec(std::string_view text) {
  const std::string_view stripped = strip(text);
  if (stripped.find_first_of(",=") == std::string_view::npos) {
    absl::StatusOr<MemoryBudget> budget = parse_memory_budget(text);
    if (!budget.ok()) return budget.status();
    return MemoryBudgetSpec{.default_device = *budget};
  }
  BudgetListParser list;
  std::string_view rest = stripped;
  for (size_t number = 1;; ++number) {
    const size_t comma = rest.find(',');
    const absl::Status added = list.add(strip(rest.substr(0, comma)), number);
    if (!added.ok()) return invalid(kBudgetWhat, text, added);
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
  }
  return std::move(list.spec);
}

absl::StatusOr<int64_t> parse_byte_size(std::string_view text) {
  absl::StatusOr<Size> size = parse_size(text, /*allow_percent=*/false);
  if (!size.ok()) return invalid("byte size", text, size.status());
  return size->bytes;
}

absl::StatusOr<Heuristic> parse_heuristic(std::string_view text) {
  return parse_name(text, "heuristic", kHeuristics);
}

std::string_view heuristic_name(Heuristic h) {
  for (const auto& [name, value] : kHeuristics) {
    if (value == h) return name;
  }
  return "unknown";
}

absl::StatusOr<SampleMode> parse_sample_mode(std::string_view text) {
  return parse_name(text, "sample mode", kSampleModes);
}

std::string_view sample_mode_name(SampleMode m) {
  for (const auto& [name, value] : kSampleModes) {
    if (value == m) return name;
  }
  return "unknown";
}

absl::StatusOr<CostModel> parse_cost_model(std::string_view text) {
  return parse_name(text, "cost model", kCostModels);
}

std::string_view cost_model_name(CostModel m) {
  for (const auto& [name, value] : kCostModels) {
    if (value == m) return name;
  }
  return "unknown";
}

absl::StatusOr<SwapMode> parse_swap_mode(std::string_view text) {
  return parse_name(text, "swap mode", kSwapModes);
}

std::string_view swap_mode_name(SwapMode m) {
  for (const auto& [name, value] : kSwapModes) {
    if (value == m) return name;
  }
  return "unknown";
}

absl::StatusOr<std::string> parse_log_level(std::string_view text) {
  std::string lower = lower_stripped(text);
  if (std::find(kLogLevels.begin(), kLogLevels.end(), lower) == kLogLevels.end()) {
    return absl::InvalidArgumentError(fmt::format("unknown log level {}", quoted(text)));
  }
  return lower;
}

absl::StatusOr<bool> parse_bool(std::string_view text) {
  const std::string lower = lower_stripped(text);
  if (lower == "1" || lower == "true" || lower == "on") return true;
  if (lower == "0" || lower == "false" || lower == "off") return false;
  return absl::InvalidArgumentError(fmt::format("invalid boolean {}", quoted(text)));
}

absl::StatusOr<double> parse_thrash_limit(std::string_view text) {
  const std::string lower = lower_stripped(text);
  double v = 0;
  if (lower.empty() || !absl::SimpleAtod(lower, &v) || !std::isfinite(v)) {
    return absl::InvalidArgumentError(fmt::format("invalid thrash limit {}", quoted(text)));
  }
  if (v != 0 && !(v >= 1)) {
    return absl::InvalidArgumentError(
        fmt::format("invalid thrash limit {}: it must be 0 (off) or at least 1", quoted(text)));
  }
  return v;
}

absl::StatusOr<double> parse_seconds(std::string_view text) {
  const std::string lower = lower_stripped(text);
  struct Unit {
    std::string_view suffix;
    double seconds;
  };
  // Longest suffixes first: "ms" and "min" before "s".
  constexpr std::array<Unit, 5> kUnits = {{{"ms", 1e-3}, {"min", 60}, {"s", 1}, {"h", 3600}, {"", 1}}};
  for (const Unit& u : kUnits) {
    if (!absl::EndsWith(lower, to_absl(u.suffix))) continue;
    const std::string number(absl::StripAsciiWhitespace(
        to_absl(std::string_view(lower).substr(0, lower.size() - u.suffix.size()))));
    double v = 0;
    if (number.empty() || !absl::SimpleAtod(number, &v)) break;
    v *= u.seconds;
    if (!(v > 0) || !std::isfinite(v)) {
      return absl::InvalidArgumentError(
          fmt::format("invalid duration {}: it must be positive and finite", quoted(text)));
    }
    return v;
  }
  return absl::InvalidArgumentError(fmt::format("invalid duration {}", quoted(text)));
}

const std::vector<OptionInfo>& option_table() {
  static const std::vector<OptionInfo> table = [] {
    std::vector<OptionInfo> t;
    for (const OptionRow& row : option_rows()) t.push_back(row.info);
    return t;
  }();
  return table;
}

namespace {

/// global_options()'s object, once it is initialized (null before: its
/// initializer parses into a local Options through set_option).
std::atomic<Options*> g_process_options{nullptr};
std::atomic<ProcessOptionApplier> g_process_option_applier{nullptr};

/// Parses `value` into the option `env_var` of `options`.
void parse_option(Options& options, std::string_view env_var, std::string_view value) {
  const auto& rows = option_rows();
  const auto row = std::find_if(rows.begin(), rows.end(),
                                [&](const OptionRow& r) { return r.info.env_var == env_var; });
  if (row == rows.end()) {
    std::vector<std::string_view> names;
    for (const OptionRow& r : rows) names.push_back(r.info.env_var);
    throw ValueError(fmt::format("unknown option {}; known options: {}", quoted(env_var),
                                 fmt::join(names, ", ")));
  }
  const std::string_view stripped = strip(value);
  const absl::Status status =
      row->apply(options, stripped.empty() ? row->info.default_value : stripped);
  if (!status.ok()) {
    throw ValueError(fmt::format("{}: {}; accepted forms: {}", env_var, status.message(),
                                 row->accepted));
  }
}

}  // namespace

void set_process_option_applier(ProcessOptionApplier applier) { g_process_option_applier.store(applier); }

void set_option(Options& options, std::string_view env_var, std::string_view value) {
  if (&options != g_process_options.load()) {
    parse_option(options, env_var, value);
    return;
  }
  static std::mutex mu;
  std::lock_guard lock(mu);
  Options next = options;
  parse_option(next, env_var, value);  // ValueError: nothing changed
  if (const ProcessOptionApplier apply = g_process_option_applier.load()) apply(env_var, next);
  options = std::move(next);
}

Options options_from_env() {
  Options options;
  for (const OptionRow& row : option_rows()) {
    const char* value = std::getenv(std::string(row.info.env_var).c_str());
    if (value != nullptr) set_option(options, row.info.env_var, value);
  }
  return options;
}

namespace {

/// Malformed values found by global_options(), waiting for check_environment().
struct EnvironmentReport {
  std::mutex mu;
  std::vector<std::string> errors;
  std::atomic<bool> checked{false};
};
EnvironmentReport& environment_report() {
  static EnvironmentReport report;
  return report;
}

/// Variables with the DTR_ prefix that the project's own test programs read
/// (tests/): not options, but not misspellings either.
constexpr std::array<std::string_view, 4> kToolVariables = {"DTR_EXAMPLES_DIR", "DTR_GOLDEN_FILE", "DTR_TEST_DEVICE_KERNELS",
                                                            "DTR_DIFF_PROGRAMS"};

/// Levenshtein distance (insertions, deletions, substitutions).
size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

/// Logs one warning per DTR_* variable of the environment that is not an option.
void warn_about_unknown_variables() {
  const auto& rows = option_rows();
  std::vector<std::string_view> names;
  for (const OptionRow& r : rows) names.push_back(r.info.env_var);
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    const std::string_view assignment = *entry;
    const std::string_view name = assignment.substr(0, assignment.find('='));
    if (!absl::StartsWith(to_absl(name), "DTR_")) continue;
    if (std::find(names.begin(), names.end(), name) != names.end()) continue;
    if (std::find(kToolVariables.begin(), kToolVariables.end(), name) != kToolVariables.end()) {
      continue;
    }
    logger().warn("environment variable {} is not a dtr option and is ignored; did you mean {}? "
                  "(options: {})",
                  name, closest_option(name), fmt::join(names, ", "));
  }
}

}  // namespace

std::string_view closest_option(std::string_view name) {
  // A name that contains an option's tail or is contained in it
  // (DTR_BUDGET, DTR_TRACE_FILE) is taken for that option before any
  // other; otherwise the smallest edit distance wins.
  const auto tail = [](std::string_view n) {
    return absl::StartsWithIgnoreCase(to_absl(n), "DTR_") ? n.substr(4) : n;
  };
  const std::string wanted = absl::AsciiStrToUpper(to_absl(tail(name)));
  std::string_view best;
  std::pair<bool, size_t> best_key;
  for (const OptionRow& row : option_rows()) {
    const std::string_view option = tail(row.info.env_var);
    const bool related = !wanted.empty() && (absl::StrContains(to_absl(option), wanted) ||
                                             absl::StrContains(wanted, to_absl(option)));
    const std::pair<bool, size_t> key{!related, edit_distance(wanted, option)};
    if (best.empty() || key < best_key) {
      best = row.info.env_var;
      best_key = key;
    }
  }
  return best;
}

Options& global_options() {
  // Note [environment at start-up]: each variable is parsed on its own; a
  // malformed one keeps its default and queues its error, so this
  // initializer never throws and never has to be retried.
  static Options options = [] {
    Options o;
    std::vector<std::string> errors;
    for (const OptionRow& row : option_rows()) {
      const char* value = std::getenv(std::string(row.info.env_var).c_str());
      if (value == nullptr) continue;
      try {
        set_option(o, row.info.env_var, value);
      } catch (const ValueError& e) {
        // A setter written as a whole call (ending in ')') takes no "()".
        const std::string_view setter = row.info.setter;
        const bool call = !setter.empty() && setter.back() == ')';
        errors.push_back(fmt::format("{} (until {}{} is called, {} is \"{}\", its default)", e.what(),
                                     setter, call ? "" : "()", row.info.env_var, row.info.default_value));
      }
    }
    EnvironmentReport& report = environment_report();
    std::lock_guard lock(report.mu);
    report.errors = std::move(errors);
    return o;
  }();
  static const bool published = [] {
    g_process_options.store(&options);
    return true;
  }();
  (void)published;
  return options;
}

void check_environment() {
  EnvironmentReport& report = environment_report();
  if (report.checked.load(std::memory_order_acquire)) return;
  global_options();  // parses the environment (once)
  std::vector<std::string> errors;
  {
    std::lock_guard lock(report.mu);
    if (report.checked.load(std::memory_order_relaxed)) return;
    // Marked first: a throw below (from the logger or the report) must not
    // make a later call report again.
    report.checked.store(true, std::memory_order_release);
    errors.swap(report.errors);
    warn_about_unknown_variables();
  }
  if (errors.empty()) return;
  throw ValueError(fmt::format(
      "malformed DTR_* environment {}:\n  {}\nThis error is thrown once; the program may catch "
      "it and go on with the defaults named, or call the setters.",
      errors.size() == 1 ? "variable" : "variables", fmt::join(errors, "\n  ")));
}

}  // namespace dtr
