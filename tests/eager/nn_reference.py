# Reference numbers for tests/eager/{nn,optim,autocast}_test.cpp, computed with
# PyTorch 1.13: /usr/bin/python3 tests/eager/nn_reference.py. The tests never
# import torch; the printed values are pasted into them.
import math

import torch


def vals(shape, a, dtype=torch.float32):
    """The tests' deterministic values: ((i*a) % 13 - 6)/8 + 0.01 i."""
    n = math.prod(shape)
    return torch.tensor([((i * a) % 13 - 6) / 8.0 + 0.01 * i for i in range(n)], dtype=dtype).reshape(shape)


def show(name, t):
    v = t.detach().flatten().tolist() if isinstance(t, torch.Tensor) else t
    print(name, "{" + ", ".join(repr(float(x)) for x in v) + "}")


def nn_layers():

    # Linear
    lin = torch.nn.Linear(3, 2)
    with torch.no_grad():
        lin.weight.copy_(vals((2,3),7)); lin.bias.copy_(vals((2,),5))
    x = vals((2,3),3)
    show("linear", lin(x))
    # Conv2d
    conv = torch.nn.Conv2d(2,3,3,stride=2,padding=1)
    with torch.no_grad():
        conv.weight.copy_(vals((3,2,3,3),5)); conv.bias.copy_(vals((3,),3))
    x = vals((1,2,5,5),7)
    show("conv", conv(x))
    # BatchNorm2d
    bn = torch.nn.BatchNorm2d(3)
    x1 = vals((2,3,2,2),5); x2 = vals((2,3,2,2),11)*2+0.5
    with torch.no_grad():
        bn.weight.copy_(vals((3,),4)+1); bn.bias.copy_(vals((3,),2))
    y1 = bn(x1); y2 = bn(x2)
    show("bn_y1", y1); show("bn_rm", bn.running_mean); show("bn_rv", bn.running_var); print("nbt", bn.num_batches_tracked)
    bn.eval(); show("bn_eval", bn(x1))
    bn2 = torch.nn.BatchNorm2d(3, momentum=None)
    bn2(x1); bn2(x2); show("bn_cma_rm", bn2.running_mean); show("bn_cma_rv", bn2.running_var)
    print("bn keys", list(bn.state_dict().keys()))
    # LayerNorm
    ln = torch.nn.LayerNorm([4])
    with torch.no_grad():
        ln.weight.copy_(vals((4,),3)+1); ln.bias.copy_(vals((4,),5))
    show("ln", ln(vals((2,4),5)))
    # RMSNorm (torch.nn.RMSNorm of PyTorch 2.4; 1.13 lacks it: its formula)
    def rms(x, w, eps):
        eps = torch.finfo(x.dtype).eps if eps is None else eps
        y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
        return y if w is None else y * w
    show("rms", rms(vals((2,4),5), vals((4,),3)+1, 1e-6))
    show("rms_no_affine", rms(vals((2,4),5), None, None))
    # Hardtanh, ReLU6
    show("hardtanh", torch.nn.Hardtanh(-0.5, 0.25)(vals((6,),5)*4))
    show("relu6", torch.nn.ReLU6()(vals((6,),5)*10))
    # Embedding
    emb = torch.nn.Embedding(5,3)
    with torch.no_grad(): emb.weight.copy_(vals((5,3),7))
    show("emb", emb(torch.tensor([[0,4],[2,2]])))
    # CausalSelfAttention
    C, nh = 4, 2
    Wa, ba, Wp, bp = vals((3*C,C),5), vals((3*C,),3), vals((C,C),7), vals((C,),11)
    x = vals((1,3,C),3)
    qkv = x @ Wa.T + ba
    q,k,v = qkv.split(C, dim=2)
    B,T = 1,3
    q = q.view(B,T,nh,C//nh).transpose(1,2); k = k.view(B,T,nh,C//nh).transpose(1,2); v = v.view(B,T,nh,C//nh).transpose(1,2)
    att = (q @ k.transpose(-2,-1)) / math.sqrt(C//nh)
    mask = torch.tril(torch.ones(T,T)).bool()
    att = att.masked_fill(~mask, float('-inf')).softmax(-1)
    y = (att @ v).transpose(1,2).contiguous().view(B,T,C)
    y = y @ Wp.T + bp
    show("attn", y)
    # nested module key order
    class Block(torch.nn.Module):
        def __init__(s):
            super().__init__()
            s.scale = torch.nn.Parameter(torch.ones(2))
            s.register_buffer("count", torch.zeros(1))
            s.body = torch.nn.Sequential(torch.nn.Linear(2,2), torch.nn.BatchNorm2d(2), torch.nn.Linear(2,1,bias=False))
    print("block keys", list(Block().state_dict().keys()))
    print("block params", [n for n,_ in Block().named_parameters()])


def optimizers():
    mult = [1.0, -2.0, 0.1]
    def run(make, dtype=torch.float64):
        p0 = vals((2,2),3,dtype).requires_grad_(); p1 = vals((3,),5,dtype).requires_grad_()
        opt = make([p0,p1])
        for k in range(3):
            p0.grad = vals((2,2),7,dtype)*mult[k]; p1.grad = vals((3,),11,dtype)*mult[k]
            opt.step()
        return p0.detach().flatten().tolist() + p1.detach().flatten().tolist(), opt
    show("sgd_momentum", run(lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, dampening=0.1, weight_decay=0.01))[0])
    show("sgd_nesterov", run(lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01))[0])
    show("sgd_plain", run(lambda p: torch.optim.SGD(p, lr=0.5))[0])
    v, opt = run(lambda p: torch.optim.AdamW(p, lr=0.01, betas=(0.9,0.99), eps=1e-8, weight_decay=0.1))
    show("adamw", v)
    show("adamw_exp_avg0", opt.state[opt.param_groups[0]['params'][0]]['exp_avg'].flatten().tolist())
    show("adamw_exp_avg_sq1", opt.state[opt.param_groups[0]['params'][1]]['exp_avg_sq'].flatten().tolist())
    print("step", opt.state[opt.param_groups[0]['params'][0]]['step'])
    show("adamw_amsgrad", run(lambda p: torch.optim.AdamW(p, lr=0.01, betas=(0.9,0.99), eps=1e-8, weight_decay=0.1, amsgrad=True))[0])
    show("adamw_default", run(lambda p: torch.optim.AdamW(p))[0])
    show("adamw_default_f32", run(lambda p: torch.optim.AdamW(p, lr=0.01), torch.float32)[0])


def autocast():
    layers = []
    for l in range(10):
        lin = torch.nn.Linear(10,10)
        with torch.no_grad():
            lin.weight.copy_(vals((10,10), 3 + l) * 0.4); lin.bias.copy_(vals((10,), 5 + l) * 0.1)
        layers.append(lin)
    model = torch.nn.Sequential(*layers)
    x = vals((10,10), 7)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = model(x)
    print(y.dtype)
    # emulation: bf16 inputs, f32 compute, bf16 output
    h = x
    for lin in layers:
        hb = h.bfloat16().float(); wb = lin.weight.bfloat16().float(); bb = lin.bias.bfloat16().float()
        h = (hb.double() @ wb.double().T + bb.double()).float().bfloat16()
    diff = (y.float() - h.float()).abs()
    print("max diff vs emulation", diff.max().item(), "count", (diff>0).sum().item())
    print("y", "{" + ", ".join(repr(v) for v in y.float().flatten().tolist()) + "}")
    print("yrow0", y.float()[0].tolist(), h.float()[0].tolist())
    print("absmax", y.float().abs().max())
    x64 = torch.randn(2,3, dtype=torch.float64); w64 = torch.randn(4,3,dtype=torch.float64)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        print("f64 linear under autocast:", torch.nn.functional.linear(x64, w64).dtype)


if __name__ == "__main__":
    nn_layers()
    optimizers()
    autocast()
