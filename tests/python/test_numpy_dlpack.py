"""numpy conversion and DLPack interchange share memory (no copies), keep the
producer alive for as long as the consumer needs it, and release it after."""
import gc
import weakref

import numpy as np
import pytest

import dtr

DTYPES = [np.float32, np.float64, np.float16, np.int64, np.int32, np.uint8, np.bool_]


@pytest.mark.parametrize("npdtype", DTYPES)
def test_numpy_round_trip_keeps_values_and_dtype(npdtype):
    a = (np.arange(12).reshape(3, 4) % 3).astype(npdtype)
    t = dtr.from_numpy(a)
    assert t.shape == (3, 4)
    back = t.numpy()
    assert back.dtype == a.dtype
    np.testing.assert_array_equal(back, a)
    np.testing.assert_array_equal(dtr.tensor(a).numpy(), a)


def test_from_numpy_shares_memory_both_ways():
    a = np.arange(4, dtype=np.float32)
    t = dtr.from_numpy(a)
    a[0] = 10
    assert t[0].item() == 10
    t.add_(1)
    assert a.tolist() == [11, 2, 3, 4]


def test_from_numpy_keeps_strides_and_offset():
    a = np.arange(24, dtype=np.float64).reshape(4, 6)[1:, ::2]
    t = dtr.from_numpy(a)
    assert t.shape == (3, 3) and t.stride() == (6, 2)
    np.testing.assert_array_equal(t.numpy(), a)


def test_from_numpy_keeps_the_array_alive_until_the_tensor_goes():
    a = np.arange(5, dtype=np.float32)
    ref = weakref.ref(a)
    t = dtr.from_numpy(a)
    v = t[1:]  # a view keeps the storage too
    del a, t
    gc.collect()
    assert ref() is not None and v.tolist() == [1, 2, 3, 4]
    del v
    gc.collect()
    assert ref() is None


def test_numpy_shares_the_tensors_memory_read_only_by_default():
    t = dtr.arange(4).float()
    n = t.numpy()
    assert not n.flags.writeable
    t.add_(1)
    assert n.tolist() == [1, 2, 3, 4]
    with pytest.raises(ValueError):
        n[0] = 5


def test_numpy_writable_writes_through():
    t = dtr.zeros(3)
    n = t.numpy(writable=True)
    n[1] = 7
    assert t.tolist() == [0, 7, 0]


def test_reading_numpy_of_a_saved_tensor_does_not_break_backward():
    x = dtr.randn(4, requires_grad=True)
    y = x.exp()  # saves its output for backward
    np.asarray(y.detach())
    y.detach().numpy()
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), y.detach().numpy())


def test_numpy_refuses_a_tensor_that_requires_grad():
    with pytest.raises(RuntimeError, match=r"Use tensor.detach\(\).numpy\(\) instead"):
        dtr.ones(2, requires_grad=True).numpy()


def test_numpy_of_bfloat16_is_a_type_error():
    with pytest.raises(TypeError, match="bfloat16"):
        dtr.ones(2, dtype=dtr.bfloat16).numpy()


def test_dlpack_device():
    assert dtr.ones(1).__dlpack_device__() == (1, 0)


def test_capsule_can_be_consumed_once():
    cap = dtr.to_dlpack(dtr.ones(2))
    assert dtr.from_dlpack(cap).tolist() == [1, 1]
    with pytest.raises(ValueError, match="consumed"):
        dtr.from_dlpack(cap)


def test_numpy_from_dlpack_of_a_dtr_tensor():
    t = dtr.arange(6).float().view(2, 3)
    n = np.from_dlpack(t)
    np.testing.assert_array_equal(n, np.arange(6, dtype=np.float32).reshape(2, 3))


def test_dtr_to_torch_shares_memory_and_releases_the_storage(torch):
    from torch.utils import dlpack
    t = dtr.arange(6).float().view(2, 3)[:, 1:]  # a view: strides and offset cross over
    for make in (lambda x: dlpack.from_dlpack(dtr.to_dlpack(x)), lambda x: torch.from_dlpack(x)):
        tt = make(t)
        assert tt.tolist() == t.tolist() and tt.stride() == t.stride()
        tt[0, 0] = 100.0
        assert t[0, 0].item() == 100.0
        del tt
    # The export keeps the storage (4 MiB) resident after the last dtr handle goes,
    # until torch's tensor is freed and calls the deleter.
    base = dtr.memory.stats()["resident_bytes"]
    x = dtr.zeros(1 << 20)
    tt = torch.from_dlpack(x)
    del x
    gc.collect()
    assert dtr.memory.stats()["resident_bytes"] >= base + (4 << 20)
    assert tt.sum().item() == 0
    del tt
    gc.collect()
    assert dtr.memory.stats()["resident_bytes"] < base + (4 << 20)


def test_torch_to_dtr_shares_memory_and_runs_the_deleter_once(torch):
    from torch.utils import dlpack
    a = np.arange(6, dtype=np.float32)
    ref = weakref.ref(a)
    tt = torch.from_numpy(a)  # torch's storage keeps `a` alive
    d1 = dtr.from_dlpack(tt)
    d2 = dtr.from_dlpack(dlpack.to_dlpack(tt[2:]))
    tt[3] = 42.0
    assert d1[3].item() == 42.0 and d2[1].item() == 42.0
    d1.mul_(2)
    assert tt[0].item() == 0 and tt[1].item() == 2
    del tt, a
    gc.collect()
    assert ref() is not None
    del d1
    gc.collect()
    assert ref() is not None and d2.tolist() == [4, 84, 8, 10]
    del d2
    gc.collect()
    assert ref() is None


def test_torch_values_round_trip_for_each_dtype(torch):
    for dt in (torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64,
               torch.int32, torch.uint8):
        tt = (torch.arange(6) % 4).to(dt)
        back = torch.from_dlpack(dtr.from_dlpack(tt))
        assert back.dtype == dt and torch.equal(back, tt)


# ---- numpy scalars in arithmetic ----------------------------------------------------

NP_SCALARS = [np.float32(2), np.float64(2), np.float16(2), np.int64(2), np.int32(2), np.uint8(2)]


@pytest.mark.parametrize("s", NP_SCALARS, ids=lambda s: type(s).__name__)
def test_numpy_scalars_in_arithmetic_give_tensors_with_a_graph(s):
    # torch.Tensor's __array_priority__ makes numpy hand `np.float32(2) * x` to
    # x.__rmul__, which takes a numpy scalar as a Python number of its kind.
    x = dtr.tensor([1.0, 2.0, 4.0], requires_grad=True)
    results = {"x*s": x * s, "s*x": s * x, "x+s": x + s, "s+x": s + x, "x-s": x - s,
               "s-x": s - x, "x/s": x / s, "s/x": s / x, "x**s": x ** s, "s**x": s ** x}
    for name, y in results.items():
        assert isinstance(y, dtr.Tensor), (name, type(y))
        assert y.dtype == dtr.float32, name  # a numpy scalar is a Python scalar: no promotion
        assert y.grad_fn is not None, name
    assert results["s-x"].tolist() == [1.0, 0.0, -2.0]
    assert results["s/x"].tolist() == [2.0, 1.0, 0.5]
    # Comparisons, both ways round.
    assert (x > s).tolist() == [False, False, True]
    assert (s < x).tolist() == [False, False, True]
    assert (x == s).tolist() == [False, True, False]
    assert (s >= x).tolist() == [True, True, False]


def test_numpy_scalar_arithmetic_gradients_flow():
    x = dtr.tensor([1.0, 2.0, 4.0], requires_grad=True)
    y = np.float32(3) * x - np.int64(1) + x / np.float64(2) + np.float64(8) / x
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 3 + 0.5 - 8 / np.array([1.0, 4.0, 16.0]))


def test_numpy_scalars_follow_pytorchs_dtype_rule():
    i = dtr.tensor([1, 2])
    assert (i * np.int32(3)).dtype == dtr.int64
    assert (np.int64(3) + i).dtype == dtr.int64
    assert (i * np.float64(1.5)).dtype == dtr.float32  # the default float dtype
    assert (np.float16(0.5) * i).tolist() == [0.5, 1.0]
    assert (i * np.bool_(True)).dtype == dtr.int64
    d = dtr.tensor(np.array([1.0, 2.0]))
    assert (np.float32(2) * d).dtype == dtr.float64
    h = dtr.ones(2, dtype=dtr.bfloat16)
    assert (h * np.float64(2)).dtype == dtr.bfloat16
    assert (dtr.ones(2) * np.bool_(False)).tolist() == [0.0, 0.0]


def test_numpy_scalars_in_inplace_operators_keep_the_tensor():
    x = dtr.zeros(3)
    y = x
    x += np.float32(2)
    x *= np.int64(3)
    x -= np.float64(1)
    x /= np.float32(2)
    assert y is x and isinstance(x, dtr.Tensor)
    assert x.tolist() == [2.5, 2.5, 2.5]


def test_a_numpy_scalar_of_an_unsupported_kind_is_refused():
    with pytest.raises(TypeError):
        dtr.ones(2) * np.complex64(1 + 2j)


# ---- from_numpy: read-only and byte order -------------------------------------------

def test_from_numpy_copies_a_read_only_array_and_warns():
    a = np.arange(4.0)
    a.setflags(write=False)
    with pytest.warns(UserWarning, match="not writable"):
        t = dtr.from_numpy(a)
    assert t.dtype == dtr.float64 and t.tolist() == [0.0, 1.0, 2.0, 3.0]
    t.add_(1)  # writes the tensor's own copy, never the read-only memory
    assert t.tolist() == [1.0, 2.0, 3.0, 4.0]
    assert a.tolist() == [0.0, 1.0, 2.0, 3.0]

    buf = np.frombuffer(np.array([1.5, -2.0], dtype=np.float32).tobytes(), dtype=np.float32)
    assert not buf.flags.writeable
    with pytest.warns(UserWarning, match="not writable"):
        u = dtr.from_numpy(buf)
    assert u.dtype == dtr.float32 and u.tolist() == [1.5, -2.0]
    u.mul_(2)
    assert buf.tolist() == [1.5, -2.0]


def test_from_numpy_of_a_writable_array_does_not_warn():
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        dtr.from_numpy(np.arange(3.0))


def test_from_numpy_refuses_a_non_native_byte_order():
    swapped = ">f4" if np.little_endian else "<f4"
    with pytest.raises(ValueError, match="byte order different from the native byte order"):
        dtr.from_numpy(np.arange(4, dtype=swapped))
    native = np.arange(4, dtype="=f4")
    assert dtr.from_numpy(native).tolist() == [0.0, 1.0, 2.0, 3.0]
