#!/usr/bin/env bash
# Low-bit storage benchmark (run by hand, from the repository root, after scripts/setup.sh):
#   quickstart  the quickstart model (4 layers, d 128, King James bytes), 1000 steps, seeds 42 43 44:
#               f32 AdamW, int8 block matrices, 8-bit AdamW, through `strata ab` (verdicts and peaks)
#   deep        the same shape at 12 layers: AdamW against 8-bit AdamW, three seeds
#   fp16        the quickstart model, f32 against fp16 (f16 matrices and operands, dynamic loss
#               scaling), three seeds
#   xl          GPT-2 XL (examples/gpt2-xl-24gib.toml), 20 steps in a 4 GiB device budget; peak RSS
#               from /usr/bin/time
# Every byte figure is the allocator's (strata ab's table, the JSONL summaries); the final
# validation losses are summarized per stack and seed by bench/low_bit_summary.py.
# Usage: bash bench/low_bit_bench.sh [quickstart|deep|fp16|xl|all] [steps]
# Do not rebuild while it runs: `strata ab` starts each run from its own executable. To keep building
# meanwhile, run a copy: STRATA_BIN=/tmp/copy/bin/strata STRATA_PLUGIN_PATH=/tmp/copy/plugins.
set -euo pipefail
part=${1:-all}
steps=${2:-1000}
strata=${STRATA_BIN:-./build/bin/strata}
dir=runs/bench-low-bit
mkdir -p "$dir"

if [[ $part == quickstart || $part == all ]]; then
  outs=()
  for seed in 42 43 44; do
    echo "== quickstart, seed $seed: f32 / int8 / adamw8bit, $steps steps"
    "$strata" ab examples/quickstart.toml examples/int8.toml examples/adamw8bit.toml --steps "$steps" \
      --set "train.seed=$seed" --set train.eval_every=250 --out "$dir/quickstart-$seed" | tee "$dir/quickstart-$seed.txt" ||
      echo "(strata ab exited non-zero: a verdict other than within tolerance, or a failed run)"
    outs+=("$dir/quickstart-$seed")
  done
  python3 bench/low_bit_summary.py "${outs[@]}" | tee "$dir/quickstart-summary.txt"
fi

if [[ $part == deep || $part == all ]]; then
  outs=()
  for seed in 42 43 44; do
    echo "== 12 layers, seed $seed: adamw / adamw8bit, $steps steps"
    "$strata" ab examples/quickstart.toml examples/adamw8bit.toml --steps "$steps" --set model.n_layer=12 \
      --set device.memory_limit=\"1GiB\" --set "train.seed=$seed" --set train.eval_every=250 \
      --out "$dir/deep-$seed" | tee "$dir/deep-$seed.txt" ||
      echo "(strata ab exited non-zero: a verdict other than within tolerance, or a failed run)"
    outs+=("$dir/deep-$seed")
  done
  python3 bench/low_bit_summary.py "${outs[@]}" | tee "$dir/deep-summary.txt"
fi

if [[ $part == fp16 || $part == all ]]; then
  outs=()
  for seed in 42 43 44; do
    echo "== quickstart, seed $seed: f32 / fp16, $steps steps"
    "$strata" ab examples/quickstart.toml examples/fp16.toml --steps "$steps" \
      --set "train.seed=$seed" --set train.eval_every=250 --out "$dir/fp16-$seed" | tee "$dir/fp16-$seed.txt" ||
      echo "(strata ab exited non-zero: a verdict other than within tolerance, or a failed run)"
    outs+=("$dir/fp16-$seed")
  done
  python3 bench/low_bit_summary.py "${outs[@]}" | tee "$dir/fp16-summary.txt"
fi

if [[ $part == xl || $part == all ]]; then
  echo "== GPT-2 XL, 20 steps, device.memory_limit = 4GiB"
  mkdir -p runs/gpt2-xl
  /usr/bin/time -v "$strata" train examples/gpt2-xl-24gib.toml --set "data.train=\"data/kjv.txt\"" 2>&1 |
    tee "$dir/xl.txt"
  grep -E "Maximum resident set size|Elapsed \(wall clock\)" "$dir/xl.txt"
fi
