// Host-tier sweep (Note [host tier]): the model zoo on the test's second
// device (tests/second_device.h: privateuseone:0, CPU kernels, a 25 GB/s
// host link), under budgets of ratio × its unbudgeted peak there, with
// swapping off and on (dtr::SwapMode). Counts, not timings: evictions,
// rematerializations, recomputation, swaps, the bytes each way and the
// estimated cost of recomputing (the ops' roofline estimates) against that
// of copying (bytes / host-link bandwidth + latency), per measured step.
//
//   ./build/benchmarks/host_tier --out benchmarks/results/host_tier.csv
//       [--models chain_b2048,gpt,resnet,unet,lstm,chain] [--modes off,auto]
//       [--ratios 1,0.8,0.6,0.5,0.4,0.3,0.2,0.15,0.1,0.05] [--steps 2] [--warmup 2]
//       [--host-budget BYTES] [--timeout 120] [--timeout-factor 8] [--stop-after 2]
//       [--max-seconds S] [--no-bisect] [--tolerance 0.005]
//       [--commit HASH] [--summary benchmarks/results/host_tier.md] [--device second|cpu]
//       [--peak all|measured]
//
// Per model: first the unbudgeted point (no budget, swapping off): its peak
// on the device (dtr::remat::stats(device).peak_bytes; with --peak all,
// the default, the largest over every step, warm-up included: a budget
// holds from the first step, and the second step, where the optimizer's
// state is first updated in place, can peak higher than the steady state
// (the chain: 1.33x); --peak measured: over the measured steps only),
// the loss of every step, and the FLOPs of one
// measured step (the estimated FLOPs of the lineage nodes recorded on the
// device, through a RuntimeObserver: in-place updates of constants, the
// optimizer's, record no node and are not counted). Then every mode ×
// ratio: a workload built afresh from seed 0 (ModelSpec::make on the
// device), the budget set (and the --host-budget on the CPU, the host
// tier's cap), --warmup steps, then --steps measured steps with the
// counters reset before each; one CSV row per measured step. Every step's
// loss must be bitwise the one of the unbudgeted run (DTR's guarantee,
// swapped or recomputed): losses_equal says so, and a difference is
// printed loudly on stderr. Then the smallest feasible ratio per mode, by
// bisection between the smallest feasible ratio of the grid and the next
// one below, to --tolerance; its probes run --warmup steps and one
// measured step.
//
// Every point runs in a fresh process (fork(); results come back through a
// pipe, a line per step as it ends), because the candidate sampler's
// state is the process's, and so that a point that thrashes can be
// stopped: past its limit the child is killed and the point is recorded
// as `timeout` (with the steps it finished); a child that dies of a signal
// is recorded as `crash`. The limit is --timeout-factor × the wall time of
// the model's unbudgeted point (build and every step), at least 10 s and
// at most --timeout. After --stop-after infeasible grid points in a row
// (oom, timeout, crash), a mode's lower ratios are recorded as `skipped`
// (0: run them all): below a never-evictable floor the runtime may
// thrash through recomputation before it gives up, so each would cost a
// whole limit. Past --max-seconds of the whole run, every point left is
// recorded as `skipped` and a bisection stops where it is (its upper end
// is then an upper bound), so that the run ends with its files written.
// --device cpu runs the same sweep on the CPU (no host link, so nothing is
// swapped; no host budget), for comparison. Nothing but fork() touches the
// library in the parent process. One thread (dtr::set_num_threads(1)).
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "benchmarks/models/zoo.h"
#include "core/parallel.h"
#include "dtr/dtr.h"
#include "remat/lineage.h"
#include "remat/runtime.h"
#include "tests/second_device.h"

namespace {

using dtr::SwapMode;
using dtr::zoo::ModelSpec;

struct Options {
  std::vector<std::string> models = {"chain_b2048", "gpt", "resnet", "unet", "lstm", "chain"};
  std::vector<SwapMode> modes = {SwapMode::kOff, SwapMode::kAuto};
  std::vector<double> ratios = {1.0, 0.8, 0.6, 0.5, 0.4, 0.3, 0.2, 0.15, 0.1, 0.05};
  int steps = 2;
  int warmup = 2;
  std::optional<int64_t> host_budget;
  double timeout_s = 120;      // the cap on a point's time
  double timeout_factor = 8;   // a point's limit: this × the unbudgeted point's time (0: the cap alone)
  double min_timeout_s = 10;
  int stop_after = 2;          // consecutive infeasible grid points after which lower ratios are skipped
  double max_seconds = 0;      // the whole run's time, after which points are skipped (0: none)
  bool bisect = true;
  double tolerance = 0.005;
  std::string commit;
  bool peak_all_steps = true;  // --peak all: the ratios' base is the peak over every unbudgeted step
  bool on_cpu = false;  // --device cpu: the same runs on the CPU (no host link: nothing is swapped), to compare
  std::string out = "host_tier.csv";
  std::string summary;  // "" : <out without .csv>.md
  std::string flags;    // the command line, for the CSV header
};

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr,
               "host_tier: %s\nusage: host_tier [--models LIST] [--modes off,auto] [--ratios LIST] "
               "[--steps N] [--warmup N] [--host-budget BYTES] [--timeout S] [--timeout-factor F] "
               "[--stop-after K] [--max-seconds S] [--no-bisect] [--tolerance R] [--commit HASH] [--out CSV] [--summary MD]\n",
               why.c_str());
  std::exit(2);
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

double parse_double(const std::string& flag, const std::string& v) {
  char* end = nullptr;
  const double d = std::strtod(v.c_str(), &end);
  if (end == v.c_str() || *end != '\0') usage(flag + ": not a number: '" + v + "'");
  return d;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 0; i < argc; ++i) o.flags += (i ? " " : "") + std::string(argv[i]);
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(a + " needs a value");
      return argv[++i];
    };
    if (a == "--models") {
      o.models = split(value());
    } else if (a == "--modes") {
      o.modes.clear();
      for (const std::string& m : split(value())) {
        const auto mode = dtr::parse_swap_mode(m);
        if (!mode.ok()) usage(std::string(mode.status().message()));
        o.modes.push_back(*mode);
      }
    } else if (a == "--ratios") {
      o.ratios.clear();
      for (const std::string& r : split(value())) {
        const double d = parse_double(a, r);
        if (!(d > 0)) usage("--ratios: ratios must be positive, got " + r);
        o.ratios.push_back(d);
      }
      std::sort(o.ratios.begin(), o.ratios.end(), std::greater<>());
    } else if (a == "--steps") {
      o.steps = int(parse_double(a, value()));
    } else if (a == "--warmup") {
      o.warmup = int(parse_double(a, value()));
    } else if (a == "--host-budget") {
      o.host_budget = int64_t(parse_double(a, value()));
    } else if (a == "--timeout") {
      o.timeout_s = parse_double(a, value());
    } else if (a == "--timeout-factor") {
      o.timeout_factor = parse_double(a, value());
    } else if (a == "--max-seconds") {
      o.max_seconds = parse_double(a, value());
    } else if (a == "--stop-after") {
      o.stop_after = int(parse_double(a, value()));
    } else if (a == "--no-bisect") {
      o.bisect = false;
    } else if (a == "--tolerance") {
      o.tolerance = parse_double(a, value());
    } else if (a == "--peak") {
      const std::string d = value();
      if (d != "all" && d != "measured") usage("--peak: 'all' or 'measured', got '" + d + "'");
      o.peak_all_steps = d == "all";
    } else if (a == "--device") {
      const std::string d = value();
      if (d != "cpu" && d != "second") usage("--device: 'second' (the test device) or 'cpu', got '" + d + "'");
      o.on_cpu = d == "cpu";
    } else if (a == "--commit") {
      o.commit = value();
    } else if (a == "--out") {
      o.out = value();
    } else if (a == "--summary") {
      o.summary = value();
    } else {
      usage("unknown flag '" + a + "'");
    }
  }
  if (o.steps < 1 || o.warmup < 0) usage("--steps must be >= 1 and --warmup >= 0");
  if (o.timeout_s <= 0 || o.tolerance <= 0) usage("--timeout and --tolerance must be positive");
  if (o.timeout_factor < 0 || o.stop_after < 0) usage("--timeout-factor and --stop-after must be >= 0");
  if (o.host_budget && *o.host_budget <= 0) usage("--host-budget must be positive");
  if (o.modes.empty() || o.models.empty()) usage("nothing to run");
  if (o.commit.empty()) {
    if (const char* c = std::getenv("DTR_COMMIT")) o.commit = c;
  }
  if (o.summary.empty()) {
    o.summary = o.out;
    if (o.summary.size() > 4 && o.summary.ends_with(".csv")) o.summary.resize(o.summary.size() - 4);
    o.summary += ".md";
  }
  return o;
}

// ---- one point, in a child process ---------------------------------------------

/// One measured step's counters: the device's, and two of the CPU's.
struct StepRow {
  dtr::remat::Stats dev;
  int64_t cpu_peak_bytes = 0;
  int64_t cpu_host_tier_bytes = 0;
};

/// What a point sends back. outcome: ok | oom | error | timeout | crash.
struct PointResult {
  std::string outcome = "crash";
  std::string error;
  std::vector<uint64_t> loss_bits;  // every step's loss (warm-up ones first), bit patterns of doubles
  std::vector<StepRow> steps;       // the measured steps
  int64_t warmup_peak = 0;          // unbudgeted point: the largest peak of the warm-up steps
  double step_flops = 0;            // unbudgeted point: FLOPs of the device's nodes, per measured step
  double step_cost_s = 0;           // and their estimated seconds
};

double bits_to_double(uint64_t b) {
  double d;
  std::memcpy(&d, &b, sizeof d);
  return d;
}

/// Sums the estimated FLOPs and seconds of the lineage nodes recorded on one device.
class FlopCounter final : public dtr::remat::RuntimeObserver {
 public:
  explicit FlopCounter(dtr::Device device) : device_(device) {}
  void on_record(const dtr::remat::Node& node) override {
    if (node.device != device_) return;
    flops += node.flops;
    cost_s += node.cost_seconds;
  }
  void on_allocate(dtr::Storage&) override {}
  void on_acquire(std::span<dtr::Storage* const>) override {}
  void on_release(std::span<dtr::Storage* const>) override {}
  void on_register_constant(dtr::Storage&) override {}
  void on_mark_borrowed(dtr::Storage&) override {}
  void on_before_mutation(dtr::Storage&, bool, dtr::Storage*) override {}
  void on_last_handle(dtr::Storage&) override {}
  void on_pin(dtr::Storage&) override {}
  void on_unpin(dtr::Storage&) override {}
  void on_destroy(dtr::Storage&) override {}
  double flops = 0, cost_s = 0;

 private:
  dtr::Device device_;
};

/// Writes a line to the pipe at once (the parent may kill this process).
void send(int fd, const std::string& line) {
  const std::string l = line + "\n";
  size_t done = 0;
  while (done < l.size()) {
    const ssize_t n = write(fd, l.data() + done, l.size() - done);
    if (n <= 0) _exit(3);
    done += size_t(n);
  }
}

std::string first_line(const std::string& s) {
  std::string l = s.substr(0, s.find('\n'));
  std::replace(l.begin(), l.end(), '"', '\'');
  return l;
}

/// The child's work: builds `spec` on second_device(0), sets the budgets,
/// trains, and reports each step down `fd`. Lines: "loss <bits>",
/// "step <16 numbers>", "flops <flops> <seconds>", "outcome <name> <first line>".
void run_point(int fd, const ModelSpec& spec, SwapMode mode, std::optional<int64_t> budget,
               std::optional<int64_t> host_budget, int warmup, int steps, bool on_cpu) {
  std::string outcome = "ok", error;
  try {
    dtr::set_num_threads(1);
    const dtr::Device cpu(dtr::kCPU), dev = on_cpu ? cpu : dtr::testing::second_device(0);
    auto& rt = dtr::remat::Runtime::global();
    rt.set_swap_mode(mode);
    const std::unique_ptr<dtr::zoo::Workload> w = spec.make(/*seed=*/0, dev);
    rt.set_memory_budget(dev, budget);
    if (budget && host_budget && !on_cpu) rt.set_memory_budget(cpu, host_budget);
    auto loss = [&] {
      const double l = w->step();
      uint64_t b;
      std::memcpy(&b, &l, sizeof b);
      send(fd, fmt::format("loss {}", b));
    };
    for (int i = 0; i < warmup; ++i) {
      dtr::remat::reset_stats();
      loss();
      if (!budget) send(fd, fmt::format("warmup_peak {}", dtr::remat::stats(dev).peak_bytes));
    }
    FlopCounter counter(dev);
    if (!budget) rt.set_observer(&counter);
    for (int i = 0; i < steps; ++i) {
      dtr::remat::reset_stats();
      loss();
      const dtr::remat::Stats s = dtr::remat::stats(dev), c = dtr::remat::stats(cpu);
      send(fd, fmt::format("step {} {} {} {} {:.17g} {:.17g} {} {} {} {} {:.17g} {} {} {} {} {}", s.peak_bytes,
                           s.evictions, s.rematerializations, s.recomputed_ops, s.recomputed_flops,
                           s.recompute_seconds_estimated, s.swap_outs, s.swap_ins, s.swap_bytes_out,
                           s.swap_bytes_in, s.swap_seconds_estimated, c.peak_bytes, c.host_tier_bytes,
                           s.eager_frees, s.swapped_bytes, s.resident_bytes));
    }
    rt.set_observer(nullptr);
    if (!budget) send(fd, fmt::format("flops {:.17g} {:.17g}", counter.flops / steps, counter.cost_s / steps));
  } catch (const dtr::OutOfMemoryError& e) {
    outcome = "oom";
    error = first_line(e.what());
  } catch (const std::exception& e) {
    outcome = "error";
    error = first_line(e.what());
  }
  send(fd, "outcome " + outcome + " " + error);
}

PointResult parse_lines(const std::string& text) {
  PointResult r;
  std::stringstream in(text);
  for (std::string line; std::getline(in, line);) {
    std::stringstream ls(line);
    std::string key;
    ls >> key;
    if (key == "loss") {
      uint64_t b = 0;
      ls >> b;
      r.loss_bits.push_back(b);
    } else if (key == "step") {
      StepRow s;
      auto& d = s.dev;
      ls >> d.peak_bytes >> d.evictions >> d.rematerializations >> d.recomputed_ops >> d.recomputed_flops >>
          d.recompute_seconds_estimated >> d.swap_outs >> d.swap_ins >> d.swap_bytes_out >> d.swap_bytes_in >>
          d.swap_seconds_estimated >> s.cpu_peak_bytes >> s.cpu_host_tier_bytes >> d.eager_frees >>
          d.swapped_bytes >> d.resident_bytes;
      r.steps.push_back(s);
    } else if (key == "warmup_peak") {
      int64_t p = 0;
      ls >> p;
      r.warmup_peak = std::max(r.warmup_peak, p);
    } else if (key == "flops") {
      ls >> r.step_flops >> r.step_cost_s;
    } else if (key == "outcome") {
      ls >> r.outcome;
      std::getline(ls, r.error);
      if (!r.error.empty() && r.error[0] == ' ') r.error.erase(0, 1);
    }
  }
  return r;
}

/// Runs one point in a forked child, at most `timeout_s` seconds.
PointResult run_forked(const ModelSpec& spec, SwapMode mode, std::optional<int64_t> budget, const Options& o,
                       int steps, double timeout_s) {
  int fds[2];
  if (pipe(fds) != 0) {
    std::perror("host_tier: pipe");
    std::exit(1);
  }
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid < 0) {
    std::perror("host_tier: fork");
    std::exit(1);
  }
  if (pid == 0) {
    close(fds[0]);
    run_point(fds[1], spec, mode, budget, o.host_budget, o.warmup, steps, o.on_cpu);
    close(fds[1]);
    _exit(0);  // no static destructors: the parent owns the streams
  }
  close(fds[1]);
  std::string text;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  bool timed_out = false;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    const int ready = poll(&p, 1, int(std::min<int64_t>(left.count(), 1000)));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) continue;
    char buf[4096];
    const ssize_t n = read(fds[0], buf, sizeof buf);
    if (n <= 0) break;  // EOF: the child is done
    text.append(buf, size_t(n));
  }
  if (timed_out) kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  close(fds[0]);
  PointResult r = parse_lines(text);
  if (timed_out) {
    r.outcome = "timeout";
    r.error = fmt::format("killed after {:.0f} s with {} of {} measured steps done", timeout_s, r.steps.size(), steps);
  } else if (WIFSIGNALED(status)) {
    r.outcome = "crash";
    r.error = fmt::format("child died of signal {} ({})", WTERMSIG(status), strsignal(WTERMSIG(status)));
  } else if (r.outcome == "crash") {
    r.error = fmt::format("child exited with status {} before reporting", WEXITSTATUS(status));
  }
  return r;
}

// ---- output ---------------------------------------------------------------------

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      return colon == std::string::npos ? line : line.substr(colon + 2);
    }
  }
  return "unknown";
}

struct Baseline {
  int64_t peak = 0;           // what the ratios are of (--peak)
  int64_t measured_peak = 0;  // over the measured steps (after the warm-up)
  int64_t warmup_peak = 0;    // over the warm-up steps
  std::vector<uint64_t> loss_bits;
  double step_flops = 0, step_cost_s = 0;
};

/// Per model × mode: the mean over measured steps of a point, for the summary.
struct Mean {
  bool ok = false;
  std::string outcome;
  double evictions = 0, swap_outs = 0, swap_ins = 0, recomputed_flops = 0, recompute_s = 0, swap_s = 0;
};

class Csv {
 public:
  explicit Csv(const Options& o) : out_(o.out) {
    if (!out_) {
      std::fprintf(stderr, "host_tier: cannot open '%s' for writing\n", o.out.c_str());
      std::exit(1);
    }
    out_ << "# host_tier: the zoo on the second test device (privateuseone:0, CPU kernels, host link 25 GB/s)\n"
         << "# commit: " << (o.commit.empty() ? "unknown" : o.commit) << "\n"
         << "# cpu: " << cpu_model() << "\n"
         << "# flags: " << o.flags << "\n"
         << "# counts per measured step; ratio of the unbudgeted peak on the device ("
         << (o.peak_all_steps ? "over every step, warm-up included" : "over the measured steps") << "); loss as a double\n";
    out_ << "model,mode,point,ratio,budget_bytes,outcome,step,peak_bytes,unbudgeted_peak_bytes,evictions,"
            "rematerializations,recomputed_ops,recomputed_flops,recompute_s_estimated,swap_outs,swap_ins,"
            "swap_bytes_out,swap_bytes_in,swap_s_estimated,cpu_peak_bytes,cpu_host_tier_bytes,eager_frees,"
            "swapped_bytes_end,resident_bytes_end,unbudgeted_step_flops,unbudgeted_warmup_peak_bytes,"
            "unbudgeted_measured_peak_bytes,loss,losses_equal,error\n";
    out_.flush();
  }
  void write(const std::string& model, const std::string& mode, const std::string& point, double ratio,
             std::optional<int64_t> budget, const PointResult& r, const Baseline& base, int warmup, int equal) {
    const std::string b = budget ? std::to_string(*budget) : "";
    const std::string eq = equal < 0 ? "" : std::to_string(equal);
    if (r.steps.empty()) {
      out_ << fmt::format("{},{},{},{:.4f},{},{},,,{},,,,,,,,,,,,,,,,{:.6g},{},{},,{},\"{}\"\n", model, mode, point, ratio,
                          b, r.outcome, base.peak, base.step_flops, base.warmup_peak, base.measured_peak, eq, r.error);
    }
    for (size_t i = 0; i < r.steps.size(); ++i) {
      const auto& d = r.steps[i].dev;
      const size_t li = size_t(warmup) + i;
      const std::string loss = li < r.loss_bits.size() ? fmt::format("{:.9g}", bits_to_double(r.loss_bits[li])) : "";
      out_ << fmt::format("{},{},{},{:.4f},{},{},{},{},{},{},{},{},{:.6g},{:.6g},{},{},{},{},{:.6g},{},{},{},{},{},{:.6g},{},{},{},{},\"{}\"\n",
                          model, mode, point, ratio, b, r.outcome, i, d.peak_bytes, base.peak, d.evictions,
                          d.rematerializations, d.recomputed_ops, d.recomputed_flops, d.recompute_seconds_estimated,
                          d.swap_outs, d.swap_ins, d.swap_bytes_out, d.swap_bytes_in, d.swap_seconds_estimated,
                          r.steps[i].cpu_peak_bytes, r.steps[i].cpu_host_tier_bytes, d.eager_frees, d.swapped_bytes,
                          d.resident_bytes, base.step_flops, base.warmup_peak, base.measured_peak, loss, eq, r.error);
    }
    out_.flush();
  }

 private:
  std::ofstream out_;
};

/// 1: every loss `r` reported equals the baseline's bitwise; 0: one differs; -1: none to compare.
int losses_equal(const PointResult& r, const Baseline& base) {
  if (r.loss_bits.empty()) return -1;
  for (size_t i = 0; i < r.loss_bits.size() && i < base.loss_bits.size(); ++i)
    if (r.loss_bits[i] != base.loss_bits[i]) return 0;
  return 1;
}

Mean mean_of(const PointResult& r) {
  Mean m;
  m.outcome = r.outcome;
  m.ok = r.outcome == "ok";
  if (r.steps.empty()) return m;
  const double n = double(r.steps.size());
  for (const StepRow& s : r.steps) {
    m.evictions += s.dev.evictions / n;
    m.swap_outs += s.dev.swap_outs / n;
    m.swap_ins += s.dev.swap_ins / n;
    m.recomputed_flops += s.dev.recomputed_flops / n;
    m.recompute_s += s.dev.recompute_seconds_estimated / n;
    m.swap_s += s.dev.swap_seconds_estimated / n;
  }
  return m;
}

struct ModeSummary {
  std::string model, mode;
  double min_grid = -1;      // the smallest feasible ratio of the grid
  double min_bisected = -1;  // after bisection
  std::map<double, Mean> at;  // ratio → mean
  Baseline base;
  int mismatches = 0;
};

std::string ratio_key(double r) { return fmt::format("{:.4f}", r); }

void write_summary(const Options& o, const std::vector<ModeSummary>& rows) {
  std::ofstream md(o.summary);
  if (!md) {
    std::fprintf(stderr, "host_tier: cannot open '%s' for writing\n", o.summary.c_str());
    return;
  }
  md << "# Host tier: smallest feasible budget with and without swapping\n\n"
     << "`benchmarks/host_tier` (commit " << (o.commit.empty() ? "unknown" : o.commit) << ", " << cpu_model()
     << "): each model on the second test device (privateuseone:0: CPU kernels, a 25 GB/s host link), budgets "
        "as a ratio of its unbudgeted peak there ("
     << (o.peak_all_steps ? "the largest over every step, warm-up included" : "over the measured steps")
     << "; both peaks are in the CSV). `min ratio`: smallest feasible ratio, bisected to "
     << o.tolerance << " (grid value in brackets). At 0.5 and 0.3, per measured step: evictions, swaps "
        "(out/in), recomputed FLOPs as a fraction of one unbudgeted step's FLOPs (lineage nodes on the device), "
        "and estimated seconds of recomputing vs copying. Counts, not timings. Flags: `"
     << o.flags << "`.\n\n"
     << "| model | mode | min ratio | @0.5 evictions | @0.5 swaps out/in | @0.5 recomputed FLOPs | @0.5 recompute s / "
        "swap s | @0.3 evictions | @0.3 swaps out/in | @0.3 recomputed FLOPs | @0.3 recompute s / swap s | losses |\n"
     << "|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const ModeSummary& s : rows) {
    auto cells = [&](double ratio) -> std::string {
      const auto it = s.at.find(ratio);
      if (it == s.at.end()) return " – | – | – | – |";
      const Mean& m = it->second;
      if (!m.ok) return fmt::format(" {} | | | |", m.outcome);
      const std::string frac =
          s.base.step_flops > 0 ? fmt::format("{:.3f}", m.recomputed_flops / s.base.step_flops) : fmt::format("{:.3g}", m.recomputed_flops);
      return fmt::format(" {:.0f} | {:.0f}/{:.0f} | {} | {:.3g} / {:.3g} |", m.evictions, m.swap_outs, m.swap_ins, frac,
                         m.recompute_s, m.swap_s);
    };
    std::string min = s.min_bisected > 0 ? fmt::format("{:.3f}", s.min_bisected) : std::string("none");
    if (s.min_grid > 0) min += fmt::format(" [{:.2f}]", s.min_grid);
    md << "| " << s.model << " | " << s.mode << " | " << min << " |" << cells(0.5) << cells(0.3) << " "
       << (s.mismatches ? fmt::format("**{} differ**", s.mismatches) : std::string("bitwise equal")) << " |\n";
  }
  md << "\nEvery point ran in a fresh process; `timeout`: a point killed at its limit (" << o.timeout_factor
     << "x the unbudgeted point's time, 10 to " << o.timeout_s << " s: thrashing), `oom`: an OutOfMemoryError, "
     << "`skipped`: not run after " << o.stop_after << " infeasible ratios in a row. Details per step: " << o.out
     << ".\n\n## Checks\n\n";
  std::vector<std::string> notes;
  for (const ModeSummary& off : rows) {
    if (off.mode != "off") continue;
    for (const ModeSummary& on : rows) {
      if (on.model != off.model || on.mode != "auto") continue;
      for (const auto& [ratio, a] : on.at) {
        const auto it = off.at.find(ratio);
        if (it == off.at.end()) continue;
        const Mean& b = it->second;
        if (b.ok && !a.ok && a.outcome != "skipped")
          notes.push_back(fmt::format("{} at {:.2f}: feasible with swapping off, {} with it on", on.model, ratio,
                                      a.outcome));
        if (a.ok && b.ok && a.recomputed_flops > b.recomputed_flops * (1 + 1e-9))
          notes.push_back(fmt::format("{} at {:.2f}: more recomputation with swapping on ({:.4g} FLOP) than off "
                                      "({:.4g} FLOP)", on.model, ratio, a.recomputed_flops, b.recomputed_flops));
      }
      if (on.min_bisected > 0 && off.min_bisected > 0 && on.min_bisected > off.min_bisected + o.tolerance)
        notes.push_back(fmt::format("{}: smallest feasible ratio higher with swapping on ({:.3f}) than off ({:.3f})",
                                    on.model, on.min_bisected, off.min_bisected));
    }
  }
  for (const ModeSummary& m : rows)
    if (m.mismatches)
      notes.push_back(fmt::format("{} swap={}: {} point(s) whose losses differ from the unbudgeted run", m.model,
                                  m.mode, m.mismatches));
  if (notes.empty()) md << "Nothing suspicious: losses bitwise equal everywhere, swapping on never infeasible "
                           "where off is feasible, never more recomputation on than off.\n";
  for (const std::string& n : notes) md << "- " << n << "\n";
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  const auto run_start = std::chrono::steady_clock::now();
  auto over_time = [&] {
    return o.max_seconds > 0 &&
           std::chrono::duration<double>(std::chrono::steady_clock::now() - run_start).count() > o.max_seconds;
  };
  std::vector<const ModelSpec*> specs;
  try {
    for (const std::string& name : o.models) specs.push_back(&dtr::zoo::find_model(name));
  } catch (const dtr::ValueError& e) {
    std::fprintf(stderr, "host_tier: %s\n", e.what());
    return 2;
  }
  Csv csv(o);
  std::vector<ModeSummary> summary;
  int mismatches_total = 0;
  std::fprintf(stderr, "host_tier: %zu models, %zu modes, %zu ratios, %d+%d steps, timeout %.0f s -> %s\n",
               specs.size(), o.modes.size(), o.ratios.size(), o.warmup, o.steps, o.timeout_s, o.out.c_str());
  for (const ModelSpec* spec : specs) {
    if (over_time()) {
      std::fprintf(stderr, "host_tier: %s skipped: over the run's limit of %.0f s\n", spec->name.c_str(), o.max_seconds);
      continue;
    }
    const auto t0 = std::chrono::steady_clock::now();
    const PointResult u = run_forked(*spec, SwapMode::kOff, std::nullopt, o, o.steps, o.timeout_s);
    const double unbudgeted_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double timeout_s = o.timeout_factor > 0
                                 ? std::min(o.timeout_s, std::max(o.min_timeout_s, o.timeout_factor * unbudgeted_s))
                                 : o.timeout_s;
    Baseline base;
    base.loss_bits = u.loss_bits;
    base.step_flops = u.step_flops;
    base.step_cost_s = u.step_cost_s;
    for (const StepRow& s : u.steps) base.measured_peak = std::max(base.measured_peak, s.dev.peak_bytes);
    base.warmup_peak = u.warmup_peak;
    base.peak = o.peak_all_steps ? std::max(base.measured_peak, base.warmup_peak) : base.measured_peak;
    csv.write(spec->name, "off", "unbudgeted", 0, std::nullopt, u, base, o.warmup, -1);
    if (u.outcome != "ok" || base.peak <= 0) {
      std::fprintf(stderr, "host_tier: %s: the unbudgeted run failed (%s: %s); skipped\n", spec->name.c_str(),
                   u.outcome.c_str(), u.error.c_str());
      continue;
    }
    std::fprintf(stderr,
                 "%s: unbudgeted peak %.1f MiB on the device (warm-up %.1f, measured %.1f), %.3g GFLOP per step, %.1f s; "
                 "points stop at %.0f s\n",
                 spec->name.c_str(), double(base.peak) / (1 << 20), double(base.warmup_peak) / (1 << 20),
                 double(base.measured_peak) / (1 << 20), base.step_flops / 1e9, unbudgeted_s, timeout_s);
    for (SwapMode mode : o.modes) {
      const std::string mode_name(dtr::swap_mode_name(mode));
      ModeSummary ms{spec->name, mode_name};
      ms.base = base;
      auto point = [&](double ratio, const std::string& kind, int steps) {
        const int64_t budget = int64_t(std::llround(ratio * double(base.peak)));
        const auto start = std::chrono::steady_clock::now();
        PointResult r;
        if (over_time()) {
          r.outcome = "skipped";
          r.error = fmt::format("over the run's limit of {:.0f} s", o.max_seconds);
        } else {
          r = run_forked(*spec, mode, budget, o, steps, timeout_s);
        }
        const int eq = losses_equal(r, base);
        if (eq == 0) {
          ++ms.mismatches;
          ++mismatches_total;
          std::fprintf(stderr, "!!!! %s swap=%s ratio %.4f: LOSSES DIFFER from the unbudgeted run !!!!\n",
                       spec->name.c_str(), mode_name.c_str(), ratio);
          for (size_t i = 0; i < r.loss_bits.size() && i < base.loss_bits.size(); ++i)
            std::fprintf(stderr, "     step %zu: %.17g vs %.17g\n", i, bits_to_double(r.loss_bits[i]),
                         bits_to_double(base.loss_bits[i]));
        }
        csv.write(spec->name, mode_name, kind, ratio, budget, r, base, o.warmup, eq);
        const Mean m = mean_of(r);
        std::fprintf(stderr, "  %s swap=%-4s %-6s %.4f: %-7s %5.1fs  evict %.0f swap %.0f/%.0f recompute %.3g s swap %.3g s %s\n",
                     spec->name.c_str(), mode_name.c_str(), kind.c_str(), ratio, r.outcome.c_str(),
                     std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), m.evictions,
                     m.swap_outs, m.swap_ins, m.recompute_s, m.swap_s, r.error.c_str());
        return m;
      };
      std::optional<double> below;  // the largest infeasible ratio under the smallest feasible one
      int failed_in_a_row = 0;
      for (double ratio : o.ratios) {
        if (o.stop_after > 0 && failed_in_a_row >= o.stop_after) {
          PointResult skipped;
          skipped.outcome = "skipped";
          skipped.error = fmt::format("after {} infeasible points in a row", failed_in_a_row);
          csv.write(spec->name, mode_name, "budget", ratio, int64_t(std::llround(ratio * double(base.peak))), skipped,
                    base, o.warmup, -1);
          ms.at[std::stod(ratio_key(ratio))] = mean_of(skipped);
          continue;
        }
        const Mean m = point(ratio, "budget", o.steps);
        ms.at[std::stod(ratio_key(ratio))] = m;
        failed_in_a_row = m.ok ? 0 : failed_in_a_row + 1;
        if (m.ok) {
          ms.min_grid = ratio;
          below.reset();
        } else if (!below) {
          below = ratio;
        }
      }
      if (ms.min_grid > 0) {
        double hi = ms.min_grid, lo = below.value_or(0);
        while (o.bisect && hi - lo > o.tolerance && !over_time()) {
          const double mid = 0.5 * (lo + hi);
          (point(mid, "bisect", 1).ok ? hi : lo) = mid;
        }
        ms.min_bisected = hi;
      }
      std::fprintf(stderr, "%s swap=%s: smallest feasible ratio %.4f\n", spec->name.c_str(), mode_name.c_str(),
                   ms.min_bisected);
      summary.push_back(ms);
    }
    std::fprintf(stderr, "%s: %.0f s\n", spec->name.c_str(),
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  write_summary(o, summary);
  if (mismatches_total > 0) {
    std::fprintf(stderr, "host_tier: %d point(s) with losses that differ from the unbudgeted run\n",
                 mismatches_total);
    return 1;
  }
  return 0;
}
