#!/usr/bin/env bash
# What a save of a disk-tier run costs: GPT-2 XL (examples/gpt2-xl-24gib.toml) with its optimizer
# state (8-bit moments and f32 masters) in the disk tier and the fused update, STEPS steps, saving
# every 2 steps and at the end. Two runs side by side:
#   link  the checkpoint directory on the tier's filesystem: the saves keep the tier's rows by hard
#         link (tier/ in each save) and write only what is in memory;
#   copy  the checkpoint directory on /dev/shm (another filesystem, where no link can be made): the
#         saves copy the tier's rows into their safetensors files, as every save did before links.
# Per run: each save's seconds and bytes (the run's own "checkpoint: ... saved" line), the step
# times, and the disk the last save holds once the run has ended (du of the checkpoint directory).
# Needs about 12 GB free in /dev/shm for the copy run's saves.
# Usage: bash bench/tier_checkpoint_bench.sh [STEPS]   (MODES="link copy", the default, chooses the runs)
set -euo pipefail
steps=${1:-5}
dir=runs/bench-tier-checkpoint
strata=${STRATA_BIN:-./build/bin/strata}
rm -rf "$dir" /dev/shm/strata-bench-saves
mkdir -p "$dir/tier"
for mode in ${MODES:-link copy}; do
  saves=$dir/saves-$mode
  [ "$mode" = copy ] && saves=/dev/shm/strata-bench-saves
  echo "== $mode: checkpoints in $saves, $steps steps"
  /usr/bin/time -v "$strata" train examples/gpt2-xl-24gib.toml --set train.steps="$steps" \
    --set strategy.0.optimizer_state=\"disk\" --set device.disk_path=\"$dir/tier\" --set train.update=\"fused\" \
    --set checkpoint.dir=\"$saves\" --set checkpoint.every=2 --set checkpoint.keep_last=1 \
    --set telemetry.1.path=\"$dir/$mode.jsonl\" > "$dir/$mode.log" 2>&1
  grep -E "checkpoint: step .* saved" "$dir/$mode.log" | sed -e 's/^\[[^]]*\] \[info\] //'
  python3 -c '
import json, sys
ms = [json.loads(l)["ms"] / 1000 for l in open(sys.argv[1]) if "\"ms\"" in l]
print("step seconds: " + " ".join(f"{m:.1f}" for m in ms))' "$dir/$mode.jsonl"
  echo "disk held by the last save: $(du -sh "$saves" | cut -f1)"
  grep -E "Maximum resident|Elapsed \(wall" "$dir/$mode.log"
  "$strata" verify "$saves" > "$dir/verify-$mode.log" 2>&1 && echo "strata verify: ok" || echo "strata verify: FAILED"
  rm -rf /dev/shm/strata-bench-saves
done
