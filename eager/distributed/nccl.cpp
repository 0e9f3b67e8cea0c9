// The nccl backend of dtr::distributed: process groups over NCCL between
// CUDA devices, one device per rank (backends.h; docs/DESIGN.md "The nccl
// backend").
//
// Every communicator is non-blocking (ncclConfig_t::blocking = 0), so no
// NCCL call can hang the host: a call that answers ncclInProgress is polled
// with ncclCommGetAsyncError until it settles or the group's timeout passes,
// and then the communicator is aborted and the group marked broken. Each
// group owns one CUDA stream (cudaStreamNonBlocking) on which its fingerprint
// exchange and its collectives run in launch order.
#if DTR_HAVE_NCCL

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <numeric>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/backend.h"
#include "core/error.h"
#include "core/logging.h"
#include "eager/distributed/backends.h"
#include "eager/distributed/rendezvous.h"

namespace dtr::distributed::detail {

bool nccl_available() { return true; }

namespace {

using Clock = std::chrono::steady_clock;

Clock::time_point deadline_after(Clock::time_point start, double seconds) {
  return start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

std::string cuda_text(cudaError_t e) {
  return fmt::format("{}: {}", cudaGetErrorName(e), cudaGetErrorString(e));
}

void check_cuda(cudaError_t e, std::string_view what) {
  if (e != cudaSuccess) [[unlikely]] {
    cudaGetLastError();  // clears a non-sticky error so later calls start clean
    throw DistributedError(fmt::format("nccl: {} failed ({})", what, cuda_text(e)));
  }
}

/// Polls `done` (true once finished; it throws on failure) until it answers
/// true, or `deadline` passes: false then. Yields first, then sleeps a
/// little, so a short collective is seen at once and a long one costs no CPU.
template <typename F>
bool poll_until(F&& done, Clock::time_point deadline) {
  for (int i = 0;; ++i) {
    if (done()) return true;
    if (Clock::now() >= deadline) return false;
    if (i < 64) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(i < 1024 ? 20 : 200));
    }
  }
}

/// The visible CUDA devices; DeviceError when there are none or no driver.
int cuda_device_count() {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) cudaGetLastError();
  DTR_CHECK(e == cudaSuccess && n > 0, DeviceError,
            "init_process_group(\"nccl\"): no CUDA device is present ({}); the nccl backend moves "
            "CUDA tensors, use the \"mpi\" backend for CPU tensors",
            e != cudaSuccess ? cuda_text(e) : std::string("cudaGetDeviceCount found 0 devices"));
  return n;
}

/// Makes `device` current on this thread for the guard's scope.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) : device_(device) {
    if (cudaGetDevice(&previous_) != cudaSuccess) {
      cudaGetLastError();
      previous_ = -1;
    }
    if (previous_ != device_) check_cuda(cudaSetDevice(device_), fmt::format("cudaSetDevice({})", device_));
  }
  ~DeviceGuard() {
    if (previous_ >= 0 && previous_ != device_ && cudaSetDevice(previous_) != cudaSuccess) (void)cudaGetLastError();
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int device_;
  int previous_ = -1;
};

/// Note [nccl determinism]: every algorithm of NCCL hands all ranks the same
/// bits (the reduced chunk is forwarded unchanged), and Ring and Tree reduce
/// in an order fixed by the topology, the sizes and the channel count, so the
/// same job gives the same bits run after run. NVLink SHARP (NVLS, on
/// NVSwitch systems such as HGX H100/H200) reduces in the switch in an order
/// that can change from call to call, so unless the user chose otherwise it
/// is switched off before the first communicator reads its settings.
/// NCCL_ALGO and NCCL_PROTO are left alone: forcing Ring/Simple adds no
/// determinism once NVLS is off and costs what NCCL's per-call tuning wins.
void prefer_deterministic_algorithms() {
  if (std::getenv("NCCL_NVLS_ENABLE") == nullptr) {
    setenv("NCCL_NVLS_ENABLE", "0", /*overwrite=*/0);
    logger().debug("nccl: NCCL_NVLS_ENABLE=0 (NVLS reductions are not run-to-run deterministic)");
  }
}

std::string nccl_text(ncclResult_t r, ncclComm_t comm) {
  const char* last = ncclGetLastError(comm);
  return (last != nullptr && *last != '\0')
             ? fmt::format("{}: {}", ncclGetErrorString(r), last)
             : std::string(ncclGetErrorString(r));
}

/// Aborts `comm` (after a timeout or an error; frees it).
void abort_comm(ncclComm_t comm) {
  if (comm == nullptr) return;
  if (ncclResult_t r = ncclCommAbort(comm); r != ncclSuccess)
    logger().warn("nccl: ncclCommAbort failed ({})", ncclGetErrorString(r));
}

/// Waits for a new communicator's start-up to settle; on failure or timeout
/// aborts it and throws.
void settle_new_comm(ncclComm_t comm, ncclResult_t rc, std::string_view what, double timeout_s,
                     Clock::time_point deadline) {
  if (rc == ncclInProgress && comm != nullptr) {
    const bool settled = poll_until(
        [&] {
          if (ncclCommGetAsyncError(comm, &rc) != ncclSuccess) rc = ncclInternalError;
          return rc != ncclInProgress;
        },
        deadline);
    if (!settled) {
      abort_comm(comm);
      throw CollectiveTimeoutError(fmt::format(
          "nccl: {} did not complete within {} s (DTR_COLLECTIVE_TIMEOUT): a rank never joined it",
          what, timeout_s));
    }
  }
  if (rc != ncclSuccess) {
    const std::string text = nccl_text(rc, comm);
    abort_comm(comm);
    throw DistributedError(fmt::format("nccl: {} failed ({})", what, text));
  }
}

ncclConfig_t nonblocking_config(const char* name) {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  config.commName = name;
  return config;
}

// ---- fingerprints ------------------------------------------------------------

constexpr int kFingerprintDims = 8;

/// What one rank is about to run (distributed.h: "Each collective is checked
/// across ranks before any data moves"). All int64, exchanged with one
/// ncclAllGather of ncclInt64.
struct Fingerprint {
  int64_t valid = 1;  // 0: this rank's call failed its own checks
  int64_t kind = 0;
  int64_t seq = 0;
  int64_t dtype = 0;
  int64_t in_numel = 0;
  int64_t out_numel = 0;
  int64_t root = 0;
  int64_t reduce_op = 0;
  int64_t ndims = 0;
  int64_t dims[kFingerprintDims] = {};
  int64_t dims_hash = 0;  // FNV-1a over every dim (covers ndims > kFingerprintDims)
};
constexpr size_t kFingerprintWords = sizeof(Fingerprint) / sizeof(int64_t);
static_assert(sizeof(Fingerprint) == kFingerprintWords * sizeof(int64_t));

bool operator==(const Fingerprint& a, const Fingerprint& b) {
  return std::memcmp(&a, &b, sizeof a) == 0;
}

std::string describe(const Fingerprint& f) {
  const auto kind = CollectiveKind(f.kind);
  std::string s = fmt::format("{} #{}", collective_name(kind), f.seq);
  if (kind == CollectiveKind::kBarrier) return s;
  const std::string_view dtype =
      f.dtype >= 0 && f.dtype < kNumDTypes ? dtype_name(DType(f.dtype)) : std::string_view("?");
  std::vector<int64_t> dims(f.dims, f.dims + std::clamp<int64_t>(f.ndims, 0, kFingerprintDims));
  s += fmt::format(" {} [{}{}]", dtype, fmt::join(dims, ", "), f.ndims > kFingerprintDims ? ", ..." : "");
  if (kind == CollectiveKind::kBroadcast) s += fmt::format(" root {}", f.root);
  if (kind == CollectiveKind::kAllReduce || kind == CollectiveKind::kReduceScatter)
    s += fmt::format(" {}", reduce_op_name(ReduceOp(f.reduce_op)));
  return s;
}

/// How one collective maps onto NCCL, or why this rank refuses it.
struct Plan {
  Fingerprint fingerprint;
  ncclDataType_t dtype = ncclFloat32;
  ncclRedOp_t op = ncclSum;
  size_t count = 0;  // elements NCCL is told (per rank for gather/scatter)
  enum class Refusal { kNone, kType, kValue, kDistributed } refusal = Refusal::kNone;
  std::string why;

  template <typename... Args>
  void refuse(Refusal r, fmt::format_string<Args...> format, Args&&... args) {
    if (refusal != Refusal::kNone) return;  // the first reason is the one reported
    refusal = r;
    why = fmt::format(format, std::forward<Args>(args)...);
    fingerprint.valid = 0;
  }
  [[noreturn]] void throw_refusal(std::string_view suffix) const {
    const std::string text = why + std::string(suffix);
    switch (refusal) {
      case Refusal::kType: throw TypeError(text);
      case Refusal::kValue: throw ValueError(text);
      default: throw DistributedError(text);
    }
  }
};

bool nccl_dtype(DType t, ncclDataType_t& out) {
  switch (t) {
    case DType::kFloat32: out = ncclFloat32; return true;
    case DType::kFloat64: out = ncclFloat64; return true;
    case DType::kFloat16: out = ncclFloat16; return true;
    case DType::kBFloat16: out = ncclBfloat16; return true;
    case DType::kInt32: out = ncclInt32; return true;
    case DType::kInt64: out = ncclInt64; return true;
    case DType::kUInt8: out = ncclUint8; return true;
    case DType::kBool: return false;
  }
  return false;
}

Plan plan_of(const CollectiveCall& call, int64_t seq, int group_size, int device) {
  using R = Plan::Refusal;
  Plan p;
  Fingerprint& f = p.fingerprint;
  f.kind = int64_t(call.kind);
  f.seq = seq;
  const std::string_view name = collective_name(call.kind);
  if (call.kind == CollectiveKind::kBarrier) {
    p.dtype = ncclInt32;
    p.count = 1;
    return p;
  }
  f.dtype = int64_t(call.in.dtype);
  f.in_numel = call.in.numel();
  f.out_numel = call.out.numel();
  f.root = call.kind == CollectiveKind::kBroadcast ? call.root : 0;
  f.ndims = call.in.dim();
  uint64_t hash = 1469598103934665603ull;
  for (int64_t d = 0; d < f.ndims; ++d) {
    if (d < kFingerprintDims) f.dims[d] = call.in.shape[size_t(d)];
    hash = (hash ^ uint64_t(call.in.shape[size_t(d)])) * 1099511628211ull;
  }
  f.dims_hash = int64_t(hash);
  const bool reduces = call.kind == CollectiveKind::kAllReduce || call.kind == CollectiveKind::kReduceScatter;
  if (reduces) f.reduce_op = int64_t(call.reduce_op);

  if (!nccl_dtype(call.in.dtype, p.dtype))
    p.refuse(R::kType, "nccl {}: dtype {} is not supported (float32, float64, float16, bfloat16, "
             "int32, int64, uint8 are)", name, dtype_name(call.in.dtype));
  if (call.out.dtype != call.in.dtype)
    p.refuse(R::kType, "nccl {}: output dtype {} differs from input dtype {}", name,
             dtype_name(call.out.dtype), dtype_name(call.in.dtype));
  if (!call.in.is_contiguous() || !call.out.is_contiguous())
    p.refuse(R::kValue, "nccl {}: tensors must be contiguous", name);
  if (call.device.type != DeviceType::kCUDA || call.device.index != device)
    p.refuse(R::kDistributed, "nccl {}: the tensors are on {}, this rank's nccl group runs on cuda:{}",
             name, call.device.str(), device);
  if (reduces) {
    switch (call.reduce_op) {
      case ReduceOp::kSum: p.op = ncclSum; break;
      case ReduceOp::kMax: p.op = ncclMax; break;
      case ReduceOp::kMean:
        p.op = ncclAvg;
        if (!is_floating(call.in.dtype))
          p.refuse(R::kType, "nccl {}: reduce op mean needs a floating dtype, got {}", name,
                   dtype_name(call.in.dtype));
        break;
    }
  }
  const int64_t in = call.in.numel(), out = call.out.numel();
  switch (call.kind) {
    case CollectiveKind::kAllReduce:
    case CollectiveKind::kBroadcast:
      if (in != out) p.refuse(R::kValue, "nccl {}: input has {} elements, output {}", name, in, out);
      if (call.kind == CollectiveKind::kBroadcast && (call.root < 0 || call.root >= group_size))
        p.refuse(R::kValue, "nccl broadcast: root {} is not a rank of a group of {}", call.root, group_size);
      p.count = size_t(in);
      break;
    case CollectiveKind::kAllGather:
      if (out != in * group_size)
        p.refuse(R::kValue, "nccl all_gather: output has {} elements, expected {} x {} ranks", out, in,
                 group_size);
      p.count = size_t(in);
      break;
    case CollectiveKind::kReduceScatter:
      if (in != out * group_size)
        p.refuse(R::kValue, "nccl reduce_scatter: input has {} elements, expected {} x {} ranks", in,
                 out, group_size);
      p.count = size_t(out);
      break;
    case CollectiveKind::kBarrier: break;
  }
  return p;
}

class NcclGroup;

/// A launched collective: done once the event recorded after it on the
/// group's stream has fired.
class NcclWork final : public Work {
 public:
  NcclWork(std::shared_ptr<NcclGroup> group, CollectiveKind kind, int64_t seq, cudaEvent_t done,
           Clock::time_point deadline)
      : group_(std::move(group)), kind_(kind), seq_(seq), done_(done), deadline_(deadline) {}
  ~NcclWork() override;
  bool is_completed() override;
  void wait() override;

 private:
  std::shared_ptr<NcclGroup> group_;
  CollectiveKind kind_;
  int64_t seq_;
  cudaEvent_t done_;
  Clock::time_point deadline_;
  bool finished_ = false;
  std::exception_ptr error_;  // once failed, every later call throws it again
};

class NcclGroup final : public ProcessGroup {
 public:
  /// Takes `comm` (null for a rank that is not a member); aborts it when the
  /// group's resources cannot be made.
  NcclGroup(int rank, std::vector<int> world_ranks, double timeout_s, int device, ncclComm_t comm)
      : ProcessGroup(rank, std::move(world_ranks), timeout_s), device_(device), comm_(comm) {
    if (comm_ == nullptr) return;
    try {
      DeviceGuard guard(device_);
      check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
      check_cuda(cudaEventCreateWithFlags(&inputs_ready_, cudaEventDisableTiming), "cudaEventCreate");
      check_cuda(cudaEventCreateWithFlags(&fingerprints_done_, cudaEventDisableTiming), "cudaEventCreate");
      const size_t bytes = size_t(size()) * sizeof(Fingerprint);
      check_cuda(cudaMallocHost(reinterpret_cast<void**>(&host_fingerprints_), bytes), "cudaMallocHost");
      check_cuda(cudaMalloc(reinterpret_cast<void**>(&device_fingerprints_), bytes), "cudaMalloc");
      check_cuda(cudaMalloc(&barrier_word_, sizeof(int32_t)), "cudaMalloc");
    } catch (...) {
      release(/*abort=*/true);
      throw;
    }
  }
  // A communicator still here is healthy (a failed one was aborted at once):
  // destroy_process_group only marks the group, in-flight work finishes.
  ~NcclGroup() override { release(/*abort=*/false); }

  std::string_view backend_name() const override { return "nccl"; }
  Device device() const override { return Device(DeviceType::kCUDA, device_); }

  /// The sub-group of the world ranks `ranks` (ncclCommSplit; every rank of
  /// this group calls it).
  std::shared_ptr<NcclGroup> split(const std::vector<int>& ranks);

  /// Whether `done` has fired; throws when the group failed meanwhile.
  bool poll_event(cudaEvent_t done, CollectiveKind kind, int64_t seq) {
    std::lock_guard lock(mu_);
    throw_if_broken(fmt::format("{} #{}", collective_name(kind), seq));
    DeviceGuard guard(device_);
    check_async(kind, seq);
    const cudaError_t e = cudaEventQuery(done);
    if (e == cudaSuccess) return true;
    // "Not ready" is no error, but some CUDA versions record it as the last
    // error; cleared so that the next kernel's check_launch does not report it.
    (void)cudaGetLastError();
    if (e == cudaErrorNotReady) return false;
    fail(fmt::format("nccl: {} #{} on group {}: cudaEventQuery failed ({})", collective_name(kind), seq,
                     id(), cuda_text(e)));
  }

  /// After `kind` #`seq` ran past the timeout: aborts the communicator and throws.
  [[noreturn]] void time_out(CollectiveKind kind, int64_t seq, std::string_view phase) {
    std::lock_guard lock(mu_);
    time_out_locked(kind, seq, phase);
  }

 protected:
  std::shared_ptr<Work> start(const CollectiveCall& call, int64_t seq) override;

 private:
  [[noreturn]] void time_out_locked(CollectiveKind kind, int64_t seq, std::string_view phase) {
    const std::string why = fmt::format(
        "nccl: {} #{} on group {} (world ranks [{}]) did not complete within {} s "
        "(DTR_COLLECTIVE_TIMEOUT){}: some rank of the group never joined it (NCCL cannot say "
        "which); the group was aborted",
        collective_name(kind), seq, id(), fmt::join(world_ranks(), ", "), timeout_seconds(), phase);
    abort_locked(why);
    throw CollectiveTimeoutError(why);
  }

  /// Marks the group broken with `why`, aborts the communicator and throws.
  [[noreturn]] void fail(const std::string& why) {
    abort_locked(why);
    throw DistributedError(why);
  }

  void abort_locked(const std::string& why) {
    if (broken_why_.empty()) broken_why_ = why;
    mark_broken(why);
    abort_comm(std::exchange(comm_, nullptr));
  }

  void throw_if_broken(std::string_view what) const {
    DTR_CHECK(broken_why_.empty(), DistributedError, "nccl: {} on group {}: the group is broken ({})", what,
              id(), broken_why_);
  }

  /// Throws (after aborting) when the communicator reported an error.
  void check_async(CollectiveKind kind, int64_t seq) {
    ncclResult_t r = ncclSuccess;
    if (ncclCommGetAsyncError(comm_, &r) != ncclSuccess) r = ncclInternalError;
    if (r != ncclSuccess && r != ncclInProgress)
      fail(fmt::format("nccl: {} #{} on group {} failed ({})", collective_name(kind), seq, id(),
                       nccl_text(r, comm_)));
  }

  /// Waits for an NCCL call's answer to settle (non-blocking communicators
  /// may answer ncclInProgress); throws on an error or past `deadline`.
  void settle(ncclResult_t rc, std::string_view what, CollectiveKind kind, int64_t seq,
              Clock::time_point deadline) {
    if (rc == ncclInProgress) {
      const bool settled = poll_until(
          [&] {
            if (ncclCommGetAsyncError(comm_, &rc) != ncclSuccess) rc = ncclInternalError;
            return rc != ncclInProgress;
          },
          deadline);
      if (!settled) time_out_locked(kind, seq, fmt::format(" in {}", what));
    }
    if (rc != ncclSuccess)
      fail(fmt::format("nccl: {} for {} #{} on group {} failed ({})", what, collective_name(kind), seq,
                       id(), nccl_text(rc, comm_)));
  }

  void cuda(cudaError_t e, std::string_view what) {
    if (e != cudaSuccess) {
      cudaGetLastError();
      fail(fmt::format("nccl: {} on group {} failed ({})", what, id(), cuda_text(e)));
    }
  }

  /// Every rank's fingerprint of the collective about to run, in group-rank
  /// order: one small all-gather, waited for on the host.
  std::vector<Fingerprint> exchange(const Fingerprint& mine, CollectiveKind kind, int64_t seq,
                                    Clock::time_point deadline);
  /// Throws on every rank when the fingerprints disagree or a rank refused.
  void verify(const std::vector<Fingerprint>& all, const Plan& plan) const;

  void release(bool abort) noexcept {
    std::optional<DeviceGuard> guard;
    try {
      guard.emplace(device_);
    } catch (const Error& e) {
      logger().warn("nccl: releasing group {}: {}", id(), e.what());
    }
    if (comm_ != nullptr) {
      if (abort) {
        abort_comm(comm_);
      } else {
        // Finalize flushes what is in flight; bounded by the timeout, then abort.
        ncclResult_t rc = ncclCommFinalize(comm_);
        const bool settled =
            rc != ncclInProgress ||
            poll_until(
                [&] {
                  if (ncclCommGetAsyncError(comm_, &rc) != ncclSuccess) rc = ncclInternalError;
                  return rc != ncclInProgress;
                },
                deadline_after(Clock::now(), timeout_seconds()));
        if (settled && rc == ncclSuccess) {
          if (ncclResult_t r = ncclCommDestroy(comm_); r != ncclSuccess)
            logger().warn("nccl: ncclCommDestroy of group {} failed ({})", id(), ncclGetErrorString(r));
        } else {
          logger().warn("nccl: finalizing group {} {}; aborting it", id(),
                        settled ? ncclGetErrorString(rc) : "timed out");
          abort_comm(comm_);
        }
      }
      comm_ = nullptr;
    }
    if (barrier_word_ != nullptr) cudaFree(barrier_word_);
    if (device_fingerprints_ != nullptr) cudaFree(device_fingerprints_);
    if (host_fingerprints_ != nullptr) cudaFreeHost(host_fingerprints_);
    if (fingerprints_done_ != nullptr) cudaEventDestroy(fingerprints_done_);
    if (inputs_ready_ != nullptr) cudaEventDestroy(inputs_ready_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
    barrier_word_ = nullptr;
    device_fingerprints_ = host_fingerprints_ = nullptr;
    fingerprints_done_ = inputs_ready_ = nullptr;
    stream_ = nullptr;
    cudaGetLastError();
  }

  int device_;
  ncclComm_t comm_;
  std::mutex mu_;  // one launch at a time: every rank must issue NCCL calls in one order
  std::string broken_why_;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t inputs_ready_ = nullptr;
  cudaEvent_t fingerprints_done_ = nullptr;
  Fingerprint* host_fingerprints_ = nullptr;    // pinned, size() entries
  Fingerprint* device_fingerprints_ = nullptr;  // size() entries
  void* barrier_word_ = nullptr;                // one int32 the barrier all-reduces
};

std::vector<Fingerprint> NcclGroup::exchange(const Fingerprint& mine, CollectiveKind kind, int64_t seq,
                                             Clock::time_point deadline) {
  const int r = rank();
  host_fingerprints_[r] = mine;
  cuda(cudaMemcpyAsync(device_fingerprints_ + r, host_fingerprints_ + r, sizeof(Fingerprint),
                       cudaMemcpyHostToDevice, stream_),
       "cudaMemcpyAsync of the fingerprint");
  // In place: rank r's block of the output is its input.
  settle(ncclAllGather(device_fingerprints_ + r, device_fingerprints_, kFingerprintWords, ncclInt64, comm_,
                       stream_),
         "ncclAllGather of the fingerprints", kind, seq, deadline);
  cuda(cudaMemcpyAsync(host_fingerprints_, device_fingerprints_, size_t(size()) * sizeof(Fingerprint),
                       cudaMemcpyDeviceToHost, stream_),
       "cudaMemcpyAsync of the fingerprints");
  cuda(cudaEventRecord(fingerprints_done_, stream_), "cudaEventRecord");
  const bool done = poll_until(
      [&] {
        check_async(kind, seq);
        const cudaError_t e = cudaEventQuery(fingerprints_done_);
        if (e == cudaErrorNotReady) {
          (void)cudaGetLastError();  // as in poll_event
          return false;
        }
        cuda(e, "cudaEventQuery of the fingerprints");
        return true;
      },
      deadline);
  if (!done) time_out_locked(kind, seq, " while the ranks exchanged fingerprints");
  return {host_fingerprints_, host_fingerprints_ + size()};
}

void NcclGroup::verify(const std::vector<Fingerprint>& all, const Plan& plan) const {
  const Fingerprint& mine = plan.fingerprint;
  const std::string_view name = collective_name(CollectiveKind(mine.kind));
  std::vector<int> refused;
  for (int r = 0; r < size(); ++r)
    if (all[size_t(r)].valid == 0) refused.push_back(r);
  if (!refused.empty()) {
    if (mine.valid == 0)
      plan.throw_refusal(fmt::format(" (on group {}: rank{} [{}] refused this {} #{}, no data moved)", id(),
                                     refused.size() == 1 ? "" : "s", fmt::join(refused, ", "), name, mine.seq));
    throw DistributedError(fmt::format(
        "nccl: {} #{} on group {}: rank{} [{}] refused the call (see the error there); no data moved",
        name, mine.seq, id(), refused.size() == 1 ? "" : "s", fmt::join(refused, ", ")));
  }
  // Ranks grouped by what they called, in order of first appearance.
  std::vector<std::pair<Fingerprint, std::vector<int>>> classes;
  for (int r = 0; r < size(); ++r) {
    auto it = std::find_if(classes.begin(), classes.end(), [&](const auto& c) { return c.first == all[size_t(r)]; });
    if (it == classes.end()) {
      classes.push_back({all[size_t(r)], {r}});
    } else {
      it->second.push_back(r);
    }
  }
  if (classes.size() == 1) return;
  std::vector<std::string> sides;
  for (const auto& [f, ranks] : classes)
    sides.push_back(fmt::format("rank{} [{}] called {}", ranks.size() == 1 ? "" : "s", fmt::join(ranks, ", "),
                                describe(f)));
  throw DistributedError(fmt::format(
      "nccl: the ranks of group {} disagree on collective #{} (this is rank {}): {}; no data moved",
      id(), mine.seq, rank(), fmt::join(sides, "; ")));
}

std::shared_ptr<Work> NcclGroup::start(const CollectiveCall& call, int64_t seq) {
  std::lock_guard lock(mu_);
  throw_if_broken(fmt::format("{} #{}", collective_name(call.kind), seq));
  DeviceGuard guard(device_);
  const Clock::time_point deadline = deadline_after(Clock::now(), timeout_seconds());
  const Plan plan = plan_of(call, seq, size(), device_);
  verify(exchange(plan.fingerprint, call.kind, seq, deadline), plan);

  // The inputs are written on the legacy default stream (cudaMemcpy, kernels
  // launched without a stream): the collective waits for what is queued there.
  cuda(cudaEventRecord(inputs_ready_, cudaStreamLegacy), "cudaEventRecord");
  cuda(cudaStreamWaitEvent(stream_, inputs_ready_, 0), "cudaStreamWaitEvent");
  const void* in = call.in.data;
  void* out = call.out.data;
  ncclResult_t rc = ncclSuccess;
  switch (call.kind) {
    case CollectiveKind::kAllReduce:
      rc = ncclAllReduce(in, out, plan.count, plan.dtype, plan.op, comm_, stream_);
      break;
    case CollectiveKind::kBroadcast:
      rc = ncclBroadcast(in, out, plan.count, plan.dtype, call.root, comm_, stream_);
      break;
    case CollectiveKind::kAllGather:
      rc = ncclAllGather(in, out, plan.count, plan.dtype, comm_, stream_);
      break;
    case CollectiveKind::kReduceScatter:
      rc = ncclReduceScatter(in, out, plan.count, plan.dtype, plan.op, comm_, stream_);
      break;
    case CollectiveKind::kBarrier:
      cuda(cudaMemsetAsync(barrier_word_, 0, sizeof(int32_t), stream_), "cudaMemsetAsync");
      rc = ncclAllReduce(barrier_word_, barrier_word_, 1, ncclInt32, ncclSum, comm_, stream_);
      break;
  }
  settle(rc, fmt::format("nccl {}", collective_name(call.kind)), call.kind, seq, deadline);
  cudaEvent_t done = nullptr;
  cuda(cudaEventCreateWithFlags(&done, cudaEventDisableTiming), "cudaEventCreate");
  if (const cudaError_t e = cudaEventRecord(done, stream_); e != cudaSuccess) {
    cudaEventDestroy(done);
    cuda(e, "cudaEventRecord");
  }
  return std::make_shared<NcclWork>(std::static_pointer_cast<NcclGroup>(shared_from_this()), call.kind, seq,
                                    done, deadline);
}

std::shared_ptr<NcclGroup> NcclGroup::split(const std::vector<int>& ranks) {
  std::lock_guard lock(mu_);
  throw_if_broken(fmt::format("new_group([{}])", fmt::join(ranks, ", ")));
  DeviceGuard guard(device_);
  const auto it = std::find(ranks.begin(), ranks.end(), rank());
  const bool member = it != ranks.end();
  ncclConfig_t config = nonblocking_config("dtr sub-group");
  ncclComm_t child = nullptr;
  const Clock::time_point deadline = deadline_after(Clock::now(), timeout_seconds());
  ncclResult_t rc = ncclCommSplit(comm_, member ? 0 : NCCL_SPLIT_NOCOLOR, rank(), &child, &config);
  if (rc == ncclInProgress) {
    const bool settled = poll_until(
        [&] {
          // The child's state when this rank gets one, else the parent's.
          if (ncclCommGetAsyncError(child != nullptr ? child : comm_, &rc) != ncclSuccess) rc = ncclInternalError;
          return rc != ncclInProgress;
        },
        deadline);
    if (!settled) {
      abort_comm(child);
      const std::string why = fmt::format(
          "nccl: new_group([{}]) (ncclCommSplit of group {}) did not complete within {} s "
          "(DTR_COLLECTIVE_TIMEOUT): some rank never called it; the group was aborted",
          fmt::join(ranks, ", "), id(), timeout_seconds());
      abort_locked(why);
      throw CollectiveTimeoutError(why);
    }
  }
  if (rc != ncclSuccess) {
    const std::string text = nccl_text(rc, child != nullptr ? child : comm_);
    abort_comm(child);
    fail(fmt::format("nccl: new_group([{}]) (ncclCommSplit of group {}) failed ({})", fmt::join(ranks, ", "),
                     id(), text));
  }
  const int group_rank = member ? int(it - ranks.begin()) : -1;
  return std::make_shared<NcclGroup>(group_rank, ranks, timeout_seconds(), device_, member ? child : nullptr);
}

NcclWork::~NcclWork() {
  if (!finished_ && !error_) {
    try {
      wait();
    } catch (const std::exception& e) {
      logger().error("nccl: {} #{} destroyed unwaited failed: {}", collective_name(kind_), seq_, e.what());
    }
  }
  if (cudaEventDestroy(done_) != cudaSuccess) (void)cudaGetLastError();
}

bool NcclWork::is_completed() {
  if (error_) std::rethrow_exception(error_);
  try {
    if (!finished_) finished_ = group_->poll_event(done_, kind_, seq_);
  } catch (...) {
    error_ = std::current_exception();
    throw;
  }
  return finished_;
}

void NcclWork::wait() {
  if (poll_until([&] { return is_completed(); }, deadline_)) return;
  try {
    group_->time_out(kind_, seq_, "");
  } catch (...) {
    error_ = std::current_exception();
    throw;
  }
}

}  // namespace

std::shared_ptr<ProcessGroup> nccl_init_world(double timeout_seconds) {
  const LaunchEnv env = launch_env_from_environment();
  const int devices = cuda_device_count();
  const int device = env.local_rank.value_or(env.rank % devices);
  DTR_CHECK(device < devices, DeviceError,
            "init_process_group(\"nccl\"): {}={} but only {} CUDA device{} visible (one device per rank)",
            env.launcher == "torchrun" ? "LOCAL_RANK" : "OMPI_COMM_WORLD_LOCAL_RANK", device, devices,
            devices == 1 ? " is" : "s are");
  prefer_deterministic_algorithms();
  // The communicator is made on `device`; the caller's current device is
  // restored after (a stale current device would send its kernels astray).
  DeviceGuard guard(device);
  // This rank's device is the default one from now on: the bare
  // DTR_MEMORY_BUDGET and the device-less budget and stats calls mean it,
  // not cuda:0 (which would also make a context on GPU 0 in every rank).
  set_default_device(Device(kCUDA, device));
  const Clock::time_point deadline = deadline_after(Clock::now(), timeout_seconds);

  ncclUniqueId id{};
  if (env.rank == 0) {
    if (ncclResult_t r = ncclGetUniqueId(&id); r != ncclSuccess)
      throw DistributedError(fmt::format("init_process_group(\"nccl\"): ncclGetUniqueId failed ({})",
                                         nccl_text(r, nullptr)));
  }
  const auto* id_bytes = reinterpret_cast<const std::byte*>(&id);
  const std::vector<std::byte> got = rendezvous_broadcast(
      env.master_addr, env.master_port, env.rank, env.world_size,
      std::span<const std::byte>(id_bytes, sizeof id), timeout_seconds);
  DTR_CHECK(got.size() == sizeof id, DistributedError,
            "init_process_group(\"nccl\"): rank 0 sent {} bytes for the ncclUniqueId, expected {}", got.size(),
            sizeof id);
  std::memcpy(&id, got.data(), sizeof id);

  ncclConfig_t config = nonblocking_config("dtr world");
  ncclComm_t comm = nullptr;
  const ncclResult_t rc = ncclCommInitRankConfig(&comm, env.world_size, id, env.rank, &config);
  settle_new_comm(comm, rc, fmt::format("ncclCommInitRankConfig (rank {} of {})", env.rank, env.world_size),
                  timeout_seconds, deadline);
  std::vector<int> ranks(size_t(env.world_size));
  std::iota(ranks.begin(), ranks.end(), 0);
  logger().debug("nccl: rank {} of {} on cuda:{} ({})", env.rank, env.world_size, device, env.launcher);
  return std::make_shared<NcclGroup>(env.rank, std::move(ranks), timeout_seconds, device, comm);
}

std::shared_ptr<ProcessGroup> nccl_new_group(ProcessGroup& world, const std::vector<int>& ranks) {
  auto* parent = dynamic_cast<NcclGroup*>(&world);
  DTR_CHECK(parent != nullptr, DistributedError, "new_group: the world group is {}, not nccl",
            world.backend_name());
  return parent->split(ranks);
}

}  // namespace dtr::distributed::detail

#endif  // DTR_HAVE_NCCL
