#!/usr/bin/env bash
# Fine-tuning experiment (run by hand, from the repository root, after scripts/setup.sh): a 12-layer
# byte-level GPT-2 (d 128, T 64, B 16) is pretrained on corpus A, the shipped King James text
# (bench/finetune/base.toml, 1000 steps), then adapted for 300 steps to corpus B, the license texts
# every Debian system ships in /usr/share/common-licenses (legal English instead of 17th-century
# scripture), by each stack in bench/finetune/: full fine-tune, LoRA r = 8, LoRA + checkpointing,
# LoRA on a bf16, an int8 and an NF4 base (QLoRA), sparse layers (first 2 + last 2) frozen or
# skipped; seeds 42 43 44.
# Learning rates (in the manifests): 3e-3 for the full and sparse fine-tunes, 1e-2 for LoRA, each
# the better of two tried on seed 42 (full 1e-3: 1.8035, 3e-3: 1.7718; LoRA 3e-3: 1.9626, 1e-2: 1.8427).
# For each run: validation loss on B (the run's own split), forgetting on A (`strata eval --data` on
# 96 KiB of A's validation split, against the base's loss there), the allocator's peak device bytes
# by category, trainable parameters (the elements its checkpoint holds: frozen weights are left
# out) and median ms/step. bench/finetune_summary.py prints the table.
# Usage: bash bench/finetune_bench.sh [base_steps] [steps]   (SEEDS="42", CONFIGS="full lora" and
# FINETUNE_DIR=... for a partial run; STRATA_BIN to run a copy of the build while rebuilding)
set -euo pipefail
base_steps=${1:-1000}
steps=${2:-300}
strata=${STRATA_BIN:-./build/bin/strata}
dir=${FINETUNE_DIR:-runs/bench-finetune}
seeds=${SEEDS:-42 43 44}
configs=${CONFIGS:-full lora lora-checkpoint lora-bf16 lora-int8 lora-nf4 sparse-freeze sparse-skip}
mkdir -p "$dir"
where=(--set "train.init_from=\"$dir/base\"" --set "data.train=\"$dir/licenses.txt\"")

# Corpus B: the regular files of /usr/share/common-licenses (base-files), in name order.
find /usr/share/common-licenses -maxdepth 1 -type f | sort | xargs cat > "$dir/licenses.txt"
# 96 KiB from the start of A's validation split (its last 10%).
kjv_bytes=$(stat -c %s data/kjv.txt)
tail -c $((kjv_bytes / 10)) data/kjv.txt | head -c 98304 > "$dir/kjv-val.txt"
echo "corpus B: $(stat -c %s "$dir/licenses.txt") bytes; A's probe: $(stat -c %s "$dir/kjv-val.txt") bytes"

if [[ ! -f $dir/base/latest ]]; then
  echo "== pretraining the base on A, $base_steps steps"
  "$strata" train bench/finetune/base.toml --set "train.steps=$base_steps" --set "checkpoint.dir=\"$dir/base\"" 2>&1 |
    tail -3
fi
"$strata" eval bench/finetune/base.toml --checkpoint "$dir/base" --data "$dir/kjv-val.txt" | tail -1 |
  sed 's/eval_loss=//' > "$dir/base-on-A.txt"
"$strata" eval bench/finetune/full.toml "${where[@]}" --checkpoint "$dir/base" | tail -1 | sed 's/eval_loss=//' > "$dir/base-on-B.txt"
echo "base: loss on A $(cat "$dir/base-on-A.txt"), on B $(cat "$dir/base-on-B.txt")"

for seed in $seeds; do
  for config in $configs; do
    run="$dir/$config-$seed"
    echo "== $config, seed $seed, $steps steps"
    rm -rf "$run"
    "$strata" train "bench/finetune/$config.toml" "${where[@]}" --set "train.seed=$seed" --set "train.steps=$steps" \
      --set "checkpoint.dir=\"$run/ckpt\"" \
      --set "telemetry.1.path=\"$run/steps.jsonl\"" > "$run.log" 2>&1 || { echo "failed: see $run.log"; continue; }
    "$strata" eval "bench/finetune/$config.toml" "${where[@]}" --set "train.seed=$seed" --checkpoint "$run/ckpt" \
      --data "$dir/kjv-val.txt" | tail -1 | sed 's/eval_loss=//' > "$run/on-A.txt"
    tail -1 "$run.log"
  done
done
python3 bench/finetune_summary.py "$dir" | tee "$dir/summary.txt"
