// Times one model of the zoo (benchmarks/models/) in a fresh process and
// prints one JSON object: the median step time over --steps steps after
// --warmup steps (wall clock and process CPU time), dtr's storage-byte peak over the measured steps, and the
// process's peak resident set size (getrusage ru_maxrss) above its value
// right after the model, optimizer and inputs were built. pytorch_zoo.py
// runs it beside the PyTorch version of each model so both libraries are
// measured the same way; DTR_TRACE=path.json gives a Chrome trace of a run.
//
//   ./build/benchmarks/zoo_step --model gpt [--mode plain|checkpoint]
//       [--steps 5] [--warmup 2] [--threads 1] [--budget BYTES]
#include <sys/resource.h>

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

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
    for (int64_t i = 0; i < warmup; ++i) workload->step(mode);
    dtr::remat::reset_stats();
    const dtr::zoo::StepTimes t = dtr::zoo::time_steps(*workload, mode, int(steps));
    const dtr::remat::Stats st = dtr::remat::stats();
    std::printf(
        "{\"library\": \"dtr\", \"model\": \"%s\", \"mode\": \"%s\", \"threads\": %d, \"steps\": %lld, "
        "\"median_ms\": %.3f, \"min_ms\": %.3f, \"median_cpu_ms\": %.3f, \"min_cpu_ms\": %.3f, "
        "\"loss\": %.6f, \"peak_bytes\": %lld, \"rss_base_kib\": %lld, \"rss_peak_delta_kib\": %lld, "
        "\"evictions\": %lld, \"recomputed_ops\": %lld}\n",
        spec.name.c_str(), mode_name.c_str(), dtr::num_threads(), static_cast<long long>(steps), t.median_ms,
        t.min_ms, t.median_cpu_ms, t.min_cpu_ms, t.loss, static_cast<long long>(st.peak_bytes),
        static_cast<long long>(rss_base), static_cast<long long>(max_rss_kib() - rss_base),
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
