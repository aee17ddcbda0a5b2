"""Greedy decoding with a KV cache in PyTorch, the reference for bench/generate_bench.sh: GPT-2 and
LLaMA read from the same Hugging Face safetensors file strata generate reads, written the usual way
(attention through scaled_dot_product_attention where torch has it), under inference_mode.

  torch_generate.py [OPTIONS] gpt2 WEIGHTS n_head PROMPT_IDS NEW_TOKENS THREADS
  torch_generate.py [OPTIONS] llama WEIGHTS n_head n_kv_head theta eps PROMPT_IDS NEW_TOKENS THREADS

OPTIONS:
  --device D       cpu (default) or cuda
  --dtype T        f32 (default) or bf16: the weights and the cache
  --static-cache   keys and values preallocated for the whole context and written in place (HF's
                   StaticCache); without it they grow by torch.cat every step (HF's past_key_values)
  --context N      the static cache's positions (default 1024)

Prints one JSON line: the new ids, prefill and decode seconds, decode tokens/s."""
import json, math, sys, time
import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, __file__.rsplit("/", 2)[0] + "/tests/hf")
from hf_gpt2_numpy import read_safetensors  # noqa: E402


def attend(q, k, v, causal):
    # q (heads, new, d), k and v (heads, length, d); the new positions are the last ones.
    if hasattr(F, "scaled_dot_product_attention"):
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if causal:
        n, length = q.shape[1], k.shape[1]
        mask = torch.ones(n, length, dtype=torch.bool).tril(length - n)
        scores = scores.masked_fill(~mask, float("-inf"))
    return scores.softmax(-1) @ v


class GrowingCache:
    """Each layer's keys and values, (heads, length, d), grown by torch.cat."""
    def __init__(self, layers):
        self.past, self.length = [None] * layers, 0

    def update(self, i, k, v):
        if self.past[i] is not None:
            k, v = torch.cat([self.past[i][0], k], 1), torch.cat([self.past[i][1], v], 1)
        self.past[i] = (k, v)
        return k, v


class StaticCache:
    """Keys and values preallocated for `context` positions and written in place; attention reads
    the filled prefix (a view, no copy)."""
    def __init__(self, layers, heads, context, d, device, dtype):
        self.k = torch.zeros(layers, heads, context, d, device=device, dtype=dtype)
        self.v = torch.zeros_like(self.k)
        self.length = 0

    def update(self, i, k, v):
        end = self.length + k.shape[1]
        self.k[i, :, self.length:end] = k
        self.v[i, :, self.length:end] = v
        return self.k[i, :, :end], self.v[i, :, :end]


def gpt2_step(t, n_head, ids, cache):
    start = cache.length
    x = t["wte.weight"][ids] + t["wpe.weight"][start:start + len(ids)]
    C = x.shape[-1]
    D = C // n_head
    for i in range(t["layers"]):
        p = f"h.{i}."
        h = F.layer_norm(x, (C,), t[p + "ln_1.weight"], t[p + "ln_1.bias"], 1e-5)
        q, k, v = (h @ t[p + "attn.c_attn.weight"] + t[p + "attn.c_attn.bias"]).split(C, -1)
        q, k, v = (a.view(-1, n_head, D).transpose(0, 1) for a in (q, k, v))
        k, v = cache.update(i, k, v)
        y = attend(q, k, v, causal=len(ids) > 1).transpose(0, 1).reshape(-1, C)
        x = x + y @ t[p + "attn.c_proj.weight"] + t[p + "attn.c_proj.bias"]
        h = F.layer_norm(x, (C,), t[p + "ln_2.weight"], t[p + "ln_2.bias"], 1e-5)
        x = x + F.gelu(h @ t[p + "mlp.c_fc.weight"] + t[p + "mlp.c_fc.bias"], approximate="tanh") \
            @ t[p + "mlp.c_proj.weight"] + t[p + "mlp.c_proj.bias"]
    cache.length += len(ids)
    x = F.layer_norm(x[-1:], (C,), t["ln_f.weight"], t["ln_f.bias"], 1e-5)
    return (x @ t["wte.weight"].T)[0]


def rope(x, position0, theta):
    # x (heads, n, d), rotate_half layout, positions position0..; the angles in f32
    D = x.shape[-1]
    inv = 1.0 / theta ** (torch.arange(0, D, 2, dtype=torch.float32, device=x.device) / D)
    positions = torch.arange(position0, position0 + x.shape[1], dtype=torch.float32, device=x.device)
    angles = positions[:, None] * inv[None]
    cos, sin = (torch.cat([a] * 2, -1).to(x.dtype) for a in (angles.cos(), angles.sin()))
    rotated = torch.cat([-x[..., D // 2:], x[..., : D // 2]], -1)
    return x * cos + rotated * sin


def llama_step(t, n_head, n_kv, theta, eps, ids, cache):
    start = cache.length
    x = t["model.embed_tokens.weight"][ids]
    C = x.shape[-1]
    D = C // n_head

    def norm(v, w):
        return v * torch.rsqrt(v.pow(2).mean(-1, keepdim=True) + eps) * w

    for i in range(t["layers"]):
        p = f"model.layers.{i}."
        h = norm(x, t[p + "input_layernorm.weight"])
        q = (h @ t[p + "self_attn.q_proj.weight"].T).view(-1, n_head, D).transpose(0, 1)
        k = (h @ t[p + "self_attn.k_proj.weight"].T).view(-1, n_kv, D).transpose(0, 1)
        v = (h @ t[p + "self_attn.v_proj.weight"].T).view(-1, n_kv, D).transpose(0, 1)
        q, k = rope(q, start, theta), rope(k, start, theta)
        k, v = cache.update(i, k, v)
        group = n_head // n_kv
        y = attend(q, k.repeat_interleave(group, 0), v.repeat_interleave(group, 0), causal=len(ids) > 1)
        x = x + y.transpose(0, 1).reshape(-1, C) @ t[p + "self_attn.o_proj.weight"].T
        h = norm(x, t[p + "post_attention_layernorm.weight"])
        x = x + (F.silu(h @ t[p + "mlp.gate_proj.weight"].T) * (h @ t[p + "mlp.up_proj.weight"].T)) \
            @ t[p + "mlp.down_proj.weight"].T
    cache.length += len(ids)
    x = norm(x[-1:], t["model.norm.weight"])
    head = t.get("lm_head.weight", t["model.embed_tokens.weight"])
    return (x @ head.T)[0]


def main(argv):
    device, dtype, static, context = "cpu", torch.float32, False, 1024
    while argv and argv[0].startswith("--"):
        flag = argv.pop(0)
        if flag == "--device":
            device = argv.pop(0)
        elif flag == "--dtype":
            dtype = {"f32": torch.float32, "bf16": torch.bfloat16}[argv.pop(0)]
        elif flag == "--static-cache":
            static = True
        elif flag == "--context":
            context = int(argv.pop(0))
        else:
            sys.exit("torch_generate.py: unknown option " + flag)
    family, path = argv[0], argv[1]
    if family == "gpt2":
        n_head, n_kv, prompt, count, threads = int(argv[2]), int(argv[2]), argv[3], int(argv[4]), int(argv[5])
    else:
        n_head, n_kv, theta, eps = int(argv[2]), int(argv[3]), float(argv[4]), float(argv[5])
        prompt, count, threads = argv[6], int(argv[7]), int(argv[8])
    torch.set_num_threads(threads)
    tensors, _ = read_safetensors(path)
    t = {name.removeprefix("transformer."):
         torch.from_numpy(np.ascontiguousarray(v, dtype=np.float32)).to(device=device, dtype=dtype)
         for name, v in tensors.items()}
    t["layers"] = sum(1 for name in t if name.endswith("ln_1.weight") or name.endswith("input_layernorm.weight"))
    d_model = (t["wte.weight"] if family == "gpt2" else t["model.embed_tokens.weight"]).shape[1]
    step = (lambda ids, cache: gpt2_step(t, n_head, ids, cache)) if family == "gpt2" else \
        (lambda ids, cache: llama_step(t, n_head, n_kv, theta, eps, ids, cache))

    def synchronize():
        if device.startswith("cuda"):
            torch.cuda.synchronize()

    ids = torch.tensor([int(i) for i in prompt.split(",")], device=device)
    with torch.inference_mode():
        cache = StaticCache(t["layers"], n_kv, context, d_model // n_head, device, dtype) if static else \
            GrowingCache(t["layers"])
        synchronize()
        start = time.perf_counter()
        logits = step(ids, cache)
        synchronize()
        prefill = time.perf_counter() - start
        new = []
        start = time.perf_counter()
        for n in range(count):
            token = int(logits.argmax())  # to the host: each step waits for the last
            new.append(token)
            if n + 1 < count:
                logits = step(torch.tensor([token], device=device), cache)
        synchronize()
        decode = time.perf_counter() - start
    print(json.dumps({"ids": new, "prefill_s": prefill, "decode_s": decode, "decode_tokens_per_s": (count - 1) / decode,
                      "torch": torch.__version__, "device": device, "static_cache": static}))


if __name__ == "__main__":
    main(sys.argv[1:])
