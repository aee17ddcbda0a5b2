"""A LLaMA in PyTorch as a PyTorch user writes it for GPU training, the reference for Strata's LLaMA on
cuda:0 (bench/torch_gpt2_gpu.py --shape tinyllama-1.1b): RMSNorm, rotary embeddings (theta 10000, the
rotate-half form of Hugging Face's LlamaModel), grouped-query SDPA causal attention, SwiGLU, no biases,
an untied LM head; normal(0, 0.02) initialization."""
import torch
import torch.nn as nn
import torch.nn.functional as F

from torch_reference import causal_attention  # SDPA, or the plain product where torch predates it


def llama_parameter_count(n_layer, n_head, n_kv_head, d_model, d_ff, vocab, **_):
    """Parameters as core/model/llama counts them with an untied head."""
    head_dim = d_model // n_head
    attention = d_model * n_head * head_dim + 2 * d_model * n_kv_head * head_dim + n_head * head_dim * d_model
    per_layer = 2 * d_model + attention + 3 * d_model * d_ff
    return 2 * vocab * d_model + n_layer * per_layer + d_model


class RMSNorm(nn.Module):
    def __init__(s, d_model, eps):
        super().__init__()
        s.weight, s.eps = nn.Parameter(torch.ones(d_model)), eps

    def forward(s, x):
        x32 = x.float()
        return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + s.eps)).type_as(x) * s.weight


def rotate(x, cos, sin):
    half = x.shape[-1] // 2
    return x * cos + torch.cat((-x[..., half:], x[..., :half]), dim=-1) * sin


class LlamaBlock(nn.Module):
    def __init__(s, n_head, n_kv_head, d_model, d_ff, eps):
        super().__init__()
        s.n_head, s.n_kv_head, s.head_dim = n_head, n_kv_head, d_model // n_head
        s.attn_norm, s.mlp_norm = RMSNorm(d_model, eps), RMSNorm(d_model, eps)
        s.wq = nn.Linear(d_model, n_head * s.head_dim, bias=False)
        s.wk = nn.Linear(d_model, n_kv_head * s.head_dim, bias=False)
        s.wv = nn.Linear(d_model, n_kv_head * s.head_dim, bias=False)
        s.wo = nn.Linear(n_head * s.head_dim, d_model, bias=False)
        s.gate = nn.Linear(d_model, d_ff, bias=False)
        s.up = nn.Linear(d_model, d_ff, bias=False)
        s.down = nn.Linear(d_ff, d_model, bias=False)

    def forward(s, x, cos, sin):
        B, T, _ = x.shape
        h = s.attn_norm(x)
        q = rotate(s.wq(h).view(B, T, s.n_head, s.head_dim).transpose(1, 2), cos, sin)
        k = rotate(s.wk(h).view(B, T, s.n_kv_head, s.head_dim).transpose(1, 2), cos, sin)
        v = s.wv(h).view(B, T, s.n_kv_head, s.head_dim).transpose(1, 2)
        group = s.n_head // s.n_kv_head
        if group > 1:  # enable_gqa is torch >= 2.5; repeating the heads is what older releases need
            k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
        y = causal_attention(q, k, v)
        x = x + s.wo(y.transpose(1, 2).reshape(B, T, -1))
        h = s.mlp_norm(x)
        return x + s.down(F.silu(s.gate(h)) * s.up(h))


class Llama(nn.Module):
    def __init__(s, n_layer, n_head, n_kv_head, d_model, d_ff, vocab, seq_len, rope_theta=10000.0, eps=1e-5, **_):
        super().__init__()
        s.tok = nn.Embedding(vocab, d_model)
        s.blocks = nn.ModuleList(LlamaBlock(n_head, n_kv_head, d_model, d_ff, eps) for _ in range(n_layer))
        s.norm = RMSNorm(d_model, eps)
        s.head = nn.Linear(d_model, vocab, bias=False)
        head_dim = d_model // n_head
        inv = 1.0 / rope_theta ** (torch.arange(0, head_dim, 2).float() / head_dim)
        angles = torch.outer(torch.arange(seq_len).float(), inv)
        angles = torch.cat((angles, angles), dim=-1)
        s.register_buffer("cos", angles.cos(), persistent=False)
        s.register_buffer("sin", angles.sin(), persistent=False)
        for p in s.parameters():
            if p.dim() >= 2:
                nn.init.normal_(p, 0.0, 0.02)

    def forward(s, idx, targets):
        T = idx.shape[1]
        cos, sin = s.cos[:T], s.sin[:T]
        x = s.tok(idx)
        for block in s.blocks:
            x = block(x, cos, sin)
        logits = s.head(s.norm(x))
        return F.cross_entropy(logits.reshape(-1, logits.size(-1)).float(), targets.reshape(-1))
