#!/usr/bin/env bash
# Flash attention benchmark (run by hand, from the repository root, after scripts/setup.sh):
#   1. kernel time: forward + backward of GPT-2 124M's attention (B1, 12 heads of 64) at
#      T 256 ... 4096, the built-in kernel beside the flash plugin's CPU kernel in one process
#      (build/bench/strata_attention_bench), and PyTorch's SDPA on the CPU (Debian's torch, 2 threads);
#   2. memory: the attention rows of one GPT-2 124M block, B1, at T 512 ... 4096, read from the
#      allocator's per-category peaks of a 2-step run with each kernel;
#   3. the whole step: GPT-2 124M at T1024, B1, without and with flash, twice in turn, through
#      `strata ab` (the machine drifts between runs: compare each pair).
# Usage: bash bench/flash_attention_bench.sh [steps]   (steps per run of part 3; default 5)
set -euo pipefail
steps=${1:-5}
strata=./build/bin/strata
out=runs/bench-flash
mkdir -p "$out"
export OMP_NUM_THREADS=2 OMP_WAIT_POLICY=PASSIVE
lscpu | grep -m1 'Model name' | tee "$out/cpu.txt"

echo "== 1. attention kernels, forward + backward (ms, median of rounds)"
./build/bench/strata_attention_bench --rounds 9 | tee "$out/kernels.txt"
/usr/bin/python3 bench/attention_sdpa_cpu.py --rounds 7 | tee "$out/torch_sdpa.txt"

echo "== 2. attention memory of one block (allocator peaks, MiB)"
printf '%-6s %-6s %12s %12s\n' T kernel activations workspace | tee "$out/memory.txt"
for T in 512 1024 2048 4096; do
  for kernel in fast flash; do
    log="$out/block-T$T-$kernel.txt"
    "$strata" train bench/flash/block.toml --set model.seq_len=$T --set "kernels.attention=\"$kernel\"" > "$log" 2>&1
    activations=$(awk '$1 == "activations" {print $2}' "$log")
    workspace=$(awk '$1 == "workspace" {print $2}' "$log")
    printf '%-6s %-6s %12s %12s\n' "$T" "$kernel" "$activations" "$workspace" | tee -a "$out/memory.txt"
  done
done

echo "== 3. GPT-2 124M, T1024, B1: the whole step"
python3 bench/make_gpt2_tokens.py runs/bench/gpt2_tokens.bin
for round in 1 2; do
  cp bench/flash/gpt2-124m-t1024.toml "$out/builtin$round.toml"
  printf '%s\n\n[kernels]\nattention = "flash"\n' "$(cat bench/flash/gpt2-124m-t1024.toml)" > "$out/flash$round.toml"
done
"$strata" ab "$out/builtin1.toml" "$out/flash1.toml" "$out/builtin2.toml" "$out/flash2.toml" --steps "$steps" \
  --out "$out/ab" | tee "$out/step.txt"
