// A child process for tests/remat/planner_test.cpp: DTR_PLAN records a whole
// run and plans it at exit, so each try needs a fresh process. Trains a
// small MLP for three steps with SGD and prints, at the end, one line
// `evictions <n> recomputed_ops <n> budget <bytes or none>`.
#include <cstdio>
#include <exception>
#include <vector>

#include <dtr/dtr.h>

int main() {
  try {
    dtr::manual_seed(3);
    auto net = dtr::nn::Sequential();
    net->push_back(dtr::nn::Linear(16, 64));
    for (int i = 0; i < 6; ++i) {
      net->push_back(dtr::nn::GELU());
      net->push_back(dtr::nn::Linear(64, 64));
    }
    net->push_back(dtr::nn::Linear(64, 4));
    dtr::optim::SGDOptions o;
    o.lr(0.05);
    dtr::optim::SGD opt(net->parameters(), o);
    std::vector<float> xs(256 * 16);
    for (size_t i = 0; i < xs.size(); ++i) xs[i] = float(i % 13) / 13.0f - 0.5f;
    std::vector<int64_t> ys(256);
    for (size_t i = 0; i < ys.size(); ++i) ys[i] = int64_t(i % 4);
    const dtr::Tensor x = dtr::from_vector(xs, {256, 16});
    const dtr::Tensor y = dtr::from_vector(ys, {256});
    for (int step = 0; step < 3; ++step) {
      opt.zero_grad();
      dtr::Tensor loss = dtr::cross_entropy((*net)(x), y);
      loss.backward();
      opt.step();
      std::printf("loss %.6f\n", double(loss.item<float>()));
    }
    const dtr::remat::Stats s = dtr::remat::stats();
    const auto budget = dtr::remat::memory_budget();
    std::printf("evictions %lld recomputed_ops %lld budget %s\n", static_cast<long long>(s.evictions),
                static_cast<long long>(s.recomputed_ops),
                budget ? std::to_string(*budget).c_str() : "none");
  } catch (const std::exception& e) {
    std::printf("error: %s\n", e.what());
    return 1;
  }
  return 0;
}
