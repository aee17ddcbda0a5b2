#!/usr/bin/env python3
"""An independent LLaMA (and Qwen2) forward pass over a Hugging Face safetensors file, in NumPy (float64).

It follows the conventions of Hugging Face's LlamaForCausalLM (modeling_llama.py): torch.nn.Linear
weights stored (out, in) and applied as x @ W.T, no biases; RMSNorm x / sqrt(mean(x^2) + eps) * w
before attention, before the MLP and at the end; RoPE in the rotate_half layout (the frequencies
1 / theta^(2i / head_dim) repeated for both halves of a head, q * cos + rotate_half(q) * sin,
positions 0..T-1 in every window); grouped-query attention, query head h reading key/value head
h // (n_head / n_kv_head), head_dim = d_model / n_head; a causal softmax scaled by 1/sqrt(head_dim);
the SwiGLU MLP down(silu(gate(x)) * up(x)); an untied lm_head unless the embeddings are tied, in
which case the file holds no lm_head.weight and the head reads model.embed_tokens.weight.

With --qkv-bias it is Hugging Face's Qwen2ForCausalLM (modeling_qwen2.py): the same model with
biases on the q, k and v projections (self_attn.{q,k,v}_proj.bias, (n_head * head_dim,) and
(n_kv_head * head_dim,)), added right after each projection, before RoPE turns q and k; o_proj
and the MLP have none. Without the flag a file must hold no bias, with it every layer's three.

With --gemma it is Hugging Face's GemmaForCausalLM (modeling_gemma.py, the first generation): the
same names, always tied (no lm_head.weight), with every RMSNorm's gain 1 + w (GemmaRMSNorm), the
embedding's rows times sqrt(d_model) before the first block, and a GeGLU MLP down(gelu_tanh(gate(x))
* up(x)) with the tanh GELU (gelu_pytorch_tanh). --head-dim=N gives a head N wide whatever d_model
is (config.json's head_dim): q_proj (n_head * N, d_model), k and v (n_kv_head * N, d_model), o_proj
(d_model, n_head * N).

Everything is computed in float64 from the file's values (f32 or bf16), so the reference has no
rounding of its own worth speaking of: Hugging Face computes RMSNorm's variance and the RoPE
angles in f32, which differs from float64 by ~1e-7 relative, far below the 1e-5 the interop test
allows. The model shares no code with Strata, so agreement between its loss and `strata eval` on
the same file shows that the file means the same model to both. (transformers itself is not
packaged for Debian 12, so the suite cannot import it.)

  hf_llama_numpy.py make-weights OUT n_layer n_head n_kv_head d_model d_ff vocab seed [--tied] [--qkv-bias]
  hf_llama_numpy.py make-tokens OUT count vocab seed      (an llm.c .bin token file; hf_gpt2_numpy's)
  hf_llama_numpy.py greedy WEIGHTS PROMPT_IDS count n_head n_kv_head theta eps [--tied] [--qkv-bias]
  (any command: --rope-scaling=JSON applies config.json's rope_scaling of rope_type "llama3";
   --sliding-window=N makes it Mistral's attention, each position seeing itself and N - 1 before;
   --gemma makes it Gemma, --head-dim=N sets a head's width)
                                                          (the greedy continuation, then its smallest margin)
  hf_llama_numpy.py check-names FILE n_layer vocab d_model d_ff n_head n_kv_head [--tied] [--qkv-bias]
                                                          (exactly HF's names and shapes)
  hf_llama_numpy.py loss FILE TOKENS n_head n_kv_head seq_len rope_theta norm_eps [--tied] [--qkv-bias]
                                                          (mean cross-entropy, strata eval's windows)
  hf_llama_numpy.py selftest      (this model against its definition; the interop test's power)

`loss` forms its windows as `strata eval --checkpoint FILE --data TOKENS` does (core/data/dataset.cpp,
window_at): consecutive non-overlapping windows of seq_len + 1 tokens from the start of the file,
window w = tokens[w(T+1), (w+1)(T+1)), inputs its first T tokens and targets its last T, RoPE
positions 0..T-1 in each; the tokens past the last whole window are unused; the loss is the mean
over all windows x T predictions.
"""
import json
import math
import os
import struct
import sys
import tempfile

import numpy as np

sys.dont_write_bytecode = True  # no __pycache__ in the source tree when the suite imports the GPT-2 reference
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hf_gpt2_numpy import make_tokens, read_safetensors, read_tokens, write_safetensors

# Larger than a LLaMA init (0.02), as in hf_gpt2_numpy.py, so that every tensor and every
# convention matters to the loss: at 0.02 a 32-wide model's attention is nearly uniform and a
# wrong RoPE layout moves the loss by less than the interop test's tolerance (`selftest` shows
# each mistake it lists moving the loss by far more than that tolerance at this scale).
MATRIX_STD = 0.2
# Qwen2's biases, near the size of a projection's outputs (~MATRIX_STD * sqrt(d_model) ~ 1) so that
# each matters; k's larger, as it acts through RoPE alone (q.(k + b) = q.k + q.b adds the same to
# all of a query's scores until RoPE turns b by position) and at rope_theta 500000 only a head's
# first frequencies turn far in 16 positions. (`selftest` shows each bias mistake it lists moving
# the loss by over 10x the tolerance, and the LLaMA mistakes still doing so with the biases.)
BIAS_STD = {"q_proj": 0.5, "k_proj": 3.0, "v_proj": 0.5}
TOLERANCE = 1e-5  # relative, as tests/cli/hf_llama_interop.sh allows between Strata and this model
# tests/cli/hf_llama_interop.sh's model and data, for selftest's check that the test can see mistakes
INTEROP = dict(n_layer=2, n_head=4, n_kv_head=2, d_model=32, d_ff=64, vocab=300, seq_len=16, rope_theta=500000.0,
               norm_eps=1e-5, tokens=4000, token_seed=1, weight_seed=2)


def head_dim_of(d_model, n_head):
    return HEAD_DIM or d_model // n_head


def hf_names(n_layer, vocab, d_model, d_ff, n_head, n_kv_head, tied, qkv_bias=False):
    c, head_dim = d_model, head_dim_of(d_model, n_head)
    shapes = {"model.embed_tokens.weight": (vocab, c), "model.norm.weight": (c,)}
    if not tied:
        shapes["lm_head.weight"] = (vocab, c)
    for i in range(n_layer):
        p = f"model.layers.{i}."
        shapes.update({p + "input_layernorm.weight": (c,),
                       p + "self_attn.q_proj.weight": (n_head * head_dim, c),
                       p + "self_attn.k_proj.weight": (n_kv_head * head_dim, c),
                       p + "self_attn.v_proj.weight": (n_kv_head * head_dim, c),
                       p + "self_attn.o_proj.weight": (c, n_head * head_dim),
                       p + "post_attention_layernorm.weight": (c,),
                       p + "mlp.gate_proj.weight": (d_ff, c),
                       p + "mlp.up_proj.weight": (d_ff, c),
                       p + "mlp.down_proj.weight": (c, d_ff)})
    for i in range(n_layer if qkv_bias else 0):  # last, so a seed draws LLaMA's tensors, then Qwen2's biases
        p = f"model.layers.{i}.self_attn."
        shapes.update({p + "q_proj.bias": (n_head * head_dim,),
                       p + "k_proj.bias": (n_kv_head * head_dim,),
                       p + "v_proj.bias": (n_kv_head * head_dim,)})
    return shapes


def check_shape(n_head, n_kv_head, d_model):
    assert HEAD_DIM or d_model % n_head == 0, f"n_head = {n_head} must divide d_model = {d_model}"
    assert n_head % n_kv_head == 0, f"n_kv_head = {n_kv_head} must divide n_head = {n_head}"
    head_dim = head_dim_of(d_model, n_head)
    assert head_dim % 2 == 0, f"head_dim = {head_dim} must be even for RoPE"


def random_weights(n_layer, n_head, n_kv_head, d_model, d_ff, vocab, seed, tied, qkv_bias=False):
    check_shape(n_head, n_kv_head, d_model)
    rng = np.random.default_rng(seed)
    tensors = {}
    for name, shape in hf_names(n_layer, vocab, d_model, d_ff, n_head, n_kv_head, tied, qkv_bias).items():
        if name.endswith("norm.weight"):  # around 1, so that a norm that ignores its weight is caught
            tensors[name] = 1.0 + 0.1 * rng.standard_normal(shape)
        elif name.endswith(".bias"):
            tensors[name] = BIAS_STD[name.split(".")[-2]] * rng.standard_normal(shape)
        else:
            tensors[name] = MATRIX_STD * rng.standard_normal(shape)
    # float64 values that f32 holds exactly, so a model built here equals the same model read back
    return {name: value.astype(np.float32).astype(np.float64) for name, value in tensors.items()}


def make_weights(out, n_layer, n_head, n_kv_head, d_model, d_ff, vocab, seed, tied, qkv_bias=False):
    write_safetensors(out, random_weights(n_layer, n_head, n_kv_head, d_model, d_ff, vocab, seed, tied, qkv_bias),
                      {"format": "pt"})


def rms_norm(x, weight, eps):
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * ((1.0 + weight) if GEMMA else weight)


def silu(x):
    return x * 0.5 * (1.0 + np.tanh(0.5 * x))  # x * sigmoid(x), without exp's overflow


def gelu_tanh(x):  # torch's gelu(approximate="tanh"), HF's gelu_pytorch_tanh
    return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x ** 3)))


def embedding_scale(d_model):  # Gemma's normalizer
    return np.sqrt(d_model) if GEMMA else 1.0


def gate_activation(x):  # the gated MLP's: silu (LLaMA), gelu_tanh (Gemma)
    return gelu_tanh(x) if GEMMA else silu(x)


ROPE_SCALING = None  # --rope-scaling=JSON: config.json's rope_scaling of rope_type "llama3"
# --sliding-window=N: Hugging Face's MistralForCausalLM (modeling_mistral.py), LLaMA whose query i
# attends to key j only when 0 <= i - j < N (itself and the N - 1 positions before it).
SLIDING_WINDOW = None
GEMMA = False  # --gemma: Hugging Face's GemmaForCausalLM (module docstring)
HEAD_DIM = None  # --head-dim=N: a head's width, else d_model // n_head


def llama3_inverse_frequencies(inv_freq, scaling):
    """Llama 3's rope_scaling, as transformers' _compute_llama3_parameters writes it."""
    factor, low, high = scaling["factor"], scaling.get("low_freq_factor", 1.0), scaling.get("high_freq_factor", 4.0)
    original = scaling.get("original_max_position_embeddings", 8192)
    wavelength = 2 * np.pi / inv_freq
    scaled = np.where(wavelength > original / low, inv_freq / factor, inv_freq)
    smooth = (original / wavelength - low) / (high - low)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = ~(wavelength < original / high) & ~(wavelength > original / low)
    return np.where(medium, smoothed, scaled)


def rope_tables(seq_len, head_dim, theta):
    """cos and sin, (seq_len, head_dim): the angles p / theta^(2i / head_dim) for i < head_dim / 2, twice
    (with --rope-scaling, the frequencies Llama 3's scaling makes of them)."""
    inv_freq = 1.0 / theta ** (np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    if ROPE_SCALING is not None:
        inv_freq = llama3_inverse_frequencies(inv_freq, ROPE_SCALING)
    angles = np.outer(np.arange(seq_len, dtype=np.float64), inv_freq)
    angles = np.concatenate([angles, angles], axis=-1)
    return np.cos(angles), np.sin(angles)


def rotate_half(x):
    x1, x2 = np.split(x, 2, axis=-1)
    return np.concatenate([-x2, x1], axis=-1)


def apply_rope(x, cos, sin):
    """x (batch, heads, seq_len, head_dim); cos and sin (seq_len, head_dim)."""
    return x * cos + rotate_half(x) * sin


def biased_rope(x, bias, cos, sin):
    """q or k: a projection x (batch, heads, seq_len, head_dim), its bias (heads, 1, head_dim) or 0
    added first, then turned, as Qwen2Attention's q_proj(h) (a biased nn.Linear) then RoPE."""
    return apply_rope(x + bias, cos, sin)


def layer_count(t):
    n = 0
    while f"model.layers.{n}.input_layernorm.weight" in t:
        n += 1
    return n


def logits_of(t, tokens, n_head, n_kv_head, theta, eps, tied, qkv_bias=False):
    """tokens (batch, seq_len) -> logits (batch, seq_len, vocab), from HF-named float64 tensors t."""
    embed = t["model.embed_tokens.weight"]
    batch, seq_len = tokens.shape
    d_model = embed.shape[1]
    check_shape(n_head, n_kv_head, d_model)
    head_dim = head_dim_of(d_model, n_head)
    kv_of_head = np.arange(n_head) // (n_head // n_kv_head)
    cos, sin = rope_tables(seq_len, head_dim, theta)
    causal = np.tril(np.ones((seq_len, seq_len), dtype=bool))
    if SLIDING_WINDOW:
        causal &= (np.arange(seq_len)[:, None] - np.arange(seq_len)[None, :]) < SLIDING_WINDOW

    def heads(a, count):  # (batch, seq_len, count * head_dim) -> (batch, count, seq_len, head_dim)
        return a.reshape(batch, seq_len, count, head_dim).transpose(0, 2, 1, 3)

    def projection(h, name, count):  # (heads(h @ W^T), its bias as (count, 1, head_dim) or 0)
        bias = t[name + ".bias"].reshape(count, 1, head_dim) if qkv_bias else 0.0
        return heads(h @ t[name + ".weight"].T, count), bias

    x = embed[tokens] * embedding_scale(d_model)
    for i in range(layer_count(t)):
        p = f"model.layers.{i}."
        h = rms_norm(x, t[p + "input_layernorm.weight"], eps)
        q = biased_rope(*projection(h, p + "self_attn.q_proj", n_head), cos, sin)
        k = biased_rope(*projection(h, p + "self_attn.k_proj", n_kv_head), cos, sin)
        v, v_bias = projection(h, p + "self_attn.v_proj", n_kv_head)
        v = v + v_bias
        k, v = k[:, kv_of_head], v[:, kv_of_head]  # (batch, n_head, seq_len, head_dim)
        scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(head_dim)
        scores = np.where(causal, scores, -np.inf)
        scores = np.exp(scores - scores.max(-1, keepdims=True))
        attention = scores / scores.sum(-1, keepdims=True)
        y = (attention @ v).transpose(0, 2, 1, 3).reshape(batch, seq_len, n_head * head_dim)
        x = x + y @ t[p + "self_attn.o_proj.weight"].T
        h = rms_norm(x, t[p + "post_attention_layernorm.weight"], eps)
        x = x + (gate_activation(h @ t[p + "mlp.gate_proj.weight"].T) * (h @ t[p + "mlp.up_proj.weight"].T)) \
            @ t[p + "mlp.down_proj.weight"].T
    x = rms_norm(x, t["model.norm.weight"], eps)
    return x @ (embed if tied else t["lm_head.weight"]).T


def check_family(t, tied, qkv_bias):
    assert tied or not GEMMA, "Gemma's head is the tied embedding (pass --tied)"
    if tied:
        assert "lm_head.weight" not in t, "tied embeddings, but the file holds lm_head.weight"
    else:
        assert "lm_head.weight" in t, "untied embeddings, but the file has no lm_head.weight (pass --tied?)"
    biases = {name for name in t if name.endswith(".bias")}
    if qkv_bias:
        expected = {f"model.layers.{i}.self_attn.{p}_proj.bias" for i in range(layer_count(t)) for p in "qkv"}
        assert biases == expected, f"Qwen2 (--qkv-bias), but the file's biases differ: {sorted(biases ^ expected)}"
    else:
        assert not biases, f"LLaMA, but the file holds biases (pass --qkv-bias?): {sorted(biases)[:3]}"


def tokens_loss(t, tokens, n_head, n_kv_head, seq_len, theta, eps, tied, qkv_bias=False, chunk=64):
    """Mean cross-entropy over strata eval's windows of the 1-D token array `tokens`."""
    check_family(t, tied, qkv_bias)
    windows = len(tokens) // (seq_len + 1)
    assert windows >= 1, f"{len(tokens)} tokens, fewer than one window of seq_len + 1 = {seq_len + 1}"
    rows = tokens[: windows * (seq_len + 1)].reshape(windows, seq_len + 1)
    total = 0.0
    for first in range(0, windows, chunk):  # windows are independent; chunks bound the memory
        part = rows[first:first + chunk]
        logits = logits_of(t, part[:, :-1], n_head, n_kv_head, theta, eps, tied, qkv_bias)
        peak = logits.max(-1, keepdims=True)
        log_z = np.log(np.exp(logits - peak).sum(-1)) + peak[..., 0]
        picked = np.take_along_axis(logits, part[:, 1:, None], -1)[..., 0]
        total += float((log_z - picked).sum())
    return total / (windows * seq_len)


def window_loss(path, tokens_path, n_head, n_kv_head, seq_len, theta, eps, tied, qkv_bias=False):
    tensors, _ = read_safetensors(path)
    return tokens_loss(tensors, read_tokens(tokens_path), n_head, n_kv_head, seq_len, theta, eps, tied, qkv_bias)


def greedy(path, prompt, count, n_head, n_kv_head, theta, eps, tied, qkv_bias=False):
    """The greedy continuation of `prompt` (comma-separated ids) by full forward passes (no cache),
    with the smallest margin between the chosen logit and the runner-up."""
    tensors, _ = read_safetensors(path)
    tokens = [int(i) for i in prompt.split(",")]
    margins = []
    for _ in range(count):
        logits = logits_of(tensors, np.array([tokens]), n_head, n_kv_head, theta, eps, tied, qkv_bias)[0, -1]
        top2 = np.sort(logits)[-2:]
        margins.append(top2[1] - top2[0])
        tokens.append(int(np.argmax(logits)))
    return tokens[-count:], min(margins)


def check_names(path, n_layer, vocab, d_model, d_ff, n_head, n_kv_head, tied, qkv_bias=False):
    tensors, metadata = read_safetensors(path)
    expected = hf_names(n_layer, vocab, d_model, d_ff, n_head, n_kv_head, tied, qkv_bias)
    assert metadata.get("format") == "pt", f"metadata {metadata}: from_pretrained needs format = pt"
    assert set(tensors) == set(expected), f"names differ: {sorted(set(tensors) ^ set(expected))}"
    for name, shape in expected.items():
        assert tensors[name].shape == shape, f"{name}: {tensors[name].shape}, HF expects {shape}"
    print(f"{path}: {len(tensors)} tensors, HF {'Gemma' if GEMMA else 'Qwen2' if qkv_bias else 'LLaMA'} names and shapes "
          f"({'tied' if tied else 'untied'} embeddings)")


def selftest():
    """Finite checks of this model against its definition, then of the interop test's power."""
    rng = np.random.default_rng(7)
    lines = []

    def check(name, error, bound):
        assert error <= bound, f"selftest '{name}': {error:.3e} > {bound:.1e}"
        lines.append(f"ok  {name}: {error:.1e} (bound {bound:.0e})")

    def replacing(name, function, compute):  # compute() while this module's function `name` is `function`
        real = globals()[name]
        globals()[name] = function
        try:
            return compute()
        finally:
            globals()[name] = real

    # RMSNorm against its formula, element by element.
    x, w = rng.standard_normal((3, 8)), 1.0 + 0.1 * rng.standard_normal(8)
    explicit = np.array([[x[r, j] / np.sqrt(sum(v * v for v in x[r]) / 8 + 1e-5) * w[j] for j in range(8)]
                         for r in range(3)])
    check("rmsnorm = x / sqrt(mean(x^2) + eps) * w", np.abs(rms_norm(x, w, 1e-5) - explicit).max(), 1e-14)

    # RoPE: the identity at position 0; rotate_half(x) = cat(-x2, x1); every pair (i, i + d/2)
    # rotated by the angle p / theta^(2i/d), written out pair by pair; scores that depend on m - n only.
    head_dim, seq_len, theta = 8, 5, 500000.0
    cos, sin = rope_tables(seq_len, head_dim, theta)
    q = rng.standard_normal((1, 2, seq_len, head_dim))
    roped = apply_rope(q, cos, sin)
    check("rope at position 0 is the identity", np.abs(roped[..., 0, :] - q[..., 0, :]).max(), 0.0)
    check("rotate_half([1, 2, 3, 4]) = [-3, -4, 1, 2]",
          np.abs(rotate_half(np.array([1.0, 2, 3, 4])) - [-3, -4, 1, 2]).max(), 0.0)
    explicit = np.empty_like(q)
    half = head_dim // 2
    for p in range(seq_len):
        for i in range(half):
            angle = p / theta ** (2 * i / head_dim)
            a, b = q[..., p, i], q[..., p, i + half]
            explicit[..., p, i] = a * np.cos(angle) - b * np.sin(angle)
            explicit[..., p, i + half] = b * np.cos(angle) + a * np.sin(angle)
    check("rope turns each pair (i, i + head_dim/2) by p / theta^(2i/head_dim)", np.abs(roped - explicit).max(), 1e-14)
    cos, sin = rope_tables(seq_len, head_dim, 10.0)  # a small theta, so that every frequency turns

    def at(vector, p):
        return apply_rope(np.tile(vector, (1, 1, seq_len, 1)), cos, sin)[0, 0, p]
    qv, kv = rng.standard_normal(head_dim), rng.standard_normal(head_dim)
    check("rope: q(1).k(3) = q(2).k(4)", abs(at(qv, 1) @ at(kv, 3) - at(qv, 2) @ at(kv, 4)), 1e-13)

    # The whole model, on the interop test's shape (random tokens here).
    s = INTEROP
    n_head, n_kv_head, group, head_dim = s["n_head"], s["n_kv_head"], s["n_head"] // s["n_kv_head"], \
        s["d_model"] // s["n_head"]
    shape = {k: s[k] for k in ("n_layer", "n_head", "n_kv_head", "d_model", "d_ff", "vocab")}
    config = dict(n_head=n_head, n_kv_head=n_kv_head, seq_len=s["seq_len"], theta=s["rope_theta"], eps=s["norm_eps"])
    t = random_weights(**shape, seed=3, tied=False)
    tokens = rng.integers(0, s["vocab"], size=40 * (s["seq_len"] + 1) + 5)

    def loss(tensors, tied=False, **changes):
        return tokens_loss(tensors, tokens, **dict(config, tied=tied, **changes))
    base = loss(t)

    window = tokens[None, :s["seq_len"]].copy()
    before = logits_of(t, window, n_head, n_kv_head, s["rope_theta"], s["norm_eps"], False)
    window[0, 9] = (window[0, 9] + 1) % s["vocab"]
    after = logits_of(t, window, n_head, n_kv_head, s["rope_theta"], s["norm_eps"], False)
    check("causal: a new token 9 changes no logit at 0..8", np.abs(after[0, :9] - before[0, :9]).max(), 0.0)
    assert np.abs(after[0, 9:] - before[0, 9:]).max() > 1e-3
    # The sliding window of Mistral (--sliding-window): with window 5, the new token 9 reaches the
    # logits at 9..13 only (each attends to itself and the 4 before it) in the first layer; the
    # second layer carries it 4 further (to 17, past this window's 16 positions), so with one
    # layer the logits from 14 on are untouched, and a window of 5 and of 6 differ.
    global SLIDING_WINDOW
    one_layer = {name: value for name, value in t.items() if not name.startswith("model.layers.1.")}
    SLIDING_WINDOW = 5
    windowed = [logits_of(one_layer, w, n_head, n_kv_head, s["rope_theta"], s["norm_eps"], False)
                for w in (tokens[None, :s["seq_len"]], window)]
    check("sliding window 5: a new token 9 changes no logit at 14..15 of a one-layer model",
          np.abs(windowed[1][0, 14:] - windowed[0][0, 14:]).max(), 0.0)
    assert np.abs(windowed[1][0, 9:14] - windowed[0][0, 9:14]).max() > 1e-3
    window_loss_5 = loss(t)
    SLIDING_WINDOW = 6
    window_loss_6 = loss(t)
    SLIDING_WINDOW = None
    for name, other in (("sliding window ignored", base), ("sliding window 6 read as 5", window_loss_6)):
        relative = abs(other - window_loss_5) / window_loss_5
        assert relative > 10 * TOLERANCE, f"selftest power (mistral): '{name}' moves the loss by {relative:.1e}"
        lines.append(f"ok  mistral: '{name}' moves the loss by {relative:.1e} (> {10 * TOLERANCE:.0e})")

    mha = dict(t)  # each key/value head's rows repeated for the query heads that read it
    for i in range(s["n_layer"]):
        for proj in ("k_proj", "v_proj"):
            name = f"model.layers.{i}.self_attn.{proj}.weight"
            mha[name] = np.repeat(t[name].reshape(n_kv_head, 1, head_dim, -1), group, 1).reshape(n_head * head_dim, -1)
    check(f"gqa (n_kv_head {n_kv_head}) = mha (n_kv_head {n_head}) with k/v rows repeated",
          abs(loss(mha, n_kv_head=n_head) - base), 1e-12)

    tied = {name: value for name, value in t.items() if name != "lm_head.weight"}
    untied = dict(tied, **{"lm_head.weight": t["model.embed_tokens.weight"]})
    check("tied = untied with lm_head = embed_tokens", abs(loss(tied, tied=True) - loss(untied)), 1e-12)

    zero_head = dict(t, **{"lm_head.weight": np.zeros_like(t["lm_head.weight"])})
    check("a zero lm_head gives ln(vocab)", abs(loss(zero_head) - np.log(s["vocab"])), 1e-12)

    windows = [tokens_loss(t, tokens[w * (s["seq_len"] + 1):(w + 1) * (s["seq_len"] + 1)], **dict(config, tied=False))
               for w in range(40)]
    check("loss = mean over the 40 whole windows (5 trailing tokens unused)", abs(np.mean(windows) - base), 1e-12)

    # Qwen2: a seed draws LLaMA's tensors, then the biases; zero biases are LLaMA.
    qwen2 = random_weights(**shape, seed=3, tied=False, qkv_bias=True)
    check("qwen2's tensors of a seed = llama's of that seed, plus biases",
          max(np.abs(qwen2[name] - t[name]).max() for name in t), 0.0)

    def without(tensors, *projections):  # these projections' biases zero in every layer
        return dict(tensors, **{name: np.zeros_like(value) for name, value in tensors.items()
                                if name.endswith(".bias") and name.split(".")[-2] in projections})
    check("qwen2 with zero biases = llama",
          abs(loss(without(qwen2, "q_proj", "k_proj", "v_proj"), qkv_bias=True) - base), 1e-12)
    # q.(k + b) = q.k + q.b, the same for every key of a query: the k bias acts through RoPE only.
    check("without rope, the k bias changes no loss (softmax ignores a shift per query)", replacing(
        "apply_rope", lambda x, cos, sin: x,
        lambda: abs(loss(qwen2, qkv_bias=True) - loss(without(qwen2, "k_proj"), qkv_bias=True))), 1e-12)

    # Files: make-weights, check-names, and the loss through f32 files equals the loss in memory.
    with tempfile.TemporaryDirectory() as work:
        tokens_path = os.path.join(work, "tokens.bin")
        make_tokens(tokens_path, s["tokens"], s["vocab"], s["token_seed"])
        file_tokens = read_tokens(tokens_path)
        families = [(f"{'qwen2' if qkv_bias else 'llama'} {'tied' if is_tied else 'untied'}", qkv_bias, is_tied)
                    for qkv_bias in (False, True) for is_tied in (False, True)]
        for kind, qkv_bias, is_tied in families:
            path = os.path.join(work, "w.safetensors")
            make_weights(path, *shape.values(), 3, is_tied, qkv_bias)
            check_names(path, s["n_layer"], s["vocab"], s["d_model"], s["d_ff"], n_head, n_kv_head, is_tied, qkv_bias)
            header_size = struct.unpack("<Q", open(path, "rb").read(8))[0]
            header = json.loads(open(path, "rb").read()[8:8 + header_size])
            assert all(e["dtype"] == "F32" for n, e in header.items() if n != "__metadata__")
            in_memory = random_weights(**shape, seed=3, tied=is_tied, qkv_bias=qkv_bias)
            check(f"make-weights then loss ({kind}) = the same model in memory",
                  abs(window_loss(path, tokens_path, n_head, n_kv_head, s["seq_len"], s["rope_theta"], s["norm_eps"],
                                  is_tied, qkv_bias)
                      - tokens_loss(in_memory, file_tokens, **dict(config, tied=is_tied, qkv_bias=qkv_bias))), 1e-12)

        # Power: on the interop test's own weights and tokens, each mistake a Strata LLaMA or Qwen2
        # could make moves the loss by well over the test's tolerance. Mistakes in the weights'
        # layout are written as the equivalent change to the file; mistakes in RoPE or in where a
        # bias is added replace apply_rope or biased_rope for a call.
        for kind, qkv_bias, is_tied in families:
            t = random_weights(**shape, seed=s["weight_seed"], tied=is_tied, qkv_bias=qkv_bias)
            base = tokens_loss(t, file_tokens, **dict(config, tied=is_tied, qkv_bias=qkv_bias))

            def moved(tensors=t, **changes):
                return abs(tokens_loss(tensors, file_tokens, **dict(config, tied=is_tied, qkv_bias=qkv_bias, **changes))
                           - base) / base

            def mistake(name, relative):
                assert relative > 10 * TOLERANCE, f"selftest power ({kind}): '{name}' moves the loss by {relative:.1e}"
                lines.append(f"ok  {kind}: '{name}' moves the loss by {relative:.1e} (> {10 * TOLERANCE:.0e})")

            def layers(transform):  # t with transform(tensors, prefix) applied to every layer
                changed = dict(t)
                for i in range(s["n_layer"]):
                    transform(changed, f"model.layers.{i}.")
                return changed

            def swapped(a, b, ends=(".weight", ".bias")):  # every layer's a and b exchanged (those the file has)
                def transform(c, p):
                    for end in (e for e in ends if p + a + e in t):
                        c[p + a + end], c[p + b + end] = t[p + b + end], t[p + a + end]
                return layers(transform)

            def with_rope(rope):
                return replacing("apply_rope", rope, moved)

            def interleaved_rope(x, cos, sin):  # pairs (2i, 2i+1) at frequency i
                c, s_ = cos[:, :head_dim // 2], sin[:, :head_dim // 2]
                out = np.empty_like(x)
                out[..., 0::2] = x[..., 0::2] * c - x[..., 1::2] * s_
                out[..., 1::2] = x[..., 1::2] * c + x[..., 0::2] * s_
                return out

            def half_exponent_rope(x, cos, sin):  # angles p / theta^(i/head_dim)
                c, s_ = rope_tables(x.shape[-2], 2 * head_dim, s["rope_theta"])
                return x * np.tile(c[:, :head_dim // 2], 2) + rotate_half(x) * np.tile(s_[:, :head_dim // 2], 2)

            mistake("no rope", with_rope(lambda x, cos, sin: x))
            mistake("rope on interleaved pairs (2i, 2i+1)", with_rope(interleaved_rope))
            mistake("rope angles p / theta^(i/head_dim)", with_rope(half_exponent_rope))
            mistake(f"rope_theta 10000 instead of {s['rope_theta']:g}", moved(theta=10000.0))
            # query head h = a * n_kv_head + b reading kv head b is this file's head b * group + a: its
            # q rows (and q bias) and o_proj columns are the file's in this order
            order = np.arange(n_head * head_dim).reshape(group, n_kv_head, head_dim).transpose(1, 0, 2).reshape(-1)
            mistake("query head h reads kv head h % n_kv_head", moved(layers(lambda c, p: c.update({
                p + "self_attn.q_proj.weight": t[p + "self_attn.q_proj.weight"][order],
                p + "self_attn.o_proj.weight": t[p + "self_attn.o_proj.weight"][:, order],
                **({p + "self_attn.q_proj.bias": t[p + "self_attn.q_proj.bias"][order]} if qkv_bias else {})}))))
            mistake("k_proj and v_proj swapped", moved(swapped("self_attn.k_proj", "self_attn.v_proj")))
            mistake("gate_proj and up_proj swapped", moved(swapped("mlp.gate_proj", "mlp.up_proj")))
            mistake("q_proj read as (in, out)", moved(layers(lambda c, p: c.update({
                p + "self_attn.q_proj.weight": t[p + "self_attn.q_proj.weight"].T}))))
            mistake("o_proj read as (in, out)", moved(layers(lambda c, p: c.update({
                p + "self_attn.o_proj.weight": t[p + "self_attn.o_proj.weight"].T}))))
            for norm in ("input_layernorm", "post_attention_layernorm"):
                mistake(f"{norm} weight ignored", moved(layers(lambda c, p: c.update({
                    p + norm + ".weight": np.ones(s["d_model"])}))))
            mistake("model.norm weight ignored", moved(dict(t, **{"model.norm.weight": np.ones(s["d_model"])})))
            if not is_tied:
                mistake("lm_head taken from embed_tokens", moved(dict(t, **{"lm_head.weight":
                                                                           t["model.embed_tokens.weight"]})))
            if qkv_bias:
                for proj in ("q_proj", "k_proj", "v_proj"):
                    mistake(f"{proj}.bias ignored", moved(without(t, proj)))
                mistake("k_proj.bias and v_proj.bias swapped",
                        moved(swapped("self_attn.k_proj", "self_attn.v_proj", ends=(".bias",))))
                mistake("q and k biases added after rope", replacing(
                    "biased_rope", lambda x, bias, cos, sin: apply_rope(x, cos, sin) + bias, moved))
            # Not a check: on random weights the residual stream is far larger than eps, so the
            # interop test cannot see norm_eps; the rmsnorm op's own test has to.
            lines.append(f"--  {kind}: norm_eps 1e-6 instead of {s['norm_eps']:g} moves the loss by "
                         f"{moved(eps=1e-6):.1e} only: norm_eps is not checked by the interop test")

        # Gemma (--gemma --head-dim=16, tests/cli/hf_llama_interop.sh gemma): heads 16 wide over a
        # d_model of 32, so q_proj is (64, 32); each of Gemma's differences from LLaMA, undone,
        # moves the loss by well over the tolerance.
        global GEMMA, HEAD_DIM
        GEMMA, HEAD_DIM = True, 16
        try:
            t = random_weights(**shape, seed=s["weight_seed"], tied=True)
            assert t["model.layers.0.self_attn.q_proj.weight"].shape == (64, 32)
            base = tokens_loss(t, file_tokens, **dict(config, tied=True))

            def gemma_mistake(name, compute):
                relative = abs(compute() - base) / base
                assert relative > 10 * TOLERANCE, f"selftest power (gemma): '{name}' moves the loss by {relative:.1e}"
                lines.append(f"ok  gemma: '{name}' moves the loss by {relative:.1e} (> {10 * TOLERANCE:.0e})")

            def gemma_loss():
                return tokens_loss(t, file_tokens, **dict(config, tied=True))
            x, w = rng.standard_normal((3, 8)), 0.1 * rng.standard_normal(8)
            check("gemma's rmsnorm(x, w) = llama's rmsnorm(x, 1 + w)",
                  np.abs(rms_norm(x, w, 1e-5) - replacing("GEMMA", False, lambda: rms_norm(x, 1.0 + w, 1e-5))).max(),
                  1e-15)
            gemma_mistake("norm gain w instead of 1 + w", lambda: replacing(
                "rms_norm", lambda x, w, eps: x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w, gemma_loss))
            gemma_mistake("embedding not scaled by sqrt(d_model)",
                          lambda: replacing("embedding_scale", lambda d_model: 1.0, gemma_loss))
            gemma_mistake("silu in the MLP (LLaMA's)", lambda: replacing("gate_activation", silu, gemma_loss))
            exact = replacing("gate_activation", lambda x: 0.5 * x * (1.0 + np.vectorize(math.erf)(x / np.sqrt(2.0))),
                              gemma_loss)
            lines.append(f"--  gemma: exact GELU instead of the tanh one moves the loss by {abs(exact - base) / base:.1e}"
                         f" (the gelu op's own test checks the tanh form)")
        finally:
            GEMMA, HEAD_DIM = False, None
    print("\n".join(lines))
    print(f"selftest: {sum(line.startswith('ok') for line in lines)} checks passed")


def main(argv):
    global ROPE_SCALING, SLIDING_WINDOW, GEMMA, HEAD_DIM
    head_dims = [a for a in argv if a.startswith("--head-dim=")]
    if head_dims:
        HEAD_DIM = int(head_dims[0].split("=", 1)[1])
        argv = [a for a in argv if a not in head_dims]
    GEMMA = "--gemma" in argv
    argv = [a for a in argv if a != "--gemma"]
    scaling = [a for a in argv if a.startswith("--rope-scaling=")]
    if scaling:
        ROPE_SCALING = json.loads(scaling[0].split("=", 1)[1])
        argv = [a for a in argv if a not in scaling]
    sliding = [a for a in argv if a.startswith("--sliding-window=")]
    if sliding:
        SLIDING_WINDOW = int(sliding[0].split("=", 1)[1])
        argv = [a for a in argv if a not in sliding]
    flags = {a for a in argv if a.startswith("--")}
    args = [a for a in argv if not a.startswith("--")]
    counts = {"make-weights": 8, "make-tokens": 4, "check-names": 7, "loss": 7, "greedy": 7, "selftest": 0}
    if not args or args[0] not in counts or len(args) != counts[args[0]] + 1 or flags - {"--tied", "--qkv-bias"}:
        sys.exit(__doc__)
    command, args, tied, qkv_bias = args[0], args[1:], "--tied" in flags, "--qkv-bias" in flags
    if command == "make-weights":
        make_weights(args[0], *map(int, args[1:]), tied, qkv_bias)
    elif command == "make-tokens":
        make_tokens(args[0], *map(int, args[1:]))
    elif command == "check-names":
        check_names(args[0], *map(int, args[1:]), tied, qkv_bias)
    elif command == "loss":
        print("%.9f" % window_loss(args[0], args[1], int(args[2]), int(args[3]), int(args[4]), float(args[5]),
                                   float(args[6]), tied, qkv_bias))
    elif command == "greedy":  # WEIGHTS PROMPT_IDS COUNT n_head n_kv_head theta eps
        ids, margin = greedy(args[0], args[1], int(args[2]), int(args[3]), int(args[4]), float(args[5]),
                             float(args[6]), tied, qkv_bias)
        print(" ".join(map(str, ids)))
        print("%.6g" % margin)
    else:
        selftest()


if __name__ == "__main__":
    main(sys.argv[1:])
