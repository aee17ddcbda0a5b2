#!/usr/bin/env bash
# The disk tier's speed and memory cost: GPT-2 XL (examples/gpt2-xl-24gib.toml) with its optimizer
# state (8-bit moments and f32 masters) on the host, then in the disk tier, then in the disk tier
# with the fused update (train.update = "fused": one block's gradients at a time), and last with the
# streamed block weights in the tier too (offload's weights = "disk"), side by side in one run,
# ROUNDS times. Per run: median s/step from the JSONL, peak RSS from /usr/bin/time, and the
# disk tier's own totals from the log (bytes read and written, I/O busy time, compute's wait).
# Usage: bash bench/disk_tier_bench.sh [STEPS] [ROUNDS] [DISK_DIR]
#   MODES="host disk disk-fused disk-weights-fused" (the default) chooses the runs.
set -euo pipefail
steps=${1:-5}
rounds=${2:-1}
dir=runs/bench-disk-tier
tier=${3:-$dir/tier}
strata=${STRATA_BIN:-./build/bin/strata}
mkdir -p "$dir" "$tier"
median_step_s() {  # the median of the steps after the first (which reads the tier's zeros in too)
  python3 -c '
import json, statistics, sys
ms = [json.loads(l)["ms"] for l in open(sys.argv[1]) if "\"ms\"" in l][1:]
print(f"{statistics.median(ms) / 1000:.1f}")' "$1"
}
for round in $(seq "$rounds"); do
  for mode in ${MODES:-host disk disk-fused disk-weights-fused}; do
    home=${mode%%-*}
    update=full
    [ "$mode" != "${mode%-fused}" ] && update=fused
    weights=host
    [ "$mode" != "${mode/-weights/}" ] && weights=disk
    out=$dir/$mode-$round
    echo "== round $round: optimizer_state = \"$home\", weights = \"$weights\", update = \"$update\", $steps steps"
    /usr/bin/time -v "$strata" train examples/gpt2-xl-24gib.toml --set train.steps="$steps" \
      --set strategy.0.optimizer_state=\"$home\" --set strategy.0.weights=\"$weights\" \
      --set device.disk_path=\"$tier\" \
      --set train.update=\"$update\" --set telemetry.1.path=\"$out.jsonl\" > "$out.log" 2>&1
    rss_kib=$(grep "Maximum resident set size" "$out.log" | awk '{print $NF}')
    echo "$mode: $(median_step_s "$out.jsonl") s/step (median of steps 2..$steps), peak RSS $((rss_kib / 1024)) MiB"
    grep -E "disk tier: .* read" "$out.log" | sed -e 's/^\[[^]]*\] \[info\] //' || true
    grep -E "Elapsed \(wall clock\)" "$out.log"
  done
done
