// Times one model of the zoo (benchmarks/models/) in a fresh process and
// prints one JSON object with the fields pytorch_zoo.py's child prints (its
// docstring describes them): every measured step's wall-clock and process
// CPU time (cpu_ms, wall_ms) over --steps steps after --warmup steps
// (warmup_wall_ms), their medians and minima, the parameter count, dtr's
// storage-byte peak over the measured steps (peak_bytes), the process's peak
// resident set size over the whole run (getrusage ru_maxrss) above its value
// right after the model, optimizer and inputs were built
// (rss_peak_delta_kib), the peak of
// the measured steps alone above that same value (rss_steps_peak_delta_kib:
// VmHWM of /proc/self/status after resetting it through /proc/self/clear_refs
// before the first measured step; null where the kernel refuses the reset)
// and the resident set size right before that step (rss_before_steps_kib).
// pytorch_zoo.py runs it beside the PyTorch version of each model so both
// libraries are measured the same way; DTR_TRACE=path.json gives a Chrome
// trace of a run.
//
//   ./build/benchmarks/zoo_step --model gpt [--mode plain|checkpoint]
//       [--steps 5] [--warmup 2] [--threads 1] [--budget BYTES]
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "benchmarks/models/zoo.h"
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

// [a, b, c] with three decimals.
std::string json_list(const std::vector<double>& v) {
  std::string out = "[";
  char buf[32];
  for (size_t i = 0; i < v.size(); ++i) {
    std::snprintf(buf, sizeof buf, "%s%.3f", i ? ", " : "", v[i]);
    out += buf;
  }
  return out + "]";
}

[[noreturn]] void usage(const char* argv0, const std::string& error) {
  std::fprintf(stderr,
               "zoo_step: %s\nusage: %s --model NAME [--mode plain|checkpoint] [--steps N] [--warmup N] "
               "[--threads N] [--budget BYTES]\n",
               error.c_str(), argv0);
  std::exit(2);
}

int64_t parse_positive(const char* argv0, const std::string& flag, const std::string& text, int64_t min) {
  char* end = nullptr;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || v < min) usage(argv0, flag + " expects an integer >= " + std::to_string(min));
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  std::string model, mode_name = "plain";
  int64_t steps = 5, warmup = 2, threads = 1;
  std::optional<int64_t> budget;
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
    else if (flag == "--budget") budget = parse_positive(argv[0], flag, value, 1);
    else usage(argv[0], "unknown flag " + flag);
  }
  if (model.empty()) usage(argv[0], "--model is required");
  if (mode_name != "plain" && mode_name != "checkpoint") usage(argv[0], "--mode must be plain or checkpoint");
  const auto mode = mode_name == "plain" ? dtr::zoo::Mode::kPlain : dtr::zoo::Mode::kCheckpoint;
  try {
    const dtr::zoo::ModelSpec& spec = dtr::zoo::find_model(model);
    dtr::set_num_threads(int(threads));
    const std::unique_ptr<dtr::zoo::Workload> workload = spec.make(/*seed=*/0);
    const int64_t rss_base = max_rss_kib();
    dtr::remat::set_memory_budget(budget);
    int64_t parameters = 0;
    for (const dtr::Tensor& p : workload->model()->parameters()) parameters += p.numel();
    std::vector<double> warmup_ms;
    for (int64_t i = 0; i < warmup; ++i) {
      const auto start = std::chrono::steady_clock::now();
      workload->step(mode);
      warmup_ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
    }
    dtr::remat::reset_stats();
    const int64_t warmup_peak = max_rss_kib();  // the reset lowers ru_maxrss too
    const bool peak_reset = reset_peak_rss();
    const int64_t rss_before = status_kib("VmRSS:");
    const dtr::zoo::StepTimes t = dtr::zoo::time_steps(*workload, mode, int(steps));
    const int64_t steps_peak = status_kib("VmHWM:");
    const int64_t run_peak = std::max(warmup_peak, max_rss_kib());
    const dtr::remat::Stats st = dtr::remat::stats();
    const std::string steps_peak_delta =
        peak_reset && steps_peak >= 0 ? std::to_string(steps_peak - rss_base) : std::string("null");
    std::printf(
        "{\"library\": \"dtr\", \"version\": \"%s\", \"model\": \"%s\", \"mode\": \"%s\", \"threads\": %d, "
        "\"steps\": %lld, \"warmup\": %lld, \"parameters\": %lld, \"parameter_bytes\": %lld, "
        "\"cpu_ms\": %s, \"wall_ms\": %s, \"warmup_wall_ms\": %s, "
        "\"median_ms\": %.3f, \"min_ms\": %.3f, \"median_cpu_ms\": %.3f, \"min_cpu_ms\": %.3f, "
        "\"loss\": %.6f, \"peak_bytes\": %lld, \"rss_base_kib\": %lld, \"rss_peak_delta_kib\": %lld, "
        "\"rss_steps_peak_delta_kib\": %s, \"rss_before_steps_kib\": %lld, \"evictions\": %lld, "
        "\"recomputed_ops\": %lld}\n",
        DTR_VERSION_STRING, spec.name.c_str(), mode_name.c_str(), dtr::num_threads(), static_cast<long long>(steps),
        static_cast<long long>(warmup), static_cast<long long>(parameters),
        static_cast<long long>(workload->parameter_bytes()), json_list(t.cpu_ms).c_str(),
        json_list(t.wall_ms).c_str(), json_list(warmup_ms).c_str(), t.median_ms, t.min_ms, t.median_cpu_ms, t.min_cpu_ms, t.loss,
        static_cast<long long>(st.peak_bytes), static_cast<long long>(rss_base),
        static_cast<long long>(run_peak - rss_base), steps_peak_delta.c_str(), static_cast<long long>(rss_before),
        static_cast<long long>(st.evictions), static_cast<long long>(st.recomputed_ops));
    dtr::remat::Runtime::global().flush_trace();
  } catch (const dtr::OutOfMemoryError& e) {
    std::fprintf(stderr, "zoo_step: %s\n", e.what());
    return 3;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "zoo_step: %s\n", e.what());
    return 1;
  }
  return 0;
}
