"""PyTorch's GPT-2 124M training step on a GPU, the reference for Strata's CUDA backend (bench/gpu_bench.sh);
with --shape tinyllama-1.1b, a TinyLlama-1.1B-shaped LLaMA (bench/torch_llama_model.py) in the same set-up.

The model is bench/torch_reference.py's GPT-2 with the GPU set-up a PyTorch user would write: f32 master
weights, bf16 autocast, SDPA causal attention (F.scaled_dot_product_attention), the LM head tied to wte
and padded to a multiple of 64 rows as Strata pads it (50304 for GPT-2; the padded logits take part in the
softmax, where Strata masks them: the same matmul, a negligible difference in work), fused AdamW (lr 6e-4,
betas 0.9/0.95, weight decay 0.1 on matrices and embeddings only, as Strata's adamw), gradients clipped to
global norm 1.0 (Strata's default grad_clip), random tokens from a fixed seed. Each mode (eager,
torch.compile) warms up, then its steps are timed with CUDA events: median ms/step, tokens/s, peak device
bytes after reset_peak_memory_stats, MFU (the formula is printed; bench/gpu_bench_table.py holds it).

  torch_gpt2_gpu.py [--modes eager,compile] [--steps 20] [--batch 16] [--peak-flops 989e12] [--json OUT]
  torch_gpt2_gpu.py --shape tinyllama-1.1b --batch 4 --modes eager
  torch_gpt2_gpu.py --shape tiny --device cpu --modes eager --steps 3    (a smoke check without a GPU; tiny-llama too)
"""
import argparse, gc, json, math, os, statistics, sys, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
from gpu_bench_table import FLOPS_FORMULA, flops_per_token, gpt2_parameter_count  # noqa: E402

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch_llama_model import Llama, llama_parameter_count  # noqa: E402
from torch_reference import Block  # noqa: E402  (the same GPT-2 block as the CPU comparison)

SHAPES = {"gpt2-124m": dict(n_layer=12, n_head=12, d_model=768, vocab=50257, seq_len=1024),
          "tiny": dict(n_layer=2, n_head=2, d_model=64, vocab=50257, seq_len=64),
          "tinyllama-1.1b": dict(arch="llama", n_layer=22, n_head=32, n_kv_head=4, d_model=2048, d_ff=5632,
                                 vocab=32000, seq_len=2048),
          "tiny-llama": dict(arch="llama", n_layer=2, n_head=2, n_kv_head=1, d_model=64, d_ff=96, vocab=32000,
                             seq_len=64)}


def is_llama(shape):
    return shape.get("arch") == "llama"


def make_model(shape):
    return Llama(**shape) if is_llama(shape) else GPT(**shape)


def parameter_count(shape):
    return llama_parameter_count(**shape) if is_llama(shape) else gpt2_parameter_count(**shape)


def padded(vocab):
    return (vocab + 63) // 64 * 64  # core/model/gpt2/gpt2_config.hpp's padded_vocab


class GPT(nn.Module):
    def __init__(s, n_layer, n_head, d_model, vocab, seq_len):
        super().__init__()
        s.wte, s.wpe = nn.Embedding(padded(vocab), d_model), nn.Embedding(seq_len, d_model)
        s.h = nn.ModuleList(Block(d_model, n_head) for _ in range(n_layer))
        s.ln_f = nn.LayerNorm(d_model)
        s.register_buffer("positions", torch.arange(seq_len), persistent=False)
        for name, p in s.named_parameters():  # GPT-2's initialization
            if name.endswith("bias"):
                nn.init.zeros_(p)
            elif p.dim() >= 2:
                std = 0.02 / math.sqrt(2 * n_layer) if name.endswith(("c_proj.weight", "mlp_proj.weight")) else 0.02
                nn.init.normal_(p, 0.0, std)

    def forward(s, idx, targets):
        x = s.wte(idx) + s.wpe(s.positions[: idx.shape[1]])
        for block in s.h:
            x = block(x)
        logits = F.linear(s.ln_f(x), s.wte.weight)  # tied head, padded rows included
        return F.cross_entropy(logits.reshape(-1, logits.size(-1)).float(), targets.reshape(-1))


def make_optimizer(model, device, lr):
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    groups = [dict(params=decay, weight_decay=0.1), dict(params=no_decay, weight_decay=0.0)]
    fused = device.type == "cuda"  # fused AdamW on the CPU needs torch >= 2.4; the CPU run is a smoke check
    return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.95), eps=1e-8, **({"fused": True} if fused else {}))


class Timer:
    """Per-step device time: CUDA events on a GPU, the wall clock (after the step's loss is read) on the CPU."""

    def __init__(s, device):
        s.cuda = device.type == "cuda"

    def start(s):
        if s.cuda:
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            return event
        return time.perf_counter()

    def elapsed_ms(s, begin, end):
        return begin.elapsed_time(end) if s.cuda else (end - begin) * 1000


def run_mode(mode, shape, args, device):
    torch.manual_seed(args.seed)
    model = make_model(shape).to(device)
    optimizer = make_optimizer(model, device, args.lr)
    step_fn = model
    if mode == "compile":
        if not hasattr(torch, "compile"):
            raise RuntimeError(f"torch {torch.__version__} has no torch.compile")
        step_fn = torch.compile(model, mode=args.compile_mode)
    generator = torch.Generator().manual_seed(args.seed)
    batches = [torch.randint(shape["vocab"], (args.batch, shape["seq_len"] + 1), generator=generator).to(device)
               for _ in range(4)]
    autocast = torch.autocast(device.type, dtype=torch.bfloat16)
    clip_options = {"foreach": True} if device.type == "cuda" else {}  # foreach: torch >= 2.0

    def step(i):
        tokens = batches[i % len(batches)]
        with autocast:
            loss = step_fn(tokens[:, :-1], tokens[:, 1:])
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, **clip_options)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss

    warmup = args.compile_warmup if mode == "compile" else args.warmup
    begin = time.perf_counter()
    first_loss = None
    for i in range(warmup):
        loss = step(i)
        if i == 0:
            first_loss = loss.item()  # waits for the first step: the compile time is in here
            first_step_s = time.perf_counter() - begin
    sync(device)
    warmup_s = time.perf_counter() - begin

    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    timer, marks, losses = Timer(device), [], []
    for i in range(args.steps):
        start = timer.start()
        loss = step(warmup + i)
        if device.type != "cuda":
            loss = loss.item()
        marks.append((start, timer.start()))
        losses.append(loss)
    sync(device)
    times = [timer.elapsed_ms(a, b) for a, b in marks]
    last_loss = float(losses[-1])
    median_ms = statistics.median(times)
    tokens_per_s = args.batch * shape["seq_len"] / (median_ms / 1000)
    n_params = parameter_count(shape)
    result = dict(mode=mode, warmup_steps=warmup, timed_steps=args.steps, median_ms=median_ms,
                  min_ms=min(times), max_ms=max(times), tokens_per_s=tokens_per_s,
                  mfu=flops_per_token(n_params, **shape) * tokens_per_s / args.peak_flops,
                  max_memory_allocated=torch.cuda.max_memory_allocated(device) if device.type == "cuda" else 0,
                  max_memory_reserved=torch.cuda.max_memory_reserved(device) if device.type == "cuda" else 0,
                  first_step_s=first_step_s, warmup_s=warmup_s,
                  first_loss=first_loss, last_loss=last_loss)
    del model, optimizer, step_fn, batches
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()
    if mode == "compile":
        torch._dynamo.reset()
    return result


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shape", choices=sorted(SHAPES), default="gpt2-124m")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--modes", default="eager,compile", help="comma-separated: eager, compile")
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--steps", type=int, default=20, help="timed steps per mode")
    parser.add_argument("--warmup", type=int, default=5, help="eager warm-up steps")
    parser.add_argument("--compile-warmup", type=int, default=8, help="torch.compile warm-up steps (compiles first)")
    parser.add_argument("--compile-mode", default="default", help="torch.compile's mode (default, max-autotune, ...)")
    parser.add_argument("--lr", type=float, default=6e-4)
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--peak-flops", type=float, default=989e12, help="dense bf16 FLOP/s (H100 SXM: 989e12)")
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args()
    modes = [m for m in args.modes.split(",") if m]
    for mode in modes:
        if mode not in ("eager", "compile"):
            parser.error(f"--modes: '{mode}' is neither eager nor compile")
    if min(args.steps, args.batch, args.warmup, args.compile_warmup) < 1:
        parser.error("--steps, --batch, --warmup and --compile-warmup must be >= 1")
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print(f"torch_gpt2_gpu.py: no CUDA device visible to PyTorch {torch.__version__} "
              f"(built for CUDA {torch.version.cuda}); for a smoke check without one: --shape tiny --device cpu",
              file=sys.stderr)
        return 1
    shape = SHAPES[args.shape]
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    family = "LLaMA" if is_llama(shape) else "GPT-2"
    padding = "" if is_llama(shape) else f" padded to {padded(shape['vocab'])}"
    print(f"torch {torch.__version__} on {name}: {family} {args.shape} (n_layer {shape['n_layer']}, d_model "
          f"{shape['d_model']}, vocab {shape['vocab']}{padding}), B {args.batch}, "
          f"T {shape['seq_len']}, bf16 autocast, f32 master weights, {'fused ' if device.type == 'cuda' else ''}AdamW",
          flush=True)
    results, failed = [], []
    for mode in modes:
        try:
            result = run_mode(mode, shape, args, device)
        except Exception as error:  # a failed mode (a compile error, out of memory) must not hide the others
            print(f"torch_gpt2_gpu.py: {mode} failed: {type(error).__name__}: {error}", file=sys.stderr, flush=True)
            failed.append(dict(mode=mode, error=f"{type(error).__name__}: {str(error)[:300]}"))
            gc.collect()
            if device.type == "cuda":
                torch.cuda.empty_cache()
            continue
        results.append(result)
        print(f"  {mode}: warm-up {result['warmup_steps']} steps in {result['warmup_s']:.1f} s (first step "
              f"{result['first_step_s']:.1f} s), loss {result['first_loss']:.4f} -> {result['last_loss']:.4f}",
              flush=True)
    n_params = parameter_count(shape)
    print(f"{'mode':<8} {'ms/step':>9} {'tokens/s':>10} {'alloc MiB':>10} {'rsvd MiB':>9} {'MFU':>6}")
    for r in failed:
        print(f"{r['mode']:<8} failed: {r['error']}")
    for r in results:
        print(f"{r['mode']:<8} {r['median_ms']:>9.2f} {r['tokens_per_s']:>10.0f} {r['max_memory_allocated'] / 2**20:>10.0f} "
              f"{r['max_memory_reserved'] / 2**20:>9.0f} {100 * r['mfu']:>5.1f}%")
    print(f"{FLOPS_FORMULA}; N = {n_params}, {flops_per_token(n_params, **shape) / 1e6:.1f} MFLOP/token, "
          f"peak {args.peak_flops:.3g} FLOP/s")
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as f:
            json.dump(dict(torch=torch.__version__, cuda=torch.version.cuda, device=name, shape=args.shape,
                           batch=args.batch, n_params=n_params, flops_per_token=flops_per_token(n_params, **shape),
                           formula=FLOPS_FORMULA, peak_flops=args.peak_flops, results=results, failed=failed), f, indent=1)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
