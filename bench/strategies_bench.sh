#!/usr/bin/env bash
# Strategy benchmark (run by hand): each memory strategy against no strategy, through `strata ab`,
# on the CPU backend, for
#   gpt2:  GPT-2 124M (n_layer 12, d_model 768, n_head 12, vocab 50257), T 256, B 4
#   v256:  the same 12 blocks with a byte vocabulary (vocab 256), T 256, B 4
# Every figure is read from the allocator and the timers by `strata ab`; bench/analytic_floor.py
# sets the combined stack's peak beside the floor computed from `strata plan --full`.
# Usage: bash bench/strategies_bench.sh [steps]   (from the repository root, after scripts/setup.sh)
set -euo pipefail
steps=${1:-4}
strata=./build/bin/strata
out=runs/bench-strategies
mkdir -p "$out"
python3 bench/make_gpt2_tokens.py runs/bench/gpt2_tokens.bin

strategy_checkpoint='[[strategy]]
plugin = "checkpoint"
every = 1'
strategy_checkpoint_logits='[[strategy]]
plugin = "checkpoint"
every = 1
logits = "recompute"'
strategy_optimizer='[[strategy]]
plugin = "offload"
optimizer_state = "host"'
strategy_stream='[[strategy]]
plugin = "offload"
optimizer_state = "host"
max_resident_layers = 2
prefetch = 1'

for shape in gpt2 v256; do
  dir="$out/$shape" && mkdir -p "$dir"
  cp bench/engine.toml "$dir/none.toml"
  printf '%s\n\n%s\n' "$(cat bench/engine.toml)" "$strategy_checkpoint" > "$dir/checkpoint.toml"
  printf '%s\n\n%s\n' "$(cat bench/engine.toml)" "$strategy_optimizer" > "$dir/offload-optimizer.toml"
  printf '%s\n\n%s\n' "$(cat bench/engine.toml)" "$strategy_stream" > "$dir/stream-k2.toml"
  printf '%s\n\n%s\n\n%s\n' "$(cat bench/engine.toml)" "$strategy_checkpoint" "$strategy_stream" > "$dir/all.toml"
  printf '%s\n\n%s\n' "$(cat bench/engine.toml)" "$strategy_checkpoint_logits" > "$dir/checkpoint-logits.toml"
  printf '%s\n\n%s\n\n%s\n' "$(cat bench/engine.toml)" "$strategy_checkpoint_logits" "$strategy_stream" > "$dir/all-logits.toml"
  shape_keys=(--set model.n_layer=12 --set model.d_model=768 --set model.n_head=12 --set model.seq_len=256
    --set train.batch=4 --set "telemetry.1.every=1")
  if [ "$shape" = gpt2 ]; then
    shape_keys+=(--set model.vocab=50257 --set "data.train=\"runs/bench/gpt2_tokens.bin\"")
  else
    shape_keys+=(--set model.vocab=256)
  fi
  echo "== $shape: $steps steps per stack"
  "$strata" ab "$dir/none.toml" "$dir/checkpoint.toml" "$dir/offload-optimizer.toml" "$dir/stream-k2.toml" "$dir/all.toml" \
    "$dir/checkpoint-logits.toml" "$dir/all-logits.toml" \
    --steps "$steps" "${shape_keys[@]}" --out "$dir/runs" --html "$dir/report.html" | tee "$dir/table.txt"
  "$strata" plan "$dir/all.toml" --full "${shape_keys[@]}" > "$dir/plan-all.txt"
  python3 bench/analytic_floor.py "$dir/plan-all.txt" "$dir/runs/5-all.jsonl" | tee -a "$dir/table.txt"
  "$strata" plan "$dir/all-logits.toml" --full "${shape_keys[@]}" > "$dir/plan-all-logits.txt"
  python3 bench/analytic_floor.py "$dir/plan-all-logits.txt" "$dir/runs/7-all-logits.jsonl" | tee -a "$dir/table.txt"
done
