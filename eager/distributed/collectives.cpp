// The collective rows (flagged `collective`: never replayed, outputs never
// evicted; Note [collectives]) and the front ends of distributed.h. One
// kernel serves every device type: it hands a CollectiveCall to the group
// named by the row's "group" attribute, whose backend checks the device.
#include <cstring>
#include <limits>
#include <mutex>

#include <fmt/format.h>

#include "core/backend.h"
#include "core/error.h"
#include "core/logging.h"
#include "core/op_registry.h"
#include "eager/autograd.h"
#include "eager/dispatch.h"
#include "eager/distributed/distributed.h"
#include "eager/ops.h"
#include "remat/runtime.h"

namespace dtr::distributed {
namespace {

// The in-place rows return their Work through this slot when the front end
// asked for it; otherwise (a row dispatched by hand, a binding) the kernel
// waits itself, so no launched collective is ever left unwaited.
thread_local bool t_want_work = false;
thread_local std::shared_ptr<Work> t_work;

std::shared_ptr<ProcessGroup> group_of(const Attrs& a) { return group_from_id(a.i("group")); }

template <CollectiveKind K, bool kInplace>
void collective_kernel(const KernelContext& c) {
  std::shared_ptr<ProcessGroup> g = group_of(c.attrs);
  CollectiveCall call;
  call.kind = K;
  call.device = c.device;  // the operands' device: cuda:<local rank> on each rank
  call.out = c.outputs[0];
  // In place: (tensor) or (output, input); out of place: (input).
  call.in = kInplace ? (c.inputs.size() > 1 ? c.inputs[1] : c.outputs[0]) : c.inputs[0];
  if constexpr (K == CollectiveKind::kAllReduce || K == CollectiveKind::kReduceScatter)
    call.reduce_op = ReduceOp(c.attrs.i("op"));
  if constexpr (K == CollectiveKind::kBroadcast) {
    call.root = int(c.attrs.i("src"));
    // Out of place: every rank starts from its input; the root's is sent.
    // Through the backend's copy: on a GPU both are device memory.
    if (!kInplace)
      copy_bytes(c.device, call.out.data, c.device, call.in.data, size_t(call.in.numel()) * itemsize(call.in.dtype));
    call.in = call.out;
  }
  std::shared_ptr<Work> w = g->launch(call);
  if (kInplace && t_want_work) {
    t_work = std::move(w);
    return;
  }
  w->wait();
}

template <CollectiveKind K, bool kInplace>
void set_kernels(const std::string& name) {
  auto& reg = OpRegistry::instance();
  for (DeviceType type : {kCPU, kCUDA, kPrivateUse1}) reg.set_kernel(name, type, collective_kernel<K, kInplace>);
}

void check_common(std::string_view op, const TensorMeta& m) {
  DTR_CHECK(is_contiguous(m.shape, m.strides), ValueError,
            "{}: the tensor must be contiguous (shape {}, strides {}); call .contiguous() first", op,
            shape_str(m.shape), shape_str(m.strides));
}

/// MPI counts elements in an int: a larger tensor would wrap (a partial or
/// failed transfer), so it is refused before any rank sends (nccl counts in
/// size_t).
void check_count(std::string_view op, const TensorMeta& m, const Attrs& a) {
  if (group_of(a)->backend_name() != "mpi") return;
  const int64_t n = m.numel();
  DTR_CHECK(n <= int64_t(std::numeric_limits<int>::max()), ValueError,
            "{}: the mpi backend moves at most {} elements per collective, got {} (shape {}); split the "
            "tensor",
            op, std::numeric_limits<int>::max(), n, shape_str(m.shape));
}

void check_reduce_op(std::string_view op, const Attrs& a, DType t) {
  const int64_t r = a.i("op");
  DTR_CHECK(r >= 0 && r <= int64_t(ReduceOp::kMax), ValueError, "{}: unknown reduce op {}", op, r);
  DTR_CHECK(ReduceOp(r) != ReduceOp::kMean || is_floating(t), TypeError,
            "{}: ReduceOp mean needs a floating dtype, got {}", op, dtype_name(t));
}

TensorMeta contiguous_meta(Shape shape, const TensorMeta& like) {
  TensorMeta m;
  m.strides = contiguous_strides(shape);
  m.shape = std::move(shape);
  m.dtype = like.dtype;
  m.device = like.device;
  return m;
}

void infer_same(std::span<const TensorMeta> in, const Attrs& a, std::vector<TensorMeta>& out,
                std::string_view op) {
  check_common(op, in[0]);
  check_count(op, in[0], a);
  if (a.has("op")) check_reduce_op(op, a, in[0].dtype);
  if (a.has("src")) {
    const int64_t src = a.i("src");
    const int n = group_of(a)->size();
    DTR_CHECK(src >= 0 && src < n, ValueError, "{}: src {} is not a rank of a group of {} ranks", op, src, n);
  }
  out.push_back(contiguous_meta(in[0].shape, in[0]));
}

/// The gathered shape (world·d0, ...) of `input`, or the scattered shape
/// (d0/world, ...) with `scatter`.
Shape resized_dim0(std::string_view op, const TensorMeta& input, int world, bool scatter) {
  DTR_CHECK(input.dim() >= 1, ValueError, "{}: expected a tensor of at least 1 dimension, got a 0-d tensor", op);
  Shape s = input.shape;
  if (scatter) {
    DTR_CHECK(s[0] % world == 0, ValueError,
              "{}: dim 0 of the input ({}) must be divisible by the group's {} ranks", op, s[0], world);
    s[0] /= world;
  } else {
    s[0] *= world;
  }
  return s;
}

template <bool kScatter>
void infer_resized(std::span<const TensorMeta> in, const Attrs& a, std::vector<TensorMeta>& out,
                   std::string_view op) {
  const TensorMeta& input = in.size() > 1 ? in[1] : in[0];
  check_common(op, input);
  // MPI's count is per rank: what each rank sends to a gather, what each
  // gets of a reduce-scatter.
  TensorMeta per_rank = input;
  if (kScatter) per_rank.shape = resized_dim0(op, input, group_of(a)->size(), true);
  check_count(op, per_rank, a);
  if (kScatter) check_reduce_op(op, a, input.dtype);
  const Shape want = resized_dim0(op, input, group_of(a)->size(), kScatter);
  if (in.size() > 1) {  // in place into a given output
    check_common(op, in[0]);
    DTR_CHECK(in[0].shape == want && in[0].dtype == input.dtype, ValueError,
              "{}: output has shape {} and dtype {}; a group of {} ranks needs shape {} and dtype {}",
              op, shape_str(in[0].shape), dtype_name(in[0].dtype), group_of(a)->size(), shape_str(want),
              dtype_name(input.dtype));
  }
  out.push_back(contiguous_meta(want, input));
}

// Infer functions carry the row's name for their messages.
#define DTR_INFER(fn, name)                                                          \
  [](std::span<const TensorMeta> in, const Attrs& a, std::vector<TensorMeta>& out) { \
    fn(in, a, out, name);                                                            \
  }

// ---- backward rules (torch.distributed.nn.functional) -------------------------

std::shared_ptr<ProcessGroup> backward_group(const BackwardContext& ctx) { return group_of(ctx.attrs); }

std::vector<Tensor> all_reduce_backward(const BackwardContext& ctx, std::span<const Tensor> g) {
  const auto op = ReduceOp(ctx.attrs.i("op"));
  DTR_CHECK(op != ReduceOp::kMax, NotImplementedError,
            "all_reduce with ReduceOp max has no gradient (as in torch.distributed.nn)");
  return {functional::all_reduce(g[0], op, backward_group(ctx))};
}

std::vector<Tensor> broadcast_backward(const BackwardContext& ctx, std::span<const Tensor> g) {
  auto group = backward_group(ctx);
  Tensor sum = functional::all_reduce(g[0], ReduceOp::kSum, group);
  if (group->rank() == ctx.attrs.i("src")) return {sum};
  return {zeros_like(sum)};
}

std::vector<Tensor> all_gather_backward(const BackwardContext& ctx, std::span<const Tensor> g) {
  return {functional::reduce_scatter(g[0], ReduceOp::kSum, backward_group(ctx))};
}

std::vector<Tensor> reduce_scatter_backward(const BackwardContext& ctx, std::span<const Tensor> g) {
  const auto op = ReduceOp(ctx.attrs.i("op"));
  DTR_CHECK(op != ReduceOp::kMax, NotImplementedError,
            "reduce_scatter with ReduceOp max has no gradient (as in torch.distributed.nn)");
  Tensor full = functional::all_gather(g[0], backward_group(ctx));
  if (op == ReduceOp::kMean) full = full / double(backward_group(ctx)->size());
  return {full};
}

OpDef collective_row(std::string name, InferFn infer, std::vector<ParamSpec> params, bool inplace,
                     int inputs, BackwardFn backward) {
  OpDef d{.name = std::move(name), .params = std::move(params), .infer = infer, .backward = backward};
  d.flags.collective = true;
  d.flags.inplace = inplace;
  d.save = kSaveNone;
  d.inputs(int16_t(inputs));
  return d;
}

void register_rows() {
  auto& reg = OpRegistry::instance();
  const ParamSpec group = param::i("group");
  const ParamSpec op = param::i("op", 0);
  const ParamSpec src = param::i("src", 0);
  reg.define(collective_row("all_reduce_", DTR_INFER(infer_same, "all_reduce_"), {group, op}, true, 1, nullptr));
  reg.define(collective_row("broadcast_", DTR_INFER(infer_same, "broadcast_"), {group, src}, true, 1, nullptr));
  reg.define(collective_row("all_gather_into_tensor_", DTR_INFER(infer_resized<false>, "all_gather_into_tensor_"),
                            {group}, true, 2, nullptr));
  reg.define(collective_row("reduce_scatter_tensor_", DTR_INFER(infer_resized<true>, "reduce_scatter_tensor_"),
                            {group, op}, true, 2, nullptr));
  reg.define(collective_row("all_reduce", DTR_INFER(infer_same, "all_reduce"), {group, op}, false, 1,
                            all_reduce_backward));
  reg.define(collective_row("broadcast", DTR_INFER(infer_same, "broadcast"), {group, src}, false, 1,
                            broadcast_backward));
  reg.define(collective_row("all_gather", DTR_INFER(infer_resized<false>, "all_gather"), {group}, false, 1,
                            all_gather_backward));
  reg.define(collective_row("reduce_scatter", DTR_INFER(infer_resized<true>, "reduce_scatter"), {group, op},
                            false, 1, reduce_scatter_backward));
  using K = CollectiveKind;
  set_kernels<K::kAllReduce, true>("all_reduce_");
  set_kernels<K::kBroadcast, true>("broadcast_");
  set_kernels<K::kAllGather, true>("all_gather_into_tensor_");
  set_kernels<K::kReduceScatter, true>("reduce_scatter_tensor_");
  set_kernels<K::kAllReduce, false>("all_reduce");
  set_kernels<K::kBroadcast, false>("broadcast");
  set_kernels<K::kAllGather, false>("all_gather");
  set_kernels<K::kReduceScatter, false>("reduce_scatter");
}

const OpDef& row(std::string_view name) {
  static std::once_flag once;
  std::call_once(once, [] {
    ensure_ops_registered();
    register_rows();
  });
  return OpRegistry::instance().get(name);
}

/// The group to use: `g`, else the world.
std::shared_ptr<ProcessGroup> resolve(const std::shared_ptr<ProcessGroup>& g) { return g ? g : world(); }

void check_tensor(std::string_view op, const Tensor& t, const ProcessGroup& g, const char* what = "tensor") {
  DTR_CHECK(t.defined(), ValueError, "{}: the {} is undefined", op, what);
  DTR_CHECK(t.device() == g.device(), DistributedError,
            "{}: the {} backend of process group {} moves tensors on {} on this rank, got a {} on {}", op,
            g.backend_name(), g.id(), g.device().str(), what, t.device().str());
  DTR_CHECK(g.healthy(), DistributedError, "{}: process group {} is unusable: {}", op, g.id(), g.broken_reason());
  DTR_CHECK(g.rank() >= 0, DistributedError, "{}: this process is not a member of process group {}", op, g.id());
}

/// Runs `body`, the checks and launch of collective `kind` on `g`. When
/// `body` throws before launching anything on `g` (a bad argument only this
/// rank sees), this rank still joins the collective as a refusal, so every
/// rank throws the same error promptly instead of the others waiting out the
/// timeout (Note [collectives]). Errors after a launch go on unchanged.
template <typename F>
auto refusing_together(CollectiveKind kind, ProcessGroup& g, F&& body) -> decltype(body()) {
  const int64_t calls = g.collective_calls();
  try {
    return body();
  } catch (const Error& e) {
    if (g.collective_calls() == calls) g.refuse(kind, e);
    throw;
  }
}

/// A Work that keeps the tensors it writes pinned (never evicted or swapped
/// while the transfer runs) and alive until it is done.
class PinnedWork final : public Work {
 public:
  PinnedWork(std::shared_ptr<Work> inner, std::vector<Tensor> tensors) : inner_(std::move(inner)) {
    for (Tensor& t : tensors) pins_.emplace_back(t.storage());
    tensors_ = std::move(tensors);
  }
  // Unwaited: the transfer finishes before the pins and tensors go.
  ~PinnedWork() override {
    if (pins_.empty()) return;
    try {
      inner_->wait();
    } catch (const std::exception& e) {
      logger().error("a collective destroyed unwaited failed: {}", e.what());
    }
  }
  // A failed collective moved no data (or is over): its pins go with the
  // error, so the destructor does not wait for it again.
  bool is_completed() override {
    bool done = false;
    try {
      done = inner_->is_completed();
    } catch (...) {
      release();
      throw;
    }
    if (done) release();
    return done;
  }
  void wait() override {
    try {
      inner_->wait();
    } catch (...) {
      release();
      throw;
    }
    release();
  }

 private:
  void release() {
    pins_.clear();
    tensors_.clear();
  }
  std::shared_ptr<Work> inner_;
  std::vector<remat::PinGuard> pins_;
  std::vector<Tensor> tensors_;
};

/// Runs an in-place row and returns its Work (async) or waits for it.
std::shared_ptr<Work> run_inplace(const OpDef& o, std::vector<Tensor> inputs, Attrs attrs, bool async_op) {
  NoGradGuard no_grad;  // torch.distributed's in-place collectives record no history
  t_want_work = true;
  t_work.reset();
  try {
    dispatch(o, inputs, std::move(attrs));
  } catch (...) {
    t_want_work = false;
    t_work.reset();
    throw;
  }
  t_want_work = false;
  std::shared_ptr<Work> w = std::move(t_work);
  DTR_INTERNAL_ASSERT(w != nullptr, "{}: the kernel launched no collective", o.name);
  if (!async_op) {
    w->wait();
    return nullptr;
  }
  return std::make_shared<PinnedWork>(std::move(w), std::move(inputs));
}

/// The row's attributes: the group's handle and, when `key` is given, one more.
Attrs group_attrs(const ProcessGroup& g, std::string_view key = {}, int64_t value = 0) {
  Attrs a{{"group", g.id()}};
  if (!key.empty()) a.set(key, value);
  return a;
}

/// An out-of-place (differentiable) collective row on `input`.
Tensor run_functional(const OpDef& o, CollectiveKind kind, std::string_view name, const Tensor& input,
                      const std::shared_ptr<ProcessGroup>& group, std::string_view key = {},
                      int64_t value = 0) {
  auto g = resolve(group);
  return refusing_together(kind, *g, [&] {
    check_tensor(name, input, *g, "input");
    return dispatch1(o, {input.contiguous()}, group_attrs(*g, key, value));
  });
}

}  // namespace

std::shared_ptr<Work> all_reduce(Tensor& tensor, ReduceOp op, const std::shared_ptr<ProcessGroup>& group,
                                 bool async_op) {
  static const OpDef& o = row("all_reduce_");
  auto g = resolve(group);
  return refusing_together(CollectiveKind::kAllReduce, *g, [&] {
    check_tensor("all_reduce", tensor, *g);
    return run_inplace(o, {tensor}, group_attrs(*g, "op", int64_t(op)), async_op);
  });
}

std::shared_ptr<Work> broadcast(Tensor& tensor, int src, const std::shared_ptr<ProcessGroup>& group,
                                bool async_op) {
  static const OpDef& o = row("broadcast_");
  auto g = resolve(group);
  return refusing_together(CollectiveKind::kBroadcast, *g, [&] {
    check_tensor("broadcast", tensor, *g);
    return run_inplace(o, {tensor}, group_attrs(*g, "src", src), async_op);
  });
}

std::shared_ptr<Work> all_gather_into_tensor(Tensor& output, const Tensor& input,
                                             const std::shared_ptr<ProcessGroup>& group, bool async_op) {
  static const OpDef& o = row("all_gather_into_tensor_");
  auto g = resolve(group);
  return refusing_together(CollectiveKind::kAllGather, *g, [&] {
    check_tensor("all_gather_into_tensor", output, *g, "output");
    check_tensor("all_gather_into_tensor", input, *g, "input");
    return run_inplace(o, {output, input.contiguous()}, group_attrs(*g), async_op);
  });
}

void all_gather(std::vector<Tensor>& outputs, const Tensor& input, const std::shared_ptr<ProcessGroup>& group) {
  auto g = resolve(group);
  Tensor gathered = refusing_together(CollectiveKind::kAllGather, *g, [&] {
    check_tensor("all_gather", input, *g, "input");
    DTR_CHECK(int(outputs.size()) == g->size(), ValueError,
              "all_gather: outputs has {} tensors for a group of {} ranks", outputs.size(), g->size());
    for (const Tensor& t : outputs) {
      DTR_CHECK(t.defined() && t.shape() == input.shape() && t.dtype() == input.dtype(), ValueError,
                "all_gather: every output must have the input's shape {} and dtype {}", shape_str(input.shape()),
                dtype_name(input.dtype()));
    }
    return functional::all_gather(input.detach().reshape({-1}), g);
  });
  NoGradGuard no_grad;
  const int64_t n = input.numel();
  for (int r = 0; r < g->size(); ++r) outputs[size_t(r)].copy_(gathered.narrow(0, r * n, n).view(input.shape()));
}

std::shared_ptr<Work> reduce_scatter_tensor(Tensor& output, const Tensor& input, ReduceOp op,
                                            const std::shared_ptr<ProcessGroup>& group, bool async_op) {
  static const OpDef& o = row("reduce_scatter_tensor_");
  auto g = resolve(group);
  return refusing_together(CollectiveKind::kReduceScatter, *g, [&] {
    check_tensor("reduce_scatter_tensor", output, *g, "output");
    check_tensor("reduce_scatter_tensor", input, *g, "input");
    return run_inplace(o, {output, input.contiguous()}, group_attrs(*g, "op", int64_t(op)), async_op);
  });
}

void barrier(const std::shared_ptr<ProcessGroup>& group) {
  auto g = resolve(group);
  CollectiveCall call;
  call.kind = CollectiveKind::kBarrier;
  g->launch(call)->wait();
}

namespace functional {

Tensor all_reduce(const Tensor& input, ReduceOp op, const std::shared_ptr<ProcessGroup>& group) {
  static const OpDef& o = row("all_reduce");
  return run_functional(o, CollectiveKind::kAllReduce, "all_reduce", input, group, "op", int64_t(op));
}

Tensor broadcast(const Tensor& input, int src, const std::shared_ptr<ProcessGroup>& group) {
  static const OpDef& o = row("broadcast");
  return run_functional(o, CollectiveKind::kBroadcast, "broadcast", input, group, "src", src);
}

Tensor all_gather(const Tensor& input, const std::shared_ptr<ProcessGroup>& group) {
  static const OpDef& o = row("all_gather");
  return run_functional(o, CollectiveKind::kAllGather, "all_gather", input, group);
}

Tensor reduce_scatter(const Tensor& input, ReduceOp op, const std::shared_ptr<ProcessGroup>& group) {
  static const OpDef& o = row("reduce_scatter");
  return run_functional(o, CollectiveKind::kReduceScatter, "reduce_scatter", input, group, "op", int64_t(op));
}

}  // namespace functional
}  // namespace dtr::distributed
