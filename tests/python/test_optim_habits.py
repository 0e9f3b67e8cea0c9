"""PyTorch's optimizer habits under dtr.optim: parameter groups (lists of dicts,
per-group options, edits of optimizer.param_groups taking effect, add_param_group),
Adam, state dicts of PyTorch's shape, and every lr_scheduler, each against
torch 1.13 run side by side (the `torch` fixture; skipped where torch is absent)."""
import numpy as np
import pytest

import dtr
import dtr.nn as nn
from dtr.optim import lr_scheduler


# ---- side-by-side helpers --------------------------------------------------------

def make_params(lib, dtype):
    """p0 (2x3), p1 (3,), p2 (4,) with fixed values, as leaves that require grad."""
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(s) for s in ((2, 3), (3,), (4,))]
    dt = getattr(lib, dtype)
    return [lib.tensor(a.tolist(), dtype=dt).requires_grad_() for a in arrays]


def loss_of(lib, params, k):
    """A loss whose gradients differ per parameter and per step k."""
    p0, p1, p2 = params
    x = lib.tensor([[1.0, -2.0 + k], [0.5, 3.0], [-1.0, 0.25 * k]], dtype=p0.dtype)
    return ((p0 @ x) ** 2).sum() + (p1 * p1 * p1).sum() * (1 + k) + (p2 * (k - 1.5)).sum()


def train(lib, make_opt, steps=5, dtype="float64", edit=None):
    params = make_params(lib, dtype)
    opt = make_opt(lib, params)
    for k in range(steps):
        if edit is not None:
            edit(opt, k)
        opt.zero_grad()
        loss_of(lib, params, k).backward()
        opt.step()
    return [p.detach().numpy().copy() for p in params], opt


def assert_same(torch, make_opt, steps=5, dtype="float64", edit=None, rtol=1e-12, atol=1e-14):
    ours, dopt = train(dtr, make_opt, steps, dtype, edit)
    theirs, topt = train(torch, make_opt, steps, dtype, edit)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)
    return dopt, topt


# ---- parameter groups and Adam ----------------------------------------------------

def test_sgd_groups_take_their_own_options(torch):
    assert_same(torch, lambda lib, p: lib.optim.SGD(
        [{"params": [p[0]], "weight_decay": 0.1},
         {"params": [p[1], p[2]], "lr": 0.003, "momentum": 0.5, "nesterov": True}],
        lr=0.01, momentum=0.9))


@pytest.mark.parametrize("kwargs", [
    dict(lr=0.01),
    dict(lr=0.02, betas=(0.8, 0.9), eps=1e-6, weight_decay=0.1),
    dict(lr=0.01, weight_decay=0.05, amsgrad=True),
])
def test_adam_matches_torch(torch, kwargs):
    assert_same(torch, lambda lib, p: lib.optim.Adam(p, **kwargs))


def test_adam_float32_matches_torch(torch):
    assert_same(torch, lambda lib, p: lib.optim.Adam(p, lr=0.01, weight_decay=0.01), dtype="float32",
                rtol=2e-5, atol=1e-6)


def test_adam_groups_take_their_own_options(torch):
    assert_same(torch, lambda lib, p: lib.optim.Adam(
        [{"params": [p[0]], "lr": 0.05, "amsgrad": True}, {"params": [p[1], p[2]], "weight_decay": 0.2}],
        lr=0.01, betas=(0.85, 0.98)))


def test_edits_of_param_groups_take_effect_at_the_next_step(torch):
    def edit(opt, k):
        if k == 2:
            opt.param_groups[0]["lr"] = 0.05
            opt.param_groups[1]["weight_decay"] = 0.3
            opt.param_groups[1]["betas"] = (0.5, 0.9)
        if k == 3:
            for g in opt.param_groups:
                g["lr"] = 0.001
            opt.param_groups[0]["eps"] = 1e-3
    assert_same(torch, lambda lib, p: lib.optim.AdamW([{"params": p[:2]}, {"params": p[2:]}], lr=0.01),
                edit=edit)

    def edit_sgd(opt, k):
        if k == 1:
            opt.param_groups[0]["momentum"] = 0.5
            opt.param_groups[0]["dampening"] = 0.1
            opt.param_groups[0]["weight_decay"] = 0.01
    assert_same(torch, lambda lib, p: lib.optim.SGD(p, lr=0.01, momentum=0.9), edit=edit_sgd)


def test_add_param_group_matches_torch(torch):
    def make(lib, p):
        opt = lib.optim.SGD(p[:1], lr=0.01, momentum=0.9)
        opt.add_param_group({"params": p[1], "lr": 0.002})  # one tensor, as PyTorch allows
        opt.add_param_group({"params": [p[2]], "momentum": 0.0})
        return opt
    dopt, topt = assert_same(torch, make)
    assert [len(g["params"]) for g in dopt.param_groups] == [1, 1, 1]
    assert dopt.param_groups[2]["lr"] == 0.01  # from the defaults


def configure_optimizers(lib, model, weight_decay, learning_rate, betas):
    """nanoGPT's GPT.configure_optimizers, written once for both libraries."""
    param_dict = {pn: p for pn, p in model.named_parameters() if p.requires_grad}
    decay_params = [p for n, p in param_dict.items() if p.dim() >= 2]
    nodecay_params = [p for n, p in param_dict.items() if p.dim() < 2]
    optim_groups = [
        {"params": decay_params, "weight_decay": weight_decay},
        {"params": nodecay_params, "weight_decay": 0.0},
    ]
    return lib.optim.AdamW(optim_groups, lr=learning_rate, betas=betas)


def test_nanogpt_configure_optimizers_matches_torch(torch):
    def model(lib):
        return lib.nn.Sequential(lib.nn.Embedding(10, 8), lib.nn.LayerNorm(8), lib.nn.Linear(8, 10))
    dmodel, tmodel = model(dtr), model(torch)
    with torch.no_grad():
        for (name, p), (tname, q) in zip(dmodel.named_parameters(), tmodel.named_parameters()):
            assert name == tname
            q.copy_(torch.from_numpy(p.detach().numpy().copy()))
    dopt = configure_optimizers(dtr, dmodel, 0.1, 6e-3, (0.9, 0.95))
    topt = configure_optimizers(torch, tmodel, 0.1, 6e-3, (0.9, 0.95))
    assert [len(g["params"]) for g in dopt.param_groups] == [2, 3]
    idx = np.array([[1, 2, 3, 4], [5, 6, 7, 8]])
    for step in range(5):
        for lib, m, opt in ((dtr, dmodel, dopt), (torch, tmodel, topt)):
            for g in opt.param_groups:  # nanoGPT's schedule: lr set on every group
                g["lr"] = 6e-3 * (step + 1) / 5
            x = lib.tensor(idx.tolist())
            y = lib.tensor(np.roll(idx, 1).tolist())
            logits = m(x)
            loss = lib.nn.functional.cross_entropy(logits.view(-1, 10), y.view(-1))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
    for p, q in zip(dmodel.parameters(), tmodel.parameters()):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=2e-5, atol=2e-6)


# ---- state dicts ---------------------------------------------------------------------

def test_state_dict_has_torchs_shape(torch):
    make = lambda lib, p: lib.optim.AdamW([{"params": p[:2], "weight_decay": 0.1}, {"params": p[2:]}],
                                          lr=0.01, amsgrad=True)
    dopt, topt = assert_same(torch, make, steps=2)
    ds, ts = dopt.state_dict(), topt.state_dict()
    assert set(ds) == {"state", "param_groups"}
    assert [g["params"] for g in ds["param_groups"]] == [g["params"] for g in ts["param_groups"]] == [[0, 1], [2]]
    for dg, tg in zip(ds["param_groups"], ts["param_groups"]):
        assert sorted(dg) == sorted(tg)
        assert {k: v for k, v in dg.items()} == {k: v for k, v in tg.items()}
    assert sorted(ds["state"]) == sorted(ts["state"]) == [0, 1, 2]
    for i in ds["state"]:
        assert list(ds["state"][i]) == list(ts["state"][i])
        assert ds["state"][i]["step"].item() == ts["state"][i]["step"].item() == 2.0
        for name in ("exp_avg", "exp_avg_sq", "max_exp_avg_sq"):
            np.testing.assert_allclose(ds["state"][i][name].numpy(), ts["state"][i][name].numpy(), rtol=1e-12)
    # optimizer.state is keyed by the parameters, as PyTorch's.
    p0 = dopt.param_groups[0]["params"][0]
    assert list(dopt.state[p0]) == ["step", "exp_avg", "exp_avg_sq", "max_exp_avg_sq"]


def test_state_dict_round_trip_with_groups_continues_bitwise():
    def make(params):
        return dtr.optim.Adam([{"params": params[:1], "lr": 0.02}, {"params": params[1:], "weight_decay": 0.1}],
                              lr=0.01)
    straight = make_params(dtr, "float32")
    opt = make(straight)
    for k in range(4):
        opt.zero_grad()
        loss_of(dtr, straight, k).backward()
        opt.step()

    resumed = make_params(dtr, "float32")
    opt = make(resumed)
    for k in range(4):
        if k == 2:
            saved = opt.state_dict()
            saved = {"state": {i: {n: t.clone() for n, t in s.items()} for i, s in saved["state"].items()},
                     "param_groups": [dict(g) for g in saved["param_groups"]]}
            opt = dtr.optim.Adam([{"params": resumed[:1]}, {"params": resumed[1:]}], lr=1.0)
            opt.load_state_dict(saved)
            assert opt.param_groups[0]["lr"] == 0.02 and opt.param_groups[1]["weight_decay"] == 0.1
            assert opt.param_groups[1]["params"][0] is resumed[1]
        opt.zero_grad()
        loss_of(dtr, resumed, k).backward()
        opt.step()
    for a, b in zip(straight, resumed):
        assert a.tolist() == b.tolist()


def test_a_torch_state_dict_loads_and_continues_like_torch(torch):
    """A checkpoint written by torch (tensors converted) resumes under dtr as under torch."""
    make = lambda lib, p: lib.optim.SGD([{"params": p[:1]}, {"params": p[1:], "lr": 0.002}], lr=0.01,
                                        momentum=0.9)
    _, topt = train(torch, make, steps=2)
    saved = topt.state_dict()
    converted = {"state": {i: {n: dtr.tensor(v.numpy().tolist(), dtype=dtr.float64) if v is not None else None
                               for n, v in s.items()} for i, s in saved["state"].items()},
                 "param_groups": saved["param_groups"]}

    def resume(lib, opt_state):
        params = make_params(lib, "float64")
        with (torch.no_grad() if lib is torch else dtr.no_grad()):
            for p, q in zip(params, topt.param_groups[0]["params"] + topt.param_groups[1]["params"]):
                p.copy_(lib.tensor(q.detach().numpy().tolist(), dtype=p.dtype))
        opt = make(lib, params)
        opt.load_state_dict(opt_state)
        for k in range(2, 5):
            opt.zero_grad()
            loss_of(lib, params, k).backward()
            opt.step()
        return [p.detach().numpy() for p in params]
    for a, b in zip(resume(dtr, converted), resume(torch, saved)):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)


def test_load_state_dict_refuses_other_groups():
    p = make_params(dtr, "float32")
    opt = dtr.optim.SGD([{"params": p[:2]}, {"params": p[2:]}], lr=0.1, momentum=0.9)
    one = dtr.optim.SGD(make_params(dtr, "float32"), lr=0.1)
    with pytest.raises(ValueError, match="different number of parameter groups"):
        one.load_state_dict(opt.state_dict())
    other = dtr.optim.SGD([{"params": p[:1]}, {"params": p[1:]}], lr=0.1)
    with pytest.raises(ValueError, match="doesn't match the size"):
        other.load_state_dict(opt.state_dict())
    bad = opt.state_dict()
    bad["state"] = {0: {"momentum_buffer": 1.5}}
    with pytest.raises(TypeError, match=r"state\[0\]\['momentum_buffer'\] is float"):
        opt.load_state_dict(bad)


# ---- construction, zero_grad and errors ----------------------------------------------

def test_construction_checks_like_torch():
    p = make_params(dtr, "float32")
    with pytest.raises(TypeError, match="iterable of Tensors or dicts"):
        dtr.optim.SGD(p[0], lr=0.1)
    with pytest.raises(TypeError, match="ordered collections"):
        dtr.optim.SGD([{"params": set(p)}], lr=0.1)
    with pytest.raises(ValueError, match="empty parameter list"):
        dtr.optim.Adam([])
    with pytest.raises(ValueError, match="more than one parameter group"):
        dtr.optim.Adam([{"params": p[:2]}, {"params": p[1:]}])
    with pytest.raises(ValueError, match="Invalid beta parameter at index 1"):
        dtr.optim.Adam(p, betas=(0.9, 1.0))
    with pytest.raises(ValueError, match="Invalid learning rate"):
        dtr.optim.AdamW(p, lr=-1)
    opt = dtr.optim.Adam(p)
    with pytest.raises(ValueError, match="more than one parameter group"):
        opt.add_param_group({"params": [p[0]]})
    assert len(opt.param_groups) == 1
    # An invalid edit fails at the next step, naming it.
    opt.param_groups[0]["eps"] = -1.0
    loss_of(dtr, p, 0).backward()
    with pytest.raises(ValueError, match="epsilon"):
        opt.step()


def test_zero_grad_set_to_none_or_zeros():
    p = make_params(dtr, "float32")
    opt = dtr.optim.SGD(p, lr=0.1)
    loss_of(dtr, p, 0).backward()
    opt.zero_grad(set_to_none=False)
    assert all(q.grad is not None and not q.grad.numpy().any() for q in p)
    opt.zero_grad()
    assert all(q.grad is None for q in p)


def test_step_closure_returns_the_loss():
    p = make_params(dtr, "float32")
    opt = dtr.optim.SGD(p, lr=0.1)

    def closure():
        opt.zero_grad()
        loss = loss_of(dtr, p, 0)
        loss.backward()
        return loss
    with dtr.no_grad():
        loss = opt.step(closure)
    assert loss is not None and loss.requires_grad


def test_an_optimizer_written_in_python_on_the_base_class(torch):
    """torch.optim.Optimizer as the base of a user's optimizer: param_groups,
    per-parameter self.state, state_dict, and the schedulers over it."""
    def make(lib):
        class DecayingSGD(lib.optim.Optimizer):
            def __init__(self, params, lr=0.01):
                super().__init__(params, dict(lr=lr))

            def step(self, closure=None):
                with lib.no_grad():
                    for group in self.param_groups:
                        for p in group["params"]:
                            if p.grad is None:
                                continue
                            count = self.state[p].setdefault("count", 0) + 1
                            self.state[p]["count"] = count
                            p.sub_(p.grad * (group["lr"] / count))
        return DecayingSGD
    results = []
    for lib in (dtr, torch):
        (p0, p1, p2), opt = train(lib, lambda lib, p: make(lib)([{"params": p[:2]}, {"params": p[2:], "lr": 0.1}]),
                                  steps=3)
        sched = lib.optim.lr_scheduler.ExponentialLR(opt, gamma=0.5)
        sched.step()
        results.append(([p0, p1, p2], opt.state_dict(), sched.get_last_lr()))
    (ours, dstate, dlr), (theirs, tstate, tlr) = results
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=1e-12)
    assert dstate == tstate and dlr == tlr


# ---- lr_scheduler --------------------------------------------------------------------

SCHEDULERS = {
    "StepLR": lambda S, o: S.StepLR(o, step_size=3, gamma=0.5),
    "MultiStepLR": lambda S, o: S.MultiStepLR(o, milestones=[2, 5, 5, 9], gamma=0.3),
    "ExponentialLR": lambda S, o: S.ExponentialLR(o, gamma=0.9),
    "CosineAnnealingLR": lambda S, o: S.CosineAnnealingLR(o, T_max=7, eta_min=0.001),
    "LambdaLR": lambda S, o: S.LambdaLR(o, lr_lambda=lambda e: 0.95 ** e),
    "LambdaLR per group": lambda S, o: S.LambdaLR(o, lr_lambda=[lambda e: 1 / (e + 1), lambda e: 0.9 ** e]),
    "MultiplicativeLR": lambda S, o: S.MultiplicativeLR(o, lr_lambda=lambda e: 0.97),
    "ConstantLR": lambda S, o: S.ConstantLR(o, factor=0.5, total_iters=4),
    "LinearLR": lambda S, o: S.LinearLR(o, start_factor=0.25, end_factor=0.9, total_iters=6),
    "OneCycleLR": lambda S, o: S.OneCycleLR(o, max_lr=[0.5, 0.05], total_steps=21),
    "OneCycleLR three phase linear": lambda S, o: S.OneCycleLR(
        o, max_lr=0.3, epochs=3, steps_per_epoch=7, pct_start=0.25, anneal_strategy="linear", three_phase=True),
    "SequentialLR": lambda S, o: S.SequentialLR(
        o, [S.LinearLR(o, start_factor=0.1, total_iters=5), S.CosineAnnealingLR(o, T_max=10)], milestones=[5]),
    "SequentialLR three": lambda S, o: S.SequentialLR(
        o, [S.ConstantLR(o, factor=0.3, total_iters=3), S.ExponentialLR(o, gamma=0.8), S.StepLR(o, 2)],
        milestones=[4, 11]),
}


def schedule(lib, name, optimizer, steps=20):
    p = make_params(lib, "float32")
    if optimizer == "sgd":
        opt = lib.optim.SGD([{"params": p[:1]}, {"params": p[1:], "lr": 0.01}], lr=0.1, momentum=0.9)
    else:
        opt = lib.optim.Adam([{"params": p[:1]}, {"params": p[1:], "lr": 0.01}], lr=0.1)
    sched = SCHEDULERS[name](lib.optim.lr_scheduler, opt)
    seen = [(sched.get_last_lr(), [dict((k, g[k]) for k in ("lr", "momentum", "betas") if k in g)
                                   for g in opt.param_groups])]
    for _ in range(steps):
        opt.step()
        sched.step()
        seen.append((list(sched.get_last_lr()), [dict((k, g[k]) for k in ("lr", "momentum", "betas") if k in g)
                                                 for g in opt.param_groups]))
    return seen, sched


@pytest.mark.parametrize("name", sorted(SCHEDULERS))
def test_scheduler_lrs_equal_torchs(torch, name):
    for optimizer in ("sgd", "adam"):
        ours, _ = schedule(dtr, name, optimizer)
        theirs, _ = schedule(torch, name, optimizer)
        assert ours == theirs, (name, optimizer)


@pytest.mark.parametrize("name", ["StepLR", "CosineAnnealingLR", "OneCycleLR", "SequentialLR", "LambdaLR"])
def test_scheduler_state_dict_resumes(name):
    straight, _ = schedule(dtr, name, "sgd", steps=12)
    first, sched = schedule(dtr, name, "sgd", steps=6)
    state = sched.state_dict()
    assert "optimizer" not in state and state["last_epoch"] == 6
    opt = sched.optimizer
    again = SCHEDULERS[name](lr_scheduler, opt)
    again.load_state_dict(state)
    # Restore the lrs the first scheduler had written (the new one's constructor stepped).
    for g, lr in zip(opt.param_groups, first[-1][0]):
        g["lr"] = lr
    for _ in range(6):
        opt.step()
        again.step()
    assert again.get_last_lr() == straight[-1][0]
    assert again.last_epoch == 12


def test_scheduler_errors_like_torch():
    opt = dtr.optim.SGD(make_params(dtr, "float32"), lr=0.1)
    with pytest.raises(TypeError, match="is not an Optimizer"):
        lr_scheduler.StepLR(object(), 3)
    with pytest.raises(ValueError, match="Expected 1 lr_lambdas, but got 2"):
        lr_scheduler.LambdaLR(opt, [lambda e: 1.0, lambda e: 1.0])
    with pytest.raises(ValueError, match="Starting multiplicative factor"):
        lr_scheduler.LinearLR(opt, start_factor=2.0)
    with pytest.raises(ValueError, match="total_steps OR"):
        lr_scheduler.OneCycleLR(opt, max_lr=0.1)
    with pytest.raises(ValueError, match="number of milestone points"):
        lr_scheduler.SequentialLR(opt, [lr_scheduler.StepLR(opt, 2)], milestones=[3])
    with pytest.raises(KeyError, match="initial_lr"):
        lr_scheduler.StepLR(dtr.optim.SGD(make_params(dtr, "float32"), lr=0.1), 3, last_epoch=4)
    one = lr_scheduler.OneCycleLR(opt, max_lr=0.1, total_steps=2)
    with pytest.warns(UserWarning, match="before `optimizer.step"):
        one.step()
    one.step()
    with pytest.raises(ValueError, match="Tried to step 4 times"):
        one.step()
    assert issubclass(lr_scheduler.StepLR, lr_scheduler._LRScheduler)
