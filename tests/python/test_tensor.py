import math

import numpy as np
import pytest

import dtr


def test_factories_take_size_as_varargs_or_a_sequence():
    assert dtr.zeros(2, 3).shape == (2, 3)
    assert dtr.ones((2, 3)).shape == (2, 3)
    assert dtr.randn([4]).shape == (4,)
    assert dtr.zeros(2, 3).tolist() == [[0.0] * 3] * 2
    assert dtr.full((2,), 7).tolist() == [7]  * 2
    assert dtr.full((2,), 7).dtype == dtr.int64
    assert dtr.full((1,), 1.5).dtype == dtr.float32
    assert dtr.arange(5).tolist() == [0, 1, 2, 3, 4]
    assert dtr.arange(0, 1, 0.25).tolist() == [0, 0.25, 0.5, 0.75]
    assert dtr.arange(0, 1, 0.25).dtype == dtr.float32
    assert dtr.zeros(2, dtype=dtr.float64).dtype == dtr.float64
    r = dtr.randint(3, 7, (100,))
    assert r.dtype == dtr.int64 and min(r.tolist()) >= 3 and max(r.tolist()) < 7
    assert dtr.randint(5, (3,)).shape == (3,)


def test_tensor_from_data_infers_pytorch_dtypes():
    assert dtr.tensor([1.0, 2.0]).dtype == dtr.float32
    assert dtr.tensor([1, 2]).dtype == dtr.int64
    assert dtr.tensor([True, False]).dtype == dtr.bool
    assert dtr.tensor([True, False]).tolist() == [True, False]
    assert dtr.tensor(np.array([1.0], dtype=np.float64)).dtype == dtr.float64
    assert dtr.tensor([[1, 2], [3, 4]], dtype=dtr.float32).tolist() == [[1.0, 2.0], [3.0, 4.0]]
    assert dtr.tensor(3.5).shape == () and dtr.tensor(3.5).item() == 3.5
    t = dtr.tensor([1.0], requires_grad=True)
    assert t.requires_grad and t.is_leaf


def test_metadata():
    x = dtr.zeros(2, 3, 4)
    assert x.shape == (2, 3, 4) and x.size() == (2, 3, 4) and x.size(-1) == 4
    assert x.dim() == 3 and x.ndim == 3 and x.numel() == 24 and len(x) == 2
    assert x.dtype == dtr.float32 and str(x.dtype) == "dtr.float32"
    assert x.device == dtr.device("cpu") and str(x.device) == "cpu" and x.device == "cpu"
    assert x.stride() == (12, 4, 1) and x.is_contiguous()
    assert x.element_size() == 4 and x.nbytes == 96


def test_item_tolist_and_python_conversions():
    x = dtr.tensor([[1.5, 2.0], [3.0, 4.0]])
    assert x.tolist() == [[1.5, 2.0], [3.0, 4.0]]
    assert x[0, 0].item() == 1.5 and isinstance(x[0, 0].item(), float)
    assert isinstance(dtr.tensor([3]).item(), int)
    assert float(x[1, 1]) == 4.0 and int(dtr.tensor([5])) == 5
    assert bool(dtr.tensor([1])) is True
    with pytest.raises(ValueError, match="cannot be converted to a scalar"):
        x.item()


def test_arithmetic_operators_match_numpy():
    a = np.array([[1.0, -2.0, 3.0]], dtype=np.float32)
    b = np.array([[0.5], [2.0]], dtype=np.float32)
    x, y = dtr.tensor(a), dtr.tensor(b)
    np.testing.assert_array_equal((x + y).numpy(), a + b)
    np.testing.assert_array_equal((x - y).numpy(), a - b)
    np.testing.assert_array_equal((x * y).numpy(), a * b)
    np.testing.assert_array_equal((x / y).numpy(), a / b)
    np.testing.assert_array_equal((x + 1).numpy(), a + 1)
    np.testing.assert_array_equal((2 - x).numpy(), 2 - a)
    np.testing.assert_array_equal((3 * x).numpy(), 3 * a)
    np.testing.assert_array_equal((1 / y).numpy(), 1 / b)
    np.testing.assert_array_equal((-x).numpy(), -a)
    np.testing.assert_array_equal((x ** 2).numpy(), a ** 2)
    np.testing.assert_array_equal((x > 0).numpy(), a > 0)
    np.testing.assert_array_equal((x == 3.0).numpy(), a == 3.0)
    assert (x > 0).dtype == dtr.bool


def test_integer_dtype_promotion_follows_pytorch():
    i = dtr.tensor([1, 2])
    assert (i + 1).dtype == dtr.int64
    assert (i + 2.5).dtype == dtr.float32
    assert (i / 2).dtype == dtr.float32
    assert (i / 2).tolist() == [0.5, 1.0]


def test_matmul_operator():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.arange(12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_allclose((dtr.tensor(a) @ dtr.tensor(b)).numpy(), a @ b, rtol=1e-6)


def test_inplace_operators_keep_the_object():
    x = dtr.zeros(3)
    y = x
    x += 2
    x *= dtr.tensor([1.0, 2.0, 3.0])
    x -= 1
    x /= 2
    assert y is x
    assert x.tolist() == [0.5, 1.5, 2.5]
    assert x.add_(dtr.ones(3), alpha=2) is x
    assert x.tolist() == [2.5, 3.5, 4.5]
    assert x.zero_().tolist() == [0, 0, 0]
    assert x.fill_(4).tolist() == [4, 4, 4]


def test_reductions_with_dim_and_keepdim():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    x = dtr.tensor(a)
    assert x.sum().item() == 15
    assert x.sum(dim=1, keepdim=True).shape == (2, 1)
    assert x.sum(dim=1, keepdim=True).tolist() == [[3.0], [12.0]]
    assert x.sum(dim=(0, 1)).item() == 15
    assert x.mean(0).tolist() == [1.5, 2.5, 3.5]
    values, indices = x.max(dim=1)
    assert values.tolist() == [2, 5] and indices.tolist() == [2, 2]
    assert x.max().item() == 5
    assert x.argmax(dim=0).tolist() == [1, 1, 1]
    np.testing.assert_allclose(x.var(1).numpy(), a.var(1, ddof=1), rtol=1e-6)


def test_views_share_storage():
    x = dtr.arange(6).float()
    v = x.view(2, 3)
    assert v.shape == (2, 3)
    assert x.reshape(3, 2).shape == (3, 2)
    assert v.t().shape == (3, 2) and v.T.shape == (3, 2)
    assert v.permute(1, 0).shape == (3, 2)
    assert v.unsqueeze(0).shape == (1, 2, 3) and v.unsqueeze(0).squeeze(0).shape == (2, 3)
    assert v.flatten().shape == (6,)
    assert dtr.ones(1, 3).expand(4, 3).shape == (4, 3)
    v[0, 0] = 10.0
    assert x[0].item() == 10.0


def test_indexing():
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    x = dtr.tensor(a)
    for idx in [0, -1, (1, 2), (slice(None), 1), (Ellipsis, 1), (0, slice(1, None, 2)),
                (None, 1), (slice(None), None, 0), (1, Ellipsis, slice(0, 2))]:
        np.testing.assert_array_equal(x[idx].numpy(), a[idx], err_msg=str(idx))
    np.testing.assert_array_equal(x[dtr.tensor([1, 0, 1])].numpy(), a[[1, 0, 1]])
    np.testing.assert_array_equal(x[:, [2, 0]].numpy(), a[:, [2, 0]])
    with pytest.raises(IndexError, match="out of bounds"):
        x[2]
    with pytest.raises(IndexError, match="too many indices"):
        x[0, 0, 0, 0]
    x[1, :, 0] = dtr.tensor([7.0, 8.0, 9.0])
    a[1, :, 0] = [7, 8, 9]
    x[0] = 0
    a[0] = 0
    np.testing.assert_array_equal(x.numpy(), a)


def test_to_dtype_and_device():
    x = dtr.tensor([1.7, -2.2])
    assert x.to(dtr.int64).tolist() == [1, -2]
    assert x.to(dtr.float64).dtype == dtr.float64
    assert x.double().dtype == dtr.float64 and x.long().dtype == dtr.int64
    assert x.to("cpu") is x
    assert x.to(dtr.device("cpu"), dtr.float16).dtype == dtr.float16
    assert x.to(dtr.zeros(1, dtype=dtr.bfloat16)).dtype == dtr.bfloat16
    assert x.bfloat16().float().tolist() == [1.703125, -2.203125]


def test_repr_names_shape_and_dtype():
    r = repr(dtr.zeros(2, 3))
    assert "shape=[2, 3]" in r and "float32" in r


def test_manual_seed_makes_draws_reproducible():
    dtr.manual_seed(42)
    a = dtr.randn(5).tolist()
    dtr.manual_seed(42)
    assert dtr.randn(5).tolist() == a
    state = dtr.get_rng_state()
    b = dtr.rand(3).tolist()
    dtr.set_rng_state(state)
    assert dtr.rand(3).tolist() == b
    assert all(math.isfinite(v) for v in a)
