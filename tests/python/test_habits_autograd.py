"""dtr.autograd (grad, backward, Function) and dtr.utils.checkpoint against PyTorch
1.13, and custom Functions' saved tensors evicted and rematerialized under a budget."""
import threading

import numpy as np
import pytest

import dtr
import dtr.nn as nn
from dtr.utils.checkpoint import checkpoint, checkpoint_sequential


def arr(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def both(torch, a, requires_grad=True):
    return dtr.tensor(a, requires_grad=requires_grad), torch.tensor(a, requires_grad=requires_grad)


# ---- grad and backward ----------------------------------------------------------------

def test_grad_matches_torch_and_leaves_dot_grad_alone(torch):
    (dx, tx), (dw, tw) = both(torch, arr(3, 4)), both(torch, arr(4, 2, seed=1))
    dl = (dtr.tanh(dx.matmul(dw)) ** 2).sum()
    tl = (torch.tanh(tx.matmul(tw)) ** 2).sum()
    dg = dtr.autograd.grad(dl, [dx, dw])
    tg = torch.autograd.grad(tl, [tx, tw])
    assert isinstance(dg, tuple) and len(dg) == 2
    for a, b in zip(dg, tg):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6)
    assert dx.grad is None and dw.grad is None


def test_grad_with_grad_outputs_and_several_outputs(torch):
    dx, tx = both(torch, arr(5))
    go = arr(5, seed=2)
    dg = dtr.autograd.grad([dx * 3.0, dtr.exp(dx)], dx, grad_outputs=[dtr.tensor(go), None]
                           if False else [dtr.tensor(go), dtr.tensor(go)])
    tg = torch.autograd.grad([tx * 3.0, torch.exp(tx)], tx, grad_outputs=[torch.tensor(go)] * 2)
    np.testing.assert_allclose(dg[0].numpy(), tg[0].numpy(), rtol=1e-6)


def test_grad_create_graph_gives_second_derivatives_like_torch(torch):
    dx, tx = both(torch, arr(4))
    (dg,) = dtr.autograd.grad((dx ** 3).sum(), dx, create_graph=True)
    (tg,) = torch.autograd.grad((tx ** 3).sum(), tx, create_graph=True)
    (dgg,) = dtr.autograd.grad((dg * dg).sum(), dx)
    (tgg,) = torch.autograd.grad((tg * tg).sum(), tx)
    np.testing.assert_allclose(dgg.numpy(), tgg.numpy(), rtol=1e-5)


def test_grad_allow_unused_and_errors():
    x, y = dtr.randn(3, requires_grad=True), dtr.randn(3, requires_grad=True)
    assert dtr.autograd.grad((x * 2).sum(), [x, y], allow_unused=True)[1] is None
    with pytest.raises(ValueError):
        dtr.autograd.grad((x * 2).sum(), [x, y])
    with pytest.raises(ValueError, match="scalar"):
        dtr.autograd.grad(x * 2, x)
    with pytest.raises(TypeError):
        dtr.autograd.grad((x * 2).sum(), [x, 3])


def test_autograd_backward_of_several_tensors_matches_torch(torch):
    dx, tx = both(torch, arr(3))
    g = arr(3, seed=5)
    dtr.autograd.backward([(dx * dx).sum(), dx * 2.0], [None, dtr.tensor(g)])
    torch.autograd.backward([(tx * tx).sum(), tx * 2.0], [None, torch.tensor(g)])
    np.testing.assert_allclose(dx.grad.numpy(), tx.grad.numpy(), rtol=1e-6)
    with pytest.raises(ValueError, match="shape"):
        dtr.autograd.backward(dx * 2.0, dtr.zeros(4))


def test_autograd_backward_create_graph():
    x = dtr.tensor([1.0, 2.0], requires_grad=True)
    dtr.autograd.backward((x ** 3).sum(), create_graph=True)
    g = x.grad
    assert g.requires_grad
    assert dtr.autograd.grad(g.sum(), x)[0].tolist() == [6.0, 12.0]


@pytest.mark.filterwarnings("ignore:Using backward\\(\\) with create_graph")  # PyTorch's advice
def test_tensor_backward_create_graph_like_torch(torch):
    dx, tx = both(torch, arr(3))
    (dx ** 3).sum().backward(create_graph=True)
    (tx ** 3).sum().backward(create_graph=True)
    (dgg,) = dtr.autograd.grad(dx.grad.sum(), dx)
    (tgg,) = torch.autograd.grad(tx.grad.sum(), tx)
    np.testing.assert_allclose(dgg.numpy(), tgg.numpy(), rtol=1e-6)
    y = (dx * 2).sum()
    y.backward(retain_graph=True)
    y.backward()
    with pytest.raises(NotImplementedError):
        (dx * 2).sum().backward(inputs=[dx])


def test_grad_mode_names_in_autograd():
    with dtr.autograd.no_grad():
        assert not dtr.is_grad_enabled()
        with dtr.autograd.enable_grad():
            assert dtr.autograd.is_grad_enabled()
    with dtr.autograd.set_grad_enabled(False):
        assert not dtr.is_grad_enabled()
    assert dtr.is_grad_enabled()


# ---- Function --------------------------------------------------------------------------

def make_functions(lib):
    class ScaledTanh(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x, w, scale):
            y = lib.tanh(x * w) * scale
            ctx.save_for_backward(x, w, y)
            ctx.scale = scale
            return y

        @staticmethod
        def backward(ctx, g):
            x, w, y = ctx.saved_tensors
            t = y / ctx.scale
            gz = g * ctx.scale * (1 - t * t)
            return (gz * w if ctx.needs_input_grad[0] else None,
                    gz * x if ctx.needs_input_grad[1] else None, None)
    return ScaledTanh


def test_function_forward_and_backward_match_torch(torch):
    dF, tF = make_functions(dtr), make_functions(torch)
    (dx, tx), (dw, tw) = both(torch, arr(3, 4)), both(torch, arr(3, 4, seed=1))
    dy, ty = dF.apply(dx, dw, 2.5), tF.apply(tx, tw, 2.5)
    assert dy.grad_fn == "ScaledTanhBackward"
    np.testing.assert_allclose(dy.detach().numpy(), ty.detach().numpy(), rtol=1e-6)
    g = arr(3, 4, seed=3)
    dy.backward(dtr.tensor(g)), ty.backward(torch.tensor(g))
    np.testing.assert_allclose(dx.grad.numpy(), tx.grad.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(dw.grad.numpy(), tw.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_function_needs_input_grad_and_no_record_without_grad():
    seen = []

    class Probe(dtr.autograd.Function):
        @staticmethod
        def forward(ctx, a, b, k):
            seen.append(ctx.needs_input_grad)
            assert not dtr.is_grad_enabled()
            return a + b

        @staticmethod
        def backward(ctx, g):
            return g, None, None

    a, b = dtr.randn(2, requires_grad=True), dtr.randn(2)
    y = Probe.apply(a, b, 3)
    assert seen[-1] == (True, False, False) and y.requires_grad
    y.sum().backward()
    assert a.grad.tolist() == [1.0, 1.0] and b.grad is None
    with dtr.no_grad():
        assert not Probe.apply(a, b, 3).requires_grad
    assert not Probe.apply(b, b, 3).requires_grad


def test_function_several_outputs_and_mark_non_differentiable(torch):
    def make(lib):
        class SplitMax(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                idx = (x > 0)
                ctx.mark_non_differentiable(idx)
                ctx.save_for_backward(x)
                return x * 2, x * x, idx

            @staticmethod
            def backward(ctx, g1, g2, g3):
                (x,) = ctx.saved_tensors
                return g1 * 2 + g2 * 2 * x
        return SplitMax
    dx, tx = both(torch, arr(4))
    da, db, di = make(dtr).apply(dx)
    ta, tb, ti = make(torch).apply(tx)
    assert not di.requires_grad and di.tolist() == ti.tolist()
    (da.sum() + (db * 3).sum()).backward()
    (ta.sum() + (tb * 3).sum()).backward()
    np.testing.assert_allclose(dx.grad.numpy(), tx.grad.numpy(), rtol=1e-6)
    # Only one output used: the other's gradient arrives as zeros.
    dx.grad = None
    make(dtr).apply(dx)[1].sum().backward()
    np.testing.assert_allclose(dx.grad.numpy(), 2 * arr(4), rtol=1e-6)


def test_function_returning_its_input_and_materialize_grads():
    class Same(dtr.autograd.Function):
        @staticmethod
        def forward(ctx, x, y):
            ctx.set_materialize_grads(False)
            return x, y * 2

        @staticmethod
        def backward(ctx, gx, gy):
            assert gy is None or not gy.numpy().any()  # dtr's engine gives zeros, PyTorch None
            return gx * 5, None

    x, y = dtr.ones(2, requires_grad=True), dtr.ones(2, requires_grad=True)
    a, _ = Same.apply(x, y)
    assert a is not x and a.grad_fn == "SameBackward" and x.grad_fn is None
    a.sum().backward()
    assert x.grad.tolist() == [5.0, 5.0] and y.grad is None


def test_function_errors_surface_from_backward():
    class Wrong(dtr.autograd.Function):
        @staticmethod
        def forward(ctx, x, y):
            return x * y

        @staticmethod
        def backward(ctx, g):
            return g

    def doubling(backward):
        """A Function computing 2x whose backward is `backward`."""
        return type(backward.__name__, (dtr.autograd.Function,),
                    {"forward": staticmethod(lambda ctx, x: x * 2), "backward": staticmethod(backward)})

    def BadShape(ctx, g):
        return g.sum()

    def Raises(ctx, g):
        raise ZeroDivisionError("from the user's backward")

    BadShape, Raises = doubling(BadShape), doubling(Raises)
    x = dtr.randn(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="incorrect number of gradients"):
        Wrong.apply(x, x).sum().backward()
    with pytest.raises(RuntimeError, match="invalid gradient at index 0"):
        BadShape.apply(x).sum().backward()
    with pytest.raises(ZeroDivisionError, match="user's backward"):
        Raises.apply(x).sum().backward()
    with pytest.raises(RuntimeError):
        dtr.autograd.Function()


def test_function_saved_tensor_modified_in_place_is_an_error():
    class Keep(dtr.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            y = x * 2
            ctx.save_for_backward(y)
            return y

        @staticmethod
        def backward(ctx, g):
            (y,) = ctx.saved_tensors
            return g * y

    x = dtr.randn(3, requires_grad=True)
    y = Keep.apply(x)
    with dtr.no_grad():
        y.add_(1.0)
    with pytest.raises(RuntimeError, match="inplace"):
        y.sum().backward()


def test_function_backward_on_another_thread_takes_the_gil():
    F = make_functions(dtr)
    x, w = dtr.randn(64, requires_grad=True), dtr.randn(64, requires_grad=True)
    y = F.apply(x, w, 1.5).sum()
    errors = []

    def run():
        try:
            y.backward()
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)
    t = threading.Thread(target=run)
    t.start()
    t.join()
    assert not errors and x.grad is not None


class _Gelu(dtr.autograd.Function):
    """A tanh-GELU written by hand: saves its input and two intermediates."""

    @staticmethod
    def forward(ctx, x):
        inner = (x + x * x * x * 0.044715) * 0.7978845608
        t = dtr.tanh(inner)
        ctx.save_for_backward(x, t)
        return x * (t + 1.0) * 0.5

    @staticmethod
    def backward(ctx, g):
        x, t = ctx.saved_tensors
        d_inner = (x * x * (3 * 0.044715) + 1.0) * 0.7978845608
        return g * ((t + 1.0) * 0.5 + x * 0.5 * (1.0 - t * t) * d_inner)


def _custom_mlp_step(budget_fraction=None):
    """One step of a 6-layer MLP whose activations are custom Functions; with
    budget_fraction, under a budget of the model's bytes plus that fraction of the
    activations' peak."""
    dtr.manual_seed(0)
    layers = [nn.Linear(64, 64) for _ in range(6)]
    x = dtr.randn(512, 64, requires_grad=True)
    if budget_fraction is not None:
        base = dtr.memory.stats()["resident_bytes"]
        dtr.memory.set_budget(int(base + budget_fraction * (_custom_mlp_step.peak - base)))
    h = x
    for lin in layers:
        h = _Gelu.apply(lin(h))
    (h * h).mean().backward()
    # Copies: an array sharing a tensor's memory would pin its storage.
    return [x.grad.numpy().copy()] + [p.grad.numpy().copy() for m in layers for p in m.parameters()]


def test_function_saved_tensors_are_evicted_and_rematerialized_under_a_budget():
    dtr.memory.reset_stats()
    free = _custom_mlp_step()
    _custom_mlp_step.peak = dtr.memory.stats()["peak_bytes"]
    dtr.memory.reset_stats()
    try:
        tight = _custom_mlp_step(0.4)
        stats = dtr.memory.stats()
    finally:
        dtr.memory.set_budget(None)
    assert stats["evictions"] > 0 and stats["rematerializations"] > 0
    assert stats["peak_bytes"] < _custom_mlp_step.peak
    for a, b in zip(free, tight):
        np.testing.assert_array_equal(a, b)


# ---- checkpoint ------------------------------------------------------------------------

def test_checkpoint_matches_the_direct_call_bitwise_with_dropout():
    block = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Dropout(0.3), nn.Linear(16, 8))

    def run(use_checkpoint, reentrant):
        dtr.manual_seed(3)
        for p in block.parameters():
            p.grad = None
        x = dtr.tensor(arr(4, 8), requires_grad=True)
        y = checkpoint(block, x, use_reentrant=reentrant) if use_checkpoint else block(x)
        (y * y).sum().backward()
        return [y.detach().numpy().copy(), x.grad.numpy().copy()] + [p.grad.numpy().copy()
                                                                      for p in block.parameters()]
    direct = run(False, None)
    for reentrant in (True, False):
        for a, b in zip(direct, run(True, reentrant)):
            np.testing.assert_array_equal(a, b)


def test_checkpoint_passes_non_tensor_arguments_kwargs_and_tuples(torch):
    import torch.utils.checkpoint  # noqa: F401
    def fn(lib, x, y, scale, *, shift):
        return lib.tanh(x * scale + shift), y * x

    (dx, tx), (dy, ty) = both(torch, arr(5)), both(torch, arr(5, seed=1))
    da, db = checkpoint(lambda *a, **k: fn(dtr, *a, **k), dx, dy, 2.0, shift=0.5, use_reentrant=False)
    ta, tb = torch.utils.checkpoint.checkpoint(lambda *a, **k: fn(torch, *a, **k), tx, ty, 2.0,
                                               shift=0.5, use_reentrant=False)
    (da.sum() + (db * db).sum()).backward()
    (ta.sum() + (tb * tb).sum()).backward()
    np.testing.assert_allclose(dx.grad.numpy(), tx.grad.numpy(), rtol=1e-6)
    np.testing.assert_allclose(dy.grad.numpy(), ty.grad.numpy(), rtol=1e-6)
    with pytest.raises(TypeError, match="Tensor"):
        checkpoint(lambda x: 3, dx)


def test_checkpoint_gives_parameters_gradients_when_no_input_requires_grad():
    lin = nn.Linear(3, 2)
    y = checkpoint(lin, dtr.randn(4, 3), use_reentrant=False)
    assert y.requires_grad
    y.sum().backward()
    assert lin.weight.grad is not None


def test_checkpoint_sequential_equals_the_plain_sequential():
    model = nn.Sequential(*[nn.Linear(6, 6) if i % 2 == 0 else nn.Tanh() for i in range(8)])

    def run(segments):
        for p in model.parameters():
            p.grad = None
        x = dtr.tensor(arr(3, 6), requires_grad=True)
        y = model(x) if segments is None else checkpoint_sequential(model, segments, x)
        y.sum().backward()
        return [x.grad.numpy().copy()] + [p.grad.numpy().copy() for p in model.parameters()]
    plain = run(None)
    for segments in (1, 2, 3, 8):
        for a, b in zip(plain, run(segments)):
            np.testing.assert_array_equal(a, b)
    with pytest.raises(ValueError, match="segments"):
        checkpoint_sequential(model, 9, dtr.zeros(1, 6))
