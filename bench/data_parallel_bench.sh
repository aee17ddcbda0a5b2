#!/usr/bin/env bash
# Data parallel on the CPU: GPT-2 124M (examples/gpt2-124m.toml) at B8, T256, two ranks of one
# thread each (mpirun -np 2, four rows a rank) against one process of two threads with two micro
# batches of four rows (the same batches, the same work), for zero 0 to 3, in ROUNDS rounds side
# by side, each stage with its calls overlapping computing ([distributed] overlap, the default) and
# waited for where they are made (overlap = false). Per run: the median step time (rank 0's
# telemetry, the first step left out), the ratio to the one-process step; then
# bench/data_parallel_summary.py's table from the runs' telemetry: each rank's communication time,
# the part of it hidden behind computing, bytes per step and its device peak by category (the
# allocator's).
# Usage: bash bench/data_parallel_bench.sh [STEPS] [ROUNDS]
set -euo pipefail
steps=${1:-5}
rounds=${2:-2}
dir=runs/bench-data-parallel
strata=${STRATA_BIN:-./build/bin/strata}
[ -f runs/bench/gpt2_tokens.bin ] || python3 bench/make_gpt2_tokens.py runs/bench/gpt2_tokens.bin
rm -rf "$dir" && mkdir -p "$dir"
common=(--set model.seq_len=256 --set train.batch=8 --set train.steps="$steps" --set train.eval_batches=1
  --set train.warmup_steps=0 --set checkpoint.every=0)
median() {
  python3 -c '
import json, statistics, sys
ms = [json.loads(l)["ms"] for l in open(sys.argv[1]) if "\"ms\"" in l][1:]
print(f"{statistics.median(ms):.0f}")' "$1"
}
for round in $(seq "$rounds"); do
  name=one-r$round
  "$strata" train examples/gpt2-124m.toml "${common[@]}" --set train.threads=2 --set train.micro_batches=2 \
    --set checkpoint.dir=\"$dir/$name\" --set telemetry.1.path=\"$dir/$name.jsonl\" > "$dir/$name.log" 2>&1
  one=$(median "$dir/$name.jsonl")
  echo "round $round: one process, 2 threads, 2 micro batches: ${one} ms/step"
  for zero in 0 1 2 3; do
    for overlap in true false; do
      name=z$zero-$overlap-r$round
      mpirun --allow-run-as-root --oversubscribe -np 2 --bind-to core "$strata" train examples/gpt2-124m.toml \
        "${common[@]}" --set train.threads=1 --set train.micro_batches=1 --set distributed.zero=$zero \
        --set distributed.overlap=$overlap \
        --set checkpoint.dir=\"$dir/$name\" --set telemetry.1.path=\"$dir/$name.jsonl\" > "$dir/$name.log" 2>&1
      two=$(median "$dir/$name.jsonl")
      echo "round $round: 2 ranks x 1 thread, zero $zero, overlap $overlap: ${two} ms/step," \
        "$(python3 -c "print(f'{$two / $one:.3f}')")x"
    done
  done
done
python3 bench/data_parallel_summary.py "$dir" "$rounds"
