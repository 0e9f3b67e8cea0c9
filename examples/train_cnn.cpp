// Trains a small ResNet on Fashion-MNIST under a memory budget.
//
// Model (width w = --width):
//   stem      conv 3x3 (1 → w) + BatchNorm + ReLU               28 x 28
//   stage 1   --blocks residual blocks w → w                    28 x 28
//   stage 2   --blocks residual blocks w → 2w, the first stride 2  14 x 14
//   stage 3   --blocks residual blocks 2w → 4w, the first stride 2  7 x 7
//   head      global average pool, Linear(4w, 10)
// A residual block is relu(bn2(conv2(relu(bn1(conv1(x))))) + shortcut(x)),
// the shortcut a 1x1 conv + BatchNorm where the shape changes (ResNet "B").
//
// Data: Debian's `dataset-fashion-mnist` package
// (/usr/share/datasets/fashion-mnist/{train,t10k}-{images-idx3,labels-idx1}-ubyte.gz),
// IDX files read by dtr::data::datasets::read_idx_ubyte; --data DIR for another copy. Each epoch visits
// the training images in an order drawn from dtr's generator; pixels are
// scaled to [0, 1] and normalized with the training set's mean and std.
//
// Training: AdamW with linear warm-up and cosine decay to zero. With
// --budget-fraction F the program measures the peak memory of a training
// step with no budget, then trains under F times that peak; the losses are
// bitwise those of a run with no budget. --plan records one training step and
// prints what every budget would cost (dtr::remat::plan) without training;
// --budget-fraction auto trains under the smallest budget whose predicted
// slowdown is within --max-slowdown.
//
//   ./build/examples/train_cnn --epochs 2 --budget-fraction 0.5
//   ./build/examples/train_cnn --plan --plan-svg plan.svg
//   ./build/examples/train_cnn --help
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include <dtr/dtr.h>

#include "common.h"

namespace {

using dtr::Tensor;
using examples::DataError;
using examples::strprintf;

constexpr const char* kProgram = "train_cnn";
constexpr const char* kDefaultData = "/usr/share/datasets/fashion-mnist";
constexpr int64_t kClasses = 10;
// Mean and standard deviation of the Fashion-MNIST training pixels in [0, 1].
constexpr float kPixelMean = 0.2860f, kPixelStd = 0.3530f;

struct Config {
  int64_t epochs = 2;
  int64_t steps = 0;  // 0: every step of every epoch
  int64_t batch_size = 128;
  int64_t width = 16;
  int64_t blocks = 1;
  double lr = 3e-3;
  double weight_decay = 0.05;
  int64_t warmup = 100;
  int64_t seed = 0;
  int64_t limit = 0;  // 0: every example
  int64_t log_interval = 50;
  std::string data = kDefaultData;
  std::string device = "cpu";
  int64_t threads = 1;
  examples::BudgetFlag budget_fraction;
  examples::PlanFlags plan;
};

// ---- IDX files through dtr::data ----------------------------------------------------

/// An IDX file's dimensions (dims[0] the number of items, after --limit) and
/// bytes.
using Idx = dtr::data::datasets::IdxFile;

std::string missing_message(const std::string& path) {
  if (path.rfind(kDefaultData, 0) == 0) {
    return strprintf("%s not found: install Debian's 'dataset-fashion-mnist' package "
                     "(sudo apt-get install dataset-fashion-mnist) or pass --data DIR",
                     path.c_str());
  }
  return strprintf("%s: no such file (--data DIR must hold the four Fashion-MNIST files "
                   "train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz, "
                   "t10k-images-idx3-ubyte.gz, t10k-labels-idx1-ubyte.gz)",
                   path.c_str());
}

/// Reads an IDX file of unsigned bytes with `ndims` dimensions, keeping the
/// first `limit` items (0: all), through dtr::data::datasets::read_idx_ubyte.
/// Throws DataError for a missing, unreadable, corrupt or truncated file or
/// a wrong magic number.
Idx read_idx(const std::string& path, int ndims, int64_t limit) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) throw DataError(missing_message(path));
  try {
    return dtr::data::datasets::read_idx_ubyte(path, ndims, limit);
  } catch (const dtr::ValueError& e) {
    throw DataError(e.what());
  }
}

struct Dataset {
  int64_t n = 0, rows = 0, cols = 0;
  std::vector<uint8_t> images;  // (n, rows, cols)
  std::vector<uint8_t> labels;  // (n), each < 10
};

Dataset load_split(const std::string& dir, const std::string& prefix, int64_t limit) {
  const std::string images_path = dir + "/" + prefix + "-images-idx3-ubyte.gz";
  const std::string labels_path = dir + "/" + prefix + "-labels-idx1-ubyte.gz";
  Idx images = read_idx(images_path, 3, limit);
  Idx labels = read_idx(labels_path, 1, limit);
  if (images.dims[0] != labels.dims[0]) {
    throw DataError(strprintf("%s has %lld images but %s has %lld labels", images_path.c_str(),
                              static_cast<long long>(images.dims[0]), labels_path.c_str(),
                              static_cast<long long>(labels.dims[0])));
  }
  for (size_t i = 0; i < labels.bytes.size(); ++i) {
    if (labels.bytes[i] >= kClasses) {
      throw DataError(strprintf("%s: label %d of item %zu is not a class in 0..9",
                                labels_path.c_str(), labels.bytes[i], i));
    }
  }
  Dataset d;
  d.n = images.dims[0];
  d.rows = images.dims[1];
  d.cols = images.dims[2];
  d.images = std::move(images.bytes);
  d.labels = std::move(labels.bytes);
  return d;
}

/// Images float32 (B, 1, rows, cols), normalized; labels int64 (B).
struct Batch {
  Tensor x, y;
};

Batch make_batch(const Dataset& d, const std::vector<int64_t>& order, int64_t begin, int64_t end) {
  const int64_t B = end - begin, pixels = d.rows * d.cols;
  std::vector<float> x(size_t(B * pixels));
  std::vector<int64_t> y(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) {
    const int64_t i = order[size_t(begin + b)];
    const uint8_t* img = d.images.data() + i * pixels;
    for (int64_t p = 0; p < pixels; ++p)
      x[size_t(b * pixels + p)] = (float(img[p]) / 255.0f - kPixelMean) / kPixelStd;
    y[size_t(b)] = d.labels[size_t(i)];
  }
  return {dtr::from_vector(x, {B, 1, d.rows, d.cols}), dtr::from_vector(y, {B})};
}

/// A permutation of [0, n) drawn from dtr's generator: the indices sorted by
/// a uniform key each.
std::vector<int64_t> shuffled(int64_t n) {
  const std::vector<float> keys = dtr::rand({n}).to_vector<float>();
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return keys[size_t(a)] < keys[size_t(b)]; });
  return order;
}

// ---- model ----------------------------------------------------------------------------

dtr::nn::Conv2d conv(int64_t in, int64_t out, int64_t k, int64_t stride) {
  return dtr::nn::Conv2d(in, out, k, stride, /*padding=*/k / 2, /*dilation=*/1,
                                           /*groups=*/1, /*bias=*/false);
}

class ResidualBlockImpl : public dtr::nn::Module {
 public:
  ResidualBlockImpl(int64_t in, int64_t out, int64_t stride) : Module("ResidualBlock") {
    conv1 = register_module("conv1", conv(in, out, 3, stride));
    bn1 = register_module("bn1", dtr::nn::BatchNorm2d(out));
    conv2 = register_module("conv2", conv(out, out, 3, 1));
    bn2 = register_module("bn2", dtr::nn::BatchNorm2d(out));
    if (stride != 1 || in != out) {
      shortcut = register_module("shortcut", dtr::nn::Sequential(conv(in, out, 1, stride),
                                                     dtr::nn::BatchNorm2d(out)));
    }
  }
  /// x (N, in, H, W) → (N, out, H/stride, W/stride)
  Tensor forward(const Tensor& x) {
    const Tensor y = bn2(conv2(dtr::relu(bn1(conv1(x)))));
    return dtr::relu(y + (shortcut ? shortcut(x) : x));
  }
  dtr::nn::Conv2d conv1{nullptr}, conv2{nullptr};
  dtr::nn::BatchNorm2d bn1{nullptr}, bn2{nullptr};
  dtr::nn::Sequential shortcut{nullptr};  // null for the identity
};
TORCH_MODULE(ResidualBlock);

class ResNet : public dtr::nn::Module {
 public:
  ResNet(int64_t width, int64_t blocks) : Module("ResNet") {
    stem = register_module("stem", dtr::nn::Sequential(conv(1, width, 3, 1),
                                           dtr::nn::BatchNorm2d(width),
                                           dtr::nn::ReLU()));
    layers = register_module("layers", dtr::nn::Sequential());
    int64_t in = width;
    for (int64_t stage = 0; stage < 3; ++stage) {
      const int64_t out = width << stage;
      for (int64_t b = 0; b < blocks; ++b) {
        layers->push_back(ResidualBlock(in, out, (stage > 0 && b == 0) ? 2 : 1));
        in = out;
      }
    }
    fc = register_module("fc", dtr::nn::Linear(in, kClasses));
  }
  /// x (N, 1, H, W) → logits (N, 10)
  Tensor forward(const Tensor& x) {
    const Tensor features = layers(stem(x));            // (N, 4w, H/4, W/4)
    return fc(dtr::mean(features, {2, 3}));             // global average pool
  }
  dtr::nn::Sequential stem{nullptr}, layers{nullptr};
  dtr::nn::Linear fc{nullptr};
};

// ---- training -----------------------------------------------------------------------------

struct Trainer {
  dtr::Device device;  // where the weights live (--device)
  std::shared_ptr<ResNet> model;
  std::unique_ptr<dtr::optim::AdamW> opt;
};

Trainer build(const Config& c) {
  dtr::manual_seed(uint64_t(c.seed));
  Trainer t;
  t.model = std::make_shared<ResNet>(c.width, c.blocks);
  // Initialised on the CPU from the seed, then moved: the same weights on every device.
  t.device = dtr::Device(c.device);
  t.model->to(t.device);
  t.opt = std::make_unique<dtr::optim::AdamW>(
      t.model->parameters(), dtr::optim::AdamWOptions(c.lr).weight_decay(c.weight_decay));
  return t;
}

/// Linear warm-up, then cosine decay to zero at `total` steps (steps count from 1).
double lr_at(const Config& c, int64_t step, int64_t total) {
  if (step <= c.warmup) return c.lr * double(step) / double(std::max<int64_t>(c.warmup, 1));
  if (total <= c.warmup) return c.lr;
  const double progress = std::min(1.0, double(step - c.warmup) / double(total - c.warmup));
  return 0.5 * (1.0 + std::cos(M_PI * progress)) * c.lr;
}

double train_step(Trainer& t, const Batch& b, double lr) {
  t.opt->set_lr(lr);
  // Batches are built in host memory, as a loader's are, and copied to the model's device.
  const Tensor loss = dtr::cross_entropy(t.model->forward(b.x.to(t.device)), b.y.to(t.device));
  const double value = loss.item<double>();
  loss.backward();
  t.opt->step();
  // Gradients are dropped as soon as they are used, not at the next step:
  // their memory (and the lineage they hold) is free for evaluation.
  t.opt->zero_grad();
  return value;
}

/// Fraction of `d` classified correctly, in eval mode, in batches of `batch`.
double accuracy(ResNet& model, dtr::Device device, const Dataset& d, int64_t batch) {
  dtr::NoGradGuard no_grad;
  model.eval();
  std::vector<int64_t> order(static_cast<size_t>(d.n));
  std::iota(order.begin(), order.end(), 0);
  int64_t correct = 0;
  for (int64_t begin = 0; begin < d.n; begin += batch) {
    const int64_t end = std::min(d.n, begin + batch);
    const Batch b = make_batch(d, order, begin, end);
    const std::vector<int64_t> predicted = dtr::argmax(model.forward(b.x.to(device)), 1).to_vector<int64_t>();
    for (int64_t i = begin; i < end; ++i) correct += predicted[size_t(i - begin)] == d.labels[size_t(i)];
  }
  model.train();
  return double(correct) / double(d.n);
}

Config parse_flags(int argc, char** argv, bool* help) {
  Config c;
  examples::FlagParser flags(
      kProgram,
      "train_cnn: trains a small ResNet on Fashion-MNIST (Debian's 'dataset-fashion-mnist' "
      "package)\nunder an optional memory budget and prints the test accuracy after each epoch.");
  flags.add("data", &c.data, "folder with the four Fashion-MNIST *-ubyte.gz files");
  flags.add("epochs", &c.epochs, "passes over the training set");
  flags.add("steps", &c.steps, "stop after this many steps in all (0: run every epoch)");
  flags.add("batch-size", &c.batch_size, "images per step");
  flags.add("width", &c.width, "channels of the first stage (doubled at each of the next two)");
  flags.add("layers", &c.blocks, "residual blocks per stage (alias --blocks)");
  flags.add("blocks", &c.blocks, "same as --layers");
  flags.add("lr", &c.lr, "peak learning rate (cosine decay to 0)");
  flags.add("warmup", &c.warmup, "linear warm-up steps");
  flags.add("weight-decay", &c.weight_decay, "AdamW weight decay");
  flags.add("seed", &c.seed, "seed of the weights and the order of the examples");
  flags.add("limit", &c.limit, "use only the first N training and test examples (0: all)");
  flags.add("device", &c.device, "cpu, cuda or cuda:N (the model, its batches and the budget's device)");
  flags.add("threads", &c.threads,
            "kernel threads (0: all cores; on a busy 2-core machine one thread is faster)");
  flags.add("log-interval", &c.log_interval, "steps between log lines");
  examples::add_budget_flags(flags, &c.budget_fraction, &c.plan);
  *help = !flags.parse(argc, argv);
  if (*help) return c;

  using examples::require;
  require(c.epochs >= 1, "--epochs must be at least 1");
  require(c.steps >= 0, "--steps must be non-negative");
  require(c.batch_size >= 2, "--batch-size must be at least 2 (BatchNorm needs two examples)");
  require(c.width >= 1 && c.width <= 1024, "--width must be in [1, 1024]");
  require(c.blocks >= 1, "--layers must be at least 1");
  require(c.lr > 0, "--lr must be positive");
  require(c.warmup >= 0, "--warmup must be non-negative");
  require(c.weight_decay >= 0, "--weight-decay must be non-negative");
  require(c.seed >= 0, "--seed must be non-negative");
  require(c.limit >= 0, "--limit must be non-negative");
  require(c.threads >= 0, "--threads must be non-negative");
  require(c.log_interval >= 1, "--log-interval must be at least 1");
  examples::check_budget_flags(c.budget_fraction, c.plan);
  examples::check_device(c.device);
  return c;
}

int run(int argc, char** argv) {
  bool help = false;
  const Config c = parse_flags(argc, argv, &help);
  if (help) return examples::kExitOk;
  if (c.threads > 0) dtr::set_num_threads(int(c.threads));

  std::error_code ec;
  if (!std::filesystem::is_directory(c.data, ec)) {
    throw DataError(c.data == kDefaultData
                        ? missing_message(std::string(kDefaultData) + "/")
                        : strprintf("--data %s: not a folder", c.data.c_str()));
  }
  const Dataset train = load_split(c.data, "train", c.limit);
  const Dataset test = load_split(c.data, "t10k", c.limit);
  if (train.rows != test.rows || train.cols != test.cols) {
    throw DataError(strprintf("training images are %lldx%lld but test images %lldx%lld",
                              static_cast<long long>(train.rows), static_cast<long long>(train.cols),
                              static_cast<long long>(test.rows), static_cast<long long>(test.cols)));
  }
  if (train.n < 2) throw DataError("need at least two training examples");

  const int64_t steps_per_epoch = (train.n + c.batch_size - 1) / c.batch_size;
  const int64_t total = c.steps > 0 ? std::min(c.steps, c.epochs * steps_per_epoch)
                                    : c.epochs * steps_per_epoch;

  // --plan and --budget-fraction measure steps 1, 2, ... of a throw-away
  // model, each on the first batch in file order.
  const examples::StepMaker make_step = [&] {
    auto probe = std::make_shared<Trainer>(build(c));
    std::vector<int64_t> order(static_cast<size_t>(train.n));
    std::iota(order.begin(), order.end(), 0);
    auto b = std::make_shared<Batch>(make_batch(train, order, 0, std::min(train.n, c.batch_size)));
    return std::function<void()>([&c, total, probe, b, step = int64_t(0)]() mutable {
      ++step;
      train_step(*probe, *b, lr_at(c, step, total));
    });
  };
  if (c.plan.plan) return examples::run_plan(c.plan, make_step, dtr::Device(c.device));
  const examples::BudgetPlan plan =
      examples::plan_budget(c.budget_fraction, c.plan.max_slowdown, make_step,
                              dtr::Device(c.device));

  Trainer t = build(c);
  int64_t n_params = 0;
  for (const Tensor& p : t.model->parameters()) n_params += p.numel();
  std::printf("train_cnn: ResNet with %lld parameters (width %lld, blocks per stage %lld), "
              "device %s\n",
              static_cast<long long>(n_params), static_cast<long long>(c.width),
              static_cast<long long>(c.blocks), c.device.c_str());
  std::printf("data: %s, %lld training and %lld test images of %lldx%lld\n", c.data.c_str(),
              static_cast<long long>(train.n), static_cast<long long>(test.n),
              static_cast<long long>(train.rows), static_cast<long long>(train.cols));
  std::printf("training: %lld epoch(s), %lld steps, batch %lld, AdamW lr %g (warm-up %lld, "
              "cosine to 0), weight decay %g, seed %lld\n",
              static_cast<long long>(c.epochs), static_cast<long long>(total),
              static_cast<long long>(c.batch_size), c.lr, static_cast<long long>(c.warmup),
              c.weight_decay, static_cast<long long>(c.seed));
  std::printf("%s\n", examples::budget_line(plan).c_str());
  std::fflush(stdout);

  examples::StepStats run_stats(t.device);
  examples::Progress progress(0, total);
  dtr::remat::Stats interval_start = run_stats.total(), epoch_start = interval_start;
  double interval_seconds = 0, epoch_seconds = 0, train_seconds = 0;
  double interval_loss = 0, epoch_loss = 0;
  int64_t interval_steps = 0, epoch_steps = 0, interval_images = 0, epoch_images = 0;
  int64_t step = 0;
  double last_accuracy = NAN;
  for (int64_t epoch = 1; epoch <= c.epochs && step < total; ++epoch) {
    const std::vector<int64_t> order = shuffled(train.n);
    for (int64_t begin = 0; begin < train.n && step < total; begin += c.batch_size) {
      ++step;
      const int64_t end = std::min(train.n, begin + c.batch_size);
      run_stats.begin_step();
      const auto t0 = examples::Clock::now();
      const Batch b = make_batch(train, order, begin, end);
      const double loss = train_step(t, b, lr_at(c, step, total));
      const double seconds = examples::seconds_since(t0);
      examples::log_step(step, seconds, run_stats.step());
      interval_seconds += seconds;
      epoch_seconds += seconds;
      train_seconds += seconds;
      interval_loss += loss;
      epoch_loss += loss;
      ++interval_steps;
      ++epoch_steps;
      interval_images += end - begin;
      epoch_images += end - begin;
      const double images_per_second = double(interval_images) / std::max(interval_seconds, 1e-9);
      progress.update(step, strprintf("epoch %lld | loss %.4f | %.0f img/s",
                                      static_cast<long long>(epoch), loss, images_per_second));
      if (step % c.log_interval == 0 || step == 1) {
        progress.line(strprintf("step %5lld/%lld | loss %.9g | %.0f img/s | ",
                                static_cast<long long>(step), static_cast<long long>(total),
                                interval_loss / double(interval_steps), images_per_second) +
                      examples::memory_columns(run_stats.total(), interval_start,
                                               interval_seconds));
        interval_start = run_stats.total();
        interval_seconds = interval_loss = 0;
        interval_steps = interval_images = 0;
      }
    }
    const dtr::remat::Stats now = run_stats.total();
    last_accuracy = accuracy(*t.model, t.device, test, c.batch_size);
    progress.line(strprintf("epoch %lld/%lld | train loss %.9g | test accuracy %.2f%% | %.0f img/s | ",
                            static_cast<long long>(epoch), static_cast<long long>(c.epochs),
                            epoch_loss / double(epoch_steps), 100.0 * last_accuracy,
                            double(epoch_images) / std::max(epoch_seconds, 1e-9)) +
                  examples::memory_columns(now, epoch_start, epoch_seconds));
    epoch_start = interval_start = run_stats.total();
    epoch_seconds = epoch_loss = interval_seconds = interval_loss = 0;
    epoch_steps = epoch_images = interval_steps = interval_images = 0;
  }
  progress.finish();

  const dtr::remat::Stats stats = run_stats.total();
  std::printf("test accuracy %.2f%% after %lld steps (%.1f s of training)\n", 100.0 * last_accuracy,
              static_cast<long long>(step), train_seconds);
  std::printf("%s\n", examples::stats_line(stats, plan, train_seconds).c_str());
  std::printf("%s\n", examples::summary_line(stats, plan, train_seconds).c_str());
  return examples::kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  return examples::run_main(kProgram, [&] { return run(argc, argv); });
}
