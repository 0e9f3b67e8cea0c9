// End-to-end tests of the example programs (examples/train_gpt,
// examples/train_cnn, examples/train_mlp): each runs a few steps on a small
// slice of the real data from Debian's packages (train_mlp: synthetic data),
// as a child process, and the tests read what it prints. They check that
//   - the loss printed at every step is bitwise the same with and without a
//     budget of half the measured peak, and that the budgeted run evicts and
//     stays under its budget;
//   - a run split by --save / --resume prints what the run straight through
//     prints, bitwise;
//   - bad input (missing or truncated data, nonsense flags, a budget too small
//     for the model) ends with a message on stderr and a non-zero exit code.
// The programs are found next to this binary (build/tests/../examples/) or
// in $DTR_EXAMPLES_DIR; a test skips when they were not built or when the
// data package is not installed.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "child_process.h"

namespace {

namespace fs = std::filesystem;

constexpr const char* kFortunes = "/usr/share/games/fortunes";
constexpr const char* kFashionMnist = "/usr/share/datasets/fashion-mnist";

using dtr::testing::Output;
using dtr::testing::read_all;
using dtr::testing::TempDir;

/// The example `name` or nullopt when it was not built.
std::optional<fs::path> program(const std::string& name) {
  if (const char* env = std::getenv("DTR_EXAMPLES_DIR")) {
    const fs::path p = fs::path(env) / name;
    if (access(p.c_str(), X_OK) != 0) return std::nullopt;
    return p;
  }
  return dtr::testing::built_program("examples", name);
}

/// Runs `exe args...` with no DTR_* variable set but DTR_MEMORY_BUDGET =
/// `budget_env` (when given) and `env`, capturing stdout and stderr.
Output run(const fs::path& exe, const std::vector<std::string>& args,
           const std::optional<std::string>& budget_env = std::nullopt,
           std::vector<std::pair<std::string, std::string>> env = {}) {
  if (budget_env) env.emplace_back("DTR_MEMORY_BUDGET", *budget_env);
  return dtr::testing::run_child(exe, args, env);
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

/// The word after `key ` in `line` ("loss 2.5 | ..." → "2.5"), or "".
std::string field(const std::string& line, const std::string& key) {
  const size_t at = line.find(key + " ");
  if (at == std::string::npos) return "";
  const size_t begin = at + key.size() + 1;
  return line.substr(begin, line.find_first_of(" |", begin) - begin);
}

/// step → "loss L[ val V]" for every logged step line.
std::map<int, std::string> losses(const std::string& out) {
  std::map<int, std::string> m;
  for (const std::string& line : lines_of(out)) {
    if (line.rfind("step ", 0) != 0) continue;
    int step = 0;
    if (std::sscanf(line.c_str(), "step %d", &step) != 1) continue;
    std::string v = "loss " + field(line, "loss");
    if (!field(line, "val").empty()) v += " val " + field(line, "val");
    m[step] = v;
  }
  return m;
}

/// (epoch line's loss and accuracy) for every epoch line of train_cnn.
std::vector<std::string> epochs(const std::string& out) {
  std::vector<std::string> v;
  for (const std::string& line : lines_of(out)) {
    if (line.rfind("epoch ", 0) == 0) v.push_back(field(line, "loss") + " " + field(line, "accuracy"));
  }
  return v;
}

/// A number from the "stats:" line.
long long stat(const std::string& out, const std::string& key) {
  for (const std::string& line : lines_of(out)) {
    if (line.rfind("stats:", 0) == 0) return std::atoll(field(line, key).c_str());
  }
  return -2;
}

/// step → the number after `key` in that step's summary, from the
/// per-step summaries the examples log at info level (DTR_LOG=info, on stderr).
std::map<int, long long> step_field(const std::string& err, const std::string& key) {
  std::map<int, long long> m;
  for (const std::string& line : lines_of(err)) {
    const size_t at = line.find("[info] step ");
    if (at == std::string::npos) continue;
    int step = 0;
    if (std::sscanf(line.c_str() + at, "[info] step %d:", &step) != 1) continue;
    m[step] = std::atoll(field(line, key).c_str());
  }
  return m;
}

/// step → its own peak.
std::map<int, long long> step_peaks(const std::string& err) { return step_field(err, "peak_bytes"); }

/// The generated text between the dashed lines.
std::string sample(const std::string& out) {
  const std::string rule(60, '-');
  const size_t a = out.find(rule);
  if (a == std::string::npos) return "";
  const size_t b = out.find(rule, a + rule.size());
  return b == std::string::npos ? "" : out.substr(a, b - a);
}

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// ---- train_gpt ------------------------------------------------------------------------

class TrainGpt : public ::testing::Test {
 protected:
  void SetUp() override {
    exe_ = program("train_gpt");
    if (!exe_) GTEST_SKIP() << "train_gpt was not built (DTR_BUILD_EXAMPLES=OFF?)";
    if (!fs::exists(data_)) GTEST_SKIP() << data_ << " missing: install Debian's 'fortunes' package";
  }
  /// A tiny model on one fortune file: a few steps take well under a second.
  std::vector<std::string> tiny(std::vector<std::string> extra) const {
    std::vector<std::string> args = {"--data", data_, "--layers", "2", "--n-embd", "32",
                                     "--heads", "2", "--seq-len", "64", "--batch-size", "8",
                                     "--warmup", "2", "--log-interval", "1",
                                     "--eval-interval", "3", "--eval-batches", "2",
                                     "--sample-bytes", "24", "--attn-dropout", "0.1"};
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  }
  std::optional<fs::path> exe_;
  std::string data_ = std::string(kFortunes) + "/fortunes";
};

TEST_F(TrainGpt, HalfThePeakGivesBitwiseTheSameLosses) {
  const Output unbudgeted = run(*exe_, tiny({"--steps", "6"}), std::nullopt, {{"DTR_LOG", "info"}});
  ASSERT_EQ(unbudgeted.exit_code, 0) << unbudgeted.all();
  const Output capped = run(*exe_, tiny({"--steps", "6", "--budget-fraction", "0.5"}));
  ASSERT_EQ(capped.exit_code, 0) << capped.all();

  const auto a = losses(unbudgeted.out), b = losses(capped.out);
  ASSERT_EQ(a.size(), 6u) << unbudgeted.out;
  EXPECT_EQ(a, b);
  EXPECT_TRUE(contains(a.at(3), "val")) << a.at(3);
  EXPECT_EQ(sample(unbudgeted.out), sample(capped.out));
  EXPECT_FALSE(sample(unbudgeted.out).empty());

  const long long budget = stat(capped.out, "budget_bytes");
  const long long unbudgeted_peak = stat(capped.out, "unbudgeted_peak_bytes");
  EXPECT_GT(budget, 0) << capped.out;
  EXPECT_LE(stat(capped.out, "peak_bytes"), budget) << capped.out;
  EXPECT_NEAR(double(budget), 0.5 * double(unbudgeted_peak), 1.0);
  EXPECT_GT(stat(capped.out, "evictions"), 0) << "the budget evicted nothing: the test is vacuous";
  EXPECT_GT(stat(capped.out, "rematerializations"), 0);
  EXPECT_EQ(stat(unbudgeted.out, "evictions"), 0);
  // --budget-fraction measured steps that have the optimizer state (steps 1
  // and 2 of a throw-away model): no step of the run needs more than the
  // measured peak, so the fraction means the same at every step. DTR_LOG=info
  // gave each step's own peak.
  const auto peaks = step_peaks(unbudgeted.err);
  ASSERT_EQ(peaks.size(), 6u) << unbudgeted.err;
  for (const auto& [step, peak] : peaks) EXPECT_LE(peak, unbudgeted_peak) << "step " << step;
  EXPECT_EQ(std::max(peaks.at(1), peaks.at(2)), unbudgeted_peak);
  // The last line is the one-line summary.
  const auto out_lines = lines_of(capped.out);
  EXPECT_TRUE(contains(out_lines.back(), "under a budget of")) << out_lines.back();
  EXPECT_TRUE(contains(out_lines.back(), "without one")) << out_lines.back();

  // DTR_MEMORY_BUDGET in bytes caps the run the same way.
  const Output env = run(*exe_, tiny({"--steps", "6"}), std::to_string(budget));
  ASSERT_EQ(env.exit_code, 0) << env.all();
  EXPECT_EQ(losses(env.out), a);
  EXPECT_LE(stat(env.out, "peak_bytes"), budget);
  EXPECT_GT(stat(env.out, "evictions"), 0);
}

TEST_F(TrainGpt, ResumeContinuesBitwise) {
  TempDir tmp;
  const std::string ckpt = (tmp.path / "gpt.safetensors").string();
  const Output straight = run(*exe_, tiny({"--steps", "8"}));
  ASSERT_EQ(straight.exit_code, 0) << straight.all();
  const Output first = run(*exe_, tiny({"--steps", "8", "--stop-after", "5", "--save", ckpt}));
  ASSERT_EQ(first.exit_code, 0) << first.all();
  ASSERT_TRUE(fs::exists(ckpt));
  // The second half runs under a budget too: resuming and budgets compose.
  const Output second =
      run(*exe_, tiny({"--steps", "8", "--resume", ckpt, "--budget-fraction", "0.5"}));
  ASSERT_EQ(second.exit_code, 0) << second.all();

  const auto all = losses(straight.out), a = losses(first.out), b = losses(second.out);
  ASSERT_EQ(all.size(), 8u) << straight.out;
  ASSERT_EQ(a.size(), 5u) << first.out;
  ASSERT_EQ(b.size(), 3u) << second.out;
  for (int step = 1; step <= 8; ++step) {
    // Step 5 ends the first run, so it evaluates there; compare its loss only.
    const std::string& split = step <= 5 ? a.at(step) : b.at(step);
    EXPECT_EQ(field(split, "loss"), field(all.at(step), "loss")) << "step " << step;
    if (step != 5) {
      EXPECT_EQ(split, all.at(step)) << "step " << step;
    }
  }
  EXPECT_EQ(sample(second.out), sample(straight.out));
  EXPECT_TRUE(contains(second.out, "resumed from")) << second.out;
}

TEST_F(TrainGpt, BadInputEndsWithAMessage) {
  struct Case {
    std::vector<std::string> args;
    int code;
    std::string message;
  };
  TempDir tmp;
  const std::string small = (tmp.path / "small.txt").string();
  std::ofstream(small) << "too short";
  const std::string garbage = (tmp.path / "garbage.safetensors").string();
  std::ofstream(garbage) << "this is not a checkpoint";
  const std::string ckpt = (tmp.path / "ok.safetensors").string();
  ASSERT_EQ(run(*exe_, tiny({"--steps", "1", "--save", ckpt, "--sample-bytes", "0"})).exit_code, 0);

  const std::vector<Case> cases = {
      {{"--data", "/nonexistent/text"}, 1, "/nonexistent/text"},
      {{"--data", small}, 1, "too little text"},
      {{"--steps", "abc"}, 2, "--steps expects an integer, got 'abc'"},
      {{"--lr", "fast"}, 2, "--lr expects a number"},
      {{"--bogus"}, 2, "unknown flag --bogus"},
      {{"--steps"}, 2, "--steps needs a value"},
      {{"extra"}, 2, "unexpected argument 'extra'"},
      {{"--steps", "0"}, 2, "--steps must be at least 1"},
      {{"--heads", "3"}, 2, "must divide --n-embd"},
      {{"--budget-fraction", "1.5"}, 2, "--budget-fraction must be in (0, 1]"},
      {{"--budget-fraction", "auto", "--max-slowdown", "0.9"}, 2, "--max-slowdown must be at least 1"},
      {{"--device", "tpu"}, 2, "--device must be cpu, cuda or cuda:N"},
      // No GPU here: the library's DeviceError, whether or not CUDA was built.
      {{"--device", "cuda"}, 1, "cuda:0: "},
      {{"--budget-fraction", "0.01"}, 3, "budget"},
      {{"--resume", (tmp.path / "missing.safetensors").string()}, 1, "cannot resume"},
      {{"--resume", garbage}, 1, "cannot resume"},
      {{"--save", "/nonexistent/dir/x.safetensors"}, 1, "directory /nonexistent/dir does not exist"},
      {{"--resume", ckpt, "--layers", "3"}, 1, "--layers 2, this run has --layers 3"},
      {{"--distributed", "gloo"}, 2, "--distributed must be mpi or nccl, got 'gloo'"},
      {{"--zero"}, 2, "--zero needs --distributed"},
      // Without a GPU (or NCCL in the build) a typed error, not a crash.
      {{"--distributed", "nccl"}, 1, "--distributed nccl: "},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args = tiny({"--steps", "2"});
    args.insert(args.end(), c.args.begin(), c.args.end());
    const Output r = run(*exe_, args);
    EXPECT_EQ(r.exit_code, c.code) << c.args[0] << "\n" << r.all();
    EXPECT_TRUE(contains(r.err, c.message)) << "expected '" << c.message << "'\n" << r.all();
    EXPECT_TRUE(contains(r.err, "train_gpt: ")) << r.all();
  }

  const Output bad_env = run(*exe_, tiny({"--steps", "1"}), "lots");
  EXPECT_EQ(bad_env.exit_code, 1) << bad_env.all();
  EXPECT_TRUE(contains(bad_env.err, "DTR_MEMORY_BUDGET")) << bad_env.all();

  const Output help = run(*exe_, {"--help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_TRUE(contains(help.out, "--budget-fraction")) << help.out;
  EXPECT_TRUE(contains(help.out, "--plan")) << help.out;
}

/// mpirun, when the mpi backend was built and CMake found it (DTR_MPIEXEC).
std::optional<std::string> mpirun() {
#ifdef DTR_MPIEXEC
  if (access(DTR_MPIEXEC, X_OK) == 0) return std::string(DTR_MPIEXEC);
#endif
  return std::nullopt;
}

/// `mpirun -np n exe args...` as ctest runs the mpi tests.
Output run_ranks(int n, const fs::path& exe, const std::vector<std::string>& args) {
  std::vector<std::string> all = {"--allow-run-as-root", "--oversubscribe", "--bind-to", "none",
                                  "--mca", "btl", "self,vader", "-np", std::to_string(n), exe.string()};
  all.insert(all.end(), args.begin(), args.end());
  return run(*mpirun(), all, std::nullopt, {{"OMP_NUM_THREADS", "1"}, {"DTR_COLLECTIVE_TIMEOUT", "60"}});
}

/// The training loss of every logged step, as a number.
std::map<int, double> loss_values(const std::string& out) {
  std::map<int, double> m;
  for (const auto& [step, text] : losses(out)) m[step] = std::atof(field(text, "loss").c_str());
  return m;
}

TEST_F(TrainGpt, TwoRanksUnderMpirunTrainLikeOneAndCheckpointsResumeOnAnotherWorldSize) {
  if (!mpirun()) GTEST_SKIP() << "mpirun was not found at configure time (or the mpi backend not built)";
  TempDir tmp;
  const std::string from_two = (tmp.path / "two.safetensors").string();
  const std::string from_one = (tmp.path / "one.safetensors").string();
  // No dropout: one rank with the batch of 8 and two with 4 each then
  // differ only in the order of the gradient sums (float tolerance).
  auto args = [&](std::vector<std::string> extra) {
    std::vector<std::string> a = tiny({"--steps", "6", "--dropout", "0", "--attn-dropout", "0"});
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  };
  const Output zero = run_ranks(2, *exe_, args({"--distributed", "mpi", "--zero", "--stop-after", "3",
                                                "--save", from_two}));
  ASSERT_EQ(zero.exit_code, 0) << zero.all();
  // Rank 0 alone logs: each step once, the save once.
  const auto z = losses(zero.out);
  ASSERT_EQ(z.size(), 3u) << zero.out;
  size_t step1 = 0, saved = 0;
  for (const std::string& line : lines_of(zero.out)) {
    step1 += line.rfind("step     1/", 0) == 0;
    saved += line.rfind("saved checkpoint", 0) == 0;
  }
  EXPECT_EQ(step1, 1u) << zero.out;
  EXPECT_EQ(saved, 1u) << zero.out;
  EXPECT_TRUE(contains(zero.out, "distributed: mpi, 2 ranks, 4 windows per rank")) << zero.out;
  EXPECT_TRUE(contains(zero.out, "sharded over the ranks")) << zero.out;
  ASSERT_TRUE(fs::exists(from_two));

  // Sharding the optimizer state changes no bit; the same job twice neither.
  const Output replicated = run_ranks(2, *exe_, args({"--distributed", "mpi", "--stop-after", "3"}));
  ASSERT_EQ(replicated.exit_code, 0) << replicated.all();
  EXPECT_EQ(losses(replicated.out), z);

  // One process straight through, for reference.
  const Output straight = run(*exe_, args({}));
  ASSERT_EQ(straight.exit_code, 0) << straight.all();
  const auto s = loss_values(straight.out);
  ASSERT_EQ(s.size(), 6u) << straight.out;

  // The 2-rank checkpoint resumes in one process without --distributed ...
  const Output resumed = run(*exe_, args({"--resume", from_two}));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.all();
  EXPECT_TRUE(contains(resumed.out, "resumed from")) << resumed.out;
  // ... and a 1-process checkpoint on 2 ranks with a sharded state.
  const Output first = run(*exe_, args({"--stop-after", "3", "--save", from_one}));
  ASSERT_EQ(first.exit_code, 0) << first.all();
  const Output spread = run_ranks(2, *exe_, args({"--distributed", "mpi", "--zero", "--resume", from_one}));
  ASSERT_EQ(spread.exit_code, 0) << spread.all();

  const auto a = loss_values(zero.out), b = loss_values(resumed.out), c = loss_values(spread.out);
  ASSERT_EQ(b.size(), 3u) << resumed.out;
  ASSERT_EQ(c.size(), 3u) << spread.out;
  for (int step = 1; step <= 6; ++step) {
    const double want = s.at(step);
    if (step <= 3) {
      EXPECT_NEAR(a.at(step), want, 1e-4 * want) << "2 ranks, step " << step;
    }
    if (step > 3) {
      EXPECT_NEAR(b.at(step), want, 1e-4 * want) << "resumed from 2 ranks in 1, step " << step;
      EXPECT_NEAR(c.at(step), want, 1e-4 * want) << "resumed from 1 on 2 ranks, step " << step;
    }
  }
  EXPECT_LT(s.at(6), s.at(1));  // it trains

  // A global batch the ranks cannot split evenly is a usage error on every rank.
  const Output odd = run_ranks(3, *exe_, tiny({"--steps", "1", "--distributed", "mpi"}));
  EXPECT_NE(odd.exit_code, 0) << odd.all();
  EXPECT_TRUE(contains(odd.err, "--batch-size (8) must be a multiple of the number of ranks (3)")) << odd.all();
}

// ---- train_cnn ----------------------------------------------------------------------------

class TrainCnn : public ::testing::Test {
 protected:
  void SetUp() override {
    exe_ = program("train_cnn");
    if (!exe_) GTEST_SKIP() << "train_cnn was not built (DTR_BUILD_EXAMPLES=OFF?)";
    if (!fs::exists(std::string(kFashionMnist) + "/train-images-idx3-ubyte.gz")) {
      GTEST_SKIP() << kFashionMnist << " missing: install Debian's 'dataset-fashion-mnist' package";
    }
  }
  /// A narrow ResNet (two blocks per stage, so that half the peak is above
  /// the largest single op's working set) on the first 128 training and test
  /// images: 4 steps.
  std::vector<std::string> tiny(std::vector<std::string> extra) const {
    std::vector<std::string> args = {"--limit", "128", "--batch-size", "32", "--width", "4",
                                     "--layers", "2", "--epochs", "1", "--warmup", "2",
                                     "--log-interval", "1"};
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  }
  std::optional<fs::path> exe_;
};

TEST_F(TrainCnn, HalfThePeakGivesBitwiseTheSameLosses) {
  const Output unbudgeted = run(*exe_, tiny({}));
  ASSERT_EQ(unbudgeted.exit_code, 0) << unbudgeted.all();
  const Output capped = run(*exe_, tiny({"--budget-fraction", "0.5"}));
  ASSERT_EQ(capped.exit_code, 0) << capped.all();

  ASSERT_EQ(losses(unbudgeted.out).size(), 4u) << unbudgeted.out;
  EXPECT_EQ(losses(unbudgeted.out), losses(capped.out));
  ASSERT_EQ(epochs(unbudgeted.out).size(), 1u) << unbudgeted.out;
  EXPECT_EQ(epochs(unbudgeted.out), epochs(capped.out));
  EXPECT_TRUE(contains(unbudgeted.out, "test accuracy")) << unbudgeted.out;

  const long long budget = stat(capped.out, "budget_bytes");
  EXPECT_GT(budget, 0) << capped.out;
  EXPECT_LE(stat(capped.out, "peak_bytes"), budget) << capped.out;
  EXPECT_GT(stat(capped.out, "evictions"), 0) << "the budget evicted nothing: the test is vacuous";
  EXPECT_TRUE(contains(lines_of(capped.out).back(), "under a budget of"));
}

TEST_F(TrainCnn, BadInputEndsWithAMessage) {
  TempDir tmp;
  const fs::path dir = tmp.path / "fmnist";
  fs::create_directory(dir);
  const std::vector<std::string> names = {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
                                          "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"};
  for (const std::string& n : names) fs::copy_file(fs::path(kFashionMnist) / n, dir / n);

  // A training-image file cut short, as an interrupted download leaves it.
  const std::string images = read_all(dir / names[0]);
  std::ofstream(dir / names[0], std::ios::binary | std::ios::trunc) << images.substr(0, 20000);
  Output r = run(*exe_, tiny({"--data", dir.string()}));
  EXPECT_EQ(r.exit_code, 1) << r.all();
  EXPECT_TRUE(contains(r.err, "train-images-idx3-ubyte.gz")) << r.all();
  EXPECT_TRUE(contains(r.err, "truncated")) << r.all();

  // Labels where images belong: the magic number says so.
  fs::copy_file(dir / names[1], dir / names[0], fs::copy_options::overwrite_existing);
  r = run(*exe_, tiny({"--data", dir.string()}));
  EXPECT_EQ(r.exit_code, 1) << r.all();
  EXPECT_TRUE(contains(r.err, "not an IDX file of unsigned bytes with 3 dimensions")) << r.all();

  // A header that promises more than the file holds (uncompressed: zlib reads it as is).
  const unsigned char header[] = {0, 0, 8, 1, 0, 0, 0, 100, 1, 2, 3};
  std::ofstream(dir / names[1], std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(header), sizeof header);
  fs::copy_file(fs::path(kFashionMnist) / names[0], dir / names[0], fs::copy_options::overwrite_existing);
  r = run(*exe_, tiny({"--data", dir.string()}));
  EXPECT_EQ(r.exit_code, 1) << r.all();
  EXPECT_TRUE(contains(r.err, "truncated")) << r.all();

  fs::remove(dir / names[3]);
  fs::copy_file(fs::path(kFashionMnist) / names[1], dir / names[1], fs::copy_options::overwrite_existing);
  r = run(*exe_, tiny({"--data", dir.string()}));
  EXPECT_EQ(r.exit_code, 1) << r.all();
  EXPECT_TRUE(contains(r.err, "t10k-labels-idx1-ubyte.gz")) << r.all();

  r = run(*exe_, {"--data", (tmp.path / "nowhere").string()});
  EXPECT_EQ(r.exit_code, 1) << r.all();
  EXPECT_TRUE(contains(r.err, "nowhere")) << r.all();

  r = run(*exe_, tiny({"--limit", "-1"}));
  EXPECT_EQ(r.exit_code, 2) << r.all();
  EXPECT_TRUE(contains(r.err, "--limit must be non-negative")) << r.all();

  r = run(*exe_, tiny({"--budget-fraction", "0.01"}));
  EXPECT_EQ(r.exit_code, 3) << r.all();
  EXPECT_TRUE(contains(r.err, "budget")) << r.all();
}

// ---- train_mlp: hints, logging and the planner's flags --------------------------------------

class TrainMlp : public ::testing::Test {
 protected:
  void SetUp() override {
    exe_ = program("train_mlp");
    if (!exe_) GTEST_SKIP() << "train_mlp was not built (DTR_BUILD_EXAMPLES=OFF?)";
  }
  std::optional<fs::path> exe_;
};

/// The first line of `out` that starts with `prefix`, or "".
std::string line_starting(const std::string& out, const std::string& prefix) {
  for (const std::string& line : lines_of(out)) {
    if (line.rfind(prefix, 0) == 0) return line;
  }
  return "";
}

/// How many lines of `out` start with `prefix`.
int rows_starting(const std::string& out, const std::string& prefix) {
  int n = 0;
  for (const std::string& line : lines_of(out)) n += line.rfind(prefix, 0) == 0 ? 1 : 0;
  return n;
}

TEST_F(TrainMlp, PlanPrintsEveryHeuristicsBudgetsAndDoesNotTrain) {
  const Output r = run(*exe_, {"--plan"});
  ASSERT_EQ(r.exit_code, 0) << r.all();
  EXPECT_TRUE(contains(r.out, "recorded peak")) << r.out;
  EXPECT_TRUE(contains(r.out, "floor")) << r.out;
  EXPECT_TRUE(contains(r.out, "smallest feasible")) << r.out;
  // One row per heuristic and budget: all six heuristics by default, at the
  // default fractions 1.000 ... 0.100.
  for (const char* h : {"dtr_eq", "dtr", "dtr_local", "lru", "size", "msps"}) {
    EXPECT_GE(rows_starting(r.out, std::string("  ") + h + " "), 10) << h << "\n" << r.out;
  }
  EXPECT_TRUE(contains(r.out, "0.100")) << r.out;
  // Nothing trained.
  EXPECT_FALSE(contains(r.out, "final loss")) << r.out;
  EXPECT_TRUE(line_starting(r.out, "step ").empty()) << r.out;

  // --plan-heuristics narrows the rows.
  const Output two = run(*exe_, {"--plan", "--plan-heuristics", "dtr_eq,lru"});
  ASSERT_EQ(two.exit_code, 0) << two.all();
  EXPECT_GE(rows_starting(two.out, "  lru "), 10) << two.out;
  EXPECT_EQ(rows_starting(two.out, "  msps "), 0) << two.out;
}

TEST_F(TrainMlp, PlanSvgWritesAnSvgDocument) {
  TempDir tmp;
  const std::string svg = (tmp.path / "plan.svg").string();
  const Output r = run(*exe_, {"--plan", "--plan-heuristics", "dtr_eq", "--plan-svg", svg});
  ASSERT_EQ(r.exit_code, 0) << r.all();
  ASSERT_TRUE(fs::exists(svg)) << r.all();
  const std::string doc = read_all(svg);
  EXPECT_TRUE(doc.rfind("<?xml", 0) == 0 || doc.rfind("<svg", 0) == 0) << doc.substr(0, 200);
  EXPECT_TRUE(contains(doc, "</svg>"));
  EXPECT_TRUE(contains(r.out, svg)) << r.out;
}

TEST_F(TrainMlp, BudgetFractionAutoTrainsUnderThePlannedBudget) {
  const Output plain = run(*exe_, {"--steps", "3"});
  ASSERT_EQ(plain.exit_code, 0) << plain.all();
  const Output r = run(*exe_, {"--steps", "3", "--budget-fraction", "auto", "--max-slowdown", "1.5"});
  ASSERT_EQ(r.exit_code, 0) << r.all();

  // The fraction 1.0 of the recorded peak evicts nothing (slowdown 1), so
  // some budget always qualifies; 0.9 replays two elementwise ops.
  const std::string chosen = line_starting(r.out, "memory: planned budget");
  ASSERT_FALSE(chosen.empty()) << r.out;
  EXPECT_TRUE(contains(chosen, "predicted slowdown")) << chosen;
  EXPECT_TRUE(contains(chosen, "--max-slowdown 1.5")) << chosen;
  const double fraction = std::atof(field(chosen, "=").c_str());
  EXPECT_GT(fraction, 0.0) << chosen;
  EXPECT_LT(fraction, 1.0) << chosen;
  const double slowdown = std::atof(field(chosen, "predicted slowdown").c_str());
  EXPECT_GE(slowdown, 1.0) << chosen;
  EXPECT_LE(slowdown, 1.5) << chosen;

  const long long budget = stat(r.out, "budget_bytes");
  EXPECT_GT(budget, 0) << r.out;
  EXPECT_LE(stat(r.out, "peak_bytes"), budget) << r.out;
  EXPECT_GT(stat(r.out, "evictions"), 0) << "the planned budget evicted nothing: the test is vacuous";
  EXPECT_NEAR(double(budget), fraction * double(stat(r.out, "unbudgeted_peak_bytes")),
              0.001 * double(budget) + 1);
  // Training under it gives the losses of the run with no budget.
  EXPECT_EQ(line_starting(r.out, "step "), line_starting(plain.out, "step "));
  EXPECT_FALSE(line_starting(plain.out, "step ").empty()) << plain.out;
  EXPECT_EQ(field(line_starting(r.out, "final loss"), "final loss"),
            field(line_starting(plain.out, "final loss"), "final loss"));
}

/// The fractions `text` suggests: each number after "--budget-fraction "
/// (the hints of the memory line and the closing summary), and after
/// "e.g. " on the line of --help that documents --budget-fraction.
std::vector<double> hinted_fractions(const std::string& text) {
  std::vector<double> out;
  static const std::regex hint(R"(--budget-fraction ([0-9]*\.?[0-9]+))");
  static const std::regex example(R"(e\.g\. ([0-9]*\.?[0-9]+))");
  for (const std::string& line : lines_of(text)) {
    for (std::sregex_iterator it(line.begin(), line.end(), hint), end; it != end; ++it) {
      out.push_back(std::stod((*it)[1]));
    }
    if (line.rfind("  --budget-fraction ", 0) == 0) {
      for (std::sregex_iterator it(line.begin(), line.end(), example), end; it != end; ++it) {
        out.push_back(std::stod((*it)[1]));
      }
    }
  }
  return out;
}

/// Runs `exe` (train_mlp or train_mlp_c) with no budget, takes the fraction
/// its printed hints (and `help`, when given) suggest, and trains a few steps
/// under it: it must run, evict and give the losses of the run with no budget.
void check_hinted_fraction_trains(const fs::path& exe, const std::optional<std::string>& help) {
  const Output plain = run(exe, {"--steps", "3"});
  ASSERT_EQ(plain.exit_code, 0) << plain.all();
  // The memory line gives one, the closing summary (train_mlp_c's, and
  // train_mlp's since it prints one) another.
  std::vector<double> hints = hinted_fractions(plain.out);
  ASSERT_FALSE(hints.empty()) << plain.out;
  if (help) {
    const std::vector<double> from_help = hinted_fractions(*help);
    ASSERT_EQ(from_help.size(), 1u) << *help;
    hints.push_back(from_help[0]);
  }
  for (double h : hints) EXPECT_EQ(h, hints[0]) << plain.out;
  const double fraction = hints[0];
  EXPECT_LT(fraction, 1.0);

  char text[32];
  std::snprintf(text, sizeof text, "%g", fraction);
  const Output capped = run(exe, {"--steps", "3", "--budget-fraction", text});
  ASSERT_EQ(capped.exit_code, 0) << "--budget-fraction " << text << ", as hinted:\n" << capped.all();
  EXPECT_EQ(losses(capped.out), losses(plain.out));
  EXPECT_FALSE(losses(plain.out).empty()) << plain.out;
  EXPECT_EQ(field(line_starting(capped.out, "final loss"), "final loss"),
            field(line_starting(plain.out, "final loss"), "final loss"));
  const long long budget = stat(capped.out, "budget_bytes");
  EXPECT_NEAR(double(budget), fraction * double(stat(capped.out, "unbudgeted_peak_bytes")), 1.0);
  EXPECT_LE(stat(capped.out, "peak_bytes"), budget) << capped.out;
  EXPECT_GT(stat(capped.out, "evictions"), 0) << "the hinted budget evicted nothing: the test is vacuous";
}

TEST_F(TrainMlp, TheHintedBudgetFractionTrains) {
  const Output help = run(*exe_, {"--help"});
  ASSERT_EQ(help.exit_code, 0) << help.all();
  check_hinted_fraction_trains(*exe_, help.out);
}

TEST(TrainMlpC, TheHintedBudgetFractionTrains) {
  const std::optional<fs::path> exe = program("train_mlp_c");
  if (!exe) GTEST_SKIP() << "train_mlp_c was not built (DTR_BUILD_C_API or DTR_BUILD_EXAMPLES off?)";
  check_hinted_fraction_trains(*exe, std::nullopt);
}

TEST_F(TrainMlp, LogsEachStepAtInfoLevel) {
  // Nothing at the default level ...
  const Output quiet = run(*exe_, {"--steps", "3"});
  ASSERT_EQ(quiet.exit_code, 0) << quiet.all();
  EXPECT_TRUE(step_peaks(quiet.err).empty()) << quiet.err;
  // ... and at DTR_LOG=info one summary per step (README, Options): its own
  // peak, evictions, rematerializations and recompute time. With no budget
  // the highest step peak is the run's.
  const Output plain = run(*exe_, {"--steps", "3"}, std::nullopt, {{"DTR_LOG", "info"}});
  ASSERT_EQ(plain.exit_code, 0) << plain.all();
  auto peaks = step_peaks(plain.err);
  ASSERT_EQ(peaks.size(), 3u) << plain.err;
  long long highest = 0;
  for (const auto& [step, peak] : peaks) highest = std::max(highest, peak);
  EXPECT_EQ(highest, stat(plain.out, "peak_bytes"));
  EXPECT_GT(highest, 0);

  // Under a budget each step stays under it, and the steps' counts add up
  // to the run's.
  const Output r = run(*exe_, {"--steps", "3", "--budget-fraction", "0.5"}, std::nullopt, {{"DTR_LOG", "info"}});
  ASSERT_EQ(r.exit_code, 0) << r.all();
  peaks = step_peaks(r.err);
  ASSERT_EQ(peaks.size(), 3u) << r.err;
  for (const auto& [step, peak] : peaks) {
    EXPECT_GT(peak, 0) << "step " << step;
    EXPECT_LE(peak, stat(r.out, "budget_bytes")) << "step " << step;
  }
  long long evictions = 0, remats = 0;
  for (const auto& [step, n] : step_field(r.err, "evictions")) evictions += n;
  for (const auto& [step, n] : step_field(r.err, "rematerializations")) remats += n;
  EXPECT_EQ(evictions, stat(r.out, "evictions")) << r.err;
  EXPECT_EQ(remats, stat(r.out, "rematerializations")) << r.err;
  EXPECT_GT(evictions, 0);
  for (const std::string& key : {"recompute_seconds", "step_seconds"}) {
    for (const std::string& line : lines_of(r.err)) {
      if (contains(line, "[info] step ")) EXPECT_FALSE(field(line, key).empty()) << key << ": " << line;
    }
  }
}

TEST_F(TrainMlp, BadPlannerFlagsEndWithAMessage) {
  struct Case {
    std::vector<std::string> args;
    int code;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"--budget-fraction", "auto", "--max-slowdown", "0.5"}, 2, "--max-slowdown must be at least 1"},
      {{"--budget-fraction", "most"}, 2, "--budget-fraction expects a number, got 'most'"},
      {{"--budget-fraction", "0"}, 2, "--budget-fraction must be in (0, 1] or auto"},
      {{"--plan", "--plan-heuristics", "dtr_eq,fifo"}, 2, "--plan-heuristics"},
      {{"--plan-svg", "x.svg"}, 2, "need --plan"},
      {{"--plan=yes"}, 2, "--plan takes no value"},
      {{"--steps", "0"}, 2, "--steps must be at least 1"},
      {{"--batch", "0"}, 2, "--batch must be at least 1"},
      {{"7"}, 2, "unexpected argument '7'"},
      {{"--plan", "--plan-svg", "/nonexistent/dir/plan.svg"}, 1, "directory /nonexistent/dir does not exist"},
  };
  for (const Case& c : cases) {
    const Output r = run(*exe_, c.args);
    EXPECT_EQ(r.exit_code, c.code) << c.args[0] << "\n" << r.all();
    EXPECT_TRUE(contains(r.err, c.message)) << "expected '" << c.message << "'\n" << r.all();
    EXPECT_TRUE(contains(r.err, "train_mlp: ")) << r.all();
  }
  const Output help = run(*exe_, {"--help"});
  EXPECT_EQ(help.exit_code, 0);
  for (const char* flag : {"--plan ", "--plan-svg", "--plan-heuristics", "--max-slowdown", "X|auto"}) {
    EXPECT_TRUE(contains(help.out, flag)) << flag << "\n" << help.out;
  }
}

}  // namespace
