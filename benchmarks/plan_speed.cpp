// How long the budget planner takes against a training step, per zoo model
// (benchmarks/models/): the median of --steps unrecorded steps, then the
// recording of one step, one simulation per budget of the default grid
// (1.0 … 0.1 of the recorded peak) with the default heuristic, and the
// whole default report (that grid plus bisection plus the timelines and
// the floor analysis). Prints one line per model:
//
//   model step_ms record_ms sim_ms_min sim_ms_median sim_per_step report_ms report_per_step ops events
//
// where sim_ms_* are over the grid's simulations and *_per_step are ratios
// to step_ms. Goals (the planner's): one simulation under 1% of a step;
// the whole default report under one step.
//
//   ./build/benchmarks/plan_speed [--models gpt,resnet,...] [--steps 3] [--threads 1]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "benchmarks/models/zoo.h"
#include "core/parallel.h"
#include "dtr/dtr.h"

namespace {

double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  std::string models = "gpt,resnet,unet,lstm,chain_b2048";
  int steps = 3, threads = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--models") models = value;
    else if (flag == "--steps") steps = std::max(1, std::atoi(value.c_str()));
    else if (flag == "--threads") threads = std::max(1, std::atoi(value.c_str()));
    else {
      std::fprintf(stderr, "usage: %s [--models LIST] [--steps N] [--threads N]\n", argv[0]);
      return 2;
    }
  }
  dtr::set_num_threads(threads);
  std::printf("model step_ms record_ms sim_ms_min sim_ms_median sim_per_step report_ms report_per_step ops events\n");
  std::stringstream list(models);
  std::string name;
  while (std::getline(list, name, ',')) {
    const auto workload = dtr::zoo::find_model(name).make(0);
    workload->step();
    workload->step();
    std::vector<double> step_ms;
    for (int s = 0; s < steps; ++s) {
      const double t0 = now_ms();
      workload->step();
      step_ms.push_back(now_ms() - t0);
    }
    const double step = median(step_ms);
    double t0 = now_ms();
    const auto trace = dtr::remat::record_step([&] { workload->step(); });
    const double record_ms = now_ms() - t0;
    dtr::remat::PlanOptions o;
    t0 = now_ms();
    const dtr::remat::PlanReport report = dtr::remat::plan_trace(*trace, o);
    const double report_ms = now_ms() - t0;
    std::vector<double> sim_ms;
    for (const auto& p : report.points) sim_ms.push_back(p.simulate_seconds * 1e3);
    std::printf("%s %.1f %.1f %.2f %.2f %.4f %.1f %.3f %lld %lld\n", name.c_str(), step, record_ms,
                *std::min_element(sim_ms.begin(), sim_ms.end()), median(sim_ms), median(sim_ms) / step, report_ms,
                report_ms / step, static_cast<long long>(report.ops), static_cast<long long>(report.events));
    std::fflush(stdout);
  }
  return 0;
}
