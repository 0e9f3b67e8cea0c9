"""A model file written for PyTorch 2 (tests/python/nanogpt/model.py, nanoGPT's
style) runs unchanged under `sys.modules['torch'] = dtr`: from the same weights it
trains to PyTorch 2's losses (tests/golden/nanogpt.json, from
tests/golden/gen_nanogpt.py), its weight-decay parameter groups and its generate()
work, and it trains bitwise equal under half its peak with dropout on."""
import importlib.util
import json
import os
import sys

import numpy as np
import pytest

import dtr
from torch_alias import torch_is_dtr

HERE = os.path.dirname(os.path.abspath(__file__))
MODEL_DIR = os.path.join(HERE, "nanogpt")
GOLDEN = os.path.join(HERE, "..", "golden", "nanogpt.json")


def load(name):
    spec = importlib.util.spec_from_file_location(f"nanogpt_{name}_under_dtr", os.path.join(MODEL_DIR, f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def nanogpt():
    with torch_is_dtr():
        yield load("model"), load("common")


@pytest.fixture(scope="module")
def golden():
    with open(GOLDEN) as f:
        return json.load(f)


def test_the_model_file_sees_dtr_as_torch(nanogpt):
    model, _ = nanogpt
    assert model.torch is dtr and model.F is dtr.nn.functional


def test_trains_to_pytorch2s_losses_from_the_same_weights(nanogpt, golden):
    model, common = nanogpt
    gpt = common.build(dtr, model)
    assert gpt.transformer.h[0].attn.flash  # dtr has F.scaled_dot_product_attention
    assert gpt.transformer.wte.weight is gpt.lm_head.weight  # tied
    losses = common.train(dtr, gpt)
    # Two parameter groups: 10 matrices (28,672 elements) decay, 18 vectors (896) do not.
    assert list(gpt.param_counts) == golden["param_counts"]
    np.testing.assert_allclose(losses, golden["losses"], rtol=2e-5, atol=0)


def test_generate_matches_pytorch2_greedily(nanogpt, golden):
    model, common = nanogpt
    gpt = common.build(dtr, model)
    common.train(dtr, gpt)
    tokens = common.greedy(dtr, gpt)
    assert tokens.dtype == dtr.int64 and tuple(tokens.shape) == (2, 48)
    assert tokens.tolist() == golden["greedy"]


def test_generate_samples_with_top_k(nanogpt):
    model, common = nanogpt
    gpt = common.build(dtr, model)
    gpt.eval()
    prompt = dtr.from_numpy(common.batch()[0][:2, :4].copy())
    dtr.manual_seed(3)
    a = gpt.generate(prompt, 12, temperature=1.0, top_k=5)
    dtr.manual_seed(3)
    b = gpt.generate(prompt, 12, temperature=1.0, top_k=5)
    assert tuple(a.shape) == (2, 16)
    assert a.tolist() == b.tolist()
    assert a[:, :4].tolist() == prompt.tolist()
    # Each sampled token is among the 5 most likely after its context.
    with dtr.no_grad():
        for t in range(4, 16):
            logits, _ = gpt(a[:, :t])
            top = dtr.topk(logits[:, -1, :], 5).indices.tolist()
            for row in range(2):
                assert a[row, t].item() in top[row]


def test_trains_bitwise_equal_under_half_its_peak_with_dropout(nanogpt):
    model, common = nanogpt

    def run(budget):
        dtr.memory.set_budget(budget)
        dtr.manual_seed(7)
        dtr.memory.reset_stats()
        gpt = common.build(dtr, model, dropout=0.1)
        losses = common.train(dtr, gpt, steps=3)
        stats = dtr.memory.stats()
        params = {k: v.detach().numpy().copy() for k, v in gpt.state_dict().items()}
        dtr.memory.set_budget(None)
        return losses, params, stats

    losses, params, stats = run(None)
    budget = stats["peak_bytes"] // 2
    b_losses, b_params, b_stats = run(budget)
    assert b_stats["evictions"] > 0 and b_stats["peak_bytes"] <= budget
    assert [float(v).hex() for v in b_losses] == [float(v).hex() for v in losses]
    assert params.keys() == b_params.keys()
    for k in params:
        assert np.array_equal(params[k], b_params[k]), k
