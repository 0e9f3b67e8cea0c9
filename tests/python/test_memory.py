"""The budget and the stats; training under a budget gives the losses of training
without one, bitwise."""
import pytest

import dtr
import dtr.nn as nn
import dtr.nn.functional as F


def test_stats_is_a_dict_of_the_runtime_counters():
    dtr.memory.reset_stats()
    x = dtr.zeros(256, 256)  # 256 KiB
    s = dtr.memory.stats()
    assert s["budget_bytes"] == -1
    assert s["resident_bytes"] >= 256 * 256 * 4
    assert s["peak_bytes"] >= s["resident_bytes"]
    assert set(s) >= {"evictions", "rematerializations", "recompute_seconds_measured",
                      "metadata_nodes", "live_storages"}
    # The host tier's counters; the cpu itself has no host link: nothing swaps.
    assert {"swap_outs", "swap_ins", "swapped_bytes", "swap_bytes_out", "swap_bytes_in",
            "swap_seconds_estimated", "host_tier_bytes"} <= set(s)
    assert s["swap_outs"] == 0 and s["host_tier_bytes"] == 0
    assert dtr.memory.stats("cpu") == dtr.memory.stats(dtr.device("cpu"))
    del x


def test_set_budget_takes_bytes_strings_and_none():
    dtr.memory.set_budget("64MiB")
    assert dtr.memory.get_budget() == 64 << 20
    assert dtr.memory.stats()["budget_bytes"] == 64 << 20
    dtr.memory.set_budget(1 << 20, device="cpu")
    assert dtr.memory.get_budget("cpu") == 1 << 20
    dtr.memory.set_budget("1.5 KiB")
    assert dtr.memory.get_budget() == 1536
    dtr.memory.set_budget(None)
    assert dtr.memory.get_budget() is None
    dtr.memory.set_budget("none")
    assert dtr.memory.get_budget() is None


def test_set_budget_refuses_a_bool():
    # bool is an int subclass in Python; True would have been a 1-byte budget.
    for flag in (True, False):
        with pytest.raises(TypeError, match="set_budget: .*got bool"):
            dtr.memory.set_budget(flag)
        with pytest.raises(TypeError, match="got bool"):
            dtr.memory.set_budget(flag, device="cpu")
    assert dtr.memory.get_budget() is None
    with pytest.raises(TypeError, match="got float"):
        dtr.memory.set_budget(1e6)
    dtr.memory.set_budget(1 << 20)
    assert dtr.memory.get_budget() == 1 << 20


def mlp_losses(budget, steps=4):
    dtr.manual_seed(11)
    net = nn.Sequential(nn.Linear(64, 128), nn.GELU(), nn.Linear(128, 128), nn.GELU(),
                        nn.Linear(128, 128), nn.GELU(), nn.Linear(128, 10))
    opt = dtr.optim.AdamW(net.parameters(), lr=1e-3)
    dtr.memory.set_budget(budget)
    dtr.memory.reset_stats()
    losses = []
    for _ in range(steps):
        x = dtr.randn(1024, 64)
        y = dtr.randint(0, 10, (1024,))
        loss = F.cross_entropy(net(x), y)
        losses.append(loss.item())
        opt.zero_grad()
        loss.backward()
        opt.step()
    stats = dtr.memory.stats()
    dtr.memory.set_budget(None)
    return losses, stats


def test_training_under_a_budget_gives_the_same_losses_bitwise():
    free, free_stats = mlp_losses(None)
    assert free_stats["evictions"] == 0
    budget = int(free_stats["peak_bytes"] * 0.6)
    tight, tight_stats = mlp_losses(budget)
    assert tight == free
    assert tight_stats["evictions"] > 0 and tight_stats["rematerializations"] > 0
    assert tight_stats["peak_bytes"] <= budget
