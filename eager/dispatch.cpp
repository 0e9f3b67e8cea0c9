// The path of one op (DESIGN.md). Everything an op does beyond its kernel
// happens here, once, for every op.
#include "eager/dispatch.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <optional>

#include <absl/container/inlined_vector.h>

#include "core/backend.h"
#include "core/error.h"
#include "core/shape_check.h"
#include "eager/autocast.h"
#include "eager/autograd.h"
#include "eager/dispatch_state.h"
#include "eager/lineage_record.h"
#include "eager/random.h"
#include "remat/runtime.h"

namespace dtr {

namespace {

TensorArg make_arg(Storage& s, const TensorMeta& m) {
  TensorArg a;
  a.data = static_cast<std::byte*>(s.data()) + m.offset * itemsize(m.dtype);
  a.shape = m.shape;
  a.strides = m.strides;
  a.dtype = m.dtype;
  return a;
}

// Note [cross-device copies]: to_device's "kernel" is the backends' copy.
void copy_across(const TensorArg& in, Device in_device, const TensorArg& out, Device out_device) {
  copy_bytes(out_device, out.data, in_device, in.data, size_t(out.numel() * itemsize(out.dtype)));
}

KernelFn kernel_for(const OpDef& op, Device device) {
  if (op.flags.cross_device) return nullptr;
  KernelFn k = op.kernels[size_t(device.type)];
  // A device that does not exist is a DeviceError (checked only here, off
  // the op path); a device without this op's kernel, NotImplementedError.
  if (k == nullptr) check_device(device);
  DTR_CHECK(k != nullptr, NotImplementedError, "{}: no kernel for device {}", op.name,
            device.str());
  return k;
}

/// The one place a kernel is called, for a first run and for a replay alike:
/// builds the kernel's arguments from each operand's storage and metadata
/// and runs `op`'s kernel for `device` (for the cross-device copy, the
/// backends' copy: Note [cross-device copies]). For an in-place op the kernel reads
/// input 0 where it writes output 0 (the caller has put the old values
/// there). Throws NotImplementedError naming the op and the device when the
/// op has no kernel for it; whatever the kernel throws passes through.
void run_kernel(const OpDef& op, Device device, std::span<Storage* const> in_storages,
                std::span<const TensorMeta> in_metas, std::span<Storage* const> out_storages,
                std::span<const TensorMeta> out_metas, const Attrs& attrs, RngState rng) {
  const KernelFn kernel = kernel_for(op, device);
  absl::InlinedVector<TensorArg, 4> in_args, out_args;
  for (size_t i = 0; i < in_storages.size(); ++i) in_args.push_back(make_arg(*in_storages[i], in_metas[i]));
  for (size_t i = 0; i < out_storages.size(); ++i)
    out_args.push_back(make_arg(*out_storages[i], out_metas[i]));
  if (op.flags.inplace) in_args[0] = out_args[0];
  if (op.flags.cross_device) {
    copy_across(in_args[0], in_metas[0].device, out_args[0], out_metas[0].device);
    return;
  }
  check_device_not_lost(device);  // Note [lost devices]
  const KernelContext ctx{in_args, out_args, attrs, rng, device};
  const Backend* b = find_backend(device.type);
  if (b != nullptr && b->run_kernel != nullptr) {
    b->run_kernel(kernel, ctx, op.name);
  } else {
    kernel(ctx);
  }
}

// Autocast: cast floating inputs to the dtype `policy` asks for (`lower`:
// the device type's autocast dtype).
void apply_autocast(AutocastPolicy policy, std::span<const Tensor> in, std::vector<Tensor>& out,
                    DType lower) {
  DType target = lower;
  if (policy == AutocastPolicy::kFloat32) {
    target = kFloat32;
  } else if (policy == AutocastPolicy::kPromote) {
    bool any = false;
    for (const Tensor& t : in) {
      if (!t.is_floating_point()) continue;
      target = any ? promote_types(target, t.dtype()) : t.dtype();
      any = true;
    }
  }
  out.reserve(in.size());
  for (const Tensor& t : in) {
    // float64 is left alone, as in PyTorch's autocast.
    if (t.is_floating_point() && t.dtype() != target && t.dtype() != kFloat64) {
      out.push_back(t.to(target));
    } else {
      out.push_back(t);
    }
  }
}

/// A dtype or device type that no enumerator names (a cast integer, e.g.
/// DType(99) from a binding or an attribute) reaches the outputs only
/// through an attribute or a TensorOptions the infer function copied; the
/// kernels and allocators index tables by them, so they stop here.
void check_output_metas(const OpDef& op, std::span<const TensorMeta> out_metas) {
  for (size_t i = 0; i < out_metas.size(); ++i) {
    const TensorMeta& m = out_metas[i];
    DTR_CHECK(int(m.dtype) < kNumDTypes, TypeError, "{}: invalid dtype {} for output {}", op.name,
              int(m.dtype), i);
    DTR_CHECK(int(m.device.type) < kNumDeviceTypes, ValueError,
              "{}: invalid device type {} for output {}", op.name, int(m.device.type), i);
  }
}

}  // namespace

double estimate_seconds(const OpCost& cost, Device device) {
  // The device's roofline (Note [scores]): max(flops / peak, bytes / bandwidth) + launch.
  return backend(device).roofline(device.index).seconds(cost.flops + cost.scalar_flops, cost.bytes);
}

void Replay::operator()(std::span<Storage* const> inputs, std::span<Storage* const> outputs) const {
  const OpRecord& r = *record;
  // Note [replay equals original]: the thread's dispatch state as recorded
  // (put back however the kernel ends); the kernel reads only recorded
  // metadata, attributes and RNG.
  const DispatchStateGuard state(r.state);
  if (r.inplace) {
    // Rebuild the whole storage: old version, then the write.
    copy_bytes(outputs[0]->device(), outputs[0]->data(), inputs[0]->device(), inputs[0]->data(),
               size_t(outputs[0]->nbytes()));
  }
  run_kernel(*r.op, r.output_metas[0].device, inputs, r.input_metas, outputs, r.output_metas,
             r.attrs, r.rng);
}

const OpRecord* lineage_of(const Tensor& t) {
  const remat::Node* node = remat::producer(*t.storage());
  if (!node) return nullptr;
  const Replay* r = node->recompute.target<Replay>();
  return r ? r->record.get() : nullptr;
}

std::vector<Tensor> dispatch(const OpDef& op, std::span<const Tensor> inputs_in, Attrs attrs) {
  if (OpRegistry::check_attrs_enabled()) OpRegistry::on_dispatch(op, attrs);  // declared parameters
  op.check_input_count(inputs_in.size());  // before anything reads an input
  const remat::CurrentOpScope current_op(op.name);  // named in OutOfMemoryError reports
  for (size_t i = 0; i < inputs_in.size(); ++i) {
    DTR_CHECK(inputs_in[i].defined(), ValueError, "{}: input {} is an undefined tensor", op.name, i);
  }
  // 2. Autocast policy picks the compute dtype and inserts casts.
  std::vector<Tensor> casted;
  std::span<const Tensor> inputs = inputs_in;
  const DispatchState state = DispatchState::current();
  // Autocast is per device type (torch.autocast(device_type)): the state and
  // the op's lists of its inputs' device type (all inputs share it: checked below).
  if (state.autocast.any_enabled() && !inputs_in.empty()) {
    const DeviceType type = inputs_in[0].device().type;
    const AutocastState& ac = state.autocast[type];
    const AutocastPolicy policy = op.autocast_policy(type);
    if (ac.enabled && policy != AutocastPolicy::kNone) {
      apply_autocast(policy, inputs_in, casted, ac.dtype);
      inputs = casted;
    }
  }
  // Kernels without stride support get contiguous inputs (a lineage op of its own).
  if (!op.flags.strided_inputs && !op.flags.view && !op.flags.inplace) {
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (!inputs[i].is_contiguous()) {
        if (casted.empty()) casted.assign(inputs.begin(), inputs.end());
        casted[i] = inputs[i].contiguous();
      }
    }
    if (!casted.empty()) inputs = casted;
  }

  absl::InlinedVector<TensorMeta, 4> in_metas;
  in_metas.reserve(inputs.size());
  for (const Tensor& t : inputs) in_metas.push_back(t.meta());
  for (size_t i = 1; i < in_metas.size(); ++i) {
    DTR_CHECK(in_metas[i].device == in_metas[0].device, ValueError,
              "{}: expected all tensors on the same device, but input 0 is on {} and input {} is "
              "on {}",
              op.name, in_metas[0].device.str(), i, in_metas[i].device.str());
  }
  std::vector<TensorMeta> out_metas;
  {
    ShapeCheckScope shape_scope(op.name);
    op.infer(in_metas, attrs, out_metas);
  }
  DTR_INTERNAL_ASSERT(!out_metas.empty(), "{}: shape inference produced no output", op.name);
  check_output_metas(op, out_metas);

  // Views: metadata over input 0's storage; no kernel, no lineage (Note [unit of eviction]).
  if (op.flags.view) {
    std::vector<Tensor> outs;
    const TensorImpl& in = *inputs[0].impl();
    // Note [views and in-place writes]: every view knows its base and how it was made.
    const std::shared_ptr<TensorImpl>& base = in.view_base ? in.view_base : inputs[0].impl_ptr();
    using Creation = TensorImpl::ViewCreation;
    Creation creation = in.is_view ? in.view_creation : Creation::kDefault;
    if (out_metas.size() > 1) creation = Creation::kMultiOutput;
    else if (creation == Creation::kDefault && !is_grad_enabled() && inputs[0].requires_grad())
      creation = Creation::kNoGrad;
    for (auto& m : out_metas) {
      auto impl = std::make_shared<TensorImpl>(inputs[0].storage(), std::move(m));
      impl->is_view = true;
      // A view of a tensor outside the graph (detached) is outside it too.
      impl->detached = in.detached && !inputs[0].requires_grad();
      if (!impl->detached) {
        impl->view_base = base;
        impl->view_creation = creation;
      }
      outs.emplace_back(std::move(impl));
    }
    autograd::record(op, attrs, inputs, outs);
    return outs;
  }

  remat::Runtime& rt = remat::Runtime::global();
  const Device device = out_metas[0].device;
  kernel_for(op, device);  // fails before anything is allocated or the RNG advances

  auto record = std::make_shared<OpRecord>();
  record->op = &op;
  record->state = state;
  record->inplace = op.flags.inplace;
  if (op.flags.random) {
    int64_t draws = 0;
    for (const auto& m : out_metas) draws += m.numel();
    record->rng = detail::reserve_rng(uint64_t(2 * draws));
  }

  // DTR_TRACE: the op's event spans its inputs' rematerializations too.
  const auto trace_start = rt.tracing() ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
  // 3. Make every input resident and lock it.
  absl::InlinedVector<Storage*, 4> in_storages;
  for (const Tensor& t : inputs) in_storages.push_back(t.storage().get());
  rt.acquire(in_storages);
  absl::InlinedVector<Storage*, 4> out_storages;
  // Declared before the guard so the outputs outlive it: the guard's release
  // touches their storages when a kernel throws.
  std::vector<Tensor> outs;
  // Unlocks whatever this call still holds if anything below throws, so the
  // runtime stays consistent (an OutOfMemoryError leaves nothing locked).
  struct LockGuard {
    remat::Runtime& rt;
    absl::InlinedVector<Storage*, 4>& ins;
    absl::InlinedVector<Storage*, 4>& outs;
    bool outs_locked;
    bool active = true;
    ~LockGuard() {
      if (!active) return;
      rt.release(ins);
      if (outs_locked) rt.release(outs);
    }
  } guard{rt, in_storages, out_storages, !op.flags.inplace};

  std::shared_ptr<Storage> old_version;
  if (op.flags.inplace) {
    const Tensor& self = inputs[0];
    DTR_CHECK(!self.storage()->read_only, ValueError,
              "{}: the tensor written (shape {}) is read-only: it was imported from DLPack with "
              "DLPACK_FLAG_BITMASK_READ_ONLY, so its producer allows no writes; clone() it and "
              "write into the copy",
              op.name, shape_str(self.shape()));
    autograd::check_inplace(op, inputs);
    old_version = rt.before_mutation(self.storage(), autograd::will_record(op, inputs));
    outs.push_back(self);
    out_storages.push_back(self.storage().get());
  } else {
    // 4. Allocate outputs through the budget (evicting as needed).
    const bool lineage = rt.lineage_enabled();
    for (auto& m : out_metas) {
      auto s = remat::new_storage(m.numel() * itemsize(m.dtype), device);
      rt.allocate(*s);  // locked until step 6
      if (!lineage) rt.register_constant(*s);
      out_storages.push_back(s.get());
      outs.emplace_back(std::make_shared<TensorImpl>(std::move(s), m));
    }
  }
  // 5. The kernel runs, on the metadata the lineage node records.
  record->input_metas.assign(in_metas.begin(), in_metas.end());
  for (const Tensor& t : outs) record->output_metas.push_back(t.meta());
  const bool measure = rt.cost_model() == CostModel::kMeasured;
  // DTR_COST=measured: the device's own timer (events on a GPU).
  std::optional<DeviceTimer> timer;
  if (measure) timer.emplace(device);
  run_kernel(op, device, in_storages, in_metas, out_storages, record->output_metas, attrs, record->rng);
  const double kernel_seconds = timer ? timer->elapsed() : 0.0;

  // The lineage node: op, attributes, inputs, outputs, RNG, dispatch state, cost.
  const OpCost cost = op.estimate(in_metas, record->output_metas, attrs);
  std::vector<Tensor> autograd_inputs;
  std::shared_ptr<remat::Node> node;
  if (op.flags.inplace) {
    Storage& s = *outs[0].storage();
    ++s.version;
    if (old_version != nullptr) {
      // Autograd sees input 0, and any other input on the same storage
      // (h.mul_(h), h.mul_(h.view(...)), h.mul_(h.detach())), as it was
      // before the write: backward must read the old values, not the new.
      autograd_inputs.assign(inputs.begin(), inputs.end());
      for (size_t i = 0; i < inputs.size(); ++i) {
        if (inputs[i].storage().get() != &s) continue;
        const TensorImpl& in = *inputs[i].impl();
        auto old_impl = std::make_shared<TensorImpl>(old_version, in.meta);
        old_impl->is_view = in.is_view;
        old_impl->detached = in.detached;
        // ...with its autograd identity, so the backward node links to the
        // producer of the old value (else the gradient skips the write).
        if (const AutogradMeta* am = in.autograd.get()) {
          old_impl->autograd = std::make_unique<AutogradMeta>();
          old_impl->autograd->requires_grad = am->requires_grad;
          old_impl->autograd->grad_fn = am->grad_fn;
          old_impl->autograd->output_nr = am->output_nr;
        }
        autograd_inputs[i] = Tensor(std::move(old_impl));
      }
      // Note [mutation]: a write in grad mode (an activation updated during
      // the forward) stays replayable from the old version. A write outside
      // grad mode is a state update (optimizer step, running statistics): the
      // storage becomes a constant, so lineage does not grow over steps.
      if (!remat::is_constant(s) && record->state.grad_mode) {
        node = std::make_shared<remat::Node>();
        node->inputs.push_back(old_version);
        for (size_t i = 1; i < inputs.size(); ++i) {
          node->inputs.push_back(inputs[i].storage().get() == &s ? old_version : inputs[i].storage());
        }
      }
    }
  } else if (rt.lineage_enabled()) {
    node = std::make_shared<remat::Node>();
    for (const Tensor& t : inputs) node->inputs.push_back(t.storage());
  }
  if (op.flags.inplace && node == nullptr) rt.register_constant(*outs[0].storage());
  if (node != nullptr) {
    node->op_name = op.name;
    for (const Tensor& t : outs) {
      node->outputs.push_back(t.storage());
      node->output_nbytes.push_back(t.storage()->nbytes());
    }
    node->device = device;
    node->cost_seconds = measure ? kernel_seconds : estimate_seconds(cost, device);
    node->flops = cost.flops;
    node->replayable = !(op.flags.side_effect || op.flags.collective);
    record->attrs = attrs;
    node->recompute = Replay{std::move(record)};
    rt.record(node);
  }
  // 6. Unlock inputs and outputs; stamp their last access.
  guard.active = false;
  rt.release(in_storages);
  if (!op.flags.inplace) rt.release(out_storages);
  if (rt.tracing()) rt.trace_op(op.name, trace_start, in_metas, in_storages, out_metas, out_storages);
  // 7. Autograd records the backward node.
  autograd::record(op, attrs, autograd_inputs.empty() ? inputs : std::span<const Tensor>(autograd_inputs), outs);
  return outs;
}

Tensor dispatch1(const OpDef& op, std::span<const Tensor> inputs, Attrs attrs) {
  std::vector<Tensor> outs = dispatch(op, inputs, std::move(attrs));
  DTR_INTERNAL_ASSERT(outs.size() == 1, "{}: expected one output, got {}", op.name, outs.size());
  return std::move(outs[0]);
}

}  // namespace dtr
