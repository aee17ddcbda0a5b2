#!/usr/bin/env bash
# The RSSM predictor through the CLI (examples/rssm-predictor.toml): a short run with predict
# steps (the summary counts them, the JSONL marks each step's phase and backward pass), a resume,
# and refusals with exit 2: a predict length of 0, a warmup shorter than the history window, and
# a stack with an optimizer it conflicts with.
set -euo pipefail
source "$(dirname "$0")/expect.sh" "$1" "$2"
short=(examples/rssm-predictor.toml --set train.steps=40 --set train.eval_every=0 --set train.eval_batches=2
  --set predictor.warmup_steps=20 --set predictor.fit_iterations=20
  --set "checkpoint.dir=\"$work/ckpt\"" --set "telemetry.1.path=\"$work/run.jsonl\"")
"$strata" train "${short[@]}" > "$work/train.log" 2>&1 || { cat "$work/train.log"; exit 1; }
grep -q "backward passes" "$work/train.log" || { echo "no predictor summary"; cat "$work/train.log"; exit 1; }
python3 - "$work/run.jsonl" <<'PY'
import json, sys
records = [json.loads(line) for line in open(sys.argv[1])]
steps = [r for r in records if r.get("record", "step") == "step"]
summary = [r for r in records if r.get("record") == "summary"][0]
predict = [s for s in steps if s["phase"] == "predict"]
assert predict and all(not s["backward"] for s in predict), "no forward-only predict steps"
assert all(s["backward"] for s in steps if s["phase"] != "predict")
assert summary["backward_passes"] + summary["predict_steps"] == len(steps) == 40, summary
assert summary["predictor_host_bytes"] > 0 and summary["predictor_device_bytes"] > 0, summary
print(f"predictor: {summary['predict_steps']} predict steps ({summary['rollbacks']} rolled back) of 40")
PY
"$strata" train "${short[@]}" --set train.steps=44 --resume "$work/ckpt" > "$work/resume.log" 2>&1 ||
  { cat "$work/resume.log"; exit 1; }

set +e  # expect checks each exit code itself
expect 2 "a predict phase of 0 steps never predicts" -- \
  "$strata" validate examples/rssm-predictor.toml --set predictor.predict_steps=0
expect 2 "is shorter than the RSSM's history window" -- \
  "$strata" validate examples/rssm-predictor.toml --set predictor.warmup_steps=8
expect 2 "conflicts with [optimizer] 'adamw8bit'" -- \
  "$strata" validate examples/rssm-predictor.toml --set 'optimizer.plugin="adamw8bit"'
echo "predictor: ok"
