#!/usr/bin/env bash
# What a zero 3 save and its resume cost: GPT-2 124M (examples/gpt2-124m.toml) at B8, T256 on two
# ranks of one thread (mpirun -np 2), two steps without a save, two with one at the end, then two
# more resumed from it. Prints each rank's peak over the whole run by category, the allocator's, as
# each run's last log lines give it. Rank 0 receives each row another rank keeps as the save reaches
# it, and a resumed rank loads its own rows alone (docs/architecture.md, "Data parallel"), so each
# peak should be the one without a save, plus at most one row at rank 0.
# Usage: bash bench/data_parallel_save_peak.sh
set -euo pipefail
dir=runs/bench-data-parallel-save
strata=${STRATA_BIN:-./build/bin/strata}
[ -f runs/bench/gpt2_tokens.bin ] || python3 bench/make_gpt2_tokens.py runs/bench/gpt2_tokens.bin
rm -rf "$dir" && mkdir -p "$dir"
sed '/^\[checkpoint\]/,/^$/d' examples/gpt2-124m.toml > "$dir/unsaved.toml"
for saves in without with resumed; do
  args=(--set model.seq_len=256 --set train.batch=8 --set train.steps=2 --set train.eval_every=0
    --set train.warmup_steps=0 --set train.threads=1 --set distributed.zero=3
    --set telemetry.1.path=\"$dir/$saves.jsonl\")
  manifest=examples/gpt2-124m.toml
  case $saves in
    without) manifest=$dir/unsaved.toml ;;
    with) args+=(--set checkpoint.dir=\"$dir/checkpoints\") ;;
    resumed) args+=(--set checkpoint.dir=\"$dir/checkpoints\" --set train.steps=4 --resume) ;;
  esac
  mpirun --allow-run-as-root --oversubscribe -np 2 --bind-to core "$strata" train "$manifest" "${args[@]}" \
    > "$dir/$saves.log" 2>&1 || { tail -n 20 "$dir/$saves.log"; exit 1; }
  case $saves in without) echo "two steps without a save:" ;; with) echo "two steps, saved:" ;;
    resumed) echo "two steps more, resumed from that save:" ;; esac
  grep -E "rank [01] \(zero 3\): peak" "$dir/$saves.log" | sed 's/.*\] /  /; s/; communication.*//'
done
