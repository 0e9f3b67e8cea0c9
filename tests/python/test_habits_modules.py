"""PyTorch's nn modules in dtr.nn against PyTorch 1.13 (Debian's python3-torch): the
same weights (copied in through load_state_dict from torch's state dict as numpy
arrays), the same inputs, and the forward values and gradients compared."""
import numpy as np
import pytest

import dtr
import dtr.nn as nn
import dtr.nn.functional as F

RTOL, ATOL = 1e-5, 1e-5


def rng(seed=0):
    return np.random.default_rng(seed)


def arr(*shape, seed=0, scale=1.0):
    return (rng(seed).standard_normal(shape) * scale).astype(np.float32)


def same_weights(torch, dmod, tmod):
    """Copies tmod's state into dmod (numpy arrays through load_state_dict) and checks
    that both list the same keys in the same order."""
    tsd = tmod.state_dict()
    assert list(dmod.state_dict()) == list(tsd)
    dmod.load_state_dict({k: v.detach().numpy() for k, v in tsd.items()})


def run_both(torch, dmod, tmod, *inputs, out_index=None, grad_inputs=True, seed=7, modules=None):
    """Runs both modules (or callables, then `modules` names the modules whose parameters
    to compare) on the same inputs, backprops sum(out * R) and compares the output, the
    inputs' gradients and the parameters' gradients."""
    dx = [dtr.tensor(a, requires_grad=grad_inputs and a.dtype == np.float32) for a in inputs]
    tx = [torch.tensor(a, requires_grad=grad_inputs and a.dtype == np.float32) for a in inputs]
    dout, tout = dmod(*dx), tmod(*tx)
    if out_index is not None:
        dout, tout = dout[out_index], tout[out_index]
    np.testing.assert_allclose(dout.detach().numpy(), tout.detach().numpy(), rtol=RTOL, atol=ATOL)
    if not tout.requires_grad:
        return dout, tout
    r = arr(*tout.shape, seed=seed)
    (dout * dtr.tensor(r)).sum().backward()
    (tout * torch.tensor(r)).sum().backward()
    dmod, tmod = modules or (dmod, tmod)
    for d, t in zip(dx, tx):
        if t.requires_grad:
            np.testing.assert_allclose(d.grad.numpy(), t.grad.numpy(), rtol=1e-4, atol=1e-5)
    tparams = dict(tmod.named_parameters())
    for name, p in dmod.named_parameters():
        tg = tparams[name].grad
        if tg is None:
            assert p.grad is None or not p.grad.numpy().any(), name
        else:
            np.testing.assert_allclose(p.grad.numpy(), tg.numpy(), rtol=1e-4, atol=1e-5, err_msg=name)
    return dout, tout


@pytest.mark.parametrize("name,args", [("Tanh", ()), ("Sigmoid", ()), ("SiLU", ()), ("LeakyReLU", (0.2,)),
                                       ("Softmax", (1,)), ("LogSoftmax", (-1,)), ("Identity", ()),
                                       ("Flatten", ()), ("Flatten", (0, 1)), ("ReLU", ()), ("GELU", ())])
def test_activation_and_reshape_modules_match_torch(torch, name, args):
    x = arr(3, 4, 5)
    x[0, 0, :2] = 0.0  # the gradient at 0 (LeakyReLU's is negative_slope)
    run_both(torch, getattr(nn, name)(*args), getattr(torch.nn, name)(*args), x)


def test_unflatten_matches_torch(torch):
    run_both(torch, nn.Unflatten(1, (2, 6)), torch.nn.Unflatten(1, (2, 6)), arr(3, 12, 2))
    assert nn.Unflatten(-1, [3, -1])(dtr.zeros(2, 12)).shape == (2, 3, 4)


def test_softmax_without_dim_takes_pytorchs_legacy_dim(torch):
    for shape in [(5,), (3, 5), (2, 3, 5), (2, 3, 4, 5)]:
        with pytest.warns(UserWarning):
            t = torch.nn.Softmax()(torch.tensor(arr(*shape)))
        np.testing.assert_allclose(nn.Softmax()(dtr.tensor(arr(*shape))).numpy(), t.numpy(), rtol=1e-6)


@pytest.mark.parametrize("kw", [dict(), dict(stride=2, padding=1), dict(dilation=2, padding=2),
                                dict(groups=2, bias=False), dict(padding="same"), dict(padding="valid")])
def test_conv1d_matches_torch(torch, kw):
    tmod = torch.nn.Conv1d(4, 6, 3, **kw)
    dmod = nn.Conv1d(4, 6, 3, **kw)
    same_weights(torch, dmod, tmod)
    run_both(torch, dmod, tmod, arr(2, 4, 11))


def test_conv1d_unbatched_input_and_weight_shape(torch):
    dmod = nn.Conv1d(3, 5, 4)
    assert dmod.weight.shape == (5, 3, 4) and dmod.bias.shape == (5,)
    tmod = torch.nn.Conv1d(3, 5, 4)
    same_weights(torch, dmod, tmod)
    run_both(torch, dmod, tmod, arr(3, 9))


@pytest.mark.parametrize("shape", [(6, 4), (6, 4, 5)])
def test_batchnorm1d_train_and_eval_match_torch(torch, shape):
    tmod, dmod = torch.nn.BatchNorm1d(4), nn.BatchNorm1d(4)
    same_weights(torch, dmod, tmod)
    run_both(torch, dmod, tmod, arr(*shape, seed=1))
    run_both(torch, dmod, tmod, arr(*shape, seed=2))
    for k, v in tmod.state_dict().items():
        np.testing.assert_allclose(dmod.state_dict()[k].numpy(), v.numpy(), rtol=1e-5, atol=1e-6, err_msg=k)
    tmod.eval(), dmod.eval()
    run_both(torch, dmod, tmod, arr(*shape, seed=3))
    with pytest.raises(ValueError, match="2D or 3D"):
        dmod(dtr.zeros(2, 4, 3, 3))


@pytest.mark.parametrize("cls", ["LSTM", "GRU"])
@pytest.mark.parametrize("kw", [dict(), dict(num_layers=2, batch_first=True), dict(bidirectional=True),
                                dict(num_layers=2, bidirectional=True, bias=False)])
def test_recurrent_layers_match_torch(torch, cls, kw):
    tmod, dmod = getattr(torch.nn, cls)(3, 5, **kw), getattr(nn, cls)(3, 5, **kw)
    same_weights(torch, dmod, tmod)
    x = arr(2, 4, 3) if kw.get("batch_first") else arr(4, 2, 3)
    run_both(torch, dmod, tmod, x, out_index=0)
    # The final states too, with given initial ones.
    layers = kw.get("num_layers", 1) * (2 if kw.get("bidirectional") else 1)
    h0 = arr(layers, 2, 5, seed=3)
    if cls == "LSTM":
        c0 = arr(layers, 2, 5, seed=4)
        do, (dh, dc) = dmod(dtr.tensor(x), (dtr.tensor(h0), dtr.tensor(c0)))
        to, (th, tc) = tmod(torch.tensor(x), (torch.tensor(h0), torch.tensor(c0)))
        np.testing.assert_allclose(dc.detach().numpy(), tc.detach().numpy(), rtol=RTOL, atol=ATOL)
    else:
        do, dh = dmod(dtr.tensor(x), dtr.tensor(h0))
        to, th = tmod(torch.tensor(x), torch.tensor(h0))
    np.testing.assert_allclose(do.detach().numpy(), to.detach().numpy(), rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(dh.detach().numpy(), th.detach().numpy(), rtol=RTOL, atol=ATOL)


def test_recurrent_parameters_have_pytorchs_names_shapes_and_init_bound(torch):
    d = nn.LSTM(3, 8, num_layers=2, bidirectional=True)
    t = torch.nn.LSTM(3, 8, num_layers=2, bidirectional=True)
    assert [(k, tuple(v.shape)) for k, v in d.state_dict().items()] == \
        [(k, tuple(v.shape)) for k, v in t.state_dict().items()]
    for p in d.parameters():
        assert np.abs(p.detach().numpy()).max() <= 1 / np.sqrt(8)
    assert [k for k in nn.GRU(3, 4).state_dict()] == [k for k in torch.nn.GRU(3, 4).state_dict()]


def test_recurrent_unbatched_input(torch):
    tmod, dmod = torch.nn.GRU(3, 4), nn.GRU(3, 4)
    same_weights(torch, dmod, tmod)
    run_both(torch, dmod, tmod, arr(5, 3), out_index=0)


def test_recurrent_dropout_between_layers_only_in_training():
    m = nn.LSTM(3, 4, num_layers=2, dropout=0.5)
    x = dtr.tensor(arr(5, 2, 3))
    dtr.manual_seed(1)
    a = m(x)[0]
    dtr.manual_seed(2)
    b = m(x)[0]
    assert not np.allclose(a.detach().numpy(), b.detach().numpy())
    m.eval()
    np.testing.assert_array_equal(m(x)[0].detach().numpy(), m(x)[0].detach().numpy())


@pytest.mark.parametrize("cls", ["LSTMCell", "GRUCell"])
def test_cells_match_torch(torch, cls):
    tmod, dmod = getattr(torch.nn, cls)(3, 5), getattr(nn, cls)(3, 5)
    same_weights(torch, dmod, tmod)
    run_both(torch, dmod, tmod, arr(2, 3), out_index=0 if cls == "LSTMCell" else None)
    h = arr(2, 5, seed=5)
    if cls == "LSTMCell":
        d = dmod(dtr.tensor(arr(2, 3)), (dtr.tensor(h), dtr.tensor(h * 0.5)))[1]
        t = tmod(torch.tensor(arr(2, 3)), (torch.tensor(h), torch.tensor(h * 0.5)))[1]
    else:
        d = dmod(dtr.tensor(arr(3)), dtr.tensor(h[0]))
        t = tmod(torch.tensor(arr(3)), torch.tensor(h[0]))
    np.testing.assert_allclose(d.detach().numpy(), t.detach().numpy(), rtol=RTOL, atol=ATOL)


BUDGET = 300 * 1024


def test_lstm_under_a_budget_is_bitwise_the_unlimited_run():
    def step():
        dtr.manual_seed(0)
        m = nn.LSTM(16, 32, num_layers=2)
        x = dtr.randn(24, 4, 16, requires_grad=True)
        out, _ = m(x)
        (out * out).sum().backward()
        # Copies: an array sharing a tensor's memory pins its storage.
        return [x.grad.numpy().copy()] + [p.grad.numpy().copy() for p in m.parameters()]
    free = step()
    dtr.memory.reset_stats()
    dtr.memory.set_budget(BUDGET)
    try:
        tight = step()
        evictions = dtr.memory.stats()["evictions"]
    finally:
        dtr.memory.set_budget(None)
    assert evictions > 0
    for a, b in zip(free, tight):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("kw,call", [
    (dict(), dict()),
    (dict(batch_first=True), dict()),
    (dict(), dict(average_attn_weights=False)),
    (dict(), dict(need_weights=False)),
    (dict(bias=False), dict()),
])
def test_multihead_attention_matches_torch(torch, kw, call):
    tmod, dmod = torch.nn.MultiheadAttention(8, 2, **kw), nn.MultiheadAttention(8, 2, **kw)
    same_weights(torch, dmod, tmod)
    shape_q, shape_kv = ((3, 4, 8), (3, 6, 8)) if kw.get("batch_first") else ((4, 3, 8), (6, 3, 8))
    q, k, v = arr(*shape_q, seed=1), arr(*shape_kv, seed=2), arr(*shape_kv, seed=3)
    run_both(torch, lambda *a: dmod(*a, **call), lambda *a: tmod(*a, **call), q, k, v, out_index=0,
             modules=(dmod, tmod))
    if call.get("need_weights", True):
        dw = dmod(dtr.tensor(q), dtr.tensor(k), dtr.tensor(v), **call)[1]
        tw = tmod(torch.tensor(q), torch.tensor(k), torch.tensor(v), **call)[1]
        np.testing.assert_allclose(dw.detach().numpy(), tw.detach().numpy(), rtol=RTOL, atol=1e-6)


def test_multihead_attention_masks_match_torch(torch):
    tmod, dmod = torch.nn.MultiheadAttention(8, 2), nn.MultiheadAttention(8, 2)
    same_weights(torch, dmod, tmod)
    x = arr(5, 3, 8)
    causal = np.triu(np.ones((5, 5), dtype=bool), 1)
    pad = np.zeros((3, 5), dtype=bool)
    pad[1, 3:] = True
    float_mask = arr(5, 5, seed=9)
    for kwargs in [dict(attn_mask=causal), dict(key_padding_mask=pad), dict(attn_mask=float_mask),
                   dict(attn_mask=causal, key_padding_mask=pad)]:
        for need in (True, False):
            d = dmod(*(dtr.tensor(x),) * 3, need_weights=need,
                     **{k: dtr.tensor(v) for k, v in kwargs.items()})
            t = tmod(*(torch.tensor(x),) * 3, need_weights=need,
                     **{k: torch.tensor(v) for k, v in kwargs.items()})
            np.testing.assert_allclose(d[0].detach().numpy(), t[0].detach().numpy(), rtol=RTOL, atol=ATOL)
            if need:
                np.testing.assert_allclose(d[1].detach().numpy(), t[1].detach().numpy(), rtol=RTOL,
                                           atol=1e-6)


def test_multihead_attention_unbatched(torch):
    tmod, dmod = torch.nn.MultiheadAttention(8, 4), nn.MultiheadAttention(8, 4)
    same_weights(torch, dmod, tmod)
    x = arr(5, 8)
    run_both(torch, lambda a: dmod(a, a, a), lambda a: tmod(a, a, a), x, out_index=0,
             modules=(dmod, tmod))


@pytest.mark.parametrize("kw", [dict(), dict(norm_first=True), dict(activation="gelu", batch_first=True)])
def test_transformer_encoder_layer_matches_torch(torch, kw):
    tmod = torch.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, **kw)
    dmod = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, **kw)
    same_weights(torch, dmod, tmod)
    run_both(torch, dmod, tmod, arr(3, 4, 8))
    causal = np.triu(np.full((3, 3), -np.inf, dtype=np.float32), 1)
    if kw.get("batch_first"):
        causal = np.triu(np.full((4, 4), -np.inf, dtype=np.float32), 1)
    np.testing.assert_allclose(
        dmod(dtr.tensor(arr(3, 4, 8)), src_mask=dtr.tensor(causal)).detach().numpy(),
        tmod(torch.tensor(arr(3, 4, 8)), src_mask=torch.tensor(causal)).detach().numpy(), rtol=RTOL, atol=ATOL)


def test_transformer_encoder_matches_torch(torch):
    layer = torch.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0)
    tmod = torch.nn.TransformerEncoder(layer, 2, norm=torch.nn.LayerNorm(8), enable_nested_tensor=False)
    dmod = nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0), 2, norm=nn.LayerNorm(8))
    same_weights(torch, dmod, tmod)
    # The layers are copies: their parameters are distinct tensors.
    assert dmod.layers[0].linear1.weight is not dmod.layers[1].linear1.weight
    run_both(torch, dmod, tmod, arr(3, 2, 8))


def test_transformer_dropout_is_active_in_training_only():
    m = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.5)
    x = dtr.tensor(arr(3, 2, 8))
    assert not np.allclose(m(x).detach().numpy(), m(x).detach().numpy())
    m.eval()
    np.testing.assert_array_equal(m(x).detach().numpy(), m(x).detach().numpy())


# ---- losses ---------------------------------------------------------------------------

@pytest.mark.parametrize("kw", [dict(), dict(label_smoothing=0.1), dict(reduction="sum", label_smoothing=0.2),
                                dict(reduction="none", label_smoothing=0.3), dict(ignore_index=1),
                                dict(ignore_index=1, label_smoothing=0.1), dict(weight=True),
                                dict(weight=True, label_smoothing=0.25, ignore_index=2),
                                dict(weight=True, reduction="none")])
def test_cross_entropy_loss_matches_torch(torch, kw):
    w = np.array([0.5, 2.0, 1.0, 1.5], dtype=np.float32)
    dkw, tkw = dict(kw), dict(kw)
    if kw.get("weight"):
        dkw["weight"], tkw["weight"] = dtr.tensor(w), torch.tensor(w)
    target = np.array([0, 1, 3, 2, 1, 2], dtype=np.int64)
    run_both(torch, nn.CrossEntropyLoss(**dkw), torch.nn.CrossEntropyLoss(**tkw), arr(6, 4), target)
    # (N, C, d) inputs.
    target2 = rng(3).integers(0, 4, (2, 5)).astype(np.int64)
    run_both(torch, nn.CrossEntropyLoss(**dkw), torch.nn.CrossEntropyLoss(**tkw), arr(2, 4, 5), target2)


@pytest.mark.parametrize("kw", [dict(), dict(label_smoothing=0.2), dict(reduction="sum")])
def test_cross_entropy_with_probability_targets_matches_torch(torch, kw):
    p = np.abs(arr(5, 3, seed=4))
    p /= p.sum(1, keepdims=True)
    run_both(torch, nn.CrossEntropyLoss(**kw), torch.nn.CrossEntropyLoss(**kw), arr(5, 3), p)


@pytest.mark.parametrize("kw", [dict(), dict(weight=True), dict(weight=True, ignore_index=0),
                                dict(reduction="sum")])
def test_nll_loss_matches_torch(torch, kw):
    w = np.array([0.5, 2.0, 1.0], dtype=np.float32)
    dkw, tkw = dict(kw), dict(kw)
    if kw.get("weight"):
        dkw["weight"], tkw["weight"] = dtr.tensor(w), torch.tensor(w)
    target = np.array([0, 1, 2, 2, 0], dtype=np.int64)
    run_both(torch, nn.NLLLoss(**dkw), torch.nn.NLLLoss(**tkw), arr(5, 3), target)


@pytest.mark.parametrize("name,kw", [("MSELoss", {}), ("L1Loss", {}), ("L1Loss", dict(reduction="sum")),
                                     ("SmoothL1Loss", {}), ("SmoothL1Loss", dict(beta=0.5)),
                                     ("SmoothL1Loss", dict(beta=0.0, reduction="none")),
                                     ("HuberLoss", dict(delta=0.7)), ("BCEWithLogitsLoss", {}),
                                     ("BCEWithLogitsLoss", dict(reduction="none"))])
def test_regression_losses_match_torch(torch, name, kw):
    run_both(torch, getattr(nn, name)(**kw), getattr(torch.nn, name)(**kw), arr(4, 5),
             arr(4, 5, seed=1) if "BCE" not in name else (arr(4, 5, seed=1) > 0).astype(np.float32))


def test_bce_losses_with_weights_match_torch(torch):
    x, y = arr(4, 3), (arr(4, 3, seed=1) > 0).astype(np.float32)
    w, pw = np.abs(arr(3, seed=2)), np.abs(arr(3, seed=3))
    run_both(torch, nn.BCEWithLogitsLoss(weight=dtr.tensor(w), pos_weight=dtr.tensor(pw)),
             torch.nn.BCEWithLogitsLoss(weight=torch.tensor(w), pos_weight=torch.tensor(pw)), x, y)
    p = 1 / (1 + np.exp(-x))
    p[0, 0] = 0.0  # log(0) clamped to -100, as PyTorch
    run_both(torch, nn.BCELoss(), torch.nn.BCELoss(), p.astype(np.float32), y, grad_inputs=False)
    run_both(torch, nn.BCELoss(weight=dtr.tensor(w)), torch.nn.BCELoss(weight=torch.tensor(w)),
             np.clip(p, 0.05, 0.95).astype(np.float32), y)


def test_loss_errors():
    with pytest.raises(ValueError, match="reduction"):
        nn.L1Loss(reduction="avg")
    with pytest.raises(ValueError, match="label_smoothing"):
        F.cross_entropy(dtr.zeros(2, 3), dtr.tensor([0, 1]), label_smoothing=1.5)
    with pytest.raises(ValueError, match="size"):
        F.l1_loss(dtr.zeros(2, 3), dtr.zeros(3, 2))


def test_loss_weight_is_a_buffer(torch):
    w = dtr.tensor([1.0, 2.0])
    assert list(nn.CrossEntropyLoss(weight=w).state_dict()) == \
        list(torch.nn.CrossEntropyLoss(weight=torch.tensor([1.0, 2.0])).state_dict()) == ["weight"]


def test_cross_entropy_label_smoothing_trains_an_mlp_like_torch(torch):
    """Three SGD steps of a small MLP with CrossEntropyLoss(label_smoothing=0.1)."""
    dnet = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3))
    tnet = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))
    same_weights(torch, dnet, tnet)
    dopt = dtr.optim.SGD(dnet.parameters(), lr=0.5)
    topt = torch.optim.SGD(tnet.parameters(), lr=0.5)
    x, y = arr(10, 6), rng(1).integers(0, 3, 10)
    dl, tl = nn.CrossEntropyLoss(label_smoothing=0.1), torch.nn.CrossEntropyLoss(label_smoothing=0.1)
    for _ in range(3):
        dopt.zero_grad(), topt.zero_grad()
        a = dl(dnet(dtr.tensor(x)), dtr.tensor(y))
        b = tl(tnet(torch.tensor(x)), torch.tensor(y))
        a.backward(), b.backward()
        dopt.step(), topt.step()
        np.testing.assert_allclose(a.item(), b.item(), rtol=1e-5)
    for k, v in tnet.state_dict().items():
        np.testing.assert_allclose(dnet.state_dict()[k].numpy(), v.numpy(), rtol=1e-4, atol=1e-6)
