"""What the nanoGPT test and its reference generator share: the configuration, the
weights (drawn with NumPy, so PyTorch and dtr start from the same numbers), the
batch and the training loop. `torch` is passed in: PyTorch 2 for the reference,
dtr for the test."""
import numpy as np

CONFIG = dict(block_size=32, vocab_size=96, n_layer=2, n_head=2, n_embd=32, dropout=0.0, bias=True)
BATCH, STEPS, SEED = 4, 5, 1234
LR, WEIGHT_DECAY, BETAS = 1e-3, 0.1, (0.9, 0.95)


def weights(model):
    """A NumPy array per state_dict key (float32): N(0, 0.02) for matrices, 1 + N(0, 0.1)
    for norm weights, N(0, 0.02) for biases. Tied keys (wte / lm_head) get one array."""
    rng = np.random.default_rng(SEED)
    out = {}
    for name, t in sorted(model.state_dict().items()):
        if name == "transformer.wte.weight":
            continue
        shape = tuple(t.shape)
        if len(shape) >= 2:
            a = 0.02 * rng.standard_normal(shape)
        elif name.endswith("ln_1.weight") or name.endswith("ln_2.weight") or name.endswith("ln_f.weight"):
            a = 1.0 + 0.1 * rng.standard_normal(shape)
        else:
            a = 0.02 * rng.standard_normal(shape)
        out[name] = a.astype(np.float32)
    out["transformer.wte.weight"] = out["lm_head.weight"]
    return out


def batch():
    """(x, y) int64 (BATCH, block_size): y is x shifted by one; one target is -1 (ignored)."""
    rng = np.random.default_rng(SEED + 1)
    stream = rng.integers(0, CONFIG["vocab_size"], size=(BATCH, CONFIG["block_size"] + 1))
    x, y = stream[:, :-1].copy(), stream[:, 1:].copy()
    y[0, 3] = -1
    return x.astype(np.int64), y.astype(np.int64)


def build(torch, model_module, **overrides):
    cfg = dict(CONFIG, **overrides)
    model = model_module.GPT(model_module.GPTConfig(**cfg))
    state = {k: torch.from_numpy(v.copy()) for k, v in weights(model).items()}
    model.load_state_dict(state, strict=False)
    return model


def train(torch, model, steps=STEPS):
    """nanoGPT's training step: AdamW with weight-decay groups, clip at 1.0. Returns the losses."""
    x, y = (torch.from_numpy(a) for a in batch())
    optimizer = model.configure_optimizers(WEIGHT_DECAY, LR, BETAS, "cpu")
    model.train()
    losses = []
    for _ in range(steps):
        _, loss = model(x, y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        losses.append(loss.item())
    return losses


def greedy(torch, model, new_tokens=40):
    """Tokens generated greedily (top_k=1) from the first 8 tokens of the batch: 48 tokens,
    more than the block size, so generate crops its context."""
    x, _ = batch()
    model.eval()
    prompt = torch.from_numpy(x[:2, :8].copy())
    return model.generate(prompt, new_tokens, temperature=0.8, top_k=1)
