#!/usr/bin/env bash
# The predictor experiment (run by hand, from the repository root, after scripts/setup.sh): a
# 12-layer byte-level GPT-2 (d 128, T 64, B 16; bench/predictor/run.toml) trains from scratch on the
# shipped King James text for the same step budget in three arms, seeds 42 43 44:
#   adamw  plain AdamW, a backward pass every step (the reference)
#   rssm   [predictor] rssm_predictor at its defaults (warmup 100, then predict 4 / correct 2 / full 2)
#   last   the same schedule, magnitudes = the last observed update norms (no RSSM): the ablation
# Each run logs every step (phase, loss, ms) and the validation loss every 50 steps to JSONL;
# bench/predictor_summary.py reads them: backward passes and training time to reach the reference's
# final validation loss, and the loss gap at equal steps and at equal training time.
# Usage: bash bench/predictor_bench.sh [steps]   (SEEDS="42", ARMS="adamw rssm" and PREDICTOR_DIR=...
# for a partial run; STRATA_BIN to run a copy of the build while rebuilding)
set -euo pipefail
steps=${1:-1000}
strata=${STRATA_BIN:-./build/bin/strata}
dir=${PREDICTOR_DIR:-runs/bench-predictor}
seeds=${SEEDS:-42 43 44}
arms=${ARMS:-adamw rssm last}
mkdir -p "$dir"
for seed in $seeds; do
  for arm in $arms; do
    case $arm in
      adamw) predictor=() ;;
      rssm) predictor=(--set 'predictor.plugin="rssm_predictor"') ;;
      last) predictor=(--set 'predictor.plugin="rssm_predictor"' --set 'predictor.magnitude="last"') ;;
      *) echo "unknown arm '$arm' (adamw, rssm, last)"; exit 2 ;;
    esac
    run="$dir/$arm-$seed"
    echo "== $arm, seed $seed, $steps steps"
    "$strata" train bench/predictor/run.toml "${predictor[@]}" --set "train.seed=$seed" --set "train.steps=$steps" \
      --set "telemetry.1.path=\"$run.jsonl\"" > "$run.log" 2>&1 || { echo "failed: see $run.log"; continue; }
    grep -E '^(validation loss|backward passes|predictor|median ms/step|wall time)' "$run.log" || true
  done
done
python3 bench/predictor_summary.py "$dir" | tee "$dir/summary.txt"
