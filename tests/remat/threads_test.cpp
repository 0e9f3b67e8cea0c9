// Ops called from several threads at once under one budget: every thread
// gets the single-threaded numbers and the budget holds.
#include <cstring>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "dtr/dtr.h"

namespace dtr {
namespace {

std::vector<float> run_model(int id) {
  // Deterministic, RNG-free model so threads do not race for the generator.
  std::vector<float> wv(64 * 64), xv(32 * 64);
  for (size_t i = 0; i < wv.size(); ++i) wv[i] = float(((i * 31 + size_t(id)) % 17) - 8) * 0.01f;
  for (size_t i = 0; i < xv.size(); ++i) xv[i] = float(((i * 7 + size_t(id)) % 13) - 6) * 0.1f;
  Tensor w1 = from_vector(wv, {64, 64}), w2 = from_vector(wv, {64, 64});
  w1.requires_grad_();
  w2.requires_grad_();
  Tensor x = from_vector(xv, {32, 64});
  std::vector<float> out;
  for (int step = 0; step < 3; ++step) {
    w1.set_grad(Tensor());
    w2.set_grad(Tensor());
    Tensor h = gelu(linear(x, w1));
    for (int k = 0; k < 6; ++k) h = gelu(linear(h, w2)) + h;
    Tensor loss = (h * h).mean();
    out.push_back(loss.item<float>());
    loss.backward();
    NoGradGuard ng;
    w1.sub_(w1.grad() * 0.1);
    w2.sub_(w2.grad() * 0.1);
  }
  const auto final_w = w1.to_vector<float>();
  out.insert(out.end(), final_w.begin(), final_w.end());
  return out;
}

TEST(Threads, EightModelsUnderOneBudget) {
  std::vector<std::vector<float>> expected;
  remat::reset_stats();
  const int64_t base = remat::stats().resident_bytes;
  for (int id = 0; id < 8; ++id) expected.push_back(run_model(id));
  const int64_t single_peak = remat::stats().peak_bytes - base;
  // Room for all eight at once, minus a third of their activations.
  remat::set_memory_budget(base + 8 * single_peak * 2 / 3);
  remat::reset_stats();
  std::vector<std::vector<float>> got(8);
  std::vector<std::thread> threads;
  for (int id = 0; id < 8; ++id) {
    threads.emplace_back([id, &got] { got[size_t(id)] = run_model(id); });
  }
  for (auto& t : threads) t.join();
  const remat::Stats st = remat::stats();
  remat::set_memory_budget(std::nullopt);
  for (int id = 0; id < 8; ++id) {
    ASSERT_EQ(got[size_t(id)].size(), expected[size_t(id)].size());
    EXPECT_EQ(std::memcmp(got[size_t(id)].data(), expected[size_t(id)].data(),
                          got[size_t(id)].size() * sizeof(float)),
              0)
        << "thread " << id;
  }
  EXPECT_LE(st.peak_bytes, base + 8 * single_peak * 2 / 3);
}

}  // namespace
}  // namespace dtr
