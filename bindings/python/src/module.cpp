// dtr._C: the nanobind extension under the Python package `dtr`
// (bindings/python/dtr). It binds dtr::Tensor with PyTorch's method names and
// the hot operators; argument conveniences (`*size`, dtype=, device=) and the
// nn / optim / autocast layers are Python, in the package.
//
// The GIL: ops whose cost grows with their inputs (matmul, conv, attention,
// backward, optimizer steps, and every elementwise op on more than
// kReleaseGilElements elements) run without it; tiny ops keep it, because
// releasing and re-taking it costs about as much as the op itself.
#include <type_traits>

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <dtr/dtr.h>

#include "bindings.h"
#include "eager/dlpack.h"

namespace nb = nanobind;
using dtr::Tensor;

namespace dtr::python {

namespace {

Scalar int_scalar(PyObject* o) {
  int overflow = 0;
  const long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
  if (v == -1 && PyErr_Occurred() != nullptr) throw nb::python_error();
  DTR_CHECK(overflow == 0, ValueError, "value cannot be converted to int64 without overflow");
  return Scalar(int64_t(v));
}

}  // namespace

NumpyScalar numpy_scalar_kind(nb::handle h) {
  // A numpy scalar exists only once numpy is imported: look, never import.
  struct Types {
    PyObject *generic, *boolean, *integer, *floating;
  };
  static Types* types = nullptr;  // under the GIL; kept for the process's life
  if (types == nullptr) {
    PyObject* np = PyImport_GetModule(nb::str("numpy").ptr());
    if (np == nullptr) {
      PyErr_Clear();
      return NumpyScalar::kNone;
    }
    const nb::module_ numpy = nb::steal<nb::module_>(np);
    auto keep = [&](const char* name) { return nb::object(numpy.attr(name)).release().ptr(); };
    types = new Types{keep("generic"), keep("bool_"), keep("integer"), keep("floating")};
  }
  PyObject* o = h.ptr();
  auto is = [o](PyObject* type) {
    return PyObject_TypeCheck(o, reinterpret_cast<PyTypeObject*>(type)) != 0;
  };
  if (!is(types->generic)) return NumpyScalar::kNone;
  if (is(types->boolean)) return NumpyScalar::kBool;
  if (is(types->integer)) return NumpyScalar::kInt;
  if (is(types->floating)) return NumpyScalar::kFloat;
  return NumpyScalar::kOther;
}

bool is_number(nb::handle h) {
  return PyLong_Check(h.ptr()) || PyFloat_Check(h.ptr()) ||
         numpy_scalar_kind(h) != NumpyScalar::kNone;
}

Scalar to_scalar(nb::handle h) {
  PyObject* o = h.ptr();
  if (PyBool_Check(o)) return Scalar(o == Py_True);
  if (PyLong_Check(o)) return int_scalar(o);
  if (PyFloat_Check(o)) return Scalar(PyFloat_AS_DOUBLE(o));
  if (nb::isinstance<Tensor>(h)) return scalar_of(nb::cast<const Tensor&>(h));
  // numpy.float64 is a float; the other numpy scalars count as the Python
  // scalar of their kind, as in PyTorch.
  switch (numpy_scalar_kind(h)) {
    case NumpyScalar::kBool: {
      const int v = PyObject_IsTrue(o);
      if (v < 0) throw nb::python_error();
      return Scalar(v == 1);
    }
    case NumpyScalar::kInt: {
      const nb::object i = nb::steal(PyNumber_Index(o));
      if (!i.is_valid()) throw nb::python_error();
      return int_scalar(i.ptr());
    }
    case NumpyScalar::kFloat: {
      const double v = PyFloat_AsDouble(o);
      if (v == -1.0 && PyErr_Occurred() != nullptr) throw nb::python_error();
      return Scalar(v);
    }
    case NumpyScalar::kNone:
    case NumpyScalar::kOther: break;
  }
  throw TypeError(fmt::format("expected a number or a one-element Tensor, got {}",
                              nb::type_name(h.type()).c_str()));
}

Scalar scalar_of(const Tensor& t) {
  if (t.dtype() == kBool) return Scalar(t.item<bool>());
  if (is_floating(t.dtype())) return Scalar(t.item<double>());
  return Scalar(t.item<int64_t>());
}

bool is_tensor(nb::handle h) { return nb::isinstance<Tensor>(h); }

namespace {

/// A binary op whose right operand is a Tensor or a Python number.
template <typename TT, typename TS>
nb::object binary(const Tensor& a, nb::handle b, TT tensor_op, TS scalar_op) {
  if (is_tensor(b)) {
    const Tensor& bt = nb::cast<const Tensor&>(b);
    return nb::cast(release_if_large(a.numel() + bt.numel(), [&] { return tensor_op(a, bt); }));
  }
  // A numpy scalar of a kind dtr has no dtype for (complex, datetime) is a
  // TypeError: given back NotImplemented, numpy would turn the tensor into
  // an array.
  if (!is_number(b)) return nb::borrow(Py_NotImplemented);
  const Scalar s = to_scalar(b);
  return nb::cast(release_if_large(a.numel(), [&] { return scalar_op(a, s); }));
}

template <typename F>
nb::object inplace(nb::handle self_h, nb::handle b, F op) {
  Tensor& self = nb::cast<Tensor&>(self_h);
  if (is_tensor(b)) {
    op(self, nb::cast<const Tensor&>(b));
  } else {
    if (!is_number(b)) return nb::borrow(Py_NotImplemented);
    op(self, full({}, to_scalar(b), TensorOptions(self.dtype()).device(self.device())));
  }
  return nb::borrow(self_h);
}

/// x += b, x -= b, x.add_(b, alpha=a), x.sub_(b, alpha=a).
template <bool kSub>
nb::object inplace_add(nb::handle self_h, nb::handle b, nb::handle alpha) {
  const Scalar a = to_scalar(alpha);
  return inplace(self_h, b, [&](Tensor& x, const Tensor& y) {
    if constexpr (kSub) x.sub_(y, a);
    else x.add_(y, a);
  });
}
nb::object inplace_mul(nb::handle self_h, nb::handle b) {
  return inplace(self_h, b, [](Tensor& x, const Tensor& y) { x.mul_(y); });
}
nb::object inplace_div(nb::handle self_h, nb::handle b) {
  return inplace(self_h, b, [](Tensor& x, const Tensor& y) { x.div_(y); });
}

// ---- numpy / DLPack -------------------------------------------------------------

nb::dlpack::dtype np_dtype(DType t) {
  switch (t) {
    case kFloat32: return nb::dtype<float>();
    case kFloat64: return nb::dtype<double>();
    case kFloat16: return {uint8_t(nb::dlpack::dtype_code::Float), 16, 1};
    case kInt64: return nb::dtype<int64_t>();
    case kInt32: return nb::dtype<int32_t>();
    case kBool: return nb::dtype<bool>();
    case kUInt8: return nb::dtype<uint8_t>();
    default:
      throw TypeError(fmt::format("numpy: Got unsupported ScalarType {}", dtype_name(t)));
  }
}

/// Tensor.numpy(): an ndarray sharing the tensor's bytes (torch.Tensor.numpy).
/// By default it is read-only: the storage is pinned (made resident, never
/// evicted) while the array lives, through a read-only DLPack export, and is
/// evictable again afterwards; nothing is written, so autograd sees no
/// mutation. With writable=True, writes through the array change the tensor
/// as in PyTorch: that is a mutation (Tensor::data_ptr: the storage becomes a
/// borrowed constant, never evicted, and its version is bumped, so a tensor
/// saved for backward reports the write).
nb::object to_numpy(const Tensor& t, bool writable) {
  DTR_CHECK(t.device().is_cpu(), TypeError,
            "can't convert {} device type tensor to numpy. Use Tensor.cpu() to copy the tensor "
            "to host memory first.",
            t.device().str());
  if (t.requires_grad()) {
    throw std::runtime_error(  // RuntimeError, as in PyTorch
        "Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead.");
  }
  const nb::dlpack::dtype dt = np_dtype(t.dtype());
  std::vector<size_t> shape(t.shape().begin(), t.shape().end());
  std::vector<int64_t> strides(t.strides().begin(), t.strides().end());
  if (writable) {
    void* data = t.numel() > 0 ? t.raw_data_ptr() : nullptr;
    auto* owner = new Tensor(t);
    nb::capsule keep(owner, [](void* p) noexcept { delete static_cast<Tensor*>(p); });
    return nb::ndarray<nb::numpy>(data, shape.size(), shape.data(), keep, strides.data(), dt).cast();
  }
  DLManagedTensor* m = dtr::to_dlpack(t, DLPackAccess::kReadOnly);
  nb::capsule keep(m, [](void* p) noexcept {
    auto* mt = static_cast<DLManagedTensor*>(p);
    if (mt->deleter != nullptr) mt->deleter(mt);
  });
  const DLTensor& dl = m->dl_tensor;
  const void* data = static_cast<const char*>(dl.data) + dl.byte_offset;
  return nb::ndarray<nb::numpy, nb::ro>(data, shape.size(), shape.data(), keep, strides.data(), dt)
      .cast();
}

DType dtype_from_dl(const nb::dlpack::dtype& d) {
  using C = nb::dlpack::dtype_code;
  if (d.lanes == 1) {
    if (d.code == uint8_t(C::Float) && d.bits == 32) return kFloat32;
    if (d.code == uint8_t(C::Float) && d.bits == 64) return kFloat64;
    if (d.code == uint8_t(C::Float) && d.bits == 16) return kFloat16;
    if (d.code == uint8_t(C::Bfloat) && d.bits == 16) return kBFloat16;
    if (d.code == uint8_t(C::Int) && d.bits == 64) return kInt64;
    if (d.code == uint8_t(C::Int) && d.bits == 32) return kInt32;
    if (d.code == uint8_t(C::Bool) && d.bits == 8) return kBool;
    if (d.code == uint8_t(C::UInt) && d.bits == 8) return kUInt8;
  }
  throw TypeError(fmt::format(
      "from_numpy: can't convert an array of dtype code {} with {} bits; the only supported "
      "types are: float64, float32, float16, bfloat16, int64, int32, uint8, and bool.",
      int(d.code), int(d.bits)));
}

int decref_pending(void* o) {
  Py_DECREF(static_cast<PyObject*>(o));
  return 0;
}

/// Drops the reference a tensor held on a Python object (a numpy array),
/// from whichever thread drops the last tensor. A thread without the GIL (one
/// inside backward, say) must not wait for it here: the runtime may hold a
/// lock that the GIL's holder is waiting for. It hands the reference to the
/// interpreter's pending calls instead.
void release_reference(PyObject* o) {
  if (!Py_IsInitialized()) return;  // at exit: leak rather than touch a dead interpreter
  if (PyGILState_Check()) {
    Py_DECREF(o);
  } else if (Py_AddPendingCall(&decref_pending, o) != 0) {
    PyGILState_STATE s = PyGILState_Ensure();
    Py_DECREF(o);
    PyGILState_Release(s);
  }
}

/// dtr.from_numpy: a tensor sharing the array's memory (torch.from_numpy);
/// `owner` (the array) is kept alive until the last tensor on it goes.
Tensor from_numpy(nb::ndarray<nb::numpy, nb::device::cpu> arr, nb::handle owner) {
  const DType dt = dtype_from_dl(arr.dtype());
  std::vector<int64_t> shape, strides;  // nanobind's strides count elements
  for (size_t i = 0; i < arr.ndim(); ++i) {
    shape.push_back(int64_t(arr.shape(i)));
    strides.push_back(int64_t(arr.stride(i)));
  }
  PyObject* o = owner.ptr();
  Py_INCREF(o);
  try {
    return dtr::from_blob(const_cast<void*>(arr.data()), shape, strides,
                          [o](void*) { release_reference(o); }, dt);
  } catch (...) {
    Py_DECREF(o);  // from_blob did not take the buffer
    throw;
  }
}

// The capsule names of the DLPack Python specification: a producer's capsule
// is renamed "used_..." by the consumer that takes it.
constexpr const char* kDlTensor = "dltensor";
constexpr const char* kUsedDlTensor = "used_dltensor";
constexpr const char* kDlTensorVersioned = "dltensor_versioned";
constexpr const char* kUsedDlTensorVersioned = "used_dltensor_versioned";

// The unconsumed capsule name of each managed struct.
template <class M>
constexpr const char* capsule_name() {
  return std::is_same_v<M, DLManagedTensorVersioned> ? kDlTensorVersioned : kDlTensor;
}

template <class M>
void dlpack_capsule_destructor(PyObject* capsule) {
  // A capsule never consumed still owns its tensor (the DLPack protocol).
  if (PyCapsule_IsValid(capsule, capsule_name<M>())) {
    auto* m = static_cast<M*>(PyCapsule_GetPointer(capsule, capsule_name<M>()));
    if (m != nullptr && m->deleter != nullptr) m->deleter(m);
  } else {
    PyErr_Clear();
  }
}

template <class M>
nb::object dlpack_capsule(M* m) {
  PyObject* cap = PyCapsule_New(m, capsule_name<M>(), dlpack_capsule_destructor<M>);
  if (cap == nullptr) {
    m->deleter(m);
    throw nb::python_error();
  }
  return nb::steal(cap);
}

[[noreturn]] void buffer_error(const std::string& msg) {
  PyErr_SetString(PyExc_BufferError, msg.c_str());
  throw nb::python_error();
}

/// dtr.to_dlpack (torch.utils.dlpack.to_dlpack): a legacy capsule sharing
/// the tensor's memory read-write. A read-only tensor (a DLPack 1.x import
/// flagged read-only) is a BufferError: the legacy struct cannot say so.
nb::object to_dlpack_capsule(const Tensor& t) {
  if (t.defined() && t.storage()->read_only) {
    buffer_error(
        "to_dlpack: the tensor is read-only (imported from DLPack with the read-only flag) and "
        "the legacy DLPack capsule cannot mark it read-only; use "
        "tensor.__dlpack__(max_version=(1, 0)) or export tensor.clone()");
  }
  return dlpack_capsule(dtr::to_dlpack(t, DLPackAccess::kReadWrite));
}

/// (device type, device id) as __dlpack_device__ reports them.
std::pair<int, int> dl_device_of(const Device& d) {
  const int type = d.is_cpu() ? int(kDLCPU) : d.is_cuda() ? int(kDLCUDA) : -1;
  DTR_CHECK(type >= 0, DeviceError, "__dlpack_device__: device {} has no DLPack mapping", d.str());
  return {type, d.is_cpu() ? 0 : d.index};
}

/// Tensor.__dlpack__ as the Python array API standard (v2023.12) says:
/// - max_version None or below (1, 0): a legacy "dltensor" capsule (PyTorch
///   1.x and NumPy 1.x consumers); (1, x) or above: a "dltensor_versioned"
///   capsule of DLPack 1.1, with the read-only flag when the tensor is
///   read-only and the is-copied flag when the export is a copy.
/// - dl_device: another device than the tensor's is a copy there (cpu and
///   cuda:N); with copy=False, or to a device dtr lacks, a BufferError.
/// - copy: True always exports a copy, False never does (BufferError where
///   one would be needed), None copies only for another device.
/// - stream: dtr's kernels run on the legacy default stream and the export
///   synchronizes the device, so any stream the consumer names is safe; it
///   is not otherwise used. TypeError for anything but None or an int.
/// Shared (not copied) exports are read-write, as PyTorch's: the storage is
/// then borrowed (Note [borrowed storage]). A read-only tensor exports with
/// the read-only flag, and cannot be shared through a legacy capsule
/// (BufferError, as NumPy 2 does for a read-only array; copy=True works).
nb::object dlpack_export(const Tensor& t, nb::handle stream, nb::handle max_version,
                         nb::handle dl_device, nb::handle copy_arg) {
  DTR_CHECK(t.defined(), ValueError, "__dlpack__: tensor is undefined");
  // As torch.Tensor.__dlpack__: None or an int (a stream handle, or -1).
  if (!stream.is_none() && (!PyLong_Check(stream.ptr()) || PyBool_Check(stream.ptr()))) {
    throw TypeError(fmt::format("__dlpack__: stream must be None or an int, got {}",
                                nb::str(nb::repr(stream)).c_str()));
  }
  bool versioned = false;
  if (!max_version.is_none()) {
    if (!PyTuple_Check(max_version.ptr()) || PyTuple_Size(max_version.ptr()) != 2 ||
        !PyLong_Check(PyTuple_GET_ITEM(max_version.ptr(), 0)) ||
        !PyLong_Check(PyTuple_GET_ITEM(max_version.ptr(), 1))) {
      throw TypeError(fmt::format("__dlpack__: max_version must be None or a tuple (major, minor) "
                                  "of two ints, got {}",
                                  nb::str(nb::repr(max_version)).c_str()));
    }
    int overflow = 0;  // a major past long long is past 1 too
    const long long major = PyLong_AsLongLongAndOverflow(PyTuple_GET_ITEM(max_version.ptr(), 0), &overflow);
    versioned = overflow > 0 || (overflow == 0 && major >= DLPACK_MAJOR_VERSION);
  }
  std::optional<bool> copy;
  if (!copy_arg.is_none()) {
    if (!PyBool_Check(copy_arg.ptr())) {
      throw TypeError(fmt::format("__dlpack__: copy must be None, True or False, got {}",
                                  nb::str(nb::repr(copy_arg)).c_str()));
    }
    copy = copy_arg.ptr() == Py_True;
  }
  Tensor source = t;
  bool copied = false;
  const std::pair<int, int> here = dl_device_of(t.device());
  if (!dl_device.is_none()) {
    std::pair<int, int> want;
    try {
      want = nb::cast<std::pair<int, int>>(dl_device);
    } catch (const nb::cast_error&) {
      throw TypeError(fmt::format("__dlpack__: dl_device must be None or a tuple (device type, "
                                  "device id) as __dlpack_device__ returns, got {}",
                                  nb::str(nb::repr(dl_device)).c_str()));
    }
    if (want != here) {
      if (copy == false) {
        buffer_error(fmt::format("__dlpack__: the tensor is on DLPack device {} and copy=False, so "
                                 "it cannot be exported to device {} (moving it needs a copy)",
                                 nb::str(nb::repr(nb::make_tuple(here.first, here.second))).c_str(),
                                 nb::str(nb::repr(dl_device)).c_str()));
      }
      Device target;
      if (want.first == int(kDLCPU) && want.second == 0) {
        target = Device(kCPU);
      } else if (want.first == int(kDLCUDA) && want.second >= 0) {
        target = Device(DeviceType::kCUDA, want.second);
      } else {
        buffer_error(fmt::format("__dlpack__: dtr cannot export to DLPack device {}: it has cpu "
                                 "(1, 0) and cuda (2, N)",
                                 nb::str(nb::repr(dl_device)).c_str()));
      }
      try {
        check_device(target);
      } catch (const DeviceError& e) {
        buffer_error(fmt::format("__dlpack__: cannot export to DLPack device {}: {}",
                                 nb::str(nb::repr(dl_device)).c_str(), e.what()));
      }
      NoGradGuard no_grad;
      source = t.detach().to(target);
      copied = true;
    }
  }
  if (copy == true && !copied) {
    NoGradGuard no_grad;
    source = t.detach().clone();
    copied = true;
  }
  const bool read_only = source.storage()->read_only;  // never true of a copy
  if (!versioned) {
    if (read_only) {
      buffer_error(
          "__dlpack__: the tensor is read-only (imported from DLPack with the read-only flag) "
          "and a legacy DLPack capsule (max_version None or below (1, 0)) cannot mark it "
          "read-only; pass max_version=(1, 0), or copy=True to export a writable copy");
    }
    return dlpack_capsule(dtr::to_dlpack(source, DLPackAccess::kReadWrite));
  }
  DLManagedTensorVersioned* m = dtr::to_dlpack_versioned(
      source, read_only ? DLPackAccess::kReadOnly : DLPackAccess::kReadWrite);
  if (copied) m->flags |= DLPACK_FLAG_BITMASK_IS_COPIED;
  return dlpack_capsule(m);
}

/// dtr.from_dlpack: a capsule ("dltensor" or "dltensor_versioned"), or any
/// object with __dlpack__ (a torch Tensor, a numpy array). An object is
/// asked for max_version=(1, 0) first; a producer that does not take the
/// keyword (PyTorch 1.x, NumPy 1.x: TypeError) is asked again without it.
Tensor from_dlpack_object(nb::handle obj) {
  nb::object cap;
  if (PyCapsule_CheckExact(obj.ptr())) {
    cap = nb::borrow(obj);
  } else if (nb::hasattr(obj, "__dlpack__")) {
    // The consumer's stream (DLPack's __dlpack__(stream=...)): for a CUDA
    // tensor, 1, the legacy default stream every dtr kernel runs on, so the
    // producer orders its pending writes before dtr's first read; None
    // elsewhere (a CPU producer refuses any other value).
    nb::object stream = nb::none();
    if (nb::hasattr(obj, "__dlpack_device__")) {
      const auto dev = nb::cast<std::pair<int, int>>(obj.attr("__dlpack_device__")());
      if (dev.first == int(kDLCUDA)) stream = nb::int_(1);
    }
    nb::object method = obj.attr("__dlpack__");
    try {
      cap = method(nb::arg("stream") = stream, nb::arg("max_version") = nb::make_tuple(1, 0));
    } catch (nb::python_error& e) {
      if (!e.matches(PyExc_TypeError)) throw;
      // An older producer: no max_version keyword.
      cap = stream.is_none() ? method() : method(nb::arg("stream") = stream);
    }
  } else {
    throw TypeError(fmt::format("from_dlpack: expected a DLPack capsule or an object with "
                                "__dlpack__, got {}",
                                nb::type_name(obj.type()).c_str()));
  }
  if (PyCapsule_IsValid(cap.ptr(), kDlTensorVersioned)) {
    auto* m = static_cast<DLManagedTensorVersioned*>(PyCapsule_GetPointer(cap.ptr(), kDlTensorVersioned));
    Tensor t = dtr::from_dlpack_versioned(m);  // on error the capsule keeps ownership
    PyCapsule_SetName(cap.ptr(), kUsedDlTensorVersioned);
    return t;
  }
  if (PyCapsule_IsValid(cap.ptr(), kDlTensor)) {
    auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(cap.ptr(), kDlTensor));
    Tensor t = dtr::from_dlpack(m);  // on error the capsule keeps ownership
    PyCapsule_SetName(cap.ptr(), kUsedDlTensor);
    return t;
  }
  PyErr_Clear();
  if (!PyCapsule_CheckExact(cap.ptr())) {
    throw TypeError(fmt::format("from_dlpack: __dlpack__ returned {}, not a capsule",
                                nb::type_name(cap.type()).c_str()));
  }
  const char* name = PyCapsule_GetName(cap.ptr());
  PyErr_Clear();
  throw ValueError(fmt::format(
      "from_dlpack: the capsule is named '{}', not 'dltensor' or 'dltensor_versioned': it was "
      "already consumed, or is not a DLPack capsule",
      name != nullptr ? name : ""));
}

nb::tuple dlpack_device(const Tensor& t) {
  const std::pair<int, int> d = dl_device_of(t.device());
  return nb::make_tuple(d.first, d.second);
}

// ---- values out -----------------------------------------------------------------------

nb::object item_of(const Tensor& t) {
  if (t.dtype() == kBool) return nb::bool_(t.item<bool>());
  if (is_floating(t.dtype())) return nb::float_(t.item<double>());
  return nb::int_(t.item<int64_t>());
}

template <typename T, typename Py>
nb::object nest(const std::vector<T>& v, const Shape& s, size_t dim, size_t& pos) {
  if (dim == s.size()) return nb::cast(Py(v[pos++]));  // NOLINT
  nb::list l;
  for (int64_t i = 0; i < s[dim]; ++i) l.append(nest<T, Py>(v, s, dim + 1, pos));
  return l;
}

nb::object tolist(const Tensor& t) {
  size_t pos = 0;
  if (t.dtype() == kBool) return nest<bool, bool>(t.to_vector<bool>(), t.shape(), 0, pos);
  if (is_floating(t.dtype())) return nest<double, double>(t.to_vector<double>(), t.shape(), 0, pos);
  return nest<int64_t, int64_t>(t.to_vector<int64_t>(), t.shape(), 0, pos);
}

nb::tuple shape_tuple(const Shape& s) {
  nb::list l;
  for (int64_t v : s) l.append(v);
  return nb::tuple(l);
}

// ---- indexing --------------------------------------------------------------------------
// x[...] and x[...] = v go through the C++ indexing core (eager/indexing.h),
// the code behind libtorch's x.index({...}) / x.index_put_({...}, v).

std::optional<int64_t> slice_bound(PyObject* o) {
  if (o == Py_None) return std::nullopt;
  const nb::object i = nb::steal(PyNumber_Index(o));
  if (!i.is_valid()) {
    PyErr_Clear();
    throw TypeError(fmt::format("slice indices must be integers or None, got {}",
                                nb::type_name(nb::handle(o).type()).c_str()));
  }
  return int_scalar(i.ptr()).to_int();
}

/// One Python index entry as a TensorIndex: int, bool, slice, None, `...`,
/// a Tensor, or a list / numpy array (as dtr.tensor makes it: ints → int64,
/// bools → a mask).
indexing::TensorIndex index_entry(nb::handle h) {
  PyObject* o = h.ptr();
  if (PyBool_Check(o)) return indexing::TensorIndex(o == Py_True);
  if (PyLong_Check(o)) return indexing::TensorIndex(int_scalar(o).to_int());
  if (h.is_none()) return indexing::None;
  if (o == Py_Ellipsis) return indexing::Ellipsis;
  if (PySlice_Check(o)) {
    auto* s = reinterpret_cast<PySliceObject*>(o);
    return indexing::Slice(slice_bound(s->start), slice_bound(s->stop), slice_bound(s->step));
  }
  if (is_tensor(h)) return indexing::TensorIndex(nb::cast<Tensor>(h));
  switch (numpy_scalar_kind(h)) {
    case NumpyScalar::kBool: return indexing::TensorIndex(to_scalar(h).to_int() != 0);
    case NumpyScalar::kInt: return indexing::TensorIndex(to_scalar(h).to_int());
    default: break;
  }
  if (PyList_Check(o) || PyTuple_Check(o) || nb::hasattr(h, "__array__")) {
    return indexing::TensorIndex(nb::cast<Tensor>(nb::module_::import_("dtr").attr("tensor")(h)));
  }
  throw IndexError(fmt::format(
      "only integers, slices (`:`), ellipsis (`...`), None, bools and long or bool tensors "
      "are valid indices (got {})",
      nb::type_name(h.type()).c_str()));
}

std::vector<indexing::TensorIndex> index_entries(nb::handle idx) {
  std::vector<indexing::TensorIndex> out;
  if (PyTuple_Check(idx.ptr())) {
    for (nb::handle h : nb::borrow<nb::tuple>(idx)) out.push_back(index_entry(h));
  } else {
    out.push_back(index_entry(idx));
  }
  return out;
}

Tensor get_index(const Tensor& x, nb::handle idx) { return indexing::get(x, index_entries(idx)); }

/// x[idx] = value: a Tensor, a number, or nested lists (as dtr.tensor).
void set_index(Tensor& x, nb::handle idx, nb::handle value) {
  const std::vector<indexing::TensorIndex> entries = index_entries(idx);
  if (is_tensor(value)) {
    indexing::put(x, entries, nb::cast<const Tensor&>(value));
  } else if (is_number(value)) {
    indexing::put(x, entries, to_scalar(value));
  } else {
    indexing::put(x, entries, nb::cast<Tensor>(nb::module_::import_("dtr").attr("tensor")(value)));
  }
}

}  // namespace

void bind_tensor(nb::module_& m);
void bind_functions(nb::module_& m);

void bind_tensor(nb::module_& m) {
  nb::class_<Tensor> cls(m, "Tensor", nb::is_weak_referenceable());
  // torch.Tensor's: above numpy's own priorities, so `np.float32(2) * x`
  // and `np.int64(1) < x` are handed to the tensor's reflected operator
  // (which takes numpy scalars) instead of turning x into an array, which
  // loses the graph (and raises for a tensor that requires grad).
  cls.attr("__array_priority__") = 1000;
  cls.def(nb::init<const Tensor&>(), "A handle on the same tensor (shares everything).")
      // torch.Tensor(data) / torch.Tensor(*sizes) / torch.Tensor(): float32
      // (dtr._legacy_tensor builds it, as PyTorch's legacy constructor).
      .def("__init__",
           [](Tensor* t, nb::args args) {
             nb::object made = nb::module_::import_("dtr").attr("_legacy_tensor")(*args);
             new (t) Tensor(nb::cast<const Tensor&>(made));
           })
      .def_prop_ro("shape", [](const Tensor& t) { return shape_tuple(t.shape()); })
      .def("size",
           [](const Tensor& t, std::optional<int64_t> d) -> nb::object {
             if (d) return nb::int_(t.size(*d));
             return shape_tuple(t.shape());
           },
           nb::arg("dim") = nb::none())
      .def("stride",
           [](const Tensor& t, std::optional<int64_t> d) -> nb::object {
             if (d) return nb::int_(t.stride(*d));
             return shape_tuple(t.strides());
           },
           nb::arg("dim") = nb::none())
      .def("storage_offset", &Tensor::storage_offset)
      .def_prop_ro("ndim", &Tensor::dim)
      .def("dim", &Tensor::dim)
      .def("numel", &Tensor::numel)
      .def("nelement", &Tensor::numel)
      .def("element_size", [](const Tensor& t) { return itemsize(t.dtype()); })
      .def_prop_ro("nbytes", &Tensor::nbytes)
      .def_prop_ro("dtype", &Tensor::dtype)
      .def_prop_ro("device", &Tensor::device)
      .def_prop_ro("is_cuda", [](const Tensor& t) { return t.device().is_cuda(); })
      .def("is_contiguous", &Tensor::is_contiguous)
      .def("is_floating_point", &Tensor::is_floating_point)
      .def("__len__",
           [](const Tensor& t) {
             DTR_CHECK(t.dim() > 0, TypeError, "len() of a 0-d tensor");
             return t.size(0);
           })
      .def("__repr__", &Tensor::str)
      .def("item", &item_of)
      .def("tolist", &tolist)
      .def("numpy", &to_numpy, nb::kw_only(), nb::arg("writable") = false)
      .def("__bool__",
           [](const Tensor& t) {
             if (t.numel() != 1) {  // RuntimeError, as in PyTorch
               throw std::runtime_error(
                   "Boolean value of Tensor with more than one value is ambiguous");
             }
             return t.item<bool>();
           })
      .def("__float__", [](const Tensor& t) { return t.item<double>(); })
      .def("__int__", [](const Tensor& t) { return t.item<int64_t>(); })
      .def("__index__",
           [](const Tensor& t) {
             DTR_CHECK(is_integral(t.dtype()) && t.numel() == 1, TypeError,
                       "only integer tensors of a single element can be converted to an index");
             return t.item<int64_t>();
           })
      .def("__hash__", [](nb::handle self) { return nb::hash(nb::int_(intptr_t(self.ptr()))); })
      .def("__dlpack__", &dlpack_export, nb::kw_only(), nb::arg("stream") = nb::none(),
           nb::arg("max_version") = nb::none(), nb::arg("dl_device") = nb::none(),
           nb::arg("copy") = nb::none())
      .def("__dlpack_device__", &dlpack_device)
      .def("__getitem__", &get_index)
      .def("__setitem__", &set_index)
      // ---- autograd
      .def_prop_rw("requires_grad", &Tensor::requires_grad,
                   [](Tensor& t, bool r) { t.requires_grad_(r); })
      .def("requires_grad_",
           [](nb::handle self, bool r) {
             nb::cast<Tensor&>(self).requires_grad_(r);
             return nb::borrow(self);
           },
           nb::arg("requires_grad") = true)
      .def_prop_rw("grad",
                   [](const Tensor& t) -> nb::object {
                     Tensor g = t.grad();
                     if (!g.defined()) return nb::none();
                     return nb::cast(g);
                   },
                   [](Tensor& t, nb::handle g) {
                     t.set_grad(g.is_none() ? Tensor() : nb::cast<const Tensor&>(g));
                   },
                   nb::arg("grad").none())
      .def_prop_ro("is_leaf", &Tensor::is_leaf)
      .def_prop_ro("grad_fn",
                   [](const Tensor& t) -> nb::object {
                     std::string n = t.grad_fn_name();
                     if (n.empty()) return nb::none();
                     return nb::str(n.c_str());
                   })
      .def("retain_grad", &Tensor::retain_grad)
      .def("backward",
           [](const Tensor& t, std::optional<Tensor> gradient, bool retain_graph) {
             nb::gil_scoped_release release;
             t.backward(gradient.value_or(Tensor()), retain_graph);
           },
           nb::arg("gradient") = nb::none(), nb::arg("retain_graph") = false)
      .def("detach", &Tensor::detach)
      .def("detach_",
           [](nb::handle self) {
             Tensor& t = nb::cast<Tensor&>(self);
             t = t.detach();
             return nb::borrow(self);
           })
      // ---- conversions
      .def("_to_dtype", nb::overload_cast<DType>(&Tensor::to, nb::const_))
      .def("_to_device", nb::overload_cast<Device>(&Tensor::to, nb::const_))
      .def("contiguous", &Tensor::contiguous)
      .def("clone", &Tensor::clone)
      .def("cpu", &Tensor::cpu)
      // ---- arithmetic
      .def("__add__", [](const Tensor& a, nb::handle b) {
        return binary(a, b, [](const Tensor& x, const Tensor& y) { return dtr::add(x, y); },
                      [](const Tensor& x, Scalar s) { return dtr::add(x, s); });
      })
      .def("__radd__", [](const Tensor& a, nb::handle b) {
        return binary(a, b, [](const Tensor& x, const Tensor& y) { return dtr::add(y, x); },
                      [](const Tensor& x, Scalar s) { return s + x; });
      })
      .def("__sub__", [](const Tensor& a, nb::handle b) {
        return binary(a, b, [](const Tensor& x, const Tensor& y) { return dtr::sub(x, y); },
                      [](const Tensor& x, Scalar s) { return dtr::sub(x, s); });
      })
      .def("__rsub__", [](const Tensor& a, nb::handle b) {
        return binary(a, b, [](const Tensor& x, const Tensor& y) { return dtr::sub(y, x); },
                      [](const Tensor& x, Scalar s) { return s - x; });
      })
      .def("__mul__", [](const Tensor& a, nb::handle b) {
        return binary(a, b, [](const Tensor& x, const Tensor& y) { return dtr::mul(x, y); },
                      [](const Tensor& x, Scalar s) { return dtr::mul(x, s); });
      })
      .def("__rmul__", [](const Tensor& a, nb::handle b) {
        return binary(a, b, [](const Tensor& x, const Tensor& y) { return dtr::mul(y, x); },
                      [](const Tensor& x, Scalar s) { return s * x; });
      })
      .def("__truediv__", [](const Tensor& a, nb::handle b) {
        return binary(a, b, [](const Tensor& x, const Tensor& y) { return dtr::div(x, y); },
                      [](const Tensor& x, Scalar s) { return dtr::div(x, s); });
      })
      .def("__rtruediv__", [](const Tensor& a, nb::handle b) {
        return binary(a, b, [](const Tensor& x, const Tensor& y) { return dtr::div(y, x); },
                      [](const Tensor& x, Scalar s) { return s / x; });
      })
      .def("__pow__", [](const Tensor& a, nb::handle b) {
        return binary(a, b, [](const Tensor& x, const Tensor& y) { return dtr::pow(x, y); },
                      [](const Tensor& x, Scalar s) { return dtr::pow(x, s); });
      })
      .def("__rpow__", [](const Tensor& a, nb::handle b) {
        return binary(a, b, [](const Tensor& x, const Tensor& y) { return dtr::pow(y, x); },
                      [](const Tensor& x, Scalar s) {
                        return dtr::pow(full({}, s, TensorOptions().device(x.device())), x);
                      });
      })
      .def("__matmul__",
           [](const Tensor& a, const Tensor& b) {
             nb::gil_scoped_release release;
             return dtr::matmul(a, b);
           })
      .def("__neg__", [](const Tensor& a) { return dtr::neg(a); })
      .def("__pos__", [](const Tensor& a) { return a; })
      .def("__abs__", [](const Tensor& a) { return dtr::abs(a); })
#define DTR_PY_COMPARE(py, fn)                                                                  \
  .def(py, [](const Tensor& a, nb::handle b) {                                                \
    return binary(a, b, [](const Tensor& x, const Tensor& y) { return dtr::fn(x, y); },      \
                  [](const Tensor& x, Scalar s) { return dtr::fn(x, s); });                 \
  })
      DTR_PY_COMPARE("__eq__", eq) DTR_PY_COMPARE("__ne__", ne) DTR_PY_COMPARE("__lt__", lt)
      DTR_PY_COMPARE("__le__", le) DTR_PY_COMPARE("__gt__", gt) DTR_PY_COMPARE("__ge__", ge)
      DTR_PY_COMPARE("eq", eq) DTR_PY_COMPARE("ne", ne) DTR_PY_COMPARE("lt", lt)
      DTR_PY_COMPARE("le", le) DTR_PY_COMPARE("gt", gt) DTR_PY_COMPARE("ge", ge)
#undef DTR_PY_COMPARE
      .def("__iadd__", &inplace_add<false>, nb::arg("other"), nb::arg("alpha") = 1)
      .def("__isub__", &inplace_add<true>, nb::arg("other"), nb::arg("alpha") = 1)
      .def("__imul__", &inplace_mul)
      .def("__itruediv__", &inplace_div)
      .def("add_", &inplace_add<false>, nb::arg("other"), nb::arg("alpha") = 1)
      .def("sub_", &inplace_add<true>, nb::arg("other"), nb::arg("alpha") = 1)
      .def("mul_", &inplace_mul)
      .def("div_", &inplace_div)
      .def("copy_", [](nb::handle s, const Tensor& src) {
        nb::cast<Tensor&>(s).copy_(src);
        return nb::borrow(s);
      })
      .def("fill_", [](nb::handle s, nb::handle v) {
        nb::cast<Tensor&>(s).fill_(to_scalar(v));
        return nb::borrow(s);
      })
      .def("zero_", [](nb::handle s) {
        nb::cast<Tensor&>(s).zero_();
        return nb::borrow(s);
      })
      .def("clamp_", [](nb::handle s, nb::handle lo, nb::handle hi) {
        std::optional<Scalar> a, b;
        if (!lo.is_none()) a = to_scalar(lo);
        if (!hi.is_none()) b = to_scalar(hi);
        nb::cast<Tensor&>(s).clamp_(a, b);
        return nb::borrow(s);
      }, nb::arg("min") = nb::none(), nb::arg("max") = nb::none())
      .def("masked_fill_", [](nb::handle s, const Tensor& mask, nb::handle v) {
        nb::cast<Tensor&>(s).masked_fill_(mask, to_scalar(v));
        return nb::borrow(s);
      })
#define DTR_PY_INPLACE_UNARY(name)                 \
  .def(#name, [](nb::handle s) {                 \
    nb::cast<Tensor&>(s).name();                 \
    return nb::borrow(s);                        \
  })
      DTR_PY_INPLACE_UNARY(relu_) DTR_PY_INPLACE_UNARY(neg_) DTR_PY_INPLACE_UNARY(exp_)
      DTR_PY_INPLACE_UNARY(sqrt_) DTR_PY_INPLACE_UNARY(tanh_) DTR_PY_INPLACE_UNARY(sigmoid_)
#undef DTR_PY_INPLACE_UNARY
      // ---- views
      .def("_view", [](const Tensor& t, const std::vector<int64_t>& s) { return t.view(s); })
      .def("_reshape", [](const Tensor& t, const std::vector<int64_t>& s) { return t.reshape(s); })
      .def("_permute", [](const Tensor& t, const std::vector<int64_t>& s) { return t.permute(s); })
      .def("_expand", [](const Tensor& t, const std::vector<int64_t>& s) { return t.expand(s); })
      .def("transpose", &Tensor::transpose)
      .def("t", &Tensor::t)
      .def_prop_ro("T", [](const Tensor& t) {
        std::vector<int64_t> d;
        for (int64_t i = t.dim() - 1; i >= 0; --i) d.push_back(i);
        return t.permute(d);
      })
      .def_prop_ro("mT", [](const Tensor& t) { return t.transpose(-2, -1); })
      .def("narrow", &Tensor::narrow)
      .def("select", &Tensor::select)
      .def("unsqueeze", &Tensor::unsqueeze)
      .def("squeeze", [](const Tensor& t, std::optional<int64_t> d) {
        return d ? t.squeeze(*d) : t.squeeze();
      }, nb::arg("dim") = nb::none())
      .def("flatten", &Tensor::flatten, nb::arg("start_dim") = 0, nb::arg("end_dim") = -1)
      .def("expand_as", [](const Tensor& t, const Tensor& o) { return t.expand(o.shape()); })
      .def("view_as", [](const Tensor& t, const Tensor& o) { return t.view(o.shape()); })
      .def("reshape_as", [](const Tensor& t, const Tensor& o) { return t.reshape(o.shape()); });
}

}  // namespace dtr::python

NB_MODULE(_C, m) {
  using namespace dtr::python;
  m.doc() = "dtr's C++ core (see the package dtr)";
  bind_errors(m);
  bind_types(m);
  bind_tensor(m);
  bind_functions(m);
  bind_nn_optim(m);
  bind_ops(m);
  bind_more_functions(m);
  m.def("from_numpy", &from_numpy, nb::arg("array"), nb::arg("owner"));
  m.def("from_dlpack", &from_dlpack_object, nb::arg("ext_tensor"));
  m.def("to_dlpack", &to_dlpack_capsule, nb::arg("tensor"));
  // DTR_TRACE's closing "]" (Note [trace on signals]):
  // an unhandled KeyboardInterrupt finalizes the interpreter, which runs
  // Python's exit functions, and then ends the process with SIGINT, which
  // runs no C exit handler. Closing here covers that exit and every other.
  nb::module_::import_("atexit").attr("register")(nb::cpp_function([] { dtr::trace::close_files(); }));
}
