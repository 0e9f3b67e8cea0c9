// dtr::Tensor: a handle on a TensorImpl (metadata + autograd state) that
// points at a Storage (the bytes; Note [unit of eviction]). Copying a Tensor
// copies the handle, like torch::Tensor.
#pragma once

#include <cstdint>
#include <cstring>
#include <functional>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/half.h"
#include "core/op_registry.h"
#include "core/scalar.h"
#include "core/shape.h"
#include "core/storage.h"

namespace dtr {

namespace autograd {
struct Node;
}

class Tensor;
struct TensorImpl;
namespace indexing {
class TensorIndex;  // eager/indexing.h
}

/// A hook run after backward has accumulated a leaf's .grad (see
/// Tensor::register_post_accumulate_grad_hook); receives the leaf.
using PostAccumulateGradHook = std::function<void(Tensor&)>;

/// The hooks registered on one leaf, in registration order, each with the
/// id its RemovableHandle names.
struct PostAccumulateGradHooks {
  std::vector<std::pair<uint64_t, PostAccumulateGradHook>> hooks;
  uint64_t next_id = 0;
};

/// Removes the hook it was returned for (torch.utils.hooks.RemovableHandle).
/// Holds the tensor weakly: removing after the tensor died, or twice, does
/// nothing. A default-constructed handle names no hook.
class RemovableHandle {
 public:
  RemovableHandle() = default;
  RemovableHandle(std::weak_ptr<TensorImpl> impl, uint64_t id) : impl_(std::move(impl)), id_(id) {}
  /// Unregisters the hook; later backward passes do not call it. Safe to
  /// call from inside a hook (the hooks of the current accumulation still run).
  void remove();

 private:
  std::weak_ptr<TensorImpl> impl_;
  uint64_t id_ = 0;
};

/// dtype, device and requires_grad for factory functions. Converts
/// implicitly from a DType or a Device, like torch::TensorOptions.
/// Whether a dtype was given is remembered (c10's has_dtype()): a factory
/// with a dtype of its own (arange, full, randint, from_vector) uses it only
/// when none was; `dtype_` alone reads as float32 then.
struct TensorOptions {
  DType dtype_ = kFloat32;
  Device device_;
  bool requires_grad_ = false;
  bool has_dtype_ = false;

  TensorOptions() = default;
  TensorOptions(DType t) : dtype_(t), has_dtype_(true) {}  // NOLINT
  TensorOptions(Device d) : device_(d) {}  // NOLINT
  TensorOptions(DeviceType d) : device_(d) {}  // NOLINT
  TensorOptions dtype(DType t) const {
    auto o = *this;
    o.dtype_ = t;
    o.has_dtype_ = true;
    return o;
  }
  bool has_dtype() const { return has_dtype_; }
  /// The dtype given, else `fallback` (the factory's default).
  DType dtype_or(DType fallback) const { return has_dtype_ ? dtype_ : fallback; }
  TensorOptions device(Device d) const {
    auto o = *this;
    o.device_ = d;
    return o;
  }
  TensorOptions requires_grad(bool r = true) const {
    auto o = *this;
    o.requires_grad_ = r;
    return o;
  }
};

struct AutogradMeta {
  bool requires_grad = false;
  /// The autograd node that produced this tensor; null for leaves.
  std::shared_ptr<autograd::Node> grad_fn;
  uint32_t output_nr = 0;
  /// Accumulated gradient of a leaf (or of a tensor with retain_grad()).
  std::shared_ptr<struct TensorImpl> grad;
  /// The leaf's gradient accumulator, shared by every use of the leaf.
  std::weak_ptr<autograd::Node> grad_accumulator;
  bool retains_grad = false;
  /// register_post_accumulate_grad_hook's hooks; null until one is registered,
  /// so accumulation costs one pointer test without hooks.
  std::unique_ptr<PostAccumulateGradHooks> post_accumulate_grad_hooks;
};

struct TensorImpl {
  TensorImpl(std::shared_ptr<Storage> s, TensorMeta m);
  ~TensorImpl();
  TensorImpl(const TensorImpl&) = delete;
  TensorImpl& operator=(const TensorImpl&) = delete;

  std::shared_ptr<Storage> storage;
  TensorMeta meta;
  std::unique_ptr<AutogradMeta> autograd;  // null until needed
  /// Made by a view op: shares its storage with a base tensor.
  bool is_view = false;
  /// Storage::graph_version when this tensor's place in the graph was last
  /// set. Note [views and in-place writes]: base and views share one storage;
  /// when autograd records an in-place write through one of them, the others'
  /// grad_fn no longer describes their values.
  uint64_t graph_version = 0;
  /// Made by detach() or saved for backward: outside the graph, never stale.
  bool detached = false;
  /// How a view was made, for the in-place writes autograd refuses
  /// (PyTorch's CreationMeta): by an op with one output, by one that returns
  /// several views (split, chunk), or in no_grad mode from a base that
  /// requires grad.
  enum class ViewCreation : uint8_t { kDefault, kMultiOutput, kNoGrad };
  ViewCreation view_creation = ViewCreation::kDefault;
  /// A view's base: the tensor, not itself a view, whose storage it shares
  /// (a view of a view has the first one's base). Null for non-views and
  /// for detached tensors. Note [views and in-place writes]: an in-place write
  /// through the view moves the base's history onto the write (CopySlices),
  /// and a view made before a write regenerates its history from the base.
  std::shared_ptr<TensorImpl> view_base;
};

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}
  Tensor(const Tensor&) = default;
  Tensor(Tensor&&) noexcept = default;
  /// Assigning to a named tensor rebinds the handle (as libtorch).
  Tensor& operator=(const Tensor&) & = default;
  Tensor& operator=(Tensor&&) & noexcept = default;
  /// Assigning to a temporary writes into it, as libtorch's `x[0] = y` and
  /// `x.select(1, 2) = 0`: copy_(src) (src broadcasts) or fill_(value). Errors
  /// as copy_ / fill_.
  Tensor& operator=(const Tensor& src) && { return copy_(src); }
  Tensor& operator=(Scalar value) && { return fill_(value); }

  bool defined() const { return impl_ != nullptr; }
  TensorImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  const TensorMeta& meta() const;
  const std::shared_ptr<Storage>& storage() const;

  // ---- metadata ----------------------------------------------------------
  const Shape& shape() const { return meta().shape; }
  const Shape& sizes() const { return meta().shape; }
  /// Size of `dim` (negative counts from the end). Throws IndexError.
  int64_t size(int64_t dim) const;
  const Strides& strides() const { return meta().strides; }
  int64_t stride(int64_t dim) const;
  int64_t storage_offset() const { return meta().offset; }
  int64_t dim() const { return meta().dim(); }
  int64_t numel() const { return meta().numel(); }
  DType dtype() const { return meta().dtype; }
  Device device() const { return meta().device; }
  bool is_contiguous() const;
  bool is_floating_point() const { return is_floating(dtype()); }
  int64_t nbytes() const { return numel() * itemsize(dtype()); }
  /// "Tensor(shape=[2, 3], dtype=float32, device=cpu)" plus values when small.
  std::string str() const;

  // ---- data access (rematerializes if the storage was evicted) -------------
  /// The single element of a one-element tensor, converted to T. Throws ValueError.
  template <typename T>
  T item() const;
  /// All elements in row-major order, converted to T.
  template <typename T>
  std::vector<T> to_vector() const;
  /// Writable pointer to element 0 of a tensor of dtype T (at::Tensor::data_ptr /
  /// mutable_data_ptr). The caller may write through it, so this is a
  /// mutation (Note [mutation]), as an in-place op outside grad mode: the
  /// bytes are made resident, lineage that read the old value keeps it, the
  /// storage (shared with every view) becomes a constant that is never
  /// evicted, and its version is bumped — a tensor saved for backward then
  /// reports the write at backward, as after an in-place op. Because the
  /// storage is a constant, the pointer stays valid while any tensor on it
  /// lives, and since the program may keep it and write again later, the
  /// storage is treated as a from_blob buffer from then on (Note [borrowed
  /// storage]): results of ops that read it directly are kept as constants,
  /// never rebuilt from bytes that may have changed. To read without these effects use const_data_ptr. Throws
  /// TypeError when T is not the tensor's dtype, ValueError on an undefined
  /// tensor.
  template <typename T>
  T* data_ptr() const;
  template <typename T>
  T* mutable_data_ptr() const { return data_ptr<T>(); }
  /// data_ptr without the dtype check (at::Tensor::data_ptr()).
  void* raw_data_ptr() const;
  void* mutable_data_ptr() const { return raw_data_ptr(); }
  /// Read-only pointer to element 0 (at::Tensor::const_data_ptr, PyTorch 2).
  /// Not a mutation: lineage is kept and the storage stays evictable, so the
  /// pointer is valid only until the next op that may evict under a budget
  /// (prefer to_vector/item). Writing through it is undefined behaviour: an
  /// evicted value would be rebuilt without the write. Throws TypeError when T
  /// is not the tensor's dtype.
  template <typename T>
  const T* const_data_ptr() const;
  const void* const_data_ptr() const;

  // ---- autograd ------------------------------------------------------------
  bool requires_grad() const;
  /// Marks a leaf as requiring grad (PyTorch Tensor.requires_grad_). Throws
  /// ValueError on a non-leaf or a non-floating tensor.
  Tensor& requires_grad_(bool requires_grad = true);
  /// The accumulated gradient (undefined until backward reaches this leaf).
  Tensor grad() const;
  /// Assigns .grad (PyTorch `x.grad = g`); an undefined `g` clears it. Throws
  /// TypeError for another dtype, ValueError for another device or shape.
  void set_grad(const Tensor& g);
  /// Keep .grad on a non-leaf during backward.
  void retain_grad();
  /// Registers `hook`, called with this leaf after backward has accumulated
  /// a gradient into its .grad (torch.Tensor.register_post_accumulate_grad_hook,
  /// PyTorch 2.1): once per backward call that reaches the leaf with a
  /// defined gradient, after the gradients of all its uses in that graph
  /// (a weight used twice, tied weights) were summed; also when the leaf is
  /// itself a root of backward. A checkpoint region's recomputation runs a
  /// backward of its own, in which the leaves used inside the region get
  /// their gradients and their hooks. Runs under no_grad; the hook may read
  /// or change .grad (in place or by set_grad). Hooks run in registration
  /// order; an exception from one propagates out of backward. Returns a
  /// handle whose remove() unregisters the hook. Throws ValueError on an
  /// undefined tensor, an empty hook, a tensor that does not require grad or
  /// a non-leaf (PyTorch's RuntimeError).
  RemovableHandle register_post_accumulate_grad_hook(PostAccumulateGradHook hook);
  bool is_leaf() const;
  /// Name of the backward node ("MulBackward"), or "" for leaves.
  std::string grad_fn_name() const;
  const std::shared_ptr<autograd::Node>& grad_fn() const;
  /// Back-propagates from this tensor (torch.Tensor.backward). `gradient`
  /// may be omitted for a one-element tensor; otherwise it has this tensor's
  /// shape and device (ValueError if not), and a gradient of another dtype is
  /// cast to this tensor's dtype, as in PyTorch. retain_graph keeps saved
  /// tensors for another backward (default: create_graph). create_graph
  /// records the backward's own graph, so the leaves' .grad can be
  /// differentiated again (Note [higher-order gradients]); NotImplementedError
  /// names an op whose backward is not differentiable yet. Throws ValueError
  /// when this tensor does not require grad.
  void backward(const Tensor& gradient = Tensor(), std::optional<bool> retain_graph = std::nullopt,
                bool create_graph = false) const;
  /// A tensor sharing storage, cut from the graph (PyTorch Tensor.detach).
  Tensor detach() const;

  // ---- conversions ---------------------------------------------------------
  Tensor to(DType t) const;
  /// A copy on device `d` (this tensor itself when it is there already),
  /// through the registry op "to_device": recorded in lineage (a copy
  /// evicted on `d` is rebuilt from this one) and differentiable (the
  /// gradient comes back to this device). Same shape and dtype, contiguous.
  /// Throws DeviceError when `d` does not exist (no backend for its type, no
  /// driver, an index past the devices present). PyTorch: Tensor.to(device).
  Tensor to(Device d) const;
  Tensor to(DeviceType d) const { return to(Device(d)); }
  Tensor contiguous() const;
  Tensor clone() const;
  Tensor cpu() const { return to(Device(kCPU)); }

  // ---- methods mirroring the free functions (eager/ops.h) --------------------
  Tensor neg() const;
  Tensor abs() const;
  Tensor exp() const;
  Tensor log() const;
  Tensor sqrt() const;
  Tensor rsqrt() const;
  Tensor tanh() const;
  Tensor sigmoid() const;
  Tensor relu() const;
  Tensor add(const Tensor& o, Scalar alpha = 1) const;
  Tensor sub(const Tensor& o, Scalar alpha = 1) const;
  Tensor mul(const Tensor& o) const;
  Tensor div(const Tensor& o) const;
  Tensor pow(Scalar exponent) const;
  Tensor pow(const Tensor& exponent) const;
  Tensor matmul(const Tensor& o) const;
  Tensor maximum(const Tensor& o) const;
  Tensor minimum(const Tensor& o) const;
  Tensor clamp(std::optional<Scalar> min, std::optional<Scalar> max = std::nullopt) const;
  // Comparisons (torch.Tensor.eq, ...): bool tensors.
  Tensor eq(const Tensor& o) const;
  Tensor eq(Scalar o) const;
  Tensor ne(const Tensor& o) const;
  Tensor ne(Scalar o) const;
  Tensor lt(const Tensor& o) const;
  Tensor lt(Scalar o) const;
  Tensor le(const Tensor& o) const;
  Tensor le(Scalar o) const;
  Tensor gt(const Tensor& o) const;
  Tensor gt(Scalar o) const;
  Tensor ge(const Tensor& o) const;
  Tensor ge(Scalar o) const;
  /// torch.Tensor.where(condition, other) = torch.where(condition, self, other).
  Tensor where(const Tensor& condition, const Tensor& other) const;
  Tensor sum() const;
  Tensor sum(IntList dims, bool keepdim = false) const;
  Tensor mean() const;
  Tensor mean(IntList dims, bool keepdim = false) const;
  Tensor max() const;
  /// (values, indices) along `dim` (torch.Tensor.max(dim, keepdim)).
  std::tuple<Tensor, Tensor> max(int64_t dim, bool keepdim = false) const;
  Tensor argmax(int64_t dim, bool keepdim = false) const;
  Tensor argmin(int64_t dim, bool keepdim = false) const;
  Tensor amax(IntList dims = {}, bool keepdim = false) const;
  Tensor amin(IntList dims = {}, bool keepdim = false) const;
  Tensor logsumexp(IntList dims, bool keepdim = false) const;
  Tensor cumsum(int64_t dim) const;
  std::tuple<Tensor, Tensor> sort(int64_t dim = -1, bool descending = false) const;
  std::tuple<Tensor, Tensor> topk(int64_t k, int64_t dim = -1, bool largest = true, bool sorted = true) const;
  Tensor multinomial(int64_t num_samples, bool replacement = false) const;
  /// Variance with Bessel's `correction` over `dims` (all when empty);
  /// libtorch's `var(dims, unbiased, keepdim)` means the same (true = 1).
  Tensor var(IntList dims = {}, int64_t correction = 1, bool keepdim = false) const;
  Tensor softmax(int64_t dim) const;
  Tensor log_softmax(int64_t dim) const;

  Tensor view(IntList shape) const;
  Tensor reshape(IntList shape) const;
  Tensor transpose(int64_t dim0, int64_t dim1) const;
  Tensor t() const;
  Tensor permute(IntList dims) const;
  Tensor slice(int64_t dim, std::optional<int64_t> start, std::optional<int64_t> end,
               int64_t step = 1) const;
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  Tensor select(int64_t dim, int64_t index) const;
  Tensor unsqueeze(int64_t dim) const;
  Tensor squeeze() const;
  Tensor squeeze(int64_t dim) const;
  Tensor expand(IntList shape) const;
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
  Tensor masked_fill(const Tensor& mask, Scalar value) const;
  Tensor index_select(int64_t dim, const Tensor& index) const;
  Tensor gather(int64_t dim, const Tensor& index) const;
  Tensor tril(int64_t diagonal = 0) const;
  Tensor triu(int64_t diagonal = 0) const;
  std::vector<Tensor> split(int64_t split_size, int64_t dim = 0) const;
  std::vector<Tensor> chunk(int64_t chunks, int64_t dim = 0) const;
  /// select(0, index), as libtorch's `x[i]`. Throws IndexError.
  Tensor operator[](int64_t index) const { return select(0, index); }
  /// x[indices] / x[indices] = value with torch::indexing's Slice, None,
  /// Ellipsis, ints, bools and int64/bool tensors (eager/indexing.h; as
  /// libtorch's Tensor::index / index_put_).
  Tensor index(std::initializer_list<indexing::TensorIndex> indices) const;
  Tensor index(const std::vector<indexing::TensorIndex>& indices) const;
  Tensor& index_put_(std::initializer_list<indexing::TensorIndex> indices, const Tensor& value);
  Tensor& index_put_(std::initializer_list<indexing::TensorIndex> indices, Scalar value);
  Tensor& index_put_(const std::vector<indexing::TensorIndex>& indices, const Tensor& value);
  Tensor& index_put_(const std::vector<indexing::TensorIndex>& indices, Scalar value);
  // Reordering, tiling and accumulating scatters (dtr::flip, dtr::roll, ...).
  Tensor flip(IntList dims) const;
  Tensor roll(IntList shifts, IntList dims = {}) const;
  Tensor repeat(IntList repeats) const;
  Tensor repeat_interleave(int64_t repeats, std::optional<int64_t> dim = std::nullopt) const;
  Tensor repeat_interleave(const Tensor& repeats, std::optional<int64_t> dim = std::nullopt) const;
  Tensor scatter_add(int64_t dim, const Tensor& index, const Tensor& src) const;
  Tensor index_add(int64_t dim, const Tensor& index, const Tensor& source, Scalar alpha = 1) const;

  // Unary: trigonometric and erf (dtr::sin, dtr::cos, dtr::erf).
  Tensor sin() const;
  Tensor cos() const;
  Tensor erf() const;

  // In-place (PyTorch semantics: write through views, bump the version).
  Tensor& add_(const Tensor& o, Scalar alpha = 1);
  Tensor& add_(Scalar o);
  Tensor& sub_(const Tensor& o, Scalar alpha = 1);
  Tensor& sub_(Scalar o);
  Tensor& mul_(const Tensor& o);
  Tensor& mul_(Scalar o);
  Tensor& div_(const Tensor& o);
  Tensor& div_(Scalar o);
  Tensor& relu_();
  Tensor& neg_();
  Tensor& exp_();
  Tensor& sqrt_();
  Tensor& tanh_();
  Tensor& sigmoid_();
  Tensor& masked_fill_(const Tensor& mask, Scalar value);
  /// torch.Tensor.scatter_add_ / index_add_: dtr::scatter_add / dtr::index_add
  /// written into this tensor (any strides; not an expanded one: ValueError).
  Tensor& scatter_add_(int64_t dim, const Tensor& index, const Tensor& src);
  Tensor& index_add_(int64_t dim, const Tensor& index, const Tensor& source, Scalar alpha = 1);
  Tensor& fill_(Scalar value);
  Tensor& zero_();
  /// Copies `src` (broadcast, cast, and from another device) into this
  /// tensor's elements (torch.Tensor.copy_).
  Tensor& copy_(const Tensor& src);
  Tensor& clamp_(std::optional<Scalar> min, std::optional<Scalar> max);

  Tensor operator-() const;
  // Compound assignment is in place, as in libtorch (`a += b` is a.add_(b)).
  Tensor& operator+=(const Tensor& o) { return add_(o); }
  Tensor& operator+=(Scalar o) { return add_(o); }
  Tensor& operator-=(const Tensor& o) { return sub_(o); }
  Tensor& operator-=(Scalar o) { return sub_(o); }
  Tensor& operator*=(const Tensor& o) { return mul_(o); }
  Tensor& operator*=(Scalar o) { return mul_(o); }
  Tensor& operator/=(const Tensor& o) { return div_(o); }
  Tensor& operator/=(Scalar o) { return div_(o); }

 private:
  std::shared_ptr<TensorImpl> impl_;
};

Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator+(const Tensor& a, Scalar b);
Tensor operator-(const Tensor& a, Scalar b);
Tensor operator*(const Tensor& a, Scalar b);
Tensor operator/(const Tensor& a, Scalar b);
Tensor operator+(Scalar a, const Tensor& b);
Tensor operator-(Scalar a, const Tensor& b);
Tensor operator*(Scalar a, const Tensor& b);
Tensor operator/(Scalar a, const Tensor& b);
// Elementwise comparisons with bool results (libtorch's operator==, ...; eq, ne, lt, le, gt, ge).
Tensor operator==(const Tensor& a, const Tensor& b);
Tensor operator!=(const Tensor& a, const Tensor& b);
Tensor operator<(const Tensor& a, const Tensor& b);
Tensor operator<=(const Tensor& a, const Tensor& b);
Tensor operator>(const Tensor& a, const Tensor& b);
Tensor operator>=(const Tensor& a, const Tensor& b);
Tensor operator==(const Tensor& a, Scalar b);
Tensor operator!=(const Tensor& a, Scalar b);
Tensor operator<(const Tensor& a, Scalar b);
Tensor operator<=(const Tensor& a, Scalar b);
Tensor operator>(const Tensor& a, Scalar b);
Tensor operator>=(const Tensor& a, Scalar b);
Tensor operator==(Scalar a, const Tensor& b);
Tensor operator!=(Scalar a, const Tensor& b);
Tensor operator<(Scalar a, const Tensor& b);
Tensor operator<=(Scalar a, const Tensor& b);
Tensor operator>(Scalar a, const Tensor& b);
Tensor operator>=(Scalar a, const Tensor& b);

/// Prints the values as libtorch does: one row per line (2-D slices of a
/// larger tensor under "(i,j,.,.) = " headers), then "[ CPUFloatType{2,3} ]"
/// (device, dtype, shape); an undefined tensor prints "[ Tensor (undefined) ]".
std::ostream& operator<<(std::ostream& out, const Tensor& t);

/// C++ type of a dtype's elements (Half/BFloat16 for the 16-bit floats).
template <typename T>
constexpr DType dtype_of() {
  if constexpr (std::is_same_v<T, float>) return kFloat32;
  else if constexpr (std::is_same_v<T, double>) return kFloat64;
  else if constexpr (std::is_same_v<T, Half>) return kFloat16;
  else if constexpr (std::is_same_v<T, BFloat16>) return kBFloat16;
  else if constexpr (std::is_same_v<T, int64_t>) return kInt64;
  else if constexpr (std::is_same_v<T, int32_t>) return kInt32;
  else if constexpr (std::is_same_v<T, bool>) return kBool;
  else if constexpr (std::is_same_v<T, uint8_t>) return kUInt8;
  else static_assert(sizeof(T) == 0, "unsupported element type");
}

namespace detail {
/// Copies the tensor's elements, converted to `out_dtype`, into `out` (row-major).
void copy_elements_out(const Tensor& t, DType out_dtype, void* out);
}  // namespace detail

template <typename T>
std::vector<T> Tensor::to_vector() const {
  std::vector<T> out(static_cast<size_t>(numel()));
  if constexpr (std::is_same_v<T, bool>) {
    std::vector<uint8_t> tmp(static_cast<size_t>(out.size()));
    detail::copy_elements_out(*this, kBool, tmp.data());
    for (size_t i = 0; i < out.size(); ++i) out[i] = tmp[i] != 0;
  } else {
    detail::copy_elements_out(*this, dtype_of<T>(), out.data());
  }
  return out;
}

template <typename T>
T Tensor::item() const {
  DTR_CHECK(defined(), ValueError, "item: tensor is undefined");
  DTR_CHECK(numel() == 1, ValueError,
            "item: a Tensor with {} elements cannot be converted to a scalar (shape {})", numel(),
            shape_str(shape()));
  if constexpr (std::is_same_v<T, bool>) {
    return to_vector<bool>()[0];
  } else if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
    return to_vector<T>()[0];
  } else {
    // Read in the widest type, then convert, like Tensor.item() in PyTorch.
    if (is_floating(dtype())) return T(to_vector<double>()[0]);
    return T(to_vector<int64_t>()[0]);
  }
}

template <typename T>
T* Tensor::data_ptr() const {
  DTR_CHECK(dtype_of<T>() == dtype(), TypeError, "data_ptr: expected dtype {} but tensor is {}",
            dtype_name(dtype_of<T>()), dtype_name(dtype()));
  return static_cast<T*>(raw_data_ptr());
}

template <typename T>
const T* Tensor::const_data_ptr() const {
  DTR_CHECK(dtype_of<T>() == dtype(), TypeError,
            "const_data_ptr: expected dtype {} but tensor is {}", dtype_name(dtype_of<T>()),
            dtype_name(dtype()));
  return static_cast<const T*>(const_data_ptr());
}

}  // namespace dtr
