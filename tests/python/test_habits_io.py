"""PyTorch's module habits (to, named_modules, apply, buffers, hooks), dtr.utils.data,
dtr.save / dtr.load and dtr.cuda, each against PyTorch 1.13 where it has the value."""
import collections
import io
import os

import numpy as np
import pytest

import dtr
import dtr.nn as nn
from dtr.utils.data import (DataLoader, Dataset, IterableDataset, TensorDataset, default_collate,
                            random_split)


def model(lib):
    class Net(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.features = lib.nn.Sequential(lib.nn.Conv1d(2, 4, 3), lib.nn.BatchNorm1d(4), lib.nn.SiLU())
            self.rnn = lib.nn.GRU(4, 5, batch_first=True)
            self.head = lib.nn.Sequential(lib.nn.Flatten(), lib.nn.Linear(30, 3))
            self.register_buffer("scale", lib.ones(3))
            self.register_buffer("scratch", lib.zeros(2), persistent=False)

        def forward(self, x):
            h = self.features(x).transpose(1, 2)
            return self.head(self.rnn(h)[0]) * self.scale
    return Net()


# ---- module habits ---------------------------------------------------------------------

def test_module_traversal_names_match_torch(torch):
    d, t = model(dtr), model(torch)
    assert [n for n, _ in d.named_modules()] == [n for n, _ in t.named_modules()]
    assert [type(m).__name__ for m in d.modules()] == [type(m).__name__ for m in t.modules()]
    assert [n for n, _ in d.named_children()] == [n for n, _ in t.named_children()]
    assert [type(m).__name__ for m in d.children()] == [type(m).__name__ for m in t.children()]
    assert list(d.state_dict()) == list(t.state_dict())
    assert [n for n, _ in d.named_parameters()] == [n for n, _ in t.named_parameters()]
    assert [n for n, _ in d.named_buffers()] == [n for n, _ in t.named_buffers()]
    assert len(list(d.parameters(recurse=False))) == len(list(t.parameters(recurse=False))) == 0
    assert d.get_submodule("features.1") is d.features[1]
    assert d.get_parameter("rnn.weight_hh_l0") is d.rnn.weight_hh_l0
    with pytest.raises(AttributeError):
        d.get_submodule("features.7")


def test_module_forward_matches_torch_with_loaded_weights(torch):
    d, t = model(dtr), model(torch)
    d.load_state_dict({k: v.numpy() for k, v in t.state_dict().items()})
    x = np.random.default_rng(0).standard_normal((2, 2, 8)).astype(np.float32)
    np.testing.assert_allclose(d(dtr.tensor(x)).detach().numpy(), t(torch.tensor(x)).detach().numpy(),
                               rtol=1e-5, atol=1e-5)


def test_apply_visits_children_first_like_torch(torch):
    seen_d, seen_t = [], []
    d, t = model(dtr), model(torch)
    assert d.apply(lambda m: seen_d.append(type(m).__name__)) is d
    t.apply(lambda m: seen_t.append(type(m).__name__))
    assert seen_d == seen_t


def test_train_eval_requires_grad_return_self():
    m = model(dtr)
    assert m.eval() is m and not m.features[1].training
    assert m.train() is m and m.rnn.training
    assert m.requires_grad_(False) is m and not any(p.requires_grad for p in m.parameters())
    m.requires_grad_()
    assert all(p.requires_grad for p in m.parameters())


def test_to_device_keeps_parameters_and_to_dtype_converts_floating_ones():
    m = model(dtr)
    before = list(m.parameters())
    assert m.to("cpu") is m and m.to(device="cpu") is m and m.to(dtr.device("cpu")) is m
    assert all(a is b for a, b in zip(before, m.parameters()))
    m.to(dtr.float64)
    assert all(p.dtype == dtr.float64 and p.requires_grad for p in m.parameters())
    assert all(isinstance(p, nn.Parameter) for p in m.parameters())
    assert m.scale.dtype == m.scratch.dtype == dtr.float64  # non-persistent buffers move too
    assert m.features[1].num_batches_tracked.dtype == dtr.int64  # integers keep their dtype
    out = m(dtr.randn(2, 2, 8, dtype=dtr.float64))
    assert out.dtype == dtr.float64
    m.float()
    assert m.head[1].weight.dtype == dtr.float32
    m.tied = nn.Linear(30, 3)
    m.tied.weight = m.head[1].weight
    m.double()
    assert m.tied.weight is m.head[1].weight and m.tied.weight.dtype == dtr.float64
    with pytest.raises(TypeError, match="floating point"):
        m.to(dtr.int64)


def test_non_persistent_buffers_stay_out_of_the_state_dict(torch):
    d, t = model(dtr), model(torch)
    assert "scratch" not in d.state_dict() and "scratch" in dict(d.named_buffers())
    assert list(d.state_dict()) == list(t.state_dict())
    d.load_state_dict({k: v.numpy() for k, v in t.state_dict().items()})


def test_forward_hooks():
    m = nn.Linear(2, 2)
    calls = []
    h1 = m.register_forward_pre_hook(lambda mod, args: (args[0] * 0,))
    h2 = m.register_forward_hook(lambda mod, args, out: calls.append(out.shape) or out + 1)
    y = m(dtr.ones(1, 2))
    np.testing.assert_allclose(y.detach().numpy(), m.bias.detach().numpy()[None] + 1)
    assert calls == [(1, 2)]
    h1.remove(), h2.remove()
    assert np.allclose(m(dtr.zeros(1, 2)).detach().numpy(), m.bias.detach().numpy())


def test_deepcopy_of_a_module_copies_its_tensors_and_keeps_sharing():
    import copy
    m = model(dtr)
    m.head[1].weight.grad = dtr.ones(3, 30)
    m.tied = nn.Linear(30, 3)
    m.tied.weight = m.head[1].weight
    c = copy.deepcopy(m)
    assert list(c.state_dict()) == list(m.state_dict())
    for (k, a), (_, b) in zip(m.state_dict(keep_vars=True).items(), c.state_dict(keep_vars=True).items()):
        assert a is not b and type(a) is type(b), k
        np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())
    assert c.tied.weight is c.head[1].weight and c.head[1].weight.grad.tolist() == m.head[1].weight.grad.tolist()
    with dtr.no_grad():
        c.head[1].weight.add_(1.0)
    assert not np.array_equal(c.head[1].weight.detach().numpy(), m.head[1].weight.detach().numpy())


# ---- utils.data ------------------------------------------------------------------------

def test_tensor_dataset_and_data_loader_batches():
    x, y = dtr.arange(10).reshape(10, 1).float(), dtr.arange(10)
    ds = TensorDataset(x, y)
    assert len(ds) == 10 and ds[3][1].item() == 3
    batches = list(DataLoader(ds, batch_size=4))
    assert [b[0].shape for b in batches] == [(4, 1), (4, 1), (2, 1)]
    assert batches[1][1].tolist() == [4, 5, 6, 7]
    assert len(DataLoader(ds, batch_size=4)) == 3 and len(DataLoader(ds, batch_size=4, drop_last=True)) == 2
    assert [b[1].tolist() for b in DataLoader(ds, batch_size=4, drop_last=True)] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    with pytest.raises(ValueError, match="Size mismatch"):
        TensorDataset(x, dtr.arange(3))


def test_shuffle_covers_every_sample_once_and_follows_the_seed():
    ds = TensorDataset(dtr.arange(20))

    def order(seed=None, generator=None):
        if seed is not None:
            dtr.manual_seed(seed)
        return [int(v) for b in DataLoader(ds, batch_size=6, shuffle=True, generator=generator) for v in b[0].tolist()]
    a = order(1)
    assert sorted(a) == list(range(20)) and a != list(range(20))
    assert order(1) == a and order(2) != a
    assert order(generator=5) == order(generator=5)


def test_default_collate_matches_torch(torch):
    samples = [{"x": np.full(3, i, dtype=np.float32), "n": i, "f": i / 2, "name": f"s{i}",
                "pair": (i, [i * 1.5, True])} for i in range(4)]
    d = default_collate(samples)
    t = torch.utils.data.default_collate(samples)
    assert d.keys() == t.keys()
    for k in ("x", "n", "f"):
        assert str(d[k].dtype).split(".")[-1] == str(t[k].dtype).split(".")[-1], k
        np.testing.assert_array_equal(d[k].numpy(), t[k].numpy())
    assert d["name"] == t["name"]
    assert d["pair"][0].tolist() == t["pair"][0].tolist()
    assert d["pair"][1][0].tolist() == t["pair"][1][0].tolist()
    assert d["pair"][1][1].tolist() == t["pair"][1][1].tolist()
    stacked = default_collate([dtr.ones(2), dtr.zeros(2)])
    assert stacked.shape == (2, 2)


def test_map_and_iterable_datasets_with_a_collate_fn():
    class Squares(Dataset):
        def __len__(self):
            return 5

        def __getitem__(self, i):
            return i * i

    class Stream(IterableDataset):
        def __iter__(self):
            return iter(range(7))

    assert [b.tolist() for b in DataLoader(Squares(), batch_size=2)] == [[0, 1], [4, 9], [16]]
    assert list(DataLoader(Squares(), batch_size=2, collate_fn=sum)) == [1, 13, 16]
    assert [b.tolist() for b in DataLoader(Stream(), batch_size=3)] == [[0, 1, 2], [3, 4, 5], [6]]
    assert list(DataLoader(Squares(), batch_size=None)) == [0, 1, 4, 9, 16]
    with pytest.raises(ValueError):
        DataLoader(Stream(), shuffle=True)


def test_random_split_sizes_match_torch(torch):
    ds = TensorDataset(dtr.arange(11))
    for lengths in ([3, 8], [0.5, 0.3, 0.2], [0.1, 0.9]):
        parts = random_split(ds, lengths)
        tparts = torch.utils.data.random_split(range(11), lengths)
        assert [len(p) for p in parts] == [len(p) for p in tparts]
        got = sorted(int(p[i][0]) for p in parts for i in range(len(p)))
        assert got == list(range(11))
    with pytest.raises(ValueError):
        random_split(ds, [3, 3])


# ---- save / load -----------------------------------------------------------------------

def test_save_load_state_dict_round_trip_is_bitwise(tmp_path):
    m = model(dtr)
    path = tmp_path / "model.pt"
    dtr.save(m.state_dict(), path)
    sd = dtr.load(path)
    assert isinstance(sd, collections.OrderedDict) and list(sd) == list(m.state_dict())
    for k, v in m.state_dict().items():
        assert sd[k].dtype == v.dtype
        np.testing.assert_array_equal(sd[k].numpy(), v.numpy())
    fresh = model(dtr)
    fresh.load_state_dict(dtr.load(str(path), map_location="cpu"))
    # A state dict file is an ordinary safetensors file with the same names.
    assert list(dtr.load_file(str(path))) == list(m.state_dict())


def test_save_load_optimizer_state_and_a_checkpoint_dict(tmp_path):
    m = nn.Linear(3, 2)
    opt = dtr.optim.AdamW(m.parameters(), lr=1e-3)
    m(dtr.randn(4, 3)).sum().backward()
    opt.step()
    ckpt = {"model": m.state_dict(), "optimizer": opt.state_dict(), "epoch": 7, "loss": 0.25,
            "best": float("inf"), "tags": ["a", None, True], "shape": (2, 3), "by_id": {0: 1.5, 1: "x"}}
    buf = io.BytesIO()
    dtr.save(ckpt, buf)
    back = dtr.load(io.BytesIO(buf.getvalue()))
    assert back["epoch"] == 7 and back["loss"] == 0.25 and back["best"] == float("inf")
    assert back["tags"] == ["a", None, True] and back["shape"] == (2, 3) and back["by_id"] == {0: 1.5, 1: "x"}
    assert_same(back["optimizer"], opt.state_dict())
    assert_same(back["model"], m.state_dict())
    # The loaded state resumes training: one more step matches the uninterrupted run.
    m2 = nn.Linear(3, 2)
    m2.load_state_dict(back["model"])
    opt2 = dtr.optim.AdamW(m2.parameters(), lr=1e-3)
    opt2.load_state_dict(back["optimizer"])
    x = dtr.randn(4, 3)
    for mm, oo in ((m, opt), (m2, opt2)):
        oo.zero_grad()
        mm(x).sum().backward()
        oo.step()
    assert_same(m2.state_dict(), m.state_dict())


def assert_same(a, b, where="top"):
    """Equal structure (types, keys, order) with bitwise-equal tensors."""
    assert type(a) is type(b) or (isinstance(a, dict) and isinstance(b, dict)), where
    if isinstance(a, dtr.Tensor):
        assert a.dtype == b.dtype and a.shape == b.shape, where
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=where)
    elif isinstance(a, dict):
        assert list(a) == list(b), where
        for k in a:
            assert_same(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, f"{where}[{i}]")
    else:
        assert a == b, where


def test_save_load_a_tensor_and_shared_tensors(tmp_path):
    t = dtr.randn(3, 4)
    dtr.save(t, tmp_path / "t.pt")
    np.testing.assert_array_equal(dtr.load(tmp_path / "t.pt").numpy(), t.numpy())
    dtr.save({"a": t, "b": [t, t[0]]}, tmp_path / "shared.pt")
    back = dtr.load(tmp_path / "shared.pt")
    assert back["a"] is back["b"][0]
    assert len(dtr.load_file(str(tmp_path / "shared.pt"))) == 2


def test_load_refuses_other_files_clearly(tmp_path, torch):
    pt = tmp_path / "torch.pt"
    torch.save({"w": torch.zeros(2)}, pt)
    with pytest.raises(ValueError, match="zip archive"):
        dtr.load(pt)
    junk = tmp_path / "junk.bin"
    junk.write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00not json at all!")
    with pytest.raises(ValueError, match="junk.bin"):
        dtr.load(junk)
    with pytest.raises(ValueError, match="no such file"):
        dtr.load(tmp_path / "missing.pt")


def test_save_of_an_unsupported_object_writes_nothing(tmp_path):
    path = tmp_path / "bad.pt"
    with pytest.raises(TypeError, match="object"):
        dtr.save({"fn": object()}, path)
    with pytest.raises(TypeError, match="state_dict"):
        dtr.save(nn.Linear(2, 2), path)
    assert not os.path.exists(path)


def test_load_map_location_forms(tmp_path):
    dtr.save({"w": dtr.ones(2)}, tmp_path / "w.pt")
    for loc in ("cpu", dtr.device("cpu"), {"cpu": "cpu"}, lambda t, _: t):
        assert dtr.load(tmp_path / "w.pt", map_location=loc)["w"].tolist() == [1.0, 1.0]
    with pytest.raises(TypeError):
        dtr.load(tmp_path / "w.pt", map_location=3)


# ---- cuda ------------------------------------------------------------------------------

def test_cuda_queries_never_abort():
    n = dtr.cuda.device_count()
    assert isinstance(n, int) and dtr.cuda.is_available() == (n > 0)
    dtr.cuda.manual_seed(5)
    dtr.cuda.manual_seed_all(5)
    dtr.cuda.empty_cache()
    if n == 0:
        for fn in (dtr.cuda.current_device, dtr.cuda.synchronize, dtr.cuda.memory_allocated,
                   dtr.cuda.max_memory_allocated):
            with pytest.raises(dtr.DeviceError, match="no CUDA device"):
                fn()
        with pytest.raises(dtr.DeviceError):
            nn.Linear(2, 2).cuda()
    else:
        assert dtr.cuda.current_device() == 0
        dtr.cuda.synchronize()
        before = dtr.cuda.memory_allocated()
        x = dtr.ones(1024, device="cuda")
        assert dtr.cuda.memory_allocated() >= before + 4096 and dtr.cuda.max_memory_allocated() >= 4096
        del x


# ---- a PyTorch program, unchanged, on both libraries -------------------------------------

PROGRAM = '''
import torch
import torch.nn as nn
from torch.utils.checkpoint import checkpoint
from torch.utils.data import DataLoader, TensorDataset


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(20, 16)
        self.conv = nn.Conv1d(16, 16, 3, padding=1)
        self.lstm = nn.LSTM(16, 32, batch_first=True)
        layer = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.1, batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2)
        self.head = nn.Sequential(nn.LayerNorm(32), nn.Linear(32, 16), nn.SiLU(), nn.Linear(16, 5))

    def forward(self, x):
        h = self.conv(self.embed(x).transpose(1, 2)).transpose(1, 2)
        h, _ = self.lstm(h)
        h = checkpoint(self.encoder, h, use_reentrant=False)
        return self.head(h.mean(1))


torch.manual_seed(0)
x = torch.randint(0, 20, (64, 10))
y = torch.randint(0, 5, (64,))
loader = DataLoader(TensorDataset(x, y), batch_size=16, shuffle=True)
model = Model()
opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
loss_fn = nn.CrossEntropyLoss(label_smoothing=0.1)
losses = []
for epoch in range(8):
    model.train()
    total = 0.0
    for xb, yb in loader:
        opt.zero_grad()
        loss = loss_fn(model(xb), yb)
        loss.backward()
        opt.step()
        total += loss.item()
    losses.append(total / len(loader))
torch.save({"model": model.state_dict(), "epoch": 8}, path)
restored = Model()
ckpt = torch.load(path, map_location="cpu")
restored.load_state_dict(ckpt["model"])
model.eval(), restored.eval()
with torch.no_grad():
    a, b = model(x).numpy(), restored(x).numpy()
'''


@pytest.mark.parametrize("lib", ["dtr", "torch"])
def test_a_pytorch_training_program_runs_unchanged(lib, tmp_path, torch):
    """The program imports torch; on "dtr" those imports find dtr (torch_alias)."""
    import contextlib

    from torch_alias import torch_is_dtr
    ns = {"path": str(tmp_path / "ckpt.pt")}
    with torch_is_dtr() if lib == "dtr" else contextlib.nullcontext():
        exec(PROGRAM, ns)  # noqa: S102 - the test's own program text
    assert ns["torch"] is (dtr if lib == "dtr" else torch)
    losses = ns["losses"]
    assert losses[-1] < 0.9 * losses[0], losses
    np.testing.assert_array_equal(ns["a"], ns["b"])
