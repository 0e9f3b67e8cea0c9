"""Ops and their gradients against PyTorch (float64 inputs, so both compute the same
function to within rounding; PyTorch 1.13 is the reference where installed)."""
import numpy as np
import pytest

import dtr
import dtr.nn as nn
import dtr.nn.functional as F


def pair(torch, a, requires_grad=True):
    """The same values as a dtr tensor and a torch tensor, both leaves."""
    a = np.asarray(a, dtype=np.float64)
    return (dtr.tensor(a).requires_grad_(requires_grad),
            torch.tensor(a, requires_grad=requires_grad))


def close(d, t, tol=1e-10):
    np.testing.assert_allclose(d.detach().numpy(), t.detach().numpy(), rtol=tol, atol=tol)


rng = np.random.default_rng(0)
X = rng.standard_normal((3, 4))
W = rng.standard_normal((5, 4))
B = rng.standard_normal(5)

CASES = {
    "add_mul_div": lambda m, x, w, b: ((x * 2 + 1) / (x * x + 1)).sum(),
    "exp_log_sqrt": lambda m, x, w, b: (m.exp(x).log() + m.sqrt(x * x + 1)).sum(),
    "tanh_sigmoid": lambda m, x, w, b: (m.tanh(x) * m.sigmoid(x)).mean(),
    "relu_gelu": lambda m, x, w, b: (m.relu(x) + m.gelu(x)).sum(),
    "linear": lambda m, x, w, b: m.linear(x, w, b).pow(2).sum(),
    "matmul": lambda m, x, w, b: (x @ w.t()).sum(dim=1).pow(2).sum(),
    "softmax": lambda m, x, w, b: (m.softmax(x, dim=1) * m.log_softmax(x, dim=0)).sum(),
    "layer_norm": lambda m, x, w, b: (m.layer_norm(x, (4,)) * x).sum(),
    "mean_keepdim": lambda m, x, w, b: (x - x.mean(dim=1, keepdim=True)).pow(2).sum(),
    "views": lambda m, x, w, b: (x.t().reshape(2, 6)[1] * x.view(12)[:6]).sum(),
    "transpose_permute": lambda m, x, w, b: (x.unsqueeze(0).permute(2, 0, 1) * 3).sum(dim=(0, 2)).sum(),
}


def functional(module):
    return {"exp": module.exp, "log": module.log, "sqrt": module.sqrt, "tanh": module.tanh,
            "sigmoid": module.sigmoid}


class _Ns:
    def __init__(self, **kw):
        self.__dict__.update(kw)


def namespace(torch, is_dtr):
    if is_dtr:
        return _Ns(exp=dtr.exp, log=dtr.log, sqrt=dtr.sqrt, tanh=dtr.tanh, sigmoid=dtr.sigmoid,
                   relu=F.relu, gelu=F.gelu, linear=F.linear, softmax=F.softmax,
                   log_softmax=F.log_softmax, layer_norm=F.layer_norm)
    tf = torch.nn.functional
    return _Ns(exp=torch.exp, log=torch.log, sqrt=torch.sqrt, tanh=torch.tanh,
               sigmoid=torch.sigmoid, relu=tf.relu, gelu=tf.gelu, linear=tf.linear,
               softmax=tf.softmax, log_softmax=tf.log_softmax, layer_norm=tf.layer_norm)


@pytest.mark.parametrize("name", sorted(CASES))
def test_value_and_gradients_match_torch(torch, name):
    f = CASES[name]
    dx, tx = pair(torch, X)
    dw, tw = pair(torch, W)
    db, tb = pair(torch, B)
    dl = f(namespace(torch, True), dx, dw, db)
    tl = f(namespace(torch, False), tx, tw, tb)
    close(dl, tl)
    dl.backward()
    tl.backward()
    for d, t in ((dx, tx), (dw, tw), (db, tb)):
        if t.grad is None:
            assert d.grad is None
        else:
            close(d.grad, t.grad)


def test_cross_entropy_and_embedding_match_torch(torch):
    logits = rng.standard_normal((6, 5))
    target = np.array([0, 4, 2, 2, 1, -100])
    dx, tx = pair(torch, logits)
    dl = F.cross_entropy(dx, dtr.tensor(target))
    tl = torch.nn.functional.cross_entropy(tx, torch.tensor(target))
    close(dl, tl)
    dl.backward()
    tl.backward()
    close(dx.grad, tx.grad)
    dw, tw = pair(torch, W)
    idx = np.array([[0, 3], [4, 4]])
    de = F.embedding(dtr.tensor(idx), dw)
    te = torch.nn.functional.embedding(torch.tensor(idx), tw)
    close(de, te)
    (de * de).sum().backward()
    (te * te).sum().backward()
    close(dw.grad, tw.grad)


def test_conv2d_and_pooling_match_torch(torch):
    x = rng.standard_normal((2, 3, 6, 6))
    w = rng.standard_normal((4, 3, 3, 3))
    b = rng.standard_normal(4)
    (dx, tx), (dw, tw), (db, tb) = pair(torch, x), pair(torch, w), pair(torch, b)
    dy = F.max_pool2d(F.conv2d(dx, dw, db, stride=1, padding=1), 2)
    ty = torch.nn.functional.max_pool2d(torch.nn.functional.conv2d(tx, tw, tb, stride=1, padding=1), 2)
    close(dy, ty, 1e-9)
    dy.sum().backward()
    ty.sum().backward()
    close(dx.grad, tx.grad, 1e-9)
    close(dw.grad, tw.grad, 1e-9)


def test_scaled_dot_product_attention_matches_torch_math(torch):
    q, k, v = (rng.standard_normal((2, 2, 5, 4)) for _ in range(3))
    (dq, tq), (dk, tk), (dv, tv) = pair(torch, q), pair(torch, k), pair(torch, v)
    dy = F.scaled_dot_product_attention(dq, dk, dv, is_causal=True)
    # PyTorch 1.13 has no F.scaled_dot_product_attention: its definition.
    mask = torch.ones(5, 5, dtype=torch.bool).tril()
    s = (tq @ tk.transpose(-2, -1) / 2.0).masked_fill(~mask, float("-inf"))
    ty = torch.softmax(s, dim=-1) @ tv
    close(dy, ty)
    dy.pow(2).sum().backward()
    ty.pow(2).sum().backward()
    for d, t in ((dq, tq), (dk, tk), (dv, tv)):
        close(d.grad, t.grad)


def test_backward_with_gradient_and_retain_graph():
    x = dtr.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x * x
    y.backward(dtr.ones(3), retain_graph=True)
    assert x.grad.tolist() == [2.0, 4.0, 6.0]
    y.backward(dtr.ones(3))
    assert x.grad.tolist() == [4.0, 8.0, 12.0]
    assert y.grad_fn is not None and x.grad_fn is None and x.is_leaf and not y.is_leaf
    x.grad = None
    assert x.grad is None


def test_detach_and_requires_grad():
    x = dtr.ones(2).requires_grad_()
    assert x.requires_grad
    d = (x * 2).detach()
    assert not d.requires_grad and d.tolist() == [2.0, 2.0]
    with pytest.raises(ValueError):
        (x * 2).requires_grad_()  # a non-leaf


def test_no_grad_and_enable_grad_as_context_managers_and_decorators():
    x = dtr.ones(2, requires_grad=True)
    with dtr.no_grad():
        assert not dtr.is_grad_enabled()
        assert not (x * 2).requires_grad
        with dtr.enable_grad():
            assert (x * 2).requires_grad
        assert not dtr.is_grad_enabled()
    assert dtr.is_grad_enabled()

    @dtr.no_grad()
    def f():
        return x * 2
    assert not f().requires_grad and dtr.is_grad_enabled()
    with dtr.set_grad_enabled(False):
        assert not dtr.is_grad_enabled()
    assert dtr.is_grad_enabled()


def test_autocast_runs_matmul_in_bfloat16():
    a, b = dtr.randn(4, 4), dtr.randn(4, 4)
    with dtr.autocast("cpu", dtype=dtr.bfloat16):
        y = a @ b
        assert y.dtype == dtr.bfloat16
        with dtr.autocast("cpu", enabled=False):
            assert (a @ b).dtype == dtr.float32
    assert (a @ b).dtype == dtr.float32
    with pytest.raises(ValueError):
        with dtr.autocast("cpu", dtype=dtr.float64):
            pass
    assert (a @ b).dtype == dtr.float32  # the failed enter left the state alone


def test_autocast_is_per_device_type():
    # torch.autocast(device_type): a CUDA autocast scope leaves CPU ops alone,
    # and each device type keeps its own state and default dtype.
    a, b = dtr.randn(4, 4), dtr.randn(4, 4)
    assert dtr.autocast("cpu").fast_dtype == dtr.bfloat16
    assert dtr.autocast("cuda").fast_dtype == dtr.float16
    with dtr.autocast("cuda"):
        assert (a @ b).dtype == dtr.float32
        assert F.linear(a, b).dtype == dtr.float32
        with dtr.autocast("cpu"):
            assert (a @ b).dtype == dtr.bfloat16
            with dtr.autocast("cuda", enabled=False):
                assert (a @ b).dtype == dtr.bfloat16  # the cpu's state is its own
            with dtr.autocast("cpu", enabled=False):
                assert (a @ b).dtype == dtr.float32
        assert (a @ b).dtype == dtr.float32
    with dtr.autocast("cuda", dtype=dtr.bfloat16):
        assert (a @ b).dtype == dtr.float32


def test_autocast_refuses_an_unknown_device_type():
    for bad in ("tpu", "gpu", ""):
        with pytest.raises(RuntimeError, match=f"unsupported autocast device_type '{bad}'"):
            dtr.autocast(bad)
    a = dtr.randn(2, 2)
    assert (a @ a).dtype == dtr.float32


def test_cuda_autocast_casts_cuda_ops():
    try:
        a = dtr.randn(4, 4, device="cuda")
    except (dtr.DeviceError, ValueError):
        pytest.skip("no CUDA device")
    with dtr.autocast("cuda"):
        assert (a @ a).dtype == dtr.float16
        assert F.softmax(a @ a, -1).dtype == dtr.float32  # CUDA's float32 list
    with dtr.autocast("cpu"):
        assert (a @ a).dtype == dtr.float32


def test_cpu_autocast_follows_pytorchs_cpu_op_lists():
    # PyTorch 2.x, aten/src/ATen/autocast_mode.cpp, TORCH_LIBRARY_IMPL(aten,
    # AutocastCPU): linear and matmul in the lower precision, the losses in
    # float32, and ops on neither list (softmax, exp, pow, layer_norm, ...) in
    # their input's dtype.
    x = dtr.randn(3, 4, requires_grad=True)
    w = dtr.randn(5, 4, requires_grad=True)
    target = dtr.tensor([0, 3, 2])
    with dtr.autocast("cpu"):
        h = F.linear(x, w)
        assert h.dtype == dtr.bfloat16
        p = F.softmax(h, -1)
        assert p.dtype == dtr.bfloat16
        assert F.log_softmax(h, -1).dtype == dtr.bfloat16
        assert h.exp().dtype == dtr.bfloat16 and (h ** 2).dtype == dtr.bfloat16
        assert F.layer_norm(h, (5,)).dtype == dtr.bfloat16
        # nn.LayerNorm's float32 parameters with a bfloat16 input: computed in
        # float32, returned in the input's dtype (PyTorch's CPU kernels).
        assert nn.LayerNorm(5)(h).dtype == dtr.bfloat16
        assert F.cross_entropy(h, target).dtype == dtr.float32
        assert F.nll_loss(F.log_softmax(h, -1), target).dtype == dtr.float32
        assert F.mse_loss(p, dtr.zeros(3, 5)).dtype == dtr.float32
        loss = F.cross_entropy(F.softmax(h, -1) @ w, target)
        assert loss.dtype == dtr.float32
    np.testing.assert_allclose(p.detach().float().sum(-1).numpy(), np.ones(3), atol=1e-2)
    loss.backward()
    assert x.grad.dtype == dtr.float32 and w.grad.dtype == dtr.float32
    assert np.isfinite(x.grad.numpy()).all() and np.abs(w.grad.numpy()).sum() > 0
