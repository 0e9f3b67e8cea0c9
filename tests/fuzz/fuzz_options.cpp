// libFuzzer target over the option strings: every parser of core/options.h,
// Device("..."), parse_dtype and set_option, on one fuzz input each.
//
// Input: byte 0 picks the option variable for set_option (one of the table's
// rows, or the rest of the input as an unknown name when past them); the
// rest is the text every parser reads.
//
// Properties: a parser returns a value or an InvalidArgument status with a
// message (the StatusOr parsers never throw); the throwing ones throw a
// dtr::Error subclass and nothing else; a parsed value formats back to text
// that parses to the same value; a budget that parses resolves to a positive
// byte count (or none) for any device size. A broken property aborts, which
// libFuzzer reports as a crash with the input that broke it.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "core/device.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/options.h"

namespace {

using namespace dtr;

[[noreturn]] void fail(std::string_view what, std::string_view text) {
  std::fprintf(stderr, "fuzz_options: %.*s (input \"%.*s\")\n", int(what.size()), what.data(),
               int(text.size()), text.data());
  std::abort();
}

void check(bool ok, std::string_view what, std::string_view text) {
  if (!ok) fail(what, text);
}

/// A StatusOr parser's result: a value, or InvalidArgument with a message.
template <typename T>
bool parsed(const absl::StatusOr<T>& r, std::string_view what, std::string_view text) {
  if (r.ok()) return true;
  check(absl::IsInvalidArgument(r.status()), what, text);
  check(!r.status().message().empty(), what, text);
  return false;
}

/// Runs `f`; a dtr::Error is an accepted outcome, any other exception a failure.
template <typename F>
void throws_only_dtr_errors(F&& f, std::string_view what, std::string_view text) {
  try {
    f();
  } catch (const Error& e) {
    check(*e.what() != '\0', what, text);
  } catch (const std::exception& e) {
    fail(fmt::format("{}: non-dtr exception {}", what, e.what()), text);
  } catch (...) {
    fail(fmt::format("{}: non-std exception", what), text);
  }
}

/// The budget as text parse_memory_budget reads back to the same value
/// (fractions as a percentage with round-trip precision).
std::string format_budget(const MemoryBudget& b) {
  switch (b.kind) {
    case MemoryBudget::Kind::kUnlimited: return "none";
    case MemoryBudget::Kind::kBytes: return std::to_string(b.bytes);
    case MemoryBudget::Kind::kFraction: return "";  // not exactly representable as a percent
  }
  return "";
}

void check_budget(const MemoryBudget& b, std::string_view text) {
  if (b.kind == MemoryBudget::Kind::kBytes) check(b.bytes > 0, "budget: non-positive bytes", text);
  if (b.kind == MemoryBudget::Kind::kFraction) {
    check(b.fraction > 0.0 && b.fraction <= 1.0, "budget: fraction outside (0, 1]", text);
  }
  // A budget is positive for any device: set_memory_budget rejects 0 bytes,
  // and a resolved 0 would be a budget no caller could set.
  for (const int64_t device_bytes : {int64_t{0}, int64_t{1}, int64_t{1} << 30, int64_t{1} << 40,
                                     std::numeric_limits<int64_t>::max()}) {
    const std::optional<int64_t> r = b.resolve(device_bytes);
    check(r.has_value() == (b.kind != MemoryBudget::Kind::kUnlimited),
          "budget: resolve() has a value iff limited", text);
    if (r) check(*r > 0, "budget: resolves to a non-positive byte count", text);
  }
  const std::string again = format_budget(b);
  if (!again.empty()) {
    const absl::StatusOr<MemoryBudget> back = parse_memory_budget(again);
    check(back.ok() && *back == b, "budget: format then parse changed it", text);
  }
}

void fuzz_budget_spec(std::string_view text) {
  const absl::StatusOr<MemoryBudget> one = parse_memory_budget(text);
  if (parsed(one, "parse_memory_budget", text)) check_budget(*one, text);

  const absl::StatusOr<MemoryBudgetSpec> spec = parse_memory_budget_spec(text);
  if (!parsed(spec, "parse_memory_budget_spec", text)) return;
  check_budget(spec->default_device, text);
  // The spec written back as entries parses to the same spec (when no entry
  // is a fraction, which has no exact text).
  std::string again;
  bool exact = spec->default_device.kind != MemoryBudget::Kind::kFraction;
  if (spec->default_device.kind != MemoryBudget::Kind::kUnlimited || spec->per_device.empty()) {
    again = format_budget(spec->default_device);
  }
  for (const auto& [device, budget] : spec->per_device) {
    check_budget(budget, text);
    exact = exact && budget.kind != MemoryBudget::Kind::kFraction;
    if (!again.empty()) again += ",";
    again += device.str() + "=" + format_budget(budget);
  }
  if (exact) {
    const absl::StatusOr<MemoryBudgetSpec> back = parse_memory_budget_spec(again);
    if (!back.ok()) fail(fmt::format("spec: \"{}\" does not parse back: {}", again,
                                     std::string(back.status().message())), text);
    check(*back == *spec, "spec: format then parse changed it", text);
  }
}

template <typename Enum, typename Parse, typename Name>
void fuzz_enum(std::string_view text, Parse parse, Name name, std::string_view what) {
  const absl::StatusOr<Enum> r = parse(text);
  if (!parsed(r, what, text)) return;
  const absl::StatusOr<Enum> back = parse(name(*r));
  check(back.ok() && *back == *r, what, text);
}

void fuzz_all(uint8_t selector, std::string_view text) {
  fuzz_budget_spec(text);

  const absl::StatusOr<int64_t> bytes = parse_byte_size(text);
  if (parsed(bytes, "parse_byte_size", text)) {
    check(*bytes >= 0, "parse_byte_size: negative", text);
    const absl::StatusOr<int64_t> back = parse_byte_size(std::to_string(*bytes));
    check(back.ok() && *back == *bytes, "parse_byte_size: round trip", text);
  }

  fuzz_enum<Heuristic>(text, parse_heuristic, heuristic_name, "parse_heuristic");
  fuzz_enum<SampleMode>(text, parse_sample_mode, sample_mode_name, "parse_sample_mode");
  fuzz_enum<CostModel>(text, parse_cost_model, cost_model_name, "parse_cost_model");

  const absl::StatusOr<std::string> level = parse_log_level(text);
  if (parsed(level, "parse_log_level", text)) {
    const absl::StatusOr<std::string> back = parse_log_level(*level);
    check(back.ok() && *back == *level, "parse_log_level: round trip", text);
  }
  const absl::StatusOr<bool> flag = parse_bool(text);
  if (parsed(flag, "parse_bool", text)) {
    const absl::StatusOr<bool> back = parse_bool(*flag ? "true" : "false");
    check(back.ok() && *back == *flag, "parse_bool: round trip", text);
  }

  throws_only_dtr_errors([&] {
    const Device d(text);
    check(Device(d.str()) == d, "Device: str() does not parse back to the device", text);
  }, "Device", text);
  throws_only_dtr_errors([&] {
    const DType t = parse_dtype(text);
    check(parse_dtype(dtype_name(t)) == t, "parse_dtype: round trip", text);
  }, "parse_dtype", text);

  const auto& table = option_table();
  const std::string_view var =
      selector < table.size() ? table[selector].env_var : text;
  throws_only_dtr_errors([&] {
    Options o;
    set_option(o, var, text);
  }, "set_option", text);
  const std::string_view closest = closest_option(text);
  bool known = false;
  for (const OptionInfo& row : table) known = known || row.env_var == closest;
  check(known, "closest_option: not an option name", text);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  fuzz_all(data[0], std::string_view(reinterpret_cast<const char*>(data) + 1, size - 1));
  return 0;
}
