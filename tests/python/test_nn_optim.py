import collections

import numpy as np
import pytest

import dtr
import dtr.nn as nn
import dtr.nn.functional as F


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 8)
        self.act = nn.GELU()
        self.blocks = nn.ModuleList([nn.Linear(8, 8), nn.Linear(8, 8)])
        self.norm = nn.LayerNorm(8)
        self.head = nn.Linear(8, 3, bias=False)
        self.register_buffer("steps", dtr.zeros((), dtype=dtr.int64))

    def forward(self, x):
        x = self.act(self.fc1(x))
        for b in self.blocks:
            x = x + F.relu(b(x))
        return self.head(self.norm(x))


def test_module_registers_parameters_buffers_and_children_in_order():
    net = Net()
    names = [n for n, _ in net.named_parameters()]
    assert names == ["fc1.weight", "fc1.bias", "blocks.0.weight", "blocks.0.bias",
                     "blocks.1.weight", "blocks.1.bias", "norm.weight", "norm.bias", "head.weight"]
    assert all(isinstance(p, nn.Parameter) and p.requires_grad and p.is_leaf
               for p in net.parameters())
    assert [n for n, _ in net.named_buffers()] == ["steps"]
    assert list(net.state_dict()) == names[:-1] + ["head.weight", "steps"] or \
        list(net.state_dict()) == ["steps"] + names  # per module: own params, buffers, children
    assert [n for n, _ in net.named_children()] == ["fc1", "act", "blocks", "norm", "head"]
    assert net.head.bias is None


def test_state_dict_order_is_pytorchs():
    net = Net()
    assert list(net.state_dict()) == ["steps", "fc1.weight", "fc1.bias", "blocks.0.weight",
                                      "blocks.0.bias", "blocks.1.weight", "blocks.1.bias",
                                      "norm.weight", "norm.bias", "head.weight"]


def test_train_eval_and_dropout():
    net = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5))
    assert net.training and net[1].training
    net.eval()
    assert not net.training and not net[1].training
    x = dtr.ones(2, 4)
    assert net(x).tolist() == net[0](x).tolist()
    net.train()
    assert net[1].training


def test_load_state_dict_copies_in_place_and_checks_keys():
    a, b = Net(), Net()
    b.load_state_dict(a.state_dict())
    for (n, p), (_, q) in zip(a.named_parameters(), b.named_parameters()):
        assert p.tolist() == q.tolist(), n
    bad = collections.OrderedDict(a.state_dict())
    bad["extra"] = dtr.zeros(1)
    del bad["head.weight"]
    with pytest.raises(RuntimeError, match='Unexpected key.*"extra".*\n.*Missing key.*"head.weight"'):
        b.load_state_dict(bad)
    r = b.load_state_dict(bad, strict=False)
    assert r.missing_keys == ["head.weight"] and r.unexpected_keys == ["extra"]
    wrong = a.state_dict()
    wrong["fc1.bias"] = dtr.zeros(3)
    with pytest.raises(RuntimeError, match="size mismatch for fc1.bias"):
        b.load_state_dict(wrong)


def test_layers_draw_their_initial_weights_like_pytorch_layers_of_the_cxx_library():
    # nn.Linear(4, 3) after manual_seed: weight first (kaiming_uniform), then bias.
    dtr.manual_seed(7)
    lin = nn.Linear(4, 3)
    dtr.manual_seed(7)
    w = nn.init._kaiming_uniform((3, 4))
    b = nn.init._uniform((3,), -0.5, 0.5)
    assert lin.weight.tolist() == w.tolist() and lin.bias.tolist() == b.tolist()
    bound = 1 / np.sqrt(4) * np.sqrt(3) * np.sqrt(2 / 6)  # gain sqrt(2/(1+5)), sqrt(3/fan_in)
    assert np.abs(lin.weight.detach().numpy()).max() <= bound


def copy_into_torch(torch, dmod, tmod):
    with torch.no_grad():
        for (n, p), (m, q) in zip(dmod.named_parameters(), tmod.named_parameters()):
            assert n == m
            q.copy_(torch.from_numpy(p.detach().numpy().copy()))


@pytest.mark.parametrize("opt_name", ["SGD", "AdamW"])
def test_one_training_step_matches_torch(torch, opt_name):
    dnet = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    tnet = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
    copy_into_torch(torch, dnet, tnet)
    if opt_name == "SGD":
        dopt = dtr.optim.SGD(dnet.parameters(), lr=0.1, momentum=0.9, weight_decay=0.01)
        topt = torch.optim.SGD(tnet.parameters(), lr=0.1, momentum=0.9, weight_decay=0.01)
    else:
        dopt = dtr.optim.AdamW(dnet.parameters(), lr=1e-2, betas=(0.9, 0.95), weight_decay=0.1)
        topt = torch.optim.AdamW(tnet.parameters(), lr=1e-2, betas=(0.9, 0.95), weight_decay=0.1)
    x = np.random.default_rng(1).standard_normal((5, 4)).astype(np.float32)
    y = np.array([0, 2, 1, 1, 0])
    for step in range(3):
        dloss = F.cross_entropy(dnet(dtr.tensor(x)), dtr.tensor(y))
        tloss = torch.nn.functional.cross_entropy(tnet(torch.from_numpy(x)), torch.from_numpy(y))
        np.testing.assert_allclose(dloss.item(), tloss.item(), rtol=1e-5)
        dopt.zero_grad()
        topt.zero_grad()
        dloss.backward()
        tloss.backward()
        dopt.step()
        topt.step()
    for p, q in zip(dnet.parameters(), tnet.parameters()):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-4, atol=1e-6)


def test_param_groups_lr_drives_the_step():
    p = nn.Parameter(dtr.ones(2))
    opt = dtr.optim.SGD([p], lr=1.0)
    opt.param_groups[0]["lr"] = 0.5
    (p * p).sum().backward()
    opt.step()
    assert p.tolist() == [0.0, 0.0]
    assert opt.state_dict()["param_groups"][0]["lr"] == 0.5


def test_optimizer_state_dict_round_trip_continues_bitwise():
    def run(resume):
        dtr.manual_seed(3)
        net = nn.Linear(3, 2)
        opt = dtr.optim.AdamW(net.parameters(), lr=0.1)
        x = dtr.randn(4, 3)
        losses = []
        for step in range(4):
            if resume and step == 2:
                state, weights = opt.state_dict(), net.state_dict()
                state = {"state": {i: {k: v.clone() for k, v in s.items()} for i, s in state["state"].items()},
                         "param_groups": state["param_groups"]}
                weights = {k: v.clone() for k, v in weights.items()}
                net = nn.Linear(3, 2)
                net.load_state_dict(weights)
                opt = dtr.optim.AdamW(net.parameters(), lr=0.1)
                opt.load_state_dict(state)
            loss = net(x).pow(2).mean()
            losses.append(loss.item())
            opt.zero_grad()
            loss.backward()
            opt.step()
        return losses
    assert run(False) == run(True)


def test_conv_batchnorm_model_trains():
    net = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU())
    opt = dtr.optim.SGD(net.parameters(), lr=0.1)
    x = dtr.randn(2, 1, 5, 5)
    first = None
    for _ in range(3):
        loss = net(x).mean()
        first = first if first is not None else loss.item()
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert loss.item() < first
    assert net[1].num_batches_tracked.item() == 3


def test_causal_self_attention_is_causal():
    attn = nn.CausalSelfAttention(8, 2)
    x = dtr.randn(1, 4, 8)
    y = attn(x)
    x2 = x.clone()
    x2[0, 3] = 100.0  # the last position cannot change earlier outputs
    y2 = attn(x2)
    np.testing.assert_array_equal(y[0, :3].detach().numpy(), y2[0, :3].detach().numpy())
    assert y.shape == (1, 4, 8)


def test_safetensors_files_round_trip_a_state_dict(tmp_path):
    net = Net()
    path = str(tmp_path / "net.safetensors")
    dtr.save_file(dict(net.state_dict()), path, {"format": "test"})
    loaded = dtr.load_file(path)
    assert list(loaded) == list(net.state_dict())
    other = Net()
    other.load_state_dict(loaded)
    assert other.fc1.weight.tolist() == net.fc1.weight.tolist()
    with pytest.raises(ValueError, match="missing.safetensors"):
        dtr.load_file(str(tmp_path / "missing.safetensors"))


def test_save_file_names_the_key_whose_value_or_name_is_wrong(tmp_path):
    path = tmp_path / "bad.safetensors"
    with pytest.raises(TypeError, match=r"save_file: the value of key 'a' is int; expected a Tensor"):
        dtr.save_file({"w": dtr.zeros(2), "a": 3}, str(path))
    with pytest.raises(TypeError, match=r"save_file: key 1 is int; expected str"):
        dtr.save_file({1: dtr.zeros(2)}, str(path))
    assert not path.exists()  # nothing is written before every entry is checked


def test_optimizer_load_state_dict_names_a_value_that_is_not_a_tensor():
    opt = dtr.optim.SGD(Net().parameters(), lr=0.1, momentum=0.9)
    with pytest.raises(TypeError, match=r"load_state_dict: the value of key 'state.0.x' is float"):
        opt.load_state_dict({"state.0.x": 1.5})  # dtr's flat form (the C++ state_dict)
    with pytest.raises(TypeError, match=r"state\[0\]\['x'\] is float; expected a Tensor"):
        opt.load_state_dict({"state": {0: {"x": 1.5}}, "param_groups": opt.state_dict()["param_groups"]})
