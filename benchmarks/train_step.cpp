// Times one training step (zero_grad, forward, backward, AdamW step) of two
// small models built from dtr::nn modules and prints JSON with the median
// over --iters steps after --warmup steps. benchmarks/train_step_compare.py
// runs the same models in PyTorch and prints the ratio.
//
//   (a) mlp:         batch 128, 784 → 512 → 512 → 10, GELU, cross_entropy
//   (b) transformer: GPT-style, 2 blocks, d_model 128, 4 heads, seq 64,
//                    batch 8, vocab 256, pre-LayerNorm, MLP 4·d_model with GELU,
//                    learned position embedding, untied lm_head without bias
//
//   ./build/benchmarks/train_step --iters 20 --warmup 3 [--threads N] [--budget BYTES]
// Not a Google Benchmark: it is run by the comparison script, which needs the
// per-step medians of whole training steps. Each model reports the median
// wall time, the fastest step and the median CPU time of the process per step.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <time.h>

#include "core/parallel.h"
#include "dtr/dtr.h"

namespace {

using dtr::Tensor;

struct Mlp : dtr::nn::Module {
  Mlp() : Module("Mlp") {
    fc1 = register_module("fc1", dtr::nn::Linear(784, 512));
    fc2 = register_module("fc2", dtr::nn::Linear(512, 512));
    fc3 = register_module("fc3", dtr::nn::Linear(512, 10));
  }
  Tensor forward(const Tensor& x) {
    return fc3->forward(dtr::gelu(fc2->forward(dtr::gelu(fc1->forward(x)))));
  }
  dtr::nn::Linear fc1{nullptr}, fc2{nullptr}, fc3{nullptr};
};

struct Block : dtr::nn::Module {
  explicit Block(int64_t d, int64_t heads) : Module("Block") {
    ln_1 = register_module("ln_1", dtr::nn::LayerNorm(std::vector<int64_t>{d}));
    attn = register_module("attn", dtr::nn::CausalSelfAttention(d, heads));
    ln_2 = register_module("ln_2", dtr::nn::LayerNorm(std::vector<int64_t>{d}));
    c_fc = register_module("c_fc", dtr::nn::Linear(d, 4 * d));
    c_proj = register_module("c_proj", dtr::nn::Linear(4 * d, d));
  }
  Tensor forward(const Tensor& x) {
    Tensor h = dtr::add(x, attn->forward(ln_1->forward(x)));
    return dtr::add(h, c_proj->forward(dtr::gelu(c_fc->forward(ln_2->forward(h)))));
  }
  dtr::nn::LayerNorm ln_1{nullptr}, ln_2{nullptr};
  dtr::nn::CausalSelfAttention attn{nullptr};
  dtr::nn::Linear c_fc{nullptr}, c_proj{nullptr};
};

struct Transformer : dtr::nn::Module {
  Transformer(int64_t vocab, int64_t block_size, int64_t d, int64_t heads, int64_t layers)
      : Module("Transformer") {
    wte = register_module("wte", dtr::nn::Embedding(vocab, d));
    wpe = register_module("wpe", dtr::nn::Embedding(block_size, d));
    for (int64_t i = 0; i < layers; ++i)
      blocks.push_back(register_module("h" + std::to_string(i), std::make_shared<Block>(d, heads)));
    ln_f = register_module("ln_f", dtr::nn::LayerNorm(std::vector<int64_t>{d}));
    lm_head = register_module("lm_head", dtr::nn::Linear(d, vocab, false));
  }
  /// idx int64 (B, T) → logits (B, T, vocab).
  Tensor forward(const Tensor& idx) {
    const int64_t T = idx.size(1);
    Tensor x = dtr::add(wte->forward(idx), wpe->forward(dtr::arange(T)));
    for (auto& b : blocks) x = b->forward(x);
    return lm_head->forward(ln_f->forward(x));
  }
  dtr::nn::Embedding wte{nullptr}, wpe{nullptr};
  std::vector<std::shared_ptr<Block>> blocks;
  dtr::nn::LayerNorm ln_f{nullptr};
  dtr::nn::Linear lm_head{nullptr};
};

struct Timing {
  double median_ms = 0, min_ms = 0;
  double cpu_median_ms = 0;  // CPU time of the whole process (all threads) per step
  double last_loss = 0;
  int64_t parameters = 0;
};

/// CPU time consumed so far by all threads of this process, in milliseconds.
double process_cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) * 1e3 + double(ts.tv_nsec) * 1e-6;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

/// Median wall and CPU time of `step` (which returns the loss) over `iters`
/// runs after `warmup`. CPU time is the steadier figure on a loaded machine:
/// it does not count time spent waiting for a core.
Timing time_steps(const std::function<double()>& step, int warmup, int iters) {
  Timing t;
  for (int i = 0; i < warmup; ++i) t.last_loss = step();
  std::vector<double> ms, cpu_ms;
  for (int i = 0; i < iters; ++i) {
    const double cpu_start = process_cpu_ms();
    const auto start = std::chrono::steady_clock::now();
    t.last_loss = step();
    const auto end = std::chrono::steady_clock::now();
    cpu_ms.push_back(process_cpu_ms() - cpu_start);
    ms.push_back(std::chrono::duration<double, std::milli>(end - start).count());
  }
  t.median_ms = median(ms);
  t.min_ms = *std::min_element(ms.begin(), ms.end());
  t.cpu_median_ms = median(cpu_ms);
  return t;
}

int64_t count_parameters(const dtr::nn::Module& m) {
  int64_t n = 0;
  for (const auto& p : m.parameters()) n += p.numel();
  return n;
}

Timing bench_mlp(int warmup, int iters) {
  dtr::manual_seed(0);
  Mlp model;
  dtr::optim::AdamW opt(model.parameters(), dtr::optim::AdamWOptions(1e-3));
  const Tensor x = dtr::randn({128, 784});
  const Tensor y = dtr::randint(0, 10, {128});
  auto step = [&] {
    opt.zero_grad();
    Tensor loss = dtr::cross_entropy(model.forward(x), y);
    loss.backward();
    opt.step();
    return loss.item<double>();
  };
  Timing t = time_steps(step, warmup, iters);
  t.parameters = count_parameters(model);
  return t;
}

Timing bench_transformer(int warmup, int iters) {
  constexpr int64_t B = 8, T = 64, C = 128, V = 256;
  dtr::manual_seed(0);
  Transformer model(V, T, C, 4, 2);
  dtr::optim::AdamW opt(model.parameters(), dtr::optim::AdamWOptions(1e-3));
  const Tensor idx = dtr::randint(0, V, {B, T});
  const Tensor targets = dtr::randint(0, V, {B * T});
  auto step = [&] {
    opt.zero_grad();
    Tensor logits = model.forward(idx);
    Tensor loss = dtr::cross_entropy(dtr::reshape(logits, {B * T, V}), targets);
    loss.backward();
    opt.step();
    return loss.item<double>();
  };
  Timing t = time_steps(step, warmup, iters);
  t.parameters = count_parameters(model);
  return t;
}

void print_json(const char* name, const Timing& t, bool last) {
  std::printf("    \"%s\": {\"median_ms\": %.4f, \"min_ms\": %.4f, \"cpu_median_ms\": %.4f, \"loss\": %.6f, "
              "\"parameters\": %lld}%s\n",
              name, t.median_ms, t.min_ms, t.cpu_median_ms, t.last_loss, static_cast<long long>(t.parameters),
              last ? "" : ",");
}

[[noreturn]] void usage(const char* argv0) {
  std::fprintf(stderr, "usage: %s [--iters N] [--warmup N] [--threads N] [--budget BYTES] [--model mlp|transformer|all]\n",
               argv0);
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  int iters = 20, warmup = 3;
  std::optional<int64_t> budget;
  std::string which = "all";
  for (int i = 1; i < argc; ++i) {
    const auto next = [&]() -> const char* {
      if (i + 1 >= argc) usage(argv[0]);
      return argv[++i];
    };
    if (!std::strcmp(argv[i], "--iters")) iters = std::atoi(next());
    else if (!std::strcmp(argv[i], "--warmup")) warmup = std::atoi(next());
    else if (!std::strcmp(argv[i], "--threads")) dtr::set_num_threads(std::atoi(next()));
    else if (!std::strcmp(argv[i], "--budget")) budget = std::atoll(next());
    else if (!std::strcmp(argv[i], "--model")) which = next();
    else usage(argv[0]);
  }
  if (iters < 1 || warmup < 0 || (which != "all" && which != "mlp" && which != "transformer")) usage(argv[0]);
  if (budget) dtr::remat::set_memory_budget(*budget);

  try {
    std::printf("{\n  \"library\": \"dtr\",\n  \"threads\": %d,\n  \"iters\": %d,\n  \"warmup\": %d,\n",
                dtr::num_threads(), iters, warmup);
    std::printf("  \"models\": {\n");
    if (which == "all" || which == "mlp") print_json("mlp", bench_mlp(warmup, iters), which == "mlp");
    if (which == "all" || which == "transformer")
      print_json("transformer", bench_transformer(warmup, iters), true);
    const dtr::remat::Stats st = dtr::remat::stats();
    std::printf("  },\n  \"remat\": {\"peak_bytes\": %lld, \"evictions\": %lld, \"rematerializations\": %lld}\n}\n",
                static_cast<long long>(st.peak_bytes), static_cast<long long>(st.evictions),
                static_cast<long long>(st.rematerializations));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "train_step: %s\n", e.what());
    return 1;
  }
  return 0;
}
