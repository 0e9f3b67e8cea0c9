#include "zoo.h"

#include <time.h>

#include <algorithm>
#include <chrono>
#include <cmath>

namespace dtr::zoo {

double Workload::step(Mode mode) {
  optimizer_->zero_grad();
  const Tensor l = loss(mode);
  l.backward();
  optimizer_->step();
  return l.item<double>();
}

double Workload::forward_backward(Mode mode) {
  optimizer_->zero_grad();
  const Tensor l = loss(mode);
  l.backward();
  return l.item<double>();
}

void Workload::shard_batch(int, int) {
  throw NotImplementedError("model zoo: this model has no shard_batch (gpt and the chains have it)");
}

void Workload::shard_optimizer_state() {
  std::vector<Tensor> params = optimizer_->params();
  if (auto* sgd = dynamic_cast<optim::SGD*>(optimizer_.get())) {
    optim::SGDOptions o = sgd->options();
    o.zero_redundancy(true);
    optimizer_ = std::make_unique<optim::SGD>(std::move(params), o);
  } else if (auto* adamw = dynamic_cast<optim::AdamW*>(optimizer_.get())) {
    optim::AdamWOptions o = adamw->options();
    o.zero_redundancy(true);
    optimizer_ = std::make_unique<optim::AdamW>(std::move(params), o);
  } else {
    throw NotImplementedError("model zoo: shard_optimizer_state knows SGD and AdamW only");
  }
}

Tensor batch_rows(const Tensor& t, int rank, int world) {
  const int64_t n = t.size(0);
  DTR_CHECK(world >= 1 && rank >= 0 && rank < world && n % world == 0, ValueError,
            "shard_batch: {} ranks do not split a batch of {} evenly (rank {})", world, n, rank);
  const int64_t b = n / world;
  return loaded(t.slice(0, rank * b, (rank + 1) * b), t.device());
}

Tensor loaded(const Tensor& t, Device device) {
  const TensorOptions opts = TensorOptions(t.dtype()).device(device);
  switch (t.dtype()) {
    case kFloat32: return from_vector(t.to_vector<float>(), t.sizes(), opts);
    case kInt64: return from_vector(t.to_vector<int64_t>(), t.sizes(), opts);
    default: break;
  }
  throw TypeError(fmt::format("model zoo: loaded() takes float32 or int64 batches, got {}", dtype_name(t.dtype())));
}

std::vector<Tensor> Workload::inputs() const {
  std::vector<Tensor> out;
  for (const Tensor* t : inputs_) out.push_back(*t);
  return out;
}

int64_t Workload::parameter_bytes() const {
  int64_t bytes = 0;
  for (const Tensor& p : model_->parameters()) bytes += p.nbytes();
  return bytes;
}

void Workload::place_on(Device device, std::initializer_list<Tensor*> fixed) {
  device_ = device;
  model_->to(device);
  inputs_.assign(fixed.begin(), fixed.end());
  for (Tensor* t : fixed) *t = loaded(*t, device);
}

namespace {

double cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) * 1e3 + double(ts.tv_nsec) * 1e-6;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

StepTimes time_steps(Workload& workload, Mode mode, int steps) {
  DTR_CHECK(steps >= 1, ValueError, "time_steps: expected at least one step, got {}", steps);
  StepTimes t;
  std::vector<double>& wall = t.wall_ms;
  std::vector<double>& cpu = t.cpu_ms;
  for (int i = 0; i < steps; ++i) {
    const auto start = std::chrono::steady_clock::now();
    const double cpu_start = cpu_ms();
    t.loss = workload.step(mode);
    cpu.push_back(cpu_ms() - cpu_start);
    wall.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  t.median_ms = median(wall);
  t.min_ms = *std::min_element(wall.begin(), wall.end());
  t.median_cpu_ms = median(cpu);
  t.min_cpu_ms = *std::min_element(cpu.begin(), cpu.end());
  return t;
}

const std::vector<ModelSpec>& models() {
  static const std::vector<ModelSpec> zoo = [] {
    constexpr ChainShape chain{64, 256, 512}, chain_b2048{64, 2048, 512};
    std::vector<ModelSpec> z = {
        {"chain", "64 x (Linear 512->512, GELU), batch 256, mse_loss; SGD lr 0.01 momentum 0.9", 64,
         [=](uint64_t seed, Device device) { return make_chain(chain, seed, device); }, true, chain},
        {"gpt",
         "GPT pre-LN, 6 blocks, d 256, 8 heads, seq 256, batch 8, vocab 256, dropout 0.1, "
         "cross_entropy; AdamW lr 3e-4",
         6, make_gpt},
        {"resnet", "ResNet-20 (16/32/64, BatchNorm), 1x28x28, batch 64, 10 classes; SGD lr 0.1 momentum 0.9",
         10, make_resnet},
        {"unet",
         "3-level U-Net (16/32/64, BatchNorm), 3x64x64, batch 16, per-pixel cross_entropy over 4 "
         "classes; SGD lr 0.01 momentum 0.9",
         5, make_unet},
        {"lstm", "LSTM unrolled 128 steps, input 256, hidden 256, batch 32, mse on outputs; AdamW lr 1e-3",
         128, make_lstm},
        {"llama",
         "LLaMA pre-RMSNorm, 4 blocks, d 128, 8 heads / 2 kv heads (GQA), RoPE, SwiGLU 352, seq 128, "
         "batch 8, vocab 256, cross_entropy; AdamW lr 1e-3",
         4, make_llama, false},
        {"unet_gn",
         "3-level U-Net (16/32/64, GroupNorm(4), SiLU, ConvTranspose2d up), 3x32x32, batch 8, "
         "per-pixel cross_entropy over 4 classes; SGD lr 0.01 momentum 0.9",
         5, make_unet_gn, false},
        {"moe",
         "top-2 MoE, 4 pre-RMSNorm layers, 8 experts (64->128->64, SiLU), 2048 tokens, sparse "
         "dispatch, load-balancing loss, mse_loss; AdamW lr 1e-3",
         4, make_moe, false},
        {"chain_b2048", "64 x (Linear 512->512, GELU), batch 2048, mse_loss; SGD lr 0.01 momentum 0.9", 64,
         [=](uint64_t seed, Device device) { return make_chain(chain_b2048, seed, device); }, false, chain_b2048},
    };
    return z;
  }();
  return zoo;
}

const ModelSpec& find_model(std::string_view name) {
  std::string known;
  for (const ModelSpec& m : models()) {
    if (m.name == name) return m;
    known += known.empty() ? m.name : ", " + m.name;
  }
  throw ValueError(fmt::format("model zoo: no model called '{}' (known: {})", name, known));
}

int64_t checkpoint_segments(int64_t units) {
  DTR_CHECK(units >= 1, ValueError, "checkpoint_segments: expected at least one unit, got {}", units);
  return std::max<int64_t>(1, std::llround(std::sqrt(double(units))));
}

Tensor run_sequential(const std::vector<std::function<Tensor(const Tensor&)>>& layers, Mode mode,
                      const Tensor& x) {
  if (mode == Mode::kCheckpoint) {
    return checkpoint_sequential(layers, checkpoint_segments(int64_t(layers.size())), x);
  }
  Tensor h = x;
  for (const auto& layer : layers) h = layer(h);
  return h;
}

std::vector<Tensor> run_unit(const std::function<std::vector<Tensor>(const std::vector<Tensor>&)>& fn,
                             Mode mode, const std::vector<Tensor>& inputs) {
  return mode == Mode::kCheckpoint ? checkpoint(fn, inputs) : fn(inputs);
}

Tensor run_unit(const std::function<Tensor(const Tensor&)>& fn, Mode mode, const Tensor& x) {
  return mode == Mode::kCheckpoint ? checkpoint(fn, x) : fn(x);
}

}  // namespace dtr::zoo
