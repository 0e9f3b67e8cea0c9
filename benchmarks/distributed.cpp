// Data-parallel training of one zoo model (benchmarks/models/) on the ranks
// of mpirun, for benchmarks/distributed.sh: every rank trains on its share
// of the model's fixed batch (Workload::shard_batch: N ranks together train
// on the batch one process trains on), one kernel thread per rank.
//
//   mpirun -np 2 ./build/benchmarks/distributed --model gpt --comm ddp
//       [--zero] [--steps 10] [--warmup 2] [--budget BYTES] [--bucket-mb 25]
//
// --comm says how the gradients are averaged over the ranks:
//   none  not at all (each rank's compute alone: the baseline)
//   sync  after backward, in buckets of --bucket-mb MiB (reverse parameter
//         order, as DistributedDataParallel fills them), one blocking
//         all_reduce(mean) per bucket: the time of these all-reduces is
//         comm_ms, all of it exposed
//   ddp   dtr::nn::parallel::DistributedDataParallel with bucket_cap_mb
//         --bucket-mb: buckets all-reduced while backward runs, what is
//         left waited for at its end (inside backward_ms)
// So backward_ms(ddp) − backward_ms(none) is the all-reduce time DDP did
// not hide, against comm_ms(sync) for the same all-reduces run alone.
// --zero shards the optimizer state (zero_redundancy) over the ranks.
// --budget caps each rank's memory from the first step on; a step that
// does not fit ends the program with exit code 3 (every rank runs the same
// shapes, so every rank fails alike; if not, the others' next collective
// times out after DTR_COLLECTIVE_TIMEOUT).
//
// Rank 0 prints one line: `result key=value ...` with the medians over the
// measured steps (the largest over the ranks) of step_ms, backward_ms
// (zero_grad, forward, loss, backward, DDP's wait included) and comm_ms;
// the peak of dtr's storage bytes over every step (warm-up included; the
// largest over the ranks) and the bytes of optimizer state on the rank
// holding most. Not a Google Benchmark program: distributed.sh runs it.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "benchmarks/models/zoo.h"
#include "dtr/dtr.h"
#include "eager/distributed/distributed.h"
#include "eager/nn/parallel/ddp.h"

namespace {

namespace dist = dtr::distributed;
using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

[[noreturn]] void usage(const std::string& error) {
  std::fprintf(stderr,
               "distributed: %s\nusage: distributed --model NAME [--comm none|sync|ddp] [--zero] "
               "[--steps N] [--warmup N] [--budget BYTES] [--bucket-mb MB]\n",
               error.c_str());
  std::exit(2);
}

int64_t parse_int(const std::string& flag, const std::string& text, int64_t min) {
  char* end = nullptr;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || v < min) usage(flag + " expects an integer >= " + std::to_string(min));
  return v;
}

/// The gradients of `params` in buckets of at most `cap` bytes, in reverse
/// parameter order (DistributedDataParallel's order: the last layers'
/// gradients are ready first).
std::vector<std::vector<dtr::Tensor>> buckets_of(const std::vector<dtr::Tensor>& params, int64_t cap) {
  std::vector<std::vector<dtr::Tensor>> out(1);
  int64_t bytes = 0;
  for (auto it = params.rbegin(); it != params.rend(); ++it) {
    if (bytes > 0 && bytes + it->nbytes() > cap) {
      out.emplace_back();
      bytes = 0;
    }
    out.back().push_back(*it);
    bytes += it->nbytes();
  }
  return out;
}

/// Averages the gradients over the ranks, bucket by bucket, blocking; returns
/// the milliseconds spent in the all-reduces alone (not packing the buckets).
double average_gradients_sync(const std::vector<std::vector<dtr::Tensor>>& buckets) {
  dtr::NoGradGuard no_grad;
  double comm = 0;
  for (const auto& bucket : buckets) {
    std::vector<dtr::Tensor> flat;
    for (const dtr::Tensor& p : bucket) flat.push_back(p.grad().reshape({-1}));
    dtr::Tensor packed = dtr::cat(flat);
    const auto t0 = Clock::now();
    dist::all_reduce(packed, dist::ReduceOp::kMean);
    comm += ms_since(t0);
    int64_t at = 0;
    for (const dtr::Tensor& p : bucket) {
      p.grad().reshape({-1}).copy_(packed.slice(0, at, at + p.numel()));
      at += p.numel();
    }
  }
  return comm;
}

}  // namespace

int main(int argc, char** argv) {
  std::string model, comm = "ddp";
  bool zero = false;
  int64_t steps = 10, warmup = 2, bucket_mb = 25;
  std::optional<int64_t> budget;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "-h" || flag == "--help") usage("data-parallel training of one zoo model");
    if (flag == "--zero") {
      zero = true;
      continue;
    }
    if (i + 1 >= argc) usage(flag + " needs a value");
    const std::string value = argv[++i];
    if (flag == "--model") model = value;
    else if (flag == "--comm") comm = value;
    else if (flag == "--steps") steps = parse_int(flag, value, 1);
    else if (flag == "--warmup") warmup = parse_int(flag, value, 0);
    else if (flag == "--budget") budget = parse_int(flag, value, 1);
    else if (flag == "--bucket-mb") bucket_mb = parse_int(flag, value, 1);
    else usage("unknown flag " + flag);
  }
  if (model.empty()) usage("--model is required");
  if (comm != "none" && comm != "sync" && comm != "ddp") usage("--comm must be none, sync or ddp");
  int rank = 0;
  try {
    dist::init_process_group("mpi");
    rank = dist::get_rank();
    const int world = dist::get_world_size();
    dtr::set_num_threads(1);
    const dtr::zoo::ModelSpec& spec = dtr::zoo::find_model(model);
    std::unique_ptr<dtr::zoo::Workload> w = spec.make(/*seed=*/0);
    w->shard_batch(rank, world);
    if (zero) w->shard_optimizer_state();
    std::unique_ptr<dtr::nn::parallel::DistributedDataParallel> ddp;
    if (comm == "ddp") {
      ddp = std::make_unique<dtr::nn::parallel::DistributedDataParallel>(
          w->model(), dtr::nn::parallel::DDPOptions{.bucket_cap_mb = double(bucket_mb)});
    }
    const auto buckets = buckets_of(w->optimizer().params(), bucket_mb << 20);
    dtr::remat::set_memory_budget(budget);
    dtr::remat::reset_stats();

    std::vector<double> step_ms, backward_ms, comm_ms;
    double loss = 0;
    for (int64_t s = 0; s < warmup + steps; ++s) {
      dist::barrier();  // every rank starts the step together
      const auto t0 = Clock::now();
      loss = w->forward_backward();
      const double backward = ms_since(t0);
      const double c = comm == "sync" ? average_gradients_sync(buckets) : 0.0;
      w->optimizer().step();
      const double step = ms_since(t0);
      if (s >= warmup) {
        step_ms.push_back(step);
        backward_ms.push_back(backward);
        comm_ms.push_back(c);
      }
    }
    const dtr::remat::Stats st = dtr::remat::stats();
    // The largest over the ranks: the job runs at the pace of its slowest rank.
    dtr::Tensor figures = dtr::from_vector(std::vector<double>{
        median(step_ms), median(backward_ms), median(comm_ms), double(st.peak_bytes),
        double(w->optimizer().state_nbytes()), double(st.evictions)});
    dist::all_reduce(figures, dist::ReduceOp::kMax);
    const std::vector<double> f = figures.to_vector<double>();
    if (rank == 0) {
      std::printf(
          "result model=%s world=%d comm=%s zero=%d budget_bytes=%lld steps=%lld step_ms=%.3f "
          "backward_ms=%.3f comm_ms=%.3f peak_bytes=%.0f state_bytes=%.0f evictions=%.0f loss=%.9g\n",
          model.c_str(), world, comm.c_str(), zero ? 1 : 0, static_cast<long long>(budget.value_or(-1)),
          static_cast<long long>(steps), f[0], f[1], f[2], f[3], f[4], f[5], loss);
      std::fflush(stdout);
    }
    ddp.reset();
    dist::destroy_process_group();
    return 0;
  } catch (const dtr::OutOfMemoryError& e) {
    std::fprintf(stderr, "distributed: rank %d: out of memory under the budget: %s\n", rank, e.what());
    return 3;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "distributed: rank %d: %s\n", rank, e.what());
    return 1;
  }
}
