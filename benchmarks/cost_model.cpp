// How far the roofline estimate of an op's recompute cost (Note [scores],
// estimate_seconds in eager/dispatch.h) is from the kernel's measured time on
// this machine, op by op, at the shapes the zoo models run
// (benchmarks/models/). The eviction heuristics rank storages by these costs,
// so an op the estimate prices 20x too cheap is evicted and recomputed far
// more often than it should be.
//
// For each op: the median of --reps kernel times under DTR_COST=measured
// (the time dispatch records in the output's lineage node), the estimate
// under DTR_COST=estimate, and their ratio. One thread.
//
//   ./build/benchmarks/cost_model [--reps 9]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "core/parallel.h"
#include "dtr/dtr.h"

namespace {

using dtr::Tensor;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// The recompute cost the runtime recorded for the storage behind `t`.
double recorded_cost(const Tensor& t) {
  const dtr::remat::Node* producer = dtr::remat::producer(*t.storage());
  return producer ? producer->cost_seconds : 0.0;
}

struct Case {
  const char* name;
  std::function<Tensor()> run;
};

}  // namespace

int main(int argc, char** argv) {
  int reps = 9;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--reps") && i + 1 < argc) {
      reps = std::max(1, std::atoi(argv[++i]));
    } else {
      std::fprintf(stderr, "usage: %s [--reps N]\n", argv[0]);
      return 2;
    }
  }
  dtr::set_num_threads(1);
  auto& rt = dtr::remat::Runtime::global();
  dtr::manual_seed(0);
  dtr::NoGradGuard no_grad;
  // Operands at zoo shapes: the gpt's attention scores (8·8·256·256), its
  // MLP activations (8·256·1024), the lstm's gates (32·1024), a resnet
  // stage-1 activation (64·16·28·28).
  const Tensor scores = dtr::randn({8, 8, 256, 256});
  const Tensor mlp = dtr::randn({8, 256, 1024});
  const Tensor gates = dtr::randn({32, 1024});
  const Tensor act = dtr::randn({64, 16, 28, 28});
  const Tensor x2 = dtr::randn({2048, 256}), w2 = dtr::randn({1024, 256});
  const Tensor conv_w = dtr::randn({16, 16, 3, 3});
  const Tensor bn_mean = dtr::zeros({16}), bn_var = dtr::ones({16});
  const Tensor ln_w = dtr::ones({256}), ln_b = dtr::zeros({256});
  const Tensor target = dtr::randint(0, 256, {2048}, dtr::kInt64);
  const std::vector<Case> cases = {
      {"randn 1M", [] { return dtr::randn({1 << 20}); }},
      {"rand 1M", [] { return dtr::rand({1 << 20}); }},
      {"dropout scores", [&] { return dtr::dropout(scores, 0.1, true); }},
      {"softmax scores", [&] { return dtr::softmax(scores, -1); }},
      {"mul_scalar scores", [&] { return scores * 0.125; }},
      {"add mlp", [&] { return mlp + mlp; }},
      {"gelu mlp", [&] { return dtr::gelu(mlp); }},
      {"sigmoid gates", [&] { return dtr::sigmoid(gates); }},
      {"tanh gates", [&] { return dtr::tanh(gates); }},
      {"mul gates", [&] { return gates * gates; }},
      {"relu act", [&] { return dtr::relu(act); }},
      {"layer_norm x2", [&] { return dtr::layer_norm(x2, {256}, ln_w, ln_b); }},
      {"batch_norm act", [&] { return dtr::batch_norm(act, bn_mean, bn_var, Tensor(), Tensor(), true); }},
      {"linear 2048x256x1024", [&] { return dtr::linear(x2, w2); }},
      {"conv2d act 3x3", [&] { return dtr::conv2d(act, conv_w, Tensor(), {1, 1}, {1, 1}); }},
      {"cross_entropy", [&] { return dtr::cross_entropy(dtr::randn({2048, 256}), target); }},
  };
  std::printf("%-24s %12s %12s %10s\n", "op", "measured us", "estimate us", "meas/est");
  for (const Case& c : cases) {
    std::vector<double> measured, estimated;
    for (int r = 0; r < reps; ++r) {
      rt.set_cost_model(dtr::CostModel::kMeasured);
      measured.push_back(recorded_cost(c.run()));
      rt.set_cost_model(dtr::CostModel::kEstimate);
      estimated.push_back(recorded_cost(c.run()));
    }
    const double m = median(measured) * 1e6, e = median(estimated) * 1e6;
    std::printf("%-24s %12.1f %12.1f %10.1f\n", c.name, m, e, e > 0 ? m / e : 0.0);
  }
  return 0;
}
