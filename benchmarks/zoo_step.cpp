// Times one model of the zoo (benchmarks/models/) in a fresh process and
// prints one JSON object: every measured step's wall-clock and process CPU
// time (ms) after --warmup steps, their medians and minimums, dtr's
// storage-byte peak over the measured steps, the resident bytes between
// steps (the never-evictable floor: parameters, gradients, optimizer state,
// inputs), the process's peak resident set size (getrusage ru_maxrss) above
// its value right after the model, optimizer and inputs were built, and per
// measured step the evictions, replayed ops and replayed FLOPs. The
// heuristic is DTR_HEURISTIC's (default dtr_eq). Under a --budget (bytes)
// that is infeasible it prints {"outcome": "oom", "error": ...} and exits
// with 3. pytorch_zoo.py and sweep.py run it beside the PyTorch version of
// each model so both libraries are measured the same way; DTR_TRACE=path.json
// gives a Chrome trace of a run. Under `valgrind --tool=callgrind
// --instr-atstart=no` the instructions counted are those of the measured
// steps only.
//
//   ./build/benchmarks/zoo_step --model gpt [--mode plain|checkpoint]
//       [--steps 5] [--warmup 2] [--threads 1] [--budget BYTES]
#include <sys/resource.h>

#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#else
#define CALLGRIND_START_INSTRUMENTATION
#define CALLGRIND_STOP_INSTRUMENTATION
#endif

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "benchmarks/models/zoo.h"
#include "core/parallel.h"
#include "dtr/dtr.h"

namespace {

int64_t max_rss_kib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss;  // KiB on Linux
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

// The fields every line has: what ran, where, with which budget and heuristic.
std::string common_fields(const dtr::zoo::ModelSpec& spec, const std::string& mode, const dtr::zoo::Workload& w,
                          std::optional<int64_t> budget) {
  return fmt::format(
      "\"model\": \"{}\", \"mode\": \"{}\", \"threads\": {}, \"heuristic\": \"{}\", \"budget_bytes\": {}, "
      "\"parameters\": {}",
      spec.name, mode, dtr::num_threads(), dtr::heuristic_name(dtr::remat::Runtime::global().heuristic()),
      budget ? *budget : -1, w.parameter_bytes() / 4);
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
    try {
      for (int64_t i = 0; i < warmup; ++i) workload->step(mode);
      dtr::remat::reset_stats();
      const int64_t between_steps = dtr::remat::stats().resident_bytes;
      // Under `valgrind --tool=callgrind --instr-atstart=no` only the
      // measured steps are counted (no-ops otherwise).
      CALLGRIND_START_INSTRUMENTATION;
      const dtr::zoo::StepTimes t = dtr::zoo::time_steps(*workload, mode, int(steps));
      CALLGRIND_STOP_INSTRUMENTATION;
      const dtr::remat::Stats st = dtr::remat::stats();
      std::printf(
          "{\"library\": \"dtr\", \"outcome\": \"ok\", %s, \"steps\": %lld, \"warmup\": %lld, "
          "\"median_ms\": %.3f, \"min_ms\": %.3f, \"median_cpu_ms\": %.3f, \"min_cpu_ms\": %.3f, "
          "\"wall_ms\": %s, \"cpu_ms\": %s, \"loss\": %.6f, \"peak_bytes\": %lld, "
          "\"resident_between_steps\": %lld, \"rss_base_kib\": %lld, \"rss_peak_delta_kib\": %lld, "
          "\"evictions\": %.1f, \"recomputed_ops\": %.1f, \"recomputed_flops\": %.6g}\n",
          common_fields(spec, mode_name, *workload, budget).c_str(), static_cast<long long>(steps),
          static_cast<long long>(warmup), t.median_ms, t.min_ms, t.median_cpu_ms, t.min_cpu_ms,
          json_list(t.wall_ms).c_str(), json_list(t.cpu_ms).c_str(), t.loss, static_cast<long long>(st.peak_bytes),
          static_cast<long long>(between_steps), static_cast<long long>(rss_base),
          static_cast<long long>(max_rss_kib() - rss_base), double(st.evictions) / double(steps),
          double(st.recomputed_ops) / double(steps), st.recomputed_flops / double(steps));
      dtr::remat::Runtime::global().flush_trace();
    } catch (const dtr::OutOfMemoryError& e) {
      // The point is infeasible: one JSON line saying so, then exit code 3.
      const std::string what = e.what();
      std::printf("{\"library\": \"dtr\", \"outcome\": \"oom\", %s, \"error\": \"%s\"}\n",
                  common_fields(spec, mode_name, *workload, budget).c_str(),
                  json_escape(what.substr(0, what.find('\n'))).c_str());
      std::fprintf(stderr, "zoo_step: %s\n", e.what());
      dtr::remat::set_memory_budget(std::nullopt);
      return 3;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "zoo_step: %s\n", e.what());
    return 1;
  }
  return 0;
}
