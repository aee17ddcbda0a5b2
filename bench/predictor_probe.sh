#!/usr/bin/env bash
# Why the predictor's frozen direction fails (docs/benchmarks.md, "The RSSM predictor"): trains the
# benchmark's model with plain AdamW to step FIRST + 4, saving every step's checkpoint from FIRST
# on, then compares Adam's real steps with the direction a predict phase would continue.
# Usage: bash bench/predictor_probe.sh [first] [seed]   (defaults 100, 42; STRATA_BIN as elsewhere)
set -euo pipefail
first=${1:-100}
seed=${2:-42}
strata=${STRATA_BIN:-./build/bin/strata}
dir=${PROBE_DIR:-runs/bench-predictor-probe}
rm -rf "$dir"
"$strata" train bench/predictor/run.toml --set "train.seed=$seed" --set train.eval_every=0 --stop-after $((first + 4)) \
  --set "checkpoint.dir=\"$dir\"" --set checkpoint.every=1 --set checkpoint.keep_last=5 \
  --set "telemetry.1.path=\"$dir.jsonl\"" > "$dir.log" 2>&1 || { tail "$dir.log"; exit 1; }
python3 bench/predictor_probe.py "$dir" "$first" 4
