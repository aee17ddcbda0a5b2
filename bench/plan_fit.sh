#!/usr/bin/env bash
# The planner's three worked fits (docs/benchmarks.md, "The planner"): `strata plan --fit` picks a
# stack for each budget, and the stack it writes is trained for three steps with memory_limit set
# to the budget, its peaks and step time measured. Needs a calibration (`strata calibrate
# --disk-path runs`). Usage: bench/plan_fit.sh [124m|tinyllama|xl]... (default: all three).
set -euo pipefail
strata=${STRATA:-build/bin/strata}
work=${WORK:-/tmp/strata_plan_fit}
fits=("$@")
[ ${#fits[@]} -gt 0 ] || fits=(124m tinyllama xl)
mkdir -p "$work" runs
for fit in "${fits[@]}"; do
  case $fit in
    # GPT-2 124M keeps its f32 embedding and gradient (2 x 147 MiB) on the device in every stack
    # that keeps the numbers, so its fit may change them.
    124m) manifest=examples/gpt2-124m.toml budget=device=256MiB extra=(--allow-numerics) ;;
    tinyllama) manifest=bench/planner/tinyllama-1b.toml budget=device=2GiB extra=() ;;
    xl) manifest=bench/planner/gpt2-xl.toml budget=device=1GiB,host=16GiB extra=() ;;
    *) echo "unknown fit $fit (124m, tinyllama, xl)"; exit 2 ;;
  esac
  # The example's own checkpoint and telemetry tables are dropped: outputs go to the scratch directory.
  sed -e '/^\[checkpoint\]/,/^$/d' -e '/^\[\[telemetry\]\]/,/^$/d' "$manifest" > "$work/$fit.base.toml"
  echo "== $fit: $manifest into $budget"
  # Exit 1 (nothing fits) is a result: it is reported, and there is nothing to train.
  status=0
  /usr/bin/time -f "fit: %e s, peak RSS %M KiB" "$strata" plan "$work/$fit.base.toml" --fit "$budget" "${extra[@]}" \
    --write "$work/$fit.toml" > "$work/$fit.fit.txt" 2>&1 || status=$?
  grep -v "^planning stacks" "$work/$fit.fit.txt" | tr '\r' '\n' | grep -v "^planning stacks" || true
  [ "$status" = 0 ] || { echo "(exit $status: nothing to train)"; continue; }
  "$strata" plan "$work/$fit.toml" --json > "$work/$fit.plan.json" 2> /dev/null
  /usr/bin/time -f "run: %e s, peak RSS %M KiB" "$strata" train "$work/$fit.toml" --set train.steps=3 \
    --set train.eval_every=0 --metrics "$work/$fit.jsonl" > "$work/$fit.train.log" 2>&1 ||
    { tail "$work/$fit.train.log"; exit 1; }
  tail -1 "$work/$fit.train.log"
  python3 - "$work/$fit.plan.json" "$work/$fit.jsonl" <<'PY'
import json, sys
plan = json.load(open(sys.argv[1]))
records = [json.loads(l) for l in open(sys.argv[2])]
run = records[-1]
steps = [r["ms"] for r in records if r.get("step", 0) >= 2]
print("device peak: plan %.1f MiB, run %.1f MiB; host peak: plan %.1f MiB, run %.1f MiB; step: plan %.0f ms, run %.0f ms" % (
    plan["device"]["peak_bytes"] / 2**20, run["peak_device_bytes"] / 2**20, plan["host"]["peak_bytes"] / 2**20,
    run["peak_host_bytes"] / 2**20, plan["step_ms"] or 0, min(steps)))
PY
done
