// What recording lineage costs when nothing is evicted: one training step of
// each zoo model (benchmarks/models/) with the DTR runtime on and an
// unlimited budget, against the runtime's lineage switched off
// (remat::Runtime::set_lineage_enabled(false): no lineage nodes, every output
// a constant). Rounds alternate the two settings so drift on a shared
// machine hits both alike; each round times --steps steps after --warmup.
// Prints one line per model: median step times (process CPU time, which a
// busy machine disturbs less than the wall clock) and the overhead in %.
//
//   ./build/benchmarks/lineage_overhead [--models gpt,chain] [--rounds 5]
//       [--steps 3] [--warmup 1] [--threads 1]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "benchmarks/models/zoo.h"
#include "core/parallel.h"
#include "dtr/dtr.h"

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Median CPU milliseconds per step of a fresh workload with lineage on or off.
double time_setting(const dtr::zoo::ModelSpec& spec, bool lineage, int steps, int warmup) {
  auto& rt = dtr::remat::Runtime::global();
  rt.set_lineage_enabled(lineage);
  auto w = spec.make(1);
  for (int i = 0; i < warmup; ++i) w->step();
  const double ms = dtr::zoo::time_steps(*w, dtr::zoo::Mode::kPlain, steps).median_cpu_ms;
  w.reset();
  rt.set_lineage_enabled(true);
  return ms;
}

}  // namespace

int main(int argc, char** argv) {
  std::string models = "chain,gpt,resnet,unet,lstm";
  int rounds = 5, steps = 3, warmup = 1, threads = 1;
  for (int i = 1; i < argc; ++i) {
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "lineage_overhead: %s needs a value\n", argv[i]);
        std::exit(2);
      }
      return argv[++i];
    };
    if (!std::strcmp(argv[i], "--models")) models = next();
    else if (!std::strcmp(argv[i], "--rounds")) rounds = std::max(1, std::atoi(next()));
    else if (!std::strcmp(argv[i], "--steps")) steps = std::max(1, std::atoi(next()));
    else if (!std::strcmp(argv[i], "--warmup")) warmup = std::max(0, std::atoi(next()));
    else if (!std::strcmp(argv[i], "--threads")) threads = std::max(1, std::atoi(next()));
    else {
      std::fprintf(stderr,
                   "usage: %s [--models a,b] [--rounds N] [--steps N] [--warmup N] [--threads N]\n",
                   argv[0]);
      return 2;
    }
  }
  dtr::set_num_threads(threads);
  dtr::remat::set_memory_budget(std::nullopt);
  std::printf("%-8s %14s %14s %10s\n", "model", "lineage on ms", "lineage off ms", "overhead");
  size_t start = 0;
  while (start <= models.size()) {
    const size_t comma = std::min(models.find(',', start), models.size());
    const std::string name = models.substr(start, comma - start);
    start = comma + 1;
    if (name.empty()) continue;
    const auto& spec = dtr::zoo::find_model(name);
    std::vector<double> on, off;
    for (int r = 0; r < rounds; ++r) {
      on.push_back(time_setting(spec, true, steps, warmup));
      off.push_back(time_setting(spec, false, steps, warmup));
    }
    const double a = median(on), b = median(off);
    std::printf("%-8s %14.2f %14.2f %9.2f%%\n", name.c_str(), a, b, 100.0 * (a - b) / b);
    std::fflush(stdout);
  }
  return 0;
}
