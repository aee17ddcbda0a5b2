"""Times PyTorch's causal scaled_dot_product_attention at B16 H12 T1024 D64 (forward, backward),
per backend and dtype, for comparison with bench/gpu/flash_attention_bench.cu. Prints what runs."""
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

B, H, T, D = 16, 12, 1024, 64
FWD_FLOP = 2 * 2 * B * H * T * T * D / 2
BWD_FLOP = 2.5 * FWD_FLOP
torch.backends.cuda.matmul.allow_tf32 = False


def median_ms(fn, reps=20):
    fn()
    times = []
    for _ in range(reps):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    return sorted(times)[len(times) // 2]


for dtype in (torch.bfloat16, torch.float32):
    for backend in (SDPBackend.FLASH_ATTENTION, SDPBackend.CUDNN_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH):
        q, k, v = (torch.randn(B, H, T, D, device="cuda", dtype=dtype, requires_grad=True) for _ in range(3))
        dout = torch.randn(B, H, T, D, device="cuda", dtype=dtype)
        try:
            with sdpa_kernel(backend):
                out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
                fwd = median_ms(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True))
                bwd = median_ms(lambda: torch.autograd.grad(out, (q, k, v), dout, retain_graph=True))
            print(f"sdpa {backend.name:20s} {str(dtype):15s} fwd {fwd:.3f} ms ({FWD_FLOP / fwd / 1e9:.1f} TFLOP/s)"
                  f"  bwd {bwd:.3f} ms ({BWD_FLOP / bwd / 1e9:.1f} TFLOP/s)  total {fwd + bwd:.3f} ms")
        except Exception as error:  # a backend that does not take this dtype
            print(f"sdpa {backend.name:20s} {str(dtype):15s} does not run: {str(error).splitlines()[0][:100]}")
        del q, k, v, dout
        torch.cuda.empty_cache()
