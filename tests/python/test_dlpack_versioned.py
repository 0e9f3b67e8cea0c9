"""DLPack 1.x in Python: Tensor.__dlpack__(*, stream, max_version, dl_device, copy) as the
array API standard says, "dltensor_versioned" capsules and their flags, dtr.from_dlpack's
versioned request with the legacy fallback. An outside producer of versioned capsules
(read-only, other versions) is built with ctypes, as PyTorch 2 / NumPy 2 are not installed."""
import ctypes
import gc

import numpy as np
import pytest

import dtr

READ_ONLY = 1 << 0
IS_COPIED = 1 << 1


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensorVersioned(ctypes.Structure):
    pass


DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensorVersioned))
DLManagedTensorVersioned._fields_ = [
    ("version", DLPackVersion), ("manager_ctx", ctypes.c_void_p), ("deleter", DELETER),
    ("flags", ctypes.c_uint64), ("dl_tensor", DLTensor)]

_api = ctypes.pythonapi
_api.PyCapsule_New.restype = ctypes.py_object
_api.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_api.PyCapsule_GetPointer.restype = ctypes.c_void_p
_api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_IsValid.restype = ctypes.c_int
_api.PyCapsule_IsValid.argtypes = [ctypes.py_object, ctypes.c_char_p]


def capsule_name(cap):
    for name in ("dltensor_versioned", "used_dltensor_versioned", "dltensor", "used_dltensor"):
        if _api.PyCapsule_IsValid(cap, name.encode()):
            return name
    return None


def managed_of(cap):
    """The DLManagedTensorVersioned inside an unconsumed versioned capsule."""
    p = _api.PyCapsule_GetPointer(cap, b"dltensor_versioned")
    return ctypes.cast(p, ctypes.POINTER(DLManagedTensorVersioned)).contents


class Producer:
    """A float32 buffer (numpy) exported as one DLManagedTensorVersioned, with its
    deleter counting calls. The capsule has no destructor: the test keeps the struct."""

    def __init__(self, values, flags=0, version=(1, 0)):
        self.array = np.array(values, dtype=np.float32)
        self.shape = (ctypes.c_int64 * 1)(self.array.size)
        self.deleted = 0

        def deleter(_):
            self.deleted += 1
        self._deleter = DELETER(deleter)
        m = DLManagedTensorVersioned()
        m.version = DLPackVersion(*version)
        m.deleter = self._deleter
        m.flags = flags
        m.dl_tensor.data = self.array.ctypes.data
        m.dl_tensor.device = DLDevice(1, 0)
        m.dl_tensor.ndim = 1
        m.dl_tensor.dtype = DLDataType(2, 32, 1)
        m.dl_tensor.shape = self.shape
        self.managed = m

    def capsule(self):
        return _api.PyCapsule_New(ctypes.addressof(self.managed), b"dltensor_versioned", None)


# ---- export ----------------------------------------------------------------------------

def test_max_version_picks_the_capsule_kind():
    t = dtr.arange(4).float()
    assert capsule_name(t.__dlpack__()) == "dltensor"
    assert capsule_name(t.__dlpack__(max_version=(0, 8))) == "dltensor"
    for mv in ((1, 0), (1, 5), (2, 0)):
        cap = t.__dlpack__(max_version=mv)
        assert capsule_name(cap) == "dltensor_versioned"
        m = managed_of(cap)
        assert (m.version.major, m.flags) == (1, 0)
        assert m.dl_tensor.data == managed_of(t.__dlpack__(max_version=(1, 0))).dl_tensor.data


def test_dtr_to_dtr_through_both_capsules_shares_memory_and_renames_them():
    for mv, used in ((None, "used_dltensor"), ((1, 0), "used_dltensor_versioned")):
        t = dtr.zeros(3)
        cap = t.__dlpack__(max_version=mv)
        u = dtr.from_dlpack(cap)
        assert capsule_name(cap) == used
        u.add_(2)
        assert t.tolist() == [2, 2, 2]
        with pytest.raises(ValueError, match="consumed"):
            dtr.from_dlpack(cap)
    t = dtr.arange(6).float().view(2, 3)[:, 1:]
    u = dtr.from_dlpack(t)  # the object: asked for a versioned capsule
    assert u.tolist() == t.tolist() and u.stride() == t.stride()


def test_copy_true_exports_a_flagged_copy_and_copy_false_shares():
    t = dtr.arange(4).float()
    cap = t.__dlpack__(max_version=(1, 0), copy=True)
    m = managed_of(cap)
    assert m.flags == IS_COPIED
    u = dtr.from_dlpack(cap)
    u.add_(10)
    assert t.tolist() == [0, 1, 2, 3] and u.tolist() == [10, 11, 12, 13]
    legacy = dtr.from_dlpack(t.__dlpack__(copy=True))
    legacy.add_(1)
    assert t.tolist() == [0, 1, 2, 3]
    shared = dtr.from_dlpack(t.__dlpack__(max_version=(1, 0), copy=False))
    shared.add_(1)
    assert t.tolist() == [1, 2, 3, 4]
    assert managed_of(t.__dlpack__(max_version=(1, 0), copy=False)).flags == 0


def test_dl_device_and_bad_arguments_give_the_standards_errors():
    t = dtr.ones(2)
    assert dtr.from_dlpack(t.__dlpack__(dl_device=(1, 0), copy=False)).tolist() == [1, 1]
    assert dtr.from_dlpack(t.__dlpack__(dl_device=t.__dlpack_device__())).tolist() == [1, 1]
    with pytest.raises(BufferError, match="copy=False"):
        t.__dlpack__(dl_device=(2, 0), copy=False)
    with pytest.raises(BufferError, match=r"\(7, 0\)"):
        t.__dlpack__(dl_device=(7, 0))  # Vulkan: dtr has no such device
    try:  # a copy to cuda:0 where there is one, else a BufferError
        cap = t.__dlpack__(dl_device=(2, 0))
    except BufferError as e:
        assert "(2, 0)" in str(e)
    else:
        assert capsule_name(cap) == "dltensor"
    with pytest.raises(TypeError, match="max_version"):
        t.__dlpack__(max_version="1.0")
    with pytest.raises(TypeError, match="max_version"):
        t.__dlpack__(max_version=(1,))
    with pytest.raises(TypeError, match="copy"):
        t.__dlpack__(copy="yes")
    with pytest.raises(TypeError, match="dl_device"):
        t.__dlpack__(dl_device="cpu")
    with pytest.raises(TypeError):
        t.__dlpack__(None)  # every argument is keyword-only
    with pytest.raises(TypeError, match="capsule"):
        dtr.from_dlpack(3)


# ---- import ----------------------------------------------------------------------------

def test_read_only_capsule_is_shared_and_refuses_writes():
    p = Producer([1, 2, 3])
    p.managed.flags = READ_ONLY
    cap = p.capsule()
    u = dtr.from_dlpack(cap)
    assert capsule_name(cap) == "used_dltensor_versioned"
    p.array[0] = 7  # shared, not copied
    assert u.tolist() == [7, 2, 3] and (u * 2).tolist() == [14, 4, 6]
    for write in (lambda: u.add_(1), lambda: u[1:].mul_(2), lambda: u.__setitem__(0, 5.0),
                  lambda: u.copy_(dtr.zeros(3)), lambda: u.numpy(writable=True)):
        with pytest.raises(ValueError, match="read-only"):
            write()
    assert p.array.tolist() == [7, 2, 3]
    n = u.numpy()
    assert not n.flags.writeable and n.tolist() == [7, 2, 3]
    del n
    # Exports keep the flag or refuse to drop it; a copy is writable.
    assert managed_of(u.__dlpack__(max_version=(1, 0))).flags == READ_ONLY
    with pytest.raises(BufferError, match="read-only"):
        u.__dlpack__()
    with pytest.raises(BufferError, match="read-only"):
        dtr.to_dlpack(u)
    copied = dtr.from_dlpack(u.__dlpack__(copy=True))
    copied.add_(1)
    assert copied.tolist() == [8, 3, 4]
    again = dtr.from_dlpack(u)  # dtr -> dtr keeps it read-only
    with pytest.raises(ValueError, match="read-only"):
        again.add_(1)
    c = u.clone()
    c.add_(1)
    assert c.tolist() == [8, 3, 4]
    del u, again
    gc.collect()
    assert p.deleted == 1


def test_other_major_versions_are_refused_and_the_capsule_kept():
    p = Producer([1, 2], version=(2, 1))
    cap = p.capsule()
    with pytest.raises(ValueError, match=r"DLPack 2\.1.*1\.x"):
        dtr.from_dlpack(cap)
    assert capsule_name(cap) == "dltensor_versioned" and p.deleted == 0
    p.managed.version = DLPackVersion(1, 9)  # any 1.x minor is read
    u = dtr.from_dlpack(cap)
    assert u.tolist() == [1, 2] and capsule_name(cap) == "used_dltensor_versioned"
    del u
    gc.collect()
    assert p.deleted == 1


def test_unconsumed_versioned_capsule_runs_the_deleter_once():
    base = dtr.memory.stats()["resident_bytes"]
    x = dtr.zeros(1 << 20)
    cap = x.__dlpack__(max_version=(1, 0))
    del x
    gc.collect()
    assert dtr.memory.stats()["resident_bytes"] >= base + (4 << 20)  # the export holds it
    del cap
    gc.collect()
    assert dtr.memory.stats()["resident_bytes"] < base + (4 << 20)


def test_from_dlpack_asks_for_version_1_then_falls_back_on_type_error():
    t = dtr.arange(3).float()
    calls = []

    class New:
        def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
            calls.append(("new", stream, max_version))
            return t.__dlpack__(stream=stream, max_version=max_version)

        def __dlpack_device__(self):
            return t.__dlpack_device__()

    class Old:  # PyTorch 1.x, NumPy 1.x: no max_version keyword
        def __dlpack__(self, stream=None):
            calls.append(("old", stream))
            return t.__dlpack__(stream=stream)

        def __dlpack_device__(self):
            return t.__dlpack_device__()

    assert dtr.from_dlpack(New()).tolist() == [0, 1, 2]
    assert calls == [("new", None, (1, 0))]
    calls.clear()
    assert dtr.from_dlpack(Old()).tolist() == [0, 1, 2]
    assert calls == [("old", None)]


def test_numpy_1_legacy_both_ways():
    a = np.arange(4, dtype=np.float32)
    u = dtr.from_dlpack(a)  # numpy 1.x: the legacy fallback
    a[0] = 9
    assert u.tolist() == [9, 1, 2, 3]
    t = dtr.arange(3).float()
    n = np.from_dlpack(t)  # numpy 1.x asks for the legacy capsule
    assert n.tolist() == [0, 1, 2]


def test_torch_1_legacy_both_ways(torch):
    tt = torch.arange(4, dtype=torch.float32)
    u = dtr.from_dlpack(tt)  # torch 1.x's __dlpack__ takes no max_version
    tt[0] = 5
    assert u.tolist() == [5, 1, 2, 3]
    t = dtr.zeros(2)
    back = torch.from_dlpack(t)
    back[1] = 3
    assert t.tolist() == [0, 3]


def test_dlpack_arguments_out_of_range_or_of_the_wrong_type_are_typed_errors():
    t = dtr.ones([2])
    # A major version past any int64 is past 1: a versioned capsule.
    cap = t.__dlpack__(max_version=(2**70, 0))
    assert "dltensor_versioned" in repr(cap)
    assert "dltensor_versioned" not in repr(t.__dlpack__(max_version=(-(2**70), 0)))
    for bad in ("x", 1.5, True):
        with pytest.raises(TypeError, match="stream must be None or an int"):
            t.__dlpack__(stream=bad)
    t.__dlpack__(stream=-1)  # an int is accepted, as by PyTorch
