"""The same GPT-2 model and AdamW step in PyTorch, for bench/engine_bench.sh. Prints median ms/step
(steps after the first two), with the AdamW step timed on its own."""
import math, statistics, sys, time
import torch
import torch.nn as nn
import torch.nn.functional as F

SHAPES = {"tiny": dict(L=4, C=256, H=4, V=256, T=128, B=8), "gpt2": dict(L=12, C=768, H=12, V=50257, T=64, B=4)}

class Block(nn.Module):
    def __init__(s, C, H):
        super().__init__()
        s.ln_1, s.ln_2, s.H = nn.LayerNorm(C), nn.LayerNorm(C), H
        s.c_attn, s.c_proj = nn.Linear(C, 3 * C), nn.Linear(C, C)
        s.c_fc, s.mlp_proj = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)
    def forward(s, x):
        B, T, C = x.shape
        q, k, v = s.c_attn(s.ln_1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, s.H, C // s.H).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True) if hasattr(F, "scaled_dot_product_attention") else None
        if y is None:
            att = (q @ k.transpose(-2, -1)) / math.sqrt(C // s.H)
            att = att.masked_fill(torch.triu(torch.ones(T, T, dtype=torch.bool), 1), float("-inf")).softmax(-1)
            y = att @ v
        x = x + s.c_proj(y.transpose(1, 2).reshape(B, T, C))
        return x + s.mlp_proj(F.gelu(s.c_fc(s.ln_2(x)), approximate="tanh"))

class GPT(nn.Module):
    def __init__(s, L, C, H, V, T):
        super().__init__()
        s.wte, s.wpe = nn.Embedding(V, C), nn.Embedding(T, C)
        s.h = nn.ModuleList(Block(C, H) for _ in range(L))
        s.ln_f = nn.LayerNorm(C)
    def forward(s, idx, targets):
        x = s.wte(idx) + s.wpe(torch.arange(idx.shape[1]))
        for block in s.h:
            x = block(x)
        logits = s.ln_f(x) @ s.wte.weight.T
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))

def main():
    # usage: torch_reference.py SHAPE STEPS [--keep-subnormals] [--profile]
    shape, steps = SHAPES[sys.argv[1]], int(sys.argv[2])
    flags = set(sys.argv[3:])
    torch.manual_seed(0)
    torch.set_num_threads(2)
    # Small gradients reach subnormal floats in this model, and x86 handles those in microcode: without
    # flushing them to zero torch 1.13's backward matmuls run ~30x slower here (4 s/step on the tiny
    # shape). GPUs and most training setups flush subnormals too, so the reference runs at its best.
    # --keep-subnormals shows the difference; --profile prints where one forward + backward goes.
    torch.set_flush_denormal("--keep-subnormals" not in flags)
    model = GPT(shape["L"], shape["C"], shape["H"], shape["V"], shape["T"])
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1)
    idx = torch.randint(shape["V"], (shape["B"], shape["T"]))
    times, opt_times = [], []
    for _ in range(steps):
        start = time.perf_counter()
        loss = model(idx, idx)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        mid = time.perf_counter()
        opt.step()
        end = time.perf_counter()
        times.append((end - start) * 1000)
        opt_times.append((end - mid) * 1000)
    print("torch %s: median %.1f ms/step (AdamW %.1f ms), torch %s" % (sys.argv[1], statistics.median(times[2:]),
          statistics.median(opt_times[2:]), torch.__version__))
    if "--profile" in flags:
        with torch.autograd.profiler.profile() as profile:
            model(idx, idx).backward()
        print(profile.key_averages().table(sort_by="self_cpu_time_total", row_limit=5))

main()
