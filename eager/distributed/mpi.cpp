// The mpi backend of dtr::distributed (Note [collectives] in docs/DESIGN.md).
//
// Every collective goes through two stages, both non-blocking so that a
// Work can be polled from autograd hooks while backward runs:
//  1. the fingerprint: each rank sends its Fingerprint to every other rank
//     (point to point, on a communicator of its own) and receives theirs;
//     ranks whose fingerprints never arrive are the ones a timeout names,
//     and fingerprints that differ fail the collective on every rank before
//     any data moves (each rank sees all of them);
//  2. the data: MPI's non-blocking collectives, started strictly in
//     sequence order (MPI requires the same order on every rank), only once
//     the collective before it on the group is done. A floating sum (and
//     mean) is an MPI_Ireduce to rank 0 followed by an MPI_Ibcast, so every
//     rank holds rank 0's bits: MPI_Allreduce may give ranks results that
//     differ in the last bit.
// All MPI calls are made under one mutex (MPI_THREAD_SERIALIZED).
#if DTR_HAVE_MPI

#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <span>
#include <thread>
#include <type_traits>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/dtype.h"
#include "core/error.h"
#include "core/error_kind.h"
#include "core/half.h"
#include "core/logging.h"
#include "eager/distributed/backends.h"

namespace dtr::distributed::detail {
namespace {

std::mutex& mpi_mutex() {
  static std::mutex* mu = new std::mutex;
  return *mu;
}

std::string mpi_error(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(code, text, &len);
  return std::string(text, size_t(len));
}

#define DTR_MPI_CALL(call)                                                                     \
  do {                                                                                         \
    const int dtr_mpi_rc = (call);                                                             \
    if (dtr_mpi_rc != MPI_SUCCESS) [[unlikely]]                                                \
      throw ::dtr::DistributedError(fmt::format("{} failed: {}", #call, mpi_error(dtr_mpi_rc))); \
  } while (0)

// ---- half-precision reductions (MPI has no 16-bit floating types) ----------

float to_float(Half h) { return half_to_float(h.bits); }
float to_float(BFloat16 h) { return bfloat16_to_float(h.bits); }
template <typename H>
H from_float(float f) {
  if constexpr (std::is_same_v<H, Half>) return Half{float_to_half(f)};
  else return BFloat16{float_to_bfloat16(f)};
}

/// Sum or max of 16-bit floats in float, rounded back (as torch's kernels).
template <typename H, bool kMax>
void reduce_half(void* in, void* inout, int* len, MPI_Datatype*) {
  const H* a = static_cast<const H*>(in);
  H* b = static_cast<H*>(inout);
  for (int i = 0; i < *len; ++i) {
    const float x = to_float(a[i]), y = to_float(b[i]);
    b[i] = from_float<H>(kMax ? (x > y || x != x ? x : y) : x + y);
  }
}

struct HalfOps {
  MPI_Op sum_f16, max_f16, sum_bf16, max_bf16;
};
const HalfOps& half_ops() {
  static const HalfOps ops = [] {
    HalfOps o{};
    MPI_Op_create(&reduce_half<Half, false>, 1, &o.sum_f16);
    MPI_Op_create(&reduce_half<Half, true>, 1, &o.max_f16);
    MPI_Op_create(&reduce_half<BFloat16, false>, 1, &o.sum_bf16);
    MPI_Op_create(&reduce_half<BFloat16, true>, 1, &o.max_bf16);
    return o;
  }();
  return ops;
}

MPI_Datatype mpi_type(DType t) {
  switch (t) {
    case kFloat32: return MPI_FLOAT;
    case kFloat64: return MPI_DOUBLE;
    case kInt32: return MPI_INT32_T;
    case kInt64: return MPI_INT64_T;
    case kFloat16:
    case kBFloat16: return MPI_UINT16_T;
    case kBool:
    case kUInt8: return MPI_UINT8_T;
    default: break;
  }
  throw TypeError(fmt::format("the mpi backend has no MPI type for {}", dtype_name(t)));
}

MPI_Op mpi_op(DType t, ReduceOp op) {
  const bool max = op == ReduceOp::kMax;
  if (t == kFloat16) return max ? half_ops().max_f16 : half_ops().sum_f16;
  if (t == kBFloat16) return max ? half_ops().max_bf16 : half_ops().sum_bf16;
  if (t == kBool) return max ? MPI_LOR : MPI_LOR;  // sum of bools saturates, as torch's
  return max ? MPI_MAX : MPI_SUM;
}

/// Divides `n` elements at `data` by `world` in place (mean on rank 0), in
/// the element type's own precision (float for the 16-bit types), as
/// torch's division of a tensor by a scalar.
void divide(std::byte* data, int64_t n, DType t, int world) {
  auto run = [&](auto* p) {
    for (int64_t i = 0; i < n; ++i) p[i] /= decltype(+*p)(world);
  };
  auto run16 = [&](auto* p) {
    using H = std::remove_pointer_t<decltype(p)>;
    for (int64_t i = 0; i < n; ++i) p[i] = from_float<H>(to_float(p[i]) / float(world));
  };
  switch (t) {
    case kFloat32: run(reinterpret_cast<float*>(data)); break;
    case kFloat64: run(reinterpret_cast<double*>(data)); break;
    case kFloat16: run16(reinterpret_cast<Half*>(data)); break;
    case kBFloat16: run16(reinterpret_cast<BFloat16*>(data)); break;
    default: throw InternalError("mean of a non-floating tensor reached the mpi backend");
  }
}

// ---- fingerprints -------------------------------------------------------------

/// What every rank of a collective must agree on. The shape is compared in
/// full through `shape_hash` (every dim, FNV-1a); `dims` keeps the first
/// kShownDims for messages. A rank whose own checks refused the call sends
/// `error_kind` (an ErrorKind) and `why` instead of a tensor description;
/// the others receive into a buffer of the full size, and the bytes of `why`
/// travel only with a refusal.
constexpr int kShownDims = 8;
constexpr size_t kWhyBytes = 512;
struct Fingerprint {
  int64_t seq = 0;
  int64_t numel = 0;
  uint64_t shape_hash = 0;
  int64_t dims[kShownDims] = {};
  int32_t kind = 0;
  int32_t dtype = 0;
  int32_t reduce_op = 0;
  int32_t root = 0;
  int32_t ndim = 0;
  int32_t error_kind = 0;  // 0: not refused
  char why[kWhyBytes] = {};
  bool operator==(const Fingerprint& o) const { return std::memcmp(this, &o, sizeof o) == 0; }
  bool refused() const { return error_kind != 0; }
  /// Bytes that go on the wire: the description, and `why` when refused.
  int wire_bytes() const {
    return int(offsetof(Fingerprint, why) + (refused() ? std::strlen(why) + 1 : 0));
  }
};
static_assert(std::is_standard_layout_v<Fingerprint> && offsetof(Fingerprint, why) % 8 == 0);

uint64_t shape_hash(std::span<const int64_t> dims) {
  uint64_t h = 1469598103934665603ull;
  for (int64_t d : dims) h = (h ^ uint64_t(d)) * 1099511628211ull;
  return h;
}

Fingerprint fingerprint(const CollectiveCall& c, int64_t seq) {
  Fingerprint f;
  f.seq = seq;
  f.kind = int32_t(c.kind);
  if (c.kind == CollectiveKind::kBarrier) return f;
  const TensorArg& t = c.in;  // all_gather / reduce_scatter: the input's shape
  f.numel = t.numel();
  f.dtype = int32_t(t.dtype);
  f.ndim = int32_t(t.dim());
  for (int i = 0; i < std::min<int>(f.ndim, kShownDims); ++i) f.dims[i] = t.shape[size_t(i)];
  f.shape_hash = shape_hash(t.shape);
  if (c.kind == CollectiveKind::kAllReduce || c.kind == CollectiveKind::kReduceScatter)
    f.reduce_op = int32_t(c.reduce_op);
  if (c.kind == CollectiveKind::kBroadcast) f.root = c.root;
  return f;
}

/// The fingerprint of a rank that refused collective `kind` #seq with `why`.
Fingerprint refusal_fingerprint(CollectiveKind kind, int64_t seq, ErrorKind error, std::string_view why) {
  Fingerprint f;
  f.seq = seq;
  f.kind = int32_t(kind);
  f.error_kind = int32_t(error);
  const size_t n = std::min(why.size(), kWhyBytes - 1);
  std::memcpy(f.why, why.data(), n);
  if (n < why.size()) std::memcpy(f.why + n - 3, "...", 3);
  return f;
}

std::string describe(const Fingerprint& f) {
  const auto kind = CollectiveKind(f.kind);
  std::string s = fmt::format("{} #{}", collective_name(kind), f.seq);
  if (f.refused()) return s + " (refused)";
  if (kind == CollectiveKind::kBarrier) return s;
  std::vector<int64_t> dims(f.dims, f.dims + std::clamp(f.ndim, 0, kShownDims));
  if (f.ndim > kShownDims) {
    s += fmt::format(" of {} [{}, ...] ({} dims, numel {}, shape hash {:016x})", dtype_name(DType(f.dtype)),
                     fmt::join(dims, ", "), f.ndim, f.numel, f.shape_hash);
  } else {
    s += fmt::format(" of {} [{}]", dtype_name(DType(f.dtype)), fmt::join(dims, ", "));
  }
  if (kind == CollectiveKind::kAllReduce || kind == CollectiveKind::kReduceScatter)
    s += fmt::format(" ({})", reduce_op_name(ReduceOp(f.reduce_op)));
  if (kind == CollectiveKind::kBroadcast) s += fmt::format(" (src {})", f.root);
  return s;
}

class MpiGroup;

class MpiWork final : public Work {
 public:
  MpiWork(std::shared_ptr<MpiGroup> group, const CollectiveCall& call, int64_t seq);
  ~MpiWork() override;
  bool is_completed() override;
  void wait() override;

 private:
  friend class MpiGroup;
  [[noreturn]] void throw_failure() const { throw_error(error_kind_, error_); }
  enum class Stage { kFingerprint, kQueued, kData, kBroadcast, kDone, kFailed };
  std::shared_ptr<MpiGroup> group_;
  CollectiveCall call_;
  int64_t seq_;
  std::chrono::steady_clock::time_point start_;
  Stage stage_ = Stage::kFingerprint;
  Fingerprint mine_;
  std::vector<Fingerprint> theirs_;  // by group rank
  std::vector<MPI_Request> fp_recvs_;
  MPI_Request data_ = MPI_REQUEST_NULL;
  std::string error_;
  ErrorKind error_kind_ = ErrorKind::kDistributed;
};

class MpiGroup final : public ProcessGroup {
 public:
  MpiGroup(MPI_Comm comm, std::vector<int> world_ranks, double timeout)
      : ProcessGroup(comm == MPI_COMM_NULL ? -1 : comm_rank(comm), std::move(world_ranks), timeout),
        data_(comm) {
    if (comm != MPI_COMM_NULL) DTR_MPI_CALL(MPI_Comm_dup(comm, &fingerprints_));
  }
  ~MpiGroup() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized) return;
    std::lock_guard lock(mpi_mutex());
    for (PendingSend& p : sends_) {
      int done = 0;
      MPI_Testall(int(p.requests.size()), p.requests.data(), &done, MPI_STATUSES_IGNORE);
      if (done) continue;
      // Never delivered (a rank that left): MPI keeps the requests; the
      // buffer must outlive them.
      for (MPI_Request& rq : p.requests)
        if (rq != MPI_REQUEST_NULL) MPI_Request_free(&rq);
      (void)p.fp.release();
    }
    if (fingerprints_ != MPI_COMM_NULL) MPI_Comm_free(&fingerprints_);
    if (data_ != MPI_COMM_NULL) MPI_Comm_free(&data_);
  }
  std::string_view backend_name() const override { return "mpi"; }
  Device device() const override { return Device(kCPU); }
  MPI_Comm comm() const { return data_; }

  /// Advances every queued collective as far as it can go without blocking.
  /// Called with mpi_mutex() held.
  void progress();
  void fail_timed_out(MpiWork& w);

 protected:
  std::shared_ptr<Work> start(const CollectiveCall& call, int64_t seq) override {
    return enqueue(std::make_shared<MpiWork>(self(), call, seq));
  }
  std::shared_ptr<Work> start_refusal(CollectiveKind kind, int64_t seq, const Error& why) override {
    CollectiveCall call;  // no tensors: a refusal fails before any data stage
    call.kind = kind;
    auto w = std::make_shared<MpiWork>(self(), call, seq);
    w->mine_ = refusal_fingerprint(kind, seq, error_kind(why), why.what());
    return enqueue(std::move(w));
  }

 private:
  friend class MpiWork;
  std::shared_ptr<MpiGroup> self() {
    return std::static_pointer_cast<MpiGroup>(ProcessGroup::shared_from_this());
  }
  std::shared_ptr<Work> enqueue(std::shared_ptr<MpiWork> w) {
    std::lock_guard lock(mpi_mutex());
    post_fingerprints(*w);
    queue_.push_back(w.get());
    progress();
    return w;
  }
  static int comm_rank(MPI_Comm c) {
    int r = 0;
    MPI_Comm_rank(c, &r);
    return r;
  }
  void post_fingerprints(MpiWork& w);
  /// "1", or "1 (world rank 3)" in a sub-group whose ranks are renumbered.
  std::string rank_label(int r) const {
    const int world_rank = world_ranks()[size_t(r)];
    return world_rank == r ? fmt::format("{}", r) : fmt::format("{} (world rank {})", r, world_rank);
  }
  bool advance_fingerprints(MpiWork& w);
  void post_data(MpiWork& w);
  bool advance_data(MpiWork& w);

  MPI_Comm data_ = MPI_COMM_NULL;
  MPI_Comm fingerprints_ = MPI_COMM_NULL;
  std::deque<MpiWork*> queue_;
  /// Fingerprints sent and not yet known to be delivered: the group owns
  /// their buffers, so a Work may die before its sends complete.
  struct PendingSend {
    std::unique_ptr<Fingerprint> fp;
    std::vector<MPI_Request> requests;
  };
  std::vector<PendingSend> sends_;  // started, not yet done or failed, in sequence order
};

MpiWork::MpiWork(std::shared_ptr<MpiGroup> group, const CollectiveCall& call, int64_t seq)
    : group_(std::move(group)), call_(call), seq_(seq), start_(std::chrono::steady_clock::now()) {
  mine_ = fingerprint(call, seq);
}

MpiWork::~MpiWork() {
  if (stage_ != Stage::kDone && stage_ != Stage::kFailed) {
    try {
      wait();
    } catch (const std::exception& e) {
      logger().error("a collective destroyed unwaited failed: {}", e.what());
    }
  }
  // A collective that failed on its fingerprints may still be queued behind
  // an earlier one (it never posts data): it leaves the queue with its Work.
  std::lock_guard lock(mpi_mutex());
  std::erase(group_->queue_, this);
}

constexpr int kTag = 0x5d;  // non-overtaking order matches the k-th sends

void MpiGroup::post_fingerprints(MpiWork& w) {
  const int n = size();
  w.theirs_.assign(size_t(n), Fingerprint{});
  w.theirs_[size_t(rank())] = w.mine_;
  PendingSend send{std::make_unique<Fingerprint>(w.mine_), {}};
  for (int r = 0; r < n; ++r) {
    if (r == rank()) continue;
    MPI_Request rq;
    DTR_MPI_CALL(MPI_Irecv(&w.theirs_[size_t(r)], int(sizeof(Fingerprint)), MPI_BYTE, r, kTag,
                           fingerprints_, &rq));
    w.fp_recvs_.push_back(rq);
    DTR_MPI_CALL(MPI_Isend(send.fp.get(), w.mine_.wire_bytes(), MPI_BYTE, r, kTag, fingerprints_, &rq));
    send.requests.push_back(rq);
  }
  if (!send.requests.empty()) sends_.push_back(std::move(send));
}

bool MpiGroup::advance_fingerprints(MpiWork& w) {
  int done = 0;
  if (!w.fp_recvs_.empty()) {
    DTR_MPI_CALL(MPI_Testall(int(w.fp_recvs_.size()), w.fp_recvs_.data(), &done, MPI_STATUSES_IGNORE));
    if (!done) return false;
  }
  std::vector<int> refused;
  for (int r = 0; r < size(); ++r)
    if (w.theirs_[size_t(r)].refused()) refused.push_back(r);
  if (!refused.empty()) {
    // Every rank reports the same: the first refusing rank's error type and
    // every refusing rank's reason.
    const Fingerprint& first = w.theirs_[size_t(refused.front())];
    std::vector<std::string> whys;
    for (int r : refused) whys.push_back(fmt::format("rank {}: {}", rank_label(r), w.theirs_[size_t(r)].why));
    w.error_ = fmt::format(
        "{} #{} on process group {}: rank{} [{}] refused the call before any data moved (this is rank {}): {}",
        collective_name(CollectiveKind(first.kind)), first.seq, id(), refused.size() == 1 ? "" : "s",
        fmt::join(refused, ", "), rank(), fmt::join(whys, "; "));
    w.error_kind_ = ErrorKind(first.error_kind);
    w.stage_ = MpiWork::Stage::kFailed;
    return true;
  }
  std::vector<std::string> differ;
  for (int r = 0; r < size(); ++r)
    if (!(w.theirs_[size_t(r)] == w.mine_)) differ.push_back(fmt::format("rank {}: {}", r, describe(w.theirs_[size_t(r)])));
  if (!differ.empty()) {
    w.error_ = fmt::format(
        "{}: the ranks of process group {} called different collectives or passed different "
        "tensors: rank {} (this one): {}; {}",
        collective_name(w.call_.kind), id(), rank(), describe(w.mine_), fmt::join(differ, "; "));
    w.stage_ = MpiWork::Stage::kFailed;
    return true;
  }
  w.stage_ = MpiWork::Stage::kQueued;
  return true;
}

void MpiGroup::post_data(MpiWork& w) {
  const CollectiveCall& c = w.call_;
  w.stage_ = MpiWork::Stage::kData;
  switch (c.kind) {
    case CollectiveKind::kBarrier: DTR_MPI_CALL(MPI_Ibarrier(data_, &w.data_)); return;
    case CollectiveKind::kBroadcast:
      DTR_MPI_CALL(MPI_Ibcast(c.out.data, int(c.out.numel()), mpi_type(c.out.dtype), c.root, data_, &w.data_));
      w.stage_ = MpiWork::Stage::kBroadcast;
      return;
    case CollectiveKind::kAllGather:
      DTR_MPI_CALL(MPI_Iallgather(c.in.data, int(c.in.numel()), mpi_type(c.in.dtype), c.out.data,
                                  int(c.in.numel()), mpi_type(c.in.dtype), data_, &w.data_));
      return;
    case CollectiveKind::kReduceScatter: {
      const DType t = c.in.dtype;
      DTR_MPI_CALL(MPI_Ireduce_scatter_block(c.in.data, c.out.data, int(c.out.numel()), mpi_type(t),
                                             mpi_op(t, c.reduce_op), data_, &w.data_));
      return;
    }
    case CollectiveKind::kAllReduce: {
      const DType t = c.out.dtype;
      void* buf = c.out.data;
      const int count = int(c.out.numel());
      if (c.in.data != c.out.data) std::memcpy(buf, c.in.data, size_t(c.out.numel()) * size_t(itemsize(t)));
      if (!is_floating(t) || c.reduce_op == ReduceOp::kMax) {
        // Exact: every rank gets the same bits from an all-reduce.
        DTR_MPI_CALL(MPI_Iallreduce(MPI_IN_PLACE, buf, count, mpi_type(t), mpi_op(t, c.reduce_op), data_, &w.data_));
        return;
      }
      // A floating sum in one order, on rank 0, then broadcast.
      DTR_MPI_CALL(MPI_Ireduce(rank() == 0 ? MPI_IN_PLACE : buf, buf, count, mpi_type(t),
                               mpi_op(t, c.reduce_op), 0, data_, &w.data_));
      return;
    }
  }
}

/// One step of the data stage: false while the posted request is pending.
bool MpiGroup::advance_data(MpiWork& w) {
  int done = 0;
  DTR_MPI_CALL(MPI_Test(&w.data_, &done, MPI_STATUS_IGNORE));
  if (!done) return false;
  const CollectiveCall& c = w.call_;
  if (c.kind == CollectiveKind::kAllReduce && w.stage_ == MpiWork::Stage::kData &&
      is_floating(c.out.dtype) && c.reduce_op != ReduceOp::kMax) {
    // The reduction on rank 0 is done: its result goes to every rank.
    if (rank() == 0 && c.reduce_op == ReduceOp::kMean) divide(c.out.data, c.out.numel(), c.out.dtype, size());
    DTR_MPI_CALL(MPI_Ibcast(c.out.data, int(c.out.numel()), mpi_type(c.out.dtype), 0, data_, &w.data_));
    w.stage_ = MpiWork::Stage::kBroadcast;
    return true;
  }
  w.stage_ = MpiWork::Stage::kDone;
  return true;
}

void MpiGroup::progress() {
  // Fingerprints of every queued collective (they may run ahead), then the
  // data of the head, in order.
  for (MpiWork* w : queue_)
    if (w->stage_ == MpiWork::Stage::kFingerprint) advance_fingerprints(*w);
  while (!queue_.empty()) {
    MpiWork& head = *queue_.front();
    if (head.stage_ == MpiWork::Stage::kFingerprint) break;
    if (head.stage_ == MpiWork::Stage::kQueued) post_data(head);
    while ((head.stage_ == MpiWork::Stage::kData || head.stage_ == MpiWork::Stage::kBroadcast) &&
           advance_data(head)) {
    }
    if (head.stage_ != MpiWork::Stage::kDone && head.stage_ != MpiWork::Stage::kFailed) break;
    queue_.pop_front();
  }
  std::erase_if(sends_, [](PendingSend& p) {
    int done = 0;
    MPI_Testall(int(p.requests.size()), p.requests.data(), &done, MPI_STATUSES_IGNORE);
    return done != 0;
  });
}

void MpiGroup::fail_timed_out(MpiWork& w) {
  std::vector<int> missing;
  for (size_t i = 0, r = 0; r < size_t(size()); ++r) {
    if (int(r) == rank()) continue;
    int done = 0;
    if (w.fp_recvs_[i] != MPI_REQUEST_NULL) MPI_Test(&w.fp_recvs_[i], &done, MPI_STATUS_IGNORE);
    else done = 1;
    if (!done) missing.push_back(world_ranks()[r]);
    ++i;
  }
  const double secs = timeout_seconds();
  if (!missing.empty()) {
    w.error_ = fmt::format(
        "{}: timed out after {} s (DTR_COLLECTIVE_TIMEOUT) in process group {}: world rank{} [{}] "
        "never joined collective #{} ({}) that world rank {} started",
        collective_name(w.call_.kind), secs, id(), missing.size() == 1 ? "" : "s", fmt::join(missing, ", "),
        w.seq_, describe(w.mine_), world_ranks()[size_t(rank())]);
    if (w.mine_.refused()) w.error_ += fmt::format(" (this rank refused it: {})", w.mine_.why);
  } else {
    w.error_ = fmt::format(
        "{}: timed out after {} s (DTR_COLLECTIVE_TIMEOUT) in process group {}: every rank "
        "joined collective #{} ({}) but the transfer did not complete{}",
        collective_name(w.call_.kind), secs, id(), w.seq_, describe(w.mine_),
        queue_.empty() || queue_.front() == &w ? "" : " (an earlier collective on the group is stuck)");
  }
  for (MPI_Request& rq : w.fp_recvs_) {
    if (rq == MPI_REQUEST_NULL) continue;
    MPI_Cancel(&rq);
    MPI_Request_free(&rq);
  }
  w.stage_ = MpiWork::Stage::kFailed;
  w.error_kind_ = ErrorKind::kCollectiveTimeout;
  std::erase(queue_, &w);
  mark_broken(w.error_);
}

bool MpiWork::is_completed() {
  std::lock_guard lock(mpi_mutex());
  if (stage_ != Stage::kDone && stage_ != Stage::kFailed) group_->progress();
  if (stage_ == Stage::kFailed) throw_failure();
  return stage_ == Stage::kDone;
}

void MpiWork::wait() {
  const auto deadline = start_ + std::chrono::duration<double>(group_->timeout_seconds());
  for (int spins = 0;; ++spins) {
    {
      std::lock_guard lock(mpi_mutex());
      if (stage_ != Stage::kDone && stage_ != Stage::kFailed) {
        group_->progress();
        if (stage_ != Stage::kDone && stage_ != Stage::kFailed &&
            std::chrono::steady_clock::now() > deadline)
          group_->fail_timed_out(*this);
      }
      if (stage_ == Stage::kDone) return;
      if (stage_ == Stage::kFailed) throw_failure();
    }
    // Spin briefly, then yield the core: two ranks on two cores share them
    // with nothing else, but an oversubscribed run must let the others run.
    if (spins > 64) std::this_thread::yield();
  }
}

// ---- start-up -------------------------------------------------------------------

std::atomic<bool> g_we_initialized{false};

void finalize_at_exit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

}  // namespace

bool mpi_available() { return true; }

std::shared_ptr<ProcessGroup> mpi_init_world(double timeout_seconds) {
  std::lock_guard lock(mpi_mutex());
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  DTR_CHECK(!finalized, DistributedError, "init_process_group(\"mpi\"): MPI was already finalized");
  if (!initialized) {
    int provided = 0;
    DTR_MPI_CALL(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided));
    DTR_CHECK(provided >= MPI_THREAD_SERIALIZED, DistributedError,
              "init_process_group(\"mpi\"): the MPI library gives thread level {} (need "
              "MPI_THREAD_SERIALIZED)",
              provided);
    // Errors come back as codes, turned into DistributedError, never an abort.
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    if (!g_we_initialized.exchange(true)) std::atexit(finalize_at_exit);
  }
  MPI_Comm comm;
  DTR_MPI_CALL(MPI_Comm_dup(MPI_COMM_WORLD, &comm));
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  int n = 0;
  MPI_Comm_size(comm, &n);
  std::vector<int> world_ranks(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) world_ranks[size_t(i)] = i;
  return std::make_shared<MpiGroup>(comm, std::move(world_ranks), timeout_seconds);
}

std::shared_ptr<ProcessGroup> mpi_new_group(ProcessGroup& world, const std::vector<int>& ranks) {
  auto& w = static_cast<MpiGroup&>(world);
  std::lock_guard lock(mpi_mutex());
  const bool member = std::binary_search(ranks.begin(), ranks.end(), w.rank());
  MPI_Comm comm = MPI_COMM_NULL;
  if (member) {
    // Collective over the members only (MPI-3), so non-members need not wait.
    MPI_Group world_group, group;
    DTR_MPI_CALL(MPI_Comm_group(w.comm(), &world_group));
    DTR_MPI_CALL(MPI_Group_incl(world_group, int(ranks.size()), ranks.data(), &group));
    DTR_MPI_CALL(MPI_Comm_create_group(w.comm(), group, /*tag=*/0x6d, &comm));
    MPI_Group_free(&group);
    MPI_Group_free(&world_group);
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  }
  return std::make_shared<MpiGroup>(comm, ranks, world.timeout_seconds());
}

}  // namespace dtr::distributed::detail

#endif  // DTR_HAVE_MPI
