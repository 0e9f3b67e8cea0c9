#include "eager/tensor.h"

#include <fmt/format.h>

#include "core/element.h"
#include "eager/autograd.h"
#include "eager/ops.h"
#include "remat/runtime.h"

namespace dtr {

TensorImpl::TensorImpl(std::shared_ptr<Storage> s, TensorMeta m)
    : storage(std::move(s)), meta(std::move(m)), graph_version(storage->graph_version) {
  DTR_CHECK(meta.shape.size() <= 16, ValueError, "tensors have at most 16 dimensions, got {}",
            meta.shape.size());
  storage->handle_count.fetch_add(1, std::memory_order_relaxed);
}

TensorImpl::~TensorImpl() {
  if (storage->handle_count.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    remat::Runtime::global().on_last_handle(*storage);
  }
}

namespace {
[[noreturn]] void throw_undefined(const char* what) {
  throw ValueError(fmt::format("{}: tensor is undefined", what));
}
}  // namespace

const TensorMeta& Tensor::meta() const {
  if (!impl_) throw_undefined("meta");
  return impl_->meta;
}

const std::shared_ptr<Storage>& Tensor::storage() const {
  if (!impl_) throw_undefined("storage");
  return impl_->storage;
}

int64_t Tensor::size(int64_t d) const { return shape()[size_t(normalize_dim(d, dim(), "size"))]; }
int64_t Tensor::stride(int64_t d) const {
  return strides()[size_t(normalize_dim(d, dim(), "stride"))];
}
bool Tensor::is_contiguous() const { return dtr::is_contiguous(shape(), strides()); }

namespace detail {
void copy_elements_out(const Tensor& t, DType out_dtype, void* out) {
  DTR_CHECK(t.defined(), ValueError, "to_vector: tensor is undefined");
  // Another device's bytes come to the host through the copy op (its backend's copy).
  if (!t.device().is_cpu()) return copy_elements_out(t.to(Device(kCPU)), out_dtype, out);
  Storage* s = t.storage().get();
  remat::Runtime& rt = remat::Runtime::global();
  rt.acquire({&s, 1});
  const auto& m = t.meta();
  const int64_t isz = itemsize(m.dtype), osz = itemsize(out_dtype);
  const auto* base = static_cast<const std::byte*>(s->data()) + m.offset * isz;
  auto* dst = static_cast<std::byte*>(out);
  for_each_offset(m.shape, m.strides, 0, m.numel(), [&](int64_t i, int64_t off) {
    convert_element(dst + i * osz, out_dtype, base + off * isz, m.dtype);
  });
  rt.release({&s, 1});
}
}  // namespace detail

const void* Tensor::const_data_ptr() const {
  Storage* s = storage().get();
  remat::Runtime& rt = remat::Runtime::global();
  rt.acquire({&s, 1});
  rt.release({&s, 1});
  return static_cast<const std::byte*>(s->data()) + meta().offset * itemsize(dtype());
}

void* Tensor::raw_data_ptr() const {
  const std::shared_ptr<Storage>& storage = this->storage();
  Storage* s = storage.get();
  remat::Runtime& rt = remat::Runtime::global();
  rt.acquire({&s, 1});
  // Note [mutation]: a write through the pointer is an in-place write
  // outside grad mode. Lineage that reads the current bytes keeps them (as an
  // older version), and the storage becomes a constant: its own lineage
  // would rebuild it without the write.
  // The program may keep the pointer and write through it again at any
  // time (a staging buffer): from now on the bytes change behind the
  // runtime's back, as a from_blob buffer's do (Note [borrowed storage]), so
  // no lineage may read them later.
  try {
    rt.before_mutation(storage);
    ++s->version;
    rt.mark_borrowed(*s);
  } catch (...) {
    rt.release({&s, 1});
    throw;
  }
  rt.release({&s, 1});
  return static_cast<std::byte*>(s->data()) + meta().offset * itemsize(dtype());
}

std::string Tensor::str() const {
  if (!defined()) return "Tensor(undefined)";
  std::string out = fmt::format("Tensor(shape={}, dtype={}, device={}", shape_str(shape()),
                                dtype_name(dtype()), device().str());
  if (numel() <= 16) {
    if (is_floating_point()) {
      out += fmt::format(", values=[{}]", fmt::join(to_vector<double>(), ", "));
    } else {
      out += fmt::format(", values=[{}]", fmt::join(to_vector<int64_t>(), ", "));
    }
  }
  if (requires_grad()) out += ", requires_grad=true";
  return out + ")";
}

// ---- autograd accessors ------------------------------------------------------

bool Tensor::requires_grad() const {
  return impl_ && impl_->autograd && impl_->autograd->requires_grad;
}

Tensor& Tensor::requires_grad_(bool r) {
  if (!impl_) throw_undefined("requires_grad_");
  DTR_CHECK(is_leaf(), ValueError,
            "requires_grad_: you can only change requires_grad flags of leaf variables (this "
            "tensor was produced by {})",
            grad_fn_name());
  DTR_CHECK(!r || is_floating_point(), TypeError,
            "requires_grad_: only tensors of floating point dtype can require gradients, got {}",
            dtype_name(dtype()));
  if (!impl_->autograd) impl_->autograd = std::make_unique<AutogradMeta>();
  impl_->autograd->requires_grad = r;
  // Leaves that require grad are parameters: constants that are never
  // evicted (Note [what may be evicted]).
  if (r) remat::Runtime::global().register_constant(*impl_->storage);
  return *this;
}

Tensor Tensor::grad() const {
  if (!impl_ || !impl_->autograd || !impl_->autograd->grad) return Tensor();
  return Tensor(impl_->autograd->grad);
}

void Tensor::set_grad(const Tensor& g) {
  if (!impl_) throw_undefined("set_grad");
  if (!impl_->autograd) impl_->autograd = std::make_unique<AutogradMeta>();
  if (g.defined()) {
    // As PyTorch's `x.grad = g`: same dtype, device and shape.
    DTR_CHECK(g.dtype() == dtype(), TypeError,
              "set_grad: assigned grad has data of a different type ({}; the tensor is {})",
              dtype_name(g.dtype()), dtype_name(dtype()));
    DTR_CHECK(g.device() == device(), ValueError,
              "set_grad: assigned grad is on {} but the tensor is on {}", g.device().str(),
              device().str());
    DTR_CHECK(g.shape() == shape(), ValueError,
              "set_grad: assigned grad has shape {} but the tensor has shape {}",
              shape_str(g.shape()), shape_str(shape()));
  }
  impl_->autograd->grad = g.impl_ptr();
}

void Tensor::retain_grad() {
  if (!impl_) throw_undefined("retain_grad");
  DTR_CHECK(requires_grad(), ValueError,
            "retain_grad: can't retain_grad on a tensor that has requires_grad=false");
  impl_->autograd->retains_grad = true;
  if (auto& fn = impl_->autograd->grad_fn) {
    const uint32_t nr = impl_->autograd->output_nr;
    if (fn->retained.size() <= nr) fn->retained.resize(nr + 1);
    fn->retained[nr] = impl_;
  }
}

RemovableHandle Tensor::register_post_accumulate_grad_hook(PostAccumulateGradHook hook) {
  if (!impl_) throw_undefined("register_post_accumulate_grad_hook");
  DTR_CHECK(hook != nullptr, ValueError, "register_post_accumulate_grad_hook: the hook is empty");
  DTR_CHECK(requires_grad(), ValueError,
            "register_post_accumulate_grad_hook: cannot register a hook on a tensor that doesn't "
            "require gradient (shape {})",
            shape_str(shape()));
  DTR_CHECK(is_leaf(), ValueError,
            "register_post_accumulate_grad_hook: post accumulate grad hooks cannot be registered "
            "on non-leaf tensors (this tensor was produced by {})",
            grad_fn_name());
  auto& hooks = impl_->autograd->post_accumulate_grad_hooks;
  if (!hooks) hooks = std::make_unique<PostAccumulateGradHooks>();
  const uint64_t id = hooks->next_id++;
  hooks->hooks.emplace_back(id, std::move(hook));
  return RemovableHandle(impl_, id);
}

void RemovableHandle::remove() {
  auto impl = impl_.lock();
  impl_.reset();
  if (!impl || !impl->autograd || !impl->autograd->post_accumulate_grad_hooks) return;
  auto& hooks = impl->autograd->post_accumulate_grad_hooks->hooks;
  std::erase_if(hooks, [this](const auto& h) { return h.first == id_; });
}

bool Tensor::is_leaf() const {
  return !impl_ || !impl_->autograd || impl_->autograd->grad_fn == nullptr;
}

const std::shared_ptr<autograd::Node>& Tensor::grad_fn() const {
  static const std::shared_ptr<autograd::Node> none;
  if (!impl_ || !impl_->autograd) return none;
  return impl_->autograd->grad_fn;
}

std::string Tensor::grad_fn_name() const {
  const auto& fn = grad_fn();
  return fn ? fn->name() : std::string();
}

void Tensor::backward(const Tensor& gradient, bool retain_graph) const {
  if (!impl_) throw_undefined("backward");
  DTR_CHECK(requires_grad(), ValueError,
            "backward: element 0 of tensors does not require grad and does not have a grad_fn");
  Tensor g = gradient;
  if (!g.defined()) {
    DTR_CHECK(numel() == 1, ValueError,
              "backward: grad can be implicitly created only for scalar outputs (shape {})",
              shape_str(shape()));
    g = ones_like(*this);
  } else {
    // PyTorch's checks on a root gradient (torch.autograd._make_grads and the
    // engine's validate_outputs): the same shape and device; another dtype is
    // cast to the tensor's, so an int64 gradient of a float32 output is used
    // as float32 (never as integers).
    DTR_CHECK(g.shape() == shape(), ValueError,
              "backward: mismatch in shape: gradient has shape {} but the tensor has shape {}",
              shape_str(g.shape()), shape_str(shape()));
    DTR_CHECK(g.device() == device(), ValueError,
              "backward: invalid gradient: expected device {} but got {}", device().str(),
              g.device().str());
    if (g.dtype() != dtype()) g = g.to(dtype());
  }
  autograd::run_backward({*this}, {g}, retain_graph);
}

Tensor Tensor::detach() const {
  if (!impl_) throw_undefined("detach");
  auto impl = std::make_shared<TensorImpl>(impl_->storage, impl_->meta);
  impl->is_view = impl_->is_view;
  impl->detached = true;
  return Tensor(std::move(impl));
}

// ---- methods: thin forwards to the free functions ----------------------------

Tensor Tensor::neg() const { return dtr::neg(*this); }
Tensor Tensor::abs() const { return dtr::abs(*this); }
Tensor Tensor::exp() const { return dtr::exp(*this); }
Tensor Tensor::log() const { return dtr::log(*this); }
Tensor Tensor::sqrt() const { return dtr::sqrt(*this); }
Tensor Tensor::rsqrt() const { return dtr::rsqrt(*this); }
Tensor Tensor::tanh() const { return dtr::tanh(*this); }
Tensor Tensor::sigmoid() const { return dtr::sigmoid(*this); }
Tensor Tensor::relu() const { return dtr::relu(*this); }
Tensor Tensor::add(const Tensor& o, Scalar alpha) const { return dtr::add(*this, o, alpha); }
Tensor Tensor::sub(const Tensor& o, Scalar alpha) const { return dtr::sub(*this, o, alpha); }
Tensor Tensor::mul(const Tensor& o) const { return dtr::mul(*this, o); }
Tensor Tensor::div(const Tensor& o) const { return dtr::div(*this, o); }
Tensor Tensor::pow(Scalar e) const { return dtr::pow(*this, e); }
Tensor Tensor::matmul(const Tensor& o) const { return dtr::matmul(*this, o); }
Tensor Tensor::sum() const { return dtr::sum(*this); }
Tensor Tensor::sum(IntList dims, bool keepdim) const { return dtr::sum(*this, dims, keepdim); }
Tensor Tensor::mean() const { return dtr::mean(*this); }
Tensor Tensor::mean(IntList dims, bool keepdim) const { return dtr::mean(*this, dims, keepdim); }
Tensor Tensor::max() const { return dtr::max(*this); }
Tensor Tensor::argmax(int64_t d, bool keepdim) const { return dtr::argmax(*this, d, keepdim); }
Tensor Tensor::softmax(int64_t d) const { return dtr::softmax(*this, d); }
Tensor Tensor::log_softmax(int64_t d) const { return dtr::log_softmax(*this, d); }
Tensor Tensor::view(IntList s) const { return dtr::view(*this, s); }
Tensor Tensor::reshape(IntList s) const { return dtr::reshape(*this, s); }
Tensor Tensor::transpose(int64_t a, int64_t b) const { return dtr::transpose(*this, a, b); }
Tensor Tensor::t() const {
  DTR_CHECK(dim() <= 2, ValueError, "t: expects a tensor with <= 2 dimensions, but got {}", dim());
  return dim() < 2 ? *this : dtr::transpose(*this, 0, 1);
}
Tensor Tensor::permute(IntList d) const { return dtr::permute(*this, d); }
Tensor Tensor::slice(int64_t d, std::optional<int64_t> s, std::optional<int64_t> e,
                     int64_t step) const {
  return dtr::slice(*this, d, s, e, step);
}
Tensor Tensor::narrow(int64_t d, int64_t s, int64_t l) const { return dtr::narrow(*this, d, s, l); }
Tensor Tensor::select(int64_t d, int64_t i) const { return dtr::select(*this, d, i); }
Tensor Tensor::unsqueeze(int64_t d) const { return dtr::unsqueeze(*this, d); }
Tensor Tensor::squeeze() const { return dtr::squeeze(*this); }
Tensor Tensor::squeeze(int64_t d) const { return dtr::squeeze(*this, d); }
Tensor Tensor::expand(IntList s) const { return dtr::expand(*this, s); }
Tensor Tensor::flatten(int64_t s, int64_t e) const { return dtr::flatten(*this, s, e); }
Tensor Tensor::masked_fill(const Tensor& m, Scalar v) const { return dtr::masked_fill(*this, m, v); }

// Reordering, tiling and accumulating scatters.
Tensor Tensor::flip(IntList dims) const { return dtr::flip(*this, dims); }
Tensor Tensor::roll(IntList shifts, IntList dims) const { return dtr::roll(*this, shifts, dims); }
Tensor Tensor::repeat(IntList repeats) const { return dtr::repeat(*this, repeats); }
Tensor Tensor::repeat_interleave(int64_t r, std::optional<int64_t> dim) const {
  return dtr::repeat_interleave(*this, r, dim);
}
Tensor Tensor::repeat_interleave(const Tensor& r, std::optional<int64_t> dim) const {
  return dtr::repeat_interleave(*this, r, dim);
}
Tensor Tensor::scatter_add(int64_t dim, const Tensor& index, const Tensor& src) const {
  return dtr::scatter_add(*this, dim, index, src);
}
Tensor Tensor::index_add(int64_t dim, const Tensor& index, const Tensor& source, Scalar alpha) const {
  return dtr::index_add(*this, dim, index, source, alpha);
}

// Unary: trigonometric and erf.
Tensor Tensor::sin() const { return dtr::sin(*this); }
Tensor Tensor::cos() const { return dtr::cos(*this); }
Tensor Tensor::erf() const { return dtr::erf(*this); }

Tensor Tensor::contiguous() const { return is_contiguous() ? *this : dtr::contiguous(*this); }
Tensor Tensor::operator-() const { return dtr::neg(*this); }

Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor operator+(const Tensor& a, Scalar b) { return add(a, b); }
Tensor operator-(const Tensor& a, Scalar b) { return sub(a, b); }
Tensor operator*(const Tensor& a, Scalar b) { return mul(a, b); }
Tensor operator/(const Tensor& a, Scalar b) { return div(a, b); }
Tensor operator+(Scalar a, const Tensor& b) { return add(b, a); }
Tensor operator-(Scalar a, const Tensor& b) { return add(neg(b), a); }
Tensor operator*(Scalar a, const Tensor& b) { return mul(b, a); }
Tensor operator/(Scalar a, const Tensor& b) { return mul(reciprocal(b), a); }

}  // namespace dtr
