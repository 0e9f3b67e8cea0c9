#include "eager/tensor.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <ostream>

#include <fmt/format.h>
#include <fmt/ranges.h>

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
  DTR_CHECK(!s->read_only, ValueError,
            "data_ptr: the tensor (shape {}) is read-only (imported from DLPack with "
            "DLPACK_FLAG_BITMASK_READ_ONLY): no writable pointer to it is handed out; use "
            "const_data_ptr() to read, or clone() it to write",
            shape_str(shape()));
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

namespace {
// A view made stale by an in-place write takes its history from its base
// when asked for it (Note [views and in-place writes]).
void refresh_if_stale_view(TensorImpl& impl) {
  if (impl.view_base && impl.graph_version != impl.storage->graph_version) autograd::refresh_view(impl);
}
}  // namespace

bool Tensor::requires_grad() const {
  if (!impl_) return false;
  refresh_if_stale_view(*impl_);
  return impl_->autograd && impl_->autograd->requires_grad;
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
  if (!impl_) return true;
  refresh_if_stale_view(*impl_);
  return !impl_->autograd || impl_->autograd->grad_fn == nullptr;
}

const std::shared_ptr<autograd::Node>& Tensor::grad_fn() const {
  static const std::shared_ptr<autograd::Node> none;
  if (!impl_) return none;
  refresh_if_stale_view(*impl_);
  if (!impl_->autograd) return none;
  return impl_->autograd->grad_fn;
}

std::string Tensor::grad_fn_name() const {
  const auto& fn = grad_fn();
  return fn ? fn->name() : std::string();
}

void Tensor::backward(const Tensor& gradient, std::optional<bool> retain_graph, bool create_graph) const {
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
  autograd::run_backward({*this}, {g}, retain_graph.value_or(create_graph), create_graph);
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
Tensor Tensor::pow(const Tensor& e) const { return dtr::pow(*this, e); }
Tensor Tensor::matmul(const Tensor& o) const { return dtr::matmul(*this, o); }
Tensor Tensor::maximum(const Tensor& o) const { return dtr::maximum(*this, o); }
Tensor Tensor::minimum(const Tensor& o) const { return dtr::minimum(*this, o); }
Tensor Tensor::clamp(std::optional<Scalar> lo, std::optional<Scalar> hi) const {
  return dtr::clamp(*this, lo, hi);
}
Tensor Tensor::eq(const Tensor& o) const { return dtr::eq(*this, o); }
Tensor Tensor::eq(Scalar o) const { return dtr::eq(*this, o); }
Tensor Tensor::ne(const Tensor& o) const { return dtr::ne(*this, o); }
Tensor Tensor::ne(Scalar o) const { return dtr::ne(*this, o); }
Tensor Tensor::lt(const Tensor& o) const { return dtr::lt(*this, o); }
Tensor Tensor::lt(Scalar o) const { return dtr::lt(*this, o); }
Tensor Tensor::le(const Tensor& o) const { return dtr::le(*this, o); }
Tensor Tensor::le(Scalar o) const { return dtr::le(*this, o); }
Tensor Tensor::gt(const Tensor& o) const { return dtr::gt(*this, o); }
Tensor Tensor::gt(Scalar o) const { return dtr::gt(*this, o); }
Tensor Tensor::ge(const Tensor& o) const { return dtr::ge(*this, o); }
Tensor Tensor::ge(Scalar o) const { return dtr::ge(*this, o); }
Tensor Tensor::where(const Tensor& c, const Tensor& o) const { return dtr::where(c, *this, o); }
Tensor Tensor::sum() const { return dtr::sum(*this); }
Tensor Tensor::sum(IntList dims, bool keepdim) const { return dtr::sum(*this, dims, keepdim); }
Tensor Tensor::mean() const { return dtr::mean(*this); }
Tensor Tensor::mean(IntList dims, bool keepdim) const { return dtr::mean(*this, dims, keepdim); }
Tensor Tensor::max() const { return dtr::max(*this); }
std::tuple<Tensor, Tensor> Tensor::max(int64_t d, bool keepdim) const {
  return dtr::max(*this, d, keepdim);
}
Tensor Tensor::argmax(int64_t d, bool keepdim) const { return dtr::argmax(*this, d, keepdim); }
Tensor Tensor::argmin(int64_t d, bool keepdim) const { return dtr::argmin(*this, d, keepdim); }
Tensor Tensor::amax(IntList dims, bool keepdim) const { return dtr::amax(*this, dims, keepdim); }
Tensor Tensor::amin(IntList dims, bool keepdim) const { return dtr::amin(*this, dims, keepdim); }
Tensor Tensor::logsumexp(IntList dims, bool keepdim) const { return dtr::logsumexp(*this, dims, keepdim); }
Tensor Tensor::cumsum(int64_t d) const { return dtr::cumsum(*this, d); }
std::tuple<Tensor, Tensor> Tensor::sort(int64_t d, bool descending) const { return dtr::sort(*this, d, descending); }
std::tuple<Tensor, Tensor> Tensor::topk(int64_t k, int64_t d, bool largest, bool sorted) const {
  return dtr::topk(*this, k, d, largest, sorted);
}
Tensor Tensor::multinomial(int64_t n, bool replacement) const { return dtr::multinomial(*this, n, replacement); }
Tensor Tensor::var(IntList dims, int64_t correction, bool keepdim) const {
  return dtr::var(*this, dims, correction, keepdim);
}
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
Tensor Tensor::index_select(int64_t d, const Tensor& i) const { return dtr::index_select(*this, d, i); }
Tensor Tensor::gather(int64_t d, const Tensor& i) const { return dtr::gather(*this, d, i); }
Tensor Tensor::tril(int64_t k) const { return dtr::tril(*this, k); }
Tensor Tensor::triu(int64_t k) const { return dtr::triu(*this, k); }
std::vector<Tensor> Tensor::split(int64_t n, int64_t d) const { return dtr::split(*this, n, d); }
std::vector<Tensor> Tensor::chunk(int64_t n, int64_t d) const { return dtr::chunk(*this, n, d); }

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
Tensor operator==(const Tensor& a, const Tensor& b) { return eq(a, b); }
Tensor operator!=(const Tensor& a, const Tensor& b) { return ne(a, b); }
Tensor operator<(const Tensor& a, const Tensor& b) { return lt(a, b); }
Tensor operator<=(const Tensor& a, const Tensor& b) { return le(a, b); }
Tensor operator>(const Tensor& a, const Tensor& b) { return gt(a, b); }
Tensor operator>=(const Tensor& a, const Tensor& b) { return ge(a, b); }
Tensor operator==(const Tensor& a, Scalar b) { return eq(a, b); }
Tensor operator!=(const Tensor& a, Scalar b) { return ne(a, b); }
Tensor operator<(const Tensor& a, Scalar b) { return lt(a, b); }
Tensor operator<=(const Tensor& a, Scalar b) { return le(a, b); }
Tensor operator>(const Tensor& a, Scalar b) { return gt(a, b); }
Tensor operator>=(const Tensor& a, Scalar b) { return ge(a, b); }
// a < t is t > a, and so on.
Tensor operator==(Scalar a, const Tensor& b) { return eq(b, a); }
Tensor operator!=(Scalar a, const Tensor& b) { return ne(b, a); }
Tensor operator<(Scalar a, const Tensor& b) { return gt(b, a); }
Tensor operator<=(Scalar a, const Tensor& b) { return ge(b, a); }
Tensor operator>(Scalar a, const Tensor& b) { return lt(b, a); }
Tensor operator>=(Scalar a, const Tensor& b) { return le(b, a); }

namespace {
// libtorch's type names: Float, Double, Half, BFloat16, Long, Int, Bool, Byte.
std::string libtorch_type_name(DType t) {
  switch (t) {
    case kFloat32: return "Float";
    case kFloat64: return "Double";
    case kFloat16: return "Half";
    case kBFloat16: return "BFloat16";
    case kInt64: return "Long";
    case kInt32: return "Int";
    case kBool: return "Bool";
    case kUInt8: return "Byte";
    default: return std::string(dtype_name(t));
  }
}

// Note [printing]: libtorch's layout (aten/src/ATen/core/Formatting.cpp,
// __printFormat): every element as a double, in one of three forms chosen
// from the whole tensor. Integral values (bools, integers, floats without a
// fraction) print plainly, width digits + 1, or in scientific notation
// (%.4e, width 11) past 9 digits. Other values print with 4 decimals, width
// digits + 6 (7 below 1), unless their magnitudes span more than 4 decades
// (scientific) or the largest has more than 5 integer digits or is below
// 0.1: then they are divided by a power of ten printed first ("1e-05 *").
// A matrix row separates its values by one space and wraps at 80 columns
// ("Columns 1 to 8"); a slice of a tensor of 3 or more dimensions is
// headed "(i,j,.,.) = " with 1-based indices and its rows indented by one.
struct PrintFormat {
  enum class Kind { kPlain, kScientific, kFixed } kind = Kind::kPlain;
  double scale = 1;
  int width = 0;
};

PrintFormat print_format(const std::vector<double>& v) {
  if (v.empty()) return {PrintFormat::Kind::kPlain, 1, 0};
  bool integral = true;
  for (double z : v) integral = integral && (!std::isfinite(z) || z == std::ceil(z));
  double exp_min = 1, exp_max = 1;
  bool any_finite = false;
  double lo = 0, hi = 0;
  for (double z : v) {
    if (!std::isfinite(z)) continue;
    const double a = std::fabs(z);
    lo = any_finite ? std::min(lo, a) : a;
    hi = any_finite ? std::max(hi, a) : a;
    any_finite = true;
  }
  if (any_finite) {
    exp_min = lo != 0 ? std::floor(std::log10(lo)) + 1 : 1;
    exp_max = hi != 0 ? std::floor(std::log10(hi)) + 1 : 1;
  }
  using K = PrintFormat::Kind;
  if (integral) return exp_max > 9 ? PrintFormat{K::kScientific, 1, 11} : PrintFormat{K::kPlain, 1, int(exp_max) + 1};
  if (exp_max - exp_min > 4) {
    const bool wide = std::fabs(exp_max) > 99 || std::fabs(exp_min) > 99;
    return {K::kScientific, 1, wide ? 12 : 11};
  }
  if (exp_max > 5 || exp_max < 0) return {K::kFixed, std::pow(10, exp_max - 1), 7};
  return {K::kFixed, 1, exp_max == 0 ? 7 : int(exp_max) + 6};
}

std::string format_value(double v, const PrintFormat& f) {
  const double x = v / f.scale;
  switch (f.kind) {
    case PrintFormat::Kind::kPlain: return fmt::format("{:>{}g}", x, f.width);
    case PrintFormat::Kind::kScientific: return fmt::format("{:>{}.4e}", x, f.width);
    case PrintFormat::Kind::kFixed: return fmt::format("{:>{}.4f}", x, f.width);
  }
  return {};
}

constexpr int64_t kLineSize = 80;

/// One matrix of `rows` x `cols` values starting at `v[offset]`, as
/// libtorch's __printMatrix.
void print_matrix(std::ostream& os, const std::vector<double>& v, size_t offset, int64_t rows, int64_t cols,
                  int64_t indent) {
  std::vector<double> block(v.begin() + std::ptrdiff_t(offset), v.begin() + std::ptrdiff_t(offset + size_t(rows * cols)));
  const PrintFormat f = print_format(block);
  const std::string pad(size_t(indent), ' ');
  os << pad;
  const int64_t per_line = std::max<int64_t>(1, (kLineSize - indent) / (f.width + 1));
  for (int64_t first = 0; first < cols;) {
    const int64_t last = std::min(first + per_line, cols) - 1;
    if (per_line < cols) {
      if (first != 0) os << "\n";
      os << "Columns " << first + 1 << " to " << last + 1 << pad;
    }
    if (f.scale != 1) os << fmt::format("{:g} *\n", f.scale) << pad;
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = first; c <= last; ++c) {
        os << format_value(block[size_t(r * cols + c)], f);
        if (c != last) {
          os << ' ';
          continue;
        }
        os << "\n";
        if (r != rows - 1) os << pad << (f.scale != 1 ? " " : "");
      }
    }
    first = last + 1;
  }
}
}  // namespace

std::ostream& operator<<(std::ostream& os, const Tensor& t) {
  if (!t.defined()) return os << "[ Tensor (undefined) ]";
  const std::vector<double> v = t.to_vector<double>();
  const Shape& s = t.shape();
  const int64_t d = t.dim();
  if (d == 0) {
    os << fmt::format("{}", v[0]) << "\n";
  } else if (d == 1 && !v.empty()) {
    const PrintFormat f = print_format(v);
    if (f.scale != 1) os << fmt::format("{:g} *\n", f.scale);
    for (double x : v) os << format_value(x, f) << "\n";
  } else if (d == 2 && !v.empty()) {
    print_matrix(os, v, 0, s[0], s[1], 0);
  } else if (!v.empty()) {
    const int64_t rows = s[size_t(d - 2)], cols = s[size_t(d - 1)];
    const int64_t per_matrix = rows * cols;
    for (int64_t m = 0; m * per_matrix < int64_t(v.size()); ++m) {
      // "(i,j,.,.) = " names the leading indices (1-based) of this slice.
      std::vector<int64_t> idx(size_t(d - 2));
      int64_t rest = m;
      for (int64_t k = d - 3; k >= 0; --k) {
        idx[size_t(k)] = rest % s[size_t(k)] + 1;
        rest /= s[size_t(k)];
      }
      if (m > 0) os << "\n";
      os << "(" << fmt::format("{}", fmt::join(idx, ",")) << ",.,.) = \n";
      print_matrix(os, v, size_t(m * per_matrix), rows, cols, 1);
    }
  }
  std::string device(device_type_name(t.device().type));
  for (char& c : device) c = char(std::toupper(static_cast<unsigned char>(c)));
  return os << "[ " << device << libtorch_type_name(t.dtype()) << "Type{"
            << fmt::format("{}", fmt::join(s, ",")) << "} ]";
}

}  // namespace dtr
