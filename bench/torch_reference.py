"""The same GPT-2 and LLaMA models and AdamW step in PyTorch, for bench/engine_bench.sh. Prints median
ms/step (steps after the first two), with the AdamW step timed on its own.

  torch_reference.py SHAPE STEPS [--keep-subnormals] [--profile]   SHAPE: one of SHAPES' names
  torch_reference.py llama-check   the LLaMA here against tests/hf/hf_llama_numpy.py, tied and untied

The LLaMA follows Hugging Face's modeling_llama conventions, with its module names, so its state_dict
holds HF's tensor names: RMSNorm (weight only, mean square in f32), RoPE in the rotate_half layout,
grouped-query attention (key/value heads repeated with repeat_interleave, as HF's repeat_kv does, so
query head h reads key/value head h // (n_head / n_kv_head)), the SwiGLU MLP, no biases, an untied
lm_head."""
import math, os, statistics, sys, time
import torch
import torch.nn as nn
import torch.nn.functional as F

SHAPES = {"quickstart": dict(L=4, C=128, H=4, V=256, T=64, B=16),
          "tiny": dict(L=4, C=256, H=4, V=256, T=128, B=8), "gpt2": dict(L=12, C=768, H=12, V=50257, T=64, B=4),
          "llama_tiny": dict(arch="llama", L=4, C=256, H=4, KV=2, F=688, V=256, T=128, B=8),
          "llama110m": dict(arch="llama", L=12, C=768, H=12, KV=4, F=2048, V=32000, T=256, B=2)}
ROPE_THETA, NORM_EPS = 10000.0, 1e-5  # the benchmark shapes' (HF's LLaMA 2 values)

def causal_attention(q, k, v):
    # q, k, v (B, heads, T, head size) -> (B, heads, T, head size)
    if hasattr(F, "scaled_dot_product_attention"):  # torch >= 2.0
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    T = q.shape[2]
    att = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
    att = att.masked_fill(torch.triu(torch.ones(T, T, dtype=torch.bool, device=q.device), 1), float("-inf")).softmax(-1)
    return att @ v

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
        y = causal_attention(q, k, v)
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

class RMSNorm(nn.Module):
    # Hugging Face's LlamaRMSNorm: x / sqrt(mean(x^2) + eps) in f32 (or wider), times the weight; no bias.
    def __init__(s, C, eps):
        super().__init__()
        s.weight, s.eps = nn.Parameter(torch.ones(C)), eps
    def forward(s, x):
        h = x.to(torch.promote_types(x.dtype, torch.float32))
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + s.eps)
        return s.weight * h.to(x.dtype)

def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)

class LlamaAttention(nn.Module):
    def __init__(s, C, H, KV):
        super().__init__()
        s.H, s.KV, s.hd = H, KV, C // H
        s.q_proj, s.k_proj = nn.Linear(C, H * s.hd, bias=False), nn.Linear(C, KV * s.hd, bias=False)
        s.v_proj, s.o_proj = nn.Linear(C, KV * s.hd, bias=False), nn.Linear(H * s.hd, C, bias=False)
    def forward(s, x, cos, sin):
        # x (B, T, C); cos, sin (T, head size)
        B, T, C = x.shape
        q = s.q_proj(x).view(B, T, s.H, s.hd).transpose(1, 2)
        k = s.k_proj(x).view(B, T, s.KV, s.hd).transpose(1, 2)
        v = s.v_proj(x).view(B, T, s.KV, s.hd).transpose(1, 2)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        # Each key/value head repeated for its H / KV query heads: head h reads kv head h // (H / KV).
        # (SDPA's enable_gqa would need torch >= 2.5; the repeat runs on every torch this harness does.)
        k, v = k.repeat_interleave(s.H // s.KV, dim=1), v.repeat_interleave(s.H // s.KV, dim=1)
        return s.o_proj(causal_attention(q, k, v).transpose(1, 2).reshape(B, T, s.H * s.hd))

class LlamaMLP(nn.Module):
    def __init__(s, C, F_):
        super().__init__()
        s.gate_proj, s.up_proj = nn.Linear(C, F_, bias=False), nn.Linear(C, F_, bias=False)
        s.down_proj = nn.Linear(F_, C, bias=False)
    def forward(s, x):
        return s.down_proj(F.silu(s.gate_proj(x)) * s.up_proj(x))

class LlamaLayer(nn.Module):
    def __init__(s, C, H, KV, F_, eps):
        super().__init__()
        s.input_layernorm, s.post_attention_layernorm = RMSNorm(C, eps), RMSNorm(C, eps)
        s.self_attn, s.mlp = LlamaAttention(C, H, KV), LlamaMLP(C, F_)
    def forward(s, x, cos, sin):
        x = x + s.self_attn(s.input_layernorm(x), cos, sin)
        return x + s.mlp(s.post_attention_layernorm(x))

class LlamaModel(nn.Module):
    def __init__(s, L, C, H, KV, F_, V, eps):
        super().__init__()
        s.embed_tokens = nn.Embedding(V, C)
        s.layers = nn.ModuleList(LlamaLayer(C, H, KV, F_, eps) for _ in range(L))
        s.norm = RMSNorm(C, eps)

class Llama(nn.Module):
    # Module names as Hugging Face's LlamaForCausalLM, so state_dict() holds HF's tensor names.
    def __init__(s, L, C, H, KV, F_, V, T, theta=ROPE_THETA, eps=NORM_EPS, tied=False):
        super().__init__()
        s.model = LlamaModel(L, C, H, KV, F_, V, eps)
        s.lm_head = None if tied else nn.Linear(C, V, bias=False)
        hd = C // H
        # The angles p / theta^(2i/hd) for positions p < T, in float64 (HF's f32 differs by ~1e-7).
        inv_freq = 1.0 / theta ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd)
        angles = torch.outer(torch.arange(T, dtype=torch.float64), inv_freq)
        angles = torch.cat((angles, angles), dim=-1)  # (T, hd): frequency i for dims i and i + hd/2
        s.register_buffer("cos", angles.cos().to(torch.get_default_dtype()), persistent=False)
        s.register_buffer("sin", angles.sin().to(torch.get_default_dtype()), persistent=False)
    def logits(s, idx):
        T = idx.shape[1]
        x = s.model.embed_tokens(idx)
        for layer in s.model.layers:
            x = layer(x, s.cos[:T], s.sin[:T])
        x = s.model.norm(x)
        return s.lm_head(x) if s.lm_head is not None else x @ s.model.embed_tokens.weight.T
    def forward(s, idx, targets):
        logits = s.logits(idx)
        return F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1))

def make_model(shape):
    if shape.get("arch", "gpt2") == "llama":
        return Llama(shape["L"], shape["C"], shape["H"], shape["KV"], shape["F"], shape["V"], shape["T"])
    return GPT(shape["L"], shape["C"], shape["H"], shape["V"], shape["T"])

def llama_check():
    # The LLaMA above against the independent NumPy one (float64) on the same random HF-named weights
    # and tokens, tied and untied, built in float64 here too: the losses must agree to 1e-9 relative.
    sys.dont_write_bytecode = True  # no __pycache__ in the source tree
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "hf"))
    import numpy as np
    import hf_llama_numpy as reference
    s = reference.INTEROP
    tokens = np.random.default_rng(1).integers(0, s["vocab"], size=8 * (s["seq_len"] + 1))
    for tied in (False, True):
        weights = reference.random_weights(s["n_layer"], s["n_head"], s["n_kv_head"], s["d_model"], s["d_ff"],
                                           s["vocab"], 2, tied)
        expected = reference.tokens_loss(weights, tokens, s["n_head"], s["n_kv_head"], s["seq_len"], s["rope_theta"],
                                         s["norm_eps"], tied)
        torch.set_default_dtype(torch.float64)
        try:
            model = Llama(s["n_layer"], s["d_model"], s["n_head"], s["n_kv_head"], s["d_ff"], s["vocab"],
                          s["seq_len"], s["rope_theta"], s["norm_eps"], tied)
        finally:
            torch.set_default_dtype(torch.float32)
        model.load_state_dict({name: torch.from_numpy(value) for name, value in weights.items()}, strict=True)
        rows = torch.from_numpy(tokens.reshape(-1, s["seq_len"] + 1))  # strata eval's windows
        with torch.no_grad():
            loss = model(rows[:, :-1], rows[:, 1:]).item()
        difference = abs(loss - expected) / expected
        print(f"llama ({'tied' if tied else 'untied'}): torch {loss:.9f}, numpy {expected:.9f}, "
              f"relative difference {difference:.1e}")
        assert difference < 1e-9, "the PyTorch LLaMA and the NumPy one disagree"

def main():
    # usage: torch_reference.py SHAPE STEPS [--keep-subnormals] [--profile] | torch_reference.py llama-check
    if sys.argv[1] == "llama-check":
        return llama_check()
    shape, steps = SHAPES[sys.argv[1]], int(sys.argv[2])
    flags = set(sys.argv[3:])
    torch.manual_seed(0)
    torch.set_num_threads(2)
    # Small gradients reach subnormal floats in this model, and x86 handles those in microcode: without
    # flushing them to zero torch 1.13's backward matmuls run ~30x slower here (4 s/step on the tiny
    # shape). GPUs and most training setups flush subnormals too, so the reference runs at its best.
    # --keep-subnormals shows the difference; --profile prints where one forward + backward goes.
    torch.set_flush_denormal("--keep-subnormals" not in flags)
    model = make_model(shape)
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

if __name__ == "__main__":  # bench/torch_gpt2_gpu.py imports its Block
    main()
