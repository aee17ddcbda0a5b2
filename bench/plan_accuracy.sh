#!/usr/bin/env bash
# How close `strata plan`'s predicted peaks come to the peaks a run measures, for the example
# manifests: each is planned and trained for three steps and its evaluation pass, and the device
# and host arena peaks compared (docs/benchmarks.md, "The planner"). Runs from the repository
# root after scripts/setup.sh; the examples' own checkpoint and telemetry outputs go to a scratch
# directory. The step time is compared too when a calibration exists (`strata calibrate` first, or
# CALIBRATION=FILE): the plan's against the faster of the run's steps 2 and 3.
# Usage: bench/plan_accuracy.sh [EXAMPLE...] (default: every example small enough to train here in
# seconds, and GPT-2 124M).
set -euo pipefail
strata=${STRATA:-build/bin/strata}
work=${WORK:-/tmp/strata_plan_accuracy}
examples=("$@")
[ ${#examples[@]} -gt 0 ] || examples=(quickstart checkpoint all-strategies offload-optimizer stream-layers bf16 fp16
  int8 adamw8bit flash-attention sparse-layers rssm-predictor llama qwen2 gpt2-124m)
rm -rf "$work" && mkdir -p "$work"
calibration=()
[ -z "${CALIBRATION:-}" ] || calibration=(--calibration "$CALIBRATION")
printf '%-18s %12s %12s %7s %12s %12s %7s %10s %10s %7s %7s\n' example "device plan" "device run" error \
  "host plan" "host run" error "step plan" "step run" error "plan s"
for name in "${examples[@]}"; do
  manifest=examples/$name.toml
  # Outputs into the scratch directory: the checkpoint table and telemetry files are dropped.
  python3 - "$manifest" "$work/$name.toml" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
kept, skip = [], False
for line in text.splitlines():
    if re.match(r"^\s*\[", line):
        skip = line.strip() in ("[checkpoint]", "[[telemetry]]")
    if not skip:
        kept.append(line)
open(sys.argv[2], "w").write("\n".join(kept) + "\n")
PY
  keys=(--set train.steps=3 --set train.eval_every=0)
  "$strata" plan "$work/$name.toml" "${keys[@]}" "${calibration[@]}" --json > "$work/$name.plan.json" 2> "$work/$name.plan.log"
  "$strata" train "$work/$name.toml" "${keys[@]}" --metrics "$work/$name.jsonl" > "$work/$name.train.log" 2>&1 ||
    { tail "$work/$name.train.log"; exit 1; }
  python3 - "$name" "$work/$name.plan.json" "$work/$name.jsonl" <<'PY'
import json, sys
name, plan = sys.argv[1], json.load(open(sys.argv[2]))
records = [json.loads(l) for l in open(sys.argv[3])]
run = records[-1]
steps = [r["ms"] for r in records if r.get("step", 0) >= 2 and "ms" in r]  # the first step warms up
mib = lambda b: "%.2f MiB" % (b / 2**20)
err = lambda p, m: "exact" if p == m else ("%+.2f%%" % (100.0 * (p - m) / m) if m else "inf")
pd, md = plan["device"]["peak_bytes"], run["peak_device_bytes"]
ph, mh = plan["host"]["peak_bytes"], run["peak_host_bytes"]
ps, ms = plan.get("step_ms"), min(steps) if steps else None
step = ("%.0f ms" % ps if ps else "-", "%.0f ms" % ms if ms else "-", "%+.0f%%" % (100.0 * (ps - ms) / ms) if ps and ms else "-")
print("%-18s %12s %12s %7s %12s %12s %7s %10s %10s %7s %7s" % (name, mib(pd), mib(md), err(pd, md), mib(ph), mib(mh),
      err(ph, mh), step[0], step[1], step[2], "%.2f" % plan.get("seconds", 0.0)))
PY
done
