// Factory functions: empty, zeros, ones, full, arange, rand, randn, randint,
// the *_like forms, from_vector/from_blob (torch.* of the same names).
// Creation ops have no inputs: their lineage node replays them from nothing
// (random ones from the recorded Philox (seed, offset)), so a freshly made
// tensor is evictable like any activation.
#include <cerrno>
#include <cmath>
#include <cstring>
#include <functional>

#include <sys/mman.h>
#include <unistd.h>

#include "core/backend.h"
#include "core/element.h"
#include "core/shape_check.h"
#include "eager/ops/registration.h"
#include "remat/runtime.h"

namespace dtr {
namespace ops {
namespace {

void infer_factory(std::span<const TensorMeta>, const Attrs& a, std::vector<TensorMeta>& out) {
  const Shape& shape = a.ints("shape");
  for (int64_t s : shape) {
    DTR_CHECK(s >= 0, ValueError, "factory: negative dimension in shape {}", shape_str(shape));
  }
  out.push_back(out_meta(shape, a.dtype("dtype"), Device(DeviceType(a.i("device_type")), int(a.i("device_index")))));
}

}  // namespace

void register_creation_ops() {
  auto& R = OpRegistry::instance();
  // Every factory: shape, dtype and device (factory_attrs), plus its own.
  // Philox draws cost far more than a flop per element: Note [scores].
  struct Row {
    const char* name;
    std::vector<ParamSpec> params;
    double scalar_flops_per_element = 0;
  };
  const Row rows[] = {
      // fill_value_attrs: the value as a double, and as an int64 for an integer or bool.
      {"full", {param::f("value"), param::optional(param::i("int_value"))}},
      // Integer ranges also carry exact int64 start and step.
      {"arange", {param::f("start"), param::f("step"), param::optional(param::i("int_start")),
                  param::optional(param::i("int_step"))}},
      {"rand", {}, 600},
      {"randn", {}, 2200},
      {"randint", {param::i("low"), param::i("high")}, 700},
  };
  for (const auto& [name, own, scalar_flops] : rows) {
    OpDef d{.name = name, .infer = infer_factory};
    d.params = {param::ints("shape"), param::dtype("dtype"), param::i("device_type"),
                param::i("device_index")};
    d.params.insert(d.params.end(), own.begin(), own.end());
    d.scalar_flops_per_element = scalar_flops;
    d.save = kSaveNone;
    d.flags.random = std::string_view(name).starts_with("rand");
    d.inputs(0);
    R.define(std::move(d));
  }
}

}  // namespace ops

namespace {

Attrs factory_attrs(IntList shape, const TensorOptions& o) {
  return Attrs{{"shape", shape.vec()},
               {"dtype", o.dtype_},
               {"device_type", int64_t(o.device_.type)},
               {"device_index", int64_t(o.device_.index)}};
}

Tensor finish(Tensor t, const TensorOptions& o) {
  if (o.requires_grad_) t.requires_grad_(true);
  return t;
}

Tensor factory(const OpDef& d, IntList shape, const TensorOptions& o, Attrs extra) {
  Attrs a = factory_attrs(shape, o);
  for (const auto& [k, v] : extra.items()) a.set(k, v);
  return finish(dispatch1(d, std::span<const Tensor>{}, std::move(a)), o);
}

}  // namespace

// Default dtypes as PyTorch's: float32 (the default dtype) for empty, zeros,
// ones, rand and randn; full follows its fill value and arange its
// arguments; randint gives int64. A dtype in the options always wins.
Tensor empty(IntList shape, TensorOptions o) { return zeros(shape, o); }
Tensor zeros(IntList shape, TensorOptions o) { return full(shape, 0, o.dtype(o.dtype_or(kFloat32))); }
Tensor ones(IntList shape, TensorOptions o) { return full(shape, 1, o.dtype(o.dtype_or(kFloat32))); }
Tensor full(IntList shape, Scalar value, TensorOptions o) {
  // at::full's infer_full_options: bool → bool, integral → int64, floating → float32.
  const DType inferred = value.is_bool() ? kBool : value.is_floating() ? kFloat32 : kInt64;
  static const OpDef& row = op("full");
  return factory(row, shape, o.dtype(o.dtype_or(inferred)), ops::fill_value_attrs(value));
}

Tensor arange(Scalar end, TensorOptions o) { return arange(0, end, 1, o); }
Tensor arange(Scalar start, Scalar end, Scalar step, TensorOptions o) {
  const bool integral = !start.is_floating() && !end.is_floating() && !step.is_floating();
  o = o.dtype(o.dtype_or(integral ? kInt64 : kFloat32));  // torch.arange's inference
  const double s = start.to_double(), e = end.to_double(), st = step.to_double();
  DTR_CHECK(st != 0, ValueError, "arange: step must be nonzero");
  DTR_CHECK(std::isfinite(s) && std::isfinite(e), ValueError, "arange: unsupported range {} to {}", s, e);
  DTR_CHECK((st > 0 && e >= s) || (st < 0 && e <= s), ValueError,
            "arange: upper bound and larger bound inconsistent with step sign (start {}, end {}, step {})",
            s, e, st);
  if (integral) {
    // Counted in integers: beyond 2^53 a double miscounts (2^53+1 to 2^53+4
    // is 3 elements, not 4). The signs agree (checked above), so the
    // quotient is >= 0 and rounding it up is ceil.
    const __int128 diff = __int128(end.to_int()) - __int128(start.to_int());
    const int64_t istep = step.to_int();
    DTR_CHECK((istep > 0 && diff >= 0) || (istep < 0 && diff <= 0), ValueError,
              "arange: upper bound and larger bound inconsistent with step sign (start {}, end {}, "
              "step {})",
              start.to_int(), end.to_int(), istep);
    __int128 q = diff / istep;
    if (diff % istep != 0) ++q;
    DTR_CHECK(q < __int128(kMaxNumel), ValueError,
              "arange: the elements from {} to {} by {} are too many (2^60 or more)", start.to_int(),
              end.to_int(), istep);
    static const OpDef& row = op("arange");
    return factory(row, {int64_t(q)}, o,
                   Attrs{{"start", s}, {"step", st}, {"int_start", start.to_int()}, {"int_step", istep}});
  }
  const double count = std::ceil((e - s) / st);
  // Checked as a double: converting one beyond int64 would be undefined.
  DTR_CHECK(count < double(kMaxNumel), ValueError,
            "arange: {} elements from {} to {} by {} are too many (2^60 or more)", count, s, e, st);
  static const OpDef& row = op("arange");
  return factory(row, {int64_t(count)}, o, Attrs{{"start", s}, {"step", st}});
}

Tensor rand(IntList shape, TensorOptions o) {
  o = o.dtype(o.dtype_or(kFloat32));
  ops::check_floating("rand", ops::out_meta(shape, o.dtype_, o.device_), "dtype");
  static const OpDef& row = op("rand");
  return factory(row, shape, o, {});
}
Tensor randn(IntList shape, TensorOptions o) {
  o = o.dtype(o.dtype_or(kFloat32));
  ops::check_floating("randn", ops::out_meta(shape, o.dtype_, o.device_), "dtype");
  static const OpDef& row = op("randn");
  return factory(row, shape, o, {});
}
Tensor randint(int64_t low, int64_t high, IntList shape, TensorOptions o) {
  DTR_CHECK(low < high, ValueError, "randint: expected low < high, got low={} high={}", low, high);
  static const OpDef& row = op("randint");
  return factory(row, shape, o.dtype(o.dtype_or(kInt64)), Attrs{{"low", low}, {"high", high}});
}

namespace {
TensorOptions like(const Tensor& t) { return TensorOptions(t.dtype()).device(t.device()); }
}  // namespace
Tensor zeros_like(const Tensor& t) { return zeros(t.shape(), like(t)); }
Tensor ones_like(const Tensor& t) { return ones(t.shape(), like(t)); }
Tensor empty_like(const Tensor& t) { return empty(t.shape(), like(t)); }
Tensor full_like(const Tensor& t, Scalar v) { return full(t.shape(), v, like(t)); }
Tensor randn_like(const Tensor& t) { return randn(t.shape(), like(t)); }
Tensor rand_like(const Tensor& t) { return rand(t.shape(), like(t)); }

namespace detail {
Tensor from_host(const void* src, int64_t n, DType src_dtype, IntList shape, TensorOptions o) {
  const remat::CurrentOpScope current_op("from_vector");  // named in OutOfMemoryError reports
  o = o.dtype(o.dtype_or(src_dtype));  // torch.tensor: the data's own dtype by default
  for (int64_t s : shape) {
    DTR_CHECK(s >= 0, ValueError, "from_vector: negative dimension in shape {}", shape_str(shape.vec()));
  }
  DTR_CHECK(numel(shape) == n, ValueError,
            "from_vector: {} values cannot fill a tensor of shape {} ({} elements)", n,
            shape_str(shape.vec()), numel(shape));
  ensure_ops_registered();
  TensorMeta m = ops::out_meta(shape, o.dtype_, o.device_);
  auto storage = remat::new_storage(n * itemsize(o.dtype_), o.device_);
  remat::Runtime& rt = remat::Runtime::global();
  rt.allocate(*storage);  // DeviceError for a device that does not exist
  const auto* in = static_cast<const std::byte*>(src);
  const int64_t isz = itemsize(src_dtype), osz = itemsize(o.dtype_);
  if (n > 0) {  // (an empty vector may have a null data pointer)
    // Converted on the host, then copied by the device's backend.
    std::vector<std::byte> converted;
    if (src_dtype != o.dtype_) {
      converted.resize(size_t(n * osz));
      for (int64_t i = 0; i < n; ++i)
        convert_element(converted.data() + i * osz, o.dtype_, in + i * isz, src_dtype);
      in = converted.data();
    }
    copy_bytes(o.device_, storage->data(), Device(kCPU), in, size_t(n * osz));
  }
  // Data loaded from outside has no lineage: a constant, never evicted.
  rt.register_constant(*storage);
  Storage* s = storage.get();
  rt.release({&s, 1});
  Tensor t(std::make_shared<TensorImpl>(std::move(storage), std::move(m)));
  return finish(t, o);
}
}  // namespace detail

namespace {
// Whether the page holding `p` is mapped in this process (mincore fails with
// ENOMEM on an unmapped range).
bool host_page_is_mapped(const void* p) {
  static const uintptr_t page = uintptr_t(sysconf(_SC_PAGESIZE));
  auto* start = reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(p) & ~(page - 1));
  unsigned char resident = 0;
  return mincore(start, size_t(page), &resident) == 0 || errno != ENOMEM;
}

class BorrowedAllocator final : public Allocator {
 public:
  void* allocate(size_t) override { return nullptr; }
  void deallocate(void*, size_t) override {}
};

// The allocator of one borrowed buffer with a deleter: freeing the bytes
// (only ever when the storage dies: a borrowed storage is never evicted)
// calls the deleter on the buffer's own pointer, then the allocator goes.
class DeleterAllocator final : public Allocator {
 public:
  DeleterAllocator(void* data, std::function<void(void*)> deleter)
      : data_(data), deleter_(std::move(deleter)) {}
  void* allocate(size_t) override { return nullptr; }
  void deallocate(void*, size_t) override {
    const std::function<void(void*)> deleter = std::move(deleter_);
    void* data = data_;
    delete this;
    deleter(data);
  }

 private:
  void* data_;
  std::function<void(void*)> deleter_;
};

Tensor from_blob_impl(void* data, IntList shape, IntList strides, DType dtype, Device device,
                      std::function<void(void*)> deleter);
}  // namespace

Tensor from_blob(void* data, IntList shape, DType dtype, Device device) {
  for (int64_t s : shape) {
    DTR_CHECK(s >= 0, ValueError, "from_blob: negative size in shape {}", shape_str(shape));
  }
  return from_blob(data, shape, contiguous_strides(shape), dtype, device);
}

Tensor from_blob(void* data, IntList shape, IntList strides, DType dtype, Device device) {
  return from_blob_impl(data, shape, strides, dtype, device, nullptr);
}

Tensor from_blob(void* data, IntList shape, IntList strides, std::function<void(void*)> deleter,
                 DType dtype, Device device) {
  DTR_CHECK(deleter != nullptr, ValueError, "from_blob: the deleter is empty");
  return from_blob_impl(data, shape, strides, dtype, device, std::move(deleter));
}

namespace {
// Checks everything first: nothing after the storage is made throws, so a
// failed call never runs `deleter`.
Tensor from_blob_impl(void* data, IntList shape, IntList strides, DType dtype, Device device,
                      std::function<void(void*)> deleter) {
  check_device(device);  // DeviceError for a device that does not exist
  DTR_CHECK(shape.size() == strides.size(), ValueError,
            "from_blob: shape {} and strides {} differ in length", shape_str(shape.vec()),
            shape_str(strides.vec()));
  DTR_CHECK(shape.size() <= 16, ValueError, "from_blob: tensors have at most 16 dimensions, got {}",
            shape.size());
  for (size_t i = 0; i < shape.size(); ++i) {
    DTR_CHECK(shape[i] >= 0 && strides[i] >= 0, ValueError,
              "from_blob: negative size or stride in shape {} strides {}", shape_str(shape.vec()),
              shape_str(strides.vec()));
  }
  const int64_t n = [&] {
    ShapeCheckScope scope("from_blob");
    return numel(shape);  // ValueError for 2^60 elements or more
  }();
  // The bytes the tensor spans: (1 + sum of (size - 1) * stride) elements,
  // every step checked, and the whole range inside the address space.
  int64_t extent = n == 0 ? 0 : 1, nbytes = 0;
  bool overflow = false;
  for (size_t i = 0; i < shape.size() && n > 0; ++i) {
    int64_t span = 0;
    overflow = overflow || __builtin_mul_overflow(shape[i] - 1, strides[i], &span) ||
               __builtin_add_overflow(extent, span, &extent);
  }
  overflow = overflow || __builtin_mul_overflow(extent, itemsize(dtype), &nbytes);
  uintptr_t end = 0;
  overflow = overflow || __builtin_add_overflow(reinterpret_cast<uintptr_t>(data), uint64_t(nbytes), &end);
  DTR_CHECK(!overflow, ValueError,
            "from_blob: shape {} with strides {} of {} spans more bytes than fit in int64 or in the "
            "address space from pointer {}",
            shape_str(shape.vec()), shape_str(strides.vec()), dtype_name(dtype), static_cast<const void*>(data));
  // As in PyTorch, an empty tensor may wrap a null pointer.
  DTR_CHECK(data != nullptr || n == 0, ValueError,
            "from_blob: data is null for a tensor of {} elements (shape {}); only an empty tensor "
            "may have a null pointer",
            n, shape_str(shape.vec()));
  DTR_CHECK(reinterpret_cast<uintptr_t>(data) % uintptr_t(itemsize(dtype)) == 0, ValueError,
            "from_blob: pointer {} is not aligned for {}: it needs {}-byte alignment",
            static_cast<const void*>(data), dtype_name(dtype), itemsize(dtype));
  // The buffer's size is not known (nor is it to PyTorch), but a span that
  // ends in unmapped memory is surely wrong: a size or stride too large for
  // the buffer would otherwise fault at the first read.
  if (n > 0 && device.is_cpu()) {
    const auto last = reinterpret_cast<uintptr_t>(data) + uintptr_t(nbytes) - 1;
    DTR_CHECK(host_page_is_mapped(data) && host_page_is_mapped(reinterpret_cast<const void*>(last)),
              ValueError,
              "from_blob: shape {} with strides {} of {} spans {} bytes from pointer {}, reaching "
              "unmapped memory at {}: the sizes or strides are larger than the buffer",
              shape_str(shape.vec()), shape_str(strides.vec()), dtype_name(dtype), nbytes,
              static_cast<const void*>(data), reinterpret_cast<const void*>(last));
  }
  ensure_ops_registered();
  static BorrowedAllocator borrowed;
  // A storage without bytes reads as evicted: an empty tensor on a null
  // pointer gets a placeholder address instead (nothing is ever read there).
  alignas(8) static std::byte empty_placeholder[8];
  TensorMeta m;
  m.shape = shape.vec();
  m.strides = strides.vec();
  m.dtype = dtype;
  m.device = device;
  auto storage = remat::new_storage(nbytes, device);
  auto impl = std::make_shared<TensorImpl>(storage, std::move(m));
  remat::Runtime& rt = remat::Runtime::global();
  // Borrowed bytes are not the runtime's: they are not counted against the
  // budget and are never freed or evicted, and lineage never reads them
  // later (Note [borrowed storage], remat/runtime.cpp). From here on
  // nothing throws: the storage owns the deleter.
  Allocator* alloc = &borrowed;
  if (deleter) alloc = new DeleterAllocator(data, std::move(deleter));
  storage->set_data(data != nullptr ? data : empty_placeholder, alloc);
  rt.mark_borrowed(*storage);
  return Tensor(std::move(impl));
}
}  // namespace

}  // namespace dtr
