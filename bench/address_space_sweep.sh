#!/usr/bin/env bash
# Runs `strata train` (the quickstart, 3 steps, no checkpoints) and `strata --help` under each
# address-space limit (ulimit -v) from FROM to TO KiB in steps of STEP, and prints each one's exit
# code, seconds and first line about memory: every limit must end in a message, never a spin.
#   bash bench/address_space_sweep.sh [STRATA] [FROM] [TO] [STEP]
# docs/reliability.md ("Limits, stated rather than handled") quotes its result.
set -uo pipefail
strata=${1:-build/bin/strata}
from=${2:-700000} to=${3:-2100000} step=${4:-50000}
work=runs/address-space-sweep
mkdir -p "$work"
sed -e '/^\[checkpoint\]/,/^dir/d' -e "s#runs/quickstart/steps.jsonl#$work/steps.jsonl#" examples/quickstart.toml \
  > "$work/quickstart.toml"
for limit in $(seq "$from" "$step" "$to"); do
  for command in train help; do
    if [ "$command" = train ]; then
      arguments=(train "$work/quickstart.toml" --set train.steps=3 --overwrite-telemetry)
    else
      arguments=(--help)
    fi
    start=$(date +%s.%N)
    output=$( (ulimit -v "$limit"; timeout 90 "$strata" "${arguments[@]}") 2>&1)
    code=$?
    seconds=$(echo "$(date +%s.%N) - $start" | bc)
    line=$(grep -m1 -iE 'address|memory|error|fail|refus' <<< "$output" | cut -c1-100)
    printf '%8s KiB  %-5s exit %3s  %5.1f s  %s\n' "$limit" "$command" "$code" "$seconds" "$line"
  done
done
