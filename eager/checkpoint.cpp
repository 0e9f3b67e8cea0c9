#include "eager/checkpoint.h"

#include <memory>
#include <string>
#include <utility>

#include "eager/autograd.h"
#include "eager/dispatch_state.h"
#include "eager/random.h"

namespace dtr {

namespace {

using RegionFn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

/// Sets the generator to `rng` in a scope and puts the previous state back
/// when the scope ends, also by an exception (torch.random.fork_rng in
/// PyTorch's CheckpointFunction.backward). The generator is process-wide,
/// so it is not part of the thread's DispatchState.
class RngForkGuard {
 public:
  explicit RngForkGuard(RngState rng) : prev_(get_rng_state()) { set_rng_state(rng); }
  ~RngForkGuard() { set_rng_state(prev_); }
  RngForkGuard(const RngForkGuard&) = delete;
  RngForkGuard& operator=(const RngForkGuard&) = delete;

 private:
  RngState prev_;
};

/// What the backward of a region needs besides its saved inputs.
struct Region {
  RegionFn fn;
  RngState rng;
  /// The thread's state at the forward's entry; grad mode is on (a region
  /// is recorded only then), so the recomputation records its graph.
  DispatchState state;
  std::vector<bool> input_requires_grad;
  std::vector<TensorMeta> output_metas;
};

void check_outputs(const std::vector<Tensor>& outputs) {
  DTR_CHECK(!outputs.empty(), ValueError,
            "checkpoint: the checkpointed function returned no tensors; it must return at least "
            "one");
  for (size_t i = 0; i < outputs.size(); ++i) {
    DTR_CHECK(outputs[i].defined(), ValueError,
              "checkpoint: output {} of the checkpointed function is an undefined tensor", i);
  }
}

/// The backward of a region: recompute with grad enabled, then back-propagate
/// `grad_outputs` through the recomputed graph (Note [checkpoint recompute]).
std::vector<Tensor> region_backward(const Region& region, std::span<const Tensor> inputs,
                                    std::span<const Tensor> grad_outputs) {
  // Note [checkpoint recompute]: the recomputation sees what the forward saw
  // (same inputs, RNG state and dispatch state: autocast, grad mode on), so
  // its values are bitwise the forward's; the detached inputs are fresh leaves whose .grad collects the
  // gradients to pass on. Their requires_grad is set directly: requires_grad_()
  // would make an activation's storage a never-evicted constant.
  std::vector<Tensor> detached;
  detached.reserve(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    Tensor d = inputs[i].detach();
    if (region.input_requires_grad[i]) {
      d.impl()->autograd = std::make_unique<AutogradMeta>();
      d.impl()->autograd->requires_grad = true;
    }
    detached.push_back(std::move(d));
  }
  std::vector<Tensor> outputs;
  {
    const RngForkGuard rng(region.rng);
    const DispatchStateGuard state(region.state);
    outputs = region.fn(detached);
  }
  DTR_CHECK(outputs.size() == region.output_metas.size(), Error,
            "checkpoint: the recomputed function returned {} tensors but the forward returned {}; "
            "the checkpointed function must be deterministic",
            outputs.size(), region.output_metas.size());
  std::vector<Tensor> roots, grad_roots;
  for (size_t i = 0; i < outputs.size(); ++i) {
    const TensorMeta& m = region.output_metas[i];
    DTR_CHECK(outputs[i].defined() && outputs[i].shape() == m.shape && outputs[i].dtype() == m.dtype,
              Error,
              "checkpoint: recomputed output {} is {} but the forward produced {} of shape {}; the "
              "checkpointed function must be deterministic",
              i, outputs[i].defined() ? outputs[i].str() : std::string("undefined"),
              dtype_name(m.dtype), shape_str(m.shape));
    if (!outputs[i].requires_grad()) continue;
    roots.push_back(outputs[i]);
    grad_roots.push_back(grad_outputs[i]);
  }
  DTR_CHECK(!roots.empty(), Error,
            "checkpoint: none of the recomputed outputs requires grad, so this checkpoint is not "
            "needed");
  autograd::run_backward(roots, grad_roots, /*retain_graph=*/false);
  std::vector<Tensor> grads(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i)
    if (region.input_requires_grad[i]) grads[i] = detached[i].grad();
  return grads;
}

}  // namespace

std::vector<Tensor> checkpoint(RegionFn fn, const std::vector<Tensor>& inputs) {
  DTR_CHECK(fn != nullptr, ValueError, "checkpoint: the function to checkpoint is empty");
  for (size_t i = 0; i < inputs.size(); ++i) {
    DTR_CHECK(inputs[i].defined(), ValueError,
              "checkpoint: input {} is an undefined tensor; pass only defined tensors", i);
  }
  const DispatchState state = DispatchState::current();
  const RngState rng = get_rng_state();
  std::vector<Tensor> outputs;
  std::vector<Tensor> reads;
  {
    autograd::ReadCapture capture;
    NoGradGuard no_grad;
    outputs = fn(inputs);
    reads = capture.tensors();
  }
  check_outputs(outputs);
  if (!state.grad_mode) return outputs;

  bool needs_node = false;
  for (const Tensor& t : inputs) needs_node = needs_node || t.requires_grad();
  for (const Tensor& t : reads) {
    if (t.is_leaf()) {
      needs_node = true;
      continue;
    }
    bool is_input = false;
    for (const Tensor& in : inputs) is_input = is_input || in.impl() == t.impl();
    DTR_CHECK(is_input, ValueError,
              "checkpoint: the checkpointed function reads a tensor of shape {} produced by {} "
              "that requires grad but is not one of its inputs; pass it in inputs so its "
              "gradient can flow",
              shape_str(t.shape()), t.grad_fn_name());
  }
  if (!needs_node) return outputs;

  Region region{std::move(fn), rng, state, {}, {}};
  for (const Tensor& t : inputs) region.input_requires_grad.push_back(t.requires_grad());
  // Fresh handles: an output may be an input, or alias one, and must not
  // have the input's autograd identity overwritten.
  std::vector<Tensor> result;
  result.reserve(outputs.size());
  for (const Tensor& t : outputs) {
    result.push_back(t.detach());
    region.output_metas.push_back(t.meta());
  }
  outputs.clear();
  autograd::record_custom(
      "CheckpointFunction",
      [region = std::move(region)](std::span<const Tensor> saved,
                                   std::span<const Tensor> grad_outputs) {
        return region_backward(region, saved, grad_outputs);
      },
      inputs, result);
  return result;
}

Tensor checkpoint(std::function<Tensor(const Tensor&)> fn, const Tensor& input) {
  DTR_CHECK(fn != nullptr, ValueError, "checkpoint: the function to checkpoint is empty");
  auto wrapped = [fn = std::move(fn)](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{fn(in[0])};
  };
  return checkpoint(std::move(wrapped), std::vector<Tensor>{input})[0];
}

Tensor checkpoint_sequential(const std::vector<std::function<Tensor(const Tensor&)>>& functions,
                             int64_t segments, const Tensor& input) {
  const int64_t n = int64_t(functions.size());
  DTR_CHECK(n > 0, ValueError, "checkpoint_sequential: functions is empty");
  DTR_CHECK(segments >= 1 && segments <= n, ValueError,
            "checkpoint_sequential: segments must be between 1 and the number of functions ({}), "
            "got {}",
            n, segments);
  for (int64_t i = 0; i < n; ++i) {
    DTR_CHECK(functions[size_t(i)] != nullptr, ValueError,
              "checkpoint_sequential: function {} is empty", i);
  }
  DTR_CHECK(input.defined(), ValueError, "checkpoint_sequential: input is an undefined tensor");
  // Applies functions [start, end) in order. A copy is shared by the
  // regions: their backward runs after this call returns.
  auto shared = std::make_shared<const std::vector<std::function<Tensor(const Tensor&)>>>(functions);
  auto run = [&shared](int64_t start, int64_t end) {
    return [fns = shared, start, end](const Tensor& x) {
      Tensor h = x;
      for (int64_t j = start; j < end; ++j) h = (*fns)[size_t(j)](h);
      DTR_CHECK(h.defined(), ValueError,
                "checkpoint_sequential: functions {}..{} returned an undefined tensor", start,
                end - 1);
      return h;
    };
  };
  // PyTorch's split: segments-1 checkpointed chunks of n/segments functions,
  // then the rest without checkpointing.
  const int64_t size = n / segments;
  Tensor h = input;
  int64_t start = 0;
  for (; start < size * (segments - 1); start += size) h = checkpoint(run(start, start + size), h);
  return run(start, n)(h);
}

Tensor checkpoint_sequential(const nn::SequentialImpl& modules, int64_t segments, const Tensor& input) {
  std::vector<std::function<Tensor(const Tensor&)>> functions;
  functions.reserve(modules.size());
  for (const nn::AnyModule& m : modules) {
    functions.emplace_back([m](const Tensor& x) { return m.forward(x); });
  }
  return checkpoint_sequential(functions, segments, input);
}

Tensor checkpoint_sequential(const nn::Sequential& modules, int64_t segments, const Tensor& input) {
  return checkpoint_sequential(*modules, segments, input);
}

}  // namespace dtr
