// Trains a small MLP classifier on a synthetic task with AdamW:
//   x ~ N(0, I) in 16 dims, label = argmax(x · W_teacher) over 4 classes,
//   model Linear(16, 256) → GELU → Linear(256, 256) → GELU → Linear(256, 4),
//   cross-entropy loss, batch 128, a fresh batch every step.
// Prints the loss every 20 steps, the final loss and accuracy, and the remat
// runtime's statistics. Set DTR_MEMORY_BUDGET (e.g. 1700KiB; the unbudgeted
// peak is about 1.9 MB, of which parameters and AdamW state are ~0.9 MB) to
// train under a memory budget: the losses stay bitwise the same.
//
//   ./build/examples/train_mlp [steps=200] [seed=0]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include <dtr/dtr.h>

namespace {

constexpr int64_t kInputs = 16, kHidden = 256, kClasses = 4, kBatch = 128;

struct Batch {
  dtr::Tensor x, y;
};

// A fresh batch from the global generator: inputs and their teacher labels.
Batch next_batch(const dtr::Tensor& teacher) {
  dtr::NoGradGuard no_grad;
  Batch b;
  b.x = dtr::randn({kBatch, kInputs});
  b.y = dtr::argmax(dtr::matmul(b.x, teacher), 1);
  return b;
}

double accuracy(const dtr::Tensor& logits, const dtr::Tensor& y) {
  dtr::NoGradGuard no_grad;
  const dtr::Tensor correct = dtr::eq(dtr::argmax(logits, 1), y).to(dtr::kFloat32);
  return dtr::mean(correct).item<double>();
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const int steps = argc > 1 ? std::atoi(argv[1]) : 200;
    const uint64_t seed = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 0;
    if (steps <= 0) {
      std::fprintf(stderr, "usage: %s [steps > 0] [seed]\n", argv[0]);
      return 2;
    }
    dtr::manual_seed(seed);
    const dtr::Tensor teacher = dtr::randn({kInputs, kClasses});

    dtr::nn::Sequential model{std::make_shared<dtr::nn::Linear>(kInputs, kHidden),
                              std::make_shared<dtr::nn::GELU>(),
                              std::make_shared<dtr::nn::Linear>(kHidden, kHidden),
                              std::make_shared<dtr::nn::GELU>(),
                              std::make_shared<dtr::nn::Linear>(kHidden, kClasses)};
    int64_t n_params = 0;
    for (const dtr::Tensor& p : model.parameters()) n_params += p.numel();
    dtr::optim::AdamW opt(model.parameters(), {.lr = 1e-3, .weight_decay = 0.01});
    std::printf("train_mlp: %lld parameters, batch %lld, %d steps, budget %s\n",
                static_cast<long long>(n_params), static_cast<long long>(kBatch), steps,
                dtr::remat::memory_budget()
                    ? (std::to_string(*dtr::remat::memory_budget()) + " bytes").c_str()
                    : "unlimited");

    dtr::remat::reset_stats();
    const auto start = std::chrono::steady_clock::now();
    double loss_value = 0;
    for (int step = 1; step <= steps; ++step) {
      {
        const Batch b = next_batch(teacher);
        opt.zero_grad();
        const dtr::Tensor loss = dtr::cross_entropy(model.forward(b.x), b.y);
        loss.backward();
        loss_value = loss.item<double>();
      }  // Dropping the loss lets the runtime prune its lineage before the update.
      opt.step();
      if (step % 20 == 0 || step == 1) std::printf("step %4d  loss %.6f\n", step, loss_value);
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

    model.eval();
    const Batch test = next_batch(teacher);
    dtr::Tensor logits;
    {
      dtr::NoGradGuard no_grad;
      logits = model.forward(test.x);
    }
    const dtr::remat::Stats s = dtr::remat::stats();
    std::printf("final loss %.6f  held-out accuracy %.3f  (%.2f s, %.1f ms/step)\n", loss_value,
                accuracy(logits, test.y), seconds, 1e3 * seconds / steps);
    std::printf("remat: peak %lld bytes, evictions %lld, rematerializations %lld\n",
                static_cast<long long>(s.peak_bytes), static_cast<long long>(s.evictions),
                static_cast<long long>(s.rematerializations));
    return 0;
  } catch (const dtr::Error& e) {
    std::fprintf(stderr, "train_mlp: %s\n", e.what());
    return 1;
  }
}
