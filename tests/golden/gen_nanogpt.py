"""Records tests/golden/nanogpt.json: the losses and greedy tokens of
tests/python/nanogpt/model.py under PyTorch 2 (the benchmarks' PyTorch:
`build/venv-bench/bin/python tests/golden/gen_nanogpt.py`)."""
import json
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python", "nanogpt"))
import common  # noqa: E402
import model  # noqa: E402

torch.manual_seed(0)
torch.set_num_threads(1)
gpt = common.build(torch, model)
assert gpt.transformer.h[0].attn.flash, "PyTorch 2 has scaled_dot_product_attention"
losses = common.train(torch, gpt)
tokens = common.greedy(torch, gpt)
out = {"torch": torch.__version__, "losses": losses, "greedy": tokens.tolist(),
       "param_counts": list(gpt.param_counts)}
with open(os.path.join(HERE, "nanogpt.json"), "w") as f:
    json.dump(out, f, indent=1)
    f.write("\n")
print(json.dumps(out))
