"""PyTorch's causal attention on the CPU at the shapes of bench/attention_bench.cpp (GPT-2 124M:
B1, H12, D64, q, k, v split from one packed (B, T, 3C) tensor): median ms of forward and of
backward. Runs torch.nn.functional._scaled_dot_product_attention(is_causal=True) (PyTorch 1.13's
unfused path) after checking it against an explicit masked softmax; falls back to that explicit
version if the check fails. Prints which one ran.
    OMP_NUM_THREADS=2 /usr/bin/python3 bench/attention_sdpa_cpu.py [--rounds N] [T ...]"""
import argparse
import math
import time

import torch
import torch.nn.functional as F

B, H, D = 1, 12, 64
C = H * D


def split_heads(qkv, T):
    q, k, v = qkv.split(C, dim=2)
    return [x.view(B, T, H, D).transpose(1, 2) for x in (q, k, v)]


def sdpa(q, k, v):
    out, _ = F._scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, need_attn_weights=False,
                                             is_causal=True)
    return out


def explicit(q, k, v):
    T = q.shape[-2]
    scores = (q @ k.transpose(-2, -1)) / math.sqrt(D)
    mask = torch.ones(T, T, dtype=torch.bool).tril()
    return scores.masked_fill(~mask, float("-inf")).softmax(dim=-1) @ v


def sdpa_matches_explicit():
    T = 37
    qkv = torch.randn(B, T, 3 * C, dtype=torch.float64)
    try:
        difference = (sdpa(*split_heads(qkv, T)) - explicit(*split_heads(qkv, T))).abs().max().item()
    except Exception as error:  # an unusable build of the private function
        print(f"_scaled_dot_product_attention fails: {str(error).splitlines()[0][:100]}")
        return False
    print(f"_scaled_dot_product_attention vs explicit masked softmax (float64, T {T}): max |diff| {difference:.2g}")
    return difference < 1e-10


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("seq_lens", type=int, nargs="*", default=[256, 512, 1024, 2048, 4096])
    args = parser.parse_args()
    torch.set_num_threads(2)
    attention = sdpa if sdpa_matches_explicit() else explicit
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, running "
          f"{'_scaled_dot_product_attention(is_causal=True)' if attention is sdpa else 'explicit masked softmax'}")
    print(f"{'T':>6} {'fwd ms':>10} {'bwd ms':>10}")
    for T in args.seq_lens:
        torch.manual_seed(0)
        qkv = (torch.rand(B, T, 3 * C) * 2 - 1).requires_grad_()
        dout = torch.rand(B, H, T, D) * 2 - 1
        forward, backward = [], []
        for round in range(args.rounds + 1):
            start = time.perf_counter()
            out = attention(*split_heads(qkv, T))
            middle = time.perf_counter()
            torch.autograd.grad(out, qkv, dout)
            stop = time.perf_counter()
            if round > 0:  # the first is a warm-up
                forward.append((middle - start) * 1e3)
                backward.append((stop - middle) * 1e3)
        print(f"{T:>6} {sorted(forward)[len(forward) // 2]:>10.2f} {sorted(backward)[len(backward) // 2]:>10.2f}")


if __name__ == "__main__":
    main()
