# Reference numbers for tests/eager/optim_groups_test.cpp (parameter groups,
# Adam), computed with PyTorch 1.13: /usr/bin/python3 tests/eager/optim_groups_reference.py.
# The test never imports torch; the printed values are pasted into it.
import math

import torch

MULT = [1.0, -2.0, 0.1]


def vals(shape, a, dtype=torch.float64):
    """The tests' deterministic values: ((i*a) % 13 - 6)/8 + 0.01 i."""
    n = math.prod(shape)
    return torch.tensor([((i * a) % 13 - 6) / 8.0 + 0.01 * i for i in range(n)], dtype=dtype).reshape(shape)


def show(name, values):
    print(name, "{" + ", ".join(repr(float(x)) for x in values) + "}")


def run(make, dtype=torch.float64, edit=None):
    """Three steps with fixed gradients over p0 (2x2) and p1 (3); `edit(opt, k)` runs before step k."""
    p0 = vals((2, 2), 3, dtype).requires_grad_()
    p1 = vals((3,), 5, dtype).requires_grad_()
    opt = make(p0, p1)
    for k in range(3):
        if edit is not None:
            edit(opt, k)
        p0.grad = vals((2, 2), 7, dtype) * MULT[k]
        p1.grad = vals((3,), 11, dtype) * MULT[k]
        opt.step()
    return p0.detach().flatten().tolist() + p1.detach().flatten().tolist()


show("sgd_groups", run(lambda p0, p1: torch.optim.SGD(
    [{"params": [p0]}, {"params": [p1], "lr": 0.05, "momentum": 0.5, "weight_decay": 0.0}],
    lr=0.1, momentum=0.9, weight_decay=0.01)))
show("adamw_groups", run(lambda p0, p1: torch.optim.AdamW(
    [{"params": [p0], "weight_decay": 0.1}, {"params": [p1], "weight_decay": 0.0}], lr=0.01, betas=(0.9, 0.95))))
show("adam", run(lambda p0, p1: torch.optim.Adam([p0, p1], lr=0.01, betas=(0.9, 0.99))))
show("adam_l2_amsgrad", run(lambda p0, p1: torch.optim.Adam([p0, p1], lr=0.01, betas=(0.9, 0.99), weight_decay=0.1,
                                                            amsgrad=True)))
show("adam_default", run(lambda p0, p1: torch.optim.Adam([p0, p1])))
show("adam_f32", run(lambda p0, p1: torch.optim.Adam([p0, p1], lr=0.01, weight_decay=0.05), torch.float32))


def edits(opt, k):
    if k == 1:
        opt.param_groups[0]["lr"] = 0.2
        opt.param_groups[1]["weight_decay"] = 0.3
        opt.param_groups[1]["betas"] = (0.5, 0.9)


show("adam_edited", run(lambda p0, p1: torch.optim.Adam([{"params": [p0]}, {"params": [p1]}], lr=0.01), edit=edits))


def added(p0, p1):
    opt = torch.optim.SGD([p0], lr=0.1, momentum=0.9)
    opt.add_param_group({"params": [p1], "lr": 0.3, "nesterov": True})
    return opt


show("sgd_added", run(added))
