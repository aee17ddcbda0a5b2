#!/usr/bin/env bash
# What a zero 3 save costs rank 0: GPT-2 124M (examples/gpt2-124m.toml) at B8, T256 on two ranks of
# one thread (mpirun -np 2), two steps, without a save and with one at the end. Prints each rank's
# peak over the whole run by category, the allocator's, as the run's last log lines give it. Rank 0
# receives each row another rank keeps as the save reaches it (docs/architecture.md, "Data
# parallel"), so its peak with a save should be its peak without one, plus at most one row.
# Usage: bash bench/data_parallel_save_peak.sh
set -euo pipefail
dir=runs/bench-data-parallel-save
strata=${STRATA_BIN:-./build/bin/strata}
[ -f runs/bench/gpt2_tokens.bin ] || python3 bench/make_gpt2_tokens.py runs/bench/gpt2_tokens.bin
rm -rf "$dir" && mkdir -p "$dir"
sed '/^\[checkpoint\]/,/^$/d' examples/gpt2-124m.toml > "$dir/unsaved.toml"
for saves in without with; do
  args=(--set model.seq_len=256 --set train.batch=8 --set train.steps=2 --set train.eval_every=0
    --set train.warmup_steps=0 --set train.threads=1 --set distributed.zero=3
    --set telemetry.1.path=\"$dir/$saves.jsonl\")
  manifest=examples/gpt2-124m.toml
  if [ "$saves" = with ]; then args+=(--set checkpoint.dir=\"$dir/checkpoints\"); else manifest=$dir/unsaved.toml; fi
  mpirun --allow-run-as-root --oversubscribe -np 2 --bind-to core "$strata" train "$manifest" "${args[@]}" \
    > "$dir/$saves.log" 2>&1 || { tail -n 20 "$dir/$saves.log"; exit 1; }
  echo "$saves a save:"
  grep -E "rank [01] \(zero 3\): peak" "$dir/$saves.log" | sed 's/.*\] /  /; s/; communication.*//'
done
