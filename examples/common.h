// What the example programs share: a small command-line flag parser, the
// error types and exit codes of a training program, the memory figures of
// each log line and the per-step summary (DTR_LOG=info), a progress bar for
// terminals, the --budget-fraction measurement, the budget planner's flags
// (--plan, --budget-fraction auto) and the closing summary line.
//
// Exit codes of every example:
//   0  success
//   1  bad or missing input data, or another error (message on stderr)
//   2  a bad command line (message and a pointer to --help on stderr)
//   3  the memory budget is below what the model needs (dtr::OutOfMemoryError)
#pragma once

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <new>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <dtr/dtr.h>

namespace examples {

enum ExitCode : int { kExitOk = 0, kExitError = 1, kExitUsage = 2, kExitOutOfMemory = 3 };

/// A bad command line; reported with a pointer to --help, exit code 2.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Missing, unreadable or malformed input data; exit code 1.
struct DataError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// printf into a std::string.
inline std::string strprintf(const char* format, ...) __attribute__((format(printf, 1, 2)));
inline std::string strprintf(const char* format, ...) {
  va_list args;
  va_start(args, format);
  va_list copy;
  va_copy(copy, args);
  const int n = std::vsnprintf(nullptr, 0, format, copy);
  va_end(copy);
  std::string out(n > 0 ? size_t(n) : 0, '\0');
  if (n > 0) std::vsnprintf(out.data(), out.size() + 1, format, args);
  va_end(args);
  return out;
}

// ---- flags -----------------------------------------------------------------------

/// --budget-fraction: a fraction of the unbudgeted peak, or "auto" (the
/// planner picks the budget), or unset.
struct BudgetFlag {
  std::optional<double> fraction;
  bool automatic = false;
  bool given() const { return fraction.has_value() || automatic; }
};

/// Flags of the form `--name value` or `--name=value`; `--help` prints the
/// usage. Every flag has a default (shown in --help) held in the variable it
/// writes to. Unknown flags, missing values and malformed numbers throw
/// UsageError naming the flag and the value.
class FlagParser {
 public:
  FlagParser(std::string program, std::string description)
      : program_(std::move(program)), description_(std::move(description)) {}

  void add(std::string name, int64_t* target, std::string help) {
    flags_.push_back({std::move(name), std::move(help), target, std::to_string(*target)});
  }
  void add(std::string name, double* target, std::string help) {
    flags_.push_back({std::move(name), std::move(help), target, strprintf("%g", *target)});
  }
  void add(std::string name, std::string* target, std::string help) {
    flags_.push_back({std::move(name), std::move(help), target, *target});
  }
  /// An optional number: unset unless given (its default is described in `help`).
  void add(std::string name, std::optional<double>* target, std::string help) {
    flags_.push_back({std::move(name), std::move(help), target,
                      *target ? strprintf("%g", **target) : std::string("unset")});
  }

  /// A switch: `--name` takes no value and sets `*target` to true.
  void add(std::string name, bool* target, std::string help) {
    flags_.push_back({std::move(name), std::move(help), target, *target ? "on" : "off"});
  }
  /// A number in (0, 1] or "auto" (the syntax only; the caller checks the range).
  void add(std::string name, BudgetFlag* target, std::string help) {
    flags_.push_back({std::move(name), std::move(help), target, "unset"});
  }

  /// Parses argv into the registered variables. Returns false when --help was
  /// given (the usage has been printed to stdout and the program should exit 0).
  bool parse(int argc, char** argv) {
    for (int i = 1; i < argc; ++i) {
      std::string_view arg = argv[i];
      if (arg == "--help" || arg == "-h") {
        std::fputs(help().c_str(), stdout);
        return false;
      }
      if (arg.size() < 3 || arg.substr(0, 2) != "--") {
        throw UsageError(strprintf("unexpected argument '%s' (flags look like --steps 100)",
                                   std::string(arg).c_str()));
      }
      std::string name(arg.substr(2));
      std::optional<std::string> value;
      if (const size_t eq = name.find('='); eq != std::string::npos) {
        value = name.substr(eq + 1);
        name.resize(eq);
      }
      Flag* flag = find(name);
      if (flag == nullptr) throw UsageError(strprintf("unknown flag --%s", name.c_str()));
      if (auto* on = std::get_if<bool*>(&flag->target)) {
        if (value) throw UsageError(strprintf("flag --%s takes no value", name.c_str()));
        **on = true;
        continue;
      }
      if (!value) {
        if (i + 1 >= argc) throw UsageError(strprintf("flag --%s needs a value", name.c_str()));
        value = argv[++i];
      }
      set(*flag, *value);
    }
    return true;
  }

  std::string help() const {
    std::string out = description_ + "\n\nusage: " + program_ + " [flags]\n\nflags:\n";
    for (const Flag& f : flags_) {
      std::string left = "  --" + f.name + " " + placeholder(f);
      if (left.size() < 28) left.resize(28, ' ');
      else left += "\n" + std::string(28, ' ');
      out += left + f.help + " (default: " + (f.default_text.empty() ? "none" : f.default_text) + ")\n";
    }
    out += "  --help                    print this help\n"
           "\nenvironment: DTR_MEMORY_BUDGET (e.g. 64MiB) caps memory like --budget-fraction;\n"
           "the other DTR_* variables of the library apply as well.\n"
           "\nexit codes: 0 success, 1 bad input data or another error, 2 bad flags,\n"
           "3 the memory budget is below what the model needs.\n";
    return out;
  }

 private:
  using Target = std::variant<int64_t*, double*, std::string*, std::optional<double>*, bool*,
                              BudgetFlag*>;
  struct Flag {
    std::string name, help;
    Target target;
    std::string default_text;
  };

  Flag* find(const std::string& name) {
    for (Flag& f : flags_)
      if (f.name == name) return &f;
    return nullptr;
  }

  static const char* placeholder(const Flag& f) {
    if (std::holds_alternative<int64_t*>(f.target)) return "N";
    if (std::holds_alternative<std::string*>(f.target)) return "S";
    if (std::holds_alternative<bool*>(f.target)) return "";
    if (std::holds_alternative<BudgetFlag*>(f.target)) return "X|auto";
    return "X";
  }

  static double parse_double(const std::string& name, const std::string& value) {
    double v = 0;
    const char* end = value.data() + value.size();
    const auto [ptr, ec] = std::from_chars(value.data(), end, v);
    if (value.empty() || ec != std::errc() || ptr != end || !std::isfinite(v)) {
      throw UsageError(strprintf("flag --%s expects a number, got '%s'", name.c_str(),
                                 value.c_str()));
    }
    return v;
  }

  static void set(Flag& f, const std::string& value) {
    if (auto* p = std::get_if<int64_t*>(&f.target)) {
      int64_t v = 0;
      const char* end = value.data() + value.size();
      const auto [ptr, ec] = std::from_chars(value.data(), end, v);
      if (value.empty() || ec != std::errc() || ptr != end) {
        throw UsageError(strprintf("flag --%s expects an integer, got '%s'", f.name.c_str(),
                                   value.c_str()));
      }
      **p = v;
    } else if (auto* p = std::get_if<double*>(&f.target)) {
      **p = parse_double(f.name, value);
    } else if (auto* p = std::get_if<std::optional<double>*>(&f.target)) {
      **p = parse_double(f.name, value);
    } else if (auto* p = std::get_if<BudgetFlag*>(&f.target)) {
      if (value == "auto") {
        **p = BudgetFlag{.fraction = std::nullopt, .automatic = true};
      } else {
        **p = BudgetFlag{.fraction = parse_double(f.name, value), .automatic = false};
      }
    } else {
      *std::get<std::string*>(f.target) = value;
    }
  }

  std::string program_, description_;
  std::vector<Flag> flags_;
};

/// Throws UsageError("--name must be ...") unless `ok`.
inline void require(bool ok, const std::string& message) {
  if (!ok) throw UsageError(message);
}

/// Throws DataError unless the directory of `path` exists and is writable,
/// so a bad output path fails before training rather than after it.
inline void check_writable(const std::string& path, const std::string& flag) {
  const size_t slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  if (access(dir.c_str(), W_OK) != 0) {
    throw DataError(flag + " " + path + ": directory " + dir + " does not exist or is not writable");
  }
}

/// --device: "cpu" runs; "cuda" is a known device this build has no backend
/// for (NotImplementedError); anything else is a usage error.
/// The device of --device: "cpu", "cuda" or "cuda:N". UsageError for any
/// other text; DeviceError (from the library) for a CUDA device this
/// process does not have, or a build without the CUDA backend.
inline dtr::Device check_device(const std::string& device) {
  if (device != "cpu" && device != "cuda" && device.rfind("cuda:", 0) != 0)
    throw UsageError("--device must be cpu, cuda or cuda:N, got '" + device + "'");
  dtr::Device d;
  try {
    d = dtr::Device(device);
  } catch (const dtr::ValueError& e) {
    throw UsageError(std::string("--device: ") + e.what());
  }
  dtr::check_device(d);
  return d;
}

// ---- memory figures ---------------------------------------------------------------

inline double to_mib(int64_t bytes) { return double(bytes) / (1024.0 * 1024.0); }
inline std::string mib(int64_t bytes) { return strprintf("%.1f MiB", to_mib(bytes)); }
inline std::string budget_text(std::optional<int64_t> budget) {
  return budget ? mib(*budget) : std::string("none");
}

using Clock = std::chrono::steady_clock;
inline double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

/// The memory columns of a log line: resident and peak bytes, the budget,
/// and evictions, rematerializations and the recompute share of step time
/// over the interval that began at `since` and took `step_seconds` of
/// training steps.
inline std::string memory_columns(const dtr::remat::Stats& now, const dtr::remat::Stats& since,
                                  double step_seconds) {
  const double recompute = now.recompute_seconds_measured - since.recompute_seconds_measured;
  const double share = step_seconds > 0 ? 100.0 * recompute / step_seconds : 0.0;
  return strprintf("resident %s | peak %s | budget %s | evictions %lld | remats %lld | "
                   "recompute %.0f%%",
                   mib(now.resident_bytes).c_str(), mib(now.peak_bytes).c_str(),
                   now.budget_bytes >= 0 ? mib(now.budget_bytes).c_str() : "none",
                   static_cast<long long>(now.evictions - since.evictions),
                   static_cast<long long>(now.rematerializations - since.rematerializations),
                   share);
}

/// The runtime's counters of one device (the model's) step by step:
/// reset_stats() before each step, so that a step's peak is its own, with
/// the run's totals summed here.
class StepStats {
 public:
  /// Restarts the runtime's counters; the run's totals start from zero.
  explicit StepStats(dtr::Device device) : device_(device) { dtr::remat::reset_stats(); }

  /// Call before each step: what ran since the last call joins the totals.
  void begin_step() {
    totals_ = add(totals_, dtr::remat::stats(device_));
    dtr::remat::reset_stats();
  }
  /// The counters of the step begun last: its own peak, evictions, ...
  dtr::remat::Stats step() const { return dtr::remat::stats(device_); }
  /// The run so far, as the runtime would count it without the resets.
  dtr::remat::Stats total() const { return add(totals_, dtr::remat::stats(device_)); }

 private:
  static dtr::remat::Stats add(dtr::remat::Stats sum, const dtr::remat::Stats& s) {
    sum.peak_bytes = std::max(sum.peak_bytes, s.peak_bytes);
    sum.evictions += s.evictions;
    sum.eager_frees += s.eager_frees;
    sum.rematerializations += s.rematerializations;
    sum.recomputed_ops += s.recomputed_ops;
    sum.recomputed_flops += s.recomputed_flops;
    sum.recompute_seconds_estimated += s.recompute_seconds_estimated;
    sum.recompute_seconds_measured += s.recompute_seconds_measured;
    // Levels, not counts: the latest.
    sum.budget_bytes = s.budget_bytes;
    sum.resident_bytes = s.resident_bytes;
    sum.metadata_nodes = s.metadata_nodes;
    sum.live_storages = s.live_storages;
    return sum;
  }
  dtr::Device device_;
  dtr::remat::Stats totals_{};
};

/// The summary of one training step on the library's logger at info level
/// (DTR_LOG=info; stderr): its own peak and what the budget cost it.
inline void log_step(int64_t step, double seconds, const dtr::remat::Stats& s) {
  spdlog::logger& log = dtr::logger();
  if (!log.should_log(spdlog::level::info)) return;
  log.info("step {}: peak_bytes {} evictions {} rematerializations {} recompute_seconds {:.3f} "
           "step_seconds {:.3f}",
           step, s.peak_bytes, s.evictions, s.rematerializations, s.recompute_seconds_measured,
           seconds);
}

// ---- the budget ---------------------------------------------------------------------

/// Builds a fresh model and optimizer from the seed and returns one
/// training step of it; each call of the step runs the next step.
using StepMaker = std::function<std::function<void()>()>;

/// Where the run's budget came from.
struct BudgetPlan {
  std::optional<int64_t> budget;   // the cap in force during training (nullopt: none)
  int64_t unbudgeted_peak = -1;    // peak of a step with no budget (-1: not measured)
  std::optional<double> fraction;  // budget / unbudgeted_peak, when --budget-fraction was given
  bool planned = false;            // --budget-fraction auto: the planner chose the budget
  double max_slowdown = 0;         // with `planned`: --max-slowdown
  double predicted_slowdown = 0;   // with `planned` and a budget: the planner's prediction
};

/// The predicted slowdown of `budget` in `report` (the first heuristic's
/// grid points and smallest feasible budget), or 0 when no feasible point has it.
inline double predicted_slowdown(const dtr::remat::PlanReport& report, int64_t budget) {
  double best = 0;
  auto consider = [&](const dtr::remat::PlanPoint& p, dtr::Heuristic first) {
    if (p.heuristic != first || !p.feasible() || p.budget_bytes != budget) return;
    if (best == 0 || p.predicted_slowdown < best) best = p.predicted_slowdown;
  };
  const dtr::Heuristic first = !report.points.empty()               ? report.points.front().heuristic
                               : !report.smallest_feasible.empty() ? report.smallest_feasible.front().heuristic
                                                                   : dtr::Heuristic::kDtrEq;
  for (const auto& p : report.points) consider(p, first);
  for (const auto& p : report.smallest_feasible) consider(p, first);
  return best;
}

/// Decides the budget of a run. With --budget-fraction F, one fresh model
/// from `make_step` runs two training steps with no budget (the first
/// creates the optimizer state, the second is a steady-state step), its peak
/// is read from the runtime's stats, and the budget becomes F times that
/// peak. With --budget-fraction auto, the planner (dtr::remat::plan: two
/// warm-up steps, one recorded step, the default heuristic) predicts every
/// budget of a fresh model from `make_step`, and the budget becomes the
/// smallest whose predicted slowdown is at most `max_slowdown`
/// (dtr::remat::choose_budget), or none when no budget is. Either way the
/// caller then rebuilds its model from the same seed, so these steps leave
/// no trace in the run. Without the flag, the budget is whatever
/// DTR_MEMORY_BUDGET set (possibly none). Peaks are read, and the budget is
/// set, on `device`: the one the model trains on (--device).
inline BudgetPlan plan_budget(const BudgetFlag& flag, double max_slowdown, const StepMaker& make_step,
                              dtr::Device device) {
  BudgetPlan plan;
  if (!flag.given()) {
    plan.budget = dtr::remat::memory_budget(device);
    return plan;
  }
  dtr::remat::set_memory_budget(device, std::nullopt);
  if (flag.automatic) {
    plan.planned = true;
    plan.max_slowdown = max_slowdown;
    dtr::remat::PlanOptions options;
    options.device = device;
    const dtr::remat::PlanReport report = dtr::remat::plan(make_step(), options);
    plan.unbudgeted_peak = report.peak_bytes;
    plan.budget = dtr::remat::choose_budget(report, max_slowdown);
    if (plan.budget) {
      plan.fraction = double(*plan.budget) / double(std::max<int64_t>(1, report.peak_bytes));
      plan.predicted_slowdown = predicted_slowdown(report, *plan.budget);
    }
  } else {
    dtr::remat::reset_stats();
    {
      const std::function<void()> step = make_step();
      step();
      step();
    }
    plan.unbudgeted_peak = dtr::remat::stats(device).peak_bytes;
    plan.fraction = flag.fraction;
    plan.budget =
        std::max<int64_t>(1, int64_t(std::llround(*flag.fraction * double(plan.unbudgeted_peak))));
  }
  dtr::remat::set_memory_budget(device, plan.budget);
  return plan;
}

/// One line describing the budget before training starts.
inline std::string budget_line(const BudgetPlan& plan) {
  if (plan.planned && plan.budget) {
    return strprintf(
        "memory: planned budget %s = %.3f x the unbudgeted peak of %s, predicted slowdown "
        "%.3f (the smallest budget predicted within --max-slowdown %g)",
        mib(*plan.budget).c_str(), *plan.fraction, mib(plan.unbudgeted_peak).c_str(),
        plan.predicted_slowdown, plan.max_slowdown);
  }
  if (plan.planned) {
    return strprintf(
        "memory: no planned budget is predicted within --max-slowdown %g (one training step "
        "needs %s with no budget); training with no budget",
        plan.max_slowdown, mib(plan.unbudgeted_peak).c_str());
  }
  if (plan.fraction) {
    return strprintf("memory: one training step needs %s with no budget; budget %.2f x that = %s",
                     mib(plan.unbudgeted_peak).c_str(), *plan.fraction,
                     mib(*plan.budget).c_str());
  }
  if (plan.budget) return "memory: budget " + mib(*plan.budget) + " (from DTR_MEMORY_BUDGET)";
  return "memory: no budget (--budget-fraction 0.5 sets one at half the peak; DTR_MEMORY_BUDGET=SIZE caps it in bytes)";
}

// ---- the planner's flags ---------------------------------------------------------------

/// --plan, --plan-svg, --plan-heuristics and --max-slowdown.
struct PlanFlags {
  bool plan = false;           // print the plan of one training step and exit
  std::string svg;             // write the plan's SVG here (with --plan)
  std::string heuristics;      // heuristics --plan simulates (empty: all six)
  double max_slowdown = dtr::remat::kDefaultMaxSlowdown;  // the slowdown --budget-fraction auto allows
};

/// --budget-fraction and the planner's flags.
inline void add_budget_flags(FlagParser& flags, BudgetFlag* budget, PlanFlags* p) {
  flags.add("budget-fraction", budget,
            "train under this fraction of the measured peak of an unbudgeted step (e.g. 0.5; "
            "overrides DTR_MEMORY_BUDGET), or 'auto': the smallest budget the planner predicts "
            "within --max-slowdown");
  flags.add("plan", &p->plan,
            "predict every budget's cost from one recorded training step, print the table and exit");
  flags.add("plan-svg", &p->svg, "with --plan: also write the plan as an SVG to this file");
  flags.add("plan-heuristics", &p->heuristics,
            "with --plan: comma list of heuristics to simulate (empty: dtr_eq,dtr,dtr_local,lru,size,msps)");
  flags.add("max-slowdown", &p->max_slowdown,
            "--budget-fraction auto picks the smallest budget predicted to slow a step by at most this factor");
}

/// The heuristics --plan simulates. Throws UsageError naming a bad one.
inline std::vector<dtr::Heuristic> plan_heuristics(const PlanFlags& p) {
  if (p.heuristics.empty()) {
    return {dtr::Heuristic::kDtrEq, dtr::Heuristic::kDtr,  dtr::Heuristic::kDtrLocal,
            dtr::Heuristic::kLru,   dtr::Heuristic::kSize, dtr::Heuristic::kMsps};
  }
  std::vector<dtr::Heuristic> out;
  size_t begin = 0;
  while (begin <= p.heuristics.size()) {
    size_t end = p.heuristics.find(',', begin);
    if (end == std::string::npos) end = p.heuristics.size();
    const std::string name = p.heuristics.substr(begin, end - begin);
    const auto h = dtr::parse_heuristic(name);
    if (!h.ok()) {
      throw UsageError("--plan-heuristics: " + std::string(h.status().message()));
    }
    out.push_back(*h);
    begin = end + 1;
  }
  return out;
}

/// Throws UsageError unless --budget-fraction is unset, "auto" or in (0, 1],
/// for --max-slowdown below 1, a bad --plan-heuristics list, or --plan-svg /
/// --plan-heuristics without --plan.
inline void check_budget_flags(const BudgetFlag& budget, const PlanFlags& p) {
  require(!budget.fraction || (*budget.fraction > 0 && *budget.fraction <= 1),
          "--budget-fraction must be in (0, 1] or auto");
  require(p.max_slowdown >= 1,
          strprintf("--max-slowdown must be at least 1 (1 is the unbudgeted step's time), got %g",
                    p.max_slowdown));
  require(p.plan || (p.svg.empty() && p.heuristics.empty()),
          "--plan-svg and --plan-heuristics need --plan");
  plan_heuristics(p);
}

/// --plan: plans one training step of a fresh model from `make_step` (after
/// two warm-up steps; nothing trains), prints the table to stdout and writes
/// the SVG when --plan-svg was given (its threshold and pick: --max-slowdown's). The model is built with no budget (one
/// below what building it needs would fail before the planner lifts it); the
/// budget in force (DTR_MEMORY_BUDGET) is planned as one more row.
inline int run_plan(const PlanFlags& p, const StepMaker& make_step, dtr::Device device) {
  if (!p.svg.empty()) check_writable(p.svg, "--plan-svg");
  dtr::remat::PlanOptions options;
  options.heuristics = plan_heuristics(p);
  options.device = device;
  const std::optional<int64_t> in_force = dtr::remat::memory_budget(device);
  if (in_force) options.budget_bytes.push_back(*in_force);
  dtr::remat::set_memory_budget(device, std::nullopt);
  const dtr::remat::PlanReport report = dtr::remat::plan(make_step(), options);
  dtr::remat::set_memory_budget(device, in_force);
  std::fputs(dtr::remat::format_plan(report).c_str(), stdout);
  if (!p.svg.empty()) {
    dtr::remat::write_plan_svg(report, p.svg, p.max_slowdown);
    std::printf("plan: wrote %s\n", p.svg.c_str());
  }
  std::fflush(stdout);
  return kExitOk;
}

/// The exact figures, for scripts and tests: bytes and counts of the run.
inline std::string stats_line(const dtr::remat::Stats& s, const BudgetPlan& plan,
                              double train_seconds) {
  return strprintf(
      "stats: peak_bytes %lld budget_bytes %lld unbudgeted_peak_bytes %lld evictions %lld "
      "rematerializations %lld recompute_seconds %.3f train_seconds %.3f",
      static_cast<long long>(s.peak_bytes), static_cast<long long>(plan.budget.value_or(-1)),
      static_cast<long long>(plan.unbudgeted_peak), static_cast<long long>(s.evictions),
      static_cast<long long>(s.rematerializations), s.recompute_seconds_measured, train_seconds);
}

/// The closing line a person reads: what the run cost in memory and time.
inline std::string summary_line(const dtr::remat::Stats& s, const BudgetPlan& plan,
                                double train_seconds) {
  const double recompute = s.recompute_seconds_measured;
  const double base = train_seconds - recompute;
  const double extra = base > 0 ? 100.0 * recompute / base : 0.0;
  if (plan.budget && plan.unbudgeted_peak >= 0) {
    return strprintf(
        "peak %s under a budget of %s; the same run needs %s without one, at %.0f%% more "
        "compute time (%lld evictions, %lld rematerializations)",
        mib(s.peak_bytes).c_str(), mib(*plan.budget).c_str(), mib(plan.unbudgeted_peak).c_str(),
        extra, static_cast<long long>(s.evictions),
        static_cast<long long>(s.rematerializations));
  }
  if (plan.budget) {
    return strprintf(
        "peak %s under a budget of %s (DTR_MEMORY_BUDGET), at %.0f%% more compute time for "
        "rematerialization (%lld evictions, %lld rematerializations)",
        mib(s.peak_bytes).c_str(), mib(*plan.budget).c_str(), extra,
        static_cast<long long>(s.evictions), static_cast<long long>(s.rematerializations));
  }
  return strprintf("peak %s with no budget; run with --budget-fraction 0.5 to train in half of it",
                   mib(s.peak_bytes).c_str());
}

// ---- output ----------------------------------------------------------------------------

/// Log lines on stdout, with a progress bar under them when stdout is a
/// terminal. When it is not (a pipe, a file, a test), only the log lines.
class Progress {
 public:
  /// `bar` false: never a bar (under mpirun, whose ranks write to a
  /// pseudo-terminal whatever mpirun's own output is).
  Progress(int64_t first, int64_t total, bool bar = true)
      : first_(first), total_(total), tty_(bar && isatty(1) != 0) {}

  bool tty() const { return tty_; }

  /// Prints one log line (a newline is added), above the bar.
  void line(const std::string& text) {
    clear();
    std::fputs(text.c_str(), stdout);
    std::fputc('\n', stdout);
    redraw();
    std::fflush(stdout);
  }

  /// Moves the bar to `done` of `total` steps with a short status text.
  void update(int64_t done, const std::string& status) {
    if (!tty_) return;
    done_ = done;
    status_ = status;
    if (start_ == Clock::time_point{}) start_ = Clock::now();
    redraw();
    std::fflush(stdout);
  }

  /// Removes the bar (before the closing lines and before errors).
  void finish() {
    clear();
    std::fflush(stdout);
    tty_ = false;
  }

 private:
  void clear() {
    if (tty_ && drawn_) std::fputs("\r\x1b[K", stdout);
    drawn_ = false;
  }
  void redraw() {
    if (!tty_ || done_ < 0) return;
    constexpr int kWidth = 30;
    const double frac = total_ > 0 ? double(done_) / double(total_) : 1.0;
    const int filled = int(frac * kWidth);
    std::string bar(size_t(filled), '#');
    bar.resize(kWidth, '.');
    std::string eta = "--:--";
    const int64_t ran = done_ - first_;
    if (ran > 0) {
      const double per_step = seconds_since(start_) / double(ran);
      const int64_t left = int64_t(per_step * double(total_ - done_));
      eta = strprintf("%lld:%02lld", static_cast<long long>(left / 60),
                      static_cast<long long>(left % 60));
    }
    std::printf("\r[%s] %lld/%lld eta %s  %s\x1b[K", bar.c_str(), static_cast<long long>(done_),
                static_cast<long long>(total_), eta.c_str(), status_.c_str());
    drawn_ = true;
  }

  int64_t first_, total_;
  bool tty_;
  bool drawn_ = false;
  int64_t done_ = -1;
  std::string status_;
  Clock::time_point start_{};
};

// ---- main ---------------------------------------------------------------------------------

/// Runs `body` and turns every failure into a message on stderr and an exit
/// code (see the top of this file); nothing escapes as a crash.
inline int run_main(const char* program, const std::function<int()>& body) {
  auto report = [&](const std::string& message) {
    if (isatty(1)) std::fputs("\r\x1b[K", stdout);  // a progress bar may be on the line
    std::fflush(stdout);
    std::fprintf(stderr, "%s: %s\n", program, message.c_str());
  };
  try {
    return body();
  } catch (const UsageError& e) {
    report(std::string("error: ") + e.what());
    std::fprintf(stderr, "Run '%s --help' to see the flags.\n", program);
    return kExitUsage;
  } catch (const DataError& e) {
    report(std::string("error: ") + e.what());
    return kExitError;
  } catch (const dtr::OutOfMemoryError& e) {
    if (dtr::remat::memory_budget().has_value()) {
      report(std::string("error: the memory budget is below what this model needs: ") + e.what() +
             "\nRaise --budget-fraction (or DTR_MEMORY_BUDGET), or make the model or batch smaller.");
    } else {
      report(std::string("error: out of memory with no budget set (the system could not provide it): ") +
             e.what() + "\nMake the model or batch smaller.");
    }
    return kExitOutOfMemory;
  } catch (const dtr::Error& e) {
    report(std::string("error: ") + e.what());
    return kExitError;
  } catch (const std::bad_alloc&) {
    report("error: out of host memory");
    return kExitError;
  } catch (const std::exception& e) {
    report(std::string("error: ") + e.what());
    return kExitError;
  }
}

}  // namespace examples
