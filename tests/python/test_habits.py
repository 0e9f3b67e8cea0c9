"""What PyTorch users type by habit, run twice: with `torch` the PyTorch of this
machine (Debian's python3-torch 1.13: the reference value) and with `torch` = dtr.
Each habit is a snippet that sets `result` (tensors, numbers, lists, tuples, dicts,
compared as NumPy values; exact for integers and bools, to float32 rounding for
floats). Where a habit needs a random module, the reference run's state_dict is
handed to the dtr run (`sync(m)`), so both compute from the same weights.

`python tests/python/test_habits.py` prints which habits pass (the count is the
figure the README quotes)."""
import os
import sys
import tempfile
import textwrap
import traceback

import numpy as np
import pytest

try:  # the reference's submodules that snippets reach by attribute
    import torch.utils.checkpoint  # noqa: F401
    import torch.utils.data  # noqa: F401
except ImportError:
    pass

import dtr
from torch_alias import torch_is_dtr

HABITS = {
    # ---- optimizers and schedulers --------------------------------------------
    "optim.Adam": """
        w = T(A(3, 2), grad=True)
        opt = torch.optim.Adam([w], lr=0.1, weight_decay=0.01)
        for _ in range(3):
            opt.zero_grad()
            (w * w).sum().backward()
            opt.step()
        result = w""",
    "optim param groups": """
        a, b = T(A(3)), T(A(2, 2))
        a.requires_grad_(); b.requires_grad_()
        opt = torch.optim.AdamW([{"params": [b], "weight_decay": 0.1},
                                 {"params": [a], "weight_decay": 0.0}], lr=0.05, betas=(0.9, 0.95))
        for _ in range(2):
            opt.zero_grad()
            ((a * a).sum() + (b * b * b).sum()).backward()
            opt.step()
        result = (a, b, len(opt.param_groups), opt.param_groups[0]["weight_decay"])""",
    "param_groups[0]['lr'] = ...": """
        w = T(A(4), grad=True)
        opt = torch.optim.SGD([w], lr=0.1, momentum=0.9)
        for i in range(3):
            opt.param_groups[0]["lr"] = 0.1 / (i + 1)
            opt.zero_grad()
            (w * w).sum().backward()
            opt.step()
        result = w""",
    "lr_scheduler.StepLR": """
        opt = torch.optim.SGD([T(A(2), grad=True)], lr=1.0)
        s = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
        lrs = []
        for _ in range(6):
            opt.step(); s.step(); lrs.append(s.get_last_lr()[0])
        result = lrs""",
    "lr_scheduler.CosineAnnealingLR": """
        opt = torch.optim.SGD([T(A(2), grad=True)], lr=0.1)
        s = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=5, eta_min=0.01)
        lrs = []
        for _ in range(8):
            opt.step(); s.step(); lrs.append(opt.param_groups[0]["lr"])
        result = lrs""",
    "lr_scheduler.OneCycleLR": """
        opt = torch.optim.SGD([T(A(2), grad=True)], lr=0.1, momentum=0.9)
        s = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.5, total_steps=10)
        lrs = []
        for _ in range(9):
            opt.step(); s.step(); lrs.append(opt.param_groups[0]["lr"])
        result = lrs""",
    "lr_scheduler.LambdaLR": """
        opt = torch.optim.SGD([T(A(2), grad=True)], lr=0.2)
        s = torch.optim.lr_scheduler.LambdaLR(opt, lambda e: 0.9 ** e)
        lrs = []
        for _ in range(4):
            opt.step(); s.step(); lrs.append(s.get_last_lr()[0])
        result = lrs""",
    "lr_scheduler warmup then cosine": """
        opt = torch.optim.SGD([T(A(2), grad=True)], lr=0.1)
        warm = torch.optim.lr_scheduler.LinearLR(opt, start_factor=0.1, total_iters=3)
        cos = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=4)
        s = torch.optim.lr_scheduler.SequentialLR(opt, [warm, cos], milestones=[3])
        lrs = []
        for _ in range(7):
            opt.step(); s.step(); lrs.append(opt.param_groups[0]["lr"])
        result = lrs""",
    # ---- reductions and math methods ------------------------------------------
    "x.min()": "result = T(A(3, 4)).min()",
    "x.min(dim)": "v, i = T(A(3, 4)).min(dim=1); result = (v, i)",
    "x.max(dim, keepdim)": "v, i = T(A(3, 4)).max(1, keepdim=True); result = (v, i)",
    "torch.max(a, b)": "result = torch.max(T(A(3)), T(A(3) + 0.1))",
    "x.std()": "result = T(A(3, 4)).std()",
    "x.std(dim, unbiased=False)": "result = T(A(3, 4)).std(dim=0, unbiased=False)",
    "x.var(dim)": "result = T(A(3, 4)).var(1)",
    "x.norm()": "result = T(A(3, 4)).norm()",
    "x.norm(dim=1)": "result = T(A(3, 4)).norm(dim=1)",
    "x.norm(p=1)": "result = T(A(3, 4)).norm(p=1)",
    "x.sin()": "result = T(A(5)).sin()",
    "x.cos(), torch.sin": "result = (T(A(5)).cos(), torch.sin(T(A(5))))",
    "x.exp().log()": "result = T(A(5)).exp().log()",
    "x.abs().sum().item()": "result = T(A(3, 4)).abs().sum().item()",
    "x.sum(-1, keepdim=True)": "result = T(A(3, 4)).sum(-1, keepdim=True)",
    "x.mean((0, 1), keepdim=True)": "result = T(A(2, 3, 4)).mean((0, 1), keepdim=True)",
    "x.argmax(dim=1)": "result = T(A(3, 4)).argmax(dim=1)",
    "x.cumsum(0)": "result = T(A(3, 4)).cumsum(0)",
    "(x == x).all()": "x = T(A(3)); result = (x == x).all()",
    "x.any()": "result = (T(A(3)) > 0.5).any()",
    "x.pow(2), x ** 2, 2 ** x": "x = T(A(3)); result = (x.pow(2), x ** 2, 2 ** x)",
    "x // 2": "result = T(A(5) * 10) // 2",
    "x % 3": "result = (T(A(5) * 10 - 5) % 3, torch.arange(-4, 5) % 3)",
    "int // int tensor": "result = torch.arange(-5, 6) // 2",
    "torch.clamp(x, min=0)": "result = torch.clamp(T(A(5) - 0.5), min=0)",
    "torch.where(c, x, 0.)": "x = T(A(5) - 0.5); result = torch.where(x > 0, x, 0.)",
    "torch.topk": "v, i = torch.topk(T(A(3, 6)), 2); result = (v, i)",
    "torch.sort": "v, i = torch.sort(T(A(6)), descending=True); result = (v, i)",
    "torch.einsum": "result = torch.einsum('ij,jk->ik', T(A(2, 3)), T(A(3, 4)))",
    "torch.bmm": "result = torch.bmm(T(A(2, 3, 4)), T(A(2, 4, 5)))",
    "a @ b": "result = T(A(2, 3)) @ T(A(3, 4))",
    "F.pad": "result = F.pad(T(A(2, 3)), (1, 2))",
    "torch.multinomial (one-hot)": """
        probs = T(np.eye(4, dtype=np.float32)[[2, 0, 3]])
        result = torch.multinomial(probs, 1)""",
    "torch.tril / triu": "result = (torch.tril(T(A(3, 3))), torch.triu(T(A(3, 3)), 1))",
    "x.masked_fill(mask, v)": "x = T(A(3, 3)); result = x.masked_fill(x > 0.5, -1.0)",
    "x.gather(1, idx)": "result = T(A(3, 4)).gather(1, I([[0], [3], [1]]))",
    "x.flip(0)": "result = T(A(3, 2)).flip(0)",
    "F.one_hot": "result = F.one_hot(I([0, 2, 1]), 4)",
    # ---- creation -------------------------------------------------------------
    "torch.Tensor([1, 2])": "result = torch.Tensor([1, 2])",
    "torch.tensor(list, dtype)": "result = torch.tensor([[1, 2], [3, 4]], dtype=torch.float32)",
    "torch.eye": "result = (torch.eye(3), torch.eye(2, 3))",
    "torch.linspace": "result = torch.linspace(0, 1, 5)",
    "torch.full_like": "result = torch.full_like(T(A(2, 2)), 7)",
    "torch.zeros_like / ones_like": "x = T(A(2, 2)); result = (torch.zeros_like(x), torch.ones_like(x))",
    "torch.arange(10).reshape(2, 5)": "result = torch.arange(10).reshape(2, 5)",
    "torch.cat / stack": "a, b = T(A(2, 2)), T(A(2, 2)); result = (torch.cat([a, b], 1), torch.stack((a, b)))",
    "torch.from_numpy": "result = torch.from_numpy(np.arange(6, dtype=np.float32).reshape(2, 3))",
    # ---- tensor habits --------------------------------------------------------
    "x.data": """
        w = T(A(3), grad=True)
        w.data.mul_(2)
        result = (w.data, w.requires_grad, w.data.requires_grad)""",
    "x.tolist(), x.item()": "x = T(A(2, 2)); result = (x.tolist(), x[0, 1].item())",
    "x.size(), x.shape[0], len(x)": "x = T(A(3, 4)); result = (list(x.size()), x.shape[0], len(x), x.size(1), x.dim())",
    "x.view(-1), x.permute, x.t()": "x = T(A(2, 3)); result = (x.view(-1), x.permute(1, 0), x.t())",
    "x.unsqueeze(0), x.squeeze()": "x = T(A(3, 1)); result = (x.unsqueeze(0).shape, x.squeeze().shape)",
    "x.float(), x.long(), x.to(dtype)": "x = T(A(3) * 5); result = (x.long(), x.long().float(), x.to(torch.float64))",
    "x.chunk / split": "x = T(A(6, 2)); result = (x.chunk(3), x.split(2, dim=0), x.split([1, 5]))",
    "x.expand / repeat": "x = T(A(1, 3)); result = (x.expand(2, 3), x.repeat(2, 1))",
    "x.contiguous().view": "result = T(A(2, 3)).t().contiguous().view(6)",
    "x.numel()": "result = T(A(2, 3)).numel()",
    # ---- indexing -------------------------------------------------------------
    "x[-1]": "result = T(A(3, 4))[-1]",
    "x[..., 0]": "result = T(A(2, 3, 4))[..., 0]",
    "x[None, :, 1]": "result = T(A(3, 4))[None, :, 1]",
    "x[:, [-1], :]": "result = T(A(2, 3, 4))[:, [-1], :]",
    "x[[0, 2]]": "result = T(A(3, 4))[[0, 2]]",
    "x[x > 0]": "x = T(A(3, 4) - 0.5); result = x[x > 0]",
    "x[idx_tensor]": "result = T(A(5, 2))[I([4, 0, 4])]",
    "x[rows, cols]": "result = T(A(3, 4))[I([0, 2]), I([1, 3])]",
    "x[mask] = 0": "x = T(A(3, 4) - 0.5); x[x < 0] = 0; result = x",
    "x[idx] = v": "x = T(A(5)); x[I([1, 3])] = T(np.array([9., 8.], np.float32)); result = x",
    "x[:, 1] = 5": "x = T(A(3, 4)); x[:, 1] = 5; result = x",
    "x[0] = ones(1, n), x[i] = tensor([v])": """
        x = T(A(2, 3)); x[0] = torch.ones(1, 3)
        y = torch.ones(3, dtype=torch.long); y[0] = torch.tensor([2.5])
        result = (x, y)""",
    "x[0] += 1": "x = T(A(2, 3)); x[0] += 1; result = x",
    "logits[logits < v[:, [-1]]] = -inf": """
        logits = T(A(2, 6))
        v, _ = torch.topk(logits, 2)
        logits[logits < v[:, [-1]]] = -float('Inf')
        result = F.softmax(logits, dim=-1)""",
    "indexing under autograd": """
        x = T(A(4, 3), grad=True)
        y = x[I([0, 2, 2])].sum() + x[x > 0.5].sum() + x[:, [-1]].sum()
        y.backward()
        result = x.grad""",
    # ---- autograd -------------------------------------------------------------
    "x.requires_grad_(); backward": """
        x = T(A(3)).requires_grad_()
        (x * x).sum().backward()
        result = x.grad""",
    "clip_grad_norm_ returns the norm": """
        w = T(A(3), grad=True)
        (w * w * 5).sum().backward()
        n = torch.nn.utils.clip_grad_norm_([w], 1.0)
        result = (n, w.grad, n.item())""",
    "with torch.no_grad()": """
        x = T(A(3), grad=True)
        with torch.no_grad():
            y = x * 2
        result = (y.requires_grad, y)""",
    "torch.inference_mode()": """
        x = T(A(3), grad=True)
        with torch.inference_mode():
            y = x * 2
        @torch.inference_mode()
        def f(t):
            return t + 1
        result = (y.requires_grad, f(x).requires_grad, y)""",
    "torch.autograd.grad": """
        x = T(A(3), grad=True)
        (g,) = torch.autograd.grad((x ** 3).sum(), x)
        result = (g, x.grad is None)""",
    "torch.autograd.Function": """
        class Cube(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return x ** 3
            @staticmethod
            def backward(ctx, g):
                (x,) = ctx.saved_tensors
                return 3 * x * x * g
        x = T(A(4), grad=True)
        Cube.apply(x).sum().backward()
        result = x.grad""",
    "torch.utils.checkpoint": """
        lin = sync(nn.Linear(3, 3))
        x = T(A(2, 3), grad=True)
        y = torch.utils.checkpoint.checkpoint(lambda t: torch.tanh(lin(t)), x, use_reentrant=False)
        y.sum().backward()
        result = (y, x.grad, lin.weight.grad)""",
    # ---- nn -------------------------------------------------------------------
    "nn.Flatten / Tanh / SiLU": """
        m = nn.Sequential(nn.Flatten(), nn.Tanh(), nn.SiLU())
        result = m(T(A(2, 3, 2)))""",
    "nn.Conv1d": "m = sync(nn.Conv1d(2, 3, 3, padding=1)); result = m(T(A(2, 2, 5)))",
    "nn.BatchNorm1d": """
        m = sync(nn.BatchNorm1d(3))
        y = m(T(A(4, 3)))
        result = (y, m.running_mean, m.running_var)""",
    "nn.LSTM": """
        m = sync(nn.LSTM(3, 4, num_layers=2, batch_first=True))
        out, (h, c) = m(T(A(2, 5, 3)))
        result = (out, h, c)""",
    "nn.GRU": """
        m = sync(nn.GRU(3, 4))
        out, h = m(T(A(5, 2, 3)))
        result = (out, h)""",
    "nn.MultiheadAttention": """
        m = sync(nn.MultiheadAttention(8, 2, batch_first=True))
        x = T(A(2, 4, 8))
        out, w = m(x, x, x)
        result = (out, w)""",
    "nn.TransformerEncoderLayer": """
        m = sync(nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0, batch_first=True))
        result = m(T(A(2, 4, 8)))""",
    "nn.CrossEntropyLoss(label_smoothing)": """
        loss = nn.CrossEntropyLoss(label_smoothing=0.1)
        result = loss(T(A(4, 5)), I([0, 3, 1, 4]))""",
    "F.cross_entropy(ignore_index)": "result = F.cross_entropy(T(A(4, 5)), I([0, -1, 1, 4]), ignore_index=-1)",
    "F.softmax / log_softmax": "x = T(A(2, 5)); result = (F.softmax(x, dim=-1), F.log_softmax(x, -1))",
    "F.gelu / silu / mse_loss": "x = T(A(2, 5)); result = (F.gelu(x), F.silu(x), F.mse_loss(x, x * 0.5))",
    "nn.Linear forward + state_dict keys": """
        m = sync(nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2)))
        result = (m(T(A(2, 3))), list(m.state_dict().keys()))""",
    "nn.LayerNorm / Embedding": """
        ln, emb = sync(nn.LayerNorm(4)), sync(nn.Embedding(5, 4))
        result = ln(emb(I([[1, 4], [0, 2]])))""",
    "model.to('cpu')": """
        m = sync(nn.Linear(3, 2))
        m2 = m.to('cpu')
        result = (m2 is m, m(T(A(1, 3))))""",
    "named_modules / parameters count": """
        m = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Sequential(nn.Linear(4, 2)))
        result = ([n for n, _ in m.named_modules()], sum(p.numel() for p in m.parameters()))""",
    "model.eval() disables dropout": """
        m = nn.Dropout(0.5).eval()
        result = m(T(A(3)))""",
    "torch.save / torch.load state_dict": """
        m = sync(nn.Linear(3, 2))
        path = os.path.join(TMP, "m.pt")
        torch.save(m.state_dict(), path)
        m2 = nn.Linear(3, 2)
        m2.load_state_dict(torch.load(path))
        result = m2(T(A(1, 3)))""",
    "torch.cuda.is_available()": "result = (torch.cuda.is_available(), torch.cuda.device_count())",
    "TensorDataset + DataLoader": """
        from torch.utils.data import DataLoader, TensorDataset
        ds = TensorDataset(T(A(5, 2)), I([0, 1, 2, 3, 4]))
        result = [(x, y) for x, y in DataLoader(ds, batch_size=2)] + [len(ds)]""",
}

_RNG_SEED = 0


def _arrays():
    rng = np.random.default_rng(_RNG_SEED)
    cache = {}

    def A(*shape):
        key = ("A",) + shape
        if key not in cache:
            cache[key] = rng.random(shape, dtype=np.float32) if shape else np.float32(rng.random())
        return cache[key].copy()
    return A


def run_habit(name, torch, shared, is_ref):
    """Runs HABITS[name] with `torch` bound to the given module; returns `result`."""
    A = _arrays()

    def T(a, grad=False):
        t = torch.from_numpy(np.ascontiguousarray(a))
        return t.requires_grad_() if grad else t

    def I(v):
        return torch.from_numpy(np.asarray(v, dtype=np.int64))

    synced = []

    def sync(m):
        key = f"state{len(synced)}"
        synced.append(m)
        if is_ref:
            shared[key] = {k: v.detach().numpy().copy() for k, v in m.state_dict().items()}
        else:
            m.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in shared[key].items()})
        return m

    with tempfile.TemporaryDirectory() as tmp:
        env = {"torch": torch, "nn": torch.nn, "F": torch.nn.functional, "np": np, "os": os,
               "A": A, "T": T, "I": I, "sync": sync, "TMP": tmp}
        exec(textwrap.dedent(HABITS[name]), env)
        return to_numpy(env["result"])


def to_numpy(v):
    if hasattr(v, "detach") and hasattr(v, "numpy"):
        return np.array(v.detach().numpy())
    if isinstance(v, (list, tuple)):
        return type(v)(to_numpy(x) for x in v) if not hasattr(v, "_fields") else tuple(to_numpy(x) for x in v)
    if isinstance(v, dict):
        return {k: to_numpy(x) for k, x in v.items()}
    if type(v).__name__ == "Size":
        return list(v)
    return v


def assert_same(got, want, where="result"):
    if isinstance(want, np.ndarray) or isinstance(got, np.ndarray):
        got, want = np.asarray(got), np.asarray(want)
        assert got.shape == want.shape, f"{where}: shape {got.shape}, PyTorch {want.shape}"
        if want.dtype.kind in "fc":
            assert got.dtype.kind == "f", f"{where}: dtype {got.dtype}, PyTorch {want.dtype}"
            np.testing.assert_allclose(got, want, rtol=2e-5, atol=1e-6, err_msg=where)
        else:
            assert got.dtype == want.dtype, f"{where}: dtype {got.dtype}, PyTorch {want.dtype}"
            assert np.array_equal(got, want), f"{where}: {got} != PyTorch {want}"
    elif isinstance(want, (list, tuple)):
        assert isinstance(got, (list, tuple)) and len(got) == len(want), f"{where}: {got!r} != {want!r}"
        for i, (g, w) in enumerate(zip(got, want)):
            assert_same(g, w, f"{where}[{i}]")
    elif isinstance(want, dict):
        assert isinstance(got, dict) and list(got) == list(want), f"{where}: keys {list(got)} != {list(want)}"
        for k in want:
            assert_same(got[k], want[k], f"{where}[{k!r}]")
    elif isinstance(want, float):
        assert isinstance(got, float), f"{where}: {got!r} is not a float (PyTorch {want!r})"
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=1e-6, err_msg=where)
    else:
        assert type(got) is type(want) and got == want, f"{where}: {got!r} != PyTorch {want!r}"


def check(name, torch):
    shared = {}
    want = run_habit(name, torch, shared, True)
    dtr.manual_seed(0)
    with torch_is_dtr():
        got = run_habit(name, dtr, shared, False)
    assert_same(got, want)


@pytest.mark.parametrize("name", list(HABITS))
def test_habit(name, torch):
    check(name, torch)


if __name__ == "__main__":
    import torch as reference
    failed = []
    for habit in HABITS:
        try:
            check(habit, reference)
        except Exception as e:  # noqa: BLE001 (a report, not a test)
            failed.append((habit, f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"))
    print(f"{len(HABITS) - len(failed)} of {len(HABITS)} habits work under dtr (PyTorch {reference.__version__})")
    for habit, why in failed:
        print(f"  FAIL {habit}: {why[:150]}")
    if "-v" in sys.argv:
        traceback.print_exc()
