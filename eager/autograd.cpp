#include "eager/autograd.h"

#include <atomic>
#include <queue>

#include <absl/container/flat_hash_map.h>
#include <absl/container/flat_hash_set.h>
#include <fmt/format.h>

#include "eager/dispatch.h"
#include "eager/ops.h"
#include "remat/runtime.h"

namespace dtr {

namespace {
thread_local bool t_grad_enabled = true;
thread_local autograd::ReadCapture* t_capture = nullptr;
// Nesting depth of run_backward on this thread, and queue_callback's queue.
thread_local int t_backward_depth = 0;
thread_local uint64_t t_backward_pass = 0;
thread_local std::vector<std::function<void()>> t_final_callbacks;
// Nesting depth of backward passes with create_graph on this thread.
thread_local int t_create_graph = 0;
std::atomic<uint64_t> g_seq{0};
}  // namespace

bool is_grad_enabled() { return t_grad_enabled; }
void set_grad_enabled(bool enabled) { t_grad_enabled = enabled; }

namespace autograd {

Node::~Node() {
  static thread_local std::vector<std::shared_ptr<Node>>* pending = nullptr;
  if (pending != nullptr) {
    for (auto& e : next)
      if (e.node) pending->push_back(std::move(e.node));
    if (copy_slices && copy_slices->fn) pending->push_back(std::move(copy_slices->fn));
    return;
  }
  std::vector<std::shared_ptr<Node>> work;
  for (auto& e : next)
    if (e.node) work.push_back(std::move(e.node));
  if (copy_slices && copy_slices->fn) work.push_back(std::move(copy_slices->fn));
  pending = &work;
  while (!work.empty()) {
    std::shared_ptr<Node> n = std::move(work.back());
    work.pop_back();
    n.reset();
  }
  pending = nullptr;
}

std::string Node::name() const {
  if (is_accumulator()) return "AccumulateGrad";
  if (copy_slices) return "CopySlices";
  if (op == nullptr) return custom_name + "Backward";
  std::string n;
  bool upper = true;
  for (char c : op->name) {
    if (c == '_') {
      upper = true;
      continue;
    }
    n += upper ? char(std::toupper(static_cast<unsigned char>(c))) : c;
    upper = false;
  }
  return n + "Backward";
}

namespace {

// Inputs past the mask's 32 bits (cat, stack of many tensors) are differentiable.
bool nondiff_input(const OpDef& op, size_t i) {
  return i < 32 && ((op.nondiff_inputs >> i) & 1u) != 0;
}

bool differentiable_input(const OpDef& op, size_t i, const Tensor& t) {
  return t.requires_grad() && !nondiff_input(op, i);
}

std::shared_ptr<Node> accumulator_for(const Tensor& leaf) {
  AutogradMeta& am = *leaf.impl()->autograd;
  if (auto n = am.grad_accumulator.lock()) return n;
  auto n = std::make_shared<Node>();
  n->leaf = leaf.impl_ptr();
  n->seq = g_seq.fetch_add(1, std::memory_order_relaxed);
  n->input_metas.push_back(leaf.meta());
  am.grad_accumulator = n;
  return n;
}

/// The edge along which a gradient reaches `t` (which requires grad).
Edge edge_to(const Tensor& t) {
  if (t.is_leaf()) return Edge{accumulator_for(t), 0};
  return Edge{t.impl()->autograd->grad_fn, t.impl()->autograd->output_nr};
}

/// Records the outputs' metadata on `node` and makes the floating ones its outputs.
void set_grad_fn(std::span<Tensor> outputs, const std::shared_ptr<Node>& node) {
  for (size_t i = 0; i < outputs.size(); ++i) {
    Tensor& out = outputs[i];
    node->output_metas.push_back(out.meta());
    if (!out.is_floating_point()) continue;
    TensorImpl* impl = out.impl();
    if (!impl->autograd) impl->autograd = std::make_unique<AutogradMeta>();
    impl->autograd->requires_grad = true;
    impl->autograd->grad_fn = node;
    impl->autograd->output_nr = uint32_t(i);
  }
}

/// `output`: `t` is an output of the node that saves it; its grad_fn is then
/// held weakly (the node holding its own grad_fn would be a cycle).
SavedTensor save(const Tensor& t, bool output = false) {
  auto impl = std::make_shared<TensorImpl>(t.storage(), t.meta());
  impl->is_view = t.impl()->is_view;
  impl->detached = true;
  SavedTensor s{Tensor(std::move(impl)), t.storage()->version};
  // Note [higher-order gradients]: where it is in the graph, for create_graph.
  if (t.requires_grad()) {
    if (t.is_leaf()) {
      s.leaf = t.impl_ptr();
    } else {
      if (output) s.own_grad_fn = t.grad_fn();
      else s.grad_fn = t.grad_fn();
      s.output_nr = t.impl()->autograd->output_nr;
    }
  }
  return s;
}

/// The saved tensor, version-checked. In a backward that records its graph
/// (grad mode on: create_graph), a tensor that required grad comes back at
/// its place in the forward graph, so gradients of the gradient reach it.
Tensor unpack(const SavedTensor& s, const Node& node) {
  if (!s.tensor.defined()) return Tensor();
  DTR_CHECK(s.tensor.storage()->version == s.version, AutogradError,
            "one of the variables needed for gradient computation has been modified by an inplace "
            "operation: {} of shape {} is at version {}; expected version {} instead ({})",
            dtype_name(s.tensor.dtype()), shape_str(s.tensor.shape()),
            s.tensor.storage()->version, s.version, node.name());
  if (!is_grad_enabled()) return s.tensor;
  if (s.leaf) return Tensor(s.leaf);
  std::shared_ptr<Node> fn = s.grad_fn ? s.grad_fn : s.own_grad_fn.lock();
  if (!fn) return s.tensor;
  auto impl = std::make_shared<TensorImpl>(s.tensor.storage(), s.tensor.meta());
  impl->is_view = s.tensor.impl()->is_view;
  impl->autograd = std::make_unique<AutogradMeta>();
  impl->autograd->requires_grad = true;
  impl->autograd->grad_fn = std::move(fn);
  impl->autograd->output_nr = s.output_nr;
  return Tensor(std::move(impl));
}

}  // namespace

// ---- views and in-place writes ------------------------------------------------
// Note [views and in-place writes]: a base and its views share one storage.
// An in-place write recorded by autograd moves the history of the tensor
// written onto the write: written directly, the base's grad_fn is the write's
// node; written through a view, the base's grad_fn becomes a CopySlices node
// over the write and the view's a view of that. Every other tensor on the
// storage (a view taken before the write) is then stale: it shows the new
// values but holds the old graph. refresh_view regenerates its grad_fn as a
// view of the base's current one when autograd next meets it, as PyTorch does.
// A write autograd does not record (no_grad, an optimizer step, data_ptr)
// leaves graphs as they are, as in PyTorch.

namespace {

/// Elements of `impl`'s storage.
int64_t storage_numel(const TensorImpl& impl) {
  return impl.storage->nbytes() / int64_t(itemsize(impl.meta.dtype));
}

/// A tensor with `layout` (shape, strides, offset) over `flat`'s storage.
Tensor as_layout(const Tensor& flat, const TensorMeta& layout) {
  TensorMeta m = layout;
  m.dtype = flat.dtype();
  m.device = flat.device();
  auto impl = std::make_shared<TensorImpl>(flat.storage(), std::move(m));
  impl->is_view = true;
  impl->view_base = flat.impl_ptr();
  return Tensor(std::move(impl));
}

/// True when two elements of `m` share a memory location (a stride 0 over a
/// dimension of size > 1: an expanded tensor), PyTorch's MemOverlap::Yes.
bool has_internal_overlap(const TensorMeta& m) {
  for (size_t d = 0; d < m.shape.size(); ++d)
    if (m.strides[d] == 0 && m.shape[d] > 1) return true;
  return false;
}

// The backward writes into buffers of its own (below) in grad mode: nothing
// there requires grad, so autograd records nothing, but the runtime keeps
// each write as lineage (Note [mutation]), so the buffers stay evictable,
// where writes under no_grad would make them constants.

/// The gradient of a base of layout `base` from the gradient `g` of its view
/// of layout `view` (AsStridedBackward): zeros except at the view's elements;
/// where the view repeats an element (an expanded view) its gradients add up.
/// The storage position of each element of `view`, row-major.
std::vector<int64_t> view_positions(const TensorMeta& view) {
  std::vector<int64_t> pos(size_t(view.numel()));
  std::vector<int64_t> idx(view.shape.size(), 0);
  for (int64_t e = 0, p = view.offset; e < int64_t(pos.size()); ++e) {
    pos[size_t(e)] = p;
    for (int64_t d = int64_t(idx.size()) - 1; d >= 0; --d) {
      const size_t k = size_t(d);
      p += view.strides[k];
      if (++idx[k] < view.shape[k]) break;
      p -= view.strides[k] * view.shape[k];
      idx[k] = 0;
    }
  }
  return pos;
}

/// Whether `base` covers its storage of `numel` elements densely in row-major
/// order, so that its flattening is the storage.
bool dense_layout(const TensorMeta& base, int64_t numel) {
  return is_contiguous(base.shape, base.strides) && base.offset == 0 && base.numel() == numel;
}

/// The storage positions of `view` as an int64 index tensor on `device`.
Tensor position_index(const TensorMeta& view, Device device) {
  const std::vector<int64_t> pos = view_positions(view);
  return from_vector(pos, {int64_t(pos.size())}).to(device);
}

/// A scatter-add of the flat `g` into zeros of `numel` elements at `index`
/// (index_select's backward row: deterministic, and differentiable).
Tensor scatter_add_flat(const Tensor& g, const Tensor& index, int64_t numel) {
  static const OpDef& o = op("index_select_backward");
  return dispatch1(o, {g.contiguous().reshape({-1}), index},
                   Attrs{{"dim", int64_t{0}}, {"input_shape", Shape{numel}}});
}

// In a backward that records its graph (create_graph), the backward's own
// steps must be differentiable: there the gradients move between a base and
// its views by index (gather, scatter-add), never through the layout aliases
// of as_layout, which autograd does not see. That needs a base that covers
// its storage densely (the outputs of ops always do).
void check_dense_for_create_graph(const TensorMeta& base, int64_t numel) {
  DTR_CHECK(dense_layout(base, numel), NotImplementedError,
            "backward with create_graph=true through an in-place write into a view of a base "
            "that does not cover its storage densely (base shape {}, strides {}, offset {}) is "
            "not supported",
            shape_str(base.shape), shape_str(base.strides), base.offset);
}

/// The gradient of a base of layout `base` from the gradient `g` of its view
/// of layout `view` (AsStridedBackward): zeros except at the view's elements;
/// where the view repeats an element (an expanded view) its gradients add up.
Tensor scatter_to_base(const Tensor& g, const TensorMeta& base, const TensorMeta& view,
                       int64_t numel) {
  const TensorOptions opts = TensorOptions(g.dtype()).device(g.device());
  if (is_grad_enabled()) {
    check_dense_for_create_graph(base, numel);
    return reshape(scatter_add_flat(g, position_index(view, g.device()), numel), base.shape);
  }
  if (!has_internal_overlap(view)) {
    Tensor flat = zeros({numel}, opts);
    const GradModeGuard replayable(true);  // the write stays lineage (above)
    as_layout(flat, view).copy_(g);
    return as_layout(flat, base);
  }
  // A deterministic scatter-add sums the repeats in a fixed order.
  return as_layout(scatter_add_flat(g, position_index(view, g.device()), numel), base);
}

/// The grad_fn of a view with layout `view` of `base` (which requires grad):
/// PyTorch's AsStridedBackward over the base's current history.
std::shared_ptr<Node> view_of_base_node(const Tensor& base, const TensorMeta& view) {
  auto n = std::make_shared<Node>();
  n->custom_name = "AsStrided";
  n->seq = g_seq.fetch_add(1, std::memory_order_relaxed);
  n->next.push_back(edge_to(base));
  n->input_metas.push_back(base.meta());
  n->output_metas.push_back(view);
  n->custom_backward = [b = base.meta(), v = view, numel = storage_numel(*base.impl())](
                           std::span<const Tensor>, std::span<const Tensor> g) {
    return std::vector<Tensor>{scatter_to_base(g[0], b, v, numel)};
  };
  return n;
}

/// Makes `view` (of a base that requires grad) take its history from the base.
void set_view_history(TensorImpl& view, const Tensor& base) {
  if (!view.autograd) view.autograd = std::make_unique<AutogradMeta>();
  view.autograd->requires_grad = true;
  view.autograd->grad_fn = view_of_base_node(base, view.meta);
  view.autograd->output_nr = 0;
}

bool is_stale(const TensorImpl& impl) {
  return !impl.detached && impl.graph_version != impl.storage->graph_version;
}

/// refresh_view, then an error if `t` is still stale: a tensor on a written
/// storage that is neither the base nor one of its views.
void refresh_or_throw(const Tensor& t, std::string_view what, size_t index) {
  TensorImpl& impl = *t.impl();
  if (!is_stale(impl)) return;
  refresh_view(impl);
  if (!is_stale(impl)) return;
  throw NotImplementedError(fmt::format(
      "{}: input {} (shape {}) shares its storage with a tensor that an in-place operation "
      "recorded by autograd wrote after this one was made, and it is not a view of that "
      "tensor's base, so its history cannot be regenerated; use the tensor that was written",
      what, index, shape_str(t.shape())));
}

}  // namespace

void refresh_view(TensorImpl& impl) {
  if (!is_stale(impl) || !impl.view_base) return;
  const TensorImpl& base = *impl.view_base;
  // The base is current after every recorded write (Note [views and in-place writes]).
  if (is_stale(base)) return;
  Tensor b(impl.view_base);
  if (b.requires_grad()) set_view_history(impl, b);
  impl.graph_version = impl.storage->graph_version;
}

namespace {

/// An in-place write through `view` whose node is `fn` (recorded over the
/// view's old value): the base's history moves onto a CopySlices node over
/// `fn`, and the view's becomes a view of the base's (PyTorch's
/// rebase_history). The view's graph_version is already the storage's new one.
void record_write_through_view(const std::shared_ptr<Node>& fn, Tensor& view) {
  TensorImpl& v = *view.impl();
  Tensor base(v.view_base);
  fn->output_metas.push_back(view.meta());
  // The gradient of the view's old values goes to the base's old history.
  fn->next[0] = base.requires_grad() ? edge_to(base) : Edge{};
  auto cs = std::make_shared<Node>();
  cs->seq = g_seq.fetch_add(1, std::memory_order_relaxed);
  cs->next = fn->next;
  cs->input_metas = fn->input_metas;
  cs->input_metas[0] = base.meta();
  cs->output_metas.push_back(base.meta());
  cs->copy_slices = std::make_unique<CopySlices>(
      CopySlices{fn, base.meta(), view.meta(), storage_numel(v)});
  TensorImpl& b = *base.impl();
  if (!b.autograd) b.autograd = std::make_unique<AutogradMeta>();
  b.autograd->requires_grad = true;
  b.autograd->grad_fn = std::move(cs);
  b.autograd->output_nr = 0;
  b.graph_version = v.graph_version;
  set_view_history(v, base);
}

}  // namespace

bool will_record(const OpDef& op, std::span<const Tensor> inputs) {
  if (!is_grad_enabled() || op.backward == nullptr) return false;
  for (size_t i = 0; i < inputs.size(); ++i)
    if (differentiable_input(op, i, inputs[i])) return true;
  return false;
}

void check_inplace(const OpDef& op, std::span<const Tensor> inputs) {
  const Tensor& self = inputs[0];
  DTR_CHECK(!has_internal_overlap(self.meta()), ValueError,
            "{}: unsupported operation: more than one element of the written-to tensor (shape {}, "
            "strides {}) refers to a single memory location; clone() it before the in-place "
            "operation",
            op.name, shape_str(self.shape()), shape_str(self.strides()));
  if (!is_grad_enabled()) return;
  if (op.backward != nullptr) {
    for (size_t i = 0; i < inputs.size(); ++i)
      if (i == 0 || !nondiff_input(op, i)) refresh_or_throw(inputs[i], op.name, i);
  }
  DTR_CHECK(!(self.is_leaf() && self.requires_grad()), ValueError,
            "{}: a leaf tensor that requires grad is being used in an in-place operation (shape "
            "{}); wrap it in NoGradGuard or use the out-of-place op",
            op.name, shape_str(self.shape()));
  const TensorImpl& impl = *self.impl();
  if (!impl.view_base) return;
  const Tensor base(impl.view_base);
  DTR_CHECK(!(base.is_leaf() && base.requires_grad()), ValueError,
            "{}: a view of a leaf tensor that requires grad is being used in an in-place "
            "operation (view shape {}, base shape {}); wrap it in NoGradGuard or write into a "
            "copy",
            op.name, shape_str(self.shape()), shape_str(base.shape()));
  if (!will_record(op, inputs) && !base.requires_grad()) return;
  using Creation = TensorImpl::ViewCreation;
  DTR_CHECK(impl.view_creation != Creation::kMultiOutput, ValueError,
            "{}: the tensor written (shape {}) is a view made by an op that returns several views "
            "(split, chunk); such views may not be modified in place while autograd records; "
            "use the out-of-place op",
            op.name, shape_str(self.shape()));
  DTR_CHECK(impl.view_creation != Creation::kNoGrad, ValueError,
            "{}: the tensor written (shape {}) is a view made in no_grad mode of a base that "
            "requires grad, and is being modified in place with grad mode enabled; make the "
            "view with grad mode enabled, or write under NoGradGuard",
            op.name, shape_str(self.shape()));
}

ReadCapture::ReadCapture() : prev_(t_capture) { t_capture = this; }

ReadCapture::~ReadCapture() {
  t_capture = prev_;
  if (prev_ != nullptr)
    for (const Tensor& t : tensors_) prev_->note(t);
}

void ReadCapture::note(const Tensor& t) {
  if (seen_.insert(t.impl()).second) tensors_.push_back(t);
}

namespace {

// Note [higher-order gradients]: a backward rule that dispatches an op with no
// backward of its own (a fused gradient kernel) on inputs that require grad
// would silently cut the gradient of the gradient there.
void check_differentiable(const OpDef& op, std::span<const Tensor> inputs,
                          std::span<Tensor> outputs) {
  bool floating = false;
  for (const Tensor& t : outputs) floating = floating || t.is_floating_point();
  if (!floating) return;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (nondiff_input(op, i) || !inputs[i].requires_grad()) continue;
    throw NotImplementedError(fmt::format(
        "{}: this op has no derivative, so a backward with create_graph=true cannot record its "
        "graph through it (input {}, shape {}); the gradient of a gradient through the op whose "
        "backward uses {} is not supported yet",
        op.name, i, shape_str(inputs[i].shape()), op.name));
  }
}

}  // namespace

void record(const OpDef& op, const Attrs& attrs, std::span<const Tensor> inputs,
            std::span<Tensor> outputs) {
  if (t_capture != nullptr && op.backward != nullptr) {
    for (size_t i = 0; i < inputs.size(); ++i)
      if (differentiable_input(op, i, inputs[i])) t_capture->note(inputs[i]);
  }
  if (is_grad_enabled() && op.backward != nullptr) {
    for (size_t i = 0; i < inputs.size(); ++i)
      if (!nondiff_input(op, i)) refresh_or_throw(inputs[i], op.name, i);
  }
  if (t_create_graph > 0 && op.backward == nullptr && is_grad_enabled()) check_differentiable(op, inputs, outputs);
  if (!will_record(op, inputs)) return;
  auto node = std::make_shared<Node>();
  node->op = &op;
  node->attrs = attrs;
  node->seq = g_seq.fetch_add(1, std::memory_order_relaxed);
  node->next.resize(inputs.size());
  node->input_metas.reserve(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    node->input_metas.push_back(t.meta());
    if (differentiable_input(op, i, t)) node->next[i] = edge_to(t);
  }
  if (op.save & kSaveInputs) {
    for (size_t i = 0; i < inputs.size(); ++i) {
      node->saved_inputs.push_back((op.unsaved_inputs >> i) & 1u ? SavedTensor{} : save(inputs[i]));
    }
  }
  if (op.flags.inplace) {
    // The write moves outputs[0] (the tensor written) onto the new node;
    // every other tensor on its storage is now stale.
    TensorImpl& self = *outputs[0].impl();
    self.graph_version = ++self.storage->graph_version;
    if (self.view_base) {
      record_write_through_view(node, outputs[0]);
      if (op.save & kSaveOutputs) node->saved_outputs.push_back(save(outputs[0], /*output=*/true));
      return;
    }
  }
  set_grad_fn(outputs, node);
  // Saved after the outputs are wired so an in-place output saves its new version.
  if (op.save & kSaveOutputs) {
    for (const Tensor& t : outputs) node->saved_outputs.push_back(save(t, /*output=*/true));
  }
}

void record_custom(std::string name, CustomBackwardFn backward, std::span<const Tensor> inputs,
                   std::span<Tensor> outputs) {
  DTR_INTERNAL_ASSERT(backward != nullptr, "record_custom: {} has no backward", name);
  auto node = std::make_shared<Node>();
  node->custom_backward = std::move(backward);
  node->custom_name = std::move(name);
  node->seq = g_seq.fetch_add(1, std::memory_order_relaxed);
  node->next.resize(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    refresh_or_throw(t, node->custom_name, i);
    node->input_metas.push_back(t.meta());
    node->saved_inputs.push_back(save(t));
    if (t.requires_grad()) node->next[i] = edge_to(t);
  }
  set_grad_fn(outputs, node);
}

Tensor sum_to(const Tensor& grad, IntList shape) {
  if (!grad.defined()) return grad;
  if (IntList(grad.shape()) .size() == shape.size() &&
      std::equal(shape.begin(), shape.end(), grad.shape().begin()))
    return grad;
  const int64_t lead = grad.dim() - int64_t(shape.size());
  DTR_INTERNAL_ASSERT(lead >= 0, "sum_to: gradient of shape {} cannot reduce to {}",
                      shape_str(grad.shape()), shape_str(shape));
  Shape dims;
  for (int64_t d = 0; d < lead; ++d) dims.push_back(d);
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1 && grad.shape()[size_t(lead) + d] != 1) dims.push_back(lead + int64_t(d));
  }
  Tensor r = dims.empty() ? grad : sum(grad, dims, /*keepdim=*/true);
  if (lead > 0 || r.dim() != int64_t(shape.size())) r = reshape(r, shape);
  return r;
}

namespace {

Tensor accumulate(const Tensor& acc, const Tensor& g) {
  if (!acc.defined()) return g;
  if (!g.defined()) return acc;
  return add(acc, g);
}

// True when `t` lies contiguously over the whole of its storage.
bool covers_storage(const Tensor& t) {
  return t.is_contiguous() && t.storage_offset() == 0 &&
         t.storage()->nbytes() == t.numel() * int64_t(itemsize(t.dtype()));
}

// True when `acc` may take `g` in place: `acc` has `owners` references to its
// impl (the caller's), is the only handle on its storage and covers all of it.
bool addable_in_place(const Tensor& acc, const Tensor& g, long owners) {
  return acc.defined() && g.defined() && acc.impl_ptr().use_count() == owners &&
         acc.storage()->handle_count.load() == 1 && acc.dtype() == g.dtype() && acc.shape() == g.shape() &&
         acc.device() == g.device() && covers_storage(acc);
}

// A parameter's gradient summed over its uses (an unrolled RNN's weight is
// used once per step): added in place when the buffer holds the only
// handle on its bytes, as PyTorch's InputBuffer does. Out of place, every
// partial sum would be a new storage whose lineage is the previous sum, a
// chain as long as the number of uses that the runtime could only evict by
// rebuilding it from the start. In place (outside grad mode) the running sum
// is one constant storage (Note [mutation]), which it is anyway once it is
// the parameter's .grad. Same additions in the same order: bitwise the
// same sum.
Tensor accumulate_param_grad(Tensor acc, const Tensor& g) {
  if (addable_in_place(acc, g, 1)) {
    acc.add_(g);
    return acc;
  }
  return accumulate(acc, g);
}

// The leaf's post-accumulate-grad hooks; with none registered this is one
// pointer test. The list is copied so a hook may remove itself or others.
void run_post_accumulate_grad_hooks(Tensor& leaf) {
  const AutogradMeta* am = leaf.impl()->autograd.get();
  if (am == nullptr || !am->post_accumulate_grad_hooks || am->post_accumulate_grad_hooks->hooks.empty())
    return;
  const auto hooks = am->post_accumulate_grad_hooks->hooks;
  for (const auto& [id, hook] : hooks) hook(leaf);
}

// A leaf's .grad is a leaf itself (PyTorch's AccumulateGrad): its bytes stay
// until the optimizer reads them and are never rebuilt. Left with its
// lineage, a gradient evicted during backward was rebuilt in the optimizer
// step by replaying the backward ops that made it, from activations freed
// long before, each of which needed its own evicted inputs: an encoder's
// AdamW step replayed 21,000 ops that way. So the gradient becomes a
// constant (Note [what may be evicted]); one that is a part of a larger
// storage is copied first, so the rest of that storage stays evictable.
Tensor as_grad_leaf(Tensor g) {
  if (!covers_storage(g)) g = g.clone();
  remat::Runtime::global().register_constant(*g.storage());
  return g;
}

void accumulate_into_leaf(Node& node, const Tensor& g_in, bool create_graph) {
  auto leaf_impl = node.leaf.lock();
  if (!leaf_impl || !g_in.defined()) return;
  Tensor leaf(leaf_impl);
  Tensor g = g_in;
  if (g.dtype() != leaf.dtype()) g = g.to(leaf.dtype());
  if (g.shape() != leaf.shape()) g = sum_to(g, leaf.shape());
  Tensor prev = leaf.grad();
  // Into .grad in place too (PyTorch's AccumulateGrad), when nothing else
  // holds it (the leaf and `prev` are its two references). Out of place,
  // the new .grad's lineage would read the old one, a constant once it was
  // summed in place above, and keep it resident: a checkpointed LSTM's
  // per-segment sums held 19 MiB that way.
  // With create_graph the new .grad keeps its graph (PyTorch's), so out of place.
  if (!create_graph && addable_in_place(prev, g, 2)) {
    prev.add_(g);
  } else if (create_graph) {
    leaf.set_grad(prev.defined() ? add(prev, g) : g);
  } else {
    leaf.set_grad(as_grad_leaf(prev.defined() ? add(prev, g) : g.detach()));
  }
  run_post_accumulate_grad_hooks(leaf);
}

/// One backward pass: how it runs, and for grad() the edges whose gradients
/// it captures instead of accumulating into leaves.
struct GraphTask {
  bool retain_graph = false;
  bool create_graph = false;
  std::vector<Edge> capture;     // grad(): one per input; empty for backward()
  std::vector<Tensor> captured;  // the gradients that reached them
};

void run_graph(const std::vector<Tensor>& roots, const std::vector<Tensor>& grad_roots,
               GraphTask& task);

// Runs queue_callback's callbacks, FIFO, including those they queue.
void run_final_callbacks() {
  for (size_t i = 0; i < t_final_callbacks.size(); ++i) {
    std::function<void()> cb = std::move(t_final_callbacks[i]);
    cb();
  }
  t_final_callbacks.clear();
}

}  // namespace

void queue_callback(std::function<void()> callback) {
  DTR_CHECK(t_backward_depth > 0, ValueError,
            "queue_callback: final callbacks can only be installed during the backward pass");
  DTR_CHECK(callback != nullptr, ValueError, "queue_callback: the callback is empty");
  t_final_callbacks.push_back(std::move(callback));
}

bool in_backward() { return t_backward_depth > 0; }
uint64_t backward_pass_id() { return t_backward_pass; }

namespace {

/// Runs `task` as the outermost or a nested backward pass (final callbacks
/// after the outermost one).
void run_task(const std::vector<Tensor>& roots, const std::vector<Tensor>& grad_roots, GraphTask& task) {
  if (t_backward_depth == 0) ++t_backward_pass;
  ++t_backward_depth;
  try {
    run_graph(roots, grad_roots, task);
    if (t_backward_depth == 1) {
      NoGradGuard no_grad;
      run_final_callbacks();
    }
  } catch (...) {
    if (--t_backward_depth == 0) t_final_callbacks.clear();
    throw;
  }
  --t_backward_depth;
}

}  // namespace

void run_backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grad_roots,
                  bool retain_graph, bool create_graph) {
  GraphTask task{.retain_graph = retain_graph, .create_graph = create_graph};
  run_task(roots, grad_roots, task);
}

bool in_create_graph() { return t_create_graph > 0; }

std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs, std::optional<bool> retain_graph,
                         bool create_graph, bool allow_unused) {
  DTR_CHECK(!outputs.empty(), ValueError, "grad: no outputs to differentiate");
  DTR_CHECK(!inputs.empty(), ValueError, "grad: no inputs to differentiate with respect to");
  DTR_CHECK(grad_outputs.empty() || grad_outputs.size() == outputs.size(), ValueError,
            "grad: {} grad_outputs for {} outputs", grad_outputs.size(), outputs.size());
  std::vector<Tensor> roots_grad(outputs.size());
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Tensor& o = outputs[i];
    DTR_CHECK(o.defined(), ValueError, "grad: output {} is an undefined tensor", i);
    DTR_CHECK(o.requires_grad(), ValueError,
              "grad: element {} of the outputs does not require grad and does not have a grad_fn", i);
    Tensor g = grad_outputs.empty() ? Tensor() : grad_outputs[i];
    if (!g.defined()) {
      DTR_CHECK(o.numel() == 1, ValueError,
                "grad: grad can be implicitly created only for scalar outputs (output {} has shape "
                "{})",
                i, shape_str(o.shape()));
      g = ones_like(o);
    }
    DTR_CHECK(g.shape() == o.shape(), ValueError,
              "grad: mismatch in shape: grad_output {} has shape {} but the output has shape {}", i,
              shape_str(g.shape()), shape_str(o.shape()));
    DTR_CHECK(g.device() == o.device(), ValueError,
              "grad: grad_output {} is on {} but the output is on {}", i, g.device().str(),
              o.device().str());
    roots_grad[i] = g.dtype() == o.dtype() ? g : g.to(o.dtype());
  }
  GraphTask task{.retain_graph = retain_graph.value_or(create_graph), .create_graph = create_graph};
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    DTR_CHECK(t.defined(), ValueError, "grad: input {} is an undefined tensor", i);
    refresh_or_throw(t, "grad", i);
    DTR_CHECK(t.requires_grad(), ValueError,
              "grad: input {} (shape {}) does not require grad", i, shape_str(t.shape()));
    task.capture.push_back(edge_to(t));
  }
  task.captured.resize(inputs.size());
  run_task(outputs, roots_grad, task);
  std::vector<Tensor> result = std::move(task.captured);
  for (size_t i = 0; i < result.size(); ++i) {
    Tensor& g = result[i];
    if (!g.defined()) {
      DTR_CHECK(allow_unused, ValueError,
                "grad: input {} (shape {}) appears to not have been used in the graph; pass "
                "allow_unused=true to get an undefined gradient for it",
                i, shape_str(inputs[i].shape()));
      continue;
    }
    const GradModeGuard mode(create_graph);
    if (g.dtype() != inputs[i].dtype()) g = g.to(inputs[i].dtype());
    if (g.shape() != inputs[i].shape()) g = sum_to(g, inputs[i].shape());
    if (!create_graph) g = g.detach();
  }
  return result;
}

namespace {

/// The gradients of `n`'s inputs from those of its outputs (`grads`, one per
/// output, zeros filled in); drops its saved tensors unless `retain_graph`.
std::vector<Tensor> input_grads(Node& n, std::vector<Tensor>& grads, bool retain_graph);

/// CopySlices (Note [views and in-place writes]): `grads[0]` is the gradient
/// of the base after the write. At the view's elements the write's node maps
/// it to the gradient of the view's old values (input 0) and of the write's
/// other inputs; elsewhere the base's gradient passes through.
/// copy_slices_grads in a backward that records its graph: the same steps by
/// index (gather the view's elements, mask them out, scatter-add the new ones).
std::vector<Tensor> copy_slices_grads_differentiable(Node& n, std::vector<Tensor>& grads,
                                                     bool retain_graph) {
  const CopySlices& cs = *n.copy_slices;
  check_dense_for_create_graph(cs.base, cs.storage_numel);
  const Tensor g = grads[0].reshape({-1});
  const Tensor index = position_index(cs.view, g.device());
  std::vector<Tensor> fn_grads{index_select(g, 0, index).reshape(cs.view.shape)};
  std::vector<Tensor> res = input_grads(*cs.fn, fn_grads, retain_graph);
  res.resize(n.next.size());
  if (n.next[0].node) {
    std::vector<uint8_t> in_view(size_t(cs.storage_numel), 0);
    for (int64_t p : view_positions(cs.view)) in_view[size_t(p)] = 1;
    const Tensor mask = from_vector(in_view, {cs.storage_numel}).to(kBool).to(g.device());
    Tensor out = masked_fill(g, mask, 0);
    if (res[0].defined()) out = add(out, scatter_add_flat(res[0], index, cs.storage_numel));
    res[0] = out.reshape(cs.base.shape);
  } else {
    res[0] = Tensor();
  }
  if (!retain_graph) n.released = true;
  return res;
}

std::vector<Tensor> copy_slices_grads(Node& n, std::vector<Tensor>& grads, bool retain_graph) {
  if (is_grad_enabled()) return copy_slices_grads_differentiable(n, grads, retain_graph);
  const CopySlices& cs = *n.copy_slices;
  const bool to_base = n.next[0].node != nullptr;
  // A buffer with the base's layout, so that the view's layout addresses its
  // elements: the base's gradient itself when nothing else holds it and its
  // layout is the base's (a buffer filled row by row then passes one
  // gradient buffer down its chain of writes, as accumulate_param_grad does
  // for sums), else a copy.
  const Tensor& g = grads[0];
  Tensor result;
  if (to_base && dense_layout(cs.base, cs.storage_numel) && addable_in_place(g, g, 1)) {
    result = g;
  } else {
    result = as_layout(zeros({cs.storage_numel}, TensorOptions(g.dtype()).device(g.device())), cs.base);
    result.copy_(g);
  }
  std::vector<Tensor> fn_grads{as_layout(result, cs.view).clone()};
  std::vector<Tensor> res = input_grads(*cs.fn, fn_grads, retain_graph);
  res.resize(n.next.size());
  if (to_base) {
    Tensor slice = as_layout(result, cs.view);
    if (res[0].defined()) slice.copy_(res[0]);
    else slice.zero_();
    res[0] = result;
  } else {
    res[0] = Tensor();
  }
  if (!retain_graph) n.released = true;
  return res;
}

std::vector<Tensor> input_grads(Node& n, std::vector<Tensor>& grads, bool retain_graph) {
  if (n.copy_slices) return copy_slices_grads(n, grads, retain_graph);
  std::vector<Tensor> inputs, outputs;
  for (const auto& s : n.saved_inputs) inputs.push_back(unpack(s, n));
  for (const auto& s : n.saved_outputs) outputs.push_back(unpack(s, n));
  inputs.resize(n.input_metas.size());
  outputs.resize(n.output_metas.size());
  std::vector<Tensor> in_grads;
  if (n.custom_backward) {
    in_grads = n.custom_backward(inputs, grads);
  } else {
    uint64_t mask = 0;
    for (size_t i = 0; i < n.next.size(); ++i)
      if (n.next[i].node) mask |= uint64_t{1} << i;
    BackwardContext ctx{*n.op, n.attrs, inputs, outputs, n.input_metas, n.output_metas, mask};
    in_grads = n.op->backward(ctx, grads);
  }
  DTR_INTERNAL_ASSERT(in_grads.size() <= n.next.size(), "{} returned {} gradients for {} inputs",
                      n.name(), in_grads.size(), n.next.size());
  if (!retain_graph) {
    n.saved_inputs.clear();
    n.saved_outputs.clear();
    n.released = true;
  }
  return in_grads;
}

// Raises the create_graph depth while in scope.
struct CreateGraphScope {
  explicit CreateGraphScope(bool on) : on(on) { t_create_graph += on ? 1 : 0; }
  ~CreateGraphScope() { t_create_graph -= on ? 1 : 0; }
  CreateGraphScope(const CreateGraphScope&) = delete;
  CreateGraphScope& operator=(const CreateGraphScope&) = delete;
  bool on;
};

void run_graph(const std::vector<Tensor>& roots, const std::vector<Tensor>& grad_roots,
               GraphTask& task) {
  // Note [higher-order gradients]: with create_graph the backward's ops record.
  const GradModeGuard mode(task.create_graph);
  const CreateGraphScope scope(task.create_graph);
  // Discover the graph and count dependencies (explicit stack).
  absl::flat_hash_map<Node*, int> deps;
  absl::flat_hash_map<Node*, std::vector<Tensor>> buffers;
  std::vector<Node*> stack;
  std::vector<std::shared_ptr<Node>> root_nodes;
  for (size_t r = 0; r < roots.size(); ++r) {
    const Tensor& t = roots[r];
    refresh_or_throw(t, "backward", r);
    std::shared_ptr<Node> fn = t.grad_fn();
    if (!fn) {
      if (t.requires_grad()) fn = accumulator_for(t);
      else continue;
    }
    const uint32_t nr = t.grad_fn() ? t.impl()->autograd->output_nr : 0;
    auto& buf = buffers[fn.get()];
    if (buf.empty()) buf.resize(fn->is_accumulator() ? 1 : fn->output_metas.size());
    buf[nr] = accumulate(buf[nr], grad_roots[r]);
    if (!deps.contains(fn.get())) {
      deps[fn.get()] = 0;
      stack.push_back(fn.get());
    }
    root_nodes.push_back(std::move(fn));
  }
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    for (const Edge& e : n->next) {
      if (!e.node) continue;
      auto [it, inserted] = deps.try_emplace(e.node.get(), 0);
      ++it->second;
      if (inserted) stack.push_back(e.node.get());
    }
  }
  // grad(): only the nodes from which a captured edge is reachable run.
  const bool capturing = !task.capture.empty();
  absl::flat_hash_map<Node*, std::vector<size_t>> captures;
  absl::flat_hash_set<Node*> needed;
  if (capturing) {
    for (size_t j = 0; j < task.capture.size(); ++j) captures[task.capture[j].node.get()].push_back(j);
    // A topological order (Kahn's, on a copy of the counts), then children before parents.
    absl::flat_hash_map<Node*, int> left = deps;
    std::vector<Node*> order;
    for (const auto& r : root_nodes)
      if (left[r.get()] == 0) {
        left[r.get()] = -1;
        order.push_back(r.get());
      }
    for (size_t k = 0; k < order.size(); ++k)
      for (const Edge& e : order[k]->next)
        if (e.node && --left[e.node.get()] == 0) order.push_back(e.node.get());
    // A node runs when an edge of it leads to an input's edge or to a node
    // that runs; an input's own grad_fn need not run.
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
      bool need = false;
      for (const Edge& e : (*it)->next) {
        need = need || (e.node && (captures.contains(e.node.get()) || needed.contains(e.node.get())));
      }
      if (need) needed.insert(*it);
    }
  }
  // Later nodes first (PyTorch's order), deterministic.
  auto later = [](Node* a, Node* b) { return a->seq < b->seq; };
  std::priority_queue<Node*, std::vector<Node*>, decltype(later)> ready(later);
  for (const auto& r : root_nodes)
    if (deps[r.get()] == 0) {
      deps[r.get()] = -1;  // queued
      ready.push(r.get());
    }
  while (!ready.empty()) {
    Node* n = ready.top();
    ready.pop();
    std::vector<Tensor> grads = std::move(buffers[n]);
    buffers.erase(n);
    if (capturing) {
      if (auto c = captures.find(n); c != captures.end()) {
        for (size_t j : c->second) {
          const uint32_t nr = task.capture[j].input_nr;
          if (nr < grads.size() && grads[nr].defined()) task.captured[j] = accumulate(task.captured[j], grads[nr]);
        }
      }
      // No leaf's .grad changes, and nothing that leads to no input runs
      // (its children still count it done, so those that lead to an input
      // become ready).
      if (n->is_accumulator()) continue;
      if (!needed.contains(n)) {
        for (const Edge& e : n->next) {
          if (e.node && --deps[e.node.get()] == 0) {
            deps[e.node.get()] = -1;
            ready.push(e.node.get());
          }
        }
        continue;
      }
    } else if (n->is_accumulator()) {
      accumulate_into_leaf(*n, grads.empty() ? Tensor() : grads[0], task.create_graph);
      continue;
    }
    DTR_CHECK(!((task.create_graph || capturing) && n->custom_backward && n->custom_name != "AsStrided"),
              NotImplementedError,
              "{}: a backward with create_graph=true or autograd::grad cannot run through this node "
              "(its backward is a nested backward pass, as a checkpoint's); use backward() without "
              "create_graph",
              n->name());
    DTR_CHECK(!n->released, AutogradError,
              "trying to backward through the graph a second time ({}); saved tensors were freed "
              "after the first backward: pass retain_graph=true to the first call",
              n->name());
    grads.resize(n->output_metas.size());
    for (size_t i = 0; i < grads.size(); ++i) {
      const TensorMeta& m = n->output_metas[i];
      if (!grads[i].defined() && is_floating(m.dtype)) grads[i] = zeros(m.shape, TensorOptions(m.dtype).device(m.device));
      if (!capturing && i < n->retained.size()) {
        if (auto impl = n->retained[i].lock()) {
          Tensor t(impl);
          Tensor prev = t.grad();
          t.set_grad(prev.defined() ? add(prev, grads[i]) : task.create_graph ? grads[i] : grads[i].detach());
        }
      }
    }
    std::vector<Tensor> in_grads = input_grads(*n, grads, task.retain_graph);
    for (size_t i = 0; i < in_grads.size(); ++i) {
      const Edge& e = n->next[i];
      if (!e.node || !in_grads[i].defined()) continue;
      const TensorMeta& im = n->input_metas[i];
      DTR_INTERNAL_ASSERT(in_grads[i].shape() == im.shape,
                          "{}: gradient {} has shape {}, input has shape {}", n->name(), i,
                          shape_str(in_grads[i].shape()), shape_str(im.shape));
      auto& buf = buffers[e.node.get()];
      if (buf.empty()) buf.resize(e.node->is_accumulator() ? 1 : e.node->output_metas.size());
      buf[e.input_nr] = e.node->is_accumulator() && !task.create_graph
                            ? accumulate_param_grad(std::move(buf[e.input_nr]), in_grads[i])
                            : accumulate(buf[e.input_nr], in_grads[i]);
    }
    for (const Edge& e : n->next) {
      if (!e.node) continue;
      if (--deps[e.node.get()] == 0) {
        deps[e.node.get()] = -1;
        ready.push(e.node.get());
      }
    }
  }
}

}  // namespace

}  // namespace autograd
}  // namespace dtr
