// Times one model of the zoo (benchmarks/models/) in a fresh process and
// prints one JSON object with the fields pytorch_zoo.py's child prints (its
// docstring describes them): every measured step's wall-clock and process
// CPU time (cpu_ms, wall_ms) over --steps steps after --warmup steps
// (warmup_wall_ms), their medians and minima, the parameter count, dtr's
// storage-byte peak over the measured steps (peak_bytes), the resident bytes
// between steps (resident_between_steps: the never-evictable floor of
// parameters, gradients, optimizer state and inputs), the process's peak
// resident set size over the whole run (getrusage ru_maxrss) above its value
// right after the model, optimizer and inputs were built
// (rss_peak_delta_kib), the peak of the measured steps alone above that same
// value (rss_steps_peak_delta_kib: VmHWM of /proc/self/status after resetting
// it through /proc/self/clear_refs before the first measured step; null where
// the kernel refuses the reset), the resident set size right before that step
// (rss_before_steps_kib) and, per measured step, the evictions, replayed ops
// and replayed FLOPs, and the FLOPs of the ops the step issued (step_flops). The heuristic is DTR_HEURISTIC's (default dtr_eq).
// Under a --budget (bytes) that is infeasible it prints {"outcome": "oom",
// "error": ...} ("thrash" where the thrash guard gave up) and exits with 3. pytorch_zoo.py and sweep.py run it beside
// the PyTorch version of each model so both libraries are measured the same
// way; DTR_TRACE=path.json gives a Chrome trace of a run. Under `valgrind
// --tool=callgrind --instr-atstart=no` the instructions counted are those of
// the measured steps only.
//
//   ./build/benchmarks/zoo_step --model gpt [--mode plain|checkpoint]
//       [--steps 5] [--warmup 2] [--threads 1] [--budget BYTES] [--lineage on|off]
#include <sys/resource.h>

#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#else
#define CALLGRIND_START_INSTRUMENTATION
#define CALLGRIND_STOP_INSTRUMENTATION
#endif

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "benchmarks/models/zoo.h"
#include "core/options.h"
#include "core/parallel.h"
#include "dtr/dtr.h"

#ifndef DTR_VERSION_STRING
#define DTR_VERSION_STRING "unknown"  // set by CMakeLists.txt
#endif

namespace {

int64_t max_rss_kib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss;  // KiB on Linux
}

// Resets the peak resident set size (VmHWM) to the current one (Linux 4.0+:
// writing 5 to /proc/self/clear_refs). False where that is refused.
bool reset_peak_rss() {
  std::ofstream f("/proc/self/clear_refs");
  f << "5";
  f.flush();
  return bool(f);
}

// Field `field` of /proc/self/status ("VmHWM:", "VmRSS:") in KiB, or -1
// when unreadable.
int64_t status_kib(const std::string& field) {
  std::ifstream f("/proc/self/status");
  std::string key;
  while (f >> key) {
    if (key == field) {
      int64_t kib = -1;
      f >> kib;
      return kib;
    }
    f.ignore(1 << 12, '\n');
  }
  return -1;
}

[[noreturn]] void usage(const char* argv0, const std::string& error) {
  std::fprintf(stderr,
               "zoo_step: %s\nusage: %s --model NAME [--mode plain|checkpoint] [--steps N] [--warmup N] "
               "[--threads N] [--budget BYTES|SIZE (e.g. 32MiB)] [--lineage on|off] [--device cpu|cuda[:N]]\n",
               error.c_str(), argv0);
  std::exit(2);
}

int64_t parse_positive(const char* argv0, const std::string& flag, const std::string& text, int64_t min) {
  char* end = nullptr;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || v < min) usage(argv0, flag + " expects an integer >= " + std::to_string(min));
  return v;
}

/// --budget: bytes, or a size with a unit as DTR_MEMORY_BUDGET takes it
/// (32MiB, 1.5GiB); at least one byte.
int64_t parse_budget(const char* argv0, const std::string& text) {
  const absl::StatusOr<int64_t> bytes = dtr::parse_byte_size(text);
  if (!bytes.ok() || *bytes < 1)
    usage(argv0, "--budget expects bytes or a size such as 32MiB, got '" + text + "'");
  return *bytes;
}

std::string json_escape(const std::string& text) {
  std::string out;
  for (const char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) >= 0x20) out += c;
  }
  return out;
}

std::string json_list(const std::vector<double>& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) out += fmt::format("{}{:.3f}", i ? ", " : "", v[i]);
  return out + "]";
}

int64_t parameter_count(const dtr::zoo::Workload& w) {
  int64_t n = 0;
  for (const dtr::Tensor& p : w.model()->parameters()) n += p.numel();
  return n;
}

// The fields every line has: what ran, where, with which budget and heuristic.
std::string common_fields(const dtr::zoo::ModelSpec& spec, const std::string& mode, const dtr::zoo::Workload& w,
                          std::optional<int64_t> budget) {
  return fmt::format(
      "\"model\": \"{}\", \"mode\": \"{}\", \"device\": \"{}\", \"threads\": {}, \"heuristic\": \"{}\", "
      "\"budget_bytes\": {}, \"parameters\": {}, \"lineage\": {}",
      spec.name, mode, w.device().str(), dtr::num_threads(), dtr::heuristic_name(dtr::remat::Runtime::global().heuristic()),
      budget ? *budget : -1, parameter_count(w), dtr::remat::Runtime::global().lineage_enabled());
}

}  // namespace

int main(int argc, char** argv) {
  std::string model, mode_name = "plain";
  int64_t steps = 5, warmup = 2, threads = 1;
  std::optional<int64_t> budget;
  bool lineage = true;
  std::string device_name = "cpu";
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "-h" || flag == "--help") usage(argv[0], "times one zoo model");
    if (i + 1 >= argc) usage(argv[0], flag + " needs a value");
    const std::string value = argv[++i];
    if (flag == "--model") model = value;
    else if (flag == "--mode") mode_name = value;
    else if (flag == "--steps") steps = parse_positive(argv[0], flag, value, 1);
    else if (flag == "--warmup") warmup = parse_positive(argv[0], flag, value, 0);
    else if (flag == "--threads") threads = parse_positive(argv[0], flag, value, 1);
    else if (flag == "--budget") budget = parse_budget(argv[0], value);
    else if (flag == "--device") device_name = value;
    else if (flag == "--lineage") {
      if (value != "on" && value != "off") usage(argv[0], "--lineage must be on or off, got '" + value + "'");
      lineage = value == "on";
    } else usage(argv[0], "unknown flag " + flag);
  }
  if (model.empty()) usage(argv[0], "--model is required");
  if (!lineage && budget) usage(argv[0], "--lineage off cannot run under a --budget (nothing could be recomputed)");
  if (mode_name != "plain" && mode_name != "checkpoint") usage(argv[0], "--mode must be plain or checkpoint");
  const auto mode = mode_name == "plain" ? dtr::zoo::Mode::kPlain : dtr::zoo::Mode::kCheckpoint;
  const dtr::zoo::ModelSpec* found = nullptr;
  dtr::Device device;
  try {
    found = &dtr::zoo::find_model(model);
    device = dtr::Device(device_name);
  } catch (const dtr::ValueError& e) {
    usage(argv[0], e.what());
  }
  try {
    const dtr::zoo::ModelSpec& spec = *found;
    dtr::set_num_threads(int(threads));
    // --lineage off: ops record no lineage (the baseline of lineage's overhead).
    dtr::remat::Runtime::global().set_lineage_enabled(lineage);
    const std::unique_ptr<dtr::zoo::Workload> workload = spec.make(/*seed=*/0, device);
    const int64_t rss_base = max_rss_kib();
    dtr::remat::set_memory_budget(device, budget);
    try {
      std::vector<double> warmup_ms;
      for (int64_t i = 0; i < warmup; ++i) {
        const auto start = std::chrono::steady_clock::now();
        workload->step(mode);
        warmup_ms.push_back(
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
      }
      dtr::remat::reset_stats();
      const int64_t between_steps = dtr::remat::Runtime::global().stats(device).resident_bytes;
      const int64_t warmup_peak = max_rss_kib();  // the reset lowers ru_maxrss too
      const bool peak_reset = reset_peak_rss();
      const int64_t rss_before = status_kib("VmRSS:");
      // Under `valgrind --tool=callgrind --instr-atstart=no` only the
      // measured steps are counted (no-ops otherwise).
      CALLGRIND_START_INSTRUMENTATION;
      const dtr::zoo::StepTimes t = dtr::zoo::time_steps(*workload, mode, int(steps));
      CALLGRIND_STOP_INSTRUMENTATION;
      const int64_t steps_peak = status_kib("VmHWM:");
      const int64_t run_peak = std::max(warmup_peak, max_rss_kib());
      const dtr::remat::Stats st = dtr::remat::Runtime::global().stats(device);
      const std::string steps_peak_delta =
          peak_reset && steps_peak >= 0 ? std::to_string(steps_peak - rss_base) : std::string("null");
      std::printf("%s\n",
                  fmt::format(
                      "{{\"library\": \"dtr\", \"version\": \"{}\", \"outcome\": \"ok\", {}, \"steps\": {}, "
                      "\"warmup\": {}, \"parameter_bytes\": {}, \"cpu_ms\": {}, "
                      "\"wall_ms\": {}, \"warmup_wall_ms\": {}, \"median_ms\": {:.3f}, \"min_ms\": {:.3f}, "
                      "\"median_cpu_ms\": {:.3f}, \"min_cpu_ms\": {:.3f}, \"loss\": {:.6f}, \"peak_bytes\": {}, "
                      "\"resident_between_steps\": {}, \"rss_base_kib\": {}, \"rss_peak_delta_kib\": {}, "
                      "\"rss_steps_peak_delta_kib\": {}, \"rss_before_steps_kib\": {}, \"evictions\": {:.1f}, "
                      "\"recomputed_ops\": {:.1f}, \"recomputed_flops\": {:.6g}, \"step_flops\": {:.6g}, \"max_replay_ratio\": {:.3f}}}",
                      DTR_VERSION_STRING, common_fields(spec, mode_name, *workload, budget), steps, warmup,
                      workload->parameter_bytes(), json_list(t.cpu_ms), json_list(t.wall_ms),
                      json_list(warmup_ms), t.median_ms, t.min_ms, t.median_cpu_ms, t.min_cpu_ms, t.loss,
                      st.peak_bytes, between_steps, rss_base, run_peak - rss_base, steps_peak_delta, rss_before,
                      double(st.evictions) / double(steps), double(st.recomputed_ops) / double(steps),
                      st.recomputed_flops / double(steps), st.fresh_flops / double(steps), st.max_replay_ratio)
                      .c_str());
      dtr::remat::Runtime::global().flush_trace();
    } catch (const dtr::OutOfMemoryError& e) {
      // The point is infeasible: one JSON line saying so (outcome thrash
      // for the thrash guard's ThrashError), then exit code 3.
      const std::string what = e.what();
      const bool thrash = dynamic_cast<const dtr::ThrashError*>(&e) != nullptr;
      std::printf("{\"library\": \"dtr\", \"version\": \"%s\", \"outcome\": \"%s\", %s, \"steps\": %lld, "
                  "\"warmup\": %lld, \"error\": \"%s\"}\n",
                  DTR_VERSION_STRING, thrash ? "thrash" : "oom", common_fields(spec, mode_name, *workload, budget).c_str(),
                  static_cast<long long>(steps), static_cast<long long>(warmup),
                  json_escape(what.substr(0, what.find('\n'))).c_str());
      std::fprintf(stderr, "zoo_step: %s\n", e.what());
      dtr::remat::set_memory_budget(device, std::nullopt);
      return 3;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "zoo_step: %s\n", e.what());
    return 1;
  }
  return 0;
}
