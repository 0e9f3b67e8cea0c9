// dtr_nccl_check: the nccl backend on real CUDA devices (built when NCCL is
// found; tests/distributed/gpu_check.sh runs it). dtr has no CUDA tensors
// yet, so the collectives run over cudaMalloc'd buffers handed to
// ProcessGroup::launch, and every value is checked on the host.
//
//   dtr_nccl_check            driver: a world of one, then of two processes
//                             when two devices are visible; prints
//                             "skipped: no CUDA device" and exits 0 without one
//   dtr_nccl_check --worker   one rank (RANK, WORLD_SIZE, LOCAL_RANK,
//                             MASTER_ADDR, MASTER_PORT set by the driver)
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"
#include "core/shape.h"
#include "eager/distributed/distributed.h"

namespace dist = dtr::distributed;
using dtr::DType;

namespace {

int g_failures = 0;

#define CHECK_THAT(cond, ...)                                                                  \
  do {                                                                                         \
    if (!(cond)) {                                                                             \
      ++g_failures;                                                                            \
      std::fprintf(stderr, "%s:%d: check failed: %s: %s\n", __FILE__, __LINE__, #cond,        \
                   fmt::format(__VA_ARGS__).c_str());                                          \
    }                                                                                          \
  } while (0)

void cuda_ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(fmt::format("{}: {}", what, cudaGetErrorString(e)));
}

/// A device buffer of `n` elements of T.
template <typename T>
struct DeviceBuffer {
  explicit DeviceBuffer(size_t n) : n(n) { cuda_ok(cudaMalloc(&ptr, std::max<size_t>(n, 1) * sizeof(T)), "cudaMalloc"); }
  ~DeviceBuffer() { cudaFree(ptr); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void upload(const std::vector<T>& v) {
    cuda_ok(cudaMemcpy(ptr, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice), "cudaMemcpy H2D");
  }
  std::vector<T> download() const {
    std::vector<T> v(n);
    cuda_ok(cudaMemcpy(v.data(), ptr, n * sizeof(T), cudaMemcpyDeviceToHost), "cudaMemcpy D2H");
    return v;
  }
  dtr::TensorArg arg(DType dtype, dtr::Shape shape) const {
    dtr::TensorArg a;
    a.data = static_cast<std::byte*>(ptr);
    a.strides = dtr::contiguous_strides(shape);
    a.shape = std::move(shape);
    a.dtype = dtype;
    return a;
  }
  void* ptr = nullptr;
  size_t n;
};

struct Rank {
  std::shared_ptr<dist::ProcessGroup> group;
  int rank, world;
  dtr::Device device;
};

void run(Rank& r, dist::CollectiveKind kind, const dtr::TensorArg& in, const dtr::TensorArg& out,
         dist::ReduceOp op = dist::ReduceOp::kSum, int root = 0) {
  dist::CollectiveCall c;
  c.kind = kind;
  c.reduce_op = op;
  c.root = root;
  c.in = in;
  c.out = out;
  c.device = r.device;
  r.group->launch(c)->wait();
}

void check_all_reduce(Rank& r) {
  const int n = r.world;
  const size_t len = 1000;
  DeviceBuffer<float> buf(len), out(len);
  std::vector<float> v(len);
  for (size_t i = 0; i < len; ++i) v[i] = float(r.rank + 1) + float(i);
  // sum, in place
  buf.upload(v);
  run(r, dist::CollectiveKind::kAllReduce, buf.arg(dtr::kFloat32, {int64_t(len)}), buf.arg(dtr::kFloat32, {int64_t(len)}));
  auto got = buf.download();
  for (size_t i = 0; i < len; ++i)
    CHECK_THAT(got[i] == float(n * (n + 1) / 2) + float(n) * float(i), "sum[{}] = {}", i, got[i]);
  // mean, out of place
  buf.upload(v);
  run(r, dist::CollectiveKind::kAllReduce, buf.arg(dtr::kFloat32, {int64_t(len)}), out.arg(dtr::kFloat32, {int64_t(len)}),
      dist::ReduceOp::kMean);
  got = out.download();
  for (size_t i = 0; i < len; ++i) {
    const float want = (float(n * (n + 1) / 2) + float(n) * float(i)) / float(n);
    CHECK_THAT(std::abs(got[i] - want) <= 1e-5f * std::abs(want), "mean[{}] = {}, want {}", i, got[i], want);
  }
  // max: element i is largest on rank i % n
  for (size_t i = 0; i < len; ++i) v[i] = int(i % size_t(n)) == r.rank ? 100.0f + float(i) : float(i);
  buf.upload(v);
  run(r, dist::CollectiveKind::kAllReduce, buf.arg(dtr::kFloat32, {int64_t(len)}), buf.arg(dtr::kFloat32, {int64_t(len)}),
      dist::ReduceOp::kMax);
  got = buf.download();
  for (size_t i = 0; i < len; ++i) CHECK_THAT(got[i] == 100.0f + float(i), "max[{}] = {}", i, got[i]);
  // int64 sum
  DeviceBuffer<int64_t> ib(3);
  ib.upload({int64_t(r.rank), int64_t(1) << 40, -1});
  run(r, dist::CollectiveKind::kAllReduce, ib.arg(dtr::kInt64, {3}), ib.arg(dtr::kInt64, {3}));
  const auto ig = ib.download();
  CHECK_THAT(ig[0] == int64_t(n) * (n - 1) / 2 && ig[1] == int64_t(n) << 40 && ig[2] == -n, "int64 sum {} {} {}",
             ig[0], ig[1], ig[2]);
}

/// Note [nccl determinism]: every rank gets the same bits of a float sum.
void check_bitwise_identical(Rank& r) {
  const int n = r.world;
  const size_t len = size_t(1) << 20;
  std::mt19937 rng(1234 + unsigned(r.rank));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v(len);
  for (float& x : v) x = normal(rng) * 1e3f;
  DeviceBuffer<float> buf(len), all(len * size_t(n));
  buf.upload(v);
  run(r, dist::CollectiveKind::kAllReduce, buf.arg(dtr::kFloat32, {int64_t(len)}), buf.arg(dtr::kFloat32, {int64_t(len)}));
  run(r, dist::CollectiveKind::kAllGather, buf.arg(dtr::kFloat32, {int64_t(len)}),
      all.arg(dtr::kFloat32, {int64_t(len) * n}));
  const auto got = all.download();
  for (int q = 1; q < n; ++q)
    CHECK_THAT(std::memcmp(got.data(), got.data() + size_t(q) * len, len * sizeof(float)) == 0,
               "rank {}'s all_reduce result differs from rank 0's", q);
}

void check_broadcast_gather_scatter(Rank& r) {
  const int n = r.world;
  const int root = n - 1;
  {
    DeviceBuffer<double> b(5);
    std::vector<double> v(5, -1.0);
    if (r.rank == root)
      for (int i = 0; i < 5; ++i) v[size_t(i)] = 7.5 + i;
    b.upload(v);
    run(r, dist::CollectiveKind::kBroadcast, b.arg(dtr::kFloat64, {5}), b.arg(dtr::kFloat64, {5}),
        dist::ReduceOp::kSum, root);
    const auto got = b.download();
    for (int i = 0; i < 5; ++i) CHECK_THAT(got[size_t(i)] == 7.5 + i, "broadcast[{}] = {}", i, got[size_t(i)]);
  }
  {
    DeviceBuffer<int32_t> in(3), out(3 * size_t(n));
    in.upload({r.rank * 10, r.rank * 10 + 1, r.rank * 10 + 2});
    run(r, dist::CollectiveKind::kAllGather, in.arg(dtr::kInt32, {3}), out.arg(dtr::kInt32, {3 * n}));
    const auto got = out.download();
    for (int q = 0; q < n; ++q)
      for (int i = 0; i < 3; ++i)
        CHECK_THAT(got[size_t(q * 3 + i)] == q * 10 + i, "all_gather[{}] = {}", q * 3 + i, got[size_t(q * 3 + i)]);
  }
  {
    const int len = 4;
    DeviceBuffer<float> in{size_t(len * n)}, out{size_t(len)};
    std::vector<float> v(size_t(len * n));
    for (int j = 0; j < len * n; ++j) v[size_t(j)] = float(r.rank + j);
    in.upload(v);
    run(r, dist::CollectiveKind::kReduceScatter, in.arg(dtr::kFloat32, {len * n}), out.arg(dtr::kFloat32, {len}));
    const auto got = out.download();
    for (int i = 0; i < len; ++i) {
      const float want = float(n * (n - 1) / 2) + float(n) * float(r.rank * len + i);
      CHECK_THAT(got[size_t(i)] == want, "reduce_scatter[{}] = {}, want {}", i, got[size_t(i)], want);
    }
  }
  run(r, dist::CollectiveKind::kBarrier, {}, {});
}

template <typename E, typename F>
std::string thrown(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    return fmt::format("(another exception: {})", e.what());
  }
  return "(nothing thrown)";
}

void check_errors(Rank& r) {
  DeviceBuffer<uint8_t> b(4);
  // No NCCL type for bool: TypeError on every rank, then the group still works.
  const std::string type_msg = thrown<dtr::TypeError>([&] {
    run(r, dist::CollectiveKind::kAllReduce, b.arg(dtr::kBool, {4}), b.arg(dtr::kBool, {4}));
  });
  CHECK_THAT(type_msg.find("dtype bool is not supported") != std::string::npos, "{}", type_msg);
  CHECK_THAT(r.group->healthy(), "group broken after a refused call");
  if (r.world >= 2) {
    // Different shapes on different ranks: DistributedError naming both sides.
    DeviceBuffer<float> f(5);
    const int64_t len = r.rank == 0 ? 4 : 5;
    const std::string msg = thrown<dtr::DistributedError>([&] {
      run(r, dist::CollectiveKind::kAllReduce, f.arg(dtr::kFloat32, {len}), f.arg(dtr::kFloat32, {len}));
    });
    CHECK_THAT(msg.find("disagree") != std::string::npos && msg.find("rank 0 called all_reduce") != std::string::npos &&
                   msg.find("float32 [5]") != std::string::npos,
               "{}", msg);
    CHECK_THAT(r.group->healthy(), "group broken after a fingerprint mismatch");
  }
  // The group still runs collectives, and the sequence numbers stayed aligned.
  DeviceBuffer<int32_t> one(1);
  one.upload({1});
  run(r, dist::CollectiveKind::kAllReduce, one.arg(dtr::kInt32, {1}), one.arg(dtr::kInt32, {1}));
  CHECK_THAT(one.download()[0] == r.world, "after the errors: {}", one.download()[0]);
}

void check_sub_group(Rank& r) {
  auto sub = dist::new_group({0});
  CHECK_THAT(sub->rank() == (r.rank == 0 ? 0 : -1), "sub-group rank {}", sub->rank());
  if (r.rank == 0) {
    Rank s{sub, 0, 1, r.device};
    DeviceBuffer<float> b(2);
    b.upload({3.0f, 4.0f});
    run(s, dist::CollectiveKind::kAllReduce, b.arg(dtr::kFloat32, {2}), b.arg(dtr::kFloat32, {2}));
    const auto got = b.download();
    CHECK_THAT(got[0] == 3.0f && got[1] == 4.0f, "sub-group all_reduce {} {}", got[0], got[1]);
  }
  dist::destroy_process_group(sub);
}

int worker() {
  try {
    dist::init_process_group("nccl", {.timeout_seconds = 60.0});
    // The group's device is this rank's (LOCAL_RANK); init_process_group
    // leaves the caller's current device as it was.
    const dtr::Device device = dist::world()->device();
    CHECK_THAT(device.type == dtr::DeviceType::kCUDA, "the nccl group runs on {}", device.str());
    int current = -1;
    cuda_ok(cudaGetDevice(&current), "cudaGetDevice");
    CHECK_THAT(current == 0, "init_process_group changed the current device to cuda:{}", current);
    cuda_ok(cudaSetDevice(device.index), "cudaSetDevice");  // this test's own buffers go there
    Rank r{dist::world(), dist::get_rank(), dist::get_world_size(), device};
    check_all_reduce(r);
    check_bitwise_identical(r);
    check_broadcast_gather_scatter(r);
    check_errors(r);
    check_sub_group(r);
    const int64_t calls = r.group->collective_calls();
    dist::destroy_process_group();
    std::printf("rank %d of %d on cuda:%d: %d failures, %lld collectives\n", r.rank, r.world, r.device.index, g_failures,
                static_cast<long long>(calls));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "worker: %s\n", e.what());
    return 2;
  }
  return g_failures == 0 ? 0 : 1;
}

int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa);
  socklen_t len = sizeof sa;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len);
  ::close(fd);
  return ntohs(sa.sin_port);
}

/// Runs `world` workers of this program; true when all exit 0 within 5 minutes.
bool run_world(int world) {
  const int port = free_port();
  std::vector<pid_t> pids;
  for (int rank = 0; rank < world; ++rank) {
    const pid_t pid = fork();
    if (pid == 0) {
      setenv("RANK", std::to_string(rank).c_str(), 1);
      setenv("WORLD_SIZE", std::to_string(world).c_str(), 1);
      setenv("LOCAL_RANK", std::to_string(rank).c_str(), 1);
      setenv("MASTER_ADDR", "127.0.0.1", 1);
      setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
      char self[] = "/proc/self/exe";
      char flag[] = "--worker";
      char* argv[] = {self, flag, nullptr};
      execv(self, argv);
      _exit(127);
    }
    pids.push_back(pid);
  }
  bool ok = true;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(5);
  for (pid_t pid : pids) {
    int status = 0;
    while (waitpid(pid, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        std::fprintf(stderr, "world %d: a worker ran past 5 minutes; killed\n", world);
        for (pid_t p : pids) kill(p, SIGKILL);
        waitpid(pid, &status, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ok = ok && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "--worker") == 0) return worker();
  int devices = 0;
  const cudaError_t e = cudaGetDeviceCount(&devices);
  if (e != cudaSuccess || devices == 0) {
    std::printf("skipped: no CUDA device (%s)\n", e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
    return 0;
  }
  bool ok = run_world(1);
  std::printf("nccl check: world of 1: %s\n", ok ? "ok" : "FAILED");
  if (devices >= 2) {
    const bool two = run_world(2);
    std::printf("nccl check: world of 2: %s\n", two ? "ok" : "FAILED");
    ok = ok && two;
  } else {
    std::printf("nccl check: world of 2 skipped (1 CUDA device)\n");
  }
  std::printf("nccl check: %s\n", ok ? "passed" : "FAILED");
  return ok ? 0 : 1;
}
