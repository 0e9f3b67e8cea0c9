// The C ABI of dtr (dtr/dtr_c.h): each function checks its arguments, looks
// its handles up in the handle table (handles.h) holding their use flags,
// calls the C++ API and maps any exception to a status code.
#include "dtr/dtr_c.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "dtr/dtr.h"
#include "eager/dispatch_state.h"
#include "eager/dlpack.h"
#include "handles.h"

namespace dtr::capi {
namespace {

// ---- objects behind handles --------------------------------------------------

struct TensorObject final : Object {
  explicit TensorObject(Tensor x) : t(std::move(x)) {}
  Tensor t;
};

struct AttrsObject final : Object {
  std::vector<std::pair<std::string, AttrValue>> items;
};

struct ModuleObject final : Object {
  explicit ModuleObject(std::shared_ptr<nn::UnaryModule> x) : m(std::move(x)) {}
  std::shared_ptr<nn::UnaryModule> m;
};

struct OptimizerObject final : Object {
  explicit OptimizerObject(std::unique_ptr<optim::Optimizer> x) : o(std::move(x)) {}
  std::unique_ptr<optim::Optimizer> o;
};

/// Whether a thread still runs: its scopes may be freed from any thread once
/// it has exited.
struct ThreadScopes {
  ThreadScopes() : alive(std::make_shared<std::atomic<bool>>(true)) {}
  ~ThreadScopes() { alive->store(false, std::memory_order_release); }
  std::shared_ptr<std::atomic<bool>> alive;
  std::vector<uint64_t> open;  // innermost last
};
thread_local ThreadScopes t_scopes;

struct ScopeObject final : Object {
  std::thread::id owner;
  std::shared_ptr<std::atomic<bool>> owner_alive;
  DispatchState previous;
};

// ---- argument conversion -------------------------------------------------------

/// The int a C caller passed as an enum. C allows any int there; in C++ a
/// value outside the enumerators' range may not be read as the enum type, so
/// its bytes are read as an int.
template <typename E>
int enum_value(const E& e) {
  static_assert(sizeof(E) == sizeof(int));
  int v;
  std::memcpy(&v, &e, sizeof v);
  return v;
}

DType to_dtype(const dtr_dtype& dtype) {  // by reference: no enum load (enum_value)
  const int d = enum_value(dtype);
  static_assert(int(DTR_FLOAT32) == int(DType::kFloat32) && int(DTR_UINT8) == int(DType::kUInt8) &&
                kNumDTypes == 8);
  if (d < 0 || d >= kNumDTypes) {
    throw ApiError(DTR_ERR_INVALID_ARGUMENT, fmt::format("unknown dtr_dtype {}", d));
  }
  return DType(d);
}

Device to_device(const dtr_device_type& device_type, int index) {
  const int type = enum_value(device_type);
  if (type != DTR_DEVICE_CPU && type != DTR_DEVICE_CUDA) {
    throw ApiError(DTR_ERR_INVALID_ARGUMENT, fmt::format("unknown dtr_device_type {}", type));
  }
  DTR_CHECK(index >= 0, ValueError, "device index must be >= 0, got {}", index);
  return Device(type == DTR_DEVICE_CPU ? kCPU : kCUDA, index);
}

/// A non-empty C string (INVALID_ARGUMENT naming `what` when null).
std::string_view to_name(const char* s, const char* what) {
  require(s != nullptr, what);
  return s;
}

template <typename T>
void require_array(const T* p, size_t n, const char* what) {
  require(p != nullptr || n == 0, what);
}

uint64_t new_tensor(Tensor t) {
  DTR_INTERNAL_ASSERT(t.defined(), "C API: a handle to an undefined tensor");
  return HandleTable::instance().insert(Kind::kTensor, std::make_shared<TensorObject>(std::move(t)));
}

uint64_t new_module(std::shared_ptr<nn::UnaryModule> m) {
  return HandleTable::instance().insert(Kind::kModule, std::make_shared<ModuleObject>(std::move(m)));
}
template <typename M>
uint64_t new_module(const nn::ModuleHolder<M>& holder) {
  return new_module(std::shared_ptr<nn::UnaryModule>(holder.ptr()));
}

const Tensor& tensor(dtr_tensor h, Access access, Use& holder) {
  return use<TensorObject>(h, Kind::kTensor, access, holder).t;
}

/// Frees handle `h` of `kind` (DTR_NULL is ignored), destroying its object
/// outside the table's lock. A handle in use by another call is BUSY.
template <typename T>
void free_handle(uint64_t h, Kind kind) {
  if (h == DTR_NULL) return;
  {
    Use holder;
    use<T>(h, kind, Access::kWrite, holder);  // INVALID_HANDLE, or BUSY while another call is inside
    holder.release();
  }
  std::shared_ptr<Object> obj = HandleTable::instance().remove(h, kind);
  if (!obj) throw_invalid_handle(h, kind);  // freed by another thread meanwhile
}

/// Holds the flags of a list of tensor handles, each distinct handle once
/// (the strongest access any occurrence needs), so `mul(x, x)` or
/// `add_(x, x)` does not conflict with itself.
class TensorList {
 public:
  TensorList(const dtr_tensor* handles, size_t n, bool first_written) {
    require_array(handles, n, "null tensor array with a non-zero length");
    holders_ = std::make_unique<Use[]>(n);
    tensors_.reserve(n);
    for (size_t i = 0; i < n; ++i) {
      size_t first = i;
      for (size_t j = 0; j < i; ++j)
        if (handles[j] == handles[i]) {
          first = j;
          break;
        }
      if (first != i) {
        tensors_.push_back(tensors_[first]);
        continue;
      }
      Access access = Access::kRead;
      if (first_written && handles[i] == handles[0]) access = Access::kWrite;
      tensors_.push_back(tensor(handles[i], access, holders_[i]));
    }
  }
  std::span<const Tensor> tensors() const { return tensors_; }

 private:
  std::unique_ptr<Use[]> holders_;
  std::vector<Tensor> tensors_;
};

/// Writes new handles to `ts` into out[0..capacity) and their count into
/// *count (may be null). VALUE when they do not fit.
/// With `count_only`, out null and capacity 0 only count.
void write_tensors(const std::vector<Tensor>& ts, dtr_tensor* out, size_t capacity, size_t* count,
                   const char* what, bool count_only = false) {
  require_array(out, capacity, "null output array with a non-zero capacity");
  if (ts.size() > capacity && !(count_only && out == nullptr && capacity == 0 && count != nullptr)) {
    throw ValueError(fmt::format("{}: {} results do not fit in an array of {}", what, ts.size(), capacity));
  }
  if (count != nullptr) *count = ts.size();
  if (capacity == 0) return;
  size_t i = 0;
  try {
    for (; i < ts.size(); ++i) out[i] = new_tensor(ts[i]);
  } catch (...) {
    for (size_t j = 0; j < i; ++j) HandleTable::instance().remove(out[j], Kind::kTensor);
    throw;
  }
}

/// Opens a thread-local scope that restores `previous` when ended.
dtr_scope open_scope(const DispatchState& previous) {
  auto s = std::make_shared<ScopeObject>();
  s->owner = std::this_thread::get_id();
  s->owner_alive = t_scopes.alive;
  s->previous = previous;
  const uint64_t h = HandleTable::instance().insert(Kind::kScope, std::move(s));
  try {
    t_scopes.open.push_back(h);
  } catch (...) {
    HandleTable::instance().remove(h, Kind::kScope);
    throw;
  }
  return h;
}

const char* kStatusNames[] = {
    "DTR_OK",
    "DTR_ERR_VALUE",
    "DTR_ERR_TYPE",
    "DTR_ERR_INDEX",
    "DTR_ERR_NOT_IMPLEMENTED",
    "DTR_ERR_OUT_OF_MEMORY",
    "DTR_ERR_DEVICE",
    "DTR_ERR_INVALID_HANDLE",
    "DTR_ERR_INVALID_ARGUMENT",
    "DTR_ERR_WRONG_THREAD",
    "DTR_ERR_BUSY",
    "DTR_ERR_INTERNAL",
    "DTR_ERR_RUNTIME",
};

}  // namespace
}  // namespace dtr::capi

using namespace dtr;        // NOLINT: this file is the C layer over all of it
using namespace dtr::capi;  // NOLINT

// ---- version, errors, handles ------------------------------------------------

#define DTR_STR2(x) #x
#define DTR_STR(x) DTR_STR2(x)

/// A query of tensor `t` (read access) whose result `f(tensor)` goes to *out.
template <typename T, typename F>
dtr_status tensor_query(dtr_tensor t, T* out, F&& f) {
  return guarded([&] {
    require(out != nullptr, "null out-pointer");
    Use u;
    *out = f(tensor(t, Access::kRead, u));
  });
}

extern "C" {

dtr_status dtr_version(int* major, int* minor, int* patch) {
  return guarded([&] {
    require(major != nullptr && minor != nullptr && patch != nullptr, "null version out-pointer");
    *major = DTR_C_VERSION_MAJOR;
    *minor = DTR_C_VERSION_MINOR;
    *patch = DTR_C_VERSION_PATCH;
  });
}

const char* dtr_version_string(void) {
  return DTR_STR(DTR_C_VERSION_MAJOR) "." DTR_STR(DTR_C_VERSION_MINOR) "." DTR_STR(DTR_C_VERSION_PATCH);
}

const char* dtr_status_name(dtr_status status) {
  const int i = enum_value(status);
  if (i < 0 || i >= int(std::size(kStatusNames))) return "unknown status";
  return kStatusNames[i];
}

dtr_status dtr_live_handles(size_t* count) {
  return guarded([&] {
    require(count != nullptr, "null count");
    *count = HandleTable::instance().live();
  });
}

// ---- tensors ------------------------------------------------------------------

dtr_status dtr_tensor_from_data(const void* data, size_t nbytes, dtr_dtype dtype, const int64_t* shape,
                                size_t ndim, dtr_tensor* out) {
  return guarded([&] {
    require(out != nullptr, "null out-pointer");
    require_array(shape, ndim, "null shape with a non-zero ndim");
    const DType dt = to_dtype(dtype);
    int64_t numel = 1;
    for (size_t i = 0; i < ndim; ++i) {
      DTR_CHECK(shape[i] >= 0, ValueError, "dtr_tensor_from_data: negative size {} in dimension {}",
                shape[i], i);
      DTR_CHECK(!__builtin_mul_overflow(numel, shape[i], &numel), ValueError,
                "dtr_tensor_from_data: the shape's element count overflows int64");
    }
    int64_t expected = 0;
    DTR_CHECK(!__builtin_mul_overflow(numel, itemsize(dt), &expected) && uint64_t(expected) == nbytes,
              ValueError, "dtr_tensor_from_data: {} elements of {} need {} bytes, got {}", numel,
              dtype_name(dt), expected, nbytes);
    require(data != nullptr || numel == 0, "null data with a non-zero size");
    const Shape s(shape, shape + ndim);
    *out = new_tensor(detail::from_host(data, numel, dt, s, TensorOptions(dt)));
  });
}

dtr_status dtr_tensor_to_data(dtr_tensor t, void* data, size_t nbytes) {
  return guarded([&] {
    Use u;
    const Tensor& x = tensor(t, Access::kRead, u);
    const int64_t need = x.nbytes();
    DTR_CHECK(uint64_t(need) == nbytes, ValueError,
              "dtr_tensor_to_data: the tensor ({} elements of {}) has {} bytes, the buffer {}",
              x.numel(), dtype_name(x.dtype()), need, nbytes);
    require(data != nullptr || nbytes == 0, "null data with a non-zero size");
    if (nbytes != 0) detail::copy_elements_out(x, x.dtype(), data);
  });
}

dtr_status dtr_tensor_free(dtr_tensor t) {
  return guarded([&] { free_handle<TensorObject>(t, Kind::kTensor); });
}

dtr_status dtr_tensor_retain(dtr_tensor t, dtr_tensor* out) {
  return tensor_query(t, out, [](const Tensor& x) { return new_tensor(x); });
}

dtr_status dtr_tensor_ndim(dtr_tensor t, size_t* ndim) {
  return tensor_query(t, ndim, [](const Tensor& x) { return size_t(x.dim()); });
}

dtr_status dtr_tensor_shape(dtr_tensor t, int64_t* shape, size_t capacity, size_t* ndim) {
  return guarded([&] {
    require_array(shape, capacity, "null shape array with a non-zero capacity");
    Use u;
    const Shape& s = tensor(t, Access::kRead, u).shape();
    DTR_CHECK(s.size() <= capacity || (shape == nullptr && ndim != nullptr), ValueError,
              "dtr_tensor_shape: the tensor has {} dimensions, the array room for {}", s.size(),
              capacity);
    if (ndim != nullptr) *ndim = s.size();
    if (shape != nullptr) std::copy(s.begin(), s.end(), shape);
  });
}

dtr_status dtr_tensor_numel(dtr_tensor t, int64_t* numel) {
  return tensor_query(t, numel, [](const Tensor& x) { return x.numel(); });
}

dtr_status dtr_tensor_dtype(dtr_tensor t, dtr_dtype* dtype) {
  return tensor_query(t, dtype, [](const Tensor& x) { return dtr_dtype(int(x.dtype())); });
}

dtr_status dtr_tensor_device(dtr_tensor t, dtr_device_type* type, int* index) {
  return guarded([&] {
    require(type != nullptr && index != nullptr, "null out-pointer");
    Use u;
    const Device d = tensor(t, Access::kRead, u).device();
    DTR_CHECK(d.type == kCPU || d.type == kCUDA, NotImplementedError,
              "dtr_tensor_device: device {} has no dtr_device_type", d.str());
    *type = d.type == kCPU ? DTR_DEVICE_CPU : DTR_DEVICE_CUDA;
    *index = d.index;
  });
}

dtr_status dtr_tensor_item_double(dtr_tensor t, double* value) {
  return tensor_query(t, value, [](const Tensor& x) { return x.item<double>(); });
}

dtr_status dtr_tensor_item_int64(dtr_tensor t, int64_t* value) {
  return tensor_query(t, value, [](const Tensor& x) {
    if (!is_floating(x.dtype())) return x.item<int64_t>();
    // A floating value converts only when int64 holds it (c10's
    // checked_convert); the plain conversion is undefined behaviour.
    const double v = x.item<double>();
    DTR_CHECK(v >= -9223372036854775808.0 && v < 9223372036854775808.0, ValueError,
              "item: value {} cannot be converted to int64 without overflow", v);
    return int64_t(v);
  });
}

dtr_status dtr_tensor_to_device(dtr_tensor t, dtr_device_type type, int index, dtr_tensor* out) {
  return guarded([&] {
    require(out != nullptr, "null out-pointer");
    const Device d = to_device(type, index);
    Use u;
    *out = new_tensor(tensor(t, Access::kRead, u).to(d));
  });
}

dtr_status dtr_tensor_str(dtr_tensor t, const char** text) {
  return guarded([&] {
    require(text != nullptr, "null out-pointer");
    static thread_local std::string buffer;
    Use u;
    buffer = tensor(t, Access::kRead, u).str();
    *text = buffer.c_str();
  });
}

dtr_status dtr_tensor_to_dlpack(dtr_tensor t, int read_only, struct DLManagedTensor** out) {
  return guarded([&] {
    require(out != nullptr, "null out-pointer");
    Use u;
    *out = to_dlpack(tensor(t, Access::kRead, u),
                     read_only ? DLPackAccess::kReadOnly : DLPackAccess::kReadWrite);
  });
}

dtr_status dtr_tensor_from_dlpack(struct DLManagedTensor* m, dtr_tensor* out) {
  return guarded([&] {
    require(out != nullptr, "null out-pointer");
    require(m != nullptr, "null DLManagedTensor");
    Tensor t = from_dlpack(m);  // owns m from here on
    *out = new_tensor(std::move(t));
  });
}

// ---- ops by name -----------------------------------------------------------------

dtr_status dtr_attrs_new(dtr_attrs* out) {
  return guarded([&] {
    require(out != nullptr, "null out-pointer");
    *out = HandleTable::instance().insert(Kind::kAttrs, std::make_shared<AttrsObject>());
  });
}

dtr_status dtr_attrs_free(dtr_attrs a) {
  return guarded([&] { free_handle<AttrsObject>(a, Kind::kAttrs); });
}

dtr_status dtr_attrs_clear(dtr_attrs a) {
  return guarded([&] {
    Use u;
    use<AttrsObject>(a, Kind::kAttrs, Access::kWrite, u).items.clear();
  });
}

namespace {
void set_attr(dtr_attrs a, const char* name, AttrValue v) {
  const std::string_view key = to_name(name, "null attribute name");
  (void)AttrKey(key);  // ValueError for a name longer than any parameter's
  Use u;
  auto& items = use<AttrsObject>(a, Kind::kAttrs, Access::kWrite, u).items;
  for (auto& [k, val] : items)
    if (k == key) {
      val = std::move(v);
      return;
    }
  items.emplace_back(std::string(key), std::move(v));
}
}  // namespace

dtr_status dtr_attrs_set_int(dtr_attrs a, const char* name, int64_t value) {
  return guarded([&] { set_attr(a, name, value); });
}
dtr_status dtr_attrs_set_float(dtr_attrs a, const char* name, double value) {
  return guarded([&] { set_attr(a, name, value); });
}
dtr_status dtr_attrs_set_bool(dtr_attrs a, const char* name, int value) {
  return guarded([&] { set_attr(a, name, value != 0); });
}
dtr_status dtr_attrs_set_ints(dtr_attrs a, const char* name, const int64_t* values, size_t n) {
  return guarded([&] {
    require_array(values, n, "null values with a non-zero length");
    set_attr(a, name, Shape(values, values + n));
  });
}
dtr_status dtr_attrs_set_dtype(dtr_attrs a, const char* name, dtr_dtype value) {
  return guarded([&] { set_attr(a, name, to_dtype(value)); });
}

dtr_status dtr_op_call(const char* name, const dtr_tensor* inputs, size_t n_inputs, dtr_attrs attrs,
                       dtr_tensor* outputs, size_t capacity, size_t* n_outputs) {
  return guarded([&] {
    const OpDef& def = op(to_name(name, "null op name"));  // ValueError for an unknown name
    require_array(outputs, capacity, "null output array with a non-zero capacity");
    def.check_input_count(n_inputs);  // dispatch checks too; before any handle is looked up
    Attrs checked;
    if (attrs != DTR_NULL) {
      Use u;
      checked = def.make_attrs(use<AttrsObject>(attrs, Kind::kAttrs, Access::kRead, u).items);
    } else {
      checked = def.make_attrs({});
    }
    const TensorList in(inputs, n_inputs, def.flags.inplace);
    std::vector<Tensor> results = dispatch(def, in.tensors(), std::move(checked));
    write_tensors(results, outputs, capacity, n_outputs, def.name.c_str());
  });
}

dtr_status dtr_op_count(size_t* count) {
  return guarded([&] {
    require(count != nullptr, "null out-pointer");
    ensure_ops_registered();
    *count = OpRegistry::instance().ops().size();
  });
}

dtr_status dtr_op_name(size_t i, const char** name) {
  return guarded([&] {
    require(name != nullptr, "null out-pointer");
    ensure_ops_registered();
    const auto& ops = OpRegistry::instance().ops();
    DTR_CHECK(i < ops.size(), IndexError, "dtr_op_name: index {} is out of range for {} ops", i,
              ops.size());
    *name = ops[i]->name.c_str();
  });
}

dtr_status dtr_op_params(const char* name, const char** params, int* num_inputs) {
  return guarded([&] {
    require(params != nullptr, "null out-pointer");
    const OpDef& def = op(to_name(name, "null op name"));
    static thread_local std::string buffer;
    buffer = def.params_str();
    *params = buffer.c_str();
    if (num_inputs != nullptr) {
      *num_inputs = def.min_inputs >= 0 && def.min_inputs == def.max_inputs ? def.min_inputs : -1;
    }
  });
}

// ---- autograd --------------------------------------------------------------------

dtr_status dtr_tensor_set_requires_grad(dtr_tensor t, int requires_grad) {
  return guarded([&] {
    Use u;
    Tensor x = tensor(t, Access::kWrite, u);
    x.requires_grad_(requires_grad != 0);
  });
}

dtr_status dtr_tensor_requires_grad(dtr_tensor t, int* requires_grad) {
  return tensor_query(t, requires_grad, [](const Tensor& x) { return x.requires_grad() ? 1 : 0; });
}

dtr_status dtr_tensor_backward(dtr_tensor t, dtr_tensor gradient, int retain_graph) {
  return guarded([&] {
    Use u, ug;
    const Tensor& x = tensor(t, Access::kWrite, u);
    Tensor g;
    if (gradient != DTR_NULL) {
      require(gradient != t, "the gradient of backward must be another tensor handle");
      g = tensor(gradient, Access::kRead, ug);
    }
    x.backward(g, retain_graph != 0);
  });
}

dtr_status dtr_tensor_grad(dtr_tensor t, dtr_tensor* grad) {
  return guarded([&] {
    require(grad != nullptr, "null out-pointer");
    Use u;
    const Tensor g = tensor(t, Access::kRead, u).grad();
    *grad = g.defined() ? new_tensor(g) : DTR_NULL;
  });
}

dtr_status dtr_tensor_zero_grad(dtr_tensor t) {
  return guarded([&] {
    Use u;
    Tensor x = tensor(t, Access::kWrite, u);
    x.set_grad(Tensor());
  });
}

dtr_status dtr_tensor_detach(dtr_tensor t, dtr_tensor* out) {
  return tensor_query(t, out, [](const Tensor& x) { return new_tensor(x.detach()); });
}

dtr_status dtr_grad_enabled(int* enabled) {
  return guarded([&] {
    require(enabled != nullptr, "null out-pointer");
    *enabled = is_grad_enabled() ? 1 : 0;
  });
}

dtr_status dtr_no_grad_begin(dtr_scope* out) {
  return guarded([&] {
    require(out != nullptr, "null out-pointer");
    const DispatchState previous = DispatchState::current();
    *out = open_scope(previous);
    set_grad_enabled(false);
  });
}

dtr_status dtr_autocast_begin(dtr_dtype dtype, dtr_scope* out) {
  return guarded([&] {
    require(out != nullptr, "null out-pointer");
    const DType dt = to_dtype(dtype);
    DTR_CHECK(dt == kBFloat16 || dt == kFloat16, ValueError,
              "dtr_autocast_begin: dtype must be bfloat16 or float16, got {}", dtype_name(dt));
    const DispatchState previous = DispatchState::current();
    *out = open_scope(previous);
    set_autocast_state(AutocastState{true, dt});
  });
}

dtr_status dtr_scope_end(dtr_scope s) {
  return guarded([&] {
    Use u;
    auto& scope = use<ScopeObject>(s, Kind::kScope, Access::kWrite, u);
    if (scope.owner_alive->load(std::memory_order_acquire)) {
      if (scope.owner != std::this_thread::get_id()) {
        throw ApiError(DTR_ERR_WRONG_THREAD,
                       "a scope must be ended on the thread that opened it (no-grad and autocast "
                       "are thread-local)");
      }
      auto& open = t_scopes.open;
      if (open.empty() || open.back() != s) {
        throw ApiError(DTR_ERR_INVALID_ARGUMENT,
                       fmt::format("scopes end innermost first: {} scope(s) opened after this one "
                                   "are still open",
                                   open.end() - std::find(open.begin(), open.end(), s) - 1));
      }
      set_dispatch_state(scope.previous);
      open.pop_back();
    }
    // Its thread has exited (nothing to restore) or it has just been closed.
    u.release();
    HandleTable::instance().remove(s, Kind::kScope);
  });
}

// ---- modules ------------------------------------------------------------------------

dtr_status dtr_nn_linear(int64_t in_features, int64_t out_features, int bias, dtr_module* out) {
  return guarded([&] {
    require(out != nullptr, "null out-pointer");
    *out = new_module(nn::Linear(in_features, out_features, bias != 0));
  });
}

dtr_status dtr_nn_conv2d(int64_t in_channels, int64_t out_channels, int64_t kernel_size, int64_t stride,
                         int64_t padding, int64_t groups, int bias, dtr_module* out) {
  return guarded([&] {
    require(out != nullptr, "null out-pointer");
    *out = new_module(nn::Conv2d(in_channels, out_channels, kernel_size, stride,
                                                   padding, 1, groups, bias != 0));
  });
}

dtr_status dtr_nn_batch_norm2d(int64_t num_features, double eps, double momentum, dtr_module* out) {
  return guarded([&] {
    require(out != nullptr, "null out-pointer");
    std::optional<double> m;
    if (momentum >= 0) m = momentum;
    *out = new_module(nn::BatchNorm2d(num_features, eps, m));
  });
}

dtr_status dtr_nn_layer_norm(const int64_t* normalized_shape, size_t ndim, double eps,
                             int elementwise_affine, dtr_module* out) {
  return guarded([&] {
    require(out != nullptr, "null out-pointer");
    require_array(normalized_shape, ndim, "null shape with a non-zero ndim");
    *out = new_module(nn::LayerNorm(
        std::vector<int64_t>(normalized_shape, normalized_shape + ndim), eps, elementwise_affine != 0));
  });
}

dtr_status dtr_nn_embedding(int64_t num_embeddings, int64_t embedding_dim, dtr_module* out) {
  return guarded([&] {
    require(out != nullptr, "null out-pointer");
    *out = new_module(nn::Embedding(num_embeddings, embedding_dim));
  });
}

dtr_status dtr_nn_dropout(double p, dtr_module* out) {
  return guarded([&] {
    require(out != nullptr, "null out-pointer");
    *out = new_module(nn::Dropout(p));
  });
}

dtr_status dtr_nn_relu(dtr_module* out) {
  return guarded([&] {
    require(out != nullptr, "null out-pointer");
    *out = new_module(nn::ReLU());
  });
}

dtr_status dtr_nn_gelu(const char* approximate, dtr_module* out) {
  return guarded([&] {
    require(out != nullptr, "null out-pointer");
    *out = new_module(nn::GELU(std::string(to_name(approximate, "null approximate"))));
  });
}

dtr_status dtr_nn_causal_self_attention(int64_t n_embd, int64_t n_head, double dropout, int bias,
                                        dtr_module* out) {
  return guarded([&] {
    require(out != nullptr, "null out-pointer");
    *out = new_module(nn::CausalSelfAttention(n_embd, n_head, dropout, bias != 0));
  });
}

dtr_status dtr_nn_sequential(dtr_module* out) {
  return guarded([&] {
    require(out != nullptr, "null out-pointer");
    *out = new_module(nn::Sequential());
  });
}

namespace {
/// Whether `target` is `m` or one of its descendants.
bool reaches(const nn::Module& m, const nn::Module* target) {
  if (&m == target) return true;
  for (const auto& [name, child] : m.named_children())
    if (reaches(*child, target)) return true;
  return false;
}
}  // namespace

dtr_status dtr_nn_sequential_append(dtr_module seq, dtr_module m) {
  return guarded([&] {
    require(seq != m, "a Sequential cannot contain itself");
    Use us, um;
    auto& s = use<ModuleObject>(seq, Kind::kModule, Access::kWrite, us);
    auto& child = use<ModuleObject>(m, Kind::kModule, Access::kRead, um);
    auto* sequential = dynamic_cast<nn::SequentialImpl*>(s.m.get());
    DTR_CHECK(sequential != nullptr, TypeError,
              "dtr_nn_sequential_append: the first module is a {}, not a Sequential", s.m->name());
    DTR_CHECK(!reaches(*child.m, sequential), ValueError,
              "dtr_nn_sequential_append: the {} contains this Sequential (a cycle)", child.m->name());
    sequential->push_back(child.m);
  });
}

dtr_status dtr_module_free(dtr_module m) {
  return guarded([&] { free_handle<ModuleObject>(m, Kind::kModule); });
}

dtr_status dtr_module_forward(dtr_module m, dtr_tensor x, dtr_tensor* out) {
  return guarded([&] {
    require(out != nullptr, "null out-pointer");
    Use um, ux;
    auto& mod = use<ModuleObject>(m, Kind::kModule, Access::kWrite, um);
    const Tensor& input = tensor(x, Access::kRead, ux);
    *out = new_tensor(mod.m->forward(input));
  });
}

dtr_status dtr_module_train(dtr_module m, int on) {
  return guarded([&] {
    Use u;
    use<ModuleObject>(m, Kind::kModule, Access::kWrite, u).m->train(on != 0);
  });
}

dtr_status dtr_module_parameters(dtr_module m, dtr_tensor* params, size_t capacity, size_t* count) {
  return guarded([&] {
    Use u;
    const auto& mod = use<ModuleObject>(m, Kind::kModule, Access::kRead, u);
    write_tensors(mod.m->parameters(), params, capacity, count, "dtr_module_parameters", true);
  });
}

dtr_status dtr_module_zero_grad(dtr_module m) {
  return guarded([&] {
    Use u;
    use<ModuleObject>(m, Kind::kModule, Access::kWrite, u).m->zero_grad();
  });
}

dtr_status dtr_module_save(dtr_module m, const char* path) {
  return guarded([&] {
    const std::string p(to_name(path, "null path"));
    Use u;
    save(*use<ModuleObject>(m, Kind::kModule, Access::kRead, u).m, p);
  });
}

dtr_status dtr_module_load(dtr_module m, const char* path) {
  return guarded([&] {
    const std::string p(to_name(path, "null path"));
    Use u;
    load(*use<ModuleObject>(m, Kind::kModule, Access::kWrite, u).m, p);
  });
}

// ---- optimizers ------------------------------------------------------------------------

namespace {
dtr_optimizer new_optimizer(std::unique_ptr<optim::Optimizer> o) {
  return HandleTable::instance().insert(Kind::kOptimizer, std::make_shared<OptimizerObject>(std::move(o)));
}
optim::Optimizer& optimizer(dtr_optimizer o, Access access, Use& u) {
  return *use<OptimizerObject>(o, Kind::kOptimizer, access, u).o;
}
}  // namespace

dtr_status dtr_optim_sgd(const dtr_tensor* params, size_t n, double lr, double momentum,
                         double weight_decay, int nesterov, dtr_optimizer* out) {
  return guarded([&] {
    require(out != nullptr, "null out-pointer");
    const TensorList ps(params, n, false);
    auto opts = optim::SGDOptions(lr).momentum(momentum).weight_decay(weight_decay).nesterov(nesterov != 0);
    *out = new_optimizer(std::make_unique<optim::SGD>(
        std::vector<Tensor>(ps.tensors().begin(), ps.tensors().end()), opts));
  });
}

dtr_status dtr_optim_adamw(const dtr_tensor* params, size_t n, double lr, double beta1, double beta2,
                           double eps, double weight_decay, dtr_optimizer* out) {
  return guarded([&] {
    require(out != nullptr, "null out-pointer");
    const TensorList ps(params, n, false);
    auto opts = optim::AdamWOptions(lr).betas(std::make_tuple(beta1, beta2)).eps(eps).weight_decay(weight_decay);
    *out = new_optimizer(std::make_unique<optim::AdamW>(
        std::vector<Tensor>(ps.tensors().begin(), ps.tensors().end()), opts));
  });
}

dtr_status dtr_optimizer_free(dtr_optimizer o) {
  return guarded([&] { free_handle<OptimizerObject>(o, Kind::kOptimizer); });
}

dtr_status dtr_optimizer_step(dtr_optimizer o) {
  return guarded([&] {
    Use u;
    optimizer(o, Access::kWrite, u).step();
  });
}

dtr_status dtr_optimizer_zero_grad(dtr_optimizer o) {
  return guarded([&] {
    Use u;
    optimizer(o, Access::kWrite, u).zero_grad();
  });
}

dtr_status dtr_optimizer_set_lr(dtr_optimizer o, double lr) {
  return guarded([&] {
    DTR_CHECK(lr >= 0, ValueError, "dtr_optimizer_set_lr: invalid learning rate {}", lr);
    Use u;
    optimizer(o, Access::kWrite, u).set_lr(lr);
  });
}

dtr_status dtr_optimizer_lr(dtr_optimizer o, double* lr) {
  return guarded([&] {
    require(lr != nullptr, "null out-pointer");
    Use u;
    *lr = optimizer(o, Access::kRead, u).lr();
  });
}

// ---- budget, statistics, options, seed ----------------------------------------------

dtr_status dtr_set_memory_budget(dtr_device_type type, int index, int64_t bytes) {
  return guarded([&] {
    const Device d = to_device(type, index);
    remat::set_memory_budget(d, bytes < 0 ? std::nullopt : std::optional<int64_t>(bytes));
  });
}

dtr_status dtr_memory_budget(dtr_device_type type, int index, int64_t* bytes) {
  return guarded([&] {
    require(bytes != nullptr, "null out-pointer");
    const Device d = to_device(type, index);
    *bytes = remat::memory_budget(d).value_or(-1);
  });
}

dtr_status dtr_stats(dtr_device_type type, int index, double* values, size_t n) {
  return guarded([&] {
    require_array(values, n, "null values with a non-zero length");
    const remat::Stats s = remat::stats(to_device(type, index));
    const double all[] = {
        double(s.budget_bytes),       double(s.resident_bytes),
        double(s.peak_bytes),         double(s.evictions),
        double(s.eager_frees),        double(s.rematerializations),
        double(s.recomputed_ops),     s.recomputed_flops,
        s.recompute_seconds_estimated, s.recompute_seconds_measured,
        double(s.metadata_nodes),     double(s.live_storages),
        double(s.swap_outs),          double(s.swap_ins),
        double(s.swapped_bytes),      double(s.swap_bytes_out),
        double(s.swap_bytes_in),      s.swap_seconds_estimated,
        double(s.host_tier_bytes),
    };
    static_assert(std::size(all) == DTR_STAT_COUNT);
    std::copy(all, all + std::min<size_t>(n, DTR_STAT_COUNT), values);
  });
}

dtr_status dtr_reset_stats(void) {
  return guarded([] { remat::reset_stats(); });
}

dtr_status dtr_set_option(const char* name, const char* value) {
  return guarded([&] {
    const std::string_view n = to_name(name, "null option name");
    const std::string_view v = to_name(value, "null option value");
    // The C++ path (core/options.h): parsed, applied to the running library,
    // then stored; a throw leaves both as they were.
    set_option(global_options(), n, v);
  });
}

dtr_status dtr_manual_seed(uint64_t seed) {
  return guarded([&] { manual_seed(seed); });
}

}  // extern "C"
