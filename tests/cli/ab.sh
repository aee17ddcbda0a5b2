#!/usr/bin/env bash
# strata ab on tiny manifests: the table, the verdicts (identical for the strategies, within
# tolerance for bf16, an optimizer comparison for another learning rate, a training comparison
# for LoRA against full training, not comparable for
# another depth, failed and no reference when a run fails) and a self-contained HTML report.
set -euo pipefail
strata=$1
work=$2
rm -rf "$work" && mkdir -p "$work"
fail() { echo "FAIL: $*"; exit 1; }
# Every model key but n_layer, so that the depth can differ between manifests below.
shape=(--set model.d_model=32 --set model.n_head=2 --set model.seq_len=16
  --set train.batch=4 --set train.eval_batches=2 --set train.threads=2 --set train.eval_every=0
  --set "checkpoint.dir=\"$work/ckpt\"")
small=(--set model.n_layer=2 "${shape[@]}")
# ab ARGS... : runs strata ab, keeps its output in $out and its exit code in $code.
ab() {
  set +e
  out=$("$strata" ab "$@" 2>&1)
  code=$?
  set -e
  echo "$out"
}
verdict_of() { echo "$out" | grep -E "^  $1 +" | head -1; }  # a run's full verdict, under the table

# Every strategy example, shrunk: each must train and match the quickstart bit for bit. The bf16
# example changes the numbers a little: within tolerance, not identical.
ab examples/quickstart.toml examples/checkpoint.toml examples/offload-optimizer.toml \
  examples/stream-layers.toml examples/all-strategies.toml examples/bf16.toml --steps 6 "${small[@]}" \
  --out "$work/runs" --html "$work/report.html"
[ "$code" = 0 ] || fail "strata ab exited $code"
for row in "peak device memory" "  activations" "  optimizer" "peak host memory" "median ms/step" "tokens/s" \
  "final train loss" "final val loss" "verdict"; do
  echo "$out" | grep -q "^$row " || fail "missing row: $row"
done
verdicts=$(echo "$out" | grep '^verdict ')
[ "$(echo "$verdicts" | grep -o identical | wc -l)" = 4 ] || fail "expected four identical verdicts: $verdicts"
echo "$verdicts" | grep -q "within tolerance" || fail "expected bf16 within tolerance: $verdicts"
verdict_of checkpoint | grep -q "identical: 6 train losses and 1 val loss bitwise equal" ||
  fail "checkpoint's verdict: $(verdict_of checkpoint)"
# 6 steps: the default window is the last 2; val is evaluated at the last step only.
bf16=$(verdict_of bf16)
echo "$bf16" | grep -qE "within tolerance: train last-2 mean [-+][0-9.e+-]+, worst [0-9.e+-]+ at step [0-9]+; val at step 6 " ||
  fail "bf16's verdict lacks the last-k mean, the worst step or the val loss: $bf16"
echo "$bf16" | grep -q "tolerance 1.0e-02 (default)" || fail "bf16's verdict does not say where its tolerance came from: $bf16"
echo "$out" | grep -q "last-k:      the mean over the last 2 steps (default" || fail "no last-k line"
echo "$out" | grep -q "tolerance:   1.0e-02 (default): 1% of the loss" || fail "no tolerance line"
grep -q '<svg' "$work/report.html" || fail "no SVG in the report"
if grep -qE '(src|href)=.(https?:)?//' "$work/report.html"; then fail "the report fetches something"; fi
# Stacked bars of peak device memory per category, one bar per run, and per-step lines that show
# the live bytes at the end of each step (dashed) beside the peak within it.
grep -q "<svg class='memory-bars'" "$work/report.html" || fail "no stacked memory bars in the report"
[ "$(grep -c "<rect class='category-activations'" "$work/report.html")" = 6 ] ||
  fail "expected one activations segment per run in the memory bars"
grep -q "stroke-dasharray" "$work/report.html" || fail "no end-of-step memory line in the report"
# Within one step, predicted beside measured: two charts per home per run, from the memory
# timeline each run wrote; and the dry run's device peak is the run's, for the quickstart.
for chart in "device, predicted" "device, measured" "host, predicted" "host, measured"; do
  [ "$(grep -c ">$chart</text>" "$work/report.html")" = 6 ] || fail "expected six '$chart' timelines in the report"
done
[ -s "$work/runs/1-quickstart.timeline.json" ] || fail "the quickstart run wrote no memory timeline"
python3 - "$work/report.html" << 'EOF_PY' || fail "the quickstart's predicted and measured device peaks differ"
import re, sys
page = open(sys.argv[1]).read()
section = page[page.index("<h3>quickstart</h3>"):]
peaks = re.findall(r">peak ([0-9.]+ MiB)", section)[:2]  # device predicted, device measured
assert len(peaks) == 2 and peaks[0] == peaks[1], peaks
EOF_PY

# A rerun is bitwise identical.
ab examples/quickstart.toml examples/quickstart.toml --steps 6 "${small[@]}" --out "$work/runs2" > /dev/null
echo "$out" | grep "^verdict " | grep -q identical || fail "a rerun must be identical: $out"

# A higher learning rate is an optimizer comparison, not a divergence; --tolerance and --last-k
# are named as the sources of the tolerance and the window.
sed 's/^lr = 2e-3/lr = 4e-3/' examples/quickstart.toml > "$work/faster.toml"
sed -i "s#data/kjv.txt#$PWD/data/kjv.txt#" "$work/faster.toml"
ab examples/quickstart.toml "$work/faster.toml" --steps 6 "${small[@]}" --out "$work/runs3" \
  --tolerance 0.001 --last-k 3 > /dev/null
[ "$code" = 0 ] || fail "an optimizer comparison exited $code: $out"
faster=$(verdict_of faster)
echo "$faster" | grep -qE "optimizer comparison \(train.lr 0.002 vs 0.004\): (lower|higher) val loss than quickstart" ||
  fail "expected an optimizer comparison naming train.lr: $faster"
echo "$faster" | grep -q "train last-3 mean" || fail "--last-k 3 not used: $faster"
echo "$faster" | grep -q "tolerance 1.0e-03 (--tolerance)" || fail "the tolerance's source is not --tolerance: $faster"
echo "$out" | grep -q "(--last-k)" || fail "the window's source is not --last-k: $out"

# LoRA against full training at the same learning rate: another training (what trains differs),
# compared as such, never "diverged".
{ cat examples/quickstart.toml; printf '\n[[strategy]]\nplugin = "lora"\n'; } > "$work/lora.toml"
sed -i "s#data/kjv.txt#$PWD/data/kjv.txt#" "$work/lora.toml"
ab examples/quickstart.toml "$work/lora.toml" --steps 6 "${small[@]}" --out "$work/runs-lora" > /dev/null
[ "$code" = 0 ] || fail "LoRA against full training exited $code: $out"
lora=$(verdict_of lora)
echo "$lora" | grep -qE "training comparison \(what trains: every parameter vs adapters \(lora rank 8 alpha 16\) on qkv \(the base frozen\)\): (lower|higher) val loss than quickstart" ||
  fail "expected a training comparison naming what trains: $lora"

# Another depth is not comparable; a run that fails at run time (a device budget smaller than its
# weights) is reported with its exit code and error, and ab exits 1.
sed 's/^n_layer = 4/n_layer = 2/' examples/quickstart.toml > "$work/base.toml"
sed 's/^n_layer = 4/n_layer = 3/' examples/quickstart.toml > "$work/deeper.toml"
sed 's/^memory_limit = "256MiB"/memory_limit = 65536/; s/^n_layer = 4/n_layer = 2/' examples/quickstart.toml \
  > "$work/tight.toml"
ab "$work/base.toml" "$work/deeper.toml" "$work/tight.toml" --steps 4 "${shape[@]}" --out "$work/runs4" > /dev/null
[ "$code" = 1 ] || fail "a failed run must make ab exit 1, not $code: $out"
verdict_of deeper | grep -q "not comparable: model.n_layer 2 vs 3" || fail "expected not comparable: $out"
verdict_of tight | grep -q "failed (exit 1): strata train: .*memory limit exceeded" || fail "tight's failure: $out"
echo "$out" | grep -q "^    exit 1: strata train: .*memory limit exceeded" || fail "the failure is not reported as it happens"

# A failed reference: its failure is reported and no run gets a verdict against it.
ab "$work/tight.toml" "$work/base.toml" --steps 4 "${shape[@]}" --out "$work/runs5" > /dev/null
[ "$code" = 1 ] || fail "a failed reference must make ab exit 1, not $code: $out"
echo "$out" | grep -q "no verdicts: the reference, tight, failed (exit 1)" || fail "the reference's failure: $out"
verdict_of tight | grep -q "reference failed (exit 1): strata train: .*memory limit exceeded" ||
  fail "the reference's error line: $out"
verdict_of base | grep -q "no reference: tight failed (exit 1)" || fail "expected no reference: $out"
if echo "$out" | grep -qE "diverged|within tolerance|identical"; then fail "a verdict against a failed reference: $out"; fi

# Invalid input, found before anything runs, exits 2: fewer than two manifests, a missing data
# file, a bad --last-k.
ab examples/quickstart.toml > /dev/null
[ "$code" = 2 ] || fail "one manifest must exit 2, not $code"
ab examples/quickstart.toml examples/quickstart.toml --set "data.train=\"$work/nothing.txt\"" --out "$work/runs6" \
  > /dev/null
[ "$code" = 2 ] || fail "a missing data file must exit 2, not $code: $out"
echo "$out" | grep -q "invalid data: .*nothing.txt: no such file (\[data\] train in examples/quickstart.toml)" ||
  fail "the missing data file is not named: $out"
[ ! -e "$work/runs6" ] || fail "ab ran something despite invalid input"
ab examples/quickstart.toml examples/quickstart.toml --last-k 0 > /dev/null
[ "$code" = 2 ] || fail "--last-k 0 must exit 2, not $code"
# A comparison leaves the manifests' own outputs alone: after a run has trained with checkpoints
# and a JSONL log, ab of its manifest writes its checkpoints and telemetry under --out, and every
# file of the run is byte for byte as it was (a later --resume still finds its latest step).
own=$work/own
sed -e "s#runs/quickstart#$own#g" examples/quickstart.toml > "$work/own.toml"
own_shape=(--set model.n_layer=2 --set model.d_model=32 --set model.n_head=2 --set model.seq_len=16
  --set train.batch=4 --set train.eval_batches=2 --set train.threads=2 --set train.eval_every=0)
"$strata" train "$work/own.toml" --set train.steps=4 "${own_shape[@]}" > /dev/null 2>&1 || fail "the run to protect failed"
fingerprint() { (cd "$own" && find . -type f -exec sha256sum {} + | sort); }
before=$(fingerprint)
echo "$before" | grep -q "checkpoints/step_00000004/model.safetensors" || fail "the run saved no checkpoint: $before"
echo "$before" | grep -q "steps.jsonl" || fail "the run wrote no log: $before"
ab "$work/own.toml" examples/quickstart.toml --steps 2 "${own_shape[@]}" --out "$work/runs7" > /dev/null
[ "$code" = 0 ] || fail "ab exited $code: $out"
[ "$(fingerprint)" = "$before" ] || fail "ab changed the manifest's own checkpoints or log"
[ -f "$work/runs7/1-own/checkpoints/latest" ] || fail "ab's run saved no checkpoints under --out"
[ -f "$work/runs7/1-own/telemetry-1.jsonl" ] || fail "ab's run wrote its JSONL telemetry elsewhere"
echo "ab: table, verdicts and report ok"
