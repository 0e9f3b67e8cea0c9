"""The library's errors arrive as Python's exceptions with the library's messages."""
import pytest

import dtr
import dtr.nn.functional as F


def test_value_error_from_shapes():
    with pytest.raises(ValueError, match=r"add.*\[2, 3\].*\[4\]"):
        dtr.zeros(2, 3) + dtr.zeros(4)


def test_type_error_from_dtypes():
    with pytest.raises(TypeError, match="gelu"):
        F.gelu(dtr.zeros(2, dtype=dtr.int64))
    with pytest.raises(TypeError):
        dtr.randn(2, dtype=dtr.int64)


def test_index_error():
    with pytest.raises(IndexError, match="out of range"):
        F.embedding(dtr.tensor([5]), dtr.zeros(3, 2))
    with pytest.raises(IndexError):
        dtr.zeros(2, 3).size(5)


def test_not_implemented_error():
    with pytest.raises(NotImplementedError):
        F.dropout(dtr.zeros(2, 3), inplace=True)


def test_out_of_memory_is_a_memory_error_with_the_report():
    assert issubclass(dtr.OutOfMemoryError, MemoryError)
    dtr.memory.set_budget(1024)
    with pytest.raises(dtr.OutOfMemoryError, match="out of memory under the budget"):
        dtr.zeros(1024, 1024) + 1
    with pytest.raises(MemoryError):
        dtr.zeros(1024, 1024) + 1


def test_device_error_is_a_runtime_error():
    assert issubclass(dtr.DeviceError, RuntimeError)
    with pytest.raises(dtr.DeviceError):
        dtr.zeros(2, device="cuda")


def test_bad_budget_strings():
    with pytest.raises(ValueError, match="set_budget"):
        dtr.memory.set_budget("12 parsecs")
    with pytest.raises(ValueError):
        dtr.memory.set_budget(0)
    with pytest.raises(TypeError):
        dtr.memory.set_budget(1.5)


def test_numbers_and_tensors_only():
    with pytest.raises(TypeError):
        dtr.zeros(2) + "a"
    with pytest.raises(TypeError):
        dtr.full((2,), "x")


def test_errors_leave_the_state_usable():
    x = dtr.ones(3, requires_grad=True)
    with pytest.raises(ValueError):
        x + dtr.ones(4)
    (x * 2).sum().backward()
    assert x.grad.tolist() == [2.0, 2.0, 2.0]


def test_runtime_errors_of_pytorch_are_runtime_errors():
    with pytest.raises(RuntimeError, match="ambiguous"):
        bool(dtr.ones(2))
    with pytest.raises(RuntimeError, match="requires grad"):
        dtr.ones(2, requires_grad=True).numpy()
